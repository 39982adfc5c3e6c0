/* strata_transfer_wait's timeouts (an infinite or huge one parks the
 * waiter on a condition variable: no spinning; 0 polls; a short one times
 * out; NaN is refused) and the sweep of a killed process's nvme files at
 * the next runtime creation on the same directory. A transfer is held
 * still at the "tier.chunk" fault point, so the waits are not raced
 * against the copy. */
#include "base/fault.h"
#include "testutil.h"

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <strata/tier.h>
#include <cmocka.h>

#include "tier_test.h"

static bool chunk_held(void *arg)
{
    (void)arg;
    return base_fault_held("tier.chunk") == 1;
}

struct waiter {
    strata_transfer_handle *t;
    double timeout_s;
    strata_err result;
    double cpu_s; /* the waiting thread's CPU time */
    bool started;
    bool returned;
};

static double thread_cpu_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    double cpu0 = thread_cpu_s();

    __atomic_store_n(&w->started, true, __ATOMIC_RELEASE);
    w->result = strata_transfer_wait(w->t, w->timeout_s);
    w->cpu_s = thread_cpu_s() - cpu0;
    __atomic_store_n(&w->returned, true, __ATOMIC_RELEASE);
    return NULL;
}

static bool waiter_returned(void *arg)
{
    struct waiter *w = arg;

    return __atomic_load_n(&w->returned, __ATOMIC_ACQUIRE);
}

/* A waiter with timeout_s waits for a transfer held for hold_s; it must
 * return OK having used far less CPU than the wall time it waited. */
static void wait_parks(double timeout_s, double hold_s)
{
    strata_tier_config cfg;
    strata_tier_runtime *rt;
    strata_instance *a, *b;
    struct waiter w = {.timeout_s = timeout_s};
    pthread_t th;
    double t0, wall;

    strata_tier_config_init(&cfg);
    cfg.io_threads = 1;
    assert_int_equal(strata_tier_runtime_create(&cfg, &rt), STRATA_OK);
    assert_int_equal(strata_instance_allocate(rt, "w", 1, "ram", 4096, &a),
                     STRATA_OK);
    assert_int_equal(strata_instance_allocate(rt, "w", 1, "ram", 4096, &b),
                     STRATA_OK);
    base_fault_arm("tier.chunk", 1, BASE_FAULT_HOLD);
    assert_int_equal(strata_transfer(rt, a, b, &w.t), STRATA_OK);
    assert_true(testutil_wait_until(chunk_held, NULL, 60));
    /* Polling while it is held: not done, at once. */
    assert_int_equal(strata_transfer_wait(w.t, 0), STRATA_ETIMEDOUT);
    assert_int_equal(strata_transfer_wait(w.t, 0.05), STRATA_ETIMEDOUT);
    assert_msg_has("not done after");
    assert_int_equal(strata_transfer_wait(w.t, NAN), STRATA_EINVAL);
    assert_msg_has("NaN");
    assert_false(strata_transfer_ready(w.t));
    t0 = testutil_now();
    assert_int_equal(pthread_create(&th, NULL, waiter_main, &w), 0);
    /* The hold is how long the waiter waits: a test of the wait, not of
     * a dispatch path. */
    testutil_sleep(hold_s);
    assert_true(__atomic_load_n(&w.started, __ATOMIC_ACQUIRE));
    base_fault_release("tier.chunk");
    /* A waiter that spins holding the runtime's lock keeps the transfer
     * from finishing: it never returns, and the test cannot go on. */
    if (!testutil_wait_until(waiter_returned, &w, 60)) {
        print_error("waiter with timeout %g did not return after its "
                    "transfer was released: it spins\n",
                    timeout_s);
        abort();
    }
    assert_int_equal(pthread_join(th, NULL), 0);
    wall = testutil_now() - t0;
    assert_int_equal(w.result, STRATA_OK);
    /* A spinning waiter burns CPU for the whole hold (a loaded machine
     * still gives it a good share); a parked one a few microseconds. */
    if (w.cpu_s > 0.1 * wall)
        fail_msg("waiter used %.3f s of CPU in %.3f s of waiting "
                 "(timeout %g): it spins",
                 w.cpu_s, wall, timeout_s);
    assert_true(strata_transfer_ready(w.t));
    strata_transfer_free(w.t);
    base_fault_disarm_all();
    assert_int_equal(strata_tier_runtime_destroy(rt), STRATA_OK);
}

