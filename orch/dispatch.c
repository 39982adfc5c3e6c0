/* Moving ready tasks into mailboxes: per-chip FIFOs, the shared sub queue
 * and groups, which reserve all their targets and launch together. */
#include "base/err.h"
#include "base/fault.h"
#include "base/log.h"
#include "orch_int.h"
#include "trace/trace.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static uint32_t in_flight(const struct orch_endpoint *ep)
{
    return ep->mbx->h.head - ep->harvested;
}

static void fail_dead(struct orch_sched *s, struct orch_endpoint *ep,
                      struct orch_task *t)
{
    const char *lost = __atomic_load_n(&ep->lost, __ATOMIC_ACQUIRE);
    char why[STRATA_ERRMSG_MAX], cause[160];

    /* As the death's own report says it: a task that meets the dead
     * endpoint only later must not lose the cause. */
    orch_death_cause(ep, cause, sizeof(cause));
    if (lost)
        snprintf(why, sizeof(why), "%s %d lost: %s",
                 orch_ep_kind_name(ep->kind), ep->id, lost);
    else if (cause[0])
        snprintf(why, sizeof(why), "%s %d is dead (pid %d: %s)",
                 orch_ep_kind_name(ep->kind), ep->id, (int)ep->pid, cause);
    else
        snprintf(why, sizeof(why), "%s %d is dead", orch_ep_kind_name(ep->kind),
                 ep->id);
    orch_complete(s, t, STRATA_EPEER, why);
}

static void post(struct orch_sched *s, struct orch_endpoint *ep,
                 struct orch_task *t)
{
    struct mbx_frame *f;

    if (ep->dead) {
        fail_dead(s, ep, t);
        return;
    }
    if (BASE_FAULT("sched.dispatch")) {
        orch_complete(s, t, STRATA_EIO, "fault point sched.dispatch");
        return;
    }
    f = mbx_next_frame(ep->mbx);
    f->run_id = t->run ? t->run->id : 0;
    f->slot = t->slot;
    f->gen = t->gen;
    f->kind = t->kind;
    f->op = t->op;
    f->arg[0] = t->op_arg;
    f->arg[1] = t->op_arg2;
    f->staged_len = 0;
    if (t->ctl) {
        memcpy(f->arg, t->ctl->arg, sizeof(f->arg));
        /* Only posted on an empty ring: the staging area is single. */
        if (t->ctl->staged_len)
            memcpy(ep->mbx->staging, t->ctl->staged, t->ctl->staged_len);
        f->staged_len = t->ctl->staged_len;
    }
    memcpy(f->digest, t->callable.digest, sizeof(f->digest));
    if (t->blob_len)
        memcpy(f->args, t->blob, t->blob_len);
    f->args_len = t->blob_len;
    f->result = 0;
    f->trace_recorded = 0;
    f->msg[0] = '\0';
    __atomic_store_n(&f->done, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&f->claim, MBX_CLAIM_POSTED, __ATOMIC_RELAXED);
    orch_unposted_drop(s, t);
    ep->early[ep->mbx->h.head % MBX_RING] = false;
    ep->ring_slot[ep->mbx->h.head % MBX_RING] = t->slot;
    t->state = TASK_RUNNING;
    if (trace_enabled()) {
        t->trace_post = s->trace_at ? s->trace_at : trace_now();
        t->trace_ep = (int)(ep - s->eps);
        /* For the child to record the task as this orchestrator saw it. */
        f->trace.submit = t->trace_submit;
        f->trace.post = t->trace_post;
        f->trace.seq = t->seq;
        f->trace.cat = orch_trace_target(ep);
        f->trace.lane = (uint16_t)ep->id;
    }
    if (t->ctl && t->ctl->quiet && in_flight(ep) < MBX_RING / 2 &&
        ep->notify_fd < 0) {
        mbx_post_quiet(ep->mbx);
        ep->quiet = true;
    } else {
        mbx_post(ep->mbx);
        ep->quiet = false;
    }
    if (ep->notify_fd >= 0 && !orch_kick_later(s, ep)) {
        uint64_t one = 1;

        /* A remote node's connection thread sends what was posted. */
        if (write(ep->notify_fd, &one, sizeof(one)) < 0)
            LOG_WARN("cannot notify %s %d", orch_ep_kind_name(ep->kind),
                     ep->id);
    }
}

