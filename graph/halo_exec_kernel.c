/* The chip side of halo execution: one kernel per rank, run as a group.
 * A rank touches only its owned rows of the fields it is given; every
 * other row it needs is read from a peer's window after the peer's
 * signal. */
#include "base/alloc.h"
#include "base/clock.h"
#include "base/err.h"
#include "halo_kernel.h"
#include "rowsum.h"
#include "trace/trace.h"

#include <stdio.h>
#include <string.h>

static strata_err ctx_open(strata_chip *chip, const strata_args *args,
                           struct rank_ctx *c)
{
    size_t nt = strata_args_num_tensors(args);
    /* A fourth scalar: the exchange buffer's region stride, its tensor
     * last; a fifth (mpi transport): the tensor is the node's mailbox of
     * every rank's window (halo_mpi_kernel_windows). */
    bool mbox = strata_args_num_scalars(args) > 4;
    bool xchg = strata_args_num_scalars(args) > 3 && !mbox;

    memset(c, 0, sizeof(*c));
    if (xchg || mbox) {
        if (nt != 3 && nt != 5)
            return base_fail(STRATA_EINVAL, "halo kernel: %zu tensors", nt);
        nt--;
    }
    if (nt != 2 && nt != 4)
        return base_fail(STRATA_EINVAL, "halo kernel: %zu tensors", nt);
    c->plan = strata_args_tensor_data(args, 0);
    c->hdr = (const struct halo_plan_hdr *)c->plan;
    if (c->hdr->magic != HALO_PLAN_MAGIC ||
        c->hdr->version != HALO_PLAN_VERSION)
        return base_fail(STRATA_EINVAL, "halo kernel: not a halo plan");
    c->stats = strata_args_tensor_data(args, 1);
    c->data_off = (size_t)strata_args_scalar(args, 1);
    c->rank = (uint32_t)strata_args_scalar(args, 2);
    if (mbox && halo_mpi_kernel_windows(args, nt, c) != STRATA_OK)
        return STRATA_EINVAL;
    if (!mbox)
        c->cc = strata_chip_comm_context(chip, strata_args_scalar(args, 0));
    if (!mbox && (!c->cc || c->cc->rank != c->rank ||
                  c->cc->rank_count != c->hdr->world))
        return base_fail(STRATA_EINVAL,
                         "halo kernel: chip %d is not rank %u of a %u-rank "
                         "halo domain",
                         strata_chip_id(chip), c->rank, c->hdr->world);
    if (xchg) {
        c->xchg_stride = (size_t)strata_args_scalar(args, 3);
        c->xchg = (char *)strata_args_tensor_data(args, nt) -
                  (size_t)c->rank * c->xchg_stride;
    }
    c->rp = halo_k_rank_plan(c, c->rank);
    c->dtype = (strata_dtype)c->hdr->dtype;
    c->features = c->hdr->features;
    c->rb = c->features * strata_dtype_size(c->dtype);
    c->rows = c->rp->owned_end - c->rp->owned_begin;
    if ((c->rows > 0) != (nt == 4))
        return base_fail(STRATA_EINVAL,
                         "halo kernel: rank %u owns %llu rows "
                         "but has %zu tensors",
                         c->rank, (unsigned long long)c->rows, nt);
    if (nt == 4) {
        c->in = strata_args_tensor_data(args, 2);
        c->out = strata_args_tensor_data(args, 3);
    }
    halo_k_count_rounds(c);
    if (c->hdr->reducer == STRATA_HALO_EDGE) {
        c->edge = halo_edge_find(c->hdr->edge_name);
        if (!c->edge)
            return base_fail(STRATA_ENOENT,
                             "halo kernel: edge kernel '%s' is not "
                             "registered in chip %d",
                             c->hdr->edge_name, strata_chip_id(chip));
    }
    return STRATA_OK;
}

