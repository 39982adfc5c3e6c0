/* The balanced block partition: the first n mod world ranks own one row
 * more than the rest. */
#include "base/err.h"

#include <strata/graph.h>

strata_err strata_owned_range(uint64_t n, uint32_t world, uint32_t rank,
                              uint64_t *begin_out, uint64_t *end_out)
{
    uint64_t base;
    uint64_t extra;

    if (!begin_out || !end_out)
        return base_fail_null("strata_owned_range",
                              !begin_out ? "begin_out" : "end_out");
    if (world == 0 || rank >= world)
        return base_fail(STRATA_EINVAL,
                         "strata_owned_range: need world > 0 and rank < "
                         "world (got rank %u, world %u)",
                         rank, world);
    base = n / world;
    extra = n % world;
    *begin_out = rank * base + (rank < extra ? rank : extra);
    *end_out = (rank + 1) * base + (rank + 1 < extra ? rank + 1 : extra);
    return STRATA_OK;
}

strata_err strata_destination_owner(uint64_t entity, uint64_t n, uint32_t world,
                                    uint32_t *rank_out)
{
    uint64_t base;
    uint64_t extra;
    uint64_t cut;

    if (!rank_out)
        return base_fail_null("strata_destination_owner", "rank_out");
    if (world == 0)
        return base_fail(STRATA_EINVAL, "strata_destination_owner: world is 0");
    if (entity >= n)
        return base_fail(STRATA_EINVAL,
                         "strata_destination_owner: entity %llu outside "
                         "[0, n = %llu)",
                         (unsigned long long)entity, (unsigned long long)n);
    base = n / world;
    extra = n % world;
    /* The first `extra` ranks own base + 1 rows each. */
    cut = extra * (base + 1);
    if (entity < cut)
        *rank_out = (uint32_t)(entity / (base + 1));
    else
        *rank_out = (uint32_t)(extra + (entity - cut) / base);
    return STRATA_OK;
}
