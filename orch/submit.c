/* strata_orch_submit_*: validate, plan dependencies, commit, dispatch. */
#include "base/alloc.h"
#include "base/err.h"
#include "base/fault.h"
#include "chip/registry.h"
#include "orch_int.h"
#include "trace/trace.h"

#include <string.h>

/* ep: the target endpoint, or -1 for the sub queue. *name (when name is
 * not NULL): the callable's registered name, or NULL (remote). */
static strata_err check_callable(const struct orch_sched *s, strata_callable c,
                                 uint32_t want, int ep, const char **name)
{
    const struct chip_callable *e;
    char hex[65];

    /* A kind outside the enum is the caller's mistake, whatever the
     * digest: name it rather than the kind it was taken for. */
    if (c.kind < STRATA_CALLABLE_KERNEL || c.kind > STRATA_CALLABLE_SUB)
        return base_fail(STRATA_EINVAL,
                         "submit: callable kind %u is not a strata_callable_"
                         "kind (1..3); this target runs %s callables",
                         (unsigned)c.kind, chip_callable_kind_name(want));
    e = chip_registry_find(c.digest);
    if (name)
        *name = e ? e->name : NULL;
    /* A remote node runs its own modules' callables and answers for an
     * unknown digest itself; here only the kind can be checked. */
    if (ep >= 0 && s->eps[ep].notify_fd >= 0) {
        if (c.kind != want)
            return base_fail(STRATA_EINVAL, "callable kind %u is not a %s",
                             c.kind, chip_callable_kind_name(want));
        return STRATA_OK;
    }
    if (!e)
        return base_fail(STRATA_EINVAL,
                         "callable %s is not registered in this process",
                         strata_callable_digest_hex(c, hex));
    if (e->kind != want || c.kind != want)
        return base_fail(STRATA_EINVAL,
                         "'%s' is a %s callable; this target runs %s "
                         "callables",
                         e->name, chip_callable_kind_name(e->kind),
                         chip_callable_kind_name(want));
    if (e->seq >= s->registry_count)
        return base_fail(STRATA_EINVAL,
                         "%s '%s' was registered after strata_worker_init, "
                         "so the worker's children do not have it",
                         chip_callable_kind_name(want), e->name);
    return STRATA_OK;
}

strata_err orch_check_args(const struct orch_sched *s, const strata_args *a,
                           int ep)
{
    if (!a)
        return STRATA_OK;
    for (uint32_t i = 0; i < a->num_tensors; i++) {
        const strata_buffer *b = a->buffers[i];

        if (b->owner != s->worker)
            return base_fail(STRATA_EINVAL,
                             "tensor %u: its buffer belongs to another worker",
                             i);
        if (b->remote && (ep < 0 || s->eps[ep].id != b->node))
            return base_fail(STRATA_EINVAL,
                             "tensor %u: buffer %llu lives on remote node "
                             "%d; only tasks on that node can name it",
                             i, (unsigned long long)b->id, b->node);
        if (orch_device_tensor_check(s, b, i, ep))
            return STRATA_EINVAL;
    }
    return STRATA_OK;
}

/* Deadlines are kept by nodes: a kernel on a chip cannot be stopped. */
static strata_err check_deadline(const strata_orch *o, uint32_t kind)
{
    if (o->deadline_ms && kind != STRATA_CALLABLE_ORCH)
        return base_fail(STRATA_ENOTSUP,
                         "a task deadline is set (strata_orch_set_deadline) "
                         "but %s tasks cannot be stopped; only tasks on "
                         "nodes of a level-4 worker take deadlines",
                         chip_callable_kind_name(kind));
    return STRATA_OK;
}

strata_err strata_orch_set_deadline(strata_orch *o, double seconds)
{
    strata_err err = orch_usable(o, "strata_orch_set_deadline");

    if (err)
        return err;
    if (!(seconds >= 0) || seconds > 1e7)
        return base_fail(STRATA_EINVAL,
                         "task deadline %g s: expected 0 (none) to 1e7 s",
                         seconds);
    o->deadline_ms =
        seconds > 0 && seconds < 1e-3 ? 1 : (uint64_t)(seconds * 1e3);
    return STRATA_OK;
}

