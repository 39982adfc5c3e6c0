/*
 * Domain allocation under faults: a member killed (-9) while it prepares
 * or imports windows, killed before the first allocation, or killed while
 * a live domain is in use; a member whose window step fails; an allocation
 * countdown; and leftover segments of dead processes. In every case the
 * surviving members unmap and free their windows, no segment is left in
 * /dev/shm, and the worker goes on serving domains on the live chips.
 *
 * One chip at a time is made to fail by arming a fault point inside that
 * chip's own process (a kernel calls base_fault_arm there), so the other
 * members stay alive. Needs base/fault.h (INTERNAL).
 */
#define _GNU_SOURCE
#include "dom_kit.h"

#include "base/fault.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static strata_callable k_arm;

static const char *const points[2] = {"window.prepare", "window.import"};

/* Arms points[s0] with action s1 on its s2-th hit, in this chip only. */
static strata_err arm_kernel(strata_chip *chip, const strata_args *a)
{
    (void)chip;
    base_fault_arm(points[strata_args_scalar(a, 0) % 2],
                   (long)strata_args_scalar(a, 2),
                   (int)strata_args_scalar(a, 1));
    return STRATA_OK;
}

static int setup(void **state)
{
    if (dom_setup(state) != 0)
        return -1;
    it_register(kernel, "faults.arm", arm_kernel, &k_arm);
    return 0;
}

static strata_err submit_arm(strata_orch *o, int chip, int point, int action)
{
    strata_args *a = NULL;
    strata_err e;

    it_try(strata_args_create(&a));
    e = strata_args_add_scalar(a, (uint64_t)point);
    if (e == STRATA_OK)
        e = strata_args_add_scalar(a, (uint64_t)action);
    if (e == STRATA_OK)
        e = strata_args_add_scalar(a, 1);
    if (e == STRATA_OK)
        e = strata_orch_submit_next_level(o, k_arm, a, chip);
    strata_args_destroy(a);
    return e;
}

static void assert_contains(const char *hay, const char *needle)
{
    if (!strstr(hay, needle))
        fail_msg("\"%s\" does not contain \"%s\"", hay, needle);
}

/* Destroy after a child died: OK or EPEER, and nothing may leak. */
static void destroy_after_death(struct it_fx *f)
{
    strata_err e = it_worker_destroy(f->w);
    if (e != STRATA_OK && e != STRATA_EPEER)
        fail_msg("destroy after a death: %s (%s)", strata_errname(e),
                 strata_errmsg());
    testutil_assert_clean(&f->before);
}

static const int ids02[2] = {0, 2};
static const int ids023[3] = {0, 2, 3};

/* A domain on ids[0..n) with an allreduce into out. */
static strata_err alloc_reduce(strata_orch *o, const char *name, const int *ids,
                               size_t n, uint32_t seed, strata_buffer *out,
                               strata_domain **d)
{
    struct dom_spec sp;

    dom_spec_init(&sp, name, ids, n, 8192);
    it_try(strata_orch_allocate_domain(o, &sp.spec, d));
    return dom_submit_allreduce(o, *d, ids, n, 0, 256, 4096, seed, out);
}

/* ---- a member killed during allocation */

struct kill {
    struct it_fx *f;
    int point;  /* 0 prepare, 1 import, -1: kill from here before */
    int victim; /* chip id */
    bool warm;  /* run a domain first (COMM_INIT done) */
    const int *ids;
    size_t n;
    strata_err alloc;
    char msg[STRATA_ERRMSG_MAX];
    double took;
    size_t maps_after, shm_after;
    strata_domain *d, *warm_d, *next_d;
};

static strata_err warm_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)args;
    struct kill *k = user;
    return alloc_reduce(o, "warm", it_ids4, 4, 1, k->f->b[0], &k->warm_d);
}

