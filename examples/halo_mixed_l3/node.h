/* What node.c (the example's module) and main.c share. */
#ifndef HALO_MIXED_L3_NODE_H
#define HALO_MIXED_L3_NODE_H

#include <strata/strata.h>

/* The ring's per-edge kernel: acc_row += in_row (weight 1), linear, so it
 * is its own VJP. With it the ring is out_i = x_{i-1} + x_i + x_{i+1}. */
#define HMIX_EDGE "hmix.ring_edge"

#define HMIX_WAIT_S 10.0 /* bound on each in-kernel signal wait */

/* Registers the edge kernel. The module's entry point (the daemon calls
 * it when it loads the module, before any session forks its chips); the
 * example calls it too, before its workers fork chips and nodes. */
STRATA_API strata_err strata_module_init(void);

#endif
