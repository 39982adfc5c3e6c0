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
#define NUM_FEATURE_COUNTS (sizeof(feature_counts) / sizeof(size_t))

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

        for (size_t fi = 0; fi < NUM_FEATURE_COUNTS; fi++) {
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

/* One dtype and feature count (rb bytes per row) over the 300-row test
 * graph: rows of finite values, two zeroed outputs, the rows in a
 * shuffled order and the entries as uint64 indices. */
struct csr_case {
    uint64_t n;
    size_t rb;
    char *in, *got, *want;
    uint64_t *order, *idx;
};

static void case_init(struct csr_case *c, const struct gh_graph *g, size_t rb,
                      uint64_t *seed)
{
    uint64_t n = g->n;

    c->n = n;
    c->rb = rb;
    c->in = malloc(n * rb);
    c->got = calloc(n, rb);
    c->want = calloc(n, rb);
    c->order = malloc(n * sizeof(uint64_t));
    c->idx = malloc((size_t)g->row_ptr[n] * sizeof(uint64_t) + 1);
    assert_true(c->in && c->got && c->want && c->order && c->idx);
    for (size_t b = 0; b < n * rb; b++)
        c->in[b] = (char)(gh_rand(seed) % 61); /* finite values */
    for (int64_t k = 0; k < g->row_ptr[n]; k++)
        c->idx[k] = (uint64_t)g->col_idx[k];
    for (uint64_t i = 0; i < n; i++)
        c->order[i] = (i * 7) % n; /* 7 and 300 are coprime */
}

static void case_free(struct csr_case *c)
{
    free(c->in);
    free(c->got);
    free(c->want);
    free(c->order);
    free(c->idx);
}

/* CSR rows: a random irregular graph, rows in a shuffled order, mean and
 * sum. */
static void check_isa_csr(const char *isa)
{
    uint64_t seed = 42, n = 300;
    struct gh_graph g;

    gh_graph_random(&g, n, 40, &seed);
    for (int d = 0; d < 2; d++) {
        strata_dtype dt = d ? STRATA_F64 : STRATA_F32;

        for (size_t fi = 0; fi < NUM_FEATURE_COUNTS; fi++) {
            size_t f = feature_counts[fi], rb = f * (d ? 8 : 4);
            struct csr_case c;

            case_init(&c, &g, rb, &seed);
            for (int mean = 0; mean < 2; mean++) {
                struct halo_csr_rows cr = {.rows = c.order,
                                           .count = n,
                                           .row_ptr = g.row_ptr,
                                           .idx = c.idx,
                                           .base = c.in,
                                           .stride = rb,
                                           .out = c.got,
                                           .mean = mean};

                halo_rowsum_csr(dt, f, &cr);
                for (uint64_t i = 0; i < n; i++) {
                    const void *src[64];
                    int64_t lo = g.row_ptr[i], deg = g.row_ptr[i + 1] - lo;

                    assert_true(deg <= 64);
                    for (int64_t k = 0; k < deg; k++)
                        src[k] = c.in + c.idx[lo + k] * rb;
                    reference(dt, f, c.want + i * rb, src, (size_t)deg, true,
                              mean && deg > 0 ? 1.0 / (double)deg : 1.0);
                }
                if (memcmp(c.got, c.want, n * rb) != 0)
                    fail_msg("%s: csr dtype %s, %zu features, mean %d differ",
                             isa, d ? "f64" : "f32", f, mean);
            }
            case_free(&c);
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

        for (size_t fi = 0; fi < NUM_FEATURE_COUNTS; fi++) {
            size_t f = feature_counts[fi], rb = f * (d ? 8 : 4);
            struct csr_case c;
            char *p1 = malloc((cut - own) * rb + 64),
                 *p2 = malloc((n - cut) * rb + 64);

            assert_true(p1 && p2);
            case_init(&c, &g, rb, &seed);
            /* The peers' rows at offsets of their own. */
            memcpy(p1 + 24, c.in + own * rb, (cut - own) * rb);
            memcpy(p2 + 8, c.in + cut * rb, (n - cut) * rb);
            for (int mean = 0; mean < 2; mean++) {
                const struct halo_seg segs[3] = {
                    {0, (uintptr_t)c.in},
                    {own, (uintptr_t)(p1 + 24) - (uintptr_t)(own * rb)},
                    {cut, (uintptr_t)(p2 + 8) - (uintptr_t)(cut * rb)},
                };
                struct halo_csr_rows cr = {.rows = c.order,
                                           .count = n,
                                           .row_ptr = g.row_ptr,
                                           .idx = c.idx,
                                           .base = c.in,
                                           .stride = rb,
                                           .out = c.want,
                                           .mean = mean};

                halo_rowsum_csr(dt, f, &cr);
                /* Own rows past `own` are garbage now: the segments must
                 * not read them. */
                memset(c.in + own * rb, 0x7f, (n - own) * rb);
                cr.segs = segs;
                cr.num_segs = 3;
                cr.out = c.got;
                halo_rowsum_csr(dt, f, &cr);
                if (memcmp(c.got, c.want, n * rb) != 0)
                    fail_msg("%s: segments dtype %s, %zu features, mean %d "
                             "differ",
                             isa, d ? "f64" : "f32", f, mean);
                memcpy(c.in + own * rb, p1 + 24, (cut - own) * rb);
                memcpy(c.in + cut * rb, p2 + 8, (n - cut) * rb);
            }
            free(p1);
            free(p2);
            case_free(&c);
        }
    }
    gh_graph_free(&g);
}

/* acc += w * x over one row as the plain loop does: the product rounded
 * (volatile: never fused with the sum), then added. */
static void axpy_reference(strata_dtype dt, size_t f, char *acc, double w,
                           const char *x)
{
    for (size_t j = 0; j < f; j++) {
        if (dt == STRATA_F32) {
            volatile float p = (float)w * ((const float *)x)[j];

            ((float *)acc)[j] += p;
        } else {
            volatile double p = w * ((const double *)x)[j];

            ((double *)acc)[j] += p;
        }
    }
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

        for (size_t fi = 0; fi < NUM_FEATURE_COUNTS; fi++) {
            size_t f = feature_counts[fi], rb = f * (d ? 8 : 4);
            struct csr_case c;
            int64_t ids[40];

            case_init(&c, &g, rb, &seed);
            /* Targets with values of their own; c.in holds the
             * cotangents. */
            for (size_t b = 0; b < n * rb; b++)
                c.got[b] = c.want[b] = (char)(gh_rand(&seed) % 61);
            for (int mean = 0; mean < 2; mean++) {
                const struct halo_scatter_csr cs = {
                    .rows = mean ? c.order : NULL,
                    .row0 = 0,
                    .count = n,
                    .row_ptr = g.row_ptr,
                    .loc = c.idx,
                    .first = first,
                    .end = end,
                    .base = c.got,
                    .stride = rb,
                    .g = c.in,
                    .mean = mean,
                };

                halo_rowaxpy_csr(dt, f, &cs);
                for (uint64_t q = 0; q < n; q++) {
                    uint64_t i = mean ? c.order[q] : q;
                    int64_t lo = g.row_ptr[i], hi = g.row_ptr[i + 1];
                    double w = mean && hi > lo ? 1.0 / (double)(hi - lo) : 1;

                    for (int64_t k = lo; k < hi; k++)
                        if (c.idx[k] >= first && c.idx[k] < end)
                            axpy_reference(dt, f,
                                           c.want + (c.idx[k] - first) * rb, w,
                                           c.in + i * rb);
                }
                if (memcmp(c.got, c.want, n * rb) != 0)
                    fail_msg("%s: scatter dtype %s, %zu features, mean %d "
                             "differ",
                             isa, d ? "f64" : "f32", f, mean);
            }
            /* Received rows k added into out row ids[k] - 10. */
            for (int k = 0; k < 40; k++)
                ids[k] = 10 + (int64_t)((k * 37) % 200);
            {
                const struct halo_gather_add ga = {ids,  10,    40,
                                                   c.in, c.got, rb};

                halo_rowadd(dt, f, &ga);
            }
            for (int k = 0; k < 40; k++)
                axpy_reference(dt, f, c.want + (size_t)(ids[k] - 10) * rb, 1.0,
                               c.in + (size_t)k * rb);
            if (memcmp(c.got, c.want, n * rb) != 0)
                fail_msg("%s: gather-add dtype %s, %zu features differ", isa,
                         d ? "f64" : "f32", f);
            case_free(&c);
        }
    }
    gh_graph_free(&g);
}

/* The in-place VJP's gather: each target's terms from a transposed index
 * (rows in order), weighted (mean) or not, against the scalar loop into
 * zeroed rows. */
static void check_isa_gather(const char *isa)
{
    uint64_t seed = 7, n = 300;
    struct gh_graph g;
    int64_t *tptr, *fill;
    uint64_t *tsrc;
    double *tw;

    gh_graph_random(&g, n, 40, &seed);
    tptr = calloc(n + 1, sizeof(int64_t));
    fill = calloc(n + 1, sizeof(int64_t));
    tsrc = calloc((size_t)g.row_ptr[n] + 1, sizeof(uint64_t));
    tw = calloc((size_t)g.row_ptr[n] + 1, sizeof(double));
    assert_true(tptr && fill && tsrc && tw);
    for (int64_t k = 0; k < g.row_ptr[n]; k++)
        tptr[g.col_idx[k] + 1]++;
    for (uint64_t q = 0; q < n; q++)
        tptr[q + 1] += tptr[q];
    memcpy(fill, tptr, (n + 1) * sizeof(int64_t));
    for (uint64_t i = 0; i < n; i++)
        for (int64_t k = g.row_ptr[i]; k < g.row_ptr[i + 1]; k++) {
            int64_t at = fill[g.col_idx[k]]++;

            tsrc[at] = i;
            tw[at] = 1.0 / (double)(g.row_ptr[i + 1] - g.row_ptr[i]);
        }
    for (int d = 0; d < 2; d++) {
        strata_dtype dt = d ? STRATA_F64 : STRATA_F32;

        for (size_t fi = 0; fi < NUM_FEATURE_COUNTS; fi++) {
            size_t f = feature_counts[fi], rb = f * (d ? 8 : 4);
            struct csr_case c;

            case_init(&c, &g, rb, &seed);
            for (int mean = 0; mean < 2; mean++) {
                const struct halo_gather_csr gc = {
                    .count = n,
                    .ptr = tptr,
                    .src = tsrc,
                    .w = mean ? tw : NULL,
                    .g = c.in,
                    .out = c.got,
                    .stride = rb,
                };

                memset(c.got, 0x5a, n * rb); /* the gather zeroes */
                memset(c.want, 0, n * rb);
                halo_rowgather_csr(dt, f, &gc);
                for (uint64_t i = 0; i < n; i++) {
                    int64_t lo = g.row_ptr[i], hi = g.row_ptr[i + 1];
                    double w = mean && hi > lo ? 1.0 / (double)(hi - lo) : 1;

                    for (int64_t k = lo; k < hi; k++)
                        axpy_reference(dt, f,
                                       c.want + (size_t)g.col_idx[k] * rb, w,
                                       c.in + i * rb);
                }
                if (memcmp(c.got, c.want, n * rb) != 0)
                    fail_msg("%s: gather dtype %s, %zu features, mean %d "
                             "differ",
                             isa, d ? "f64" : "f32", f, mean);
            }
            case_free(&c);
        }
    }
    free(tptr);
    free(fill);
    free(tsrc);
    free(tw);
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
        check_isa_gather(isas[i]);
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
