/* Halo execution over a global domain: the members are chips of several
 * nodes of a level-4 worker. The L4 allocates a global domain per call and
 * submits the node callable "strata.halo.node" to every member node as one
 * group; on each node it finds the committed domain and submits the rank
 * kernels to its member chips as one group, with the arguments a local
 * call gives them. The kernels cannot tell the two apart.
 *
 * A node task's arguments (built by node_args, read by halo_node_orch):
 *   t0         the read-only plan (IN, u8[ro_size] from offset 0);
 *   per member k, in the order of the scalars: its stats slot (OUT,
 *              u8[HALO_STATS_STRIDE]) and, when it owns rows, its input
 *              rows (IN) and output rows (OUT);
 *   s0 the global domain id, s1 1 for the VJP (0: forward), s2 the byte
 *   offset of the data region in every window, s3 the member count n,
 *   s4.. one per member: chip id << 32 | domain rank.
 */
#include "base/alloc.h"
#include "base/err.h"
#include "halo_exec_int.h"

#include <stdio.h>
#include <string.h>

/* ---- the L4 side ---- */

strata_err halo_global_check(const strata_worker *w, const strata_halo_spec *s)
{
    size_t nodes = strata_worker_num_nodes(w);

    if (!s->members || s->num_members == 0)
        return base_fail(STRATA_EINVAL, "halo spec: no members");
    if (s->num_members > UINT32_MAX / 2)
        return base_fail(STRATA_EINVAL, "halo spec: %zu members",
                         s->num_members);
    for (size_t i = 0; i < s->num_members; i++) {
        const strata_global_member *m = &s->members[i];
        size_t same_node = 1;

        if (m->node_worker_id < 0 || (size_t)m->node_worker_id >= nodes)
            return base_fail(STRATA_EINVAL,
                             "halo spec: members[%zu].node_worker_id %d is "
                             "not a node of the worker (it has %zu; add them "
                             "before strata_halo_create)",
                             i, m->node_worker_id, nodes);
        if (m->local_chip < 0)
            return base_fail(STRATA_EINVAL,
                             "halo spec: members[%zu].local_chip = %d", i,
                             m->local_chip);
        for (size_t j = 0; j < i; j++) {
            if (s->members[j].node_worker_id != m->node_worker_id)
                continue;
            if (s->members[j].local_chip == m->local_chip)
                return base_fail(STRATA_EINVAL,
                                 "halo spec: members[%zu] and members[%zu] "
                                 "are both chip %d of node %d",
                                 j, i, m->local_chip, m->node_worker_id);
            same_node++;
        }
        if (same_node > STRATA_HALO_NODE_MAX_MEMBERS)
            return base_fail(STRATA_EINVAL,
                             "halo spec: node %d has more than %d members",
                             m->node_worker_id, STRATA_HALO_NODE_MAX_MEMBERS);
    }
    return STRATA_OK;
}

static size_t group_of(const strata_halo *h, int node)
{
    size_t k = 0;

    while (k < h->num_groups && h->groups[k].node != node)
        k++;
    return k;
}

strata_err halo_global_setup(strata_halo *h, const strata_halo_spec *spec)
{
    size_t at = 0;

    h->members = base_calloc(h->world, sizeof(*h->members));
    h->nodes = base_calloc(h->world, sizeof(*h->nodes));
    h->groups = base_calloc(h->world, sizeof(*h->groups));
    h->group_nodes = base_calloc(h->world, sizeof(*h->group_nodes));
    h->group_ranks = base_calloc(h->world, sizeof(*h->group_ranks));
    if (!h->members || !h->nodes || !h->groups || !h->group_nodes ||
        !h->group_ranks)
        return base_fail(STRATA_ENOMEM, "strata_halo_create: out of memory");
    memcpy(h->members, spec->members, h->world * sizeof(*h->members));
    /* Nodes in order of first appearance, each with its member count. */
    for (uint32_t r = 0; r < h->world; r++) {
        size_t k = group_of(h, h->members[r].node_worker_id);

        h->chips[r] = h->members[r].local_chip;
        h->nodes[r] = h->members[r].node_worker_id;
        if (k == h->num_groups) {
            h->groups[k].node = h->nodes[r];
            h->group_nodes[k] = h->nodes[r];
            h->num_groups++;
        }
        h->groups[k].count++;
    }
    for (size_t k = 0; k < h->num_groups; k++) {
        h->groups[k].ranks = h->group_ranks + at;
        at += h->groups[k].count;
        h->groups[k].count = 0;
    }
    for (uint32_t r = 0; r < h->world; r++) {
        struct halo_node_group *g = &h->groups[group_of(h, h->nodes[r])];

        g->ranks[g->count++] = r;
    }
    return STRATA_OK;
}

void halo_global_free(strata_halo *h)
{
    base_free(h->members);
    base_free(h->nodes);
    base_free(h->groups);
    base_free(h->group_nodes);
    base_free(h->group_ranks);
}

