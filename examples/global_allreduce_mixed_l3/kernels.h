/* What kernels.c (the example's callables) and main.c share. */
#ifndef GLOBAL_ALLREDUCE_MIXED_L3_KERNELS_H
#define GLOBAL_ALLREDUCE_MIXED_L3_KERNELS_H

#include <stdint.h>

#include <strata/strata.h>

#define GAR_N 4096      /* float32 elements per rank */
#define GAR_WAIT_S 30.0 /* bound on the in-kernel wait for peers */

/* Node orch callables, named by the L4 with strata_callable_by_name. */
#define GAR_NODE_COMPUTE "gar.node_compute"
#define GAR_NODE_READ "gar.node_read"

/* The domain's carved buffers, in this order. */
#define GAR_BUF_DATA "data" /* f32[GAR_N]: this rank's contribution */
#define GAR_BUF_SUM "sum"   /* f32[GAR_N]: the allreduce result */
#define GAR_BUF_FLAG "flag" /* u32: one "my data is there" per rank */

/* Rank r's contribution at index i: small multiples of 0.5, so every sum
 * is exact in float32 and the check compares bit for bit. */
static inline float gar_value(uint32_t rank, uint32_t i)
{
    return (float)((rank + 1) * (i % 1024)) * 0.5f + (float)rank;
}

/* Registers the kernels and the node callables. The module's entry point;
 * the example calls it too, before its worker forks the local node. */
STRATA_API strata_err strata_module_init(void);

#endif
