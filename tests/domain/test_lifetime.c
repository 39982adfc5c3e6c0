/*
 * Domain lifetime: released at once, freed after the run fence, forgotten
 * domains swept at the fence of a run that succeeded and of one that
 * failed, names reused after release and in concurrent runs, and several
 * domains (disjoint and overlapping) live and used in one run. A freed
 * domain leaves no window mapped in any chip and no segment in /dev/shm.
 */
#define _GNU_SOURCE
#include "dom_kit.h"

#include <stdlib.h>
#include <string.h>

static const int ids01[2] = {0, 1};
static const int ids23[2] = {2, 3};
static const int ids012[3] = {0, 1, 2};
static const int ids21[2] = {2, 1};

/* ---- released / freed before and after the fence */

struct states {
    struct it_fx *f;
    strata_domain *d;
    bool released0, freed0; /* right after allocation */
    bool released1, freed1; /* right after release */
    bool freed2;            /* at the end of the orch fn */
    size_t maps_live;       /* windows mapped in the chips, in the run */
    strata_err ctx0, ctx1, rel2, copy1;
};

struct maps_want {
    const strata_worker *w;
    size_t want;
};

static bool maps_reached(void *arg)
{
    const struct maps_want *m = arg;

    return dom_chip_window_maps(m->w, it_ids4, 4) == m->want;
}

/* Window mappings in chips 0..3 once they reach want (or after 5 s). */
static size_t wait_maps(const strata_worker *w, size_t want)
{
    struct maps_want m = {w, want};

    testutil_wait_until(maps_reached, &m, 5.0);
    return dom_chip_window_maps(w, it_ids4, 4);
}

static strata_err states_orch(strata_orch *o, const strata_args *args,
                              void *user)
{
    (void)args;
    struct states *s = user;
    struct dom_spec sp;
    strata_chip_domain_ctx c;

    dom_spec_init(&sp, "states", ids012, 3, 4096);
    dom_spec_buf(&sp, "v", STRATA_U32, 16);
    it_try(strata_orch_allocate_domain(o, &sp.spec, &s->d));
    s->released0 = strata_domain_released(s->d);
    s->freed0 = strata_domain_freed(s->d);
    s->ctx0 = strata_domain_context(s->d, 1, &c);
    /* Submitted before the release: the task keeps using the windows. */
    it_try(
        dom_submit_allreduce(o, s->d, ids012, 3, 0, 256, 2048, 9, s->f->b[0]));
    /* Members map before running anything submitted after the allocation;
     * the allocation itself does not wait for them. */
    s->maps_live = wait_maps(s->f->w, 9);
    it_try(strata_domain_release(s->d));
    s->released1 = strata_domain_released(s->d);
    s->freed1 = strata_domain_freed(s->d);
    s->ctx1 = strata_domain_context(s->d, 1, &c);
    s->copy1 = strata_orch_copy_to(o, s->d, 1, "v", 0, s->f->b[1], 0, 4);
    s->rel2 = strata_domain_release(s->d); /* no-op */
    s->freed2 = strata_domain_freed(s->d);
    return STRATA_OK;
}

static void test_domain_lifetime_released_now_freed_after_fence(void **state)
{
    (void)state;
    struct it_fx f;
    struct states s = {.f = &f};
    it_fx_start(&f, 1024);
    it_ok(strata_worker_run(f.w, states_orch, NULL, &s));
    assert_false(s.released0);
    assert_false(s.freed0);
    it_ok(s.ctx0);
    assert_int_equal(s.maps_live, 9); /* 3 members x 3 windows each */
    assert_true(s.released1);
    assert_false(s.freed1);
    it_expect(STRATA_ESTATE, s.ctx1);
    it_expect(STRATA_ESTATE, s.copy1);
    it_ok(s.rel2);
    assert_false(s.freed2);
    /* After strata_worker_run returned. */
    assert_true(strata_domain_released(s.d));
    assert_true(strata_domain_freed(s.d));
    assert_int_equal(dom_check_allreduce(f.b[0], 3, 256, 9), 0);
    assert_int_equal(dom_chip_window_maps(f.w, it_ids4, 4), 0);
    assert_int_equal(dom_shm_windows(), 0);
    /* NULL is a no-op / false. */
    it_ok(strata_domain_release(NULL));
    assert_false(strata_domain_released(NULL));
    assert_false(strata_domain_freed(NULL));
    /* The handle answers queries until the worker is destroyed. */
    it_ok(strata_worker_run(f.w, states_orch, NULL, &s));
    assert_true(strata_domain_freed(s.d));
    it_fx_end(&f);
}

