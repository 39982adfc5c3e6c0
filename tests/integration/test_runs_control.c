/*
 * Run control through the public API: back-to-back and long runs,
 * dependencies on an earlier unfinished run, submit + wait with a timeout,
 * scopes, orch fn errors.
 */
#define _GNU_SOURCE
#include "it_kernels.h"

#include <string.h>

/* ---- many runs, many tasks, cross-run dependencies */

static strata_err inc_orch(strata_orch *o, const strata_args *args, void *user)
{
    struct it_fx *f = user;
    size_t n = (size_t)strata_args_scalar(args, 0);
    for (size_t i = 0; i < n; i++)
        it_try(it_submit1(o, it_k_inc, it_ids4[i % 4], f->b[0], 0, 1,
                          STRATA_INOUT));
    return STRATA_OK;
}

static void test_runs_back_to_back_and_long_runs(void **state)
{
    (void)state;
    struct it_fx f;
    strata_args *args = NULL;
    it_fx_start(&f, 4);
    it_ok(strata_args_create(&args));
    it_ok(strata_args_add_scalar(args, 1));
    for (uint32_t r = 0; r < 100; r++)
        it_ok(strata_worker_run(f.w, inc_orch, args, &f));
    assert_int_equal(it_fx_w(&f, 0)[0], 100);
    /* One run with more tasks than any ring or slot table holds. */
    strata_args_clear(args);
    it_ok(strata_args_add_scalar(args, 1000));
    it_ok(strata_worker_run(f.w, inc_orch, args, &f));
    assert_int_equal(it_fx_w(&f, 0)[0], 1100);
    strata_args_destroy(args);
    it_fx_end(&f);
}

static strata_err slow_fill_orch(strata_orch *o, const strata_args *args,
                                 void *user)
{
    (void)args;
    struct it_fx *f = user;
    return it_submit_fill(o, 0, f->b[0], 0, f->n, 40, 50000);
}

static strata_err read_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)args;
    struct it_fx *f = user;
    return it_submit_scale(o, 1, f->b[0], f->b[1], f->n, 1, 0);
}

static void test_runs_depend_on_earlier_unfinished_run(void **state)
{
    (void)state;
    struct it_fx f;
    strata_run *run = NULL;
    it_fx_start(&f, 32);
    it_ok(strata_worker_submit(f.w, slow_fill_orch, NULL, &f, &run));
    it_ok(strata_worker_run(f.w, read_orch, NULL, &f));
    for (uint32_t i = 0; i < f.n; i++)
        assert_int_equal(it_fx_w(&f, 1)[i], 40 + i);
    it_ok(strata_run_wait(run, -1));
    strata_run_free(run);
    it_fx_end(&f);
}

/* ---- submit and wait with a timeout */

static strata_err wait_flag_orch(strata_orch *o, const strata_args *args,
                                 void *user)
{
    (void)args;
    struct it_fx *f = user;
    return it_submit_wait_flag(o, 3, f->b[0], f->b[1]);
}

static void test_runs_submit_wait_timeout_then_ok(void **state)
{
    (void)state;
    struct it_fx f;
    strata_run *run = NULL;
    it_fx_start(&f, 4);
    it_ok(strata_worker_submit(f.w, wait_flag_orch, NULL, &f, &run));
    double t0 = testutil_now();
    it_expect(STRATA_ETIMEDOUT, strata_run_wait(run, 0.05));
    double waited = testutil_now() - t0;
    assert_true(waited >= 0.04 && waited < 1.0);
    it_expect(STRATA_ETIMEDOUT, strata_run_wait(run, 0));
    testutil_store_u32(&it_fx_w(&f, 0)[0], 1);
    it_ok(strata_run_wait(run, -1));
    assert_int_equal(it_fx_w(&f, 1)[0], 77);
    it_ok(strata_run_wait(run, 0)); /* same result again */
    strata_run_free(run);
    it_fx_end(&f);
}

/* ---- scopes and orch errors */

struct scope_ctx {
    struct it_fx *f;
    int mode;
    strata_err rc[4];
    bool seen;
};