static void test_tier_wait_infinity_parks(void **state)
{
    testutil_snapshot before;

    (void)state;
    testutil_snapshot_take(&before);
    wait_parks(INFINITY, 0.5);
    testutil_assert_clean(&before);
}

static void test_tier_wait_huge_and_negative_park(void **state)
{
    (void)state;
    wait_parks(1e300, 0.3);
    wait_parks(1e9, 0.3); /* the threshold of "forever" */
    wait_parks(-1, 0.3);
    wait_parks(-INFINITY, 0.3);
    wait_parks(3600, 0.3); /* a finite deadline that does not pass */
}

/* The child: a runtime on dir, one nvme instance, then it tells the parent
 * and waits to be killed. */
static int child_allocates(void *arg, int write_fd)
{
    const char *dir = arg;
    strata_tier_config cfg;
    strata_tier_runtime *rt;
    strata_instance *i;
    char ok = 1;

    strata_tier_config_init(&cfg);
    cfg.nvme_dir = dir;
    if (strata_tier_runtime_create(&cfg, &rt) != STRATA_OK ||
        strata_instance_allocate(rt, "k", 1, "nvme", 1 << 20, &i) != STRATA_OK)
        return 1;
    if (!testutil_write_full(write_fd, &ok, 1))
        return 2;
    for (;;)
        pause();
}

static void test_tier_killed_process_files_swept(void **state)
{
    testutil_snapshot before;
    strata_tier_config cfg;
    strata_tier_runtime *rt;
    strata_instance *mine;
    char dir[64], byte, stray[128];
    int fd, status;
    pid_t pid;
    FILE *f;

    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/strata-tier-sweep-XXXXXX");
    assert_non_null(mkdtemp(dir));
    testutil_snapshot_take(&before);
    pid = testutil_spawn(child_allocates, dir, &fd);
    assert_true(pid > 0);
    assert_true(testutil_read_full(fd, &byte, 1, 60));
    close(fd);
    assert_int_equal(count_files(dir), 1);
    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_true(testutil_wait_child(pid, 60, &status));
    assert_true(WIFSIGNALED(status));
    /* Its file outlived it; names that are not a dead process's stay. */
    assert_int_equal(count_files(dir), 1);
    snprintf(stray, sizeof(stray), "%s/strata-tier-notes.txt", dir);
    f = fopen(stray, "w");
    assert_non_null(f);
    fclose(f);
    strata_tier_config_init(&cfg);
    cfg.nvme_dir = dir;
    assert_int_equal(strata_tier_runtime_create(&cfg, &rt), STRATA_OK);
    assert_int_equal(count_files(dir), 1); /* only the stray text file */
    /* A live runtime's files survive another runtime's sweep. */
    assert_int_equal(strata_instance_allocate(rt, "k", 2, "nvme", 4096, &mine),
                     STRATA_OK);
    {
        strata_tier_runtime *rt2;

        assert_int_equal(strata_tier_runtime_create(&cfg, &rt2), STRATA_OK);
        assert_int_equal(count_files(dir), 2);
        assert_int_equal(strata_tier_runtime_destroy(rt2), STRATA_OK);
    }
    assert_int_equal(strata_tier_runtime_destroy(rt), STRATA_OK);
    assert_int_equal(unlink(stray), 0);
    assert_int_equal(count_files(dir), 0);
    rmdir(dir);
    testutil_assert_clean(&before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tier_wait_infinity_parks),
        cmocka_unit_test(test_tier_wait_huge_and_negative_park),
        cmocka_unit_test(test_tier_killed_process_files_swept),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