/* With submit: the orch fn has returned, a task still runs, so the fence
 * (and the free) has not happened yet. */
struct pending {
    struct it_fx *f;
    strata_domain *d;
};

static strata_err pending_orch(strata_orch *o, const strata_args *args,
                               void *user)
{
    (void)args;
    struct pending *p = user;
    struct dom_spec sp;

    dom_spec_init(&sp, "pending", ids01, 2, 64);
    it_try(strata_orch_allocate_domain(o, &sp.spec, &p->d));
    it_try(strata_domain_release(p->d));
    return it_submit_wait_flag(o, 0, p->f->b[0], p->f->b[1]);
}

static void test_domain_lifetime_freed_only_at_submitted_run_fence(void **state)
{
    (void)state;
    struct it_fx f;
    struct pending p = {.f = &f};
    strata_run *run = NULL;
    it_fx_start(&f, 4);
    it_ok(strata_worker_submit(f.w, pending_orch, NULL, &p, &run));
    assert_true(strata_domain_released(p.d));
    it_expect(STRATA_ETIMEDOUT, strata_run_wait(run, 0.05));
    assert_false(strata_domain_freed(p.d));
    assert_int_equal(dom_chip_window_maps(f.w, it_ids4, 4), 4);
    testutil_store_u32(&it_fx_w(&f, 0)[0], 1);
    it_ok(strata_run_wait(run, -1));
    strata_run_free(run);
    assert_true(strata_domain_freed(p.d));
    assert_int_equal(dom_chip_window_maps(f.w, it_ids4, 4), 0);
    it_fx_end(&f);
}

/* ---- sweep of forgotten domains */

struct sweep {
    struct it_fx *f;
    int mode; /* 0: success, 1: a task fails, 2: the orch fn fails */
    strata_domain *d[3];
};

static strata_err sweep_orch(strata_orch *o, const strata_args *args,
                             void *user)
{
    (void)args;
    struct sweep *s = user;
    struct dom_spec sp;
    static const char *names[3] = {"s0", "s1", "s2"};
    const int *ids[3] = {ids012, ids23, ids21};
    size_t n[3] = {3, 2, 2};

    for (size_t i = 0; i < 3; i++) {
        dom_spec_init(&sp, names[i], ids[i], n[i], 4096);
        it_try(strata_orch_allocate_domain(o, &sp.spec, &s->d[i]));
    }
    it_try(dom_submit_allreduce(o, s->d[0], ids012, 3, 0, 64, 1024, 4,
                                s->f->b[0]));
    if (s->mode == 1)
        it_try(it_submit1(o, dom_k_fail, 1, s->f->b[1], 0, 1, STRATA_OUT));
    it_try(
        dom_submit_allreduce(o, s->d[2], ids21, 2, 0, 64, 1024, 5, s->f->b[2]));
    return s->mode == 2 ? STRATA_EIO : STRATA_OK;
}

static void sweep_case(int mode, strata_err want)
{
    struct it_fx f;
    struct sweep s = {.f = &f, .mode = mode};
    it_fx_start(&f, 1024);
    it_expect(want, strata_worker_run(f.w, sweep_orch, NULL, &s));
    for (size_t i = 0; i < 3; i++) {
        strata_chip_domain_ctx c;
        assert_non_null(s.d[i]);
        assert_true(strata_domain_released(s.d[i]));
        assert_true(strata_domain_freed(s.d[i]));
        it_expect(STRATA_ESTATE, strata_domain_context(s.d[i], 2, &c));
    }
    if (mode != 1) {
        assert_int_equal(dom_check_allreduce(f.b[0], 3, 64, 4), 0);
        assert_int_equal(dom_check_allreduce(f.b[2], 2, 64, 5), 0);
    }
    assert_int_equal(dom_chip_window_maps(f.w, it_ids4, 4), 0);
    assert_int_equal(dom_shm_windows(), 0);
    /* The names are free again and the worker works. */
    s.mode = 0;
    it_ok(strata_worker_run(f.w, sweep_orch, NULL, &s));
    assert_int_equal(dom_check_allreduce(f.b[0], 3, 64, 4), 0);
    assert_int_equal(dom_chip_window_maps(f.w, it_ids4, 4), 0);
    it_fx_end(&f);
}

static void test_domain_lifetime_sweep_forgotten_on_success(void **state)
{
    (void)state;
    sweep_case(0, STRATA_OK);
}

static void test_domain_lifetime_sweep_forgotten_on_task_failure(void **state)
{
    (void)state;
    sweep_case(1, STRATA_ETASK);
}

static void test_domain_lifetime_sweep_forgotten_on_orch_failure(void **state)
{
    (void)state;
    sweep_case(2, STRATA_EIO);
}

