/*
 * Kernels, submit helpers and resource probes shared by the domain tests.
 * Builds on the integration kit (it_kernels.h: worker fixture, tracked
 * workers, it_expect/it_try). dom_kit_register() registers every kernel
 * here and in it_kernels (call it from the group setup, before any worker
 * is initialized).
 *
 * Window segments are unlinked once every member has mapped them, so a
 * leaked window is invisible in /dev/shm: dom_window_maps() looks for it
 * in the chip's /proc/<pid>/maps instead ("/dev/shm/strata-...-d<id>-r<r>
 * (deleted)").
 */
#ifndef STRATA_DOM_KIT_H
#define STRATA_DOM_KIT_H

#include "it_kernels.h"

#include <sys/types.h>

#define DOM_WAIT_S 10.0 /* bound on every in-kernel wait (loaded machine) */

/* What dom_k_probe writes for one member (into its OUT tensor). */
struct dom_probe {
    uint32_t found;      /* strata_chip_comm_context returned non-NULL */
    uint32_t version;    /* ctx->version */
    uint32_t rank;       /* ctx->rank */
    uint32_t rank_count; /* ctx->rank_count */
    uint64_t window_size;
    uint64_t own_base;   /* ctx->window_base[ctx->rank] */
    uint64_t bases_seen; /* non-NULL window_base[] entries */
    int32_t chip;        /* strata_chip_id */
    uint32_t bogus_null; /* bogus device_ctx values that answered NULL */
};
#define DOM_PROBE_BOGUS 4 /* bogus values the probe tries */

/* probe: s0 device_ctx; t0 OUT struct dom_probe (as bytes). Never fails
 * (found = 0 when the context is missing).
 * allreduce: s0 device_ctx, s1 data offset (bytes), s2 element count n,
 *   s3 flag offset (bytes), s4 seed; t0 OUT u32[n]. Writes
 *   dom_ar_value(seed, rank, i) into its window, adds 1 to the flag word
 *   of every rank, waits for its own flag to reach rank_count, then sums
 *   every rank's vector into t0. With t1 (NO_DEP u32) and s5: first adds 1
 *   to t1[0] and waits until it reaches s5.
 * zero_check: s0 device_ctx, s1 fill byte base; t0 (NO_DEP) u32[2] host
 *   barrier counters; t1 OUT u32[2] = {nonzero bytes seen in any window
 *   before any member wrote, wrong bytes seen after every member filled its
 *   window with (base + rank)}.
 * fail: returns STRATA_EIO (message names the chip).
 * read_window: s0 device_ctx, s1 rank, s2 byte offset; t0 OUT bytes = the
 *   rank's window from that offset.
 * write_window: s0 device_ctx, s1 byte offset, s2 busy microseconds first;
 *   t0 IN bytes copied into the member's own window at that offset. */
extern strata_callable dom_k_probe, dom_k_allreduce, dom_k_zero_check;
extern strata_callable dom_k_fail, dom_k_read_window, dom_k_write_window;

int dom_kit_register(void);
/* Group setup for tests that need only the shared kernels. */
int dom_setup(void **state);

static inline uint32_t dom_ar_value(uint32_t seed, uint32_t rank, uint32_t i)
{
    return seed * 7919u + rank * 1000003u + i;
}
/* What every member of an n-rank allreduce computes at index i. */
uint32_t dom_ar_expect(uint32_t seed, uint32_t ranks, uint32_t i);

/* A domain spec with up to 8 buffers, filled by the helpers below. */
struct dom_spec {
    strata_domain_spec spec;
    int workers[128];
    strata_comm_buffer_spec bufs[8];
};
/* Workers ids[0..n) in that order, window_size bytes, no buffers. */
void dom_spec_init(struct dom_spec *s, const char *name, const int *ids,
                   size_t n, size_t window_size);
/* Appends buffer name of count dtype elements (nbytes = count * size). */
void dom_spec_buf(struct dom_spec *s, const char *name, strata_dtype dtype,
                  size_t count);

/* Submits probe as a group on every member of d (workers in rank order,
 * ids[0..n)); member r writes out's record r. */
strata_err dom_submit_probe(strata_orch *o, const strata_domain *d,
                            const int *ids, size_t n, strata_buffer *out);
/* Submits allreduce as a group on ids[0..n) (rank order); member r writes
 * out[r * count, (r + 1) * count) (u32). */
strata_err dom_submit_allreduce(strata_orch *o, const strata_domain *d,
                                const int *ids, size_t n, size_t data_off,
                                size_t count, size_t flag_off, uint32_t seed,
                                strata_buffer *out);
/* The same, but every member first meets meet_total members (of this and
 * other groups) on the u32 counter meet[0] (NO_DEP), so the call proves
 * that groups run at the same time. */
strata_err dom_submit_allreduce_meet(strata_orch *o, const strata_domain *d,
                                     const int *ids, size_t n, size_t data_off,
                                     size_t count, size_t flag_off,
                                     uint32_t seed, strata_buffer *out,
                                     strata_buffer *meet, uint32_t meet_total);
/* Checks what dom_submit_allreduce left in out; returns the number of
 * wrong values and prints the first one. */
size_t dom_check_allreduce(strata_buffer *out, size_t n, size_t count,
                           uint32_t seed);

/* Window mappings (live or deleted segments) in process pid. */
size_t dom_window_maps(pid_t pid);
/* Sum of dom_window_maps over the worker's chips ids[0..n). */
size_t dom_chip_window_maps(const strata_worker *w, const int *ids, size_t n);
/* /dev/shm window segments named for this process (strata-<uid>-<pid>-d). */
size_t dom_shm_windows(void);
/* Allocation id of a window mapped in process pid at address base (from
 * its /proc maps line), or 0 if none. */
unsigned long long dom_window_alloc_id(pid_t pid, uint64_t base);

#endif /* STRATA_DOM_KIT_H */
