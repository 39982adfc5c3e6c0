/*
 * The callables of the global domain tests. Built twice: as the module the
 * test daemons load (without libstrata: strata_* resolve from strata-node)
 * and into the test executables, whose forked L3 nodes need the same
 * callables. See gd_module.h.
 */
#include "gd_module.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define GD_MAX_CHIPS 32

static strata_callable k_fill, k_allreduce, k_read, k_sleep, k_wait;

static const strata_comm_context *context(strata_chip *chip,
                                          const strata_args *a)
{
    const strata_comm_context *cc =
        strata_chip_comm_context(chip, strata_args_scalar(a, 0));

    if (!cc)
        strata_errmsg_set("chip %d: no comm context for %#llx",
                          strata_chip_id(chip),
                          (unsigned long long)strata_args_scalar(a, 0));
    return cc;
}

static bool fits(const strata_comm_context *cc, uint64_t off, uint64_t n)
{
    return off <= cc->window_size && n <= cc->window_size - off;
}

static strata_err fill_kernel(strata_chip *chip, const strata_args *a)
{
    const strata_comm_context *cc = context(chip, a);
    uint64_t off = strata_args_scalar(a, 1);
    uint32_t n = (uint32_t)strata_args_scalar(a, 2);
    uint32_t seed = (uint32_t)strata_args_scalar(a, 3);
    uint32_t *p;

    if (!cc)
        return STRATA_ENOENT;
    if (!fits(cc, off, (uint64_t)n * 4) || off % 4) {
        strata_errmsg_set("gd.k.fill: [%llu, +%u words) outside the window",
                          (unsigned long long)off, n);
        return STRATA_EINVAL;
    }
    p = (uint32_t *)((char *)cc->window_base[cc->rank] + off);
    for (uint32_t i = 0; i < n; i++)
        p[i] = gd_value(seed, cc->rank, i);
    return STRATA_OK;
}

static strata_err allreduce_kernel(strata_chip *chip, const strata_args *a)
{
    const strata_comm_context *cc = context(chip, a);
    uint64_t data = strata_args_scalar(a, 1);
    uint32_t n = (uint32_t)strata_args_scalar(a, 2);
    uint64_t flag = strata_args_scalar(a, 3);
    uint32_t seed = (uint32_t)strata_args_scalar(a, 4);
    uint32_t target = (uint32_t)strata_args_scalar(a, 5);
    uint32_t *out = strata_args_tensor_data(a, 0);
    uint32_t *mine;
    strata_err e;

    if (!cc)
        return STRATA_ENOENT;
    if (!out || strata_args_tensor_nbytes(a, 0) != (size_t)n * 4 ||
        !fits(cc, data, (uint64_t)n * 4) || !fits(cc, flag, 4) || flag % 4 ||
        data % 4) {
        strata_errmsg_set("gd.k.allreduce: bad layout");
        return STRATA_EINVAL;
    }
    if (target == 0)
        target = cc->rank_count;
    mine = (uint32_t *)((char *)cc->window_base[cc->rank] + data);
    for (uint32_t i = 0; i < n; i++)
        mine[i] = gd_value(seed, cc->rank, i);
    for (uint32_t r = 0; r < cc->rank_count; r++)
        strata_signal_add(
            (volatile uint32_t *)((char *)cc->window_base[r] + flag), 1);
    e = strata_signal_wait(
        (volatile uint32_t *)((char *)cc->window_base[cc->rank] + flag), target,
        GD_WAIT_S);
    if (e != STRATA_OK) {
        strata_errmsg_set("gd.k.allreduce: rank %u of %u (chip %d) waited "
                          "in vain for its flag to reach %u",
                          cc->rank, cc->rank_count, strata_chip_id(chip),
                          target);
        return e;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t s = 0;

        for (uint32_t r = 0; r < cc->rank_count; r++)
            s += ((const uint32_t *)((const char *)cc->window_base[r] +
                                     data))[i];
        out[i] = s;
    }
    return STRATA_OK;
}

static strata_err read_kernel(strata_chip *chip, const strata_args *a)
{
    const strata_comm_context *cc = context(chip, a);
    uint32_t rank = (uint32_t)strata_args_scalar(a, 1);
    uint64_t off = strata_args_scalar(a, 2);
    size_t n = strata_args_tensor_nbytes(a, 0);

    if (!cc)
        return STRATA_ENOENT;
    if (rank == GD_OWN)
        rank = cc->rank;
    if (rank >= cc->rank_count || !fits(cc, off, n)) {
        strata_errmsg_set("gd.k.read: rank %u or [%llu, +%zu) out of range",
                          rank, (unsigned long long)off, n);
        return STRATA_EINVAL;
    }
    memcpy(strata_args_tensor_data(a, 0),
           (const char *)cc->window_base[rank] + off, n);
    return STRATA_OK;
}

static strata_err sleep_kernel(strata_chip *chip, const strata_args *a)
{
    uint64_t ms = strata_args_scalar(a, 0);
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};

    (void)chip;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
    return STRATA_OK;
}

/* Writes text to path (through path.tmp, renamed: a reader sees all of
 * it or nothing). */
