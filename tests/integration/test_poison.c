/*
 * Failure semantics of a run: a failing task poisons its not-yet-started
 * dependents (they never run), independent tasks still run, the first
 * error wins, strata_errmsg() names callable, target and message, and the
 * worker stays usable.
 */
#define _GNU_SOURCE
#include "it_kernels.h"

#include <string.h>

static strata_callable k_fail, s_fail;

/* OUT t0 (never written); fails with "boom <s0>" after s1 us. */
static strata_err fail_kernel(strata_chip *chip, const strata_args *a)
{
    (void)chip;
    testutil_busy((double)strata_args_scalar(a, 1) * 1e-6);
    strata_errmsg_set("boom %d", (int)strata_args_scalar(a, 0));
    return STRATA_EIO;
}

/* Fails with a message longer than STRATA_ERRMSG_MAX. */
static strata_err fail_sub(const strata_args *a)
{
    char msg[STRATA_ERRMSG_MAX + 100];
    (void)a;
    memset(msg, 'x', sizeof(msg) - 1);
    msg[sizeof(msg) - 1] = '\0';
    memcpy(msg, "sub boom ", 9);
    strata_errmsg_set("%s", msg);
    return STRATA_EPROTO;
}

static strata_err submit_fail(strata_orch *o, int chip, strata_buffer *b,
                              uint32_t code, uint32_t busy_us)
{
    strata_args *a = NULL;
    it_try(it_args1(b, 0, 4, STRATA_OUT, &a));
    strata_err e = strata_args_add_scalar(a, code);
    if (e == STRATA_OK)
        e = strata_args_add_scalar(a, busy_us);
    if (e == STRATA_OK)
        e = strata_orch_submit_next_level(o, k_fail, a, chip);
    strata_args_destroy(a);
    return e;
}

/* Copies strata_errmsg() so later calls cannot clobber it. */
static void grab_errmsg(char out[STRATA_ERRMSG_MAX])
{
    const char *m = strata_errmsg();
    assert_non_null(m);
    assert_true(strlen(m) < STRATA_ERRMSG_MAX);
    snprintf(out, STRATA_ERRMSG_MAX, "%s", m);
}

static void assert_contains(const char *hay, const char *needle)
{
    if (!strstr(hay, needle))
        fail_msg("\"%s\" does not contain \"%s\"", hay, needle);
}

static void assert_zero(const uint32_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != 0)
            fail_msg("word %zu is %u: a poisoned task ran", i, p[i]);
}

static strata_err poison_orch(strata_orch *o, const strata_args *args,
                              void *user)
{
    (void)args;
    struct it_fx *f = user;
    /* b0 <- fail (chip 1); b1 <- b0 (chip 0); b2 <- b1 (chip 2);
     * b4 <- b0 (sub); b3 independent (chip 3). */
    it_try(submit_fail(o, 1, f->b[0], 7, 10000));
    it_try(it_submit_scale(o, 0, f->b[0], f->b[1], 4, 1, 0xdead));
    it_try(it_submit_scale(o, 2, f->b[1], f->b[2], 4, 1, 0xdead));
    it_try(it_submit_scale(o, -1, f->b[0], f->b[4], 4, 1, 0xdead));
    return it_submit_fill(o, 3, f->b[3], 0, 4, 50, 20000);
}

static void test_poison_failed_task_poisons_dependents_only(void **state)
{
    (void)state;
    struct it_fx f;
    char msg[STRATA_ERRMSG_MAX];
    it_fx_start(&f, 4);
    it_expect(STRATA_ETASK, strata_worker_run(f.w, poison_orch, NULL, &f));
    grab_errmsg(msg);
    assert_contains(msg, "poison.fail");
    assert_contains(msg, "chip 1");
    assert_contains(msg, "boom 7");
    assert_zero(it_fx_w(&f, 1), 4);
    assert_zero(it_fx_w(&f, 2), 4);
    assert_zero(it_fx_w(&f, 4), 4);
    for (uint32_t i = 0; i < 4; i++)
        assert_int_equal(it_fx_w(&f, 3)[i], 50 + i);
    it_fx_end(&f);
}

static strata_err two_failures_orch(strata_orch *o, const strata_args *args,
                                    void *user)
{
    (void)args;
    struct it_fx *f = user;
    /* Independent failures; chip 2's comes ~100 ms after chip 0's. */
    it_try(submit_fail(o, 2, f->b[1], 2, 100000));
    it_try(submit_fail(o, 0, f->b[0], 1, 0));
    return STRATA_OK;
}

static void test_poison_first_error_wins(void **state)
{
    (void)state;
    struct it_fx f;
    char msg[STRATA_ERRMSG_MAX];
    it_fx_start(&f, 4);
    it_expect(STRATA_ETASK,
              strata_worker_run(f.w, two_failures_orch, NULL, &f));
    grab_errmsg(msg);
    assert_contains(msg, "boom 1");
    assert_contains(msg, "chip 0");
    assert_null(strstr(msg, "boom 2"));
    it_fx_end(&f);
}

