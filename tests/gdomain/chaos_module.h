/*
 * Callables of the chaos test (test_chaos.c), registered by
 * strata_module_init both in its strata-node daemon (as a --module, built
 * without libstrata) and in the test process (for its forked L3 node).
 * The workload is the mixed global allreduce of
 * examples/global_allreduce_mixed_l3 plus a task on each node's sub worker.
 *
 * Kernels (on a node's member chips; s0 is the member's device_ctx):
 *   chaos.k.allreduce  s1 busy microseconds before it starts, s2 seed,
 *                      s3 wait bound in ms (CHAOS_WAIT_FOREVER: none).
 *                      Writes chaos_value(seed, rank, i) into its window's
 *                      data, adds 1 to every rank's flag, waits for its
 *                      own flag to count every rank, then sums every
 *                      rank's data into its own window's sum.
 *   chaos.k.read       t0 OUT u32[CHAOS_N]: its own window's sum.
 * Sub:
 *   chaos.s.work       s0 seed, s1 busy microseconds; t0 OUT
 *                      u32[CHAOS_SUB_N] = chaos_sub_value(seed, i).
 * Node orch callables (what the L4 submits to node 0 and node 1):
 *   chaos.o.compute    s0 domain id, s1 busy us, s2 seed, s3 wait ms;
 *                      t0 OUT u32[CHAOS_SUB_N]: chaos.k.allreduce on every
 *                      member chip of this node as one group, then
 *                      chaos.s.work on the sub queue into t0.
 *   chaos.o.read       s0 domain id; t0 OUT u32[members * CHAOS_N]:
 *                      chaos.k.read on each member chip into slice k.
 */
#ifndef STRATA_CHAOS_MODULE_H
#define STRATA_CHAOS_MODULE_H

#include <stdint.h>

#include <strata/strata.h>

#define CHAOS_N 1024    /* u32 per rank */
#define CHAOS_SUB_N 256 /* u32 a sub writes */
#define CHAOS_WAIT_FOREVER UINT64_MAX

/* Window layout: data, sum, then the flag word. */
#define CHAOS_OFF_DATA 0
#define CHAOS_OFF_SUM (CHAOS_N * 4)
#define CHAOS_OFF_FLAG (2 * CHAOS_N * 4)
#define CHAOS_WINDOW (2 * CHAOS_N * 4 + 64)

#define CHAOS_K_ALLREDUCE "chaos.k.allreduce"
#define CHAOS_K_READ "chaos.k.read"
#define CHAOS_S_WORK "chaos.s.work"
#define CHAOS_O_COMPUTE "chaos.o.compute"
#define CHAOS_O_READ "chaos.o.read"

static inline uint32_t chaos_value(uint32_t seed, uint32_t rank, uint32_t i)
{
    return seed * 2654435761u + rank * 40503u + i;
}

static inline uint32_t chaos_sub_value(uint32_t seed, uint32_t i)
{
    return (seed ^ 0x5bd1e995u) + i * 7u;
}

STRATA_API strata_err strata_module_init(void);

#endif /* STRATA_CHAOS_MODULE_H */
