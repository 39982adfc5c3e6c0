/* LRU spill of a worker's idle buffers (docs/tiers.md, "Worker budgets"):
 * the least recently used idle buffer goes to a file in spill_dir when a
 * new one would exceed the ram budget, and comes back, bytes intact, when
 * the host or a task names it; files go on restore, release and destroy;
 * a failed spill write leaves everything as it was; runs on two threads
 * over more buffers than the budget holds all succeed; a process killed
 * during a spill leaves a file the next worker on that directory removes;
 * a spill file that cannot be opened (its directory or itself gone) is
 * STRATA_EIO, like one that cannot be written or read; an nvme budget
 * caps the bytes spilled. */
#include "base/fault.h"
#include "testutil.h"

#include <dirent.h>
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
#include <unistd.h>

#include <strata/strata.h>
#include <strata/tier.h>
#include <cmocka.h>

#include "tier_test.h"

#define KiB 1024u
#define BUF (64 * KiB)

static void make_dir(char *dir, size_t cap)
{
    snprintf(dir, cap, "/tmp/strata-spill-test-XXXXXX");
    assert_non_null(mkdtemp(dir));
}

static strata_worker *lru_worker(const char *dir, const char *budgets,
                                 const int *chips, size_t num_chips)
{
    strata_worker_config cfg;
    strata_worker *w = NULL;

    strata_worker_config_init(&cfg, 3);
    cfg.budgets = budgets;
    cfg.spill_dir = dir;
    cfg.eviction = STRATA_EVICT_LRU;
    cfg.chip_ids = chips;
    cfg.num_chips = num_chips;
    assert_int_equal(strata_worker_create(&cfg, &w), STRATA_OK);
    return w;
}

static void fill(strata_buffer *b, unsigned char v)
{
    unsigned char *p = strata_buffer_data(b);

    assert_non_null(p);
    memset(p, v, strata_buffer_size(b));
}

static void expect_bytes(strata_buffer *b, unsigned char v)
{
    const unsigned char *p = strata_buffer_data(b);

    assert_non_null(p);
    for (size_t i = 0; i < strata_buffer_size(b); i++)
        if (p[i] != v)
            fail_msg("byte %zu is %u, expected %u", i, p[i], v);
}

static strata_tier_report report(strata_worker *w)
{
    strata_tier_report r;

    assert_int_equal(strata_worker_memory_report(w, &r), STRATA_OK);
    return r;
}

static void test_spill_lru_and_restore_on_access(void **state)
{
    testutil_snapshot before;
    strata_buffer *a, *b, *c, *big = NULL;
    strata_tier_report r;
    strata_worker *w;
    char dir[64], json[1024];
    size_t len;

    (void)state;
    make_dir(dir, sizeof(dir));
    testutil_snapshot_take(&before);
    w = lru_worker(dir, "ram=128KiB", NULL, 0);
    /* The odd size: a file of whole pages, a buffer of its own size. */
    assert_int_equal(strata_worker_create_buffer(w, BUF, &a), STRATA_OK);
    assert_int_equal(strata_worker_create_buffer(w, BUF - 100, &b), STRATA_OK);
    fill(a, 0xa1);
    fill(b, 0xb2); /* b is now the most recently used */
    assert_int_equal(count_files(dir), 0);
    /* c does not fit: a, the least recently used, spills. */
    assert_int_equal(strata_worker_create_buffer(w, BUF, &c), STRATA_OK);
    r = report(w);
    assert_int_equal(r.spills, 1);
    assert_int_equal(r.tiers[STRATA_TIER_RAM].live, 2 * BUF - 100);
    assert_int_equal(r.tiers[STRATA_TIER_RAM].instances, 2);
    assert_int_equal(r.tiers[STRATA_TIER_NVME].live, BUF);
    assert_int_equal(r.tiers[STRATA_TIER_NVME].instances, 1);
    assert_int_equal(r.moved[STRATA_TIER_RAM][STRATA_TIER_NVME], BUF);
    assert_true(r.tiers[STRATA_TIER_RAM].peak <= 128 * KiB);
    assert_int_equal(count_files(dir), 1);
    /* Touching a restores it, spilling b (c is newer); its file goes. */
    expect_bytes(a, 0xa1);
    r = report(w);
    assert_int_equal(r.spills, 2);
    assert_int_equal(r.restores, 1);
    assert_int_equal(r.moved[STRATA_TIER_NVME][STRATA_TIER_RAM], BUF);
    assert_int_equal(count_files(dir), 1);
    /* strata_buffer_read restores as well. */
    {
        unsigned char byte = 0;

        assert_int_equal(strata_buffer_read(b, BUF - 101, &byte, 1), STRATA_OK);
        assert_int_equal(byte, 0xb2);
    }
    expect_bytes(b, 0xb2);
    /* Larger than the whole budget: nothing to spill would help. */
    assert_int_equal(strata_worker_create_buffer(w, 128 * KiB + 1, &big),
                     STRATA_EBUDGET);
    assert_msg_has("larger than the whole budget");
    assert_null(big);
    /* Releasing a spilled buffer removes its file. */
    r = report(w);
    assert_int_equal(r.tiers[STRATA_TIER_NVME].instances, 1);
    assert_int_equal(count_files(dir), 1);
    assert_int_equal(strata_buffer_release(c), STRATA_OK); /* c spilled */
    r = report(w);
    assert_int_equal(r.tiers[STRATA_TIER_NVME].live, 0);
    assert_int_equal(count_files(dir), 0);
    assert_int_equal(strata_tier_report_json(&r, json, sizeof(json), &len),
                     STRATA_OK);
    assert_non_null(strstr(json, "\"spills\":3"));
    assert_non_null(strstr(json, "\"restores\":2"));
    /* Destroy removes the files of buffers still spilled. */
    assert_int_equal(strata_worker_create_buffer(w, BUF, &c), STRATA_OK);
    assert_int_equal(count_files(dir), 1);
    assert_int_equal(strata_worker_destroy(w), STRATA_OK);
    assert_int_equal(count_files(dir), 0);
    rmdir(dir);
    testutil_assert_clean(&before);
}

