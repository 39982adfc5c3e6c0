/*
 * Worker lifecycle through the public API: configuration checks, init and
 * destroy of real process trees, accessors, idle CPU use.
 */
#define _GNU_SOURCE
#include "it_kernels.h"

#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static strata_callable k_whoami;
static strata_callable s_whoami;
static strata_callable k_slow_write;
/* Anonymous shared page mapped before any fork: chips inherit it, and it
 * outlives a worker's buffers. */
static uint32_t *g_shared;

/* Writes {chip id, pid} into its two-word tensor. */
static strata_err whoami_kernel(strata_chip *chip, const strata_args *a)
{
    uint32_t *out = it_arg_u32(a, 0);
    if (!out || it_arg_count(a, 0) != 2)
        return STRATA_EINVAL;
    out[0] = (uint32_t)strata_chip_id(chip);
    out[1] = (uint32_t)getpid();
    return STRATA_OK;
}

/* Writes its pid into its one-word tensor. */
static strata_err whoami_sub(const strata_args *a)
{
    uint32_t *out = it_arg_u32(a, 0);
    if (!out || it_arg_count(a, 0) != 1)
        return STRATA_EINVAL;
    out[0] = (uint32_t)getpid();
    return STRATA_OK;
}

/* Takes ~50 ms, then writes 0xfeed into its OUT tensor. */
static strata_err slow_write_kernel(strata_chip *chip, const strata_args *a)
{
    (void)chip;
    testutil_busy(0.05);
    it_arg_u32(a, 0)[0] = 0xfeed;
    testutil_store_u32(&g_shared[0], 0xfeed);
    return STRATA_OK;
}

static void cfg_with(strata_worker_config *cfg, const int *ids, size_t n)
{
    strata_worker_config_init(cfg, 3);
    cfg->chip_ids = ids;
    cfg->num_chips = n;
}

/* Expects strata_worker_create(cfg) to fail with want (or just to fail when
 * want is STRATA_OK), with a detail message, and nothing to leak. */
static void expect_create_fails(const strata_worker_config *cfg,
                                strata_err want)
{
    testutil_snapshot before;
    testutil_snapshot_take(&before);
    strata_worker *w = NULL;
    strata_err e = it_worker_create(cfg, &w);
    if (want == STRATA_OK)
        assert_int_not_equal(e, STRATA_OK);
    else
        assert_int_equal(e, want);
    assert_null(w); /* output written only on success */
    assert_true(strata_errmsg()[0] != '\0');
    testutil_assert_clean(&before);
}

static void test_lifecycle_config_init_defaults(void **state)
{
    (void)state;
    strata_worker_config cfg;
    memset(&cfg, 0xa5, sizeof(cfg));
    strata_worker_config_init(&cfg, 3);
    assert_int_equal(cfg.level, 3);
    assert_true(cfg.platform == NULL || strcmp(cfg.platform, "sim") == 0);
    assert_null(cfg.chip_ids);
    assert_int_equal(cfg.num_chips, 0);
    assert_int_equal(cfg.num_sub_workers, 0);
    assert_true(cfg.comm_profile == NULL ||
                strcmp(cfg.comm_profile, "sim") == 0);
    assert_true(fabs(cfg.startup_timeout_s - 120.0) < 1e-9);
}

static void test_lifecycle_bad_level_refused(void **state)
{
    (void)state;
    strata_worker_config cfg;
    static const int one[] = {0};
    cfg_with(&cfg, one, 1);
    cfg.level = 4; /* an L4 drives nodes, never chips */
    expect_create_fails(&cfg, STRATA_EINVAL);
    cfg_with(&cfg, NULL, 0);
    cfg.level = 2;
    expect_create_fails(&cfg, STRATA_OK);
    cfg.level = 0;
    expect_create_fails(&cfg, STRATA_EINVAL);
    cfg.level = -1;
    expect_create_fails(&cfg, STRATA_EINVAL);
}

