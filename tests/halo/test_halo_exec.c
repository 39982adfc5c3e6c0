/* Distributed halo forward and VJP against a single-process reference:
 * irregular graphs (isolated rows, self loops, multi-edges, a hub), every
 * schedule (in place too), sum and mean, float32 and float64, 1/2/3/4/8 ranks,
 * chips in a shuffled order, and ranks that own nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "halo_kit.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_N 400
#define MAX_F 3

static testutil_snapshot snap;
static struct hk_env env;

static int setup(void **state)
{
    (void)state;
    testutil_snapshot_take(&snap);
    hk_env_start(&env, MAX_N * MAX_F * sizeof(double));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    hk_env_stop(&env);
    testutil_assert_clean(&snap);
    return 0;
}

/* Chips in a shuffled order, so domain ranks differ from chip ids. */
static const int shuffled[HK_CHIPS] = {5, 2, 7, 0, 3, 6, 1, 4};

/* One graph, one rank count: every schedule x reducer x dtype, forward and
 * VJP, each against the reference; the forward's hand-off in one chunk
 * (the default, for these sizes), a row at a time, or 72 bytes at a time
 * (6 float32 rows of 3 features, 3 float64 ones; 24 of one feature). */
static void check_graph(const struct gh_graph *g, size_t world, size_t f,
                        const int *chips)
{
    static const strata_halo_schedule scheds[3] = {
        STRATA_HALO_OVERLAPPED, STRATA_HALO_SERIALIZED, STRATA_HALO_IN_PLACE};
    static const strata_halo_reducer reds[2] = {STRATA_HALO_SUM,
                                                STRATA_HALO_MEAN};
    static const strata_dtype dts[2] = {STRATA_F32, STRATA_F64};
    static const size_t chunks[3] = {0, 1, 72};
    const strata_csr_view v = gh_view(g);
    size_t count = g->n * f;
    double *in = calloc(count + 1, sizeof(double));
    double *ref = calloc(count + 1, sizeof(double));
    char label[128];

    assert_non_null(in);
    assert_non_null(ref);
    for (int s = 0; s < 3; s++)
        for (int r = 0; r < 2; r++)
            for (int d = 0; d < 2; d++)
                for (int c = 0; c < 3; c++) {
                    strata_halo_spec spec;
                    strata_halo *h = NULL;

                    strata_halo_spec_init(&spec);
                    spec.csr = &v;
                    spec.chips = chips;
                    spec.num_chips = world;
                    spec.features = f;
                    spec.dtype = dts[d];
                    spec.reducer = reds[r];
                    spec.schedule = scheds[s];
                    spec.chunk_bytes = chunks[c];
                    assert_int_equal(strata_halo_create(env.w, &spec, &h),
                                     STRATA_OK);
                    snprintf(label, sizeof(label),
                             "n %llu world %zu f %zu sched %d red %d dtype %d "
                             "chunk %zu",
                             (unsigned long long)g->n, world, f, s, r, d,
                             chunks[c]);

                    hk_fill(env.x, dts[d], g->n, f, 7 + (uint64_t)(s + r + d));
                    hk_fill(env.grad_out, dts[d], g->n, f, 99);
                    memset(strata_buffer_data(env.out), 0xff, env.cap);
                    memset(strata_buffer_data(env.grad_x), 0xff, env.cap);
                    assert_int_equal(hk_call(&env, h, false), STRATA_OK);
                    assert_int_equal(hk_call(&env, h, true), STRATA_OK);

                    for (size_t i = 0; i < count; i++)
                        in[i] = hk_get(env.x, dts[d], i);
                    hk_reference(g, reds[r], NULL, false, in, f, ref);
                    hk_expect_close(env.out, dts[d], ref, count, label);
                    for (size_t i = 0; i < count; i++)
                        in[i] = hk_get(env.grad_out, dts[d], i);
                    hk_reference(g, reds[r], NULL, true, in, f, ref);
                    hk_expect_close(env.grad_x, dts[d], ref, count, label);
                    assert_int_equal(strata_halo_destroy(h), STRATA_OK);
                }
    free(in);
    free(ref);
}