static void test_spill_write_failure_leaves_no_trace(void **state)
{
    testutil_snapshot before;
    strata_buffer *a, *b, *c = NULL;
    strata_tier_report r;
    strata_worker *w;
    char dir[64];

    (void)state;
    make_dir(dir, sizeof(dir));
    testutil_snapshot_take(&before);
    w = lru_worker(dir, "ram=128KiB", NULL, 0);
    assert_int_equal(strata_worker_create_buffer(w, BUF, &a), STRATA_OK);
    assert_int_equal(strata_worker_create_buffer(w, BUF, &b), STRATA_OK);
    fill(a, 3);
    fill(b, 4);
    base_fault_arm("worker.spill.write", 1, BASE_FAULT_FAIL);
    assert_int_equal(strata_worker_create_buffer(w, BUF, &c), STRATA_EIO);
    assert_msg_has("No space left on device");
    assert_msg_has(dir);
    assert_null(c);
    base_fault_disarm_all();
    r = report(w);
    assert_int_equal(r.spills, 0);
    assert_int_equal(r.tiers[STRATA_TIER_RAM].live, 2 * BUF);
    assert_int_equal(r.tiers[STRATA_TIER_RAM].instances, 2);
    assert_int_equal(r.tiers[STRATA_TIER_NVME].live, 0);
    assert_int_equal(count_files(dir), 0);
    expect_bytes(a, 3);
    expect_bytes(b, 4);
    /* The next try spills (a, the least recently used). */
    assert_int_equal(strata_worker_create_buffer(w, BUF, &c), STRATA_OK);
    assert_int_equal(report(w).spills, 1);
    assert_int_equal(count_files(dir), 1);
    /* A failed restore leaves a spilled, its file in place (b, spilled
     * to make room for it, stays spilled too). */
    base_fault_arm("worker.spill.read", 1, BASE_FAULT_FAIL);
    {
        unsigned char byte = 0;

        assert_int_equal(strata_buffer_read(a, 0, &byte, 1), STRATA_EIO);
        assert_msg_has("restoring buffer");
        base_fault_disarm_all();
        r = report(w);
        assert_int_equal(r.restores, 0);
        assert_int_equal(r.spills, 2);
        assert_int_equal(r.tiers[STRATA_TIER_NVME].instances, 2);
        assert_int_equal(r.tiers[STRATA_TIER_RAM].live, BUF);
        assert_int_equal(count_files(dir), 2);
        assert_int_equal(strata_buffer_read(a, BUF - 1, &byte, 1), STRATA_OK);
        assert_int_equal(byte, 3);
        assert_int_equal(report(w).restores, 1);
    }
    assert_int_equal(strata_worker_destroy(w), STRATA_OK);
    assert_int_equal(count_files(dir), 0);
    rmdir(dir);
    testutil_assert_clean(&before);
}