static void test_lifecycle_bad_chip_ids_einval(void **state)
{
    (void)state;
    strata_worker_config cfg;
    static const int dup[] = {0, 1, 0};
    static const int neg[] = {0, -1};
    cfg_with(&cfg, dup, 3);
    expect_create_fails(&cfg, STRATA_EINVAL);
    cfg_with(&cfg, neg, 2);
    expect_create_fails(&cfg, STRATA_EINVAL);
    cfg_with(&cfg, NULL, 2);
    expect_create_fails(&cfg, STRATA_EINVAL);
}

static void test_lifecycle_bad_names_einval(void **state)
{
    (void)state;
    strata_worker_config cfg;
    static const int ids[] = {0};
    cfg_with(&cfg, ids, 1);
    cfg.platform = "tpu";
    expect_create_fails(&cfg, STRATA_EINVAL);
    cfg_with(&cfg, ids, 1);
    cfg.comm_profile = "no-such-profile";
    expect_create_fails(&cfg, STRATA_EINVAL);
    cfg_with(&cfg, ids, 1);
    cfg.startup_timeout_s = -1.0;
    expect_create_fails(&cfg, STRATA_EINVAL);
}

static void test_lifecycle_null_args_einval(void **state)
{
    (void)state;
    strata_worker_config cfg;
    strata_worker *w = NULL;
    cfg_with(&cfg, NULL, 0);
    assert_int_equal(it_worker_create(NULL, &w), STRATA_EINVAL);
    assert_null(w);
}

static void test_lifecycle_destroy_null_ok(void **state)
{
    (void)state;
    it_ok(it_worker_destroy(NULL));
    strata_run_free(NULL);
    strata_args_destroy(NULL);
    it_ok(strata_buffer_release(NULL));
}

static void test_lifecycle_create_destroy_without_init_clean(void **state)
{
    (void)state;
    testutil_snapshot before;
    testutil_snapshot_take(&before);
    static const int ids[] = {3, 5};
    strata_worker_config cfg;
    strata_worker *w = NULL;
    strata_buffer *b = NULL;
    cfg_with(&cfg, ids, 2);
    cfg.num_sub_workers = 1;
    it_ok(it_worker_create(&cfg, &w));
    assert_int_equal(strata_worker_num_chips(w), 2);
    assert_int_equal(strata_worker_num_sub_workers(w), 1);
    assert_int_equal(strata_worker_chip_pid(w, 3), -1); /* not started */
    /* Buffers are usable between create and init; destroy frees them. */
    it_ok(strata_worker_create_buffer(w, 4096, &b));
    assert_int_equal(strata_buffer_size(b), 4096);
    it_ok(it_worker_destroy(w));
    testutil_assert_clean(&before);
}

static void test_lifecycle_two_workers_buffers_distinct(void **state)
{
    (void)state;
    testutil_snapshot before;
    testutil_snapshot_take(&before);
    strata_worker_config cfg;
    strata_worker *w1 = NULL, *w2 = NULL;
    strata_buffer *b1, *b2;
    cfg_with(&cfg, NULL, 0);
    it_ok(it_worker_create(&cfg, &w1));
    it_ok(it_worker_create(&cfg, &w2));
    /* Segment names must not collide between workers of one process. */
    it_ok(strata_worker_create_buffer(w1, 64, &b1));
    it_ok(strata_worker_create_buffer(w2, 64, &b2));
    it_u32(b1)[0] = 1;
    it_u32(b2)[0] = 2;
    assert_int_equal(it_u32(b1)[0], 1);
    it_ok(it_worker_destroy(w1));
    assert_int_equal(it_u32(b2)[0], 2);
    it_ok(it_worker_destroy(w2));
    testutil_assert_clean(&before);
}

