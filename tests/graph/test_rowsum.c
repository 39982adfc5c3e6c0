/* The halo kernels' vectorised row sums and the VJP's scatters: every
 * instruction set the CPU has, against the plain scalar loops, bit for
 * bit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "graph_helpers.h"
#include "rowsum.h"

#include <stdlib.h>
#include <string.h>

static const char *const isas[] = {"baseline", "avx2", "avx512"};
/* Feature counts around every block width (4, 2, 1 vectors of 2..16). */
static const size_t feature_counts[] = {1,  2,  3,  5,  7,  8,  9,  15, 16,
                                        17, 31, 32, 33, 48, 63, 64, 65, 100};

#define NSRC 70 /* more sources than a batch of the kernels */
#define MAXF 100

/* Source rows at odd offsets: nothing is aligned. */
struct rows {
    char *mem;
    const void *ptr[NSRC];
};

static void fill_rows(struct rows *r, strata_dtype dt, size_t f, uint64_t *seed)
{
    size_t es = dt == STRATA_F32 ? 4 : 8;

    r->mem = malloc(NSRC * (MAXF * 8 + 16));
    assert_non_null(r->mem);
    for (size_t k = 0; k < NSRC; k++) {
        char *row = r->mem + k * (MAXF * 8 + 16) + es * (k % 3);

        for (size_t j = 0; j < f; j++) {
            /* Values of very different magnitudes, so order matters. */
            double v = (double)(gh_rand(seed) % 2000001) - 1e6;

            v *= (gh_rand(seed) % 4 == 0) ? 1e-7 : 1.0;
            if (dt == STRATA_F32) {
                float x = (float)v;
                memcpy(row + j * es, &x, es);
            } else {
                memcpy(row + j * es, &v, es);
            }
        }
        r->ptr[k] = row;
    }
}

/* The plain loop: acc = (fresh ? 0 : acc) + src[0] + ..., then *= w. */
static void reference(strata_dtype dt, size_t f, void *acc,
                      const void *const *src, size_t n, bool fresh, double w)
{
    for (size_t j = 0; j < f; j++) {
        if (dt == STRATA_F32) {
            float *a = acc;
            float s = fresh ? 0 : a[j];
            for (size_t k = 0; k < n; k++)
                s += ((const float *)src[k])[j];
            a[j] = w != 1.0 ? s * (float)w : s;
        } else {
            double *a = acc;
            double s = fresh ? 0 : a[j];
            for (size_t k = 0; k < n; k++)
                s += ((const double *)src[k])[j];
            a[j] = w != 1.0 ? s * w : s;
        }
    }
}

static void check_isa_sums(const char *isa)
{
    static const size_t counts[] = {0, 1, 2, 5, 16, 17, NSRC};
    static const double scales[] = {1.0, 0.25, 1.0 / 3.0};
    uint64_t seed = 0x9e3779b97f4a7c15ull;

    for (int d = 0; d < 2; d++) {
        strata_dtype dt = d ? STRATA_F64 : STRATA_F32;
        size_t es = d ? 8 : 4;

        for (size_t fi = 0; fi < sizeof(feature_counts) / sizeof(size_t);
             fi++) {
            size_t f = feature_counts[fi];
            struct rows r;

            fill_rows(&r, dt, f, &seed);
            for (size_t ci = 0; ci < sizeof(counts) / sizeof(size_t); ci++) {
                for (int si = 0; si < 3; si++) {
                    for (int fresh = 0; fresh < 2; fresh++) {
                        char got[MAXF * 8 + 8], want[MAXF * 8 + 8];
                        struct halo_rows rs = {r.ptr, counts[ci]};

                        /* A start value for the !fresh case, unaligned. */
                        memcpy(got + es, r.ptr[NSRC - 1], f * es);
                        memcpy(want + es, r.ptr[NSRC - 1], f * es);
                        halo_rowsum(dt, f, got + es, &rs, fresh, scales[si]);
                        reference(dt, f, want + es, r.ptr, counts[ci], fresh,
                                  scales[si]);
                        if (memcmp(got + es, want + es, f * es) != 0)
                            fail_msg("%s: dtype %s, %zu features, %zu "
                                     "sources, fresh %d, scale %g differ",
                                     isa, d ? "f64" : "f32", f, counts[ci],
                                     fresh, scales[si]);
                    }
                }
            }
            free(r.mem);
        }
    }
}

/* CSR rows: a random irregular graph, rows in a shuffled order, mean and
 * sum. */
