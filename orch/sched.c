/* The scheduler object and its thread: harvest completions, dispatch, and
 * park on the doorbell and every child's pidfd when there is nothing to
 * do, so a child's death is seen at once and an idle worker uses no CPU. */
#include "base/alloc.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/futex.h"
#include "base/log.h"
#include "base/proc.h"
#include "orch_int.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

strata_err orch_sched_create(const struct orch_sched_cfg *cfg,
                             struct orch_sched **out)
{
    struct orch_sched *s = base_calloc(1, sizeof(*s));

    if (!s)
        return base_fail(STRATA_ENOMEM, "out of memory creating scheduler");
    s->pfd = base_calloc(1 + cfg->num_chips + cfg->num_subs, sizeof(*s->pfd));
    if (!s->pfd) {
        base_free(s);
        return base_fail(STRATA_ENOMEM, "out of memory creating scheduler");
    }
    if (pthread_mutex_init(&s->mu, NULL) != 0) {
        base_free(s->pfd);
        base_free(s);
        return base_fail(STRATA_ESYS, "pthread_mutex_init failed");
    }
    s->worker = cfg->worker;
    s->pid = base_pid();
    s->mem = cfg->mem;
    s->eps = cfg->eps;
    s->num_chips = cfg->num_chips;
    s->num_subs = cfg->num_subs;
    s->shared = cfg->shared;
    s->doorbell_fd = cfg->doorbell_fd;
    s->registry_count = cfg->registry_count;
    s->directed_kind =
        cfg->directed_kind ? cfg->directed_kind : STRATA_CALLABLE_KERNEL;
    s->ops = cfg->ops;
    if (orch_va_init(s, cfg->va_base, cfg->va_size) != STRATA_OK) {
        pthread_mutex_destroy(&s->mu);
        base_free(s->pfd);
        base_free(s);
        return base_fail(STRATA_ENOMEM, "out of memory creating scheduler");
    }
    s->free_head = ORCH_NONE;
    s->sub_head = s->sub_tail = ORCH_NONE;
    for (size_t i = 0; i < s->num_chips + s->num_subs; i++) {
        s->eps[i].fifo_head = s->eps[i].fifo_tail = ORCH_NONE;
        s->eps[i].unposted_head = s->eps[i].unposted_tail = ORCH_NONE;
        s->eps[i].ordered_queued = 0;
        s->eps[i].harvested = 0;
        s->eps[i].reserved = NULL;
    }
    *out = s;
    return STRATA_OK;
}

static void drain_doorbell(int fd)
{
    uint64_t v;

    if (read(fd, &v, sizeof(v)) < 0)
        return; /* EAGAIN: nothing rang */
}

static void check_deaths(struct orch_sched *s, const struct pollfd *pfd,
                         size_t n)
{
    for (size_t i = 0; i < s->num_chips + s->num_subs; i++) {
        struct orch_endpoint *ep = &s->eps[i];
        bool gone;

        if (ep->dead)
            continue;
        if (ep->pidfd >= 0) {
            gone = i + 1 < n && (pfd[i + 1].revents & (POLLIN | POLLHUP));
        } else {
            orch_endpoint_reap(ep, false);
            gone = ep->reaped;
        }
        if (gone) {
            pthread_mutex_lock(&s->mu);
            orch_endpoint_died(s, ep);
            pthread_mutex_unlock(&s->mu);
        }
    }
}

/* Parks until the doorbell rings or a child dies. */
static void park(struct orch_sched *s)
{
    size_t n = s->num_chips + s->num_subs;
    struct pollfd *pfd = s->pfd;
    int timeout = -1;

    pfd[0].fd = s->doorbell_fd;
    pfd[0].events = POLLIN;
    for (size_t i = 0; i < n; i++) {
        struct orch_endpoint *ep = &s->eps[i];

        pfd[i + 1].fd = ep->dead ? -1 : ep->pidfd;
        pfd[i + 1].events = POLLIN;
        pfd[i + 1].revents = 0;
        if (!ep->dead && ep->pidfd < 0)
            timeout = 100; /* no pidfd: fall back to polling waitpid */
    }
    if (poll(pfd, 1 + n, timeout) < 0 && errno != EINTR)
        LOG_ERROR("scheduler poll failed: %s", strerror(errno));
    drain_doorbell(s->doorbell_fd);
    check_deaths(s, pfd, 1 + n);
}

/* While a waiting thread spins over the completions (orch_wait)
 * it harvests them itself: this thread sleeps meanwhile instead of taking
 * a core beside it, and children do not ring the doorbell (sched_parked
 * stays 0). The spin's end wakes it when work is still in flight; with
 * none, the sleep ends after one spin budget at most (as this thread's
 * own spin would before it parks), so work posted later that nobody
 * waits for, or a death, is seen within that. orch_sched_stop wakes it
 * too. True when it slept. */
static bool wait_out_lookers(struct orch_sched *s)
{
    uint32_t n = __atomic_load_n(&s->lookers, __ATOMIC_SEQ_CST);
    uint64_t budget_ns = (uint64_t)base_spin_budget() * BASE_SPIN_NS_PER_SPIN;

    if (n == 0 || budget_ns == 0)
        return false;
    __atomic_store_n(&s->sched_on_lookers, 1, __ATOMIC_SEQ_CST);
    /* A spin that ended after the load above saw the flag, or left a
     * value the futex compares unequal. */
    base_futex_wait(&s->lookers, n, base_now_ns() + budget_ns);
    __atomic_store_n(&s->sched_on_lookers, 0, __ATOMIC_SEQ_CST);
    return true;
}

