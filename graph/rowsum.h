/* Sums of feature rows for the halo kernels, vectorised for the widest
 * instruction set the CPU offers (chosen once, at first use). Private to
 * graph/. */
#ifndef GRAPH_ROWSUM_H
#define GRAPH_ROWSUM_H

#include <strata/strata.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* n source rows, at ptr[k]. */
struct halo_rows {
    const void *const *ptr;
    size_t n;
};

/* acc[f] = (s + row_0[f] + row_1[f] + ... + row_{n-1}[f]) * scale, for
 * f < features, where s is 0 when fresh and acc[f] otherwise, over rows of
 * float32 (STRATA_F32) or float64 values (scale rounded to the row's type;
 * 1.0 multiplies nothing). Every lane adds its sources one at a time in
 * the order given, so the result is bit for bit that of the plain loop
 * `acc[f] = 0; for k: for f: acc[f] += row_k[f]; then acc[f] *= scale`.
 * Rows need no particular alignment. */
void halo_rowsum(strata_dtype dtype, size_t features, void *acc,
                 const struct halo_rows *rs, bool fresh, double scale);

/* Sources j in [first, next segment's first) lie at base + j * stride
 * (base as an address: it may lie outside the rows it reaches). */
struct halo_seg {
    uint64_t first;
    uintptr_t base;
};

/* The most segments halo_rowsum_csr takes: a rank's own rows and one
 * range of ghosts per peer. */
#define HALO_CSR_MAX_SEGS 8

/* Rows whose sources lie in a few affine ranges, summed in one call. */
struct halo_csr_rows {
    const uint64_t *rows; /* the output rows to compute, in this order */
    size_t count;
    const int64_t *row_ptr; /* row i's sources: idx[row_ptr[i] .. [i + 1]) */
    const uint64_t *idx;
    const char *base; /* source j at base + j * stride (num_segs 0) */
    /* Else (1 .. HALO_CSR_MAX_SEGS) source j in segment s, the last one
     * with first <= j, ascending; segs[0].first is 0. */
    const struct halo_seg *segs;
    size_t num_segs;
    size_t stride; /* bytes per row, sources and outputs alike */
    char *out;     /* output row i at out + i * stride */
    bool mean;     /* scale row i by 1 / its source count */
};

/* Every row of cr, as halo_rowsum with fresh set (and scale 1/count when
 * mean): the per-row work stays inside one vectorised loop. */
void halo_rowsum_csr(strata_dtype dtype, size_t features,
                     const struct halo_csr_rows *cr);

/* Rows whose cotangents are scattered, in one call. */
struct halo_scatter_csr {
    const uint64_t *rows; /* in this order; NULL: row0 .. row0 + count - 1 */
    uint64_t row0;
    size_t count;
    const int64_t *row_ptr; /* row i's entries: [row_ptr[i], row_ptr[i + 1]) */
    const uint64_t *loc;
    uint64_t first, end;
    char *base;
    size_t stride; /* bytes per row, targets and cotangents alike */
    const char *g; /* row i's cotangent at g + i * stride */
    bool mean;     /* w = 1 / row i's entry count, else 1 */
};

/* For every row i of cs and every entry of it that names a row l:
 * acc_l[f] += w * g_i[f] (w rounded to the row's type; a product, then a
 * sum, never fused), rows and entries in order: bit for bit the plain
 * loop's result. The cotangents must not overlap the targets. */
void halo_rowaxpy_csr(strata_dtype dtype, size_t features,
                      const struct halo_scatter_csr *cs);

/* Rows src + k * stride added into out + (ids[k] - id0) * stride, k <
 * count, in order. */
struct halo_gather_add {
    const int64_t *ids;
    int64_t id0;
    size_t count;
    const char *src;
    char *out;
    size_t stride;
};

void halo_rowadd(strata_dtype dtype, size_t features,
                 const struct halo_gather_add *ga);

/* Targets whose terms are gathered (the in-place VJP): target q is
 * out + q * stride = sum over its entries k in [ptr[q], ptr[q + 1]), in
 * order, of w[k] * (row src[k] at g + src[k] * stride); w NULL: 1. */
struct halo_gather_csr {
    size_t count;
    const int64_t *ptr;
    const uint64_t *src;
    const double *w; /* rounded to the row's type before the product */
    const char *g;
    char *out;
    size_t stride;
};

/* Every target of gc, from 0 (a product, then a sum, never fused): bit for
 * bit halo_rowaxpy_csr's result when it visits the same terms in the same
 * order into zeroed rows. */
void halo_rowgather_csr(strata_dtype dtype, size_t features,
                        const struct halo_gather_csr *gc);

/* The instruction set halo_rowsum uses: "avx512", "avx2" or "baseline".
 * STRATA_SIMD=baseline|avx2|avx512 in the environment caps it (a level the
 * CPU lacks is never chosen). */
const char *halo_rowsum_isa(void);

/* Makes halo_rowsum use isa from now on (tests run every level this way);
 * false, changing nothing, when the CPU lacks it or the name is unknown. */
bool halo_rowsum_use(const char *isa);

#endif