static strata_err scope_orch(strata_orch *o, const strata_args *args,
                             void *user)
{
    (void)args;
    struct scope_ctx *s = user;
    strata_buffer *b = s->f->b[0];
    if (s->mode == 0) { /* nested scopes; values visible after each end */
        it_try(strata_orch_scope_begin(o));
        it_try(it_submit_fill(o, 0, b, 0, 8, 1000, 20000));
        it_try(strata_orch_scope_begin(o));
        it_try(it_submit_fill(o, 1, b, 8, 8, 2000, 20000));
        s->rc[0] = strata_orch_scope_end(o);
        s->seen = it_u32(b)[15] == 2007;
        s->rc[1] = strata_orch_scope_end(o);
        s->seen = s->seen && it_u32(b)[7] == 1007;
        return STRATA_OK;
    }
    if (s->mode == 1) { /* unbalanced end */
        s->rc[0] = strata_orch_scope_end(o);
        return STRATA_OK;
    }
    if (s->mode == 2) /* left open */
        return strata_orch_scope_begin(o);
    /* mode 3: nesting limit of 16 */
    size_t opened = 0;
    while (opened < 17 && strata_orch_scope_begin(o) == STRATA_OK)
        opened++;
    s->rc[0] = opened == 16 ? STRATA_OK : STRATA_EINVAL;
    while (opened > 0 && strata_orch_scope_end(o) == STRATA_OK)
        opened--;
    s->rc[1] = opened == 0 ? STRATA_OK : STRATA_EINVAL;
    return STRATA_OK;
}

static void test_runs_scopes(void **state)
{
    (void)state;
    struct it_fx f;
    it_fx_start(&f, 16);
    struct scope_ctx s = {.f = &f, .mode = 0};
    it_ok(strata_worker_run(f.w, scope_orch, NULL, &s));
    it_ok(s.rc[0]);
    it_ok(s.rc[1]);
    assert_true(s.seen);

    s.mode = 1;
    it_ok(strata_worker_run(f.w, scope_orch, NULL, &s));
    it_expect(STRATA_ESTATE, s.rc[0]);

    s.mode = 2;
    it_expect(STRATA_ESTATE, strata_worker_run(f.w, scope_orch, NULL, &s));

    s.mode = 3;
    it_ok(strata_worker_run(f.w, scope_orch, NULL, &s));
    it_ok(s.rc[0]); /* exactly 16 nest */
    it_ok(s.rc[1]);
    it_fx_end(&f);
}

static strata_err failing_orch(strata_orch *o, const strata_args *args,
                               void *user)
{
    (void)args;
    struct it_fx *f = user;
    /* A task submitted before the failure still runs to the fence. */
    it_try(it_submit_fill(o, 0, f->b[0], 0, 4, 9, 10000));
    strata_errmsg_set("orch gave up");
    return STRATA_EIO;
}

/* A code of the orch fn's own, without a message. */
static strata_err busy_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)o;
    (void)args;
    (void)user;
    return STRATA_EBUSY;
}

static void test_runs_orch_error_propagates(void **state)
{
    (void)state;
    struct it_fx f;
    strata_run *run = NULL;
    it_fx_start(&f, 4);
    it_expect(STRATA_EIO, strata_worker_run(f.w, failing_orch, NULL, &f));
    assert_string_equal(strata_errmsg(),
                        "orch function returned STRATA_EIO: orch gave up");
    assert_int_equal(it_fx_w(&f, 0)[3], 12);
    it_expect(STRATA_EBUSY, strata_worker_run(f.w, busy_orch, NULL, NULL));
    assert_string_equal(strata_errmsg(), "orch function returned STRATA_EBUSY");
    memset(it_fx_w(&f, 0), 0, 16);
    it_ok(strata_worker_submit(f.w, failing_orch, NULL, &f, &run));
    it_expect(STRATA_EIO, strata_run_wait(run, -1));
    it_expect(STRATA_EIO, strata_run_wait(run, -1));
    strata_run_free(run);
    assert_int_equal(it_fx_w(&f, 0)[3], 12);
    /* The worker stays usable after a failed run. */
    it_ok(strata_worker_run(f.w, slow_fill_orch, NULL, &f));
    assert_int_equal(it_fx_w(&f, 0)[3], 43);
    it_fx_end(&f);
}

static int setup(void **state)
{
    (void)state;
    return it_kernels_register();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_runs_back_to_back_and_long_runs,
                                  it_teardown),
        cmocka_unit_test_teardown(test_runs_depend_on_earlier_unfinished_run,
                                  it_teardown),
        cmocka_unit_test_teardown(test_runs_submit_wait_timeout_then_ok,
                                  it_teardown),
        cmocka_unit_test_teardown(test_runs_scopes, it_teardown),
        cmocka_unit_test_teardown(test_runs_orch_error_propagates, it_teardown),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
