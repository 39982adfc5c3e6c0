/*
 * The callables of global_allreduce_mixed_l3, built twice from this file:
 * into the example program (its forked L3 node inherits the registry) and
 * as libglobal_allreduce_mixed_l3_kernels.so, the module the example's
 * strata-node loads with --module. The module is built without libstrata:
 * its strata_* calls resolve from strata-node.
 *
 *   node orch "gar.node_compute"  s0 = global domain id. Looks the
 *       committed domain up on this node and runs kernel "gar.allreduce"
 *       on every member chip of this node, as one group.
 *   node orch "gar.node_read"     s0 = global domain id; t0 OUT f32 with
 *       GAR_N elements per member chip of this node (chip id order):
 *       kernel "gar.read" copies each member's "sum" there.
 *
 * A node's chips are 0..n-1 in this example; the node finds which of them
 * are members by asking the view.
 */
#include <string.h>

#include <strata/strata.h>

#include "kernels.h"

#define MAX_LOCAL 16

static strata_callable k_allreduce, k_read;

/* Scalars: device_ctx, byte offsets of "data", "sum" and "flag". */
static strata_err allreduce_kernel(strata_chip *chip, const strata_args *a)
{
    const strata_comm_context *cc =
        strata_chip_comm_context(chip, strata_args_scalar(a, 0));
    size_t data = (size_t)strata_args_scalar(a, 1);
    size_t sum = (size_t)strata_args_scalar(a, 2);
    size_t flag = (size_t)strata_args_scalar(a, 3);
    float *mine, *out;
    strata_err err;

    if (!cc) {
        strata_errmsg_set("chip %d: not a member", strata_chip_id(chip));
        return STRATA_ENOENT;
    }
    /* 1. My contribution into my window. */
    mine = (float *)((char *)cc->window_base[cc->rank] + data);
    for (uint32_t i = 0; i < GAR_N; i++)
        mine[i] = gar_value(cc->rank, i);
    /* 2. "Mine is there", on every rank's flag (windows started zeroed,
     * so no fast peer's signal can be wiped). */
    for (uint32_t r = 0; r < cc->rank_count; r++)
        strata_signal_add(
            (volatile uint32_t *)((char *)cc->window_base[r] + flag), 1);
    /* 3. Until every rank's is there: the peers on the other node too. */
    err = strata_signal_wait(
        (volatile uint32_t *)((char *)cc->window_base[cc->rank] + flag),
        cc->rank_count, GAR_WAIT_S);
    if (err != STRATA_OK) {
        strata_errmsg_set("rank %u: the other ranks did not signal within "
                          "%.0f s",
                          cc->rank, GAR_WAIT_S);
        return err;
    }
    /* 4. The sum, in rank order, into my window's "sum": it stays there
     * after this run, for the next one to read. */
    out = (float *)((char *)cc->window_base[cc->rank] + sum);
    for (uint32_t i = 0; i < GAR_N; i++) {
        float s = 0.0f;

        for (uint32_t r = 0; r < cc->rank_count; r++)
            s += ((const float *)((const char *)cc->window_base[r] + data))[i];
        out[i] = s;
    }
    return STRATA_OK;
}

/* Scalars: device_ctx, byte offset of "sum"; t0 OUT f32[GAR_N]. */
static strata_err read_kernel(strata_chip *chip, const strata_args *a)
{
    const strata_comm_context *cc =
        strata_chip_comm_context(chip, strata_args_scalar(a, 0));
    size_t sum = (size_t)strata_args_scalar(a, 1);

    if (!cc || strata_args_tensor_nbytes(a, 0) != GAR_N * sizeof(float)) {
        strata_errmsg_set("gar.read on chip %d: no context or a bad tensor",
                          strata_chip_id(chip));
        return STRATA_EINVAL;
    }
    memcpy(strata_args_tensor_data(a, 0),
           (const char *)cc->window_base[cc->rank] + sum,
           GAR_N * sizeof(float));
    return STRATA_OK;
}

static size_t offset_of(const strata_chip_domain_ctx *ctx, const char *name)
{
    for (size_t i = 0; i < ctx->num_buffers; i++)
        if (strcmp(ctx->buffers[i].name, name) == 0)
            return ctx->buffers[i].offset;
    return (size_t)-1;
}

