/*
 * Kernels, subs, submit helpers and a worker fixture shared by the
 * integration tests. Every kernel is registered by it_kernels_register()
 * (call it from the group setup, before any worker is initialized).
 *
 * Workers made through it_worker_create/it_worker_start are tracked until
 * it_worker_destroy, so it_teardown (a CMocka per-test teardown) can
 * destroy what a failed test left behind and later tests start clean.
 */
#ifndef STRATA_IT_KERNELS_H
#define STRATA_IT_KERNELS_H

#include "it_common.h"

#define IT_WAIT_S 5.0 /* bound on every in-kernel wait */

/* fill: OUT t0[i] = s0 + i after s1 us of busy work.
 * scale / scale_sub: t1[i] = t0[i] * s0 + s1.
 * add: t2 = t0 + t1. chip_id: every t0 element = chip id. inc: t0[0] += 1.
 * wait_flag: waits for t0[0] == 1 (NO_DEP), then t1[0] = 77. */
extern strata_callable it_k_fill, it_k_scale, it_k_add, it_k_chip_id;
extern strata_callable it_k_inc, it_k_wait_flag, it_s_scale;

int it_kernels_register(void);

/* strata_worker_create, tracked on success. */
strata_err it_worker_create(const strata_worker_config *cfg,
                            strata_worker **out);
/* Creates and initializes a sim L3 worker with chips ids[0..n) and subs
 * (tracked). */
strata_err it_worker_start(const int *ids, size_t n, size_t subs,
                           strata_worker **out);
/* strata_worker_destroy, untracking w whatever it returns. */
strata_err it_worker_destroy(strata_worker *w);
/* CMocka teardown: destroys every worker still tracked (after a failed
 * test), waiting up to 10 s for stuck runs. Always returns 0. */
int it_teardown(void **state);
/* Group setup for tests that need only the shared kernels. */
int it_setup_kernels(void **state);

/* Submits fill of b[off, off + n) on chip. */
strata_err it_submit_fill(strata_orch *o, int chip, strata_buffer *b,
                          size_t off, size_t n, uint32_t base,
                          uint32_t busy_us);
/* Kernel on chip (>= 0) or sub (chip < 0): out[0,n) = in[0,n) * mul + add. */
strata_err it_submit_scale(strata_orch *o, int chip, strata_buffer *in,
                           strata_buffer *out, size_t n, uint32_t mul,
                           uint32_t add);
/* Submits wait_flag on chip: flag = b_flag[0], result = b_out[0]. */
strata_err it_submit_wait_flag(strata_orch *o, int chip, strata_buffer *flag,
                               strata_buffer *out);

/* A worker with chips 0..3 and 2 subs, and six zeroed buffers of n words;
 * the snapshot is taken before anything is created. */
struct it_fx {
    testutil_snapshot before;
    strata_worker *w;
    strata_buffer *b[6];
    size_t n;
};
extern const int it_ids4[4];

void it_fx_start(struct it_fx *f, size_t words);
/* Destroys the worker (must return OK) and asserts nothing leaked. */
void it_fx_end(struct it_fx *f);
uint32_t *it_fx_w(struct it_fx *f, size_t i);

#endif /* STRATA_IT_KERNELS_H */