static void test_lifecycle_init_twice_estate(void **state)
{
    (void)state;
    testutil_snapshot before;
    testutil_snapshot_take(&before);
    static const int ids[] = {0};
    strata_worker *w = NULL;
    it_ok(it_worker_start(ids, 1, 0, &w));
    it_expect(STRATA_ESTATE, strata_worker_init(w));
    it_ok(it_worker_destroy(w));
    testutil_assert_clean(&before);
}

static strata_err empty_orch(strata_orch *o, const strata_args *a, void *u)
{
    (void)a;
    (void)u;
    return strata_orch_worker(o) ? STRATA_OK : STRATA_EINVAL;
}

static void test_lifecycle_run_before_init_estate(void **state)
{
    (void)state;
    testutil_snapshot before;
    testutil_snapshot_take(&before);
    static const int ids[] = {0};
    strata_worker_config cfg;
    strata_worker *w = NULL;
    cfg_with(&cfg, ids, 1);
    it_ok(it_worker_create(&cfg, &w));
    it_expect(STRATA_ESTATE, strata_worker_run(w, empty_orch, NULL, NULL));
    it_ok(it_worker_destroy(w));
    testutil_assert_clean(&before);
}

static void test_lifecycle_no_children_runs_empty(void **state)
{
    (void)state;
    testutil_snapshot before;
    testutil_snapshot_take(&before);
    strata_worker *w = NULL;
    it_ok(it_worker_start(NULL, 0, 0, &w));
    it_ok(strata_worker_run(w, empty_orch, NULL, NULL));
    it_ok(it_worker_destroy(w));
    testutil_assert_clean(&before);
}

struct whoami_ctx {
    strata_buffer *chips; /* 2 words per chip */
    strata_buffer *subs;  /* 1 word per sub task */
    const int *ids;
    size_t n, subs_n;
};

static strata_err whoami_orch(strata_orch *o, const strata_args *args,
                              void *user)
{
    (void)args;
    struct whoami_ctx *c = user;
    for (size_t i = 0; i < c->n; i++) {
        strata_args *a = NULL;
        it_try(it_args1(c->chips, 2 * i, 2, STRATA_INOUT, &a));
        strata_err e = strata_orch_submit_next_level(o, k_whoami, a, c->ids[i]);
        strata_args_destroy(a);
        it_try(e);
    }
    for (size_t i = 0; i < c->subs_n; i++) {
        strata_args *a = NULL;
        it_try(it_args1(c->subs, i, 1, STRATA_INOUT, &a));
        strata_err e = strata_orch_submit_sub(o, s_whoami, a);
        strata_args_destroy(a);
        it_try(e);
    }
    return STRATA_OK;
}

static bool is_sub_pid(strata_worker *w, size_t nsubs, pid_t pid)
{
    for (size_t i = 0; i < nsubs; i++)
        if (strata_worker_sub_pid(w, i) == pid)
            return true;
    return false;
}

static void test_lifecycle_tree_runs_in_children_and_cleans(void **state)
{
    (void)state;
    testutil_snapshot before;
    testutil_snapshot_take(&before);
    static const int ids[] = {7, 2, 4, 0, 1, 3, 5, 6};
    const size_t n = 8, nsubs = 4, ntasks = 8;
    strata_worker *w = NULL;
    it_ok(it_worker_start(ids, n, nsubs, &w));
    assert_int_equal(strata_worker_num_chips(w), n);
    assert_int_equal(strata_worker_num_sub_workers(w), nsubs);
    assert_int_equal(strata_worker_chip_pid(w, 99), -1);
    assert_int_equal(strata_worker_sub_pid(w, nsubs), -1);

    struct whoami_ctx c = {.ids = ids, .n = n, .subs_n = ntasks};
    it_ok(strata_worker_create_buffer(w, 2 * n * sizeof(uint32_t), &c.chips));
    it_ok(strata_worker_create_buffer(w, ntasks * sizeof(uint32_t), &c.subs));
    it_ok(strata_worker_run(w, whoami_orch, NULL, &c));
    for (size_t i = 0; i < n; i++) {
        int pid = strata_worker_chip_pid(w, ids[i]);
        assert_true(pid > 0 && pid != getpid());
        assert_true(testutil_pid_exists(pid));
        assert_int_equal(it_u32(c.chips)[2 * i], (uint32_t)ids[i]);
        assert_int_equal(it_u32(c.chips)[2 * i + 1], (uint32_t)pid);
    }
    for (size_t i = 0; i < ntasks; i++)
        assert_true(is_sub_pid(w, nsubs, (pid_t)it_u32(c.subs)[i]));
    it_ok(strata_buffer_release(c.subs));
    it_ok(it_worker_destroy(w)); /* frees c.chips too */
    testutil_assert_clean(&before);
}