/* A group member's dependencies are settled: once all are, the group is
 * either failed as a whole or queued for launch. */
static void group_resolve(struct orch_sched *s, struct orch_task *t)
{
    struct orch_group *g = t->group;

    if (t->poisoned && !g->poisoned) {
        g->poisoned = true;
        g->poison_err = t->poison_err;
    }
    if (++g->resolved < g->n)
        return;
    if (g->poisoned) {
        for (uint32_t i = 0; i < g->n; i++) {
            struct orch_task *m = s->slots[g->members[i].slot];

            m->poisoned = true;
            m->poison_err = g->poison_err;
            s->work[s->num_work++] = m->slot;
        }
        return;
    }
    g->next = NULL;
    if (s->groups_tail)
        s->groups_tail->next = g;
    else
        s->groups_head = g;
    s->groups_tail = g;
}

/* A task that became ready after an ordered frame (a window copy)
 * submitted after it was queued: it goes ahead of that frame, which waits
 * for it (dispatch_directed). */
static void push_before_later_copies(struct orch_sched *s,
                                     struct orch_endpoint *ep,
                                     struct orch_task *t)
{
    uint32_t prev = ORCH_NONE, i = ep->fifo_head;

    while (i != ORCH_NONE) {
        const struct orch_task *q = s->slots[i];

        if (q->ctl && q->ctl->ordered && q->seq > t->seq)
            break;
        prev = i;
        i = q->next;
    }
    t->next = i;
    if (prev == ORCH_NONE)
        ep->fifo_head = t->slot;
    else
        s->slots[prev]->next = t->slot;
    if (i == ORCH_NONE)
        ep->fifo_tail = t->slot;
}

void orch_make_ready(struct orch_sched *s, struct orch_task *t)
{
    if (t->group) {
        group_resolve(s, t);
        return;
    }
    t->state = TASK_READY;
    if (t->ep < 0) {
        orch_queue_push(s, &s->sub_head, &s->sub_tail, t);
    } else {
        struct orch_endpoint *ep = &s->eps[t->ep];

        if (t->ctl && t->ctl->ordered)
            ep->ordered_queued++;
        if (ep->ordered_queued && !t->ctl)
            push_before_later_copies(s, ep, t);
        else
            orch_queue_push(s, &ep->fifo_head, &ep->fifo_tail, t);
    }
}

/* A group takes its targets once nothing else holds them and nothing
 * submitted before it waits in their queues: frames posted without
 * waiting (a domain's ADOPT) must reach a chip before the group's tasks
 * do. Work submitted after the group does not hold it back. */
static bool try_reserve(struct orch_sched *s, struct orch_group *g)
{
    uint64_t seq = s->slots[g->members[0].slot]->seq;

    for (uint32_t i = 0; i < g->n; i++) {
        const struct orch_endpoint *ep =
            &s->eps[s->slots[g->members[i].slot]->ep];

        if (ep->reserved || (!ep->dead && ep->fifo_head != ORCH_NONE &&
                             s->slots[ep->fifo_head]->seq < seq))
            return false;
    }
    for (uint32_t i = 0; i < g->n; i++)
        s->eps[s->slots[g->members[i].slot]->ep].reserved = g;
    g->reserved = true;
    return true;
}

/* True while a task (not a control frame) is in ep's ring. */
static bool runs_task(const struct orch_sched *s,
                      const struct orch_endpoint *ep)
{
    for (uint32_t k = ep->harvested; k != ep->mbx->h.head; k++) {
        const struct orch_task *t = s->slots[ep->ring_slot[k % MBX_RING]];

        if (!ep->early[k % MBX_RING] && t->kind == MBX_TASK)
            return true;
    }
    return false;
}

/* Launches g once no target runs a task (members may wait on each other,
 * so none may sit behind a task of unknown length); control frames ahead
 * of them are short and run first. Returns true when g left the queue. */
