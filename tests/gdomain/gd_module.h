/*
 * Callables of the global domain tests (gd_module.c), registered by
 * strata_module_init both in the test daemons (as a --module, built without
 * libstrata) and in the test process (for its forked L3 nodes).
 *
 * Kernels (on a node's chips; s0 is always the member's device_ctx):
 *   gd.k.fill       s1 byte offset, s2 count, s3 seed: the member's own
 *                   window gets u32 gd_value(seed, rank, i) at offset.
 *   gd.k.allreduce  s1 data offset, s2 count, s3 flag offset, s4 seed,
 *                   s5 flag target (0: rank_count); t0 OUT u32[count].
 *                   Writes gd_value(seed, rank, i) into its window, adds 1
 *                   to every rank's flag word, waits (GD_WAIT_S) for its
 *                   own flag to reach the target, then sums every rank's
 *                   data into t0.
 *   gd.k.read       s1 rank (GD_OWN: its own), s2 byte offset; t0 OUT
 *                   bytes = that rank's window from offset.
 *   gd.k.sleep      s0 milliseconds: sleeps (no domain).
 *   gd.k.wait       s1 flag offset, s2 tag: writes its pid to
 *                   gd_lost_path(tag, rank, "pid"), waits with no timeout
 *                   for its own flag to reach 1, then writes "<code>
 *                   <message>" to gd_lost_path(tag, rank, "out") and
 *                   returns the code (a dead member's peers are woken).
 *
 * Node orch callables (what an L4 orch fn submits to a node id); the chips
 * to use come last, as a count and then chip ids, because a node does not
 * know which of its chips the L4 made members:
 *   gd.o.query      s0 domain id, s1 n, s2.. chips; t0 OUT struct
 *                   gd_query[n]: what strata_orch_get_global_domain and
 *                   strata_global_view_context answer for each chip.
 *                   Never fails, submits nothing.
 *   gd.o.fill       s0 domain id, s1 offset, s2 count, s3 seed, s4 n,
 *                   s5.. chips: gd.k.fill on each chip.
 *   gd.o.allreduce  s0 domain id, s1 data offset, s2 count, s3 flag
 *                   offset, s4 seed, s5 flag target, s6 n, s7.. chips;
 *                   t0 OUT u32[n * count]: gd.k.allreduce as one group,
 *                   chip k's sum into slice k.
 *   gd.o.read       s0 domain id, s1 rank (GD_OWN), s2 offset, s3 nbytes,
 *                   s4 n, s5.. chips; t0 OUT u8[n * nbytes]: gd.k.read on
 *                   each chip into slice k.
 *   gd.o.sleep      s0 milliseconds, s1 n, s2.. chips: gd.k.sleep on each
 *                   chip (the node is busy until they end).
 *   gd.o.wait       s0 domain id, s1 flag offset, s2 tag, s3 n, s4..
 *                   chips: gd.k.wait on each chip.
 * A node callable fails with the error of strata_orch_get_global_domain or
 * strata_global_view_context when the domain or a chip is not there.
 */
#ifndef STRATA_GD_MODULE_H
#define STRATA_GD_MODULE_H

#include <stdint.h>
#include <stdio.h>

#include <strata/strata.h>

#define GD_WAIT_S 10.0 /* bound on every in-kernel wait */
#define GD_OWN UINT32_MAX

#define GD_K_FILL "gd.k.fill"
#define GD_K_ALLREDUCE "gd.k.allreduce"
#define GD_K_READ "gd.k.read"
#define GD_O_QUERY "gd.o.query"
#define GD_O_FILL "gd.o.fill"
#define GD_O_ALLREDUCE "gd.o.allreduce"
#define GD_O_READ "gd.o.read"
#define GD_O_SLEEP "gd.o.sleep"
#define GD_K_WAIT "gd.k.wait"
#define GD_O_WAIT "gd.o.wait"

#define GD_LOST_PATH_MAX 96

/* The file gd.k.wait writes for rank r under tag (what, "pid" or "out"). */
static inline void gd_lost_path(char *out, size_t cap, uint64_t tag,
                                uint32_t rank, const char *what)
{
    snprintf(out, cap, "/tmp/strata-gdlost-%llu-r%u.%s",
             (unsigned long long)tag, rank, what);
}

/* What gd.o.query reports for one chip. */
struct gd_query {
    uint32_t get_err;   /* strata_orch_get_global_domain */
    uint32_t ctx_err;   /* strata_global_view_context (if get_err == 0) */
    uint32_t rank;      /* domain_rank */
    uint32_t size;      /* domain_size */
    uint32_t buffers;   /* num_buffers */
    uint32_t ctx_found; /* device_ctx and local_window_base non-zero */
};

static inline uint32_t gd_value(uint32_t seed, uint32_t rank, uint32_t i)
{
    return seed * 7919u + rank * 1000003u + i;
}

STRATA_API strata_err strata_module_init(void);

#endif /* STRATA_GD_MODULE_H */