/* Removes every file in dir (the spill files a test takes away). */
static void empty_dir(const char *dir)
{
    char path[512];
    DIR *d = opendir(dir);
    struct dirent *e;

    assert_non_null(d);
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') {
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            assert_int_equal(unlink(path), 0);
        }
    closedir(d);
}

/* A spill file that cannot be opened is an I/O failure like one that
 * cannot be written or read (STRATA_EIO, docs/errors.md), naming the
 * file and the OS error: the directory gone at a spill, the file gone at
 * a restore. Nothing else changes, and destroy still cleans up. */
static void test_spill_file_that_cannot_be_opened_is_eio(void **state)
{
    char dir[64], gone[80];
    strata_buffer *a = NULL, *b = NULL, *c = NULL;
    testutil_snapshot before;
    unsigned char byte = 0;

    (void)state;
    make_dir(dir, sizeof(dir));
    snprintf(gone, sizeof(gone), "%s.gone", dir);
    testutil_snapshot_take(&before);
    {
        strata_worker *w = lru_worker(dir, "ram=128KiB", NULL, 0);

        assert_int_equal(strata_worker_create_buffer(w, BUF, &a), STRATA_OK);
        assert_int_equal(strata_worker_create_buffer(w, BUF, &b), STRATA_OK);
        fill(a, 5);
        fill(b, 6);
        assert_int_equal(rename(dir, gone), 0);
        assert_int_equal(strata_worker_create_buffer(w, BUF, &c), STRATA_EIO);
        assert_msg_has("spilling buffer");
        assert_msg_has("No such file or directory");
        assert_null(c);
        assert_int_equal(rename(gone, dir), 0);
        expect_bytes(a, 5);
        expect_bytes(b, 6);
        /* Now a spills; then its file goes. */
        assert_int_equal(strata_worker_create_buffer(w, BUF, &c), STRATA_OK);
        assert_int_equal(report(w).spills, 1);
        empty_dir(dir);
        assert_int_equal(strata_buffer_read(a, 0, &byte, 1), STRATA_EIO);
        assert_msg_has("restoring buffer");
        assert_msg_has("No such file or directory");
        assert_int_equal(report(w).restores, 0);
        expect_bytes(c, 0);
        assert_int_equal(strata_worker_destroy(w), STRATA_OK);
    }
    assert_int_equal(count_files(dir), 0);
    rmdir(dir);
    testutil_assert_clean(&before);
}

/* An nvme budget caps what is spilled (the reference's "temporary spill
 * payloads"): reaching it is allowed; a spill past it is not made, and
 * the allocation that needed it fails with STRATA_EBUDGET naming nvme,
 * everything as it was. Room on nvme comes back with a restore. */
static void test_spill_within_nvme_budget(void **state)
{
    char dir[64];
    strata_buffer *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    testutil_snapshot before;
    strata_tier_report r;
    strata_worker *w;

    (void)state;
    make_dir(dir, sizeof(dir));
    testutil_snapshot_take(&before);
    w = lru_worker(dir, "ram=128KiB,nvme=64KiB", NULL, 0);
    assert_int_equal(strata_worker_create_buffer(w, BUF, &a), STRATA_OK);
    assert_int_equal(strata_worker_create_buffer(w, BUF, &b), STRATA_OK);
    fill(a, 7);
    fill(b, 8);
    /* a spills: nvme exactly full. */
    assert_int_equal(strata_worker_create_buffer(w, BUF, &c), STRATA_OK);
    fill(c, 9);
    r = report(w);
    assert_int_equal(r.tiers[STRATA_TIER_NVME].live, BUF);
    assert_int_equal(r.tiers[STRATA_TIER_NVME].budget, 64 * KiB);
    /* b would go past it. */
    assert_int_equal(strata_worker_create_buffer(w, BUF, &d), STRATA_EBUDGET);
    assert_msg_has("tier 'nvme'");
    assert_msg_has("65536 bytes spilled");
    assert_null(d);
    r = report(w);
    assert_int_equal(r.spills, 1);
    assert_int_equal(r.tiers[STRATA_TIER_NVME].live, BUF);
    assert_int_equal(r.tiers[STRATA_TIER_RAM].live, 2 * BUF);
    assert_int_equal(count_files(dir), 1);
    /* Reading a back spills the least recently used of b and c (b) into
     * the room a's restore leaves on nvme. */
    expect_bytes(a, 7);
    r = report(w);
    assert_int_equal(r.restores, 1);
    assert_int_equal(r.spills, 2);
    assert_int_equal(r.tiers[STRATA_TIER_NVME].live, BUF);
    expect_bytes(c, 9);
    expect_bytes(b, 8);
    assert_int_equal(strata_worker_destroy(w), STRATA_OK);
    assert_int_equal(count_files(dir), 0);
    rmdir(dir);
    testutil_assert_clean(&before);
}

