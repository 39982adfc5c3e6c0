/* Control frames with replies, fence hooks and adopted objects. */
#include "base/alloc.h"
#include "base/clock.h"
#include "base/err.h"
#include "orch_int.h"

#include <string.h>

struct orch_sched *orch_sched_of(strata_orch *o)
{
    return o->sched;
}

strata_run *orch_run_of(strata_orch *o)
{
    return o->run;
}

strata_err orch_usable(strata_orch *o, const char *fn)
{
    if (!o)
        return base_fail(STRATA_EINVAL, "%s: orch is NULL", fn);
    if (__atomic_load_n(&o->run->closed, __ATOMIC_ACQUIRE))
        return base_fail(STRATA_ESTATE,
                         "%s: orch used after its function "
                         "returned",
                         fn);
    return STRATA_OK;
}

size_t orch_num_chips(const struct orch_sched *s)
{
    return s->num_chips;
}

int orch_chip_index(const struct orch_sched *s, int chip_id)
{
    for (size_t i = 0; i < s->num_chips; i++)
        if (s->eps[i].id == chip_id)
            return (int)i;
    return -1;
}

int orch_chip_id(const struct orch_sched *s, int index)
{
    return s->eps[index].id;
}

const struct chip_backend_ops *orch_backend_ops(const struct orch_sched *s)
{
    return s->ops;
}

uint64_t orch_run_id(const strata_run *r)
{
    return r ? r->id : 0;
}

void orch_run_fail_locked(struct orch_sched *s, uint64_t run_id, strata_err err,
                          const char *msg)
{
    for (struct strata_run *r = s->live_runs; r; r = r->next_live)
        if (r->id == run_id && !r->done)
            orch_run_record_error(r, err, "%s", msg);
}

void orch_lock(struct orch_sched *s)
{
    pthread_mutex_lock(&s->mu);
}

void orch_unlock(struct orch_sched *s)
{
    pthread_mutex_unlock(&s->mu);
}

static void init_ctl(struct orch_task *t, struct orch_ctl *c, int ep)
{
    t->kind = MBX_CONTROL;
    t->op = c->op;
    t->op_arg = c->arg[0];
    t->ctl = c;
    t->ep = ep;
    memset(&t->callable, 0, sizeof(t->callable));
    c->done = false;
    c->err = STRATA_OK;
    c->msg[0] = '\0';
}

static void account(struct orch_sched *s, strata_run *r, struct orch_task *t)
{
    t->run = r;
    if (r)
        r->active++;
    s->unfinished++;
    if (t->fanin == 0 && t->poisoned)
        s->work[s->num_work++] = t->slot;
    else if (t->fanin == 0)
        orch_make_ready(s, t);
}

strata_err orch_control_post_locked(struct orch_sched *s, strata_run *r, int ep,
                                    struct orch_ctl *c)
{
    struct orch_task *t;
    strata_err err;

    if (c->staged_len > MBX_STAGING_SIZE)
        return base_fail(STRATA_EINVAL,
                         "control payload of %u bytes exceeds the %u-byte "
                         "staging area",
                         c->staged_len, MBX_STAGING_SIZE);
    err = orch_slot_alloc(s, &t);
    if (err)
        return err;
    init_ctl(t, c, ep);
    account(s, r, t);
    return STRATA_OK;
}

bool orch_control_withdraw_locked(struct orch_sched *s, int ep,
                                  struct orch_ctl *c)
{
    struct orch_endpoint *e = &s->eps[ep];

