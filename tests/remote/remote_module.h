/*
 * Callables of the remote tests (remote_module.c), registered by
 * strata_module_init in the daemon (as a --module) and in the test process
 * (for its forked L3 nodes).
 *
 * Node orch callables (what an L4 orch fn submits to a node id):
 *   rt.add   t0, t1 (IN u32), t2 (OUT u32, same count): t2 = t0 + t1,
 *            split over the node's chips 0..n-1.
 *   rt.span  t0 (NO_DEP) = struct rt_span, [t1 (IN u8) = a C-string path];
 *            scalars (ms, chip): kernel rt.span on that chip records its
 *            start, pid and chip, creates the file t1 names (if given),
 *            sleeps ms, records its end.
 *   rt.noop  does nothing.
 */
#ifndef STRATA_REMOTE_MODULE_H
#define STRATA_REMOTE_MODULE_H

#include <stdint.h>

#include <strata/strata.h>

#define RT_K_ADD "rt.add"
#define RT_K_SPAN "rt.span"
#define RT_O_ADD "rt.add"
#define RT_O_SPAN "rt.span"
#define RT_O_NOOP "rt.noop"

/* Written by the rt.span kernel (CLOCK_MONOTONIC: one clock per host). */
struct rt_span {
    uint64_t start_ns;
    uint64_t end_ns;
    uint64_t pid;
    uint64_t chip;
};

STRATA_API strata_err strata_module_init(void);

#endif /* STRATA_REMOTE_MODULE_H */