static void test_spill_config(void **state)
{
    strata_worker_config cfg;
    strata_worker *w = NULL;

    (void)state;
    strata_worker_config_init(&cfg, 3);
    cfg.budgets = "ram=1MiB";
    cfg.eviction = STRATA_EVICT_LRU;
    assert_int_equal(strata_worker_create(&cfg, &w), STRATA_EINVAL);
    assert_msg_has("needs spill_dir");
    assert_null(w);
    /* A directory that takes no files (access() lets root through). */
    cfg.spill_dir = "/proc";
    assert_int_equal(strata_worker_create(&cfg, &w), STRATA_EINVAL);
    assert_msg_has("spill_dir '/proc' takes no files");
    assert_null(w);
}

/* Concurrent runs over more buffers than the budget holds. */
#define NBUF 8
#define ROUNDS 6
#define THREADS 2

static strata_callable incr;

/* Adds 1 to every byte of tensor 0. */
static strata_err incr_kernel(strata_chip *chip, const strata_args *args)
{
    unsigned char *p = strata_args_tensor_data(args, 0);
    size_t n = strata_args_tensor_nbytes(args, 0);

    (void)chip;
    for (size_t i = 0; i < n; i++)
        p[i]++;
    return STRATA_OK;
}

struct pool {
    strata_worker *w;
    strata_buffer *bufs[NBUF];
};

struct runner {
    struct pool *pool;
    int index;
    strata_err err;
    char msg[256];
};

static const int chips[2] = {0, 1};

static strata_err incr_all(strata_orch *o, const strata_args *unused,
                           void *user)
{
    struct runner *rn = user;
    strata_args *a = NULL;
    strata_err err = strata_args_create(&a);

    (void)unused;
    for (int k = 0; err == STRATA_OK && k < NBUF; k++) {
        /* The threads walk the buffers in opposite orders. */
        int j = rn->index ? NBUF - 1 - k : k;
        const size_t shape[1] = {BUF};

        strata_args_clear(a);
        err = strata_args_add_tensor(a, rn->pool->bufs[j], 0, STRATA_U8, 1,
                                     shape, STRATA_INOUT);
        if (err == STRATA_OK)
            err = strata_orch_submit_next_level(o, incr, a, chips[k % 2]);
    }
    strata_args_destroy(a);
    return err;
}

static void *runner_main(void *arg)
{
    struct runner *rn = arg;

    for (int r = 0; r < ROUNDS && rn->err == STRATA_OK; r++) {
        rn->err = strata_worker_run(rn->pool->w, incr_all, NULL, rn);
        if (rn->err)
            snprintf(rn->msg, sizeof(rn->msg), "%s", strata_errmsg());
    }
    return NULL;
}

