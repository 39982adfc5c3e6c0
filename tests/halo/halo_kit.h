/* Helpers shared by the halo execution tests: a worker with chips, fields
 * in worker buffers, a single-process reference of the forward and the
 * VJP, and one-call runs. */
#ifndef HALO_KIT_H
#define HALO_KIT_H

#include "graph_helpers.h"

#include <strata/strata.h>

#define HK_CHIPS 8

/* A started worker with chips 0..HK_CHIPS-1 and four field buffers. */
struct hk_env {
    strata_worker *w;
    strata_buffer *x, *out, *grad_out, *grad_x;
    size_t cap; /* bytes of each buffer */
};

/* Creates and starts the worker and the buffers (cap bytes each);
 * CMocka-asserts on failure. */
void hk_env_start(struct hk_env *env, size_t cap);
void hk_env_stop(struct hk_env *env);

/* Fills n x f elements of dtype in buf from a seed (small values that
 * are exact in float32). */
void hk_fill(strata_buffer *buf, strata_dtype dtype, uint64_t n, size_t f,
             uint64_t seed);
/* Element i of buf as a double. */
double hk_get(strata_buffer *buf, strata_dtype dtype, size_t i);

/* Reference forward (vjp false: out from x) or VJP (grad_x from
 * grad_out), in double, into ref (n * f). weight is NULL for sum/mean,
 * or the per-edge weight of the test's edge kernel. */
void hk_reference(const struct gh_graph *g, strata_halo_reducer reducer,
                  double (*weight)(int64_t dst, int64_t src), bool vjp,
                  const double *in, size_t f, double *ref);

/* Runs strata_halo_forward (vjp false) or strata_halo_vjp on h in one
 * run of env's worker; returns the run's error. */
strata_err hk_call(struct hk_env *env, strata_halo *h, bool vjp);

/* Checks buf against ref (n * f values) within a tolerance fitting
 * dtype; CMocka-fails naming the first wrong element and label. */
void hk_expect_close(strata_buffer *buf, strata_dtype dtype, const double *ref,
                     size_t count, const char *label);

#endif