    if (e->dead || e->notify_fd >= 0)
        return false;
    /* Still queued (the ring was full): it never reaches the chip. */
    for (uint32_t i = e->fifo_head; i != ORCH_NONE; i = s->slots[i]->next) {
        struct orch_task *t = s->slots[i];

        if (t->ctl != c)
            continue;
        orch_queue_remove(s, &e->fifo_head, &e->fifo_tail, t);
        e->ordered_queued -= c->ordered;
        c->withdrawn = true;
        orch_complete(s, t, STRATA_OK, NULL);
        return true;
    }
    for (uint32_t k = e->harvested; k != e->mbx->h.head; k++) {
        const struct orch_task *t = s->slots[e->ring_slot[k % MBX_RING]];

        if (t->ctl != c)
            continue;
        if (!mbx_frame_withdraw(&e->mbx->ring[k % MBX_RING]))
            return false;
        c->withdrawn = true;
        /* Let the chip pass withdrawn frames before the ring fills with
         * them: quiet frames stop being quiet at half the ring. */
        if (mbx_in_flight(e->mbx) >= MBX_RING / 2 - 1) {
            mbx_ring(e->mbx);
            e->quiet = false;
        }
        return true;
    }
    return false;
}

strata_err orch_control_post(struct orch_sched *s, strata_orch *o, int ep,
                             struct orch_ctl *c, const strata_args *a)
{
    struct dep_plan *plan = NULL;
    struct orch_task *t;
    strata_err err;

    /* A control frame's host range is a tensor like a task's: the same
     * buffers may be named (never another worker's). */
    err = orch_check_args(s, a, ep);
    if (err)
        return err;
    orch_kicks_begin(s);
    pthread_mutex_lock(&s->mu);
    if (!a) {
        err = orch_control_post_locked(s, o ? o->run : NULL, ep, c);
        goto out;
    }
    err = orch_slot_alloc(s, &t);
    if (err)
        goto out;
    t->blob_len = (uint32_t)wire_args_encoded_size(a);
    err = orch_reserve(&t->blob, &t->blob_cap, t->blob_len, 1);
    if (!err)
        err = orch_deps_plan(s, a, t, &plan);
    if (err) {
        orch_slot_free(s, t);
        goto out;
    }
    wire_args_encode(a, t->blob, t->blob_cap);
    init_ctl(t, c, ep);
    orch_deps_commit(s, plan, a, t);
    orch_deps_plan_free(s, plan);
    account(s, o ? o->run : NULL, t);
out:
    if (!err)
        orch_settle(s);
    pthread_mutex_unlock(&s->mu);
    orch_kicks_end(s);
    return err;
}

struct ctl_set {
    struct orch_ctl *const *cs;
    size_t n;
};

static bool all_done(void *arg)
{
    const struct ctl_set *set = arg;

    for (size_t i = 0; i < set->n; i++)
        if (!set->cs[i]->done)
            return false;
    return true;
}

strata_err orch_control_wait(struct orch_sched *s, struct orch_ctl *const *cs,
                             size_t n)
{
    struct ctl_set set = {cs, n};
    strata_err err;

    /* Frames posted quietly that this waits for are needed now. */
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < n; i++) {
        if (cs[i]->quiet && !cs[i]->done) {
            orch_ring_quiet_locked(s);
            break;
        }
    }
    pthread_mutex_unlock(&s->mu);
    err = orch_wait(s, all_done, &set, BASE_NEVER);

    if (err)
        return err;
    for (size_t i = 0; i < n; i++)
        if (cs[i]->err)
            return base_fail(cs[i]->err, "%s", cs[i]->msg);
    return STRATA_OK;
}

strata_err orch_control_staged_copy(struct orch_sched *s, strata_orch *o,
                                    int ep, const uint64_t arg[4], void *data,
                                    size_t n, bool write)
{
    struct orch_ctl c;
    struct orch_ctl *cp = &c;
    strata_err err;

    memset(&c, 0, sizeof(c));
    c.op = write ? MBX_CTL_WINDOW_WRITE : MBX_CTL_WINDOW_READ;
    c.ordered = true;
    memcpy(c.arg, arg, sizeof(c.arg));
    if (write) {
        c.staged = data;
        c.staged_len = (uint32_t)n;
    } else {
        c.staged_reply = data;
        c.staged_reply_cap = (uint32_t)n;
    }
    err = orch_control_post(s, o, ep, &c, NULL);
    return err ? err : orch_control_wait(s, &cp, 1);
}

