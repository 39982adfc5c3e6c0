/*
 * Domains whose windows the worker makes itself (the sim backend's path
 * without round trips, domain/adopt.c):
 * - every member sees every window at the same address, rank r at
 *   base + r x mapping, and strata_domain_context's local_window_base is
 *   that address;
 * - a member killed before the allocation: the allocation returns, the run
 *   fails with STRATA_EPEER naming the chip, nothing is left in /dev/shm,
 *   and the live chips serve the next domain;
 * - a member whose ADOPT fails (fault point window.import inside that
 *   chip): the run fails naming the domain, nothing is left, a retry in the
 *   same worker works;
 * - 200 allocate/release cycles hand the reserved range out again and
 *   leave no mapping, segment or memory behind;
 * - a member that never ran its ADOPT does not hold up the free: with the
 *   chip stopped (SIGSTOP) the run still ends, freed and unlinked, and
 *   the chip serves the next domain once it runs again.
 * Needs base/fault.h (INTERNAL).
 */
#define _GNU_SOURCE
#include "dom_kit.h"

#include "base/fault.h"

#include <signal.h>
#include <string.h>

static strata_callable k_arm;

/* Arms window.import with action s0 on its next hit, in this chip only. */
static strata_err arm_kernel(strata_chip *chip, const strata_args *a)
{
    (void)chip;
    base_fault_arm("window.import", 1, (int)strata_args_scalar(a, 0));
    return STRATA_OK;
}

static int setup(void **state)
{
    if (dom_setup(state) != 0)
        return -1;
    it_register(kernel, "adopt.arm", arm_kernel, &k_arm);
    return 0;
}

static void assert_contains(const char *hay, const char *needle)
{
    if (!strstr(hay, needle))
        fail_msg("\"%s\" does not contain \"%s\"", hay, needle);
}

/* ---- one address for every window in every member -------------------- */

struct sym {
    struct it_fx *f;
    strata_domain *d;
    strata_chip_domain_ctx ctx[4];
};

static strata_err sym_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)args;
    struct sym *s = user;
    struct dom_spec sp;

    dom_spec_init(&sp, "sym", it_ids4, 4, 3 * 4096 + 100);
    it_try(strata_orch_allocate_domain(o, &sp.spec, &s->d));
    for (size_t r = 0; r < 4; r++)
        it_try(strata_domain_context(s->d, it_ids4[r], &s->ctx[r]));
    it_try(dom_submit_probe(o, s->d, it_ids4, 4, s->f->b[0]));
    /* Every member reads rank 3's window, which rank 3 filled. */
    return dom_submit_allreduce(o, s->d, it_ids4, 4, 0, 256, 4096, 5,
                                s->f->b[1]);
}

static void test_domain_adopt_same_address_everywhere(void **state)
{
    (void)state;
    struct it_fx f;
    struct sym s = {.f = &f};

    it_fx_start(&f, 1024);
    it_ok(strata_worker_run(f.w, sym_orch, NULL, &s));
    const struct dom_probe *p = strata_buffer_data(f.b[0]);
    size_t map = s.ctx[0].actual_window_size;

    assert_true(map >= 3 * 4096 + 100);
    for (uint32_t r = 0; r < 4; r++) {
        assert_int_equal(p[r].found, 1);
        assert_int_equal(p[r].rank, r);
        assert_int_equal(p[r].bases_seen, 4);
        /* What the orchestrator was told is where the chip mapped it. */
        assert_int_equal(p[r].own_base, s.ctx[r].local_window_base);
        assert_int_equal(s.ctx[r].local_window_base,
                         s.ctx[0].local_window_base + r * map);
    }
    assert_int_equal(dom_check_allreduce(f.b[1], 4, 256, 5), 0);
    assert_true(strata_domain_freed(s.d));
    assert_int_equal(dom_chip_window_maps(f.w, it_ids4, 4), 0);
    assert_int_equal(dom_shm_windows(), 0);
    it_fx_end(&f);
}

/* ---- a member killed before the allocation ----------------------------- */

struct killed {
    struct it_fx *f;
    strata_err alloc;
    strata_domain *d, *next;
};

