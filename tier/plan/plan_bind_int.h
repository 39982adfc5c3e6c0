/* Bundle plans: the bindings object, shared by plan_bind.c and
 * plan_submit.c. */
#ifndef PLAN_PLAN_BIND_INT_H
#define PLAN_PLAN_BIND_INT_H

#include "plan_int.h"

struct bind_res {
    bool bound;
    strata_buffer *buf; /* NULL when bound to a handle */
    size_t off, n;
    void *handle;
};

struct bind_part {
    size_t res; /* declared index */
    char *partitioning, *partition;
    size_t off, n; /* relative to the resource's binding */
};

struct bind_callable {
    char *name;
    strata_callable c;
    int worker_id;
};

struct strata_plan_bindings {
    const strata_plan *plan;
    strata_worker *w;
    strata_buffer *tokens; /* one byte per position of the plan's order */
    struct bind_res *res;  /* by declared index */
    struct bind_part *parts;
    size_t num_parts, cap_parts;
    struct bind_callable *calls;
    size_t num_calls, cap_calls;
    int *targets; /* per invocation; -1: none */
    strata_plan_reserved_ops ops;
    void *ops_ctx;
};

#endif