static strata_err kill_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)args;
    struct kill *k = user;
    struct dom_spec sp;
    double t0;

    if (k->point >= 0)
        it_try(submit_arm(o, k->victim, k->point, BASE_FAULT_KILL));
    else if (kill(strata_worker_chip_pid(k->f->w, k->victim), SIGKILL) != 0)
        return STRATA_ESYS;
    dom_spec_init(&sp, "doomed", k->ids, k->n, 1 << 16);
    t0 = testutil_now();
    k->alloc = strata_orch_allocate_domain(o, &sp.spec, &k->d);
    k->took = testutil_now() - t0;
    snprintf(k->msg, sizeof(k->msg), "%s", strata_errmsg());
    /* Every survivor has unmapped by the time allocation returns. */
    k->maps_after = dom_chip_window_maps(k->f->w, it_ids4, 4);
    k->shm_after = dom_shm_windows();
    return k->alloc;
}

static strata_err next_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)args;
    struct kill *k = user;
    return alloc_reduce(o, "doomed", ids023, 3, 2, k->f->b[1], &k->next_d);
}

static void kill_case(int point, bool warm, const int *ids, size_t n)
{
    struct it_fx f;
    struct kill k = {
        .f = &f, .point = point, .victim = 1, .warm = warm, .ids = ids, .n = n};
    char victim[16];
    it_fx_start(&f, 1024);
    if (warm) {
        it_ok(strata_worker_run(f.w, warm_orch, NULL, &k));
        assert_int_equal(dom_check_allreduce(f.b[0], 4, 256, 1), 0);
    }
    strata_err e = strata_worker_run(f.w, kill_orch, NULL, &k);
    print_message("allocation with chip 1 killed (%s): %s in %.3f s: %s\n",
                  point < 0 ? "before" : points[point], strata_errname(k.alloc),
                  k.took, k.msg);
    it_expect(STRATA_EPEER, k.alloc);
    it_expect(STRATA_EPEER, e);
    snprintf(victim, sizeof(victim), "chip %d", k.victim);
    assert_contains(k.msg, victim);
    assert_true(k.took < 5.0);
    assert_null(k.d); /* *out untouched on failure */
    assert_int_equal(k.maps_after, 0);
    assert_int_equal(k.shm_after, 0);
    /* The live chips still serve a domain, under the same name. */
    it_ok(strata_worker_run(f.w, next_orch, NULL, &k));
    assert_int_equal(dom_check_allreduce(f.b[1], 3, 256, 2), 0);
    assert_true(strata_domain_freed(k.next_d));
    assert_int_equal(dom_chip_window_maps(f.w, ids023, 3), 0);
    assert_int_equal(dom_shm_windows(), 0);
    destroy_after_death(&f);
}

static void test_domain_faults_kill_member_in_prepare_epeer(void **state)
{
    (void)state;
    static const int ids[2] = {0, 1};
    kill_case(0, true, ids, 2);
}

static void test_domain_faults_kill_member_in_import_epeer(void **state)
{
    (void)state;
    static const int ids[4] = {2, 1, 0, 3};
    kill_case(1, true, ids, 4);
}

static void
test_domain_faults_kill_member_before_first_alloc_epeer(void **state)
{
    (void)state;
    static const int ids[2] = {0, 1};
    kill_case(-1, false, ids, 2);
}

static void test_domain_faults_kill_member_before_alloc_warm_epeer(void **state)
{
    (void)state;
    static const int ids[3] = {3, 0, 1};
    kill_case(-1, true, ids, 3);
}

/* ---- every chip killed at its first prepare (armed before the fork) */

static strata_err all_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)args;
    struct kill *k = user;
    struct dom_spec sp;

    dom_spec_init(&sp, "all", it_ids4, 4, 4096);
    k->alloc = strata_orch_allocate_domain(o, &sp.spec, &k->d);
    snprintf(k->msg, sizeof(k->msg), "%s", strata_errmsg());
    k->shm_after = dom_shm_windows();
    return k->alloc;
}

