/* Allocation hooks route every strata allocation, and lock once an object
 * exists. Its own executable: hooks are process-wide. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <strata/strata.h>

#include <stdlib.h>

struct counts {
    long mallocs;
    long reallocs;
    long frees;
};

static void *h_malloc(size_t n, void *ctx)
{
    ((struct counts *)ctx)->mallocs++;
    return malloc(n);
}

static void *h_realloc(void *p, size_t n, void *ctx)
{
    if (!p)
        ((struct counts *)ctx)->mallocs++;
    ((struct counts *)ctx)->reallocs++;
    return realloc(p, n);
}

static void h_free(void *p, void *ctx)
{
    ((struct counts *)ctx)->frees++;
    free(p);
}

static strata_err noop(strata_chip *c, const strata_args *a)
{
    (void)c;
    (void)a;
    return STRATA_OK;
}

static strata_callable k;

static strata_err orch(strata_orch *o, const strata_args *a, void *user)
{
    (void)user;
    return strata_orch_submit_next_level(o, k, a, 0);
}

static void test_alloc_hooks_route_and_balance(void **state)
{
    static struct counts c;
    strata_alloc_hooks hooks = {h_malloc, h_realloc, h_free, &c};
    strata_alloc_hooks partial = {h_malloc, NULL, h_free, &c};
    strata_worker_config cfg;
    int ids[1] = {0};
    strata_worker *w;
    strata_args *a;

    (void)state;
    assert_int_equal(strata_set_alloc_hooks(&partial), STRATA_EINVAL);
    assert_int_equal(strata_set_alloc_hooks(&hooks), STRATA_OK);
    assert_int_equal(strata_register_kernel("hooks.noop", noop, &k), STRATA_OK);
    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = ids;
    cfg.num_chips = 1;
    assert_int_equal(strata_worker_create(&cfg, &w), STRATA_OK);
    /* Objects exist now: hooks can no longer change under them. */
    assert_int_equal(strata_set_alloc_hooks(NULL), STRATA_ESTATE);
    assert_int_equal(strata_worker_init(w), STRATA_OK);
    assert_int_equal(strata_args_create(&a), STRATA_OK);
    assert_int_equal(strata_args_add_scalar(a, 1), STRATA_OK);
    assert_int_equal(strata_worker_run(w, orch, a, NULL), STRATA_OK);
    strata_args_destroy(a);
    assert_int_equal(strata_worker_destroy(w), STRATA_OK);
    assert_true(c.mallocs > 3);
    assert_int_equal(c.mallocs, c.frees);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_hooks_route_and_balance),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
