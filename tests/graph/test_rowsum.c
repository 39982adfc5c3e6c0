/* The halo kernels' vectorised row sums: every instruction set the CPU
 * has, against the plain scalar loop, bit for bit. */
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
                struct halo_csr_rows cr = {order, n,  g.row_ptr, idx,
                                           in,    rb, got,       mean};

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
