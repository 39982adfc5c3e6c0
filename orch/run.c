/* Runs: starting one, its fence, first-error-wins, scopes, and waiting
 * (spin, then park) for any of these. */
#include "base/alloc.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/futex.h"
#include "base/proc.h"
#include "orch_int.h"
#include "trace/trace.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void orch_run_record_error(struct strata_run *r, strata_err err,
                           const char *fmt, ...)
{
    va_list ap;

    if (r->err)
        return; /* first error wins */
    r->err = err;
    va_start(ap, fmt);
    vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
    va_end(ap);
}

/* The orch fns this thread is inside, innermost first: a drain of their
 * scheduler would wait for them to return, and hang. */
struct orch_frame {
    const struct orch_sched *sched;
    const struct orch_frame *prev;
};
static _Thread_local const struct orch_frame *frames;

bool orch_in_fn_of(const struct orch_sched *s)
{
    for (const struct orch_frame *f = frames; f; f = f->prev)
        if (f->sched == s)
            return true;
    return false;
}

static void unlink_held(struct orch_sched *s, struct strata_run *r)
{
    if (r->held_prev)
        r->held_prev->held_next = r->held_next;
    else if (s->held_runs == r)
        s->held_runs = r->held_next;
    if (r->held_next)
        r->held_next->held_prev = r->held_prev;
    r->held_prev = r->held_next = NULL;
}

static void unlink_run(struct orch_sched *s, struct strata_run *r)
{
    struct strata_run **pp = &s->live_runs;

    while (*pp && *pp != r)
        pp = &(*pp)->next_live;
    if (*pp)
        *pp = r->next_live;
}

static void free_run(struct strata_run *r)
{
    base_free(r->hooks);
    base_free(r);
}

static void maybe_fence(struct orch_sched *s, struct strata_run *r)
{
    if (!r->closed || r->active > 0 || r->done)
        return;
    if (!r->hooks_fired) {
        r->hooks_fired = true;
        for (uint32_t i = r->num_hooks; i-- > 0;)
            r->hooks[i].fn(s, r->hooks[i].arg);
        if (r->active > 0)
            return; /* the hooks posted work; its completion fences */
    }
    r->done = true;
    if (r->trace_begin)
        trace_record(TRACE_K_SPAN, TRACE_CAT_RUN, TRACE_LANE_ORCH,
                     r->trace_begin, trace_now(), r->id, 0, r->trace_fn_end, 0,
                     "run");
    unlink_run(s, r);
    s->progress_seq++;
    if (s->waiters)
        base_futex_wake(&s->progress_seq);
    if (r->detached)
        free_run(r);
}

void orch_run_task_done(struct orch_sched *s, struct orch_task *t,
                        strata_err err, const char *msg)
{
    struct strata_run *r = t->run;
    char label[192];
    /* A lost peer, a node task past its deadline and a task its node
     * could not begin (no such callable there) keep their codes. */
    strata_err code = err == STRATA_EPEER || t->not_run ||
                              (err == STRATA_ETIMEDOUT &&
                               t->callable.kind == STRATA_CALLABLE_ORCH)
                          ? err
                          : STRATA_ETASK;

    if (!r)
        return;
    /* A control frame's failure is its caller's to report. */
    if (err && t->kind == MBX_TASK) {
        orch_task_label(s, t, label, sizeof(label));
        orch_run_record_error(r, code, "%s %s (%s): %s", label,
                              t->not_run ? "could not start" : "failed",
                              strata_errname(err), msg ? msg : "");
        for (uint32_t i = 0; i < t->scope_depth; i++) {
            struct orch_scope *sc = &r->scopes[i];

            if (!sc->err) {
                sc->err = code;
                snprintf(sc->msg, sizeof(sc->msg), "%s failed (%s): %s", label,
                         strata_errname(err), msg ? msg : "");
            }
        }
    }
    for (uint32_t i = 0; i < t->scope_depth; i++)
        r->scopes[i].active--;
    r->active--;
    maybe_fence(s, r);
}

struct wait_look {
    struct orch_sched *s;
    bool (*done)(void *);
    void *arg;
};