static void
test_domain_faults_every_member_killed_in_prepare_epeer(void **state)
{
    (void)state;
    struct it_fx f;
    struct kill k = {.f = &f};
    base_fault_arm("window.prepare", 1, BASE_FAULT_KILL);
    it_fx_start(&f, 16);
    base_fault_disarm_all();
    it_expect(STRATA_EPEER, strata_worker_run(f.w, all_orch, NULL, &k));
    print_message("all members killed: %s\n", k.msg);
    it_expect(STRATA_EPEER, k.alloc);
    assert_null(k.d);
    assert_int_equal(k.shm_after, 0);
    destroy_after_death(&f);
}

/* ---- a member killed while a live domain is in use */

struct midrun {
    struct it_fx *f;
    strata_domain *d;
};

static strata_err midrun_orch(strata_orch *o, const strata_args *args,
                              void *user)
{
    (void)args;
    struct midrun *m = user;
    static const int ids[3] = {0, 1, 2};
    struct dom_spec sp;

    dom_spec_init(&sp, "midrun", ids, 3, 8192);
    it_try(strata_orch_allocate_domain(o, &sp.spec, &m->d));
    /* Chip 1 blocks until the test kills it. */
    return it_submit_wait_flag(o, 1, m->f->b[0], m->f->b[1]);
}

static void test_domain_faults_member_killed_mid_run_domain_freed(void **state)
{
    (void)state;
    struct it_fx f;
    struct midrun m = {.f = &f};
    strata_run *run = NULL;
    it_fx_start(&f, 1024);
    it_ok(strata_worker_submit(f.w, midrun_orch, NULL, &m, &run));
    assert_int_equal(kill(strata_worker_chip_pid(f.w, 1), SIGKILL), 0);
    it_expect(STRATA_EPEER, strata_run_wait(run, 10.0));
    strata_run_free(run);
    assert_true(strata_domain_released(m.d));
    assert_true(strata_domain_freed(m.d));
    assert_int_equal(dom_chip_window_maps(f.w, ids02, 2), 0);
    assert_int_equal(dom_shm_windows(), 0);
    struct kill k = {.f = &f};
    it_ok(strata_worker_run(f.w, next_orch, NULL, &k));
    assert_int_equal(dom_check_allreduce(f.b[1], 3, 256, 2), 0);
    destroy_after_death(&f);
}

/* ---- a member's window step fails (no death) */

struct stepfail {
    struct it_fx *f;
    int point;
    strata_err alloc;
    char msg[STRATA_ERRMSG_MAX];
    size_t maps_after, shm_after;
    strata_domain *d, *retry;
};

static strata_err stepfail_orch(strata_orch *o, const strata_args *args,
                                void *user)
{
    (void)args;
    struct stepfail *s = user;
    struct dom_spec sp;

    it_try(submit_arm(o, 2, s->point, BASE_FAULT_FAIL));
    dom_spec_init(&sp, "flaky", it_ids4, 4, 1 << 16);
    s->alloc = strata_orch_allocate_domain(o, &sp.spec, &s->d);
    snprintf(s->msg, sizeof(s->msg), "%s", strata_errmsg());
    s->maps_after = dom_chip_window_maps(s->f->w, it_ids4, 4);
    s->shm_after = dom_shm_windows();
    /* The same run goes on: the point fired once, a retry works. */
    return alloc_reduce(o, "flaky", it_ids4, 4, 3, s->f->b[0], &s->retry);
}