static void put_file(const char *path, const char *text)
{
    char tmp[GD_LOST_PATH_MAX + 8];
    FILE *f;

    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    f = fopen(tmp, "w");
    if (!f)
        return;
    fputs(text, f);
    if (fclose(f) == 0)
        rename(tmp, path);
}

static strata_err wait_kernel(strata_chip *chip, const strata_args *a)
{
    const strata_comm_context *cc = context(chip, a);
    uint64_t flag = strata_args_scalar(a, 1);
    uint64_t tag = strata_args_scalar(a, 2);
    char path[GD_LOST_PATH_MAX], text[512];
    strata_err e;

    if (!cc)
        return STRATA_ENOENT;
    if (!fits(cc, flag, 4) || flag % 4) {
        strata_errmsg_set("gd.k.wait: bad flag offset");
        return STRATA_EINVAL;
    }
    gd_lost_path(path, sizeof(path), tag, cc->rank, "pid");
    snprintf(text, sizeof(text), "%d\n", (int)getpid());
    put_file(path, text);
    e = strata_signal_wait(
        (volatile uint32_t *)((char *)cc->window_base[cc->rank] + flag), 1,
        -1.0);
    gd_lost_path(path, sizeof(path), tag, cc->rank, "out");
    snprintf(text, sizeof(text), "%d %s\n", (int)e, e ? strata_errmsg() : "");
    put_file(path, text);
    return e;
}

/* ---- node side ------------------------------------------------------- */

/* The chip list at scalar first: a count, then the ids. */
static strata_err chips_at(const strata_args *args, size_t first, int *ids,
                           size_t *n)
{
    size_t k = (size_t)strata_args_scalar(args, first);

    if (k == 0 || k > GD_MAX_CHIPS ||
        strata_args_num_scalars(args) < first + 1 + k) {
        strata_errmsg_set("a chip list of %zu chips", k);
        return STRATA_EINVAL;
    }
    for (size_t i = 0; i < k; i++)
        ids[i] = (int)strata_args_scalar(args, first + 1 + i);
    *n = k;
    return STRATA_OK;
}

static strata_err query_orch(strata_orch *o, const strata_args *args,
                             void *user)
{
    struct gd_query *q = strata_args_tensor_data(args, 0);
    int ids[GD_MAX_CHIPS];
    strata_global_view *v = NULL;
    strata_err get;
    size_t n;

    (void)user;
    if (chips_at(args, 1, ids, &n) != STRATA_OK)
        return STRATA_EINVAL;
    if (!q || strata_args_tensor_nbytes(args, 0) != n * sizeof(*q)) {
        strata_errmsg_set("gd.o.query: t0 must hold %zu records", n);
        return STRATA_EINVAL;
    }
    memset(q, 0, n * sizeof(*q));
    get = strata_orch_get_global_domain(o, strata_args_scalar(args, 0), &v);
    for (size_t i = 0; i < n; i++) {
        strata_chip_domain_ctx ctx;

        q[i].get_err = (uint32_t)get;
        if (get != STRATA_OK)
            continue;
        q[i].ctx_err = (uint32_t)strata_global_view_context(v, ids[i], &ctx);
        if (q[i].ctx_err != STRATA_OK)
            continue;
        q[i].rank = ctx.domain_rank;
        q[i].size = ctx.domain_size;
        q[i].buffers = (uint32_t)ctx.num_buffers;
        q[i].ctx_found = ctx.device_ctx != 0 && ctx.local_window_base != 0;
    }
    return STRATA_OK;
}

/* One args list per chip: the member's device_ctx, then scalars
 * extra[0..ne), then (if t) bytes [k * slice, (k + 1) * slice) of the
 * node's tensor 0 as an OUT tensor of dtype. */
struct per_chip {
    const uint64_t *extra;
    size_t ne;
    bool tensor;
    size_t slice; /* bytes */
    strata_dtype dtype;
};

static strata_err build(const strata_args *args,
                        const strata_chip_domain_ctx *ctx, size_t k,
                        const struct per_chip *pc, strata_args *a)
{
    strata_err e = strata_args_add_scalar(a, ctx->device_ctx);

    for (size_t i = 0; e == STRATA_OK && i < pc->ne; i++)
        e = strata_args_add_scalar(a, pc->extra[i]);
    if (e == STRATA_OK && pc->tensor) {
        size_t shape[1] = {pc->slice / strata_dtype_size(pc->dtype)};

        if (strata_args_num_tensors(args) < 1) {
            strata_errmsg_set("the node task needs its output tensor");
            return STRATA_EINVAL;
        }
        e = strata_args_add_tensor(a, strata_args_tensor_buffer(args, 0),
                                   strata_args_tensor_offset(args, 0) +
                                       k * pc->slice,
                                   pc->dtype, 1, shape, STRATA_OUT);
    }
    return e;
}

/* Submits kernel c to every listed chip of domain s0's view, as a group
 * when group is set (members that wait on each other). */