static bool try_launch(struct orch_sched *s, struct orch_group *g)
{
    bool dead = false;

    for (uint32_t i = 0; i < g->n; i++) {
        struct orch_endpoint *ep = &s->eps[s->slots[g->members[i].slot]->ep];

        dead |= ep->dead;
        if (!ep->dead && (in_flight(ep) >= MBX_RING || runs_task(s, ep))) {
            orch_ring_quiet_locked(s);
            return false;
        }
    }
    for (uint32_t i = 0; i < g->n; i++)
        s->eps[s->slots[g->members[i].slot]->ep].reserved = NULL;
    /* Members wait on each other: never start some without the rest. The
     * last member to complete frees g: read nothing of g after that. */
    for (uint32_t i = 0, n = g->n; i < n; i++) {
        struct orch_task *m = s->slots[g->members[i].slot];

        if (dead)
            orch_complete(s, m, STRATA_EPEER,
                          s->directed_kind == STRATA_CALLABLE_KERNEL
                              ? "a member of its group lives on a dead chip"
                              : "a member of its group lives on a lost node");
        else
            post(s, &s->eps[m->ep], m);
    }
    return true;
}

static void dispatch_groups(struct orch_sched *s)
{
    struct orch_group *prev = NULL;
    struct orch_group *g = s->groups_head;

    while (g) {
        struct orch_group *next = g->next;

        if ((g->reserved || try_reserve(s, g)) && try_launch(s, g)) {
            if (prev)
                prev->next = next;
            else
                s->groups_head = next;
            if (s->groups_tail == g)
                s->groups_tail = prev;
        } else {
            prev = g;
        }
        g = next;
    }
}

/* Each endpoint's own FIFO: a chip's tasks, or control frames for a sub. */
static void dispatch_directed(struct orch_sched *s)
{
    for (size_t i = 0; i < s->num_chips + s->num_subs; i++) {
        struct orch_endpoint *ep = &s->eps[i];

        while (ep->fifo_head != ORCH_NONE && !ep->reserved &&
               (ep->dead || in_flight(ep) < MBX_RING)) {
            const struct orch_task *head = s->slots[ep->fifo_head];

            if (!ep->dead && head->ctl &&
                (head->ctl->staged_len || head->ctl->staged_reply) &&
                in_flight(ep) > 0)
                break;
            /* A copy waits for every task submitted to ep before it to
             * be posted ahead of it (they run first: FIFO). */
            if (!ep->dead && head->ctl && head->ctl->ordered &&
                ep->unposted_head != ORCH_NONE &&
                s->slots[ep->unposted_head]->seq < head->seq)
                break;
            ep->ordered_queued -= head->ctl && head->ctl->ordered;
            post(s, ep, orch_queue_pop(s, &ep->fifo_head, &ep->fifo_tail));
        }
    }
}

static struct orch_endpoint *pick_sub(struct orch_sched *s, bool *any_live)
{
    struct orch_endpoint *best = NULL;

    *any_live = false;
    for (size_t i = s->num_chips; i < s->num_chips + s->num_subs; i++) {
        struct orch_endpoint *ep = &s->eps[i];

        if (ep->dead)
            continue;
        *any_live = true;
        if (in_flight(ep) < ORCH_SUB_DEPTH &&
            (!best || in_flight(ep) < in_flight(best)))
            best = ep;
    }
    return best;
}

static void dispatch_subs(struct orch_sched *s)
{
    while (s->sub_head != ORCH_NONE) {
        bool any_live;
        struct orch_endpoint *ep = pick_sub(s, &any_live);
        struct orch_task *t;

        if (!ep && any_live)
            return;
        t = orch_queue_pop(s, &s->sub_head, &s->sub_tail);
        if (!ep)
            orch_complete(s, t, STRATA_EPEER, "no sub worker is alive");
        else
            post(s, ep, t);
    }
}

void orch_ring_quiet_locked(struct orch_sched *s)
{
    for (size_t i = 0; i < s->num_chips + s->num_subs; i++) {
        if (s->eps[i].quiet) {
            s->eps[i].quiet = false;
            mbx_ring(s->eps[i].mbx);
        }
    }
}

void orch_dispatch(struct orch_sched *s)
{
    /* Completing a task inside these loops may make others ready; repeat
     * until a pass changes nothing. */
    uint32_t seq;

    do {
        seq = s->progress_seq;
        dispatch_groups(s);
        dispatch_directed(s);
        dispatch_subs(s);
    } while (seq != s->progress_seq);
}