/* What the directed targets of this worker are called. */
static const char *target_name(const struct orch_sched *s)
{
    return s->directed_kind == STRATA_CALLABLE_KERNEL ? "chip" : "node";
}

static strata_err check_orch(strata_orch *o)
{
    return orch_usable(o, "submit");
}

static const strata_args empty_args;

/* A worker that spills buffers restores the task's (the submitting thread
 * waits meanwhile) and keeps them resident until the task pins them. */
static strata_err mem_hold(struct orch_sched *s, const strata_args *const *a,
                           size_t n)
{
    return s->mem.hold ? s->mem.hold(s->mem.ctx, a, n, false) : STRATA_OK;
}

static void mem_unhold(struct orch_sched *s, const strata_args *const *a,
                       size_t n)
{
    if (s->mem.unhold)
        s->mem.unhold(s->mem.ctx, a, n, false);
}

/* Allocates a slot, encodes a and plans its dependencies. Nothing is
 * visible to other tasks until commit_task. */
static strata_err prepare_task(struct orch_sched *s, strata_orch *o,
                               strata_callable c, const strata_args *a, int ep,
                               struct orch_task **t_out,
                               struct dep_plan **plan_out)
{
    struct orch_task *t;
    strata_err err;

    if (!a)
        a = &empty_args;
    err = orch_slot_alloc(s, &t);
    if (err)
        return err;
    t->kind = MBX_TASK;
    t->callable = c;
    t->ep = ep;
    t->run = o->run;
    t->op_arg = o->deadline_ms; /* a task's frame carries it in arg[0] */
    t->blob_len = (uint32_t)wire_args_encoded_size(a);
    err = orch_reserve(&t->blob, &t->blob_cap, t->blob_len, 1);
    if (!err)
        err = orch_deps_plan(s, a, t, plan_out);
    if (err) {
        orch_slot_free(s, t);
        return err;
    }
    wire_args_encode(a, t->blob, t->blob_cap);
    *t_out = t;
    return STRATA_OK;
}

static void commit_task(struct orch_sched *s, struct orch_task *t,
                        struct dep_plan *plan, const strata_args *a)
{
    struct strata_run *r = t->run;

    if (trace_enabled())
        t->trace_submit = s->trace_at = trace_now();
    orch_deps_commit(s, plan, a ? a : &empty_args, t);
    orch_deps_plan_free(s, plan);
    t->scope_depth = (uint8_t)r->depth;
    for (uint32_t i = 0; i < r->depth; i++)
        r->scopes[i].active++;
    r->active++;
    s->unfinished++;
    if (t->ep >= 0)
        orch_unposted_add(s, t);
    if (t->fanin == 0 && t->poisoned && !t->group)
        s->work[s->num_work++] = t->slot; /* fails at settle, never runs */
    else if (t->fanin == 0)
        orch_make_ready(s, t);
}

static strata_err submit_one(strata_orch *o, strata_callable c,
                             const strata_args *a, int ep, uint32_t kind)
{
    struct orch_sched *s = o->sched;
    struct dep_plan *plan;
    struct orch_task *t;
    const char *name = NULL;
    strata_err err;

    err = check_callable(s, c, kind, ep, &name);
    if (!err)
        err = check_deadline(o, kind);
    if (!err)
        err = orch_check_args(s, a, ep);
    if (!err)
        err = mem_hold(s, &a, 1);
    if (err)
        return err;
    orch_kicks_begin(s);
    pthread_mutex_lock(&s->mu);
    err = prepare_task(s, o, c, a, ep, &t, &plan);
    if (!err) {
        t->trace_name = name;
        commit_task(s, t, plan, a);
        orch_settle(s);
        s->trace_at = 0;
    }
    pthread_mutex_unlock(&s->mu);
    orch_kicks_end(s);
    mem_unhold(s, &a, 1);
    return err;
}

strata_err strata_orch_submit_next_level(strata_orch *o, strata_callable c,
                                         const strata_args *a, int worker_id)
{
    strata_err err = check_orch(o);
    int ep;

    if (err)
        return err;
    ep = orch_chip_index(o->sched, worker_id);
    if (ep < 0)
        return base_fail(STRATA_EINVAL, "the worker has no %s %d",
                         target_name(o->sched), worker_id);
    return submit_one(o, c, a, ep, o->sched->directed_kind);
}

