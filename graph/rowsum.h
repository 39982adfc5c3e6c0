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

/* Rows whose sources all lie in one array, summed in one call. */
struct halo_csr_rows {
    const uint64_t *rows; /* the output rows to compute, in this order */
    size_t count;
    const int64_t *row_ptr; /* row i's sources: idx[row_ptr[i] .. [i + 1]) */
    const uint64_t *idx;
    const char *base; /* source j at base + j * stride */
    size_t stride;    /* bytes per row, sources and outputs alike */
    char *out;        /* output row i at out + i * stride */
    bool mean;        /* scale row i by 1 / its source count */
};

/* Every row of cr, as halo_rowsum with fresh set (and scale 1/count when
 * mean): the per-row work stays inside one vectorised loop. */
void halo_rowsum_csr(strata_dtype dtype, size_t features,
                     const struct halo_csr_rows *cr);

/* The instruction set halo_rowsum uses: "avx512", "avx2" or "baseline".
 * STRATA_SIMD=baseline|avx2|avx512 in the environment caps it (a level the
 * CPU lacks is never chosen). */
const char *halo_rowsum_isa(void);

/* Makes halo_rowsum use isa from now on (tests run every level this way);
 * false, changing nothing, when the CPU lacks it or the name is unknown. */
bool halo_rowsum_use(const char *isa);

#endif
