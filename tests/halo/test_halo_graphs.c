/* Halo forward and VJP on the graphs users have: a uniform random graph
 * (16 sources per row) and a power-law R-MAT graph (a = 0.57, b = c =
 * 0.19, ids scrambled), where a contiguous split makes most rows boundary
 * rows and most rows ghosts of another rank; 1 to 4 chips, 32 float32
 * features, both schedules, the default hand-off and small chunks.
 *
 * Exact, against a single-process reference: the features are integers,
 * so every sum is exact whatever its order (forward and VJP sum); the mean
 * forward is compared with the reference loop's own float32 arithmetic
 * (entries in order, then times 1/deg), bit for bit; the mean VJP adds
 * rounded products in another order across ranks, so it is compared
 * within float32 rounding. Each handle runs twice, so that what one call
 * leaves in the exchange buffer cannot leak into the next. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "halo_kit.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 3000
#define DEG 16
#define F 32

static testutil_snapshot snap;
static struct hk_env env;

static int setup(void **state)
{
    (void)state;
    testutil_snapshot_take(&snap);
    hk_env_start(&env, (size_t)N * F * sizeof(float));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    hk_env_stop(&env);
    testutil_assert_clean(&snap);
    return 0;
}

static uint64_t below(uint64_t *s, uint64_t n)
{
    return gh_rand(s) % n;
}

static void graph_alloc(struct gh_graph *g, uint64_t n)
{
    g->n = n;
    g->row_ptr = calloc(n + 1, sizeof(int64_t));
    g->col_idx = calloc(n * DEG + 1, sizeof(int64_t));
    assert_non_null(g->row_ptr);
    assert_non_null(g->col_idx);
}

static void graph_uniform(struct gh_graph *g, uint64_t n, uint64_t seed)
{
    graph_alloc(g, n);
    for (uint64_t i = 0; i <= n; i++)
        g->row_ptr[i] = (int64_t)(i * DEG);
    for (uint64_t k = 0; k < n * DEG; k++)
        g->col_idx[k] = (int64_t)below(&seed, n);
}

/* R-MAT over the next power of two (pairs outside [0, n) drawn again),
 * ids relabelled by a random permutation, rows by destination. */
static void graph_rmat(struct gh_graph *g, uint64_t n, uint64_t seed)
{
    uint64_t e = n * DEG;
    uint64_t *dst = malloc(e * sizeof(uint64_t));
    uint64_t *src = malloc(e * sizeof(uint64_t));
    uint64_t *perm = malloc(n * sizeof(uint64_t));
    int scale = 0;

    assert_non_null(dst);
    assert_non_null(src);
    assert_non_null(perm);
    graph_alloc(g, n);
    while (((uint64_t)1 << scale) < n)
        scale++;
    for (uint64_t i = 0; i < n; i++)
        perm[i] = i;
    for (uint64_t i = n - 1; i > 0; i--) {
        uint64_t j = below(&seed, i + 1), t = perm[i];

        perm[i] = perm[j];
        perm[j] = t;
    }
    for (uint64_t k = 0; k < e;) {
        uint64_t d = 0, c = 0;

        for (int b = 0; b < scale; b++) {
            uint64_t r = below(&seed, 100);

            d = d << 1 | (r >= 76);
            c = c << 1 | ((r >= 57 && r < 76) || r >= 95);
        }
        if (d >= n || c >= n)
            continue;
        dst[k] = perm[d];
        src[k++] = perm[c];
    }
    for (uint64_t k = 0; k < e; k++)
        g->row_ptr[dst[k] + 1]++;
    for (uint64_t i = 0; i < n; i++)
        g->row_ptr[i + 1] += g->row_ptr[i];
    for (uint64_t k = 0; k < e; k++)
        g->col_idx[g->row_ptr[dst[k]]++] = (int64_t)src[k];
    for (uint64_t i = n; i > 0; i--)
        g->row_ptr[i] = g->row_ptr[i - 1];
    g->row_ptr[0] = 0;
    free(dst);
    free(src);
    free(perm);
}