static void test_spill_restore_under_concurrent_runs(void **state)
{
    testutil_snapshot before;
    struct runner rn[THREADS];
    pthread_t th[THREADS];
    struct pool pool;
    strata_tier_report r;
    char dir[64];

    (void)state;
    make_dir(dir, sizeof(dir));
    testutil_snapshot_take(&before);
    assert_int_equal(strata_register_kernel("spill.incr", incr_kernel, &incr),
                     STRATA_OK);
    pool.w = lru_worker(dir, "ram=192KiB", chips, 2);
    for (int j = 0; j < NBUF; j++) {
        assert_int_equal(
            strata_worker_create_buffer(pool.w, BUF, &pool.bufs[j]), STRATA_OK);
        fill(pool.bufs[j], (unsigned char)(10 * j));
    }
    assert_int_equal(report(pool.w).tiers[STRATA_TIER_NVME].instances,
                     NBUF - 3);
    assert_int_equal(strata_worker_init(pool.w), STRATA_OK);
    for (int t = 0; t < THREADS; t++) {
        rn[t] = (struct runner){.pool = &pool, .index = t};
        assert_int_equal(pthread_create(&th[t], NULL, runner_main, &rn[t]), 0);
    }
    for (int t = 0; t < THREADS; t++) {
        assert_int_equal(pthread_join(th[t], NULL), 0);
        if (rn[t].err)
            fail_msg("runner %d: %s: %s", t, strata_errname(rn[t].err),
                     rn[t].msg);
    }
    r = report(pool.w);
    assert_true(r.spills >= NBUF - 3);
    assert_true(r.restores > 0);
    assert_true(r.tiers[STRATA_TIER_RAM].peak <= 192 * KiB);
    /* Every increment landed, whatever was spilled in between. */
    for (int j = 0; j < NBUF; j++)
        expect_bytes(pool.bufs[j], (unsigned char)(10 * j + THREADS * ROUNDS));
    assert_int_equal(strata_worker_destroy(pool.w), STRATA_OK);
    assert_int_equal(count_files(dir), 0);
    rmdir(dir);
    testutil_assert_clean(&before);
}

static strata_err all_three(strata_orch *o, const strata_args *unused,
                            void *user)
{
    strata_buffer **b = user;
    strata_args *a = NULL;
    const size_t shape[1] = {BUF};
    strata_err err = strata_args_create(&a);

    (void)unused;
    for (int j = 0; err == STRATA_OK && j < 3; j++)
        err = strata_args_add_tensor(a, b[j], 0, STRATA_U8, 1, shape,
                                     STRATA_INOUT);
    if (err == STRATA_OK)
        err = strata_orch_submit_next_level(o, incr, a, chips[0]);
    strata_args_destroy(a);
    return err;
}

/* An orch fn whose argument 0 must hold zeros. */
static strata_err check_first(strata_orch *o, const strata_args *args,
                              void *user)
{
    const unsigned char *p = strata_args_tensor_data(args, 0);

    (void)o;
    (void)user;
    for (size_t i = 0; p && i < strata_args_tensor_nbytes(args, 0); i++)
        if (p[i] != 0)
            return STRATA_EINVAL;
    return p ? STRATA_OK : STRATA_EINVAL;
}

/* A task whose buffers together exceed the budget can never run: its
 * submit fails with STRATA_EBUDGET at once (it does not wait on its own
 * buffers), and the worker goes on. */
static void test_spill_task_larger_than_budget(void **state)
{
    testutil_snapshot before;
    strata_buffer *b[3];
    strata_worker *w;
    char dir[64];

    (void)state;
    make_dir(dir, sizeof(dir));
    testutil_snapshot_take(&before);
    assert_int_equal(strata_register_kernel("spill.incr", incr_kernel, &incr),
                     STRATA_OK);
    w = lru_worker(dir, "ram=128KiB", chips, 2);
    for (int j = 0; j < 3; j++) {
        assert_int_equal(strata_worker_create_buffer(w, BUF, &b[j]), STRATA_OK);
        fill(b[j], (unsigned char)j);
    }
    assert_int_equal(strata_worker_init(w), STRATA_OK);
    assert_int_equal(strata_worker_run(w, all_three, NULL, b), STRATA_EBUDGET);
    assert_msg_has("nothing can be spilled");
    /* A run's arguments come back before its fn sees them: b[0] is
     * spilled (the least recently used) until the run names it. */
    assert_int_equal(report(w).tiers[STRATA_TIER_NVME].instances, 1);
    {
        strata_args *a = NULL;
        const size_t shape[1] = {BUF};

        assert_int_equal(strata_args_create(&a), STRATA_OK);
        assert_int_equal(
            strata_args_add_tensor(a, b[0], 0, STRATA_U8, 1, shape, STRATA_IN),
            STRATA_OK);
        assert_int_equal(strata_worker_run(w, check_first, a, NULL), STRATA_OK);
        strata_args_destroy(a);
    }
    /* Two of them fit, and their bytes are intact. */
    for (int j = 0; j < 3; j++)
        expect_bytes(b[j], (unsigned char)j);
    assert_int_equal(strata_worker_destroy(w), STRATA_OK);
    assert_int_equal(count_files(dir), 0);
    rmdir(dir);
    testutil_assert_clean(&before);
}