/* ---- the same name in two concurrent runs */

struct twin {
    struct it_fx *f;
    strata_domain *a, *b;
};

static strata_err twin_a_orch(strata_orch *o, const strata_args *args,
                              void *user)
{
    (void)args;
    struct twin *t = user;
    struct dom_spec sp;

    dom_spec_init(&sp, "twin", ids01, 2, 4096);
    it_try(strata_orch_allocate_domain(o, &sp.spec, &t->a));
    /* Keeps run A open until the test raises the flag. */
    return it_submit_wait_flag(o, 0, t->f->b[0], t->f->b[1]);
}

static strata_err twin_b_orch(strata_orch *o, const strata_args *args,
                              void *user)
{
    (void)args;
    struct twin *t = user;
    struct dom_spec sp;

    dom_spec_init(&sp, "twin", ids23, 2, 4096);
    it_try(strata_orch_allocate_domain(o, &sp.spec, &t->b));
    return dom_submit_allreduce(o, t->b, ids23, 2, 0, 64, 1024, 6, t->f->b[2]);
}

static void test_domain_lifetime_same_name_in_concurrent_runs_ok(void **state)
{
    (void)state;
    struct it_fx f;
    struct twin t = {.f = &f};
    strata_run *run = NULL;
    it_fx_start(&f, 1024);
    it_ok(strata_worker_submit(f.w, twin_a_orch, NULL, &t, &run));
    it_ok(strata_worker_run(f.w, twin_b_orch, NULL, &t));
    assert_int_equal(dom_check_allreduce(f.b[2], 2, 64, 6), 0);
    assert_true(strata_domain_freed(t.b));
    assert_false(strata_domain_freed(t.a));
    testutil_store_u32(&it_fx_w(&f, 0)[0], 1);
    it_ok(strata_run_wait(run, -1));
    strata_run_free(run);
    assert_true(strata_domain_freed(t.a));
    assert_int_equal(dom_chip_window_maps(f.w, it_ids4, 4), 0);
    it_fx_end(&f);
}

/* ---- several live domains in one run */

struct multi {
    struct it_fx *f;
    strata_domain *a, *b;
    strata_chip_domain_ctx ca, cb;
};

/* Disjoint {0,1} and {2,3}: both groups must run at the same time (every
 * member meets all four before reducing). */
static strata_err disjoint_orch(strata_orch *o, const strata_args *args,
                                void *user)
{
    (void)args;
    struct multi *m = user;
    struct dom_spec sp;

    dom_spec_init(&sp, "left", ids01, 2, 8192);
    it_try(strata_orch_allocate_domain(o, &sp.spec, &m->a));
    dom_spec_init(&sp, "right", ids23, 2, 8192);
    it_try(strata_orch_allocate_domain(o, &sp.spec, &m->b));
    it_try(dom_submit_allreduce_meet(o, m->a, ids01, 2, 0, 1024, 4096, 11,
                                     m->f->b[0], m->f->b[4], 4));
    return dom_submit_allreduce_meet(o, m->b, ids23, 2, 0, 1024, 4096, 12,
                                     m->f->b[1], m->f->b[4], 4);
}

static void test_domain_lifetime_disjoint_domains_run_concurrently(void **state)
{
    (void)state;
    struct it_fx f;
    struct multi m = {.f = &f};
    it_fx_start(&f, 4096);
    it_ok(strata_worker_run(f.w, disjoint_orch, NULL, &m));
    assert_int_equal(it_fx_w(&f, 4)[0], 4);
    assert_int_equal(dom_check_allreduce(f.b[0], 2, 1024, 11), 0);
    assert_int_equal(dom_check_allreduce(f.b[1], 2, 1024, 12), 0);
    assert_true(strata_domain_freed(m.a) && strata_domain_freed(m.b));
    assert_int_equal(dom_chip_window_maps(f.w, it_ids4, 4), 0);
    it_fx_end(&f);
}

/* Overlapping {0,1,2} and {2,1} (chips 1 and 2 in both, in other rank
 * orders): both live, used one after the other, then again interleaved;
 * each keeps its own windows. */
