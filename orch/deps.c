/* Dependency inference from tensor tags, by buffer identity and byte-range
 * overlap. Each buffer keeps a list of accesses by unfinished tasks; a new
 * reader depends on overlapping earlier writers, a new writer on every
 * overlapping earlier access. Records of finished tasks are pruned when a
 * scan meets them, never on another task's behalf. A new writer also
 * retires the records it covers whose tasks it depends on: any later
 * access that would conflict with one of them conflicts with the writer,
 * so it still runs after them, through the writer. Without that a chain
 * of n writes to one buffer made n(n-1)/2 edges, and each submission
 * scanned every unfinished access.
 *
 * Planning allocates everything a submission needs and mutates nothing
 * observable; committing cannot fail. Reservations made by plans that are
 * not yet committed are counted (pending), so several plans (a group) can
 * be prepared before any is committed. */
#include "base/alloc.h"
#include "base/err.h"
#include "orch_int.h"
#include "trace/trace.h"

#include <string.h>

struct access {
    uint64_t begin;
    uint64_t end;
    struct edge task;
    bool write;
    uint64_t failed_run; /* the writer failed in this run (0: it did not) */
};

struct access_list {
    struct access *v;
    uint32_t n;
    uint32_t cap;
    uint32_t pending;
};

struct buf_need {
    strata_buffer *buf;
    uint32_t records;
};

struct dep_plan {
    struct edge *preds;
    uint32_t num_preds;
    uint32_t cap_preds;
    struct buf_need *bufs;
    uint32_t num_bufs;
    uint32_t cap_bufs;
    bool counted;  /* preds' pending_fanout includes this plan */
    bool poisoned; /* reads bytes a failed task of a live run wrote */
};

static bool is_write(uint8_t tag)
{
    return tag == STRATA_OUT || tag == STRATA_INOUT ||
           tag == STRATA_OUT_EXISTING;
}

static bool overlap(uint64_t b0, uint64_t e0, uint64_t b1, uint64_t e1)
{
    return b0 < e1 && b1 < e0;
}

static strata_err check_self_overlap(const strata_args *a)
{
    for (uint32_t i = 0; i < a->num_tensors; i++) {
        const struct wire_tensor *x = &a->tensors[i];

        if (!is_write(x->tag))
            continue;
        for (uint32_t j = i + 1; j < a->num_tensors; j++) {
            const struct wire_tensor *y = &a->tensors[j];

            if (is_write(y->tag) && y->buffer_id == x->buffer_id &&
                overlap(x->offset, x->offset + x->nbytes, y->offset,
                        y->offset + y->nbytes))
                return base_fail(STRATA_EINVAL,
                                 "tensors %u and %u of one task write "
                                 "overlapping bytes of buffer %llu",
                                 i, j, (unsigned long long)x->buffer_id);
        }
    }
    return STRATA_OK;
}

static struct access_list *list_of(strata_buffer *b)
{
    if (!b->access)
        b->access = base_calloc(1, sizeof(struct access_list));
    return b->access;
}

static strata_err add_pred(struct dep_plan *p, struct orch_task *pred)
{
    struct edge e = {pred->slot, pred->gen};
    strata_err err;

    for (uint32_t i = 0; i < p->num_preds; i++)
        if (p->preds[i].slot == e.slot && p->preds[i].gen == e.gen)
            return STRATA_OK;
    err = orch_reserve((void **)&p->preds, &p->cap_preds, p->num_preds + 1,
                       sizeof(*p->preds));
    if (err)
        return err;
    /* Room for the edge in the predecessor, counting other plans. */
    err = orch_reserve((void **)&pred->fanout, &pred->cap_fanout,
                       pred->num_fanout + pred->pending_fanout + 1,
                       sizeof(struct edge));
    if (err)
        return err;
    p->preds[p->num_preds++] = e;
    return STRATA_OK;
}

/* Drops records of finished tasks, then collects predecessors of an access
 * [begin, end) that writes or not. */
