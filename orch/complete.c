/* Finishing tasks: harvesting mailbox results, releasing dependents,
 * poisoning the dependents of a failure, and failing the work of a child
 * that died. */
#include "base/alloc.h"
#include "base/err.h"
#include "base/futex.h"
#include "base/log.h"
#include "chip/registry.h"
#include "orch_int.h"
#include "trace/trace.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

const char *orch_ep_kind_name(int kind)
{
    switch (kind) {
    case ORCH_EP_CHIP:
        return "chip";
    case ORCH_EP_SUB:
        return "sub worker";
    case ORCH_EP_NODE:
        return "node";
    }
    return "child";
}

const char *orch_task_label(struct orch_sched *s, const struct orch_task *t,
                            char *buf, size_t cap)
{
    const char *name = strata_callable_name(t->callable);
    const char *kind = chip_callable_kind_name(t->callable.kind);

    if (t->kind == MBX_CONTROL)
        snprintf(buf, cap, "control op %u", t->op);
    else if (t->ep < 0)
        snprintf(buf, cap, "%s '%s' on the sub queue", kind, name ? name : "?");
    else
        snprintf(buf, cap, "%s '%s' on %s %d", kind, name ? name : "?",
                 orch_ep_kind_name(s->eps[t->ep].kind), s->eps[t->ep].id);
    return buf;
}

static void release_dependents(struct orch_sched *s, struct orch_task *t,
                               strata_err err)
{
    for (uint32_t i = 0; i < t->num_fanout; i++) {
        struct orch_task *d = s->slots[t->fanout[i].slot];

        if (err && !d->poisoned) {
            d->poisoned = true;
            d->poison_err = err;
        }
        if (--d->fanin > 0)
            continue;
        if (d->group)
            orch_make_ready(s, d);
        else if (d->poisoned)
            s->work[s->num_work++] = d->slot;
        else
            orch_make_ready(s, d);
    }
    t->num_fanout = 0;
}

uint16_t orch_trace_target(const struct orch_endpoint *ep)
{
    return !ep                        ? TRACE_TGT_SUB
           : ep->kind == ORCH_EP_NODE ? TRACE_TGT_NODE
           : ep->kind == ORCH_EP_SUB  ? TRACE_TGT_SUB
                                      : TRACE_TGT_CHIP;
}

/* The task as its orchestrator saw it: submitted, posted, completed;
 * unless its target recorded that already (mbx_trace_ran). A task the
 * target never began is drawn as not run. */
static void trace_task(struct orch_sched *s, const struct orch_task *t,
                       strata_err err)
{
    const struct chip_callable *c;
    const char *name;
    const struct orch_endpoint *ep;

    if (t->trace_by_target)
        return;
    c = t->trace_name ? NULL : chip_registry_find(t->callable.digest);
    name = t->trace_name ? t->trace_name : c ? c->name : NULL;
    /* Where it went, or was to go (-1: the sub queue). */
    ep = t->trace_post ? &s->eps[t->trace_ep]
         : t->ep >= 0  ? &s->eps[t->ep]
                       : NULL;
    /* name is a registry entry's array: copied whole. */
    trace_put(
        TRACE_K_TASK,
        (uint16_t)(orch_trace_target(ep) | (err ? TRACE_TASK_FAILED : 0) |
                   (t->trace_post && !t->not_run ? 0 : TRACE_TASK_NOT_RUN)),
        ep ? (uint16_t)ep->id : 0, t->trace_submit, trace_now(), t->run->id,
        t->seq, t->trace_post, TRACE_SLOT_KEY(t->slot, t->gen), name, true);
}

static void finish(struct orch_sched *s, struct orch_task *t, strata_err err,
                   const char *msg)
{
    if (trace_enabled() && t->kind == MBX_TASK && t->run && t->trace_submit)
        trace_task(s, t, err);
    if (err && t->kind == MBX_TASK && t->run)
        orch_deps_mark_failed(t, t->run->id);
    for (uint32_t i = 0; i < t->num_bufs; i++)
        if (__atomic_sub_fetch(&t->bufs[i]->pins, 1, __ATOMIC_RELEASE) == 0 &&
            s->mem.idle)
            s->mem.idle(s->mem.ctx, t->bufs[i]);
    t->num_bufs = 0;
    if (t->ctl) {
        struct orch_ctl *c = t->ctl;

        c->err = err;
        snprintf(c->msg, sizeof(c->msg), "%s", err && msg ? msg : "");
        c->done = true;
        t->ctl = NULL;
        if (c->on_done)
            c->on_done(c, c->on_done_arg);
    }
    orch_run_task_done(s, t, err, msg);
    release_dependents(s, t, err);
    if (t->group && ++t->group->finished == t->group->n)
        base_free(t->group);
    t->group = NULL;
    orch_slot_free(s, t);
    s->unfinished--;
    s->progress_seq++;
}