strata_err orch_comm_init_chips(struct orch_sched *s, strata_orch *o,
                                const int *eps, size_t n)
{
    struct orch_ctl *ctls = base_calloc(n ? n : 1, sizeof(*ctls));
    struct orch_ctl **ptrs = base_calloc(n ? n : 1, sizeof(*ptrs));
    strata_err err = STRATA_OK;
    size_t posted = 0;

    if (!ctls || !ptrs) {
        err = base_fail(STRATA_ENOMEM, "out of memory for COMM_INIT");
        goto out;
    }
    for (size_t i = 0; i < n && !err; i++) {
        bool ready;

        pthread_mutex_lock(&s->mu);
        ready = s->eps[eps[i]].comm_ready;
        pthread_mutex_unlock(&s->mu);
        if (ready)
            continue;
        ctls[i].op = MBX_CTL_COMM_INIT;
        ctls[i].arg[0] = (uint64_t)eps[i];
        ctls[i].arg[1] = s->num_chips;
        err = orch_control_post(s, o, eps[i], &ctls[i], NULL);
        if (!err)
            ptrs[posted++] = &ctls[i];
    }
    {
        strata_err werr = orch_control_wait(s, ptrs, posted);

        err = err ? err : werr;
    }
    /* A chip that answered keeps its communicator whatever the others did:
     * one dead chip never blocks the rest. */
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < n; i++)
        if (ctls[i].op && ctls[i].done && !ctls[i].err)
            s->eps[eps[i]].comm_ready = true;
    pthread_mutex_unlock(&s->mu);
out:
    base_free(ctls);
    base_free(ptrs);
    return err;
}

strata_err orch_run_on_fence(strata_orch *o, orch_fence_fn fn, void *arg)
{
    struct strata_run *r = o->run;
    strata_err err;

    pthread_mutex_lock(&o->sched->mu);
    err = orch_reserve((void **)&r->hooks, &r->cap_hooks, r->num_hooks + 1,
                       sizeof(*r->hooks));
    if (!err) {
        r->hooks[r->num_hooks].fn = fn;
        r->hooks[r->num_hooks].arg = arg;
        r->num_hooks++;
    }
    pthread_mutex_unlock(&o->sched->mu);
    return err;
}

strata_err orch_sched_adopt(struct orch_sched *s, void *obj,
                            void (*free_fn)(void *))
{
    strata_err err;

    pthread_mutex_lock(&s->mu);
    err = orch_reserve((void **)&s->adopted, &s->cap_adopted,
                       s->num_adopted + 1, sizeof(*s->adopted));
    if (!err) {
        s->adopted[s->num_adopted].obj = obj;
        s->adopted[s->num_adopted].free_fn = free_fn;
        s->num_adopted++;
    }
    pthread_mutex_unlock(&s->mu);
    return err;
}

strata_err orch_on_death(struct orch_sched *s, orch_death_fn fn, void *arg)
{
    strata_err err = STRATA_OK;
    uint32_t i;

    pthread_mutex_lock(&s->mu);
    for (i = 0; i < s->num_on_death; i++)
        if (s->on_death[i].fn == fn && s->on_death[i].arg == arg)
            break;
    if (i == s->num_on_death && i == ORCH_DEATH_MAX) {
        err = base_fail(STRATA_ENOMEM, "more than %d death listeners",
                        ORCH_DEATH_MAX);
    } else if (i == s->num_on_death) {
        s->on_death[i].fn = fn;
        s->on_death[i].arg = arg;
        s->num_on_death++;
    }
    pthread_mutex_unlock(&s->mu);
    return err;
}

bool orch_comm_ready(const struct orch_sched *s, int ep)
{
    return s->eps[ep].comm_ready;
}