static void check_isa_csr(const char *isa)
{
    uint64_t seed = 42;
    struct gh_graph g;
    uint64_t n = 300;

    gh_graph_random(&g, n, 40, &seed);
    for (int d = 0; d < 2; d++) {
        strata_dtype dt = d ? STRATA_F64 : STRATA_F32;
        size_t es = d ? 8 : 4;

        for (size_t fi = 0; fi < sizeof(feature_counts) / sizeof(size_t);
             fi++) {
            size_t f = feature_counts[fi], rb = f * es;
            char *in = malloc(n * rb), *got = calloc(n, rb),
                 *want = calloc(n, rb);
            uint64_t *order = malloc(n * sizeof(uint64_t));
            uint64_t *idx = malloc((size_t)g.row_ptr[n] * sizeof(uint64_t) + 1);

            assert_true(in && got && want && order && idx);
            for (size_t b = 0; b < n * rb; b++)
                in[b] = (char)(gh_rand(&seed) % 61); /* finite values */
            for (int64_t k = 0; k < g.row_ptr[n]; k++)
                idx[k] = (uint64_t)g.col_idx[k];
            for (uint64_t i = 0; i < n; i++)
                order[i] = (i * 7) % n; /* 7 and 300 are coprime */
            for (int mean = 0; mean < 2; mean++) {
                struct halo_csr_rows cr = {.rows = order,
                                           .count = n,
                                           .row_ptr = g.row_ptr,
                                           .idx = idx,
                                           .base = in,
                                           .stride = rb,
                                           .out = got,
                                           .mean = mean};

                halo_rowsum_csr(dt, f, &cr);
                for (uint64_t i = 0; i < n; i++) {
                    const void *src[64];
                    int64_t lo = g.row_ptr[i], deg = g.row_ptr[i + 1] - lo;

                    assert_true(deg <= 64);
                    for (int64_t k = 0; k < deg; k++)
                        src[k] = in + idx[lo + k] * rb;
                    reference(dt, f, want + i * rb, src, (size_t)deg, true,
                              mean && deg > 0 ? 1.0 / (double)deg : 1.0);
                }
                if (memcmp(got, want, n * rb) != 0)
                    fail_msg("%s: csr dtype %s, %zu features, mean %d differ",
                             isa, d ? "f64" : "f32", f, mean);
            }
            free(in);
            free(got);
            free(want);
            free(order);
            free(idx);
        }
    }
    gh_graph_free(&g);
}

/* The row sums over segments (a rank's own rows, then two peers' blocks
 * of ghosts in other allocations), against the same sums over one array
 * holding every row. */
static void check_isa_segments(const char *isa)
{
    uint64_t seed = 7, n = 300, own = 120, cut = 200;
    struct gh_graph g;

    gh_graph_random(&g, n, 40, &seed);
    for (int d = 0; d < 2; d++) {
        strata_dtype dt = d ? STRATA_F64 : STRATA_F32;
        size_t es = d ? 8 : 4;

        for (size_t fi = 0; fi < sizeof(feature_counts) / sizeof(size_t);
             fi++) {
            size_t f = feature_counts[fi], rb = f * es;
            char *all = malloc(n * rb), *p1 = malloc((cut - own) * rb + 64),
                 *p2 = malloc((n - cut) * rb + 64);
            char *got = calloc(n, rb), *want = calloc(n, rb);
            uint64_t *order = malloc(n * sizeof(uint64_t));
            uint64_t *idx = malloc((size_t)g.row_ptr[n] * sizeof(uint64_t) + 1);

            assert_true(all && p1 && p2 && got && want && order && idx);
            for (size_t b = 0; b < n * rb; b++)
                all[b] = (char)(gh_rand(&seed) % 61);
            /* The peers' rows at offsets of their own. */
            memcpy(p1 + 24, all + own * rb, (cut - own) * rb);
            memcpy(p2 + 8, all + cut * rb, (n - cut) * rb);
            for (int64_t k = 0; k < g.row_ptr[n]; k++)
                idx[k] = (uint64_t)g.col_idx[k];
            for (uint64_t i = 0; i < n; i++)
                order[i] = (i * 7) % n;
            for (int mean = 0; mean < 2; mean++) {
                const struct halo_seg segs[3] = {
                    {0, (uintptr_t)all},
                    {own, (uintptr_t)(p1 + 24) - (uintptr_t)(own * rb)},
                    {cut, (uintptr_t)(p2 + 8) - (uintptr_t)(cut * rb)},
                };
                struct halo_csr_rows cr = {.rows = order,
                                           .count = n,
                                           .row_ptr = g.row_ptr,
                                           .idx = idx,
                                           .base = all,
                                           .stride = rb,
                                           .out = want,
                                           .mean = mean};

                halo_rowsum_csr(dt, f, &cr);
                /* Own rows past `own` are garbage now: the segments must
                 * not read them. */
                memset(all + own * rb, 0x7f, (n - own) * rb);
                cr.segs = segs;
                cr.num_segs = 3;
                cr.out = got;
                halo_rowsum_csr(dt, f, &cr);
                if (memcmp(got, want, n * rb) != 0)
                    fail_msg("%s: segments dtype %s, %zu features, mean %d "
                             "differ",
                             isa, d ? "f64" : "f32", f, mean);
                memcpy(all + own * rb, p1 + 24, (cut - own) * rb);
                memcpy(all + cut * rb, p2 + 8, (n - cut) * rb);
            }
            free(all);
            free(p1);
            free(p2);
            free(got);
            free(want);
            free(order);
            free(idx);
        }
    }
    gh_graph_free(&g);
}