static strata_err overlap_orch(strata_orch *o, const strata_args *args,
                               void *user)
{
    (void)args;
    struct multi *m = user;
    struct dom_spec sp;

    dom_spec_init(&sp, "wide", ids012, 3, 8192);
    it_try(strata_orch_allocate_domain(o, &sp.spec, &m->a));
    dom_spec_init(&sp, "pair", ids21, 2, 8192);
    it_try(strata_orch_allocate_domain(o, &sp.spec, &m->b));
    it_try(strata_domain_context(m->a, 2, &m->ca));
    it_try(strata_domain_context(m->b, 2, &m->cb));
    it_try(dom_submit_allreduce(o, m->a, ids012, 3, 0, 1024, 4096, 21,
                                m->f->b[0]));
    it_try(
        dom_submit_allreduce(o, m->b, ids21, 2, 0, 1024, 4096, 22, m->f->b[1]));
    /* Second round on fresh flag words, the pair first. */
    it_try(
        dom_submit_allreduce(o, m->b, ids21, 2, 0, 1024, 4100, 23, m->f->b[3]));
    return dom_submit_allreduce(o, m->a, ids012, 3, 0, 1024, 4100, 24,
                                m->f->b[2]);
}

static void
test_domain_lifetime_overlapping_domains_keep_own_windows(void **state)
{
    (void)state;
    struct it_fx f;
    struct multi m = {.f = &f};
    it_fx_start(&f, 4096);
    it_ok(strata_worker_run(f.w, overlap_orch, NULL, &m));
    assert_true(m.ca.local_window_base != m.cb.local_window_base);
    assert_true(m.ca.device_ctx != m.cb.device_ctx);
    assert_int_equal(m.ca.domain_rank, 2);
    assert_int_equal(m.cb.domain_rank, 0);
    assert_int_equal(dom_check_allreduce(f.b[0], 3, 1024, 21), 0);
    assert_int_equal(dom_check_allreduce(f.b[1], 2, 1024, 22), 0);
    assert_int_equal(dom_check_allreduce(f.b[3], 2, 1024, 23), 0);
    assert_int_equal(dom_check_allreduce(f.b[2], 3, 1024, 24), 0);
    assert_true(strata_domain_freed(m.a) && strata_domain_freed(m.b));
    assert_int_equal(dom_chip_window_maps(f.w, it_ids4, 4), 0);
    it_fx_end(&f);
}

/* ---- many short runs, each allocating and forgetting domains */

static strata_err churn_orch(strata_orch *o, const strata_args *args,
                             void *user)
{
    struct it_fx *f = user;
    uint32_t round = (uint32_t)strata_args_scalar(args, 0);
    struct dom_spec sp;
    strata_domain *d;
    const int *ids = round % 2 ? ids21 : ids012;
    size_t n = round % 2 ? 2 : 3;

    dom_spec_init(&sp, "churn", ids, n, 4096);
    it_try(strata_orch_allocate_domain(o, &sp.spec, &d));
    it_try(dom_submit_allreduce(o, d, ids, n, 0, 16, 1024, round,
                                f->b[round % 2]));
    if (round % 3 == 0)
        it_try(strata_domain_release(d));
    return STRATA_OK;
}

static void test_domain_lifetime_many_runs_no_leak(void **state)
{
    (void)state;
    struct it_fx f;
    strata_args *args = NULL;
    it_fx_start(&f, 64);
    it_ok(strata_args_create(&args));
    for (uint32_t round = 1; round <= 40; round++) {
        strata_args_clear(args);
        it_ok(strata_args_add_scalar(args, round));
        it_ok(strata_worker_run(f.w, churn_orch, args, &f));
        assert_int_equal(
            dom_check_allreduce(f.b[round % 2], round % 2 ? 2 : 3, 16, round),
            0);
    }
    strata_args_destroy(args);
    assert_int_equal(dom_chip_window_maps(f.w, it_ids4, 4), 0);
    it_fx_end(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(
            test_domain_lifetime_released_now_freed_after_fence, it_teardown),
        cmocka_unit_test_teardown(
            test_domain_lifetime_freed_only_at_submitted_run_fence,
            it_teardown),
        cmocka_unit_test_teardown(
            test_domain_lifetime_sweep_forgotten_on_success, it_teardown),
        cmocka_unit_test_teardown(
            test_domain_lifetime_sweep_forgotten_on_task_failure, it_teardown),
        cmocka_unit_test_teardown(
            test_domain_lifetime_sweep_forgotten_on_orch_failure, it_teardown),
        cmocka_unit_test_teardown(
            test_domain_lifetime_same_name_in_concurrent_runs_ok, it_teardown),
        cmocka_unit_test_teardown(
            test_domain_lifetime_disjoint_domains_run_concurrently,
            it_teardown),
        cmocka_unit_test_teardown(
            test_domain_lifetime_overlapping_domains_keep_own_windows,
            it_teardown),
        cmocka_unit_test_teardown(test_domain_lifetime_many_runs_no_leak,
                                  it_teardown),
    };
    return cmocka_run_group_tests(tests, dom_setup, NULL);
}
