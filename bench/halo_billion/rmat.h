/* The R-MAT graph of bench_halo_billion (Graph500 parameters a = 0.57,
 * b = c = 0.19, d = 0.05): 16 * rows edges over rows ids, both ends
 * scrambled by a bijection of [0, 2^scale) and drawn again when outside
 * [0, rows) (which skews Graph500's distribution slightly when rows is
 * not a power of two), grouped by destination. Deterministic: edge k's draws
 * come from a counter-based generator, so the two passes (count, then place)
 * see the same edges without storing them. */
#ifndef BENCH_HALO_BILLION_RMAT_H
#define BENCH_HALO_BILLION_RMAT_H

#include <stdint.h>

/* Fills row_ptr (rows + 1) and col (16 * rows): CSR by destination.
 * progress, when not NULL, is called with a fraction now and then. */
void rmat_fill(uint64_t rows, int64_t *row_ptr, int64_t *col,
               void (*progress)(double done));

#endif
