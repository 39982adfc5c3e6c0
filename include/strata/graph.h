/* Graph partitioning, halo maps and the .gfg store. Included by strata.h. */
#ifndef STRATA_GRAPH_H
#define STRATA_GRAPH_H

#include <strata/strata.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Rank r of world owns rows [r*floor(n/world) + min(r, n mod world),
 * (r+1)*floor(n/world) + min(r+1, n mod world)). STRATA_EINVAL for
 * world == 0 or rank >= world. */
STRATA_API STRATA_MUST_CHECK strata_err strata_owned_range(
    uint64_t n, uint32_t world, uint32_t rank, uint64_t *begin_out,
    uint64_t *end_out);
/* The rank that owns entity (STRATA_EINVAL if entity >= n or world == 0). */
STRATA_API STRATA_MUST_CHECK strata_err strata_destination_owner(
    uint64_t entity, uint64_t n, uint32_t world, uint32_t *rank_out);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_GRAPH_H */