strata_err strata_orch_submit_sub(strata_orch *o, strata_callable c,
                                  const strata_args *a)
{
    strata_err err = check_orch(o);

    if (err)
        return err;
    if (o->sched->num_subs == 0)
        return base_fail(STRATA_EINVAL, "the worker has no sub workers");
    return submit_one(o, c, a, -1, STRATA_CALLABLE_SUB);
}

static strata_err check_group(struct orch_sched *s, strata_callable c,
                              const strata_args *const *a,
                              const int *worker_ids, size_t n)
{
    strata_err err = STRATA_OK;

    if (!worker_ids || !a)
        return base_fail_null("strata_orch_submit_next_level_group",
                              !a ? "a" : "worker_ids");
    if (n == 0)
        return base_fail(STRATA_EINVAL,
                         "strata_orch_submit_next_level_group: n is 0 (a "
                         "group needs one worker at least)");
    /* Members are distinct targets, so n is bounded by the worker's before
     * any entry is read: a count past the arrays given is refused here,
     * not read. */
    if (n > s->num_chips)
        return base_fail(STRATA_EINVAL,
                         "strata_orch_submit_next_level_group: n %zu is more "
                         "than the worker's %zu %ss (members are distinct)",
                         n, s->num_chips, target_name(s));
    for (size_t i = 0; !err && i < n; i++) {
        if (orch_chip_index(s, worker_ids[i]) < 0)
            return base_fail(STRATA_EINVAL, "group member %zu: no %s %d", i,
                             target_name(s), worker_ids[i]);
        for (size_t j = 0; j < i; j++)
            if (worker_ids[j] == worker_ids[i])
                return base_fail(STRATA_EINVAL,
                                 "group members %zu and %zu both target "
                                 "%s %d",
                                 j, i, target_name(s), worker_ids[i]);
        err = check_callable(s, c, s->directed_kind,
                             orch_chip_index(s, worker_ids[i]), NULL);
        if (!err)
            err = orch_check_args(s, a[i], orch_chip_index(s, worker_ids[i]));
    }
    return err;
}

strata_err strata_orch_submit_next_level_group(strata_orch *o,
                                               strata_callable c,
                                               const strata_args *const *a,
                                               const int *worker_ids, size_t n)
{
    struct orch_task **tasks = NULL;
    struct dep_plan **plans = NULL;
    struct orch_group *g = NULL;
    struct orch_sched *s;
    strata_err err = check_orch(o);
    size_t done = 0;

    if (err)
        return err;
    s = o->sched;
    err = check_deadline(o, s->directed_kind);
    if (!err)
        err = check_group(s, c, a, worker_ids, n);
    if (err)
        return err;
    tasks = base_calloc(n, sizeof(*tasks));
    plans = base_calloc(n, sizeof(*plans));
    g = base_calloc(1, sizeof(*g) + n * sizeof(g->members[0]));
    if (!tasks || !plans || !g) {
        err = base_fail(STRATA_ENOMEM, "out of memory submitting a group");
        goto out;
    }
    g->n = (uint32_t)n;
    err = mem_hold(s, a, n);
    if (err)
        goto out;
    orch_kicks_begin(s);
    pthread_mutex_lock(&s->mu);
    /* Plan every member before committing any, so the group goes in whole
     * or not at all, and members never depend on each other. */
    for (; done < n; done++) {
        err =
            prepare_task(s, o, c, a[done], orch_chip_index(s, worker_ids[done]),
                         &tasks[done], &plans[done]);
        if (err)
            break;
        tasks[done]->group = g;
        g->members[done].slot = tasks[done]->slot;
        g->members[done].gen = tasks[done]->gen;
    }
    if (err) {
        while (done-- > 0) {
            orch_deps_plan_free(s, plans[done]);
            tasks[done]->group = NULL;
            orch_slot_free(s, tasks[done]);
        }
    } else {
        for (size_t i = 0; i < n; i++)
            commit_task(s, tasks[i], plans[i], a[i]);
        g = NULL; /* owned by its members now */
        orch_settle(s);
        s->trace_at = 0;
    }
    pthread_mutex_unlock(&s->mu);
    orch_kicks_end(s);
    mem_unhold(s, a, n);
out:
    base_free(g);
    base_free(plans);
    base_free(tasks);
    return err;
}