static void test_lifecycle_idle_children_use_no_cpu(void **state)
{
    (void)state;
    testutil_snapshot before;
    testutil_snapshot_take(&before);
    static const int ids[] = {0, 1, 2};
    strata_worker *w = NULL;
    struct whoami_ctx c = {.ids = ids, .n = 3, .subs_n = 2};
    it_ok(it_worker_start(ids, 3, 2, &w));
    it_ok(strata_worker_create_buffer(w, 64, &c.chips));
    it_ok(strata_worker_create_buffer(w, 64, &c.subs));
    /* One run first so every child has been through its task loop. */
    it_ok(strata_worker_run(w, whoami_orch, NULL, &c));
    testutil_sleep(0.05); /* let the brief post-task spin end */

    pid_t pids[5];
    long t0[5];
    for (size_t i = 0; i < 5; i++) {
        pids[i] = i < 3 ? strata_worker_chip_pid(w, ids[i])
                        : strata_worker_sub_pid(w, i - 3);
        t0[i] = testutil_proc_cpu_ticks(pids[i]);
        assert_true(t0[i] >= 0);
    }
    struct timespec c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    testutil_sleep(0.3);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    for (size_t i = 0; i < 5; i++) {
        long used = testutil_proc_cpu_ticks(pids[i]) - t0[i];
        if (used >= 5)
            fail_msg("child %zu (pid %d) used %ld ticks in 300 ms idle", i,
                     (int)pids[i], used);
    }
    /* The scheduler thread must park too: < 50 ms CPU in 300 ms. */
    double self = (double)(c1.tv_sec - c0.tv_sec) +
                  (double)(c1.tv_nsec - c0.tv_nsec) * 1e-9;
    if (self >= 0.05)
        fail_msg("orchestrating process used %.3f s CPU while idle", self);
    it_ok(it_worker_destroy(w));
    testutil_assert_clean(&before);
}

static strata_err slow_orch(strata_orch *o, const strata_args *a, void *user)
{
    (void)a;
    return it_submit1(o, k_slow_write, 0, user, 0, 1, STRATA_OUT);
}

static void test_lifecycle_destroy_drains_unfinished_run(void **state)
{
    (void)state;
    testutil_snapshot before;
    testutil_snapshot_take(&before);
    static const int ids[] = {0};
    strata_worker *w = NULL;
    strata_buffer *b = NULL;
    strata_run *run = NULL;
    it_ok(it_worker_start(ids, 1, 0, &w));
    it_ok(strata_worker_create_buffer(w, 64, &b));
    it_ok(strata_worker_submit(w, slow_orch, NULL, b, &run));
    strata_run_free(run); /* the run goes on and cleans up at its fence */
    testutil_store_u32(&g_shared[0], 0);
    it_ok(it_worker_destroy(w)); /* drains the run first */
    assert_int_equal(testutil_load_u32(&g_shared[0]), 0xfeed);
    testutil_assert_clean(&before);
}

/* A handle held past strata_worker_destroy: waiting gives the run's
 * result, and freeing it frees only it (the scheduler is gone). */
