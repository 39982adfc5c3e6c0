/* Halo execution as tasks: the public API. strata_halo_create builds the
 * per-rank plans once; every forward or VJP call allocates a fresh domain
 * sized from them (local here; global in halo_exec_global.c), submits one
 * kernel per rank as a group, waits for it, releases the domain and
 * records the trace. */
#include "base/alloc.h"
#include "base/err.h"
#include "halo_exec_int.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* The halo kernels and the node callable of global handles, registered
 * when the library loads so that chips and forked nodes, which fork at
 * strata_worker_init, inherit them, and strata-node's sessions have them
 * without a module. */
static strata_callable forward_kernel;
static strata_callable vjp_kernel;
static strata_callable node_callable;
static strata_callable pages_kernel;
static strata_callable inplace_kernel;
static strata_err kernels_err = STRATA_ESTATE;

__attribute__((constructor)) static void register_kernels(void)
{
    kernels_err = strata_register_kernel(HALO_KERNEL_FORWARD,
                                         halo_kernel_forward, &forward_kernel);
    if (!kernels_err)
        kernels_err = strata_register_kernel(HALO_KERNEL_VJP, halo_kernel_vjp,
                                             &vjp_kernel);
    if (!kernels_err)
        kernels_err = strata_register_orch(HALO_NODE_CALLABLE, halo_node_orch,
                                           &node_callable);
    if (!kernels_err)
        kernels_err = strata_register_kernel(
            HALO_KERNEL_PAGES, halo_kernel_forward_pages, &pages_kernel);
    if (!kernels_err)
        kernels_err = strata_register_kernel(
            HALO_KERNEL_INPLACE, halo_kernel_inplace, &inplace_kernel);
}

strata_callable halo_kernel(bool vjp)
{
    return vjp ? vjp_kernel : forward_kernel;
}

strata_callable halo_node_callable(void)
{
    return node_callable;
}

strata_callable halo_pages_kernel(void)
{
    return pages_kernel;
}

strata_callable halo_inplace_kernel(void)
{
    return inplace_kernel;
}

/* ---- per-edge kernels ---- */

static struct halo_edge_entry edges[HALO_EDGE_MAX];
static size_t num_edges;
static pthread_mutex_t edges_lock = PTHREAD_MUTEX_INITIALIZER;

const struct halo_edge_entry *halo_edge_find(const char *name)
{
    size_t n = __atomic_load_n(&num_edges, __ATOMIC_ACQUIRE);

    for (size_t i = 0; i < n; i++)
        if (strcmp(edges[i].name, name) == 0)
            return &edges[i];
    return NULL;
}

