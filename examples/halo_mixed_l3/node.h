/* What node.c (the node callable) and main.c share. */
#ifndef HALO_MIXED_L3_NODE_H
#define HALO_MIXED_L3_NODE_H

#include <strata/strata.h>

/* Node orch callable, named by the L4 with strata_callable_by_name.
 * Tensors: t0 the read-only part of the halo plan (IN, from offset 0 of
 * the plan buffer), t1 the stats slots of this node's ranks (OUT, one
 * HALO_STATS_STRIDE each, rank order), then, when this node's ranks own
 * rows, t2 their input rows (IN) and t3 their output rows (OUT).
 * Scalars: s0 the global domain id, s1 1 for the VJP (0: forward), s2 the
 * first domain rank on this node, s3 the byte offset of the data region
 * in every window. */
#define HMIX_NODE_HALO "hmix.node_halo"

#define HMIX_WAIT_S 10.0 /* bound on each in-kernel signal wait */

/* Registers the node callable. The module's entry point; the example
 * calls it too, before its worker forks the local node. */
STRATA_API strata_err strata_module_init(void);

#endif