/* One look: harvest, then ask done. */
static bool look(void *arg)
{
    struct wait_look *l = arg;
    bool ok;

    pthread_mutex_lock(&l->s->mu);
    orch_harvest(l->s);
    ok = l->done(l->arg);
    pthread_mutex_unlock(&l->s->mu);
    return ok;
}

/* A thread begins or ends spinning over the completions (lookers). */
static void lookers_add(struct orch_sched *s)
{
    __atomic_add_fetch(&s->lookers, 1, __ATOMIC_SEQ_CST);
}

static void lookers_drop(struct orch_sched *s)
{
    bool work;

    /* Sequentially consistent, like the scheduler thread's side: either
     * it sees 0 before it sleeps, or this sees that it sleeps. */
    if (__atomic_sub_fetch(&s->lookers, 1, __ATOMIC_SEQ_CST) != 0 ||
        !__atomic_load_n(&s->sched_on_lookers, __ATOMIC_SEQ_CST))
        return;
    /* With nothing in flight it may sleep on: whoever posts next waits,
     * and wakes it when that wait stops looking. */
    pthread_mutex_lock(&s->mu);
    work = s->unfinished > 0;
    pthread_mutex_unlock(&s->mu);
    if (work)
        base_futex_wake(&s->lookers);
}

strata_err orch_wait(struct orch_sched *s, bool (*done)(void *), void *arg,
                     uint64_t deadline)
{
    struct wait_look l = {s, done, arg};
    unsigned budget = base_spin_budget();
    uint32_t seq;
    bool ok;

    if (deadline != BASE_NEVER) {
        uint64_t now = base_now_ns();
        uint64_t left =
            deadline > now ? (deadline - now) / BASE_SPIN_NS_PER_SPIN : 0;

        budget = left < budget ? (unsigned)left : budget;
    }
    /* A few looks with pauses, then a yield per look (base_spin_until):
     * the awaited child may need this core. While this spins, it
     * harvests: the scheduler thread need not. */
    lookers_add(s);
    ok = base_spin_until(look, &l, budget);
    lookers_drop(s);
    if (ok)
        return STRATA_OK;
    for (;;) {
        if (look(&l))
            return STRATA_OK;
        if (deadline != BASE_NEVER && base_now_ns() >= deadline)
            return STRATA_ETIMEDOUT;
        /* Register as a waiter, then re-check: every completion bumps
         * progress_seq under mu and wakes registered waiters. */
        pthread_mutex_lock(&s->mu);
        s->waiters++;
        seq = s->progress_seq;
        ok = done(arg);
        if (!ok)
            orch_ring_quiet_locked(s); /* what we wait for may need them */
        pthread_mutex_unlock(&s->mu);
        if (!ok)
            base_futex_wait(&s->progress_seq, seq, deadline);
        pthread_mutex_lock(&s->mu);
        s->waiters--;
        pthread_mutex_unlock(&s->mu);
        if (ok)
            return STRATA_OK;
    }
}

strata_err orch_run_start(struct orch_sched *s, strata_orch_fn fn,
                          const strata_args *args, void *user, strata_run **out)
{
    struct strata_run *r = base_calloc(1, sizeof(*r));
    strata_err err;

    if (!r)
        return base_fail(STRATA_ENOMEM, "out of memory starting a run");
    /* Spilled arguments come back before the fn sees them, and stay while
     * it runs. */
    if (args && s->mem.hold &&
        (err = s->mem.hold(s->mem.ctx, &args, 1, true))) {
        base_free(r);
        return err;
    }
    r->sched = s;
    r->orch.sched = s;
    r->orch.run = r;
    pthread_mutex_lock(&s->mu);
    r->id = ++s->next_run_id;
    r->next_live = s->live_runs;
    s->live_runs = r;
    r->held_next = s->held_runs;
    if (s->held_runs)
        s->held_runs->held_prev = r;
    s->held_runs = r;
    pthread_mutex_unlock(&s->mu);

    base_errmsg_clear();
    {
        struct orch_frame f = {s, frames};

        frames = &f;
        if (trace_enabled())
            r->trace_begin = trace_now();
        err = fn(&r->orch, args, user);
        if (r->trace_begin)
            r->trace_fn_end = trace_now();
        frames = f.prev;
    }
    if (args && s->mem.unhold)
        s->mem.unhold(s->mem.ctx, &args, 1, true);

    /* The fence's posts (a global domain's release) go out from here. */
    orch_kicks_begin(s);
    pthread_mutex_lock(&s->mu);
    if (err) {
        const char *msg = strata_errmsg();

        /* An orch fn may return a code of its own without a message. */
        orch_run_record_error(r, err, "orch function returned %s%s%s",
                              strata_errname(err), msg[0] ? ": " : "", msg);
    }
    if (r->depth > 0)
        orch_run_record_error(r, STRATA_ESTATE,
                              "orch function returned with %u scope(s) "
                              "open",
                              r->depth);
    r->depth = 0;
    __atomic_store_n(&r->closed, true, __ATOMIC_RELEASE);
    maybe_fence(s, r);
    orch_dispatch(s);
    pthread_mutex_unlock(&s->mu);
    orch_kicks_end(s);
    *out = r;
    return STRATA_OK;
}