/* This node's member chips (ids in order) and their contexts. */
static strata_err members(strata_orch *o, uint64_t id, int *chips,
                          strata_chip_domain_ctx *ctx, size_t *n)
{
    size_t num = strata_worker_num_chips(strata_orch_worker(o));
    strata_global_view *v = NULL;
    strata_err err = strata_orch_get_global_domain(o, id, &v);

    *n = 0;
    for (int c = 0; err == STRATA_OK && (size_t)c < num && *n < MAX_LOCAL;
         c++) {
        if (strata_global_view_context(v, c, &ctx[*n]) != STRATA_OK)
            continue; /* not a member */
        chips[(*n)++] = c;
    }
    return err;
}

static strata_err compute_orch(strata_orch *o, const strata_args *args,
                               void *user)
{
    strata_chip_domain_ctx ctx[MAX_LOCAL];
    strata_args *a[MAX_LOCAL] = {0};
    int chips[MAX_LOCAL];
    size_t n = 0;
    strata_err err;

    (void)user;
    err = members(o, strata_args_scalar(args, 0), chips, ctx, &n);
    for (size_t k = 0; err == STRATA_OK && k < n; k++) {
        err = strata_args_create(&a[k]);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(a[k], ctx[k].device_ctx);
        if (err == STRATA_OK)
            err =
                strata_args_add_scalar(a[k], offset_of(&ctx[k], GAR_BUF_DATA));
        if (err == STRATA_OK)
            err = strata_args_add_scalar(a[k], offset_of(&ctx[k], GAR_BUF_SUM));
        if (err == STRATA_OK)
            err =
                strata_args_add_scalar(a[k], offset_of(&ctx[k], GAR_BUF_FLAG));
    }
    /* The members wait on each other: one group, started when every
     * member chip of this node is idle. */
    if (err == STRATA_OK)
        err = strata_orch_submit_next_level_group(
            o, k_allreduce, (const strata_args *const *)a, chips, n);
    for (size_t k = 0; k < n; k++)
        strata_args_destroy(a[k]);
    return err;
}

static strata_err read_orch(strata_orch *o, const strata_args *args, void *user)
{
    strata_chip_domain_ctx ctx[MAX_LOCAL];
    int chips[MAX_LOCAL];
    const size_t shape[1] = {GAR_N};
    strata_args *a = NULL;
    size_t n = 0;
    strata_err err;

    (void)user;
    err = members(o, strata_args_scalar(args, 0), chips, ctx, &n);
    if (err == STRATA_OK &&
        strata_args_tensor_nbytes(args, 0) != n * GAR_N * sizeof(float)) {
        strata_errmsg_set("gar.node_read: the output holds %zu bytes, not %zu",
                          strata_args_tensor_nbytes(args, 0),
                          n * GAR_N * sizeof(float));
        err = STRATA_EINVAL;
    }
    if (err == STRATA_OK)
        err = strata_args_create(&a);
    for (size_t k = 0; err == STRATA_OK && k < n; k++) {
        /* Slice k of the parent's tensor, passed on by identity. */
        strata_args_clear(a);
        err = strata_args_add_tensor(a, strata_args_tensor_buffer(args, 0),
                                     strata_args_tensor_offset(args, 0) +
                                         k * GAR_N * sizeof(float),
                                     STRATA_F32, 1, shape, STRATA_OUT);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(a, ctx[k].device_ctx);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(a, offset_of(&ctx[k], GAR_BUF_SUM));
        if (err == STRATA_OK)
            err = strata_orch_submit_next_level(o, k_read, a, chips[k]);
    }
    strata_args_destroy(a);
    return err;
}

strata_err strata_module_init(void)
{
    strata_callable c;
    strata_err err =
        strata_register_kernel("gar.allreduce", allreduce_kernel, &k_allreduce);

    if (err == STRATA_OK)
        err = strata_register_kernel("gar.read", read_kernel, &k_read);
    if (err == STRATA_OK)
        err = strata_register_orch(GAR_NODE_COMPUTE, compute_orch, &c);
    if (err == STRATA_OK)
        err = strata_register_orch(GAR_NODE_READ, read_orch, &c);
    return err;
}