static strata_err killed_orch(strata_orch *o, const strata_args *args,
                              void *user)
{
    (void)args;
    struct killed *k = user;
    static const int ids[3] = {0, 1, 2};
    struct dom_spec sp;

    if (kill(strata_worker_chip_pid(k->f->w, 1), SIGKILL) != 0)
        return STRATA_ESYS;
    dom_spec_init(&sp, "gone", ids, 3, 8192);
    k->alloc = strata_orch_allocate_domain(o, &sp.spec, &k->d);
    if (k->alloc)
        return k->alloc;
    return dom_submit_allreduce(o, k->d, ids, 3, 0, 256, 4096, 1, k->f->b[0]);
}

static strata_err next_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)args;
    struct killed *k = user;
    static const int ids[3] = {0, 2, 3};
    struct dom_spec sp;

    dom_spec_init(&sp, "gone", ids, 3, 8192);
    it_try(strata_orch_allocate_domain(o, &sp.spec, &k->next));
    return dom_submit_allreduce(o, k->next, ids, 3, 0, 256, 4096, 2,
                                k->f->b[1]);
}

static strata_err warm_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)args;
    (void)user;
    struct dom_spec sp;
    strata_domain *d;

    /* COMM_INIT on every chip, so the next allocation sends nothing but
     * ADOPT frames. */
    dom_spec_init(&sp, "warm", it_ids4, 4, 4096);
    it_try(strata_orch_allocate_domain(o, &sp.spec, &d));
    return strata_domain_release(d);
}

static void test_domain_adopt_member_killed_epeer(void **state)
{
    (void)state;
    struct it_fx f;
    struct killed k = {.f = &f};
    static const int live[3] = {0, 2, 3};

    it_fx_start(&f, 1024);
    it_ok(strata_worker_run(f.w, warm_orch, NULL, NULL));
    strata_err e = strata_worker_run(f.w, killed_orch, NULL, &k);
    print_message("member killed before the allocation: alloc %s, run %s: "
                  "%s\n",
                  strata_errname(k.alloc), strata_errname(e), strata_errmsg());
    it_expect(STRATA_EPEER, e);
    assert_contains(strata_errmsg(), "chip 1");
    assert_true(k.alloc == STRATA_OK || k.alloc == STRATA_EPEER);
    assert_int_equal(dom_shm_windows(), 0);
    assert_int_equal(dom_chip_window_maps(f.w, live, 3), 0);
    it_ok(strata_worker_run(f.w, next_orch, NULL, &k));
    assert_int_equal(dom_check_allreduce(f.b[1], 3, 256, 2), 0);
    assert_true(strata_domain_freed(k.next));
    assert_int_equal(dom_chip_window_maps(f.w, live, 3), 0);
    assert_int_equal(dom_shm_windows(), 0);
    e = it_worker_destroy(f.w);
    assert_true(e == STRATA_OK || e == STRATA_EPEER);
    testutil_assert_clean(&f.before);
}

/* ---- a member whose ADOPT fails ----------------------------------------- */

struct flaky {
    struct it_fx *f;
    strata_domain *d, *retry;
};

static strata_err flaky_orch(strata_orch *o, const strata_args *args,
                             void *user)
{
    (void)args;
    struct flaky *s = user;
    struct dom_spec sp;
    strata_args *a = NULL;
    strata_err e;

    it_try(strata_args_create(&a));
    e = strata_args_add_scalar(a, BASE_FAULT_FAIL);
    if (e == STRATA_OK)
        e = strata_orch_submit_next_level(o, k_arm, a, 2);
    strata_args_destroy(a);
    it_try(e);
    dom_spec_init(&sp, "flaky", it_ids4, 4, 1 << 16);
    it_try(strata_orch_allocate_domain(o, &sp.spec, &s->d));
    return dom_submit_allreduce(o, s->d, it_ids4, 4, 0, 256, 4096, 3,
                                s->f->b[0]);
}

static strata_err retry_orch(strata_orch *o, const strata_args *args,
                             void *user)
{
    (void)args;
    struct flaky *s = user;
    struct dom_spec sp;

    dom_spec_init(&sp, "flaky", it_ids4, 4, 1 << 16);
    it_try(strata_orch_allocate_domain(o, &sp.spec, &s->retry));
    return dom_submit_allreduce(o, s->retry, it_ids4, 4, 0, 256, 4096, 4,
                                s->f->b[1]);
}