/* Integers in [-8, 8): every sum of up to 2^20 of them is exact. */
static void fill_ints(strata_buffer *b, uint64_t seed)
{
    float *v = strata_buffer_data(b);

    for (size_t i = 0; i < (size_t)N * F; i++)
        v[i] = (float)(int)(gh_rand(&seed) % 16) - 8.0f;
}

/* The reference forward in float32, entries in order then times 1/deg:
 * what the kernels compute, bit for bit. */
static void ref_forward(const struct gh_graph *g, const float *x, bool mean,
                        float *out)
{
    for (uint64_t i = 0; i < g->n; i++) {
        int64_t lo = g->row_ptr[i], hi = g->row_ptr[i + 1];

        for (int f = 0; f < F; f++) {
            float acc = 0;

            for (int64_t k = lo; k < hi; k++)
                acc += x[(uint64_t)g->col_idx[k] * F + (uint64_t)f];
            if (mean && hi > lo)
                acc *= (float)(1.0 / (double)(hi - lo));
            out[i * F + (uint64_t)f] = acc;
        }
    }
}

/* The reference VJP in float32, rows in order, each term a product then a
 * sum: what the in-place schedule computes, bit for bit, on any number of
 * chips. */
static void ref_vjp_f32(const struct gh_graph *g, const float *gout, bool mean,
                        float *gx)
{
    memset(gx, 0, (size_t)g->n * F * sizeof(float));
    for (uint64_t i = 0; i < g->n; i++) {
        int64_t lo = g->row_ptr[i], hi = g->row_ptr[i + 1];
        float w = mean && hi > lo ? (float)(1.0 / (double)(hi - lo)) : 1.0f;

        for (int64_t k = lo; k < hi; k++)
            for (int f = 0; f < F; f++) {
                volatile float t = w * gout[i * F + (uint64_t)f];

                gx[(uint64_t)g->col_idx[k] * F + (uint64_t)f] += t;
            }
    }
}

/* The reference VJP in double (exact for sum: integer terms). */
static void ref_vjp(const struct gh_graph *g, const float *gout, bool mean,
                    double *gx, double *mag)
{
    memset(gx, 0, (size_t)g->n * F * sizeof(double));
    memset(mag, 0, (size_t)g->n * F * sizeof(double));
    for (uint64_t i = 0; i < g->n; i++) {
        int64_t lo = g->row_ptr[i], hi = g->row_ptr[i + 1];
        double w =
            mean && hi > lo ? (double)(float)(1.0 / (double)(hi - lo)) : 1.0;

        for (int64_t k = lo; k < hi; k++)
            for (int f = 0; f < F; f++) {
                double t = w * gout[i * F + (uint64_t)f];

                gx[(uint64_t)g->col_idx[k] * F + (uint64_t)f] += t;
                mag[(uint64_t)g->col_idx[k] * F + (uint64_t)f] += fabs(t);
            }
    }
}

