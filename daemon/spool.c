/* A session's job threads (spool.h). Threads park on a condition variable
 * between jobs and stay until spool_fini joins them: a thread that exits
 * on its own could still be running its thread-exit handlers (OpenSSL's
 * per-thread state among them) when the process ends. Their number is
 * capped (spool_init): a job that finds every thread busy at the cap waits
 * in the queue, so a burst of jobs, or jobs that end just as the next is
 * submitted (their threads not parked yet), never adds threads past it. */
#include "spool.h"
#include "base/alloc.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"

#include <errno.h>
#include <event2/event.h>
#include <stddef.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

void spool_init(struct spool *p, uint32_t max_threads)
{
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->idle, NULL);
    p->head = p->tail = NULL;
    p->queued = p->running = p->idle_threads = 0;
    p->max_threads = max_threads;
    p->stop = false;
    p->tids = NULL;
    p->num_tids = p->cap_tids = 0;
}

static void *spool_main(void *arg)
{
    struct spool *p = arg;
    struct spool_job *job;

    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->head && !p->stop) {
            p->idle_threads++;
            pthread_cond_wait(&p->work, &p->mu);
            p->idle_threads--;
        }
        job = p->head;
        if (!job)
            break; /* stop */
        p->head = job->next;
        if (!p->head)
            p->tail = NULL;
        p->queued--;
        pthread_mutex_unlock(&p->mu);
        job->fn(job);
        pthread_mutex_lock(&p->mu);
        if (--p->running == 0)
            pthread_cond_broadcast(&p->idle);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* Starts one more thread (mu held). */
static strata_err grow(struct spool *p)
{
    int rc;

    if (p->num_tids == p->cap_tids) {
        size_t cap = p->cap_tids ? 2 * p->cap_tids : 8;
        void *t = base_realloc(p->tids, cap * sizeof(*p->tids));

        if (!t)
            return base_fail(STRATA_ENOMEM, "out of memory for a job thread");
        p->tids = t;
        p->cap_tids = cap;
    }
    rc = pthread_create(&p->tids[p->num_tids], NULL, spool_main, p);
    if (rc != 0)
        return base_fail_errno(rc, "cannot start a job thread");
    p->num_tids++;
    return STRATA_OK;
}

static strata_err submit(struct spool *p, struct spool_job *job, bool over)
{
    strata_err err = STRATA_OK;

    job->next = NULL;
    pthread_mutex_lock(&p->mu);
    /* A parked thread that was signalled but has not woken yet still
     * counts as idle: compare with the jobs nobody has taken, so a second
     * job never waits behind the first. At the cap the job waits for a
     * thread that is finishing one (a thread takes the next job before it
     * parks). */
    if (p->queued < p->idle_threads)
        pthread_cond_signal(&p->work);
    else if (over || !p->max_threads || p->num_tids < p->max_threads)
        err = grow(p);
    /* A thread that cannot be had is no failure while others will come
     * back for the job; the loop's is (they may all wait on the loop):
     * its caller tries again. */
    if (err && p->num_tids > 0 && !over) {
        LOG_WARN("%s: the job waits for a busy thread", strata_errmsg());
        err = STRATA_OK;
    }
    if (!err) {
        if (over) { /* first in line: the thread just started takes it */
            job->next = p->head;
            p->head = job;
            if (!p->tail)
                p->tail = job;
        } else if (p->tail) {
            p->tail->next = job;
            p->tail = job;
        } else {
            p->head = p->tail = job;
        }
        p->queued++;
        p->running++;
    }
    pthread_mutex_unlock(&p->mu);
    return err;
}

strata_err spool_submit(struct spool *p, struct spool_job *job)
{
    return submit(p, job, false);
}

/* The event loop, moved off a job that holds its thread: it must run even
 * when every thread waits on something only the loop brings (a task's
 * results waiting for the connection to drain), so it may pass the cap
 * (by one thread for each job that held the loop's thread: the loop runs
 * on one thread at a time). */
static strata_err submit_loop(struct spool *p, struct spool_job *job)
{
    return submit(p, job, true);
}

void spool_wait_idle(struct spool *p)
{
    pthread_mutex_lock(&p->mu);
    while (p->running > 0)
        pthread_cond_wait(&p->idle, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

size_t spool_threads(struct spool *p)
{
    size_t n;

    pthread_mutex_lock(&p->mu);
    n = p->num_tids;
    pthread_mutex_unlock(&p->mu);
    return n;
}

void spool_fini(struct spool *p)
{
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (size_t i = 0; i < p->num_tids; i++)
        pthread_join(p->tids[i], NULL);
    base_free(p->tids);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->idle);
    pthread_mutex_destroy(&p->mu);
}

/* ---- the loop ----------------------------------------------------------- */

/* A job offered by the loop runs on the loop's thread right away. Nobody
 * runs the loop meanwhile; if the job is still running SPOOL_TAKEOVER_MS
 * after it began, the watch thread (parked on a timerfd) hands the loop to
 * a pool thread, so a long job delays the loop by that much at most. The
 * timer is set when a job begins and is not set already, and is never
 * cleared: when it fires, the watch looks at the job running then, if
 * any, and sets it again for what that job has left. So jobs that follow
 * each other closely cost one timerfd_settime and one wake of the watch
 * per SPOOL_TAKEOVER_MS between them, not two calls each. */
#define SPOOL_TAKEOVER_MS 2
#define SPOOL_TAKEOVER_NS ((uint64_t)SPOOL_TAKEOVER_MS * 1000000u)

static void arm_ns(struct spool_loop *l, uint64_t ns)
{
    struct itimerspec its = {
        .it_value = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)}};

    if (timerfd_settime(l->tfd, 0, &its, NULL) != 0)
        LOG_WARN("timerfd_settime: %s", strerror(errno));
}

