/* Bundle plans, module-private: the plan object and the helpers its files
 * share (an arena for its copies, a name index, the checks). */
#ifndef PLAN_PLAN_INT_H
#define PLAN_PLAN_INT_H

#include <strata/plan.h>

/* Every allocation of a plan, freed together. */
struct plan_arena {
    void **ptrs;
    size_t n, cap;
};

void *plan_arena_alloc(struct plan_arena *a, size_t size);
/* Copies s (NULL: def) into the arena; NULL on ENOMEM (s and def NULL:
 * NULL, not a failure, when *fail stays false). */
char *plan_arena_strdup(struct plan_arena *a, const char *s, const char *def,
                        bool *fail);
void plan_arena_free(struct plan_arena *a);

/* Name -> index, open addressing over a power of two. */
struct plan_index {
    const char **keys;
    size_t *vals;
    size_t cap;
};

strata_err plan_index_init(struct plan_index *x, size_t n);
void plan_index_fini(struct plan_index *x);
/* false when key is already there (nothing changed). */
bool plan_index_put(struct plan_index *x, const char *key, size_t val);
/* SIZE_MAX when absent. */
size_t plan_index_get(const struct plan_index *x, const char *key);

struct strata_plan {
    struct plan_arena arena;
    strata_plan_resource *res;
    size_t num_res;
    strata_plan_invocation *inv;
    size_t num_inv;
    const char **terms;
    size_t num_terms;
    /* Resolved by plan_check. */
    size_t *order;   /* topological, num_inv */
    size_t *dep_off; /* num_inv + 1: deps of i are dep_idx[dep_off[i]..] */
    size_t *dep_idx; /* invocation indexes */
    struct plan_index inv_index;
    struct plan_index decl_index; /* declared resource names */
    size_t num_decl;
};

/* Checks a copied plan and fills order, deps and the indexes. */
strata_err plan_check(struct strata_plan *p);
/* Mode as the schema spells it ("read"...); NULL for a bad one. */
const char *plan_mode_name(strata_plan_mode m);
/* True for the three reserved callables. */
bool plan_is_reserved(const char *callable);

#endif