static void stepfail_case(int point)
{
    struct it_fx f;
    struct stepfail s = {.f = &f, .point = point};
    it_fx_start(&f, 1024);
    it_ok(strata_worker_run(f.w, stepfail_orch, NULL, &s));
    print_message("%s failing on chip 2: %s: %s\n", points[point],
                  strata_errname(s.alloc), s.msg);
    it_expect(STRATA_EIO, s.alloc);
    assert_contains(s.msg, "flaky");
    assert_null(s.d);
    assert_int_equal(s.maps_after, 0);
    assert_int_equal(s.shm_after, 0);
    assert_int_equal(dom_check_allreduce(f.b[0], 4, 256, 3), 0);
    assert_true(strata_domain_freed(s.retry));
    assert_int_equal(dom_chip_window_maps(f.w, it_ids4, 4), 0);
    it_fx_end(&f);
}

static void test_domain_faults_prepare_fails_nothing_left(void **state)
{
    (void)state;
    stepfail_case(0);
}

static void test_domain_faults_import_fails_nothing_left(void **state)
{
    (void)state;
    stepfail_case(1);
}

/* ---- allocation countdown in the orchestrating process */

struct countdown {
    struct it_fx *f;
    long n;
    strata_err alloc;
    long fired;
    strata_domain *d;
};

static strata_err countdown_orch(strata_orch *o, const strata_args *args,
                                 void *user)
{
    (void)args;
    struct countdown *c = user;
    struct dom_spec sp;

    dom_spec_init(&sp, "count", ids023, 3, 4096);
    dom_spec_buf(&sp, "v", STRATA_U32, 16);
    c->d = NULL;
    base_alloc_fail_after(c->n);
    c->alloc = strata_orch_allocate_domain(o, &sp.spec, &c->d);
    c->fired = base_alloc_failures();
    base_alloc_fail_after(0);
    return STRATA_OK;
}

static void test_domain_faults_alloc_countdown_enomem_no_leak(void **state)
{
    (void)state;
    struct it_fx f;
    struct countdown c = {.f = &f};
    size_t enomem = 0;
    it_fx_start(&f, 1024);
    for (c.n = 1; c.n < 1000; c.n++) {
        strata_err e = strata_worker_run(f.w, countdown_orch, NULL, &c);
        if (c.alloc != STRATA_OK && c.alloc != STRATA_ENOMEM)
            fail_msg("n=%ld: allocation returned %s (%s)", c.n,
                     strata_errname(c.alloc), strata_errmsg());
        if (e != STRATA_OK && e != STRATA_ENOMEM)
            fail_msg("n=%ld: run returned %s (%s)", c.n, strata_errname(e),
                     strata_errmsg());
        if (c.alloc == STRATA_ENOMEM && c.fired == 0)
            fail_msg("n=%ld: ENOMEM without an injected failure", c.n);
        if (c.alloc == STRATA_ENOMEM) {
            assert_null(c.d);
            enomem++;
        } else {
            assert_true(strata_domain_freed(c.d));
        }
        if (dom_chip_window_maps(f.w, it_ids4, 4) || dom_shm_windows())
            fail_msg("n=%ld: windows left after the run", c.n);
        if (c.alloc == STRATA_OK && c.fired == 0)
            break;
    }
    assert_true(c.n < 1000);
    print_message("allocation countdown: %ld passes, %zu ENOMEM\n", c.n,
                  enomem);
    /* The worker still serves domains. */
    struct kill k = {.f = &f};
    it_ok(strata_worker_run(f.w, next_orch, NULL, &k));
    assert_int_equal(dom_check_allreduce(f.b[1], 3, 256, 2), 0);
    it_fx_end(&f);
}

/* ---- leftover segments */

/* A pid that existed and is gone now. */
static pid_t dead_pid(void)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    assert_true(pid > 0);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_false(testutil_pid_exists(pid));
    return pid;
}

/* Creates a window-like segment full of 0xee. */
static void make_segment(const char *name, size_t size)
{
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)size), 0);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(p != MAP_FAILED);
    memset(p, 0xee, size);
    munmap(p, size);
    close(fd);
}

static bool segment_exists(const char *name)
{
    char path[256];
    snprintf(path, sizeof(path), "/dev/shm%s", name);
    return access(path, F_OK) == 0;
}