/* The child: an LRU worker that is killed at its first spill's write. */
static int child_spills(void *arg, int write_fd)
{
    const char *dir = arg;
    strata_worker_config cfg;
    strata_worker *w;
    strata_buffer *a, *b;

    (void)write_fd;
    strata_worker_config_init(&cfg, 3);
    cfg.budgets = "ram=64KiB";
    cfg.spill_dir = dir;
    cfg.eviction = STRATA_EVICT_LRU;
    if (strata_worker_create(&cfg, &w) != STRATA_OK ||
        strata_worker_create_buffer(w, BUF, &a) != STRATA_OK)
        return 1;
    base_fault_arm("worker.spill.write", 1, BASE_FAULT_KILL);
    if (strata_worker_create_buffer(w, BUF, &b) != STRATA_OK)
        return 3;
    return 2; /* not reached: killed in the spill */
}

static void test_spill_killed_then_swept(void **state)
{
    testutil_snapshot before;
    strata_worker *w;
    int fd, status;
    char dir[64], byte;
    pid_t pid;

    (void)state;
    make_dir(dir, sizeof(dir));
    testutil_snapshot_take(&before);
    pid = testutil_spawn(child_spills, dir, &fd);
    assert_true(pid > 0);
    assert_false(testutil_read_full(fd, &byte, 1, 60)); /* EOF: it died */
    close(fd);
    assert_true(testutil_wait_child(pid, 60, &status));
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGKILL);
    assert_int_equal(count_files(dir), 1); /* its half-made spill file */
    w = lru_worker(dir, "ram=64KiB", NULL, 0);
    assert_int_equal(count_files(dir), 0);
    /* Its segments go when a worker starts (stale segment reclaim). */
    assert_int_equal(strata_worker_init(w), STRATA_OK);
    assert_int_equal(strata_worker_destroy(w), STRATA_OK);
    rmdir(dir);
    testutil_assert_clean(&before);
}

/* ---- host copies while other threads spill ----------------------------- */

#define RACE_BYTES ((size_t)2 << 20)
#define RACE_ROUNDS 300

struct race {
    strata_worker *w;
    strata_buffer *mine;
    size_t nbytes;
    int rounds;
    int stop; /* atomic */
    int errors;
    int *done; /* creators: counts those finished */
    char msg[STRATA_ERRMSG_MAX];
};

static void race_error(struct race *r, const char *what)
{
    if (r->errors++ == 0)
        snprintf(r->msg, sizeof(r->msg), "%s: %s", what, strata_errmsg());
}

/* Makes two buffers the size of the victim and releases them, over and
 * over: each needs room that only spilling the victim gives. */
static void *spiller_main(void *arg)
{
    struct race *r = arg;

    for (int it = 0;
         it < r->rounds && !__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE); it++) {
        strata_buffer *t[2] = {NULL, NULL};

        for (int j = 0; j < 2; j++)
            if (strata_worker_create_buffer(r->w, r->nbytes, &t[j]))
                race_error(r, "create");
        for (int j = 0; j < 2; j++)
            if (t[j] && strata_buffer_release(t[j]))
                race_error(r, "release");
    }
    return NULL;
}

/* strata_buffer_write and _read while another thread spills the buffer:
 * every write that returned OK is read back whole (a spill during the
 * copy used to take pages the write was filling: its bytes were lost). */
static void test_spill_copies_survive_concurrent_spills(void **state)
{
    struct race r = {.nbytes = RACE_BYTES, .rounds = 1 << 30};
    unsigned char *src = malloc(RACE_BYTES), *got = malloc(RACE_BYTES);
    testutil_snapshot before;
    pthread_t th;
    char dir[64];
    int lost = 0;

    (void)state;
    assert_non_null(src);
    assert_non_null(got);
    make_dir(dir, sizeof(dir));
    testutil_snapshot_take(&before);
    /* Room for two of them and a page: a third spills the oldest. */
    r.w = lru_worker(dir, "ram=4100KiB", NULL, 0);
    assert_int_equal(strata_worker_create_buffer(r.w, RACE_BYTES, &r.mine),
                     STRATA_OK);
    assert_int_equal(pthread_create(&th, NULL, spiller_main, &r), 0);
    for (int k = 1; k <= RACE_ROUNDS && !lost; k++) {
        memset(src, k, RACE_BYTES);
        assert_int_equal(strata_buffer_write(r.mine, 0, src, RACE_BYTES),
                         STRATA_OK);
        assert_int_equal(strata_buffer_read(r.mine, 0, got, RACE_BYTES),
                         STRATA_OK);
        if (memcmp(got, src, RACE_BYTES) != 0) {
            size_t wrong = 0;

            for (size_t i = 0; i < RACE_BYTES; i++)
                wrong += got[i] != (unsigned char)k;
            print_message("round %d: %zu bytes of the write lost\n", k, wrong);
            lost = k;
        }
    }
    __atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
    assert_int_equal(pthread_join(th, NULL), 0);
    print_message("%llu spills, %llu restores\n",
                  (unsigned long long)report(r.w).spills,
                  (unsigned long long)report(r.w).restores);
    if (r.errors)
        fail_msg("spiller: %d errors, the first %s", r.errors, r.msg);
    assert_int_equal(lost, 0);
    assert_true(report(r.w).spills > 0);
    assert_int_equal(strata_worker_destroy(r.w), STRATA_OK);
    assert_int_equal(count_files(dir), 0);
    rmdir(dir);
    free(src);
    free(got);
    testutil_assert_clean(&before);
}

