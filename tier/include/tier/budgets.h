/* What tier/ lends the modules above it: the budget string parser, so a
 * worker reads "ram=16GiB,nvme=1TiB" exactly as a tier runtime does. */
#ifndef TIER_BUDGETS_H
#define TIER_BUDGETS_H

#include <stdint.h>
#include <strata/tier.h>

/* No budget: the tier is unlimited. */
#define TIER_NO_BUDGET UINT64_MAX

/* Parses "tier=size,tier=size" (NULL or "": none) into budgets_out,
 * TIER_NO_BUDGET for tiers not named. STRATA_EINVAL with the reason;
 * budgets_out is written only on success. */
strata_err tier_parse_budgets(const char *text,
                              uint64_t budgets_out[STRATA_TIER_COUNT]);

#endif
