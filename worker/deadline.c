/* Task deadlines on nodes. A task with a deadline runs its orch fn on a
 * thread of its own while the caller waits until the deadline; past it
 * the caller reports STRATA_ETIMEDOUT and goes on, and the run finishes
 * (or fails) in the background, owning its arguments. A kernel on a chip
 * cannot be interrupted, so nothing is killed until the node shuts down. */
#include "base/alloc.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/futex.h"
#include "base/log.h"
#include "worker_int.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* About 116 days: far enough, and the sum with the clock cannot wrap. */
#define TASK_DEADLINE_MAX_MS 10000000000ull

struct bounded {
    strata_worker *w;
    strata_orch_fn fn;
    strata_args *args;
    uint32_t done; /* futex word: 0 running, 1 finished */
    uint32_t refs; /* the waiter and the thread */
    strata_err err;
    char msg[STRATA_ERRMSG_MAX];
};

static void unref(struct bounded *b)
{
    if (__atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    strata_args_destroy(b->args);
    base_free(b);
}

static void *bounded_main(void *arg)
{
    struct bounded *b = arg;
    strata_worker *w = b->w;

    b->err = strata_worker_run(w, b->fn, b->args, NULL);
    if (b->err)
        snprintf(b->msg, sizeof(b->msg), "%s", strata_errmsg());
    __atomic_store_n(&b->done, 1, __ATOMIC_RELEASE);
    base_futex_wake(&b->done);
    /* Read w's counter before the last reference can go. */
    unref(b);
    if (__atomic_sub_fetch(&w->bounded_running, 1, __ATOMIC_ACQ_REL) == 0)
        base_futex_wake(&w->bounded_running);
    return NULL;
}

strata_err worker_run_bounded(strata_worker *w, strata_orch_fn fn,
                              strata_args **args, uint64_t deadline_ms)
{
    struct bounded *b;
    pthread_attr_t attr;
    pthread_t th;
    uint64_t deadline;
    strata_err err;
    int rc;

    if (deadline_ms == 0)
        return strata_worker_run(w, fn, *args, NULL);
    if (deadline_ms > TASK_DEADLINE_MAX_MS) /* a peer's value, unchecked */
        deadline_ms = TASK_DEADLINE_MAX_MS;
    deadline = base_now_ns() + deadline_ms * 1000000u;
    b = base_calloc(1, sizeof(*b));
    if (!b)
        return base_fail(STRATA_ENOMEM, "out of memory for a task deadline");
    b->w = w;
    b->fn = fn;
    b->args = *args;
    b->refs = 2;
    __atomic_add_fetch(&w->bounded_running, 1, __ATOMIC_ACQ_REL);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&th, &attr, bounded_main, b);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        __atomic_sub_fetch(&w->bounded_running, 1, __ATOMIC_ACQ_REL);
        base_free(b);
        return base_fail_errno(rc, "cannot start a task thread");
    }
    *args = NULL; /* b owns them now */
    while (!__atomic_load_n(&b->done, __ATOMIC_ACQUIRE) &&
           base_now_ns() < deadline)
        base_futex_wait(&b->done, 0, deadline);
    if (__atomic_load_n(&b->done, __ATOMIC_ACQUIRE)) {
        err = b->err ? base_fail(b->err, "%s", b->msg) : STRATA_OK;
        /* In time: the arguments are the caller's again. */
        *args = b->args;
        b->args = NULL;
    } else {
        err = base_fail(STRATA_ETIMEDOUT,
                        "the task passed its %llu ms deadline; it goes on "
                        "in the background and its results are dropped",
                        (unsigned long long)deadline_ms);
        __atomic_store_n(&w->bounded_late, true, __ATOMIC_RELEASE);
    }
    unref(b);
    return err;
}

bool worker_bounded_settle(strata_worker *w, double grace_s)
{
    bool late = __atomic_load_n(&w->bounded_late, __ATOMIC_ACQUIRE);
    uint64_t deadline = late ? base_deadline_after(grace_s) : BASE_NEVER;
    uint32_t n;

    if (__atomic_load_n(&w->bounded_running, __ATOMIC_ACQUIRE) == 0)
        return true;
    /* Runs past their deadline wait on chips that may never answer:
     * kill the chips and subs, so the runs fail and end. Runs that ended
     * in time are only leaving their threads: wait for them too, they
     * still touch w. */
    if (late) {
        LOG_INFO("stopping tasks that passed their deadline");
        worker_kill_children(w);
    }
    while ((n = __atomic_load_n(&w->bounded_running, __ATOMIC_ACQUIRE)) != 0 &&
           base_now_ns() < deadline)
        base_futex_wait(&w->bounded_running, n, deadline);
    return __atomic_load_n(&w->bounded_running, __ATOMIC_ACQUIRE) == 0;
}

uint32_t worker_bounded_count(strata_worker *w)
{
    return __atomic_load_n(&w->bounded_running, __ATOMIC_ACQUIRE);
}

bool worker_bounded_late_running(strata_worker *w)
{
    return __atomic_load_n(&w->bounded_late, __ATOMIC_ACQUIRE) &&
           __atomic_load_n(&w->bounded_running, __ATOMIC_ACQUIRE) > 0;
}