static void test_lifecycle_run_handle_outlives_worker(void **state)
{
    (void)state;
    testutil_snapshot before;
    testutil_snapshot_take(&before);
    static const int ids[] = {0};
    strata_worker *w = NULL;
    strata_buffer *b = NULL;
    strata_run *done = NULL, *waited = NULL;
    it_ok(it_worker_start(ids, 1, 0, &w));
    it_ok(strata_worker_create_buffer(w, 64, &b));
    it_ok(strata_worker_submit(w, slow_orch, NULL, b, &done));
    it_ok(strata_run_wait(done, 10.0));
    it_ok(strata_worker_submit(w, slow_orch, NULL, b, &waited));
    it_ok(it_worker_destroy(w)); /* drains `waited` */
    it_ok(strata_run_wait(done, 0));
    it_ok(strata_run_wait(waited, 0));
    it_ok(strata_run_wait(waited, -1));
    strata_run_free(done);
    strata_run_free(waited);
    testutil_assert_clean(&before);
}

static strata_err destroy_own_orch(strata_orch *o, const strata_args *a,
                                   void *user)
{
    strata_worker *w = user;
    strata_err *got = (strata_err *)(uintptr_t)strata_args_scalar(a, 0);

    got[0] = strata_worker_destroy(w);
    (void)o;
    return STRATA_OK;
}

/* Destroy from inside one of the worker's own orch fns could only wait
 * for that fn: refused, and the worker goes on. */
static void test_lifecycle_waits_on_own_fn_estate(void **state)
{
    (void)state;
    testutil_snapshot before;
    testutil_snapshot_take(&before);
    static const int ids[] = {0};
    strata_worker *w = NULL;
    strata_args *a = NULL;
    strata_err got = STRATA_OK;
    it_ok(it_worker_start(ids, 1, 0, &w));
    it_ok(strata_args_create(&a));
    it_ok(strata_args_add_scalar(a, (uint64_t)(uintptr_t)&got));
    it_ok(strata_worker_run(w, destroy_own_orch, a, w));
    assert_int_equal(got, STRATA_ESTATE);
    strata_args_destroy(a);
    it_ok(strata_worker_run(w, empty_orch, NULL, NULL)); /* still alive */
    it_ok(it_worker_destroy(w));
    testutil_assert_clean(&before);
}

/* A process forked from the worker's has a copy it may neither use nor
 * destroy; the worker itself goes on untouched. */
