/*
 * A member lost while its peers wait (issue 14, defect 6): chips of one
 * group wait with timeout_s = -1 on a signal word of their domain that
 * nobody will add to; one of them is killed (SIGKILL) once the others are
 * asleep in strata_signal_wait. The survivors must wake with STRATA_EPEER
 * naming the lost rank and chip, the run must end with STRATA_EPEER within
 * a generous bound, strata_worker_destroy must return (also when called
 * while they still sleep), and nothing may be left in /dev/shm. Without
 * the fix the survivors sleep forever: the run's bounded wait fails, and
 * the ctest TIMEOUT ends the test.
 * Built twice: on the path without round trips (domain/adopt.c) and, as
 * domain_lost_exchange, with STRATA_DOMAIN_EXCHANGE=1.
 * Also: strata_signal_wait's argument checks (NULL word, NaN timeout).
 */
#define _GNU_SOURCE
#include "dom_kit.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define LOST_BOUND_S 20.0 /* a loaded machine; the fix takes milliseconds */
#define LOST_N 3
#define LOST_VICTIM 1 /* chip id and rank */

/* What each member's wait returned. */
struct lost_rec {
    int32_t err;
    char msg[252];
};

static strata_callable k_wait;

/* s0 device_ctx, s1 flag offset; t0 (NO_DEP) u32 arrival counter, t1 OUT
 * this member's struct lost_rec. Counts itself in, then waits forever for
 * a flag nobody adds to. */
static strata_err wait_kernel(strata_chip *chip, const strata_args *a)
{
    const strata_comm_context *cc =
        strata_chip_comm_context(chip, strata_args_scalar(a, 0));
    uint32_t *arrived = strata_args_tensor_data(a, 0);
    struct lost_rec *rec = strata_args_tensor_data(a, 1);
    const uint32_t *flag;
    strata_err e;

    if (!cc)
        return STRATA_ENOENT;
    flag = (const uint32_t *)((char *)cc->window_base[cc->rank] +
                              strata_args_scalar(a, 1));
    strata_signal_add(arrived, 1);
    e = strata_signal_wait(flag, 1, -1);
    rec->err = (int32_t)e;
    snprintf(rec->msg, sizeof(rec->msg), "%s", e ? strata_errmsg() : "");
    return e;
}

static int setup(void **state)
{
#ifdef LOST_EXCHANGE
    setenv("STRATA_DOMAIN_EXCHANGE", "1", 1);
#endif
    if (dom_setup(state) != 0)
        return -1;
    it_register(kernel, "lost.wait", wait_kernel, &k_wait);
    return 0;
}

static void assert_contains(const char *hay, const char *needle)
{
    if (!strstr(hay, needle))
        fail_msg("\"%s\" does not contain \"%s\"", hay, needle);
}

struct lost {
    struct it_fx *f;
    strata_domain *d;
    strata_err alloc_err; /* what the allocation returned */
};

static strata_err lost_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)args;
    struct lost *l = user;
    static const int ids[LOST_N] = {0, 1, 2};
    strata_args *a[LOST_N] = {NULL};
    const strata_args *ca[LOST_N];
    struct dom_spec sp;
    strata_err e = STRATA_OK;
    size_t rec = sizeof(struct lost_rec);

    dom_spec_init(&sp, "lost", ids, LOST_N, 4096);
    dom_spec_buf(&sp, "flag", STRATA_U32, 1);
    l->alloc_err = strata_orch_allocate_domain(o, &sp.spec, &l->d);
    it_try(l->alloc_err);
    for (size_t r = 0; r < LOST_N && e == STRATA_OK; r++) {
        strata_chip_domain_ctx ctx;
        size_t shape[1] = {rec};

        e = strata_domain_context(l->d, ids[r], &ctx);
        if (e == STRATA_OK)
            e = strata_args_create(&a[r]);
        if (e == STRATA_OK)
            e = it_add_u32(a[r], l->f->b[0], 0, 1, STRATA_NO_DEP);
        if (e == STRATA_OK)
            e = strata_args_add_tensor(a[r], l->f->b[1], r * rec, STRATA_U8, 1,
                                       shape, STRATA_OUT);
        if (e == STRATA_OK)
            e = strata_args_add_scalar(a[r], ctx.device_ctx);
        if (e == STRATA_OK)
            e = strata_args_add_scalar(a[r], ctx.buffers[0].offset);
        ca[r] = a[r];
    }
    if (e == STRATA_OK)
        e = strata_orch_submit_next_level_group(o, k_wait, ca, ids, LOST_N);
    for (size_t r = 0; r < LOST_N; r++)
        strata_args_destroy(a[r]);
    return e;
}

