/*
 * Helpers shared by the L4 tests: node orch callables (registered ORCH
 * functions that an L4 orch fn submits to node ids), a few kernels of our
 * own, and a fixture that builds an L4 worker with forked L3 nodes.
 *
 * Every callable is registered by l4_kit_register() (a group setup, before
 * any worker is initialized), so every process of the tree has it.
 */
#ifndef STRATA_L4_KIT_H
#define STRATA_L4_KIT_H

#include "it_kernels.h"

#include <sys/types.h>

#define L4_MAX_NODES 4
#define L4_MAX_CHIPS 4

/* Kernels (run on a node's chips):
 * boom: fails with STRATA_EIO and the message "boom from chip <id>". With
 *   a t1 (NO_DEP) = {go, fired}, it first waits up to IT_WAIT_S for go,
 *   then sets fired.
 * block: t0 (NO_DEP) = {release, started[, pid]}; stores its process id
 *   (when t0 has a third word), sets started, waits up to IT_WAIT_S for
 *   release. Other tensors are left alone.
 * handshake: t0 (NO_DEP) = {started, release, in, out}; sets started, waits
 *   for release, then out = in * 2 + 1: the parent writes in and release
 *   while the kernel runs, and reads started before the run ends. */
extern strata_callable l4_k_boom, l4_k_block, l4_k_handshake;

/* Node orch callables (the L3 side of an L4 task):
 * l4_o_forward: scalar 0 = index into l4_kernels[], scalar 1 = chip id;
 *   submits that kernel to that chip with every tensor passed on by
 *   identity (strata_args_tensor_buffer/offset) and scalars 2.. as the
 *   kernel's scalars.
 * l4_o_fill: t0 (OUT, u32); splits it across the node's chips 0..n-1 with
 *   it.fill so element i (of the tensor) = scalar 0 + i; scalar 1 = busy us
 *   per chip.
 * l4_o_scale: t0 (IN, u32), t1 (OUT, u32, same count): t1 = t0 * s0 + s1,
 *   split across the node's chips.
 * l4_o_check: checks that tensor i's buffer, mapped in the node, has size
 *   scalar 2i and tensor i sits at byte offset scalar 2i+1 (STRATA_EINVAL
 *   otherwise); submits nothing. */
extern strata_callable l4_o_forward, l4_o_fill, l4_o_scale, l4_o_check;

/* Kernel indexes for l4_o_forward. */
enum l4_kernel_index {
    L4_K_FILL = 0,
    L4_K_SCALE,
    L4_K_WAIT_FLAG,
    L4_K_BOOM,
    L4_K_BLOCK,
    L4_K_HANDSHAKE,
    L4_K_COUNT
};

int l4_kit_register(void);
/* Group setup: l4_kit_register. */
int l4_setup(void **state);

/* Creates (tracked by the it_ fixture) an un-started L4 worker with
 * num_nodes L3 nodes of chips 0..chips-1 each; the L4's start-up timeout
 * is startup_s. Does not init. */
strata_err l4_create(size_t num_nodes, size_t chips, double startup_s,
                     strata_worker **out);
/* l4_create (startup 30 s) + strata_worker_init; destroys on failure. */
strata_err l4_start(size_t num_nodes, size_t chips, strata_worker **out);

/* An L4 task from inside an L4 orch fn: l4_o_forward of kernel k to chip
 * of node, with tensors given as (buffer, word offset, words, tag) and up
 * to 4 scalars. */
struct l4_t {
    strata_buffer *b;
    size_t off;
    size_t n;
    strata_tag tag;
};
strata_err l4_forward(strata_orch *o, int node, enum l4_kernel_index k,
                      int chip, const struct l4_t *t, size_t nt,
                      const uint64_t *s, size_t ns);
/* l4_o_fill of b[off, off + n) on node: b[off + i] = base + i. */
strata_err l4_fill(strata_orch *o, int node, strata_buffer *b, size_t off,
                   size_t n, uint32_t base, uint32_t busy_us);
/* l4_o_scale on node: out[oo + i] = in[io + i] * mul + add. */
strata_err l4_scale(strata_orch *o, int node, strata_buffer *in, size_t io,
                    strata_buffer *out, size_t oo, size_t n, uint32_t mul,
                    uint32_t add);

/* Child pids of process pid (every thread's children), up to cap. */
size_t l4_children_of(pid_t pid, pid_t *out, size_t cap);
/* True when /proc/<pid>/maps names segment (a "/strata-..." name). */
bool l4_maps_has(pid_t pid, const char *segment);

/* Fails the current test unless hay contains needle. */
void l4_assert_contains(const char *hay, const char *needle);

#endif /* STRATA_L4_KIT_H */