static void test_lifecycle_forked_copy_estate(void **state)
{
    (void)state;
    testutil_snapshot before;
    testutil_snapshot_take(&before);
    static const int ids[] = {0, 1};
    strata_worker *w = NULL;
    strata_buffer *b = NULL, *kept = NULL;
    strata_run *run = NULL;
    uint32_t word = 7;
    int status = 0;
    pid_t pid;
    it_ok(it_worker_start(ids, 2, 0, &w));
    it_ok(strata_worker_create_buffer(w, 64, &kept));
    it_ok(strata_worker_submit(w, empty_orch, NULL, NULL, &run));
    pid = fork();
    if (pid == 0) {
        int bad = 0;

        bad |= strata_worker_run(w, empty_orch, NULL, NULL) != STRATA_ESTATE;
        bad |= strstr(strata_errmsg(), "forked") == NULL;
        bad |= strata_worker_create_buffer(w, 64, &b) != STRATA_ESTATE;
        bad |= strata_worker_init(w) != STRATA_ESTATE;
        bad |= strstr(strata_errmsg(), "forked") == NULL;
        /* The parent's buffer and run: neither touched from here. */
        bad |= strata_buffer_write(kept, 0, &word, 4) != STRATA_ESTATE;
        bad |= strata_buffer_read(kept, 0, &word, 4) != STRATA_ESTATE;
        bad |= strata_buffer_release(kept) != STRATA_ESTATE;
        bad |= strata_run_wait(run, -1) != STRATA_ESTATE;
        bad |= strstr(strata_errmsg(), "forked") == NULL;
        bad |= strata_worker_destroy(w) != STRATA_ESTATE;
        _exit(bad ? 1 : 0);
    }
    assert_true(pid > 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    it_ok(strata_run_wait(run, -1));
    strata_run_free(run);
    /* The buffer is still the parent's: its name and memory are there. */
    it_ok(strata_worker_run(w, slow_orch, NULL, kept));
    it_ok(strata_buffer_release(kept));
    /* The chips were never touched by the child. */
    it_ok(strata_worker_create_buffer(w, 64, &b));
    it_ok(strata_worker_run(w, slow_orch, NULL, b));
    it_ok(strata_worker_run(w, slow_orch, NULL, b));
    it_ok(it_worker_destroy(w));
    testutil_assert_clean(&before);
}

/* A program that ignores SIGCHLD has its children reaped by the kernel:
 * waitpid then finds none. A dead chip is still a death (STRATA_EPEER,
 * saying its cause is unknown), and destroy sees the others exit rather
 * than wait its grace periods out and signal pids that may be reused. */
static void test_lifecycle_sigchld_ignored(void **state)
{
    (void)state;
    testutil_snapshot before;
    static const int ids[] = {0, 1};
    struct sigaction ign = {.sa_handler = SIG_IGN}, old;
    strata_worker *w = NULL;
    strata_buffer *b = NULL;
    strata_err e, e2, de;
    char msg[2][STRATA_ERRMSG_MAX];
    pid_t victim;

    testutil_snapshot_take(&before);
    assert_int_equal(sigaction(SIGCHLD, &ign, &old), 0);
    it_ok(it_worker_start(ids, 2, 0, &w));
    it_ok(strata_worker_create_buffer(w, 64, &b));
    victim = strata_worker_chip_pid(w, 0);
    assert_true(victim > 0);
    assert_int_equal(kill(victim, SIGKILL), 0);
    /* The first run may meet the death as it happens or after it was
     * seen (busy machine); the second meets a chip known dead. Both say
     * how it died. */
    e = strata_worker_run(w, slow_orch, NULL, b);
    snprintf(msg[0], sizeof(msg[0]), "%s", strata_errmsg());
    e2 = strata_worker_run(w, slow_orch, NULL, b);
    snprintf(msg[1], sizeof(msg[1]), "%s", strata_errmsg());
    print_message("runs: %s: %s / %s: %s\n", strata_errname(e), msg[0],
                  strata_errname(e2), msg[1]);
    it_ok(strata_buffer_release(b));
    de = it_worker_destroy(w);
    /* Restored before any assertion: a failure must not leave SIGCHLD
     * ignored for the tests after this one. */
    assert_int_equal(sigaction(SIGCHLD, &old, NULL), 0);
    assert_true(de == STRATA_OK || de == STRATA_EPEER);
    assert_int_equal(e, STRATA_EPEER);
    assert_int_equal(e2, STRATA_EPEER);
    assert_non_null(strstr(msg[0], "how is unknown"));
    assert_non_null(strstr(msg[1], "how is unknown"));
    testutil_assert_clean(&before);
}

/* More children than file descriptors left: init fails naming the limit
 * (it polled more descriptors than it may, EINVAL, or, with a few fewer
 * children, went on without pidfds and polled for deaths), and rolls the
 * tree back. */
static void test_lifecycle_fd_limit_names_ulimit(void **state)
{
    (void)state;
    testutil_snapshot before;
    enum { CHIPS = 24 };
    int ids[CHIPS];
    strata_worker_config cfg;
    strata_worker *w = NULL;
    struct rlimit old, lim;
    int lowest;
    strata_err e;

    testutil_snapshot_take(&before);
    for (int i = 0; i < CHIPS; i++)
        ids[i] = i;
    cfg_with(&cfg, ids, CHIPS);
    it_ok(it_worker_create(&cfg, &w));
    lowest = dup(STDERR_FILENO);
    assert_true(lowest >= 0);
    close(lowest);
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
    lim = old;
    lim.rlim_cur = (rlim_t)lowest + 12; /* room for a few children only */
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &lim), 0);
    e = strata_worker_init(w);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
    print_message("init: %s: %s\n", strata_errname(e), strata_errmsg());
    assert_int_equal(e, STRATA_ESYS);
    assert_non_null(strstr(strata_errmsg(), "ulimit -n"));
    assert_int_equal(testutil_new_children(&before), 0);
    it_ok(it_worker_destroy(w));
    testutil_assert_clean(&before);
}