struct stale {
    struct it_fx *f;
    strata_domain *d;
    unsigned long long id; /* allocation id, from chip 0's maps */
    strata_err alloc;
    char msg[STRATA_ERRMSG_MAX];
};

/* Zero check over 4 chips: every byte of every window 0 before writing. */
static strata_err stale_orch(strata_orch *o, const strata_args *args,
                             void *user)
{
    (void)args;
    struct stale *s = user;
    struct dom_spec sp;
    strata_chip_domain_ctx c0;
    strata_args *a[4] = {NULL};
    strata_err e = STRATA_OK;

    dom_spec_init(&sp, "fresh", it_ids4, 4, 8192);
    s->alloc = strata_orch_allocate_domain(o, &sp.spec, &s->d);
    snprintf(s->msg, sizeof(s->msg), "%s", strata_errmsg());
    it_try(s->alloc);
    it_try(strata_domain_context(s->d, 0, &c0));
#ifdef STALE_ON_ADOPT_PATH
    /* Members map at their next task, after this: the sim backend's
     * device_ctx carries the allocation id below its tag bit (63). */
    s->id = c0.device_ctx & ~(1ull << 63);
#else
    s->id = dom_window_alloc_id(strata_worker_chip_pid(s->f->w, 0),
                                c0.local_window_base);
#endif
    for (size_t r = 0; r < 4 && e == STRATA_OK; r++) {
        strata_chip_domain_ctx c;
        e = strata_domain_context(s->d, it_ids4[r], &c);
        if (e == STRATA_OK)
            e = strata_args_create(&a[r]);
        if (e == STRATA_OK)
            e = it_add_u32(a[r], s->f->b[0], 0, 2, STRATA_NO_DEP);
        if (e == STRATA_OK)
            e = it_add_u32(a[r], s->f->b[1], 2 * r, 2, STRATA_OUT);
        if (e == STRATA_OK)
            e = strata_args_add_scalar(a[r], c.device_ctx);
        if (e == STRATA_OK)
            e = strata_args_add_scalar(a[r], 0x30);
    }
    if (e == STRATA_OK)
        e = strata_orch_submit_next_level_group(
            o, dom_k_zero_check, (const strata_args *const *)a, it_ids4, 4);
    for (size_t r = 0; r < 4; r++)
        strata_args_destroy(a[r]);
    return e;
}

/* One run of stale_orch; false (with a message) when it fails. */
static bool stale_run(struct it_fx *f, struct stale *s)
{
    memset(it_fx_w(f, 0), 0, 2 * 4);
    memset(it_fx_w(f, 1), 0xff, 8 * 4);
    strata_err e = strata_worker_run(f->w, stale_orch, NULL, s);
    if (e != STRATA_OK) {
        print_error("run after a stale segment: %s (%s; allocation: %s)\n",
                    strata_errname(e), strata_errmsg(), s->msg);
        return false;
    }
    for (int i = 0; i < 8; i++) {
        if (it_fx_w(f, 1)[i] != 0) {
            print_error("zero check word %d = %u: a window was not fresh\n", i,
                        it_fx_w(f, 1)[i]);
            return false;
        }
    }
    return true;
}

static void test_domain_faults_stale_segment_of_dead_pid_reclaimed(void **state)
{
    (void)state;
    testutil_snapshot before;
    struct it_fx f;
    struct stale s = {.f = &f};
    char name[2][96];
    testutil_snapshot_take(&before);
    pid_t dead = dead_pid();
    for (int r = 0; r < 2; r++) {
        snprintf(name[r], sizeof(name[r]), "/strata-%u-%d-d1-r%d",
                 (unsigned)getuid(), (int)dead, r);
        shm_unlink(name[r]);
        make_segment(name[r], 8192);
    }
    it_fx_start(&f, 16); /* init reclaims the dead pid's segments */
    bool reclaimed = true;
    for (int r = 0; r < 2; r++) {
        if (segment_exists(name[r])) {
            shm_unlink(name[r]);
            reclaimed = false;
        }
    }
    if (!reclaimed)
        fail_msg("segments of dead pid %d not reclaimed at init", (int)dead);
    assert_true(stale_run(&f, &s));
    it_fx_end(&f);
    testutil_assert_clean(&before);
}

