/* R-MAT for bench_halo_billion (rmat.h). */
#include "rmat.h"

#include <stddef.h>

#define DEGREE 16
/* Quadrant thresholds out of 2^16: a, a + b, a + b + c. */
#define T_A 37355u /* 0.57 */
#define T_B 49807u /* 0.76 */
#define T_C 62259u /* 0.95 */

static uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A bijection of [0, 2^scale): an odd multiplier and an offset. */
static uint64_t scramble(uint64_t v, uint64_t mask)
{
    return (v * 0x2545f4914f6cdd1dull + 0x5851f42d4c957f2dull) & mask;
}

/* Edge k: its destination and source, below rows. */
static void edge(uint64_t k, uint64_t rows, int scale, uint64_t *dst,
                 uint64_t *src)
{
    uint64_t mask = scale >= 64 ? ~0ull : ((uint64_t)1 << scale) - 1;

    for (uint64_t attempt = 0;; attempt++) {
        uint64_t d = 0, s = 0, r = 0;

        for (int level = 0; level < scale; level++) {
            unsigned q;

            if (level % 4 == 0)
                r = mix(k * 0x100000001b3ull + attempt * 0x9e37ull +
                        (uint64_t)level);
            q = (unsigned)(r & 0xffff);
            r >>= 16;
            d = d << 1 | (q >= T_B);
            s = s << 1 | ((q >= T_A && q < T_B) || q >= T_C);
        }
        d = scramble(d, mask);
        s = scramble(s, mask);
        if (d < rows && s < rows) {
            *dst = d;
            *src = s;
            return;
        }
    }
}

void rmat_fill(uint64_t rows, int64_t *row_ptr, int64_t *col,
               void (*progress)(double done))
{
    uint64_t edges = rows * DEGREE, d, s;
    int scale = 0;

    while (((uint64_t)1 << scale) < rows)
        scale++;
    for (uint64_t i = 0; i <= rows; i++)
        row_ptr[i] = 0;
    for (uint64_t k = 0; k < edges; k++) {
        edge(k, rows, scale, &d, &s);
        row_ptr[d + 1]++;
        if (progress && (k + 1) % (edges / 50 + 1) == 0)
            progress(0.5 * (double)(k + 1) / (double)edges);
    }
    for (uint64_t i = 0; i < rows; i++)
        row_ptr[i + 1] += row_ptr[i];
    /* Place each edge at its row's cursor (row_ptr[d] moves up to
     * row_ptr[d + 1]), then shift the offsets back. */
    for (uint64_t k = 0; k < edges; k++) {
        edge(k, rows, scale, &d, &s);
        col[row_ptr[d]++] = (int64_t)s;
        if (progress && (k + 1) % (edges / 50 + 1) == 0)
            progress(0.5 + 0.5 * (double)(k + 1) / (double)edges);
    }
    for (uint64_t i = rows; i > 0; i--)
        row_ptr[i] = row_ptr[i - 1];
    row_ptr[0] = 0;
}