static void check_world(size_t world)
{
    static const uint64_t sizes[3] = {MAX_N, 37, 5};
    uint64_t st = 1234 + world;

    for (int k = 0; k < 3; k++) {
        struct gh_graph g;

        gh_graph_random(&g, sizes[k], 9, &st);
        check_graph(&g, world, k == 1 ? 1 : MAX_F,
                    k == 0 ? shuffled : shuffled + HK_CHIPS - world);
        gh_graph_free(&g);
    }
}

static void test_halo_exec_1_rank_matches_reference(void **state)
{
    (void)state;
    check_world(1);
}

static void test_halo_exec_2_ranks_match_reference(void **state)
{
    (void)state;
    check_world(2);
}

static void test_halo_exec_3_ranks_match_reference(void **state)
{
    (void)state;
    check_world(3);
}

static void test_halo_exec_4_ranks_match_reference(void **state)
{
    (void)state;
    check_world(4);
}

static void test_halo_exec_8_ranks_match_reference(void **state)
{
    (void)state;
    check_world(8);
}

/* Every source on another rank: the half-ring permutation row i <- i+n/2. */
static void test_halo_exec_all_remote_matches_reference(void **state)
{
    struct gh_graph g;

    (void)state;
    g.n = 64;
    g.row_ptr = malloc((g.n + 1) * sizeof(int64_t));
    g.col_idx = malloc(g.n * sizeof(int64_t));
    assert_non_null(g.row_ptr);
    assert_non_null(g.col_idx);
    for (uint64_t i = 0; i < g.n; i++) {
        g.row_ptr[i] = (int64_t)i;
        g.col_idx[i] = (int64_t)((i + g.n / 2) % g.n);
    }
    g.row_ptr[g.n] = (int64_t)g.n;
    check_graph(&g, 4, 2, shuffled);
    check_graph(&g, 2, 1, shuffled);
    gh_graph_free(&g);
}

/* Several calls on one handle inside one run: fresh windows each time. */
static strata_err repeat_orch(strata_orch *o, const strata_args *a, void *u)
{
    strata_halo *h = u;
    strata_err err = STRATA_OK;

    (void)a;
    for (int i = 0; i < 3 && !err; i++) {
        err = strata_halo_forward(o, h, env.x, env.out);
        if (!err)
            err = strata_halo_vjp(o, h, env.grad_out, env.grad_x);
    }
    return err;
}

static void test_halo_exec_repeated_calls_in_one_run_match(void **state)
{
    struct gh_graph g;
    strata_csr_view v;
    strata_halo_spec spec;
    strata_halo *h = NULL;
    uint64_t st = 77;
    double *in;
    double *ref;

    (void)state;
    gh_graph_random(&g, 100, 6, &st);
    v = gh_view(&g);
    strata_halo_spec_init(&spec);
    spec.csr = &v;
    spec.chips = shuffled;
    spec.num_chips = 3;
    spec.dtype = STRATA_F64;
    assert_int_equal(strata_halo_create(env.w, &spec, &h), STRATA_OK);
    hk_fill(env.x, STRATA_F64, g.n, 1, 3);
    hk_fill(env.grad_out, STRATA_F64, g.n, 1, 4);
    assert_int_equal(strata_worker_run(env.w, repeat_orch, NULL, h), STRATA_OK);
    in = calloc(g.n, sizeof(double));
    ref = calloc(g.n, sizeof(double));
    assert_non_null(in);
    assert_non_null(ref);
    memcpy(in, strata_buffer_data(env.x), g.n * sizeof(double));
    hk_reference(&g, STRATA_HALO_SUM, NULL, false, in, 1, ref);
    hk_expect_close(env.out, STRATA_F64, ref, g.n, "repeat forward");
    memcpy(in, strata_buffer_data(env.grad_out), g.n * sizeof(double));
    hk_reference(&g, STRATA_HALO_SUM, NULL, true, in, 1, ref);
    hk_expect_close(env.grad_x, STRATA_F64, ref, g.n, "repeat vjp");
    free(in);
    free(ref);
    assert_int_equal(strata_halo_destroy(h), STRATA_OK);
    gh_graph_free(&g);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_halo_exec_1_rank_matches_reference),
        T(test_halo_exec_2_ranks_match_reference),
        T(test_halo_exec_3_ranks_match_reference),
        T(test_halo_exec_4_ranks_match_reference),
        T(test_halo_exec_8_ranks_match_reference),
        T(test_halo_exec_all_remote_matches_reference),
        T(test_halo_exec_repeated_calls_in_one_run_match),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