static strata_err submit_all(strata_orch *o, const strata_args *args,
                             size_t chips_at_scalar, strata_callable c,
                             const struct per_chip *pc, bool group)
{
    strata_args *a[GD_MAX_CHIPS] = {0};
    int ids[GD_MAX_CHIPS];
    strata_global_view *v = NULL;
    strata_err e;
    size_t n = 0;

    e = chips_at(args, chips_at_scalar, ids, &n);
    if (e == STRATA_OK)
        e = strata_orch_get_global_domain(o, strata_args_scalar(args, 0), &v);
    for (size_t k = 0; e == STRATA_OK && k < n; k++) {
        strata_chip_domain_ctx ctx;

        e = strata_global_view_context(v, ids[k], &ctx);
        if (e == STRATA_OK)
            e = strata_args_create(&a[k]);
        if (e == STRATA_OK)
            e = build(args, &ctx, k, pc, a[k]);
    }
    if (e == STRATA_OK && group)
        e = strata_orch_submit_next_level_group(
            o, c, (const strata_args *const *)a, ids, n);
    for (size_t k = 0; e == STRATA_OK && !group && k < n; k++)
        e = strata_orch_submit_next_level(o, c, a[k], ids[k]);
    for (size_t k = 0; k < n; k++)
        strata_args_destroy(a[k]);
    return e;
}

static strata_err fill_orch(strata_orch *o, const strata_args *args, void *user)
{
    uint64_t extra[3] = {strata_args_scalar(args, 1),
                         strata_args_scalar(args, 2),
                         strata_args_scalar(args, 3)};
    struct per_chip pc = {extra, 3, false, 0, STRATA_U8};

    (void)user;
    return submit_all(o, args, 4, k_fill, &pc, false);
}

static strata_err allreduce_orch(strata_orch *o, const strata_args *args,
                                 void *user)
{
    uint64_t extra[5];
    struct per_chip pc = {extra, 5, true, 0, STRATA_U32};

    (void)user;
    for (size_t i = 0; i < 5; i++)
        extra[i] = strata_args_scalar(args, 1 + i);
    pc.slice = (size_t)extra[1] * 4;
    return submit_all(o, args, 6, k_allreduce, &pc, true);
}

static strata_err read_orch(strata_orch *o, const strata_args *args, void *user)
{
    uint64_t extra[2] = {strata_args_scalar(args, 1),
                         strata_args_scalar(args, 2)};
    struct per_chip pc = {extra, 2, true, (size_t)strata_args_scalar(args, 3),
                          STRATA_U8};

    (void)user;
    if (pc.slice == 0) {
        strata_errmsg_set("gd.o.read: 0 bytes");
        return STRATA_EINVAL;
    }
    return submit_all(o, args, 4, k_read, &pc, false);
}

static strata_err sleep_orch(strata_orch *o, const strata_args *args,
                             void *user)
{
    int ids[GD_MAX_CHIPS];
    strata_args *a = NULL;
    size_t n = 0;
    strata_err e;

    (void)user;
    e = chips_at(args, 1, ids, &n);
    if (e == STRATA_OK)
        e = strata_args_create(&a);
    if (e == STRATA_OK)
        e = strata_args_add_scalar(a, strata_args_scalar(args, 0));
    for (size_t k = 0; e == STRATA_OK && k < n; k++)
        e = strata_orch_submit_next_level(o, k_sleep, a, ids[k]);
    strata_args_destroy(a);
    return e;
}

static strata_err wait_orch(strata_orch *o, const strata_args *args, void *user)
{
    uint64_t extra[2] = {strata_args_scalar(args, 1),
                         strata_args_scalar(args, 2)};
    struct per_chip pc = {extra, 2, false, 0, STRATA_U8};

    (void)user;
    return submit_all(o, args, 3, k_wait, &pc, false);
}

strata_err strata_module_init(void)
{
    strata_callable c;
    strata_err e = strata_register_kernel(GD_K_FILL, fill_kernel, &k_fill);

    if (e == STRATA_OK)
        e = strata_register_kernel(GD_K_ALLREDUCE, allreduce_kernel,
                                   &k_allreduce);
    if (e == STRATA_OK)
        e = strata_register_kernel(GD_K_READ, read_kernel, &k_read);
    if (e == STRATA_OK)
        e = strata_register_kernel("gd.k.sleep", sleep_kernel, &k_sleep);
    if (e == STRATA_OK)
        e = strata_register_kernel(GD_K_WAIT, wait_kernel, &k_wait);
    if (e == STRATA_OK)
        e = strata_register_orch(GD_O_WAIT, wait_orch, &c);
    if (e == STRATA_OK)
        e = strata_register_orch(GD_O_QUERY, query_orch, &c);
    if (e == STRATA_OK)
        e = strata_register_orch(GD_O_FILL, fill_orch, &c);
    if (e == STRATA_OK)
        e = strata_register_orch(GD_O_ALLREDUCE, allreduce_orch, &c);
    if (e == STRATA_OK)
        e = strata_register_orch(GD_O_READ, read_orch, &c);
    if (e == STRATA_OK)
        e = strata_register_orch(GD_O_SLEEP, sleep_orch, &c);
    return e;
}