/* The VJP's scatter (rows in a shuffled order, only targets in [first,
 * end)) and the gather-add of received rows, against the scalar loops. */
static void check_isa_scatter(const char *isa)
{
    uint64_t seed = 99, n = 300, first = 50, end = 260;
    struct gh_graph g;

    gh_graph_random(&g, n, 40, &seed);
    for (int d = 0; d < 2; d++) {
        strata_dtype dt = d ? STRATA_F64 : STRATA_F32;
        size_t es = d ? 8 : 4;

        for (size_t fi = 0; fi < sizeof(feature_counts) / sizeof(size_t);
             fi++) {
            size_t f = feature_counts[fi], rb = f * es;
            char *gr = malloc(n * rb), *got = malloc(n * rb),
                 *want = malloc(n * rb);
            uint64_t *order = malloc(n * sizeof(uint64_t));
            uint64_t *loc = malloc((size_t)g.row_ptr[n] * sizeof(uint64_t) + 1);
            int64_t ids[40];

            assert_true(gr && got && want && order && loc);
            for (size_t b = 0; b < n * rb; b++) {
                gr[b] = (char)(gh_rand(&seed) % 61);
                got[b] = want[b] = (char)(gh_rand(&seed) % 61);
            }
            for (int64_t k = 0; k < g.row_ptr[n]; k++)
                loc[k] = (uint64_t)g.col_idx[k];
            for (uint64_t i = 0; i < n; i++)
                order[i] = (i * 7) % n;
            for (int mean = 0; mean < 2; mean++) {
                const struct halo_scatter_csr cs = {
                    .rows = mean ? order : NULL,
                    .row0 = 0,
                    .count = n,
                    .row_ptr = g.row_ptr,
                    .loc = loc,
                    .first = first,
                    .end = end,
                    .base = got,
                    .stride = rb,
                    .g = gr,
                    .mean = mean,
                };

                halo_rowaxpy_csr(dt, f, &cs);
                for (uint64_t q = 0; q < n; q++) {
                    uint64_t i = mean ? order[q] : q;
                    int64_t lo = g.row_ptr[i], hi = g.row_ptr[i + 1];
                    double w = mean && hi > lo ? 1.0 / (double)(hi - lo) : 1;

                    for (int64_t k = lo; k < hi; k++) {
                        uint64_t l = loc[k];

                        if (l < first || l >= end)
                            continue;
                        for (size_t j = 0; j < f; j++) {
                            if (dt == STRATA_F32) {
                                float *a = (float *)(want + (l - first) * rb);
                                const float *x = (const float *)(gr + i * rb);
                                volatile float p = (float)w * x[j];

                                a[j] += p;
                            } else {
                                double *a = (double *)(want + (l - first) * rb);
                                const double *x = (const double *)(gr + i * rb);
                                volatile double p = w * x[j];

                                a[j] += p;
                            }
                        }
                    }
                }
                if (memcmp(got, want, n * rb) != 0)
                    fail_msg("%s: scatter dtype %s, %zu features, mean %d "
                             "differ",
                             isa, d ? "f64" : "f32", f, mean);
            }
            /* Received rows k added into out row ids[k] - 10. */
            for (int k = 0; k < 40; k++)
                ids[k] = 10 + (int64_t)((k * 37) % 200);
            {
                const struct halo_gather_add ga = {ids, 10, 40, gr, got, rb};

                halo_rowadd(dt, f, &ga);
            }
            for (int k = 0; k < 40; k++)
                for (size_t j = 0; j < f; j++) {
                    char *a = want + (size_t)(ids[k] - 10) * rb + j * es;
                    const char *x = gr + (size_t)k * rb + j * es;

                    if (dt == STRATA_F32)
                        *(float *)a += *(const float *)x;
                    else
                        *(double *)a += *(const double *)x;
                }
            if (memcmp(got, want, n * rb) != 0)
                fail_msg("%s: gather-add dtype %s, %zu features differ", isa,
                         d ? "f64" : "f32", f);
            free(gr);
            free(got);
            free(want);
            free(order);
            free(loc);
        }
    }
    gh_graph_free(&g);
}

static void test_rowsum_every_isa_matches_the_plain_loop(void **state)
{
    int ran = 0;

    (void)state;
    for (size_t i = 0; i < sizeof(isas) / sizeof(isas[0]); i++) {
        if (!halo_rowsum_use(isas[i])) {
            print_message("[  SKIP    ] %s: not on this CPU\n", isas[i]);
            continue;
        }
        assert_string_equal(halo_rowsum_isa(), isas[i]);
        check_isa_sums(isas[i]);
        check_isa_csr(isas[i]);
        check_isa_segments(isas[i]);
        check_isa_scatter(isas[i]);
        ran++;
    }
    assert_true(ran >= 1); /* baseline runs everywhere */
    assert_false(halo_rowsum_use("sse9"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rowsum_every_isa_matches_the_plain_loop),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