static bool run_live(const struct orch_sched *s, uint64_t id)
{
    for (const struct strata_run *r = s->live_runs; r; r = r->next_live)
        if (r->id == id)
            return !r->done;
    return false;
}

static strata_err scan(struct orch_sched *s, struct access_list *l,
                       struct dep_plan *p, uint64_t begin, uint64_t end,
                       bool write, bool read)
{
    strata_err err;

    for (uint32_t i = 0; i < l->n;) {
        struct orch_task *t = orch_slot_live(s, l->v[i].task);

        if (!t && l->v[i].failed_run && run_live(s, l->v[i].failed_run)) {
            /* Bytes a failed task should have written: a later reader in
             * the same run is poisoned too (until the run's fence). */
            if (read && overlap(begin, end, l->v[i].begin, l->v[i].end))
                p->poisoned = true;
            i++;
            continue;
        }
        if (!t) {
            l->v[i] = l->v[--l->n];
            continue;
        }
        if ((write || l->v[i].write) &&
            overlap(begin, end, l->v[i].begin, l->v[i].end)) {
            err = add_pred(p, t);
            if (err)
                return err;
        }
        i++;
    }
    return STRATA_OK;
}

static strata_err need_buffer(struct dep_plan *p, strata_buffer *b,
                              uint32_t records)
{
    struct access_list *l = list_of(b);
    strata_err err;
    uint32_t i;

    if (!l)
        return base_fail(STRATA_ENOMEM, "scheduler: out of memory");
    for (i = 0; i < p->num_bufs && p->bufs[i].buf != b; i++)
        ;
    if (i == p->num_bufs) {
        err = orch_reserve((void **)&p->bufs, &p->cap_bufs, i + 1,
                           sizeof(*p->bufs));
        if (err)
            return err;
        p->bufs[i].buf = b;
        p->bufs[i].records = 0;
        p->num_bufs++;
    }
    if (!records)
        return STRATA_OK;
    err = orch_reserve((void **)&l->v, &l->cap, l->n + l->pending + records,
                       sizeof(struct access));
    if (err)
        return err;
    l->pending += records;
    p->bufs[i].records += records;
    return STRATA_OK;
}

void orch_deps_plan_free(struct orch_sched *s, struct dep_plan *p)
{
    if (!p)
        return;
    for (uint32_t i = 0; p->counted && i < p->num_preds; i++)
        s->slots[p->preds[i].slot]->pending_fanout--;
    for (uint32_t i = 0; i < p->num_bufs; i++) {
        struct access_list *l = p->bufs[i].buf->access;

        if (l)
            l->pending -= p->bufs[i].records;
    }
    base_free(p->preds);
    base_free(p->bufs);
    base_free(p);
}

static strata_err plan_tensor(struct orch_sched *s, struct dep_plan *p,
                              const strata_args *a, uint32_t i)
{
    const struct wire_tensor *x = &a->tensors[i];
    bool tracked = x->tag != STRATA_NO_DEP;
    strata_err err;

    err = need_buffer(p, a->buffers[i], tracked ? 1 : 0);
    if (err || !tracked)
        return err;
    return scan(s, a->buffers[i]->access, p, x->offset, x->offset + x->nbytes,
                is_write(x->tag),
                x->tag == STRATA_IN || x->tag == STRATA_INOUT);
}

strata_err orch_deps_plan(struct orch_sched *s, const strata_args *a,
                          struct orch_task *t, struct dep_plan **out)
{
    struct dep_plan *p;
    strata_err err;