static void test_domain_adopt_failure_fails_the_run(void **state)
{
    (void)state;
    struct it_fx f;
    struct flaky s = {.f = &f};

    it_fx_start(&f, 1024);
    strata_err e = strata_worker_run(f.w, flaky_orch, NULL, &s);
    print_message("ADOPT failing on chip 2: %s: %s\n", strata_errname(e),
                  strata_errmsg());
    assert_true(e != STRATA_OK);
    assert_contains(strata_errmsg(), "chip 2");
    assert_true(strata_domain_freed(s.d));
    assert_int_equal(dom_chip_window_maps(f.w, it_ids4, 4), 0);
    assert_int_equal(dom_shm_windows(), 0);
    /* The point fired once: the same worker serves the next domain. */
    it_ok(strata_worker_run(f.w, retry_orch, NULL, &s));
    assert_int_equal(dom_check_allreduce(f.b[1], 4, 256, 4), 0);
    it_fx_end(&f);
}

/* ---- the reserved range is handed out again ----------------------------- */

/* One domain over chips ids[0..n) allocated and released in a run. */
struct cycles {
    const int *ids;
    size_t n;
    int size_kib;
    strata_domain *d;
};

static strata_err cycle_orch(strata_orch *o, const strata_args *args,
                             void *user)
{
    (void)args;
    struct cycles *c = user;
    struct dom_spec sp;

    dom_spec_init(&sp, "cycle", c->ids, c->n, (size_t)c->size_kib << 10);
    it_try(strata_orch_allocate_domain(o, &sp.spec, &c->d));
    return strata_domain_release(c->d);
}

static void test_domain_adopt_range_reused(void **state)
{
    (void)state;
    static const int ids[3] = {3, 1, 0};
    struct it_fx f;
    struct cycles c = {.ids = ids, .n = 3};

    it_fx_start(&f, 16);
    for (int i = 0; i < 200; i++) {
        /* Sizes vary, so freed pieces are split and merged again. */
        c.size_kib = 4 << (i % 9);
        it_ok(strata_worker_run(f.w, cycle_orch, NULL, &c));
        if (!strata_domain_freed(c.d))
            fail_msg("cycle %d: domain not freed after the fence", i);
    }
    assert_int_equal(dom_chip_window_maps(f.w, it_ids4, 4), 0);
    assert_int_equal(dom_shm_windows(), 0);
    it_fx_end(&f);
}

/* ---- an ADOPT nobody ran is withdrawn at the fence ---------------------- */

static void test_domain_adopt_withdrawn_when_unused(void **state)
{
    (void)state;
    static const int ids[2] = {0, 1};
    struct it_fx f;
    struct cycles c = {.ids = ids, .n = 2, .size_kib = 4};
    struct killed k = {.f = &f};
    static const int live[3] = {0, 2, 3};
    int pid;

    it_fx_start(&f, 1024);
    it_ok(strata_worker_run(f.w, warm_orch, NULL, NULL));
    pid = strata_worker_chip_pid(f.w, 1);
    assert_true(pid > 0);
    /* A stopped chip cannot map, unmap or answer: only a withdrawn ADOPT
     * lets this run's fence free the domain (else the run never ends and
     * the test times out). */
    assert_int_equal(kill(pid, SIGSTOP), 0);
    for (int i = 0; i < 10; i++) {
        it_ok(strata_worker_run(f.w, cycle_orch, NULL, &c));
        assert_true(strata_domain_freed(c.d));
        assert_int_equal(dom_shm_windows(), 0);
    }
    assert_int_equal(kill(pid, SIGCONT), 0);
    /* The chip passes its withdrawn frames and serves the next domain. */
    it_ok(strata_worker_run(f.w, next_orch, NULL, &k));
    assert_int_equal(dom_check_allreduce(f.b[1], 3, 256, 2), 0);
    it_ok(strata_worker_run(f.w, cycle_orch, NULL, &c));
    assert_int_equal(dom_chip_window_maps(f.w, live, 3), 0);
    assert_int_equal(dom_chip_window_maps(f.w, it_ids4, 4), 0);
    assert_int_equal(dom_shm_windows(), 0);
    it_fx_end(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_domain_adopt_same_address_everywhere,
                                  it_teardown),
        cmocka_unit_test_teardown(test_domain_adopt_member_killed_epeer,
                                  it_teardown),
        cmocka_unit_test_teardown(test_domain_adopt_failure_fails_the_run,
                                  it_teardown),
        cmocka_unit_test_teardown(test_domain_adopt_range_reused, it_teardown),
        cmocka_unit_test_teardown(test_domain_adopt_withdrawn_when_unused,
                                  it_teardown),
    };

    return cmocka_run_group_tests(tests, setup, NULL);
}
