/* The machine's floor under the global domain bench's scaling target: a
 * parent fans one word out to n forked processes through shared memory
 * and waits for all n answers, four times per cycle (a transaction's
 * three phases and its release), every waiter spinning with a yield per
 * look for spin_ns and then sleeping in a futex, as strata's nodes and
 * waiters do. No decoding, no mapping, nothing else: what any design
 * with one process per node pays on this machine. */
#ifndef BENCH_FANOUT_FLOOR_H
#define BENCH_FANOUT_FLOOR_H

#include <stdint.h>

#define FANOUT_FLOOR_MAX 16

/* Median cycle in us over blocks of cycles / 8 (< 0: it could not run). */
double fanout_floor_us(int n, int cycles, uint64_t spin_ns);

#endif
