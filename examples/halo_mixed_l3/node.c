/*
 * The module of halo_mixed_l3, built twice from this file: into the
 * example program (its forked L3 node and the reference worker's chips
 * inherit the registration) and as libhalo_mixed_l3_node.so, the module the
 * example's strata-node loads with --module. The module is built without
 * libstrata: strata_halo_register_edge resolves from strata-node.
 *
 * A remote node runs only code it loaded itself. The halo machinery (the
 * node callable "strata.halo.node" and the rank kernels) is part of the
 * library, so strata-node has it; the per-edge kernel is the user's code,
 * so the module carries it.
 */
#include <strata/strata.h>

#include "node.h"

static void ring_edge(int64_t dst, int64_t src, strata_dtype dtype,
                      size_t features, const void *in_row, void *acc_row)
{
    (void)dst;
    (void)src;
    for (size_t f = 0; f < features; f++) {
        if (dtype == STRATA_F32)
            ((float *)acc_row)[f] += ((const float *)in_row)[f];
        else
            ((double *)acc_row)[f] += ((const double *)in_row)[f];
    }
}

strata_err strata_module_init(void)
{
    return strata_halo_register_edge(HMIX_EDGE, ring_edge, ring_edge);
}
