/* The session's job pool (worker/spool.c): its threads stay at the cap
 * however many jobs come, jobs past the cap wait in the queue and all
 * run, and a pool without a cap still starts a thread per waiting job. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "spool.h"

#include <pthread.h>
#include <stdlib.h>

struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool open;
    uint32_t running, peak, done;
};

struct gjob {
    struct spool_job job; /* first: the pool hands it back */
    struct gate *g;
};

static void gate_init(struct gate *g)
{
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->open = false;
    g->running = g->peak = g->done = 0;
}

static void gate_fini(struct gate *g)
{
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
}

/* A long job: holds its thread until the gate opens. */
static void gated_fn(struct spool_job *job)
{
    struct gate *g = ((struct gjob *)job)->g;

    pthread_mutex_lock(&g->mu);
    g->running++;
    if (g->running > g->peak)
        g->peak = g->running;
    pthread_cond_broadcast(&g->cv);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    g->running--;
    g->done++;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* Waits (no deadline: ctest's timeout is the bound) until n jobs run. */
static void wait_running(struct gate *g, uint32_t n)
{
    pthread_mutex_lock(&g->mu);
    while (g->running < n)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

/* 500 jobs that all block: 8 threads take 8 of them, the rest wait in
 * the queue; when the gate opens every job runs, on those 8 threads. */
static void test_spool_long_jobs_capped(void **state)
{
    enum { N = 500, CAP = 8 };
    struct gjob *jobs = calloc(N, sizeof(*jobs));
    struct spool p;
    struct gate g;

    (void)state;
    assert_non_null(jobs);
    gate_init(&g);
    spool_init(&p, CAP);
    for (int i = 0; i < N; i++) {
        jobs[i].job.fn = gated_fn;
        jobs[i].g = &g;
        assert_int_equal(spool_submit(&p, &jobs[i].job), STRATA_OK);
        assert_true(spool_threads(&p) <= CAP);
    }
    wait_running(&g, CAP);
    assert_int_equal(spool_threads(&p), CAP);
    pthread_mutex_lock(&g.mu);
    assert_int_equal(g.running, CAP);
    g.open = true;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    spool_wait_idle(&p);
    assert_int_equal(g.done, N);
    assert_true(g.peak <= CAP);
    assert_int_equal(spool_threads(&p), CAP);
    spool_fini(&p);
    gate_fini(&g);
    free(jobs);
}

static uint32_t short_done;

static void short_fn(struct spool_job *job)
{
    (void)job;
    __atomic_add_fetch(&short_done, 1, __ATOMIC_RELAXED);
}

/* Short jobs submitted as fast as they end: a job that finds its thread
 * still on its way back to park must not start another past the cap
 * (the session's pool grew that way, one thread per such race). */
static void test_spool_short_jobs_capped(void **state)
{
    enum { N = 20000, CAP = 3 };
    struct spool_job *jobs = calloc(N, sizeof(*jobs));
    struct spool p;

    (void)state;
    assert_non_null(jobs);
    short_done = 0;
    spool_init(&p, CAP);
    for (int i = 0; i < N; i++) {
        jobs[i].fn = short_fn;
        assert_int_equal(spool_submit(&p, &jobs[i]), STRATA_OK);
    }
    spool_wait_idle(&p);
    assert_int_equal(__atomic_load_n(&short_done, __ATOMIC_RELAXED), N);
    assert_true(spool_threads(&p) <= CAP);
    spool_fini(&p);
    free(jobs);
}

/* Without a cap every job that finds no parked thread gets one: 40
 * blocked jobs run at once. */
static void test_spool_uncapped_runs_all_at_once(void **state)
{
    enum { N = 40 };
    struct gjob jobs[N];
    struct spool p;
    struct gate g;

    (void)state;
    gate_init(&g);
    spool_init(&p, 0);
    for (int i = 0; i < N; i++) {
        jobs[i].job.fn = gated_fn;
        jobs[i].g = &g;
        assert_int_equal(spool_submit(&p, &jobs[i].job), STRATA_OK);
    }
    wait_running(&g, N);
    pthread_mutex_lock(&g.mu);
    g.open = true;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    spool_wait_idle(&p);
    assert_int_equal(g.done, N);
    assert_int_equal(spool_threads(&p), N);
    spool_fini(&p);
    gate_fini(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spool_long_jobs_capped),
        cmocka_unit_test(test_spool_short_jobs_capped),
        cmocka_unit_test(test_spool_uncapped_runs_all_at_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