strata_err halo_node_args(const strata_halo *h, const struct halo_node_group *g,
                          uint64_t first, bool vjp, strata_buffer *in,
                          strata_buffer *out, strata_args *a)
{
    const void *plan = strata_buffer_data(h->plan);
    strata_err err;

    err = halo_add_plan(a, h);
    for (size_t k = 0; k < g->count && !err; k++) {
        const struct halo_rank_plan *rp = halo_plan_rank(plan, g->ranks[k]);

        err = halo_add_stats(a, h, g->ranks[k]);
        if (!err && rp->owned_end > rp->owned_begin)
            err = halo_add_rows(a, h, in, rp->owned_begin, rp->owned_end,
                                STRATA_IN);
        if (!err && rp->owned_end > rp->owned_begin)
            err = halo_add_rows(a, h, out, rp->owned_begin, rp->owned_end,
                                STRATA_OUT);
    }
    if (!err)
        err = strata_args_add_scalar(a, first);
    if (!err)
        err = strata_args_add_scalar(a, vjp ? 1 : 0);
    if (!err)
        err = strata_args_add_scalar(a, halo_data_offset(h->world));
    if (!err)
        err = strata_args_add_scalar(a, g->count);
    for (size_t k = 0; k < g->count && !err; k++)
        err = strata_args_add_scalar(
            a, (uint64_t)(uint32_t)h->chips[g->ranks[k]] << 32 | g->ranks[k]);
    return err;
}

/* Every member node's task as one group, inside a scope: the ranks wait
 * on each other across nodes. */
static strata_err submit_nodes(strata_orch *o, strata_halo *h, uint64_t id,
                               bool vjp, strata_buffer *in, strata_buffer *out)
{
    strata_args **a = base_calloc(h->num_groups, sizeof(*a));
    strata_err err = a ? STRATA_OK : STRATA_ENOMEM;
    strata_err end;

    if (err)
        return base_fail(err, "halo: out of memory");
    for (size_t k = 0; k < h->num_groups && !err; k++) {
        err = strata_args_create(&a[k]);
        if (!err)
            err = halo_node_args(h, &h->groups[k], id, vjp, in, out, a[k]);
    }
    if (!err)
        err = strata_orch_scope_begin(o);
    if (!err) {
        err = strata_orch_submit_next_level_group(
            o, halo_node_callable(), (const strata_args *const *)a,
            h->group_nodes, h->num_groups);
        /* The scope must close even when the submit failed. */
        end = strata_orch_scope_end(o);
        if (!err)
            err = end;
    }
    for (size_t k = 0; k < h->num_groups; k++)
        strata_args_destroy(a[k]);
    base_free(a);
    return err;
}

strata_err halo_global_run(strata_orch *o, strata_halo *h, bool vjp,
                           strata_buffer *in, strata_buffer *out, size_t window)
{
    static uint64_t seq;
    char name[STRATA_DOMAIN_NAME_MAX];
    strata_global_domain_spec ds = {0};
    strata_global_domain *g = NULL;
    strata_err err;
    strata_err rel;

    /* A fresh domain per call: its windows, flags included, start zeroed. */
    snprintf(name, sizeof(name), "strata.halo.g%s.%llu", vjp ? "vjp" : "fwd",
             (unsigned long long)__atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED));
    ds.name = name;
    ds.members = h->members;
    ds.num_members = h->world;
    ds.window_size = window;
    err = strata_orch_allocate_global_domain(o, &ds, &g);
    if (err)
        return err;
    err = submit_nodes(o, h, strata_global_domain_id(g), vjp, in, out);
    /* Freed at the run's fence, once no task can touch the windows. */
    rel = strata_global_domain_release(g);
    return err ? err : rel;
}

/* ---- the node side ---- */

strata_err halo_member_chip_check(strata_orch *o, uint32_t r, int chip)
{
    const strata_worker *w = strata_orch_worker(o);

    if (strata_worker_chip_pid(w, chip) >= 0)
        return STRATA_OK;
    return base_fail(STRATA_EINVAL,
                     "halo spec: members[%u] names chip %d, which its node "
                     "does not have (%zu chips)",
                     r, chip, strata_worker_num_chips(w));
}

static strata_err bad_task(const char *what, size_t k)
{
    return base_fail(STRATA_EINVAL, "halo node task: member %zu: %s", k, what);
}

/* Passes tensor i of the node task on to a kernel as ndims x shape of
 * dtype, after checking its size. */
static strata_err pass_on(const strata_args *args, size_t i, strata_dtype dt,
                          size_t ndims, const size_t *shape, strata_tag tag,
                          strata_args *a)
{
    size_t n = strata_dtype_size(dt);
    strata_buffer *b = strata_args_tensor_buffer(args, i);

    for (size_t d = 0; d < ndims; d++)
        n *= shape[d];
    if (!b || strata_args_tensor_nbytes(args, i) != n)
        return base_fail(STRATA_EINVAL,
                         "halo node task: tensor %zu has %zu bytes, not %zu", i,
                         strata_args_tensor_nbytes(args, i), n);
    return strata_args_add_tensor(a, b, strata_args_tensor_offset(args, i), dt,
                                  ndims, shape, tag);
}