static void check(const struct gh_graph *g, const char *name)
{
    static const int chips[4] = {2, 0, 3, 1};
    static const strata_halo_schedule scheds[3] = {
        STRATA_HALO_OVERLAPPED, STRATA_HALO_SERIALIZED, STRATA_HALO_IN_PLACE};
    static const size_t chunks[2] = {0, 1000}; /* default, 7 rows */
    size_t count = (size_t)N * F;
    float *in = malloc(count * sizeof(float));
    float *fref = malloc(count * sizeof(float));
    double *vref = malloc(count * sizeof(double));
    double *mag = malloc(count * sizeof(double));
    float *vref32 = malloc(count * sizeof(float));
    const strata_csr_view v = gh_view(g);

    assert_non_null(in);
    assert_non_null(fref);
    assert_non_null(vref);
    assert_non_null(mag);
    assert_non_null(vref32);
    for (size_t world = 1; world <= 4; world++)
        for (int mean = 0; mean < 2; mean++)
            for (int s = 0; s < 3; s++)
                for (int c = 0; c < 2; c++) {
                    strata_halo_spec spec;
                    strata_halo *h = NULL;

                    strata_halo_spec_init(&spec);
                    spec.csr = &v;
                    spec.chips = chips;
                    spec.num_chips = world;
                    spec.features = F;
                    spec.reducer = mean ? STRATA_HALO_MEAN : STRATA_HALO_SUM;
                    spec.schedule = scheds[s];
                    spec.chunk_bytes = chunks[c];
                    assert_int_equal(strata_halo_create(env.w, &spec, &h),
                                     STRATA_OK);
                    for (int call = 0; call < 2; call++) {
                        const float *o = strata_buffer_data(env.out);
                        const float *gx = strata_buffer_data(env.grad_x);
                        uint64_t seed = 11 + (uint64_t)call;

                        fill_ints(env.x, seed);
                        fill_ints(env.grad_out, seed * 31);
                        memset(strata_buffer_data(env.out), 0xff, env.cap);
                        memset(strata_buffer_data(env.grad_x), 0xff, env.cap);
                        assert_int_equal(hk_call(&env, h, false), STRATA_OK);
                        assert_int_equal(hk_call(&env, h, true), STRATA_OK);
                        memcpy(in, strata_buffer_data(env.x),
                               count * sizeof(float));
                        ref_forward(g, in, mean, fref);
                        for (size_t i = 0; i < count; i++)
                            if (memcmp(&o[i], &fref[i], sizeof(float)) != 0)
                                fail_msg("%s world %zu %s sched %d chunk %zu "
                                         "call %d: forward [%zu] = %g, "
                                         "reference %g",
                                         name, world, mean ? "mean" : "sum", s,
                                         chunks[c], call, i, (double)o[i],
                                         (double)fref[i]);
                        memcpy(in, strata_buffer_data(env.grad_out),
                               count * sizeof(float));
                        ref_vjp(g, in, mean, vref, mag);
                        ref_vjp_f32(g, in, mean, vref32);
                        for (size_t i = 0; i < count; i++) {
                            if (scheds[s] == STRATA_HALO_IN_PLACE &&
                                memcmp(&gx[i], &vref32[i], sizeof(float)))
                                fail_msg("%s world %zu %s in place call %d: "
                                         "vjp [%zu] = %.9g, float32 "
                                         "reference %.9g",
                                         name, world, mean ? "mean" : "sum",
                                         call, i, (double)gx[i],
                                         (double)vref32[i]);
                        }
                        for (size_t i = 0; i < count; i++) {
                            /* float32 rounding of each partial sum */
                            double tol = mean ? 1e-6 * (1 + mag[i]) : 0;

                            if (!(fabs((double)gx[i] - vref[i]) <= tol))
                                fail_msg("%s world %zu %s sched %d chunk %zu "
                                         "call %d: vjp [%zu] = %.9g, "
                                         "reference %.9g",
                                         name, world, mean ? "mean" : "sum", s,
                                         chunks[c], call, i, (double)gx[i],
                                         vref[i]);
                        }
                    }
                    assert_int_equal(strata_halo_destroy(h), STRATA_OK);
                }
    free(in);
    free(fref);
    free(vref);
    free(mag);
    free(vref32);
}

static void test_halo_graphs_uniform_random_1_to_4_chips(void **state)
{
    struct gh_graph g;

    (void)state;
    graph_uniform(&g, N, 0x1234);
    check(&g, "uniform");
    gh_graph_free(&g);
}

static void test_halo_graphs_rmat_1_to_4_chips(void **state)
{
    struct gh_graph g;

    (void)state;
    graph_rmat(&g, N, 0x5678);
    check(&g, "rmat");
    gh_graph_free(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_halo_graphs_uniform_random_1_to_4_chips),
        cmocka_unit_test(test_halo_graphs_rmat_1_to_4_chips),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