/* A crashed process that had our pid (pid reuse: containers, pid
 * namespaces) left windows named exactly like the next ones this process
 * creates. Start-up cannot reclaim them (their pid is alive: ours); the
 * allocation must still succeed with fresh, zeroed windows. */
static void
test_domain_faults_stale_segment_of_reused_pid_no_collision(void **state)
{
    (void)state;
    struct it_fx f;
    struct stale s = {.f = &f};
    char name[4][96];
    it_fx_start(&f, 16);
    assert_true(stale_run(&f, &s));
    assert_true(s.id > 0);
    /* Ids grow by one per allocation of this process. */
    for (int r = 0; r < 4; r++) {
        snprintf(name[r], sizeof(name[r]), "/strata-%u-%d-d%llu-r%d",
                 (unsigned)getuid(), (int)getpid(), s.id + 1, r);
        make_segment(name[r], 8192);
    }
    bool ok = stale_run(&f, &s);
    print_message("allocation over a stale same-pid segment: %s (%s), id "
                  "%llu\n",
                  strata_errname(s.alloc), s.msg, s.id);
    for (int r = 0; r < 4; r++)
        shm_unlink(name[r]); /* whatever the library left */
    if (!ok)
        fail_msg("a stale segment named like a new window made allocation "
                 "fail or hand out a dirty window");
    it_fx_end(&f);
}

/* The leftover cases, which also run on the path without round trips. */
#define STALE_TESTS                                                            \
    cmocka_unit_test_teardown(                                                 \
        test_domain_faults_stale_segment_of_dead_pid_reclaimed, it_teardown),  \
        cmocka_unit_test_teardown(                                             \
            test_domain_faults_stale_segment_of_reused_pid_no_collision,       \
            it_teardown)

int main(void)
{
#ifdef STALE_ON_ADOPT_PATH
    /* domain_stale_adopt: the leftover cases on the path without round
     * trips, where the members create the segments without O_EXCL and the
     * names carry the worker process's random token. */
    const struct CMUnitTest tests[] = {STALE_TESTS};
#else
    /* These cases drive the exchange of descriptors (PREPARE, IMPORT, the
     * table check), which backends without host windows use; the path
     * without round trips has its own faults in test_adopt.c. */
    setenv("STRATA_DOMAIN_EXCHANGE", "1", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(
            test_domain_faults_kill_member_in_prepare_epeer, it_teardown),
        cmocka_unit_test_teardown(
            test_domain_faults_kill_member_in_import_epeer, it_teardown),
        cmocka_unit_test_teardown(
            test_domain_faults_kill_member_before_first_alloc_epeer,
            it_teardown),
        cmocka_unit_test_teardown(
            test_domain_faults_kill_member_before_alloc_warm_epeer,
            it_teardown),
        cmocka_unit_test_teardown(
            test_domain_faults_every_member_killed_in_prepare_epeer,
            it_teardown),
        cmocka_unit_test_teardown(
            test_domain_faults_member_killed_mid_run_domain_freed, it_teardown),
        cmocka_unit_test_teardown(test_domain_faults_prepare_fails_nothing_left,
                                  it_teardown),
        cmocka_unit_test_teardown(test_domain_faults_import_fails_nothing_left,
                                  it_teardown),
        cmocka_unit_test_teardown(
            test_domain_faults_alloc_countdown_enomem_no_leak, it_teardown),
        STALE_TESTS,
    };
#endif
    return cmocka_run_group_tests(tests, setup, NULL);
}