/* Whether process pid sleeps (state S), from /proc/<pid>/stat. */
static bool sleeping(pid_t pid)
{
    char path[64], buf[512];
    FILE *fp;
    const char *p;
    bool s = false;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    fp = fopen(path, "r");
    if (!fp)
        return false;
    if (fgets(buf, sizeof(buf), fp) && (p = strrchr(buf, ')')) != NULL)
        s = p[1] == ' ' && p[2] == 'S';
    fclose(fp);
    return s;
}

/* Waits (bounded) until every member has begun its wait and the
 * survivors sleep in it, then kills the victim. */
static void kill_victim_when_parked(struct it_fx *f)
{
    volatile uint32_t *arrived = strata_buffer_data(f->b[0]);
    uint64_t polls = 0;

    while (__atomic_load_n(arrived, __ATOMIC_ACQUIRE) < LOST_N) {
        assert_true(++polls < 20000); /* 20 s of 1 ms polls */
        usleep(1000);
    }
    for (int chip = 0; chip < LOST_N; chip++) {
        if (chip == LOST_VICTIM)
            continue;
        polls = 0;
        while (!sleeping(strata_worker_chip_pid(f->w, chip))) {
            assert_true(++polls < 20000);
            usleep(1000);
        }
    }
    assert_int_equal(kill(strata_worker_chip_pid(f->w, LOST_VICTIM), SIGKILL),
                     0);
}

/* Every survivor's wait returned STRATA_EPEER naming the lost member. */
static void assert_survivors_told(struct it_fx *f)
{
    const struct lost_rec *rec = strata_buffer_data(f->b[1]);
    char chip[32];

    snprintf(chip, sizeof(chip), "chip %d (pid", LOST_VICTIM);
    for (int r = 0; r < LOST_N; r++) {
        if (r == LOST_VICTIM)
            continue;
        print_message("rank %d: %s: %s\n", r, strata_errname(rec[r].err),
                      rec[r].msg);
        assert_int_equal(rec[r].err, STRATA_EPEER);
        assert_contains(rec[r].msg, "rank 1");
        assert_contains(rec[r].msg, chip);
        assert_contains(rec[r].msg, "domain 'lost'");
    }
}

static void test_domain_lost_member_killed_waiters_epeer(void **state)
{
    (void)state;
    struct it_fx f;
    struct lost l = {.f = &f};
    strata_run *run = NULL;
    static const int live[2] = {0, 2};
    strata_err e;

    it_fx_start(&f, 1024);
    it_ok(strata_worker_submit(f.w, lost_orch, NULL, &l, &run));
    kill_victim_when_parked(&f);
    e = strata_run_wait(run, LOST_BOUND_S);
    print_message("run: %s: %s\n", strata_errname(e), strata_errmsg());
    it_expect(STRATA_EPEER, e);
    assert_contains(strata_errmsg(), "chip 1");
    strata_run_free(run);
    assert_survivors_told(&f);
    assert_true(strata_domain_freed(l.d));
    assert_int_equal(dom_chip_window_maps(f.w, live, 2), 0);
    assert_int_equal(dom_shm_windows(), 0);
    /* The next allocation over the dead member fails at once, on either
     * path (without the exchange it was accepted, and the run failed at
     * the first map). */
    e = strata_worker_run(f.w, lost_orch, NULL, &l);
    print_message("again: %s: %s\n", strata_errname(e), strata_errmsg());
    it_expect(STRATA_EPEER, e);
    assert_int_equal(l.alloc_err, STRATA_EPEER);
    assert_contains(strata_errmsg(), "domain 'lost'");
    assert_contains(strata_errmsg(), "chip 1");
    assert_int_equal(dom_shm_windows(), 0);
    e = it_worker_destroy(f.w);
    assert_true(e == STRATA_OK || e == STRATA_EPEER);
    testutil_assert_clean(&f.before);
}

/* strata_worker_destroy while the survivors still sleep: it returns, and
 * the run it ended reports the loss. */