/* The kernel arguments of member k (domain rank r on chip) from tensor
 * *ti of the node task on; advances *ti past its tensors. */
static strata_err member_args(const strata_args *args, const void *plan,
                              const strata_chip_domain_ctx *ctx, uint32_t r,
                              size_t *ti, strata_args *a)
{
    const struct halo_plan_hdr *hdr = plan;
    const struct halo_rank_plan *rp = halo_plan_rank(plan, r);
    const size_t ro_shape[1] = {hdr->ro_size};
    const size_t st_shape[1] = {HALO_STATS_STRIDE};
    const size_t rows_shape[2] = {(size_t)(rp->owned_end - rp->owned_begin),
                                  (size_t)hdr->features};
    bool rows = rp->owned_end > rp->owned_begin;
    strata_err err;

    if (*ti + (rows ? 3 : 1) > strata_args_num_tensors(args))
        return base_fail(STRATA_EINVAL,
                         "halo node task: rank %u: its tensors are missing", r);
    err = pass_on(args, 0, STRATA_U8, 1, ro_shape, STRATA_IN, a);
    if (!err)
        err = pass_on(args, (*ti)++, STRATA_U8, 1, st_shape, STRATA_OUT, a);
    if (!err && rows)
        err = pass_on(args, (*ti)++, (strata_dtype)hdr->dtype, 2, rows_shape,
                      STRATA_IN, a);
    if (!err && rows)
        err = pass_on(args, (*ti)++, (strata_dtype)hdr->dtype, 2, rows_shape,
                      STRATA_OUT, a);
    if (!err)
        err = strata_args_add_scalar(a, ctx->device_ctx);
    if (!err)
        err = strata_args_add_scalar(a, strata_args_scalar(args, 2));
    if (!err)
        err = strata_args_add_scalar(a, r);
    return err;
}

/* Checks the task's shape and plan; returns the plan or NULL. */
static const struct halo_plan_hdr *node_plan(const strata_args *args,
                                             size_t *n_out)
{
    const struct halo_plan_hdr *hdr = strata_args_tensor_data(args, 0);
    size_t ns = strata_args_num_scalars(args);
    size_t n = ns >= 4 ? (size_t)strata_args_scalar(args, 3) : 0;

    if (n == 0 || n > STRATA_HALO_NODE_MAX_MEMBERS || ns != 4 + n ||
        strata_args_num_tensors(args) < 1 + n || !hdr ||
        strata_args_tensor_nbytes(args, 0) < sizeof(*hdr) ||
        hdr->magic != HALO_PLAN_MAGIC || hdr->version != HALO_PLAN_VERSION ||
        strata_args_tensor_nbytes(args, 0) != hdr->ro_size) {
        base_fail(STRATA_EINVAL, "halo node task: not a halo plan and its "
                                 "members");
        return NULL;
    }
    *n_out = n;
    return hdr;
}

strata_err halo_node_orch(strata_orch *o, const strata_args *args, void *user)
{
    const struct halo_plan_hdr *hdr;
    strata_global_view *v = NULL;
    strata_args **a = NULL;
    int *chips = NULL;
    size_t n = 0;
    size_t ti = 1;
    strata_err err;

    (void)user;
    hdr = node_plan(args, &n);
    if (!hdr)
        return STRATA_EINVAL;
    err = strata_orch_get_global_domain(o, strata_args_scalar(args, 0), &v);
    if (err)
        return err;
    a = base_calloc(n, sizeof(*a));
    chips = base_calloc(n, sizeof(*chips));
    if (!a || !chips)
        err = base_fail(STRATA_ENOMEM, "halo node task: out of memory");
    for (size_t k = 0; k < n && !err; k++) {
        uint64_t pair = strata_args_scalar(args, 4 + k);
        uint32_t r = (uint32_t)pair;
        strata_chip_domain_ctx ctx;

        chips[k] = (int)(uint32_t)(pair >> 32);
        err = halo_member_chip_check(o, r, chips[k]);
        if (!err)
            err = strata_global_view_context(v, chips[k], &ctx);
        if (!err && (r >= hdr->world || ctx.domain_rank != r ||
                     ctx.domain_size != hdr->world))
            err = bad_task("the domain and the plan disagree on its rank", k);
        if (!err)
            err = strata_args_create(&a[k]);
        if (!err)
            err = member_args(args, hdr, &ctx, r, &ti, a[k]);
    }
    if (!err && ti != strata_args_num_tensors(args))
        err = bad_task("tensors left over", n);
    /* The ranks wait on each other: one group here, and the L4 launched
     * every node's task as one group. */
    if (!err)
        err = strata_orch_submit_next_level_group(
            o, halo_kernel(strata_args_scalar(args, 1) != 0),
            (const strata_args *const *)a, chips, n);
    for (size_t k = 0; a && k < n; k++)
        strata_args_destroy(a[k]);
    base_free(a);
    base_free(chips);
    return err;
}