strata_err strata_halo_register_edge(const char *name,
                                     strata_halo_edge_fn forward,
                                     strata_halo_edge_fn vjp)
{
    const struct halo_edge_entry *old;
    strata_err err = STRATA_OK;

    if (!name || !forward)
        return base_fail_null("strata_halo_register_edge",
                              !name ? "name" : "forward");
    if (!*name || strlen(name) >= HALO_EDGE_NAME_MAX)
        return base_fail(STRATA_EINVAL,
                         "strata_halo_register_edge: name must be 1..%d bytes",
                         HALO_EDGE_NAME_MAX - 1);
    pthread_mutex_lock(&edges_lock);
    old = halo_edge_find(name);
    if (old && (old->forward != forward || old->vjp != vjp)) {
        err = base_fail(STRATA_EEXIST,
                        "edge kernel '%s' is already registered with other "
                        "functions",
                        name);
    } else if (!old && num_edges == HALO_EDGE_MAX) {
        err = base_fail(STRATA_ENOMEM, "more than %d edge kernels",
                        HALO_EDGE_MAX);
    } else if (!old) {
        struct halo_edge_entry *e = &edges[num_edges];

        snprintf(e->name, sizeof(e->name), "%s", name);
        e->forward = forward;
        e->vjp = vjp;
        __atomic_store_n(&num_edges, num_edges + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&edges_lock);
    return err;
}

/* ---- handles ---- */

void strata_halo_spec_init(strata_halo_spec *spec)
{
    if (!spec)
        return;
    memset(spec, 0, sizeof(*spec));
    spec->features = 1;
    spec->dtype = STRATA_F32;
    spec->reducer = STRATA_HALO_SUM;
    spec->schedule = STRATA_HALO_OVERLAPPED;
}

static strata_err check_chips(const strata_worker *w, const strata_halo_spec *s)
{
    if (!s->chips || s->num_chips == 0)
        return base_fail(STRATA_EINVAL, "halo spec: no chips");
    /* Distinct chips of w: a count past w's is refused before the array
     * is read, so it cannot overrun it. */
    if (s->num_chips > strata_worker_num_chips(w))
        return base_fail(STRATA_EINVAL,
                         "halo spec: num_chips %zu is more than the worker's "
                         "%zu chips",
                         s->num_chips, strata_worker_num_chips(w));
    for (size_t i = 0; i < s->num_chips; i++) {
        if (s->chips[i] < 0)
            return base_fail(STRATA_EINVAL, "halo spec: chips[%zu] = %d", i,
                             s->chips[i]);
        for (size_t j = 0; j < i; j++)
            if (s->chips[j] == s->chips[i])
                return base_fail(STRATA_EINVAL,
                                 "halo spec: chip %d listed twice",
                                 s->chips[i]);
    }
    return STRATA_OK;
}

static strata_err check_spec(const strata_worker *w, const strata_halo_spec *s)
{
    if ((s->csr == NULL) == (s->gfg_path == NULL))
        return base_fail(STRATA_EINVAL,
                         "halo spec: give exactly one of csr and gfg_path");
    if (s->gfg_path && (!*s->gfg_path || strlen(s->gfg_path) >= HALO_PATH_MAX))
        return base_fail(STRATA_EINVAL, "halo spec: gfg_path is empty or "
                                        "too long");
    if (s->features == 0)
        return base_fail(STRATA_EINVAL, "halo spec: features is 0");
    /* NaN would fail every comparison and pass as "the default". */
    if (isnan(s->timeout_s))
        return base_fail(STRATA_EINVAL, "halo spec: timeout_s is NaN");
    if (s->dtype != STRATA_F32 && s->dtype != STRATA_F64)
        return base_fail(STRATA_EINVAL,
                         "halo spec: dtype %d is not F32 or "
                         "F64",
                         (int)s->dtype);
    if (s->schedule != STRATA_HALO_OVERLAPPED &&
        s->schedule != STRATA_HALO_SERIALIZED &&
        s->schedule != STRATA_HALO_IN_PLACE)
        return base_fail(STRATA_EINVAL, "halo spec: unknown schedule %d",
                         (int)s->schedule);
    if (s->schedule == STRATA_HALO_IN_PLACE && (s->members || s->num_members))
        return base_fail(STRATA_EINVAL,
                         "halo spec: STRATA_HALO_IN_PLACE needs a local "
                         "handle (chips), not members");
    if (s->reducer == STRATA_HALO_EDGE) {
        if (!s->edge_kernel || !halo_edge_find(s->edge_kernel))
            return base_fail(STRATA_EINVAL,
                             "halo spec: edge kernel '%s' is not registered",
                             s->edge_kernel ? s->edge_kernel : "(null)");
    } else if (s->reducer != STRATA_HALO_SUM &&
               s->reducer != STRATA_HALO_MEAN) {
        return base_fail(STRATA_EINVAL, "halo spec: unknown reducer %d",
                         (int)s->reducer);
    }
    if ((s->chips || s->num_chips) && (s->members || s->num_members))
        return base_fail(STRATA_EINVAL,
                         "halo spec: give exactly one of chips and members");
    if (s->transport != STRATA_HALO_TRANSPORT_DEFAULT &&
        s->transport != STRATA_HALO_TRANSPORT_WINDOWS)
        return halo_mpi_check(w, s);
    if (s->members || s->num_members)
        return halo_global_check(w, s);
    return check_chips(w, s);
}

static strata_err check_sizes(strata_halo *h)
{
    size_t isz = strata_dtype_size(h->spec.dtype);

    if (h->spec.features > SIZE_MAX / isz)
        return base_fail(STRATA_EINVAL,
                         "halo spec: features %zu: a row overflows",
                         h->spec.features);
    h->row_bytes = h->spec.features * isz;
    if (h->num_rows > SIZE_MAX / h->row_bytes ||
        h->max_pack > (SIZE_MAX / 2) / h->row_bytes ||
        h->max_ghosts > (SIZE_MAX / 2) / h->row_bytes)
        return base_fail(STRATA_EINVAL, "halo spec: the field overflows");
    return STRATA_OK;
}

/* The exchange buffer of a local handle: per rank a region for its pack
 * rows (forward) or its ghost cotangents (VJP), whichever is larger.
 * Made at the handle's first call (from its orch fn) and kept until
 * destroy. */
static strata_err make_xchg(strata_worker *w, strata_halo *h)
{
    uint64_t rows = h->max_pack > h->max_ghosts ? h->max_pack : h->max_ghosts;
    size_t stride = ((size_t)rows * h->row_bytes + HALO_ALIGN - 1) /
                    HALO_ALIGN * HALO_ALIGN;

    if (stride == 0)
        stride = HALO_ALIGN;
    if (stride > SIZE_MAX / h->world)
        return base_fail(STRATA_EINVAL, "halo spec: the exchange overflows");
    h->xchg_stride = stride;
    return strata_worker_create_buffer(w, stride * h->world, &h->xchg);
}

static void halo_free(strata_halo *h)
{
    halo_global_free(h);
    halo_needs_free(h->needs);
    base_free(h->chips);
    base_free(h->trace_path);
    base_free(h->last);
    base_free(h);
}

strata_err strata_halo_create(strata_worker *w, const strata_halo_spec *spec,
                              strata_halo **out)
{
    const struct halo_plan_hdr *hdr;
    strata_halo_spec ranks;
    strata_halo *h;
    bool global;
    strata_err err;

    if (!w || !spec || !out)
        return base_fail_null("strata_halo_create", !w      ? "w"
                                                    : !spec ? "spec"
                                                            : "out");
    if (kernels_err)
        return base_fail(kernels_err, "halo kernels were not registered at "
                                      "load time");
    err = check_spec(w, spec);
    if (err)
        return err;
    global = spec->members != NULL;
    h = base_calloc(1, sizeof(*h));
    if (!h)
        return base_fail(STRATA_ENOMEM, "strata_halo_create: out of memory");
    h->w = w;
    h->world = (uint32_t)(global ? spec->num_members : spec->num_chips);
    h->spec = *spec;
    h->spec.csr = NULL;
    h->spec.gfg_path = NULL;
    h->spec.chips = NULL;
    h->spec.members = NULL;
    h->spec.trace_path = NULL;
    h->spec.edge_kernel = NULL;
    if (spec->reducer == STRATA_HALO_EDGE) {
        const struct halo_edge_entry *e = halo_edge_find(spec->edge_kernel);

        h->edge_has_vjp = e && e->vjp;
    } else {
        h->edge_has_vjp = true;
    }
    h->chips = base_calloc(h->world, sizeof(int));
    h->last = base_calloc(h->world, sizeof(*h->last));
    if (spec->trace_path)
        h->trace_path = base_strdup(spec->trace_path);
    if (!h->chips || !h->last || (spec->trace_path && !h->trace_path)) {
        err = base_fail(STRATA_ENOMEM, "strata_halo_create: out of memory");
        goto err_free;
    }
    if (global)
        err = halo_global_setup(h, spec);
    else
        memcpy(h->chips, spec->chips, spec->num_chips * sizeof(int));
    if (err)
        goto err_free;
    /* The plan builder partitions over num_chips ranks. */
    ranks = *spec;
    ranks.chips = h->chips;
    ranks.num_chips = h->world;
    err = halo_plan_build(w, &ranks, &h->plan, &h->max_pack, &h->max_ghosts);
    if (err)
        goto err_free;
    hdr = strata_buffer_data(h->plan);
    h->num_rows = hdr->num_rows;
    err = check_sizes(h);
    if (err)
        goto err_release;
    *out = h;
    return STRATA_OK;

err_release:
    if (h->xchg && strata_buffer_release(h->xchg) != STRATA_OK)
        base_errmsg_prefix("halo: exchange buffer kept");
    if (strata_buffer_release(h->plan) != STRATA_OK)
        base_errmsg_prefix("halo: plan buffer kept");
err_free:
    halo_free(h);
    return err;
}

strata_err strata_halo_destroy(strata_halo *h)
{
    strata_err err;

    if (!h)
        return STRATA_OK;
    err = strata_buffer_release(h->plan);
    if (err)
        return err;
    if (h->xchg) {
        /* The plan was free, so no run names the exchange buffer. */
        err = strata_buffer_release(h->xchg);
        if (err)
            return err;
    }
    halo_free(h);
    return STRATA_OK;
}

strata_err strata_halo_last_trace(const strata_halo *h, uint32_t rank,
                                  strata_halo_rank_trace *out)
{
    if (!h || !out)
        return base_fail_null("strata_halo_last_trace", !h ? "h" : "out");
    if (rank >= h->world)
        return base_fail(STRATA_EINVAL,
                         "strata_halo_last_trace: rank %u of %u ranks", rank,
                         h->world);
    if (!h->have_trace)
        return base_fail(STRATA_ESTATE, "no halo call has completed yet");
    *out = h->last[rank];
    return STRATA_OK;
}

/* ---- calls ---- */

strata_err halo_add_rows(strata_args *a, const strata_halo *h,
                         strata_buffer *buf, uint64_t b, uint64_t e,
                         strata_tag tag)
{
    const size_t shape[2] = {(size_t)(e - b), h->spec.features};

    return strata_args_add_tensor(a, buf, (size_t)b * h->row_bytes,
                                  h->spec.dtype, 2, shape, tag);
}

strata_err halo_add_plan(strata_args *a, const strata_halo *h)
{
    const struct halo_plan_hdr *hdr = strata_buffer_data(h->plan);
    const size_t shape[1] = {hdr->ro_size};

    return strata_args_add_tensor(a, h->plan, 0, STRATA_U8, 1, shape,
                                  STRATA_IN);
}

strata_err halo_add_stats(strata_args *a, const strata_halo *h, uint64_t r)
{
    const struct halo_plan_hdr *hdr = strata_buffer_data(h->plan);
    const size_t shape[1] = {HALO_STATS_STRIDE};

    return strata_args_add_tensor(a, h->plan,
                                  hdr->stats_off + r * HALO_STATS_STRIDE,
                                  STRATA_U8, 1, shape, STRATA_OUT);
}

static strata_err rank_args(const strata_halo *h, const strata_domain *d,
                            uint32_t r, strata_buffer *in, strata_buffer *out,
                            strata_args *a)
{
    const struct halo_rank_plan *rp =
        halo_plan_rank(strata_buffer_data(h->plan), r);
    strata_chip_domain_ctx ctx;
    strata_err err;

    err = strata_domain_context(d, h->chips[r], &ctx);
    if (!err)
        err = halo_add_plan(a, h);
    if (!err)
        err = halo_add_stats(a, h, r);
    if (!err && rp->owned_end > rp->owned_begin)
        err =
            halo_add_rows(a, h, in, rp->owned_begin, rp->owned_end, STRATA_IN);
    if (!err && rp->owned_end > rp->owned_begin)
        err = halo_add_rows(a, h, out, rp->owned_begin, rp->owned_end,
                            STRATA_OUT);
    if (!err)
        err = strata_args_add_scalar(a, ctx.device_ctx);
    if (!err)
        err = strata_args_add_scalar(a, halo_data_offset(h->world));
    if (!err && h->xchg) {
        size_t x_shape[1] = {h->xchg_stride};

        err = strata_args_add_tensor(a, h->xchg, r * h->xchg_stride, STRATA_U8,
                                     1, x_shape, STRATA_OUT);
    }
    if (!err)
        err = strata_args_add_scalar(a, r);
    if (!err && h->xchg)
        err = strata_args_add_scalar(a, h->xchg_stride);
    return err;
}

strata_err halo_submit_ranks(strata_orch *o, const strata_halo *h,
                             strata_callable fn, halo_rank_args_fn fill,
                             void *ctx)
{
    strata_args **a = base_calloc(h->world, sizeof(*a));
    strata_err err = a ? STRATA_OK : STRATA_ENOMEM;
    strata_err end;

    if (err)
        return base_fail(err, "halo: out of memory");
    for (uint32_t r = 0; r < h->world && !err; r++) {
        err = strata_args_create(&a[r]);
        if (!err)
            err = fill(h, r, a[r], ctx);
    }
    if (!err)
        err = strata_orch_scope_begin(o);
    if (!err) {
        err = strata_orch_submit_next_level_group(
            o, fn, (const strata_args *const *)a, h->chips, h->world);
        /* The scope must close even when the submit failed. */
        end = strata_orch_scope_end(o);
        if (!err)
            err = end;
    }
    for (uint32_t r = 0; r < h->world; r++)
        strata_args_destroy(a[r]);
    base_free(a);
    return err;
}

/* A local exchange call's fields and domain. */
struct local_call {
    const strata_domain *d;
    strata_buffer *in, *out;
};

static strata_err local_fill(const strata_halo *h, uint32_t r, strata_args *a,
                             void *ctx)
{
    const struct local_call *lc = ctx;

    return rank_args(h, lc->d, r, lc->in, lc->out, a);
}

static strata_err submit(strata_orch *o, strata_halo *h, const strata_domain *d,
                         bool vjp, strata_buffer *in, strata_buffer *out)
{
    struct local_call lc = {d, in, out};

    return halo_submit_ranks(o, h, vjp ? vjp_kernel : forward_kernel,
                             local_fill, &lc);
}

static strata_err check_call(strata_orch *o, strata_halo *h, strata_buffer *in,
                             strata_buffer *out, bool vjp)
{
    size_t need;

    const char *fn = vjp ? "strata_halo_vjp" : "strata_halo_forward";

    if (!o || !h || !in || !out)
        return base_fail_null(fn, !o    ? "orch"
                                  : !h  ? "h"
                                  : !in ? (vjp ? "grad_out" : "x")
                                        : (vjp ? "grad_x" : "out"));
    if (in == out)
        return base_fail(STRATA_EINVAL, "%s: %s: the same buffer", fn,
                         vjp ? "grad_out == grad_x" : "x == out");
    need = (size_t)h->num_rows * h->row_bytes;
    if (strata_buffer_size(in) < need || strata_buffer_size(out) < need)
        return base_fail(STRATA_EINVAL,
                         "halo: buffers of %zu and %zu bytes, the field "
                         "needs %zu",
                         strata_buffer_size(in), strata_buffer_size(out), need);
    if (vjp && !h->edge_has_vjp)
        return base_fail(STRATA_ENOTSUP, "halo: the edge kernel has no vjp");
    if (h->groups && strata_orch_worker(o) != h->w)
        return base_fail(STRATA_EINVAL,
                         "halo: a global handle runs only in orch fns of the "
                         "level-4 worker it was created on");
    return STRATA_OK;
}

/* One call over a fresh local domain of window bytes per chip. */
static strata_err local_run(strata_orch *o, strata_halo *h, bool vjp,
                            strata_buffer *in, strata_buffer *out,
                            size_t window)
{
    static uint64_t seq;
    char name[STRATA_DOMAIN_NAME_MAX];
    strata_domain_spec ds = {0};
    strata_domain *d = NULL;
    strata_err err;
    strata_err rel;

    snprintf(name, sizeof(name), "strata.halo.%s.%llu", vjp ? "vjp" : "fwd",
             (unsigned long long)__atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED));
    ds.name = name;
    ds.workers = h->chips;
    ds.num_workers = h->world;
    ds.window_size = window;
    err = strata_orch_allocate_domain(o, &ds, &d);
    if (err)
        return err;
    err = submit(o, h, d, vjp, in, out);
    rel = strata_domain_release(d);
    return err ? err : rel;
}

