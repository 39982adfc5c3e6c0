/* A session's pool of job threads: jobs that may wait (tasks, commands
 * that drive chips) run off the event loop on threads that are kept for
 * the next job instead of being created and torn down for each. The pool
 * never has more than its max_threads threads: past them a job waits in
 * the queue for the next thread that finishes one. Private to worker/. */
#ifndef WORKER_SPOOL_H
#define WORKER_SPOOL_H

#include "strata/strata.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/time.h>

struct spool_job {
    void (*fn)(struct spool_job *job); /* owns job once called */
    struct spool_job *next;
};

struct spool {
    pthread_mutex_t mu;
    pthread_cond_t work; /* a job was queued, or stop */
    pthread_cond_t idle; /* running reached 0 */
    struct spool_job *head, *tail;
    uint32_t queued;       /* jobs no thread has taken yet */
    uint32_t running;      /* jobs queued or running */
    uint32_t idle_threads; /* waiting for work */
    uint32_t max_threads;  /* 0: no cap */
    bool stop;
    pthread_t *tids; /* every thread, joined by spool_fini */
    size_t num_tids, cap_tids;
};

/* max_threads 0: no cap. */
void spool_init(struct spool *p, uint32_t max_threads);
/* Queues job; a parked thread takes it, or a new one is started while the
 * pool has fewer than max_threads, else it waits for a busy thread to
 * finish its job. STRATA_ESYS or STRATA_ENOMEM (job not queued) when the
 * pool has no thread at all and none can be had. */
strata_err spool_submit(struct spool *p, struct spool_job *job);
/* Waits until no job is queued or running. */
void spool_wait_idle(struct spool *p);
/* Ends and joins every thread (call once idle), frees the pool. */
void spool_fini(struct spool *p);
/* Threads the pool has started (they stay until spool_fini). */
size_t spool_threads(struct spool *p);

/* An event loop that runs a job on the thread that read it: a loop
 * callback offers the job (spool_loop_offer); the loop breaks and its
 * thread runs the job at once, then goes back to the loop. If the job runs
 * long, a watch thread hands the loop to a pool thread within a couple of
 * milliseconds, so the loop never waits behind a long job, and a short one
 * is answered without waking any thread. Fields marked (loop) belong to
 * whichever thread runs the loop; the others are under mu. */
struct event_base;
struct spool_loop {
    struct spool *pool;
    struct event_base *base;
    struct spool_job *offered; /* (loop) run after this iteration */
    bool ended;                /* (loop) spool_loop_end: no more offers */
    struct spool_job runner;   /* runs the loop on a pool thread */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;           /* the loop has ended, on whichever thread */
    bool inline_running; /* a thread left the loop to run a job */
    uint64_t epoch;      /* of that job; bumped when the loop moves */
    uint64_t job_ns;     /* when that job began (base_now_ns) */
    bool armed;          /* the timer is set and has not fired yet */
    bool stop;           /* the watch thread should leave */
    int tfd;             /* timerfd the watch thread waits on */
    pthread_t watch;
    bool watching;
};

/* STRATA_ESYS when the watch thread or its timer cannot be had. Call
 * spool_loop_fini either way. */
strata_err spool_loop_init(struct spool_loop *l, struct spool *pool,
                           struct event_base *base);
/* Runs the loop (on this thread, then maybe on pool threads) until it
 * ends, with any job offered meanwhile; returns once the loop has ended. */
void spool_loop_run(struct spool_loop *l);
/* From a loop callback: true when job will run on this thread right after
 * the callback; false (nothing done) when another job is offered already
 * or the loop is ending: submit it to the pool instead. */
bool spool_loop_offer(struct spool_loop *l, struct spool_job *job);
/* From a loop callback: the loop ends after this iteration
 * (event_base_loopexit with tv, which may be NULL). */
void spool_loop_end(struct spool_loop *l, const struct timeval *tv);
void spool_loop_fini(struct spool_loop *l);

#endif