/* The owned rows: from the plan, or paged from the store. */
static strata_err load_rows(struct rank_ctx *c)
{
    strata_gfg *g = NULL;
    strata_err err;

    if (c->hdr->gfg_path_off == 0) {
        c->row_ptr = (const int64_t *)(c->plan + c->rp->row_ptr_off);
        c->cols = (const int64_t *)(c->plan + c->rp->col_off);
        return STRATA_OK;
    }
    if (c->rows == 0)
        return STRATA_OK;
    c->paged_rows = base_malloc((c->rows + 1) * sizeof(int64_t));
    c->paged_cols = base_malloc(c->rp->nnz * sizeof(int64_t));
    if (!c->paged_rows || !c->paged_cols)
        return base_fail(STRATA_ENOMEM,
                         "halo kernel: rank %u: no memory "
                         "for %llu edges",
                         c->rank, (unsigned long long)c->rp->nnz);
    err = halo_k_open_store(c, &g);
    if (err)
        return err;
    err =
        strata_gfg_read_rows(g, c->rp->owned_begin, c->rp->owned_end,
                             c->paged_rows, c->paged_cols, (size_t)c->rp->nnz);
    if (!err && (uint64_t)c->paged_rows[c->rows] != c->rp->nnz)
        err = base_fail(STRATA_EINVAL,
                        "halo kernel: rank %u: the store changed since the "
                        "plan was made",
                        c->rank);
    strata_gfg_close(g);
    c->row_ptr = c->paged_rows;
    c->cols = c->paged_cols;
    return err;
}