#define CREATORS 3
#define SMALL ((size_t)300 << 10)

static void *creator_main(void *arg)
{
    struct race *r = arg;

    for (int it = 0; it < r->rounds; it++) {
        strata_buffer *b = NULL;

        if (strata_worker_create_buffer(r->w, SMALL, &b)) {
            race_error(r, "create");
            continue;
        }
        if (strata_buffer_release(b))
            race_error(r, "release");
    }
    __atomic_add_fetch(r->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Under a ram budget of three and a bit buffers, threads that make and
 * release buffers while another reads its own: a buffer being made is
 * waited for (it will be idle once made), not taken for one that no one
 * will let go (STRATA_EBUDGET "nothing can be spilled"). */
static void test_spill_no_ebudget_while_others_create(void **state)
{
    struct race c[CREATORS], reader = {0};
    int done = 0, reads = 0;
    unsigned char *got = malloc(SMALL);
    testutil_snapshot before;
    pthread_t th[CREATORS];
    strata_worker *w;
    char dir[64];

    (void)state;
    assert_non_null(got);
    make_dir(dir, sizeof(dir));
    testutil_snapshot_take(&before);
    w = lru_worker(dir, "ram=1MiB", NULL, 0);
    assert_int_equal(strata_worker_create_buffer(w, SMALL, &reader.mine),
                     STRATA_OK);
    for (int t = 0; t < CREATORS; t++) {
        c[t] = (struct race){.w = w, .rounds = 300, .done = &done};
        assert_int_equal(pthread_create(&th[t], NULL, creator_main, &c[t]), 0);
    }
    /* Reads for as long as they make buffers. */
    while (__atomic_load_n(&done, __ATOMIC_ACQUIRE) < CREATORS) {
        if (strata_buffer_read(reader.mine, 0, got, SMALL))
            race_error(&reader, "read");
        reads++;
    }
    print_message("%d reads, %llu spills\n", reads,
                  (unsigned long long)report(w).spills);
    for (int t = 0; t < CREATORS; t++) {
        assert_int_equal(pthread_join(th[t], NULL), 0);
        if (c[t].errors)
            fail_msg("creator %d: %d errors, the first %s", t, c[t].errors,
                     c[t].msg);
    }
    if (reader.errors)
        fail_msg("reader: %d errors, the first %s", reader.errors, reader.msg);
    assert_true(report(w).tiers[STRATA_TIER_RAM].peak <= 1024 * KiB);
    assert_int_equal(strata_worker_destroy(w), STRATA_OK);
    assert_int_equal(count_files(dir), 0);
    rmdir(dir);
    free(got);
    testutil_assert_clean(&before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spill_lru_and_restore_on_access),
        cmocka_unit_test(test_spill_write_failure_leaves_no_trace),
        cmocka_unit_test(test_spill_config),
        cmocka_unit_test(test_spill_within_nvme_budget),
        cmocka_unit_test(test_spill_file_that_cannot_be_opened_is_eio),
        cmocka_unit_test(test_spill_killed_then_swept),
        cmocka_unit_test(test_spill_restore_under_concurrent_runs),
        cmocka_unit_test(test_spill_task_larger_than_budget),
        cmocka_unit_test(test_spill_copies_survive_concurrent_spills),
        cmocka_unit_test(test_spill_no_ebudget_while_others_create),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