static void test_lifecycle_tiny_startup_timeout_rolls_back(void **state)
{
    (void)state;
    testutil_snapshot before;
    testutil_snapshot_take(&before);
    static const int ids[] = {0, 1, 2, 3};
    strata_worker_config cfg;
    strata_worker *w = NULL;
    cfg_with(&cfg, ids, 4);
    cfg.num_sub_workers = 2;
    cfg.startup_timeout_s = 1e-6;
    it_ok(it_worker_create(&cfg, &w));
    strata_err e = strata_worker_init(w);
    if (e != STRATA_OK && e != STRATA_ETIMEDOUT)
        fail_msg("init with a 1 us deadline: %s (%s)", strata_errname(e),
                 strata_errmsg());
    /* Rolled back on failure: no child may be left even before destroy. */
    if (e == STRATA_ETIMEDOUT)
        assert_int_equal(testutil_new_children(&before), 0);
    it_ok(it_worker_destroy(w));
    testutil_assert_clean(&before);
}

static int setup(void **state)
{
    (void)state;
    g_shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (g_shared == MAP_FAILED)
        return -1;
    it_register(kernel, "lifecycle.whoami", whoami_kernel, &k_whoami);
    it_register(sub, "lifecycle.whoami_sub", whoami_sub, &s_whoami);
    it_register(kernel, "lifecycle.slow_write", slow_write_kernel,
                &k_slow_write);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return munmap(g_shared, 4096);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_lifecycle_config_init_defaults,
                                  it_teardown),
        cmocka_unit_test_teardown(test_lifecycle_bad_level_refused,
                                  it_teardown),
        cmocka_unit_test_teardown(test_lifecycle_bad_chip_ids_einval,
                                  it_teardown),
        cmocka_unit_test_teardown(test_lifecycle_bad_names_einval, it_teardown),
        cmocka_unit_test_teardown(test_lifecycle_null_args_einval, it_teardown),
        cmocka_unit_test_teardown(test_lifecycle_destroy_null_ok, it_teardown),
        cmocka_unit_test_teardown(
            test_lifecycle_create_destroy_without_init_clean, it_teardown),
        cmocka_unit_test_teardown(test_lifecycle_two_workers_buffers_distinct,
                                  it_teardown),
        cmocka_unit_test_teardown(test_lifecycle_init_twice_estate,
                                  it_teardown),
        cmocka_unit_test_teardown(test_lifecycle_run_before_init_estate,
                                  it_teardown),
        cmocka_unit_test_teardown(test_lifecycle_no_children_runs_empty,
                                  it_teardown),
        cmocka_unit_test_teardown(
            test_lifecycle_tree_runs_in_children_and_cleans, it_teardown),
        cmocka_unit_test_teardown(test_lifecycle_idle_children_use_no_cpu,
                                  it_teardown),
        cmocka_unit_test_teardown(test_lifecycle_destroy_drains_unfinished_run,
                                  it_teardown),
        cmocka_unit_test_teardown(
            test_lifecycle_tiny_startup_timeout_rolls_back, it_teardown),
        cmocka_unit_test_teardown(test_lifecycle_run_handle_outlives_worker,
                                  it_teardown),
        cmocka_unit_test_teardown(test_lifecycle_waits_on_own_fn_estate,
                                  it_teardown),
        cmocka_unit_test(test_lifecycle_sigchld_ignored),
        cmocka_unit_test(test_lifecycle_fd_limit_names_ulimit),
        cmocka_unit_test_teardown(test_lifecycle_forked_copy_estate,
                                  it_teardown),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
