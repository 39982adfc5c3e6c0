/*
 * The node callable of halo_mixed_l3, built twice from this file: into the
 * example program (its forked L3 node inherits the registry) and as
 * libhalo_mixed_l3_node.so, the module the example's strata-node loads
 * with --module. The module is built without libstrata: its strata_*
 * calls resolve from strata-node, which also carries the library's halo
 * kernels ("strata.halo.forward" / "strata.halo.vjp", registered by a
 * library constructor).
 *
 * "hmix.node_halo" (see node.h for its arguments) looks the committed
 * global domain up on this node, and submits the halo kernel to every
 * member chip of this node as one group, with exactly the arguments the
 * library's own local-domain path gives it: the plan, the rank's stats
 * slot, the rank's owned input and output rows, and the scalars
 * device_ctx, data offset, rank. The kernel cannot tell a global domain
 * from a local one: strata_global_view_context gives the same context.
 */
#include <string.h>

#include <strata/strata.h>

#include "halo_exec_int.h" /* the plan layout the halo kernels read */
#include "node.h"

#define MAX_LOCAL 16

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

static strata_err bad(const char *why, uint32_t rank)
{
    strata_errmsg_set("hmix.node_halo: rank %u: %s", rank, why);
    return STRATA_EINVAL;
}

/* The halo kernel's arguments for domain rank r (halo_exec.c's
 * rank_args, with the parent's tensors sliced by identity). */
static strata_err rank_args(const strata_args *args, uint32_t r,
                            const strata_chip_domain_ctx *ctx, strata_args *a)
{
    const char *plan = strata_args_tensor_data(args, 0);
    const struct halo_plan_hdr *hdr = (const struct halo_plan_hdr *)plan;
    const struct halo_rank_plan *rps =
        (const struct halo_rank_plan *)(plan + hdr->ranks_off);
    uint32_t first = (uint32_t)strata_args_scalar(args, 2);
    size_t nt = strata_args_num_tensors(args);
    size_t rb = hdr->features * strata_dtype_size((strata_dtype)hdr->dtype);
    uint64_t rows = rps[r].owned_end - rps[r].owned_begin;
    uint64_t node_begin = rps[first].owned_begin;
    size_t ro_shape[1] = {hdr->ro_size};
    size_t st_shape[1] = {HALO_STATS_STRIDE};
    size_t rows_shape[2] = {(size_t)rows, hdr->features};
    size_t at = (size_t)(rps[r].owned_begin - node_begin) * rb;
    strata_err err;

    if (r < first || (size_t)(r - first + 1) * HALO_STATS_STRIDE >
                         strata_args_tensor_nbytes(args, 1))
        return bad("no stats slot for it", r);
    if (rows > 0 &&
        (nt != 4 || at + rows * rb > strata_args_tensor_nbytes(args, 2) ||
         at + rows * rb > strata_args_tensor_nbytes(args, 3)))
        return bad("its rows are not in the node's fields", r);
    err = strata_args_add_tensor(a, strata_args_tensor_buffer(args, 0),
                                 strata_args_tensor_offset(args, 0), STRATA_U8,
                                 1, ro_shape, STRATA_IN);
    if (err == STRATA_OK)
        err =
            strata_args_add_tensor(a, strata_args_tensor_buffer(args, 1),
                                   strata_args_tensor_offset(args, 1) +
                                       (size_t)(r - first) * HALO_STATS_STRIDE,
                                   STRATA_U8, 1, st_shape, STRATA_OUT);
    if (err == STRATA_OK && rows > 0)
        err = strata_args_add_tensor(a, strata_args_tensor_buffer(args, 2),
                                     strata_args_tensor_offset(args, 2) + at,
                                     (strata_dtype)hdr->dtype, 2, rows_shape,
                                     STRATA_IN);
    if (err == STRATA_OK && rows > 0)
        err = strata_args_add_tensor(a, strata_args_tensor_buffer(args, 3),
                                     strata_args_tensor_offset(args, 3) + at,
                                     (strata_dtype)hdr->dtype, 2, rows_shape,
                                     STRATA_OUT);
    if (err == STRATA_OK)
        err = strata_args_add_scalar(a, ctx->device_ctx);
    if (err == STRATA_OK)
        err = strata_args_add_scalar(a, strata_args_scalar(args, 3));
    if (err == STRATA_OK)
        err = strata_args_add_scalar(a, r);
    return err;
}

static strata_err node_halo(strata_orch *o, const strata_args *args, void *user)
{
    strata_chip_domain_ctx ctx[MAX_LOCAL];
    strata_args *a[MAX_LOCAL] = {0};
    int chips[MAX_LOCAL];
    const struct halo_plan_hdr *hdr;
    bool vjp;
    strata_callable k;
    size_t n = 0;
    strata_err err;

    (void)user;
    if (strata_args_num_tensors(args) < 2 ||
        strata_args_tensor_nbytes(args, 0) < sizeof(*hdr))
        return bad("no plan", 0);
    hdr = strata_args_tensor_data(args, 0);
    if (hdr->magic != HALO_PLAN_MAGIC || hdr->version != HALO_PLAN_VERSION ||
        strata_args_tensor_nbytes(args, 0) != hdr->ro_size ||
        strata_args_scalar(args, 2) >= hdr->world)
        return bad("not a halo plan", 0);
    vjp = strata_args_scalar(args, 1) != 0;
    err = strata_callable_by_name(STRATA_CALLABLE_KERNEL,
                                  vjp ? HALO_KERNEL_VJP : HALO_KERNEL_FORWARD,
                                  &k);
    if (err == STRATA_OK)
        err = members(o, strata_args_scalar(args, 0), chips, ctx, &n);
    for (size_t i = 0; err == STRATA_OK && i < n; i++) {
        if (ctx[i].domain_size != hdr->world)
            err = bad("the domain and the plan differ in size",
                      ctx[i].domain_rank);
        if (err == STRATA_OK)
            err = strata_args_create(&a[i]);
        if (err == STRATA_OK)
            err = rank_args(args, ctx[i].domain_rank, &ctx[i], a[i]);
    }
    /* The ranks wait on each other, across nodes too: one group on this
     * node, and the L4 submitted the two nodes' tasks as one group. */
    if (err == STRATA_OK)
        err = strata_orch_submit_next_level_group(
            o, k, (const strata_args *const *)a, chips, n);
    for (size_t i = 0; i < n; i++)
        strata_args_destroy(a[i]);
    return err;
}

strata_err strata_module_init(void)
{
    strata_callable c;

    return strata_register_orch(HMIX_NODE_HALO, node_halo, &c);
}