void orch_complete(struct orch_sched *s, struct orch_task *t, strata_err err,
                   const char *msg)
{
    finish(s, t, err, msg);
    /* Poisoned dependents finish without running, breadth first. */
    while (s->num_work > 0) {
        struct orch_task *d = s->slots[s->work[--s->num_work]];

        finish(s, d, d->poison_err,
               "not run: it depends on a task that failed");
    }
    if (s->waiters)
        base_futex_wake(&s->progress_seq);
}

void orch_settle(struct orch_sched *s)
{
    if (s->num_work > 0) {
        struct orch_task *t = s->slots[s->work[--s->num_work]];

        orch_complete(s, t, t->poison_err,
                      "not run: it depends on a task that failed");
    }
    orch_dispatch(s);
}

/* Completes the task of ring position k from its frame. */
static void finish_frame(struct orch_sched *s, struct orch_endpoint *ep,
                         uint32_t k)
{
    struct mbx_frame *f = &ep->mbx->ring[k % MBX_RING];
    struct orch_task *t = s->slots[ep->ring_slot[k % MBX_RING]];
    strata_err err = (strata_err)(f->result & ~MBX_RESULT_NOT_RUN);

    if (t->ctl) {
        memcpy(t->ctl->out, f->arg, sizeof(t->ctl->out));
        t->ctl->reply_len = 0;
        if (f->args_len <= sizeof(t->ctl->reply)) {
            memcpy(t->ctl->reply, f->args, f->args_len);
            t->ctl->reply_len = f->args_len;
        }
        /* Frames using the staging area are alone in the ring, so it
         * holds this frame's reply. */
        t->ctl->staged_reply_len = 0;
        if (t->ctl->staged_reply && !err &&
            f->staged_len > t->ctl->staged_reply_cap) {
            /* Said here, not left to look like an empty reply. */
            snprintf(f->msg, sizeof(f->msg),
                     "a staged reply of %llu bytes exceeds the %u expected",
                     (unsigned long long)f->staged_len,
                     t->ctl->staged_reply_cap);
            err = STRATA_EPROTO;
        } else if (t->ctl->staged_reply && !err) {
            memcpy(t->ctl->staged_reply, ep->mbx->staging, f->staged_len);
            t->ctl->staged_reply_len = (uint32_t)f->staged_len;
        }
    }
    if (f->slot != t->slot || f->gen != t->gen) {
        LOG_ERROR("%s %d returned frame (slot %u gen %u), expected "
                  "(slot %u gen %u)",
                  orch_ep_kind_name(ep->kind), ep->id, f->slot, f->gen, t->slot,
                  t->gen);
        err = STRATA_EPROTO;
    }
    t->not_run = err && (f->result & MBX_RESULT_NOT_RUN);
    t->trace_by_target = f->trace_recorded != 0;
    orch_complete(s, t, err, err ? f->msg : NULL);
}

static bool harvest_one(struct orch_sched *s, struct orch_endpoint *ep)
{
    uint32_t tail = __atomic_load_n(&ep->mbx->h.tail, __ATOMIC_ACQUIRE);
    bool did = false;

    while (ep->harvested != tail) {
        uint32_t k = ep->harvested++;

        did = true;
        if (!ep->early[k % MBX_RING])
            finish_frame(s, ep, k);
    }
    /* A remote node finishes frames in any order: a short task must not
     * wait behind a long one. Its ring slot is reused only once the tail
     * passes it. */
    if (ep->notify_fd < 0)
        return did;
    for (uint32_t k = tail; k != ep->mbx->h.head; k++) {
        struct mbx_frame *f = &ep->mbx->ring[k % MBX_RING];

        if (ep->early[k % MBX_RING] ||
            !__atomic_load_n(&f->done, __ATOMIC_SEQ_CST))
            continue;
        ep->early[k % MBX_RING] = true;
        did = true;
        finish_frame(s, ep, k);
    }
    return did;
}

bool orch_harvest(struct orch_sched *s)
{
    bool did = false;

    for (size_t i = 0; i < s->num_chips + s->num_subs; i++)
        if (!s->eps[i].dead)
            did |= harvest_one(s, &s->eps[i]);
    if (did)
        orch_dispatch(s);
    return did;
}