static bool run_done(void *arg)
{
    return ((struct strata_run *)arg)->done;
}

strata_err strata_run_wait(strata_run *run, double timeout_s)
{
    strata_err err;

    if (!run)
        return base_fail(STRATA_EINVAL, "strata_run_wait: run is NULL");
    err = base_check_timeout(timeout_s, "strata_run_wait", "timeout_s");
    if (err)
        return err;
    if (run->sched && run->sched->pid != base_pid())
        return base_fail(STRATA_ESTATE,
                         "strata_run_wait: run %llu belongs to process %d; a "
                         "process forked from it has only a copy",
                         (unsigned long long)run->id, (int)run->sched->pid);
    /* Its worker was destroyed: the result is final. */
    err = run->sched ? orch_wait(run->sched, run_done, run,
                                 base_deadline_after(timeout_s))
                     : STRATA_OK;
    if (err)
        return base_fail(err, "run %llu not finished after %.3f s",
                         (unsigned long long)run->id, timeout_s);
    if (run->err)
        return base_fail(run->err, "%s", run->msg);
    base_errmsg_clear();
    return STRATA_OK;
}

void strata_run_free(strata_run *run)
{
    struct orch_sched *s;
    bool now;

    if (!run)
        return;
    s = run->sched;
    if (!s) { /* its worker was destroyed */
        free_run(run);
        return;
    }
    pthread_mutex_lock(&s->mu);
    unlink_held(s, run);
    now = run->done;
    if (!now)
        run->detached = true;
    pthread_mutex_unlock(&s->mu);
    if (now)
        free_run(run);
}

strata_err strata_orch_scope_begin(strata_orch *o)
{
    struct strata_run *r;
    strata_err err = orch_usable(o, "strata_orch_scope_begin");

    if (err)
        return err;
    r = o->run;
    if (r->depth == ORCH_MAX_SCOPES)
        return base_fail(STRATA_ESTATE, "more than %d nested scopes",
                         ORCH_MAX_SCOPES);
    pthread_mutex_lock(&o->sched->mu);
    memset(&r->scopes[r->depth], 0, sizeof(r->scopes[0]));
    r->depth++;
    pthread_mutex_unlock(&o->sched->mu);
    return STRATA_OK;
}

static bool scope_done(void *arg)
{
    return ((struct orch_scope *)arg)->active == 0;
}

strata_err strata_orch_scope_end(strata_orch *o)
{
    struct orch_scope *sc;
    strata_err err = orch_usable(o, "strata_orch_scope_end");

    if (err)
        return err;
    if (o->run->depth == 0)
        return base_fail(STRATA_ESTATE,
                         "strata_orch_scope_end without an open scope");
    sc = &o->run->scopes[o->run->depth - 1];
    err = orch_wait(o->sched, scope_done, sc, BASE_NEVER);
    if (err)
        return err;
    pthread_mutex_lock(&o->sched->mu);
    o->run->depth--;
    err = sc->err;
    pthread_mutex_unlock(&o->sched->mu);
    if (err)
        return base_fail(err, "%s", sc->msg);
    return STRATA_OK;
}

strata_worker *strata_orch_worker(strata_orch *o)
{
    return o ? o->sched->worker : NULL;
}
