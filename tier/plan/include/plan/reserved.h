/* How the tiered-memory module (or any module above the plans) supplies
 * the process-wide callbacks of the reserved operations __gf_transfer and
 * __gf_release: bindings that set none of their own use these, and slots
 * left NULL here use the plans' defaults (docs/plans.md). */
#ifndef PLAN_RESERVED_H
#define PLAN_RESERVED_H

#include <strata/plan.h>

/* Replaces the process-wide table (ops copied; NULL clears it). Any
 * thread; a submission reads the table once, at its start. */
void plan_reserved_set_default(const strata_plan_reserved_ops *ops, void *ctx);

#endif