strata_err halo_busy_take(strata_halo *h)
{
    int idle = 0;

    if (!__atomic_compare_exchange_n(&h->busy, &idle, 1, false,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return base_fail(STRATA_EBUSY, "halo: another call on this handle "
                                       "is in progress");
    return STRATA_OK;
}

static strata_err call(strata_orch *o, strata_halo *h, strata_buffer *in,
                       strata_buffer *out, bool vjp)
{
    uint64_t rows;
    size_t window;
    strata_err err;

    err = check_call(o, h, in, out, vjp);
    if (!err)
        err = halo_busy_take(h);
    if (err)
        return err;
    /* A local handle's exchange buffer is made by its first call, not
     * at create: strata_halo_forward_pages never names it, and on a
     * random graph it is as large as a field. */
    if (h->spec.schedule == STRATA_HALO_IN_PLACE) {
        err = halo_inplace_run(o, h, vjp, in, out);
        goto done;
    }
    if (!h->groups && !h->xchg)
        err = make_xchg(h->w, h);
    if (err) {
        __atomic_store_n(&h->busy, 0, __ATOMIC_RELEASE);
        return err;
    }
    /* Flags, stamps, then the pack region (forward) or the ghost
     * cotangents (VJP); check_sizes bounded both. */
    rows = h->xchg ? 0 : vjp ? h->max_ghosts : h->max_pack;
    window = halo_data_offset(h->world) + (size_t)rows * h->row_bytes;
    if (h->groups &&
        (h->spec.transport == STRATA_HALO_TRANSPORT_MPI || halo_mpi_auto(h)))
        err = halo_mpi_run(o, h, vjp, in, out, window);
    else if (h->groups)
        err = halo_global_run(o, h, vjp, in, out, window);
    else
        err = local_run(o, h, vjp, in, out, window);
done:
    if (!err) {
        halo_trace_collect(strata_buffer_data(h->plan), h->chips, h->nodes,
                           h->last);
        h->have_trace = true;
        if (h->trace_path)
            err = halo_trace_write(h->trace_path, vjp,
                                   strata_buffer_data(h->plan), h->last);
    }
    __atomic_store_n(&h->busy, 0, __ATOMIC_RELEASE);
    return err;
}

strata_err strata_halo_forward(strata_orch *o, strata_halo *h, strata_buffer *x,
                               strata_buffer *out)
{
    return call(o, h, x, out, false);
}

strata_err strata_halo_vjp(strata_orch *o, strata_halo *h,
                           strata_buffer *grad_out, strata_buffer *grad_x)
{
    return call(o, h, grad_out, grad_x, true);
}