void orch_endpoint_reap(struct orch_endpoint *ep, bool block)
{
    int status;

    if (ep->reaped || ep->pid <= 0)
        return;
    if (waitpid(ep->pid, &status, block ? 0 : WNOHANG) == ep->pid) {
        ep->status = status;
        /* Read without the lock by worker_kill_children. */
        __atomic_store_n(&ep->reaped, true, __ATOMIC_RELEASE);
    } else if (errno == ECHILD) {
        /* No such child any more: someone else reaped it. Its pid may
         * be another process's soon, so it is never signalled again. */
        ep->reaped_elsewhere = true;
        __atomic_store_n(&ep->reaped, true, __ATOMIC_RELEASE);
    }
}

void orch_death_cause(const struct orch_endpoint *ep, char *buf, size_t cap)
{
    if (ep->reaped_elsewhere)
        snprintf(buf, cap,
                 "how is unknown: the program ignores SIGCHLD or "
                 "reaped it with its own waitpid");
    else if (ep->reaped && WIFSIGNALED(ep->status))
        snprintf(buf, cap, "killed by signal %d", WTERMSIG(ep->status));
    else if (ep->reaped)
        snprintf(buf, cap, "exited with status %d", WEXITSTATUS(ep->status));
    else
        snprintf(buf, cap, "%s", "");
}

static void describe_death(const struct orch_endpoint *ep, char *buf,
                           size_t cap)
{
    const char *who = orch_ep_kind_name(ep->kind);
    const char *lost = __atomic_load_n(&ep->lost, __ATOMIC_ACQUIRE);
    char cause[160];

    orch_death_cause(ep, cause, sizeof(cause));
    if (lost)
        snprintf(buf, cap, "%s %d lost: %s", who, ep->id, lost);
    else if (ep->reaped_elsewhere)
        snprintf(buf, cap, "%s %d (pid %d) died (%s)", who, ep->id,
                 (int)ep->pid, cause);
    else if (cause[0])
        snprintf(buf, cap, "%s %d (pid %d) died: %s", who, ep->id, (int)ep->pid,
                 cause);
    else
        snprintf(buf, cap, "%s %d (pid %d) died", who, ep->id, (int)ep->pid);
}

void orch_endpoint_died(struct orch_sched *s, struct orch_endpoint *ep)
{
    char why[STRATA_ERRMSG_MAX];
    struct orch_task *t;

    if (ep->dead)
        return;
    harvest_one(s, ep); /* results it published before dying count */
    orch_endpoint_reap(ep, false);
    ep->dead = true;
    describe_death(ep, why, sizeof(why));
    LOG_WARN("%s", why);
    while (ep->harvested != ep->mbx->h.head) {
        uint32_t k = ep->harvested++;

        if (ep->early[k % MBX_RING])
            continue; /* finished out of order before the loss */
        t = s->slots[ep->ring_slot[k % MBX_RING]];
        orch_complete(s, t, STRATA_EPEER, why);
    }
    while ((t = orch_queue_pop(s, &ep->fifo_head, &ep->fifo_tail))) {
        ep->ordered_queued -= t->ctl && t->ctl->ordered;
        orch_complete(s, t, STRATA_EPEER, why);
    }
    /* After its own tasks failed, so that a run reports the death itself
     * first, not a survivor that the listeners wake (domains). */
    for (uint32_t i = 0; i < s->num_on_death; i++)
        s->on_death[i].fn(s, (int)(ep - s->eps), why, s->on_death[i].arg);
    orch_marks_died_locked(s, (int)(ep - s->eps), why);
    orch_dispatch(s);
}

bool orch_child_dead_locked(struct orch_sched *s, int ep, char *why, size_t cap)
{
    if (!s->eps[ep].dead)
        return false;
    describe_death(&s->eps[ep], why, cap);
    return true;
}

strata_err orch_chip_check(struct orch_sched *s, int ep)
{
    struct orch_endpoint *e = &s->eps[ep];
    struct pollfd p = {.fd = e->pidfd, .events = POLLIN};
    char why[STRATA_ERRMSG_MAX];
    bool dead;

    pthread_mutex_lock(&s->mu);
    /* A death the scheduler thread has not recorded yet counts too; it
     * stays the one to record it (it reads ep->dead without the lock). */
    dead = e->dead || (e->pidfd >= 0 && poll(&p, 1, 0) > 0 &&
                       (p.revents & (POLLIN | POLLHUP)));
    if (dead)
        describe_death(e, why, sizeof(why));
    pthread_mutex_unlock(&s->mu);
    return dead ? base_fail(STRATA_EPEER, "%s", why) : STRATA_OK;
}