static void test_domain_lost_destroy_while_waiting_returns(void **state)
{
    (void)state;
    struct it_fx f;
    struct lost l = {.f = &f};
    strata_run *run = NULL;
    strata_err e;

    it_fx_start(&f, 1024);
    it_ok(strata_worker_submit(f.w, lost_orch, NULL, &l, &run));
    kill_victim_when_parked(&f);
    e = it_worker_destroy(f.w);
    assert_true(e == STRATA_OK || e == STRATA_EPEER);
    e = strata_run_wait(run, LOST_BOUND_S);
    print_message("run: %s: %s\n", strata_errname(e), strata_errmsg());
    it_expect(STRATA_EPEER, e);
    assert_contains(strata_errmsg(), "chip 1");
    strata_run_free(run);
    assert_int_equal(dom_shm_windows(), 0);
    testutil_assert_clean(&f.before);
}

/* ---- no file descriptor free ------------------------------------------- */

/* With every file descriptor taken, the worker could not map the control
 * page that wakes the members when one dies: the allocation is refused
 * (STRATA_ESYS naming it) rather than made without that watch. */
static strata_err no_fd_orch(strata_orch *o, const strata_args *args,
                             void *user)
{
    struct lost *l = user;
    struct rlimit old, lim;
    int lowest = dup(STDERR_FILENO);

    (void)args;
    if (lowest < 0 || getrlimit(RLIMIT_NOFILE, &old) != 0)
        return STRATA_ESYS;
    close(lowest);
    /* The soft limit at the lowest free descriptor: none below it is. */
    lim = old;
    lim.rlim_cur = (rlim_t)lowest;
    if (setrlimit(RLIMIT_NOFILE, &lim) != 0)
        return STRATA_ESYS;
    l->alloc_err = lost_orch(o, NULL, l);
    setrlimit(RLIMIT_NOFILE, &old);
    return l->alloc_err;
}

static void test_domain_lost_no_fd_free_refused(void **state)
{
    (void)state;
    struct it_fx f;
    struct lost l = {.f = &f};
    strata_err e;

    it_fx_start(&f, 1024);
    e = strata_worker_run(f.w, no_fd_orch, NULL, &l);
    print_message("no fd: %s: %s\n", strata_errname(e), strata_errmsg());
    it_expect(STRATA_ESYS, e);
    assert_contains(strata_errmsg(), "no file descriptor free");
    assert_contains(strata_errmsg(), "domain 'lost'");
    assert_int_equal(dom_shm_windows(), 0);
    it_ok(it_worker_destroy(f.w));
    testutil_assert_clean(&f.before);
}

/* ---- strata_signal_wait's arguments ------------------------------------ */

static void test_domain_lost_signal_wait_bad_args_einval(void **state)
{
    (void)state;
    uint32_t word = 3;

    it_expect(STRATA_EINVAL, strata_signal_wait(NULL, 1, 0.0));
    assert_contains(strata_errmsg(), "NULL");
    it_expect(STRATA_EINVAL, strata_signal_wait(NULL, 1, -1));
    it_expect(STRATA_EINVAL, strata_signal_wait(&word, 1, NAN));
    assert_contains(strata_errmsg(), "NaN");
    it_expect(STRATA_EINVAL, strata_signal_wait(&word, 9, -NAN));
    /* Reached already: any timeout, negative ones included, returns. */
    it_ok(strata_signal_wait(&word, 3, -1));
    it_ok(strata_signal_wait(&word, 2, -7.5));
    it_ok(strata_signal_wait(&word, 3, 0));
    it_ok(strata_signal_wait(&word, 1, INFINITY));
    /* Not reached: a finite timeout ends it, naming the value seen. */
    it_expect(STRATA_ETIMEDOUT, strata_signal_wait(&word, 4, 0.01));
    assert_contains(strata_errmsg(), "still 3");
    /* add on NULL does nothing (it cannot report an error). */
    strata_signal_add(NULL, 1);
    strata_signal_add(&word, 1);
    it_ok(strata_signal_wait(&word, 4, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_domain_lost_signal_wait_bad_args_einval),
        cmocka_unit_test_teardown(test_domain_lost_no_fd_free_refused,
                                  it_teardown),
        cmocka_unit_test_teardown(test_domain_lost_member_killed_waiters_epeer,
                                  it_teardown),
        cmocka_unit_test_teardown(
            test_domain_lost_destroy_while_waiting_returns, it_teardown),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