static strata_err chain_orch(strata_orch *o, const strata_args *args,
                             void *user)
{
    (void)args;
    struct it_fx *f = user;
    it_try(it_submit_fill(o, 1, f->b[0], 0, 4, 5, 0));
    it_try(it_submit_scale(o, 0, f->b[0], f->b[1], 4, 2, 0));
    return it_submit_scale(o, -1, f->b[1], f->b[4], 4, 1, 1);
}

static void test_poison_worker_usable_after_failed_run(void **state)
{
    (void)state;
    struct it_fx f;
    it_fx_start(&f, 4);
    for (int round = 0; round < 3; round++) {
        it_expect(STRATA_ETASK, strata_worker_run(f.w, poison_orch, NULL, &f));
        /* Same buffers: the earlier failure does not poison a new run. */
        it_ok(strata_worker_run(f.w, chain_orch, NULL, &f));
        for (uint32_t i = 0; i < 4; i++)
            assert_int_equal(it_fx_w(&f, 4)[i], 2 * (5 + i) + 1);
        memset(it_fx_w(&f, 1), 0, 16);
        memset(it_fx_w(&f, 2), 0, 16);
        memset(it_fx_w(&f, 4), 0, 16);
    }
    it_fx_end(&f);
}

static strata_err sub_fail_orch(strata_orch *o, const strata_args *args,
                                void *user)
{
    (void)args;
    struct it_fx *f = user;
    strata_args *a = NULL;
    it_try(it_args1(f->b[0], 0, 4, STRATA_OUT, &a));
    strata_err e = strata_orch_submit_sub(o, s_fail, a);
    strata_args_destroy(a);
    it_try(e);
    return it_submit_scale(o, 2, f->b[0], f->b[1], 4, 1, 0xdead);
}

static void test_poison_failing_sub_long_message_truncated(void **state)
{
    (void)state;
    struct it_fx f;
    char msg[STRATA_ERRMSG_MAX];
    it_fx_start(&f, 4);
    it_expect(STRATA_ETASK, strata_worker_run(f.w, sub_fail_orch, NULL, &f));
    grab_errmsg(msg); /* asserts it is shorter than STRATA_ERRMSG_MAX */
    assert_contains(msg, "poison.fail_sub");
    assert_contains(msg, "sub boom");
    assert_zero(it_fx_w(&f, 1), 4);
    it_fx_end(&f);
}

struct scope_ctx {
    struct it_fx *f;
    strata_err end_rc;
    char end_msg[STRATA_ERRMSG_MAX];
    strata_err after_rc;
};

static strata_err scope_fail_orch(strata_orch *o, const strata_args *args,
                                  void *user)
{
    (void)args;
    struct scope_ctx *s = user;
    it_try(strata_orch_scope_begin(o));
    it_try(submit_fail(o, 3, s->f->b[0], 9, 0));
    s->end_rc = strata_orch_scope_end(o);
    snprintf(s->end_msg, sizeof(s->end_msg), "%s", strata_errmsg());
    /* Submitting more work after a failed scope is still allowed. */
    s->after_rc = it_submit_fill(o, 1, s->f->b[2], 0, 4, 3, 0);
    return STRATA_OK;
}

static void test_poison_scope_end_reports_task_error(void **state)
{
    (void)state;
    struct it_fx f;
    struct scope_ctx s = {.f = &f};
    char msg[STRATA_ERRMSG_MAX];
    it_fx_start(&f, 4);
    it_expect(STRATA_ETASK, strata_worker_run(f.w, scope_fail_orch, NULL, &s));
    grab_errmsg(msg);
    assert_contains(msg, "boom 9");
    it_expect(STRATA_ETASK, s.end_rc);
    assert_contains(s.end_msg, "boom 9");
    it_ok(s.after_rc);
    assert_int_equal(it_fx_w(&f, 2)[3], 6);
    it_fx_end(&f);
}

static void test_poison_run_wait_reports_etask(void **state)
{
    (void)state;
    struct it_fx f;
    strata_run *run = NULL;
    char msg[STRATA_ERRMSG_MAX];
    it_fx_start(&f, 4);
    it_ok(strata_worker_submit(f.w, poison_orch, NULL, &f, &run));
    it_expect(STRATA_ETASK, strata_run_wait(run, 10.0));
    grab_errmsg(msg);
    assert_contains(msg, "boom 7");
    assert_contains(msg, "chip 1");
    it_expect(STRATA_ETASK, strata_run_wait(run, 0));
    strata_run_free(run);
    assert_zero(it_fx_w(&f, 1), 4);
    it_fx_end(&f);
}

static int setup(void **state)
{
    (void)state;
    if (it_kernels_register() != 0)
        return -1;
    it_register(kernel, "poison.fail", fail_kernel, &k_fail);
    it_register(sub, "poison.fail_sub", fail_sub, &s_fail);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(
            test_poison_failed_task_poisons_dependents_only, it_teardown),
        cmocka_unit_test_teardown(test_poison_first_error_wins, it_teardown),
        cmocka_unit_test_teardown(test_poison_worker_usable_after_failed_run,
                                  it_teardown),
        cmocka_unit_test_teardown(
            test_poison_failing_sub_long_message_truncated, it_teardown),
        cmocka_unit_test_teardown(test_poison_scope_end_reports_task_error,
                                  it_teardown),
        cmocka_unit_test_teardown(test_poison_run_wait_reports_etask,
                                  it_teardown),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