static void arm(struct spool_loop *l, long ms)
{
    arm_ns(l, (uint64_t)ms * 1000000u);
}

static void runner_fn(struct spool_job *job);

static void set_done(struct spool_loop *l)
{
    pthread_mutex_lock(&l->mu);
    l->done = true;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

/* Runs the loop on the calling thread until it ends or, after an offered
 * job, the watch thread has given it to another thread. Each inline job
 * has an epoch: the watch bumps it when it moves the loop, so a thread
 * whose job outlived its epoch touches neither the flags nor the timer
 * (they belong to whoever runs the loop now). */
static void drive(struct spool_loop *l)
{
    struct spool_job *job;
    uint64_t epoch;
    int rc;

    for (;;) {
        rc = event_base_loop(l->base, 0);
        job = l->offered;
        l->offered = NULL;
        if (rc < 0)
            LOG_ERROR("the session's event loop failed");
        if (!job || l->ended || rc < 0)
            break;
        pthread_mutex_lock(&l->mu);
        epoch = ++l->epoch;
        l->inline_running = true;
        l->job_ns = base_now_ns();
        if (!l->armed) {
            arm(l, SPOOL_TAKEOVER_MS);
            l->armed = true;
        }
        pthread_mutex_unlock(&l->mu);
        job->fn(job);
        pthread_mutex_lock(&l->mu);
        if (l->epoch != epoch) {
            pthread_mutex_unlock(&l->mu);
            return; /* the loop runs elsewhere now */
        }
        l->inline_running = false;
        pthread_mutex_unlock(&l->mu);
    }
    if (job && spool_submit(l->pool, job) != STRATA_OK)
        job->fn(job);
    set_done(l);
}

static void runner_fn(struct spool_job *job)
{
    drive((struct spool_loop *)((char *)job -
                                offsetof(struct spool_loop, runner)));
}

static void *watch_main(void *arg)
{
    struct spool_loop *l = arg;
    uint64_t ticks, ran;

    for (;;) {
        if (read(l->tfd, &ticks, sizeof(ticks)) < 0 && errno != EINTR &&
            errno != EAGAIN)
            break;
        pthread_mutex_lock(&l->mu);
        l->armed = false;
        if (l->stop) {
            pthread_mutex_unlock(&l->mu);
            break;
        }
        ran = base_now_ns() - l->job_ns;
        if (l->inline_running && ran < SPOOL_TAKEOVER_NS) {
            /* A later job than the one the timer was set for. */
            arm_ns(l, SPOOL_TAKEOVER_NS - ran);
            l->armed = true;
        } else if (l->inline_running) {
            l->runner.fn = runner_fn;
            if (submit_loop(l->pool, &l->runner) == STRATA_OK) {
                l->epoch++;
                l->inline_running = false;
            } else {
                LOG_WARN("no thread for the event loop: %s", strata_errmsg());
                arm(l, SPOOL_TAKEOVER_MS); /* try again */
                l->armed = true;
            }
        }
        pthread_mutex_unlock(&l->mu);
    }
    return NULL;
}

strata_err spool_loop_init(struct spool_loop *l, struct spool *pool,
                           struct event_base *base)
{
    int rc;

    memset(l, 0, sizeof(*l));
    l->pool = pool;
    l->base = base;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    l->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    if (l->tfd < 0)
        return base_fail_errno(errno, "timerfd_create");
    rc = pthread_create(&l->watch, NULL, watch_main, l);
    if (rc != 0) {
        close(l->tfd);
        l->tfd = -1;
        return base_fail_errno(rc, "cannot start the loop's watch thread");
    }
    l->watching = true;
    return STRATA_OK;
}

void spool_loop_run(struct spool_loop *l)
{
    drive(l);
    pthread_mutex_lock(&l->mu);
    while (!l->done)
        pthread_cond_wait(&l->cv, &l->mu);
    pthread_mutex_unlock(&l->mu);
}

bool spool_loop_offer(struct spool_loop *l, struct spool_job *job)
{
    if (l->offered || l->ended || !l->watching)
        return false;
    l->offered = job;
    event_base_loopbreak(l->base);
    return true;
}

void spool_loop_end(struct spool_loop *l, const struct timeval *tv)
{
    l->ended = true;
    event_base_loopexit(l->base, tv);
}

void spool_loop_fini(struct spool_loop *l)
{
    if (l->watching) {
        pthread_mutex_lock(&l->mu);
        l->stop = true;
        pthread_mutex_unlock(&l->mu);
        arm(l, 1);
        pthread_join(l->watch, NULL);
    }
    if (l->tfd >= 0)
        close(l->tfd);
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
}
