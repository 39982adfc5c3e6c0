/*
 * The machine floor for bench_dispatch: a raw round trip between two
 * processes over one shared page, with no runtime in between.
 */
#ifndef BENCH_PINGPONG_H
#define BENCH_PINGPONG_H

#include <stddef.h>

enum pingpong_mode {
    PINGPONG_SPIN,  /* both sides busy-poll the shared words */
    PINGPONG_FUTEX, /* both sides sleep in FUTEX_WAIT, woken by FUTEX_WAKE */
};

/* Forks a partner process and bounces a counter between the two through a
 * MAP_SHARED|MAP_ANONYMOUS page `iters` times per block, `blocks` blocks
 * after a short warm-up. Writes the median of the blocks' mean round-trip
 * times in microseconds to *rtt_us_out. Returns 0, or -1 with a message on
 * stderr. */
int pingpong_measure(enum pingpong_mode mode, size_t iters, size_t blocks,
                     double *rtt_us_out);

#endif