    err = check_self_overlap(a);
    if (err)
        return err;
    p = base_calloc(1, sizeof(*p));
    if (!p)
        return base_fail(STRATA_ENOMEM, "scheduler: out of memory");
    for (uint32_t i = 0; i < a->num_tensors; i++) {
        err = plan_tensor(s, p, a, i);
        if (err)
            goto fail;
    }
    err = orch_reserve((void **)&t->bufs, &t->cap_bufs, p->num_bufs,
                       sizeof(*t->bufs));
    if (err)
        goto fail;
    /* Count this plan's claim on each predecessor's fanout room. */
    for (uint32_t i = 0; i < p->num_preds; i++)
        s->slots[p->preds[i].slot]->pending_fanout++;
    p->counted = true;
    *out = p;
    return STRATA_OK;
fail:
    orch_deps_plan_free(s, p);
    return err;
}

/* A new writer of [begin, end) retires the records inside it: a failed
 * write's (those bytes are good again), a finished task's, and those of
 * its predecessors (tasks marked with mark). Others stay: a task it
 * does not depend on (a member of its own group) must still be waited
 * for by later accesses. */
static void retire_under(struct orch_sched *s, struct access_list *l,
                         uint64_t begin, uint64_t end, uint64_t mark)
{
    for (uint32_t i = 0; i < l->n;) {
        const struct access *a = &l->v[i];
        struct orch_task *t;
        bool retire = false;

        if (a->begin >= begin && a->end <= end) {
            t = orch_slot_live(s, a->task);
            retire = a->failed_run || !t || t->pred_mark == mark;
        }
        if (retire)
            l->v[i] = l->v[--l->n];
        else
            i++;
    }
}

void orch_deps_mark_failed(struct orch_task *t, uint64_t run_id)
{
    for (uint32_t b = 0; b < t->num_bufs; b++) {
        struct access_list *l = t->bufs[b]->access;

        for (uint32_t i = 0; l && i < l->n; i++)
            if (l->v[i].write && l->v[i].task.slot == t->slot &&
                l->v[i].task.gen == t->gen)
                l->v[i].failed_run = run_id;
    }
}

void orch_deps_commit(struct orch_sched *s, struct dep_plan *p,
                      const strata_args *a, struct orch_task *t)
{
    struct edge me = {t->slot, t->gen};
    uint64_t mark = ++s->dep_mark;

    for (uint32_t i = 0; i < p->num_preds; i++) {
        struct orch_task *pred = s->slots[p->preds[i].slot];

        pred->pred_mark = mark;
        pred->fanout[pred->num_fanout++] = me;
        if (trace_enabled())
            trace_record(TRACE_K_EDGE, 0, 0, trace_now(), 0,
                         TRACE_SLOT_KEY(pred->slot, pred->gen),
                         TRACE_SLOT_KEY(t->slot, t->gen), 0, 0, NULL);
        pred->pending_fanout--;
        t->fanin++;
    }
    p->num_preds = 0;
    if (p->poisoned) {
        t->poisoned = true;
        t->poison_err = STRATA_ETASK;
    }
    for (uint32_t i = 0; i < a->num_tensors; i++) {
        const struct wire_tensor *x = &a->tensors[i];
        struct access_list *l = a->buffers[i]->access;

        if (x->tag == STRATA_NO_DEP)
            continue;
        if (is_write(x->tag))
            retire_under(s, l, x->offset, x->offset + x->nbytes, mark);
        l->v[l->n].begin = x->offset;
        l->v[l->n].end = x->offset + x->nbytes;
        l->v[l->n].task = me;
        l->v[l->n].write = is_write(x->tag);
        l->v[l->n].failed_run = 0;
        l->n++;
    }
    for (uint32_t i = 0; i < p->num_bufs; i++) {
        struct access_list *l = p->bufs[i].buf->access;

        l->pending -= p->bufs[i].records;
        p->bufs[i].records = 0;
        t->bufs[t->num_bufs++] = p->bufs[i].buf;
        __atomic_add_fetch(&p->bufs[i].buf->pins, 1, __ATOMIC_RELAXED);
    }
}

void orch_deps_forget(strata_buffer *b)
{
    struct access_list *l = b->access;

    if (l) {
        base_free(l->v);
        base_free(l);
        b->access = NULL;
    }
}