static void *thread_main(void *arg)
{
    struct orch_sched *s = arg;
    unsigned spins = 0;
    bool did;
    bool busy;

    for (;;) {
        pthread_mutex_lock(&s->mu);
        if (s->stopping) {
            pthread_mutex_unlock(&s->mu);
            return NULL;
        }
        did = orch_harvest(s);
        busy = s->unfinished > 0;
        pthread_mutex_unlock(&s->mu);
        if (did) {
            spins = base_spin_budget() / 4;
            continue;
        }
        if (wait_out_lookers(s))
            continue;
        if (busy && spins > 0) {
            spins--;
            base_cpu_relax();
            continue;
        }
        /* Announce the park, then look once more: a child that completes
         * after this store sees it and rings the doorbell. */
        __atomic_store_n(&s->shared->sched_parked, 1, __ATOMIC_SEQ_CST);
        pthread_mutex_lock(&s->mu);
        did = orch_harvest(s) || s->stopping;
        pthread_mutex_unlock(&s->mu);
        if (!did)
            park(s);
        __atomic_store_n(&s->shared->sched_parked, 0, __ATOMIC_SEQ_CST);
    }
}

void orch_harvest_now(struct orch_sched *s)
{
    pthread_mutex_lock(&s->mu);
    orch_harvest(s);
    pthread_mutex_unlock(&s->mu);
}

strata_err orch_sched_start(struct orch_sched *s)
{
    int rc = pthread_create(&s->thread, NULL, thread_main, s);

    if (rc != 0)
        return base_fail_errno(rc, "cannot start the scheduler thread");
    s->thread_started = true;
    return STRATA_OK;
}

void orch_sched_stop(struct orch_sched *s)
{
    uint64_t one = 1;

    if (!s || !s->thread_started)
        return;
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    pthread_mutex_unlock(&s->mu);
    if (write(s->doorbell_fd, &one, sizeof(one)) < 0)
        LOG_WARN("cannot ring the scheduler doorbell: %s", strerror(errno));
    base_futex_wake(&s->lookers); /* it may sleep there (wait_out_lookers) */
    pthread_join(s->thread, NULL);
    s->thread_started = false;
}

static void free_slots(struct orch_sched *s)
{
    /* Slots were allocated in blocks at 0, 64, 128, 256, ... */
    for (uint32_t i = 0; i < s->num_slots; i++) {
        struct orch_task *t = s->slots[i];

        base_free(t->fanout);
        base_free(t->bufs);
        base_free(t->blob);
    }
    for (uint32_t start = 0; start < s->num_slots;
         start = start ? start * 2 : 64)
        base_free(s->slots[start]);
    base_free(s->slots);
}

void orch_sched_destroy(struct orch_sched *s)
{
    if (!s)
        return;
    orch_sched_stop(s);
    /* Handles the caller still holds outlive the scheduler: their result
     * is final, and strata_run_wait / strata_run_free no longer look
     * here. */
    for (struct strata_run *r = s->held_runs; r; r = r->held_next) {
        if (!r->done && !r->err) {
            r->err = STRATA_ESTATE;
            snprintf(r->msg, sizeof(r->msg),
                     "run %llu: its worker was destroyed before its fence",
                     (unsigned long long)r->id);
        }
        r->sched = NULL;
    }
    while (s->live_runs) {
        struct strata_run *r = s->live_runs;

        s->live_runs = r->next_live;
        base_free(r->hooks);
        r->hooks = NULL;
        if (r->detached)
            base_free(r);
        else
            r->done = true;
    }
    for (uint32_t i = s->num_adopted; i-- > 0;)
        s->adopted[i].free_fn(s->adopted[i].obj);
    base_free(s->adopted);
    base_free(s->marks);
    free_slots(s);
    base_free(s->work);
    base_free(s->pfd);
    orch_va_fini(s);
    pthread_mutex_destroy(&s->mu);
    base_free(s);
}

static bool all_done(void *arg)
{
    struct orch_sched *s = arg;

    return s->unfinished == 0 && s->live_runs == NULL;
}

void orch_drain(struct orch_sched *s)
{
    if (orch_wait(s, all_done, s, BASE_NEVER) != STRATA_OK)
        LOG_ERROR("drain failed: %s", strata_errmsg());
}

strata_err orch_buffer_release(struct orch_sched *s, strata_buffer *b)
{
    struct orch_task *t;

    pthread_mutex_lock(&s->mu);
    if (b->pins) {
        uint32_t pins = b->pins;

        pthread_mutex_unlock(&s->mu);
        return base_fail(STRATA_ESTATE,
                         "buffer %llu is named by %u unfinished task(s)",
                         (unsigned long long)b->id, pins);
    }
    orch_deps_forget(b);
    /* Children drop their mappings in order with their tasks. If a frame
     * cannot be had, the mapping lives until the child exits. */
    for (size_t i = 0; i < s->num_chips + s->num_subs; i++) {
        if (s->eps[i].dead)
            continue;
        if (orch_slot_alloc(s, &t) != STRATA_OK) {
            LOG_WARN("buffer %llu stays mapped in children: %s",
                     (unsigned long long)b->id, strata_errmsg());
            break;
        }
        t->kind = MBX_CONTROL;
        t->op = MBX_CTL_UNMAP_BUFFER;
        t->op_arg = b->id;
        t->op_arg2 = (uint64_t)b->creator;
        t->ep = (int)i;
        memset(&t->callable, 0, sizeof(t->callable));
        s->unfinished++;
        orch_make_ready(s, t);
    }
    orch_dispatch(s);
    pthread_mutex_unlock(&s->mu);
    return STRATA_OK;
}