strata_err halo_k_ghost_index(const struct rank_ctx *c, int64_t id,
                              uint64_t *out)
{
    const int64_t *g = (const int64_t *)(c->plan + c->rp->ghost_off);
    uint64_t lo = 0;
    uint64_t hi = c->rp->num_ghosts;

    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;

        if (g[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == c->rp->num_ghosts || g[lo] != id)
        return base_fail(STRATA_EINVAL,
                         "halo kernel: rank %u: source %lld is neither "
                         "owned nor a ghost",
                         c->rank, (long long)id);
    *out = lo;
    return STRATA_OK;
}

/* Local index of every entry; rows ordered interior first; boundary rows
 * also by the round that brings their last ghost. */
static strata_err translate(struct rank_ctx *c)
{
    uint64_t b = c->rp->owned_begin;
    uint64_t e = c->rp->owned_end;
    uint64_t nb = 0;
    strata_err err;

    c->loc = base_malloc((c->rp->nnz + 1) * sizeof(uint64_t));
    c->order = base_malloc(halo_k_order_len(c) * sizeof(uint64_t));
    c->ghost_row = base_malloc((c->rp->num_ghosts + 1) * sizeof(char *));
    if (!c->loc || !c->order || !c->ghost_row)
        return base_fail(STRATA_ENOMEM, "halo kernel: rank %u: out of memory",
                         c->rank);
    for (uint64_t i = 0; i < c->rows; i++) {
        bool boundary = false;

        for (int64_t k = c->row_ptr[i]; k < c->row_ptr[i + 1]; k++) {
            int64_t j = c->cols[k];

            if ((uint64_t)j >= b && (uint64_t)j < e) {
                c->loc[k] = (uint64_t)j - b;
                continue;
            }
            err = halo_k_ghost_index(c, j, &c->loc[k]);
            if (err)
                return err;
            c->loc[k] += c->rows;
            boundary = true;
        }
        if (boundary)
            c->order[c->rows - 1 - nb++] = i;
        else
            c->order[c->num_interior++] = i;
    }
    return halo_k_group_rounds(c);
}

/* ok: the index arrays are complete and stay cached; else they go. */
static void ctx_close(struct rank_ctx *c, bool ok)
{
    halo_k_cache_release(c, ok);
    base_free((void *)c->ghost_row);
}

/* 1/deg for a mean row of deg > 0 sources, else 1. */
static double row_weight(const struct rank_ctx *c, int64_t lo, int64_t hi)
{
    if (c->hdr->reducer == STRATA_HALO_MEAN && hi > lo)
        return 1.0 / (double)(hi - lo);
    return 1.0;
}

/* ---- forward ---- */

void halo_k_forward_row(const struct rank_ctx *c, uint64_t i,
                        const int64_t *cols, const uint64_t *loc, int64_t lo,
                        int64_t hi)
{
    char *acc = c->out + i * c->rb;
    double w = row_weight(c, lo, hi);

    if (c->edge) {
        memset(acc, 0, c->rb);
        for (int64_t k = lo; k < hi; k++)
            c->edge->forward((int64_t)(c->rp->owned_begin + i), cols[k],
                             c->dtype, c->features, halo_k_source(c, loc[k]),
                             acc);
        if (w != 1.0)
            halo_k_row_scale(c, acc, w);
        return;
    }
    /* Source rows in batches; the last batch scales. */
    for (bool fresh = true; fresh || lo < hi; fresh = false) {
        const void *src[HALO_K_SRC_BATCH];
        struct halo_rows rs = {src, 0};

        /* Every source of the batch is asked for before the first is
         * added: its cache misses overlap. */
        for (; lo < hi && rs.n < HALO_K_SRC_BATCH; lo++) {
            const char *p = halo_k_source(c, loc[lo]);

            __builtin_prefetch(p);
            __builtin_prefetch(p + c->rb - 1);
            src[rs.n++] = p;
        }
        halo_rowsum(c->dtype, c->features, acc, &rs, fresh, lo == hi ? w : 1.0);
    }
}

/* Row i of the output, from the rank's own index arrays. */
static void forward_row(const struct rank_ctx *c, uint64_t i)
{
    halo_k_forward_row(c, i, c->cols, c->loc, c->row_ptr[i], c->row_ptr[i + 1]);
}

/* The interior rows (every source owned), in one vectorised pass unless a
 * per-edge kernel runs. */
static void forward_interior(const struct rank_ctx *c)
{
    struct halo_csr_rows cr = {.rows = c->order,
                               .count = c->num_interior,
                               .row_ptr = c->row_ptr,
                               .idx = c->loc,
                               .base = c->in,
                               .stride = c->rb,
                               .out = c->out,
                               .mean = c->hdr->reducer == STRATA_HALO_MEAN};

    if (!c->edge) {
        halo_rowsum_csr(c->dtype, c->features, &cr);
        return;
    }
    for (uint64_t i = 0; i < c->num_interior; i++)
        forward_row(c, c->order[i]);
}

/* The boundary rows of rounds [t0, t1). */
static void forward_rounds(const struct rank_ctx *c, uint64_t t0, uint64_t t1)
{
    int64_t start = (int64_t)base_now_ns();
    uint64_t j0 = t0 ? c->round_end[t0 - 1] : 0, j1 = c->round_end[t1 - 1];

    if (!c->edge && c->num_segs > 0) {
        /* The interior rows' loop, sources in own rows or peers' windows. */
        struct halo_csr_rows cr = {.rows = c->round_rows + j0,
                                   .count = j1 - j0,
                                   .row_ptr = c->row_ptr,
                                   .idx = c->loc,
                                   .segs = c->segs,
                                   .num_segs = c->num_segs,
                                   .stride = c->rb,
                                   .out = c->out,
                                   .mean = c->hdr->reducer == STRATA_HALO_MEAN};

        halo_rowsum_csr(c->dtype, c->features, &cr);
    } else {
        for (uint64_t j = j0; j < j1; j++)
            forward_row(c, c->round_rows[j]);
    }
    for (uint64_t j = j0; j < j1; j++) {
        uint64_t i = c->round_rows[j];

        c->stats->boundary_edges +=
            (uint64_t)(c->row_ptr[i + 1] - c->row_ptr[i]);
    }
    c->stats->boundary_ns += (int64_t)base_now_ns() - start;
}

/* Serialized: every row out (one signal per peer for all its chunks:
 * nothing is computed before every ghost is in, so chunks would only add
 * signals), every ghost in, then all rows. */
static strata_err forward_serialized(struct rank_ctx *c)
{
    strata_err err;

    halo_k_pack(c);
    halo_k_signal_all(c, true);
    err = halo_k_wait_ghosts(c);
    if (err)
        return err;
    halo_k_exchange_done(c);
    c->stats->compute_start_ns = (int64_t)base_now_ns();
    forward_interior(c);
    if (c->num_rounds > 0)
        forward_rounds(c, 0, c->num_rounds);
    return STRATA_OK;
}

/* Overlapped: with interior rows to compute, or at most one round to
 * receive, every chunk goes out first (peers wait on nothing of this
 * rank while it computes). Otherwise packing and reading take turns,
 * round by round: the next chunk out (before the last round, all that
 * is left), this round's chunks in, the rows they complete; a peer reads
 * a chunk while this rank packs the next and both find it in cache. A
 * rank packs chunk t + 1 before it waits for round t, so every wait is
 * for a chunk its peer packs without waiting for round t or later: no
 * cycle. */
static strata_err forward_overlapped(struct rank_ctx *c)
{
    if (c->num_interior > 0 || c->num_rounds <= 1)
        halo_k_pack_rest(c);
    else if (c->send_rounds > 0)
        halo_k_pack_round(c);
    c->stats->compute_start_ns = (int64_t)base_now_ns();
    forward_interior(c);
    for (uint64_t t = 0; t < c->num_rounds; t++) {
        strata_err err;

        if (t + 1 == c->num_rounds)
            halo_k_pack_rest(c);
        else if (c->packed < c->send_rounds)
            halo_k_pack_round(c);
        err = halo_k_wait_round(c, t);
        if (err)
            return err;
        if (t + 1 == c->num_rounds)
            halo_k_exchange_done(c);
        forward_rounds(c, t, t + 1);
    }
    if (c->num_rounds == 0)
        halo_k_exchange_done(c);
    return STRATA_OK;
}

static strata_err forward_run(struct rank_ctx *c)
{
    strata_err err;

    c->stats->exchange_start_ns = (int64_t)base_now_ns();
    halo_k_point_ghosts(c);
    err = c->hdr->schedule == STRATA_HALO_OVERLAPPED ? forward_overlapped(c)
                                                     : forward_serialized(c);
    c->stats->compute_end_ns = (int64_t)base_now_ns();
    return err;
}

/* ---- VJP ---- */

/* The built-in reducers' scatter of rows [row0, row0 + count) (rows
 * NULL) or rows[0 .. count) into the ghost slots or the owned rows. */
static void vjp_scatter(const struct rank_ctx *c, const uint64_t *rows,
                        uint64_t row0, size_t count, const int64_t *row_ptr,
                        const uint64_t *loc, const char *g, bool ghosts)
{
    /* Ghost slots lie in this rank's window, owned rows in out. */
    const struct halo_scatter_csr cs = {
        .rows = rows,
        .row0 = row0,
        .count = count,
        .row_ptr = row_ptr,
        .loc = loc,
        .first = ghosts ? c->rows : 0,
        .end = ghosts ? UINT64_MAX : c->rows,
        .base = ghosts ? halo_k_window_data(c, c->rank) : c->out,
        .stride = c->rb,
        .g = g,
        .mean = c->hdr->reducer == STRATA_HALO_MEAN,
    };

    halo_rowaxpy_csr(c->dtype, c->features, &cs);
}

void halo_k_vjp_row(const struct rank_ctx *c, uint64_t i, const int64_t *cols,
                    const uint64_t *loc, int64_t lo, int64_t hi, bool ghosts)
{
    const char *g = c->in + i * c->rb;

    if (!c->edge) {
        const int64_t span[2] = {lo, hi};

        vjp_scatter(c, NULL, 0, 1, span, loc, g, ghosts);
        return;
    }
    for (int64_t k = lo; k < hi; k++) {
        uint64_t l = loc[k];
        char *acc;

        if ((l >= c->rows) != ghosts)
            continue;
        acc = ghosts ? halo_k_window_data(c, c->rank) + (l - c->rows) * c->rb
                     : c->out + l * c->rb;
        c->edge->vjp((int64_t)(c->rp->owned_begin + i), cols[k], c->dtype,
                     c->features, g, acc);
    }
}

/* Rows [b, e) of order (else, order NULL, rows [b, e)) into the ghost
 * slots or the owned rows. */
static void vjp_rows(const struct rank_ctx *c, const uint64_t *order,
                     uint64_t b, uint64_t e, bool ghosts)
{
    if (!c->edge) {
        vjp_scatter(c, order ? order + b : NULL, order ? 0 : b, e - b,
                    c->row_ptr, c->loc, c->in, ghosts);
        return;
    }
    for (uint64_t q = b; q < e; q++) {
        uint64_t i = order ? order[q] : q;

        halo_k_vjp_row(c, i, c->cols, c->loc, c->row_ptr[i], c->row_ptr[i + 1],
                       ghosts);
    }
}

/* Adds what peer s holds for this rank's rows (its ghost cotangents). */
void halo_k_vjp_receive(const struct rank_ctx *c, const struct halo_peer *s)
{
    const struct halo_rank_plan *q = halo_k_rank_plan(c, s->peer);
    const int64_t *ids =
        (const int64_t *)(c->plan + q->ghost_off) + s->remote_start;
    const char *src =
        halo_k_window_data(c, (uint32_t)s->peer) + s->remote_start * c->rb;
    const struct halo_gather_add ga = {
        .ids = ids,
        .id0 = (int64_t)c->rp->owned_begin,
        .count = s->count,
        .src = src,
        .out = c->out,
        .stride = c->rb,
    };

    halo_rowadd(c->dtype, c->features, &ga);
}

static strata_err vjp_run(struct rank_ctx *c)
{
    bool overlap = c->hdr->schedule == STRATA_HALO_OVERLAPPED;
    const struct halo_peer *s = halo_k_peers(c, true);
    strata_err err = STRATA_OK;

    c->stats->exchange_start_ns = (int64_t)base_now_ns();
    halo_k_ghosts_zero(c);
    /* Ghost cotangents accumulate in place. */
    vjp_rows(c, c->order, c->num_interior, c->rows, true);
    for (uint64_t i = c->num_interior; i < c->rows; i++)
        c->stats->boundary_edges +=
            (uint64_t)(c->row_ptr[c->order[i] + 1] - c->row_ptr[c->order[i]]);
    c->stats->boundary_ns =
        (int64_t)base_now_ns() - c->stats->exchange_start_ns;
    c->stats->sent_rows = c->rp->num_ghosts;
    halo_k_signal_all(c, false);
    if (!overlap) {
        for (uint64_t i = 0; i < c->rp->num_send && !err; i++)
            err = halo_k_wait_for(c, s[i].peer, 1);
        if (err)
            return err;
        halo_k_exchange_done(c);
    }
    c->stats->compute_start_ns = (int64_t)base_now_ns();
    if (c->rows > 0)
        memset(c->out, 0, c->rows * c->rb);
    vjp_rows(c, NULL, 0, c->rows, false);
    for (uint64_t i = 0; i < c->rp->num_send; i++) {
        int64_t t0;

        if (overlap) {
            err = halo_k_wait_for(c, s[i].peer, 1);
            if (err)
                return err;
        }
        t0 = (int64_t)base_now_ns();
        halo_k_vjp_receive(c, &s[i]);
        c->stats->pack_ns += (int64_t)base_now_ns() - t0;
    }
    if (overlap)
        halo_k_exchange_done(c);
    c->stats->compute_end_ns = (int64_t)base_now_ns();
    return STRATA_OK;
}

static strata_err same_store(const struct rank_ctx *c);

/* The rows and index arrays: from the cache, or built (then cached). */
static strata_err index_rows(struct rank_ctx *c, bool *indexed)
{
    strata_err err;

    if (halo_k_cache_take(c)) {
        /* Rows from an earlier call: still the plan's store? (Reading
         * them again checks the files it opens.) */
        err = same_store(c);
        if (err)
            return err;
        c->ghost_row = base_malloc((c->rp->num_ghosts + 1) * sizeof(char *));
        if (!c->ghost_row)
            return base_fail(STRATA_ENOMEM,
                             "halo kernel: rank %u: out of memory", c->rank);
        *indexed = true;
        return STRATA_OK;
    }
    err = load_rows(c);
    if (!err)
        err = translate(c);
    *indexed = !err;
    return err;
}

/* "halo kernel: rank r", the chips' name in store errors. */
static const char *kernel_who(const struct rank_ctx *c, char *buf, size_t cap)
{
    snprintf(buf, cap, "halo kernel: rank %u", c->rank);
    return buf;
}

static strata_err same_store(const struct rank_ctx *c)
{
    char who[48];

    return halo_store_same(c->plan, kernel_who(c, who, sizeof(who)));
}

strata_err halo_k_open_store(const struct rank_ctx *c, strata_gfg **out)
{
    char who[48];

    return halo_store_open(c->plan, kernel_who(c, who, sizeof(who)), out);
}

/* A rank's exchange and compute phases on the timeline, from the times its
 * statistics hold (they overlap: two lanes). */
static void trace_phases(const struct rank_ctx *c, bool vjp)
{
    const struct halo_stats *st = c->stats;

    if (st->exchange_end_ns > st->exchange_start_ns &&
        st->exchange_start_ns > 0)
        trace_record_ns(TRACE_K_SPAN, TRACE_CAT_HALO, TRACE_LANE_HALO_XCHG,
                        (uint64_t)st->exchange_start_ns,
                        (uint64_t)st->exchange_end_ns, c->rank,
                        (uint64_t)st->pack_ns, 0, 0,
                        vjp ? "halo vjp exchange" : "halo exchange");
    if (st->compute_end_ns > st->compute_start_ns && st->compute_start_ns > 0)
        trace_record_ns(TRACE_K_SPAN, TRACE_CAT_HALO, TRACE_LANE_HALO_COMPUTE,
                        (uint64_t)st->compute_start_ns,
                        (uint64_t)st->compute_end_ns, c->rank, st->edges, 0, 0,
                        vjp ? "halo vjp compute" : "halo compute");
}

static strata_err run(strata_chip *chip, const strata_args *args, bool vjp)
{
    struct rank_ctx c;
    bool indexed = false;
    strata_err err;

    memset(&c, 0, sizeof(c));
    err = ctx_open(chip, args, &c);
    if (!err)
        memset(c.stats, 0, sizeof(*c.stats));
    if (!err && vjp && c.edge && !c.edge->vjp)
        err = base_fail(STRATA_ENOTSUP, "halo: edge kernel '%s' has no vjp",
                        c.edge->name);
    if (!err && halo_k_streams(&c)) {
        err = vjp ? halo_k_vjp_stream(&c) : halo_k_forward_stream(&c);
    } else {
        if (!err)
            err = index_rows(&c, &indexed);
        if (!err)
            err = vjp ? vjp_run(&c) : forward_run(&c);
    }
    if (err) {
        halo_k_signal_all(&c, !vjp);
    } else {
        c.stats->interior_rows = c.num_interior;
        c.stats->boundary_rows = c.rows - c.num_interior;
        c.stats->edges = c.rp->nnz;
        if (trace_enabled())
            trace_phases(&c, vjp);
        __atomic_store_n(&c.stats->done, 1, __ATOMIC_RELEASE);
    }
    ctx_close(&c, indexed);
    return err;
}

strata_err halo_kernel_forward(strata_chip *chip, const strata_args *args)
{
    return run(chip, args, false);
}

strata_err halo_kernel_vjp(strata_chip *chip, const strata_args *args)
{
    return run(chip, args, true);
}
