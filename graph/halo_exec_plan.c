/* The plan buffer: every rank's owned rows, ghosts, receive_from and
 * send_to lists, laid out by offset in one host buffer of the worker. */
#include "base/alloc.h"
#include "base/err.h"
#include "halo_exec_int.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Where each part of the plan lives, computed before the buffer exists. */
struct layout {
    uint32_t world;
    uint64_t num_rows;
    bool paged;
    strata_halo_map **maps;
    uint64_t *nnz;      /* per rank */
    uint64_t *num_recv; /* per rank */
    uint64_t *num_send; /* per rank */
    uint64_t *rp_off, *col_off, *ghost_off, *recv_off, *send_off;
    uint64_t path_off;
    struct graph_gfg_stamp store; /* paged */
    size_t ro_size;
    size_t total;
};

static strata_err grow(size_t *at, size_t add, uint64_t *where_out)
{
    size_t aligned = (*at + 7) / 8 * 8;

    if (aligned < *at || add > SIZE_MAX - aligned)
        return base_fail(STRATA_EINVAL, "halo plan: sizes overflow");
    *where_out = aligned;
    *at = aligned + add;
    return STRATA_OK;
}

static strata_err mul(uint64_t a, uint64_t b, size_t *out)
{
    if (b != 0 && a > SIZE_MAX / b)
        return base_fail(STRATA_EINVAL, "halo plan: sizes overflow");
    *out = (size_t)(a * b);
    return STRATA_OK;
}

static strata_err derive_maps(const strata_halo_spec *spec, struct layout *l)
{
    strata_gfg *g = NULL;
    strata_err err;

    if (spec->csr) {
        l->num_rows = spec->csr->num_rows;
        err = graph_halo_maps(spec->csr, l->world, l->maps, "halo spec: csr");
        if (err)
            return err;
        for (uint32_t r = 0; r < l->world; r++) {
            uint64_t b = strata_halo_map_owned_begin(l->maps[r]);
            uint64_t e = strata_halo_map_owned_end(l->maps[r]);

            l->nnz[r] =
                (uint64_t)(spec->csr->row_ptr[e] - spec->csr->row_ptr[b]);
        }
        return STRATA_OK;
    }
    err = strata_gfg_open(spec->gfg_path, &g);
    if (err)
        return err;
    l->num_rows = strata_gfg_num_rows(g);
    err = graph_gfg_stamp_of(g, &l->store);
    for (uint32_t r = 0; r < l->world && !err; r++) {
        err = strata_halo_map_derive_gfg(g, l->world, r, NULL, &l->maps[r]);
        if (!err)
            err = strata_gfg_row_edges(
                g, strata_halo_map_owned_begin(l->maps[r]),
                strata_halo_map_owned_end(l->maps[r]), &l->nnz[r]);
    }
    strata_gfg_close(g);
    return err;
}

static strata_err place_rank(struct layout *l, uint32_t r, size_t *at)
{
    const strata_halo_map *m = l->maps[r];
    uint64_t rows =
        strata_halo_map_owned_end(m) - strata_halo_map_owned_begin(m);
    size_t n = 0;
    strata_err err = STRATA_OK;

    l->rp_off[r] = 0;
    l->col_off[r] = 0;
    if (!l->paged) {
        err = mul(rows + 1, sizeof(int64_t), &n);
        if (!err)
            err = grow(at, n, &l->rp_off[r]);
        if (!err && l->nnz[r] > 0)
            err = mul(l->nnz[r], sizeof(int64_t), &n);
        if (!err && l->nnz[r] > 0)
            err = grow(at, n, &l->col_off[r]);
    }
    if (!err)
        err = mul(strata_halo_map_num_ghosts(m), sizeof(int64_t), &n);
    if (!err)
        err = grow(at, n, &l->ghost_off[r]);
    if (!err)
        err = mul(l->num_recv[r], sizeof(struct halo_peer), &n);
    if (!err)
        err = grow(at, n, &l->recv_off[r]);
    if (!err)
        err = mul(l->num_send[r], sizeof(struct halo_peer), &n);
    if (!err)
        err = grow(at, n, &l->send_off[r]);
    return err;
}

static strata_err place(const strata_halo_spec *spec, struct layout *l)
{
    size_t at = sizeof(struct halo_plan_hdr);
    uint64_t where;
    size_t n;
    strata_err err;

    for (uint32_t q = 0; q < l->world; q++) {
        size_t np = strata_halo_map_num_receive_peers(l->maps[q]);

        l->num_recv[q] = np;
        for (size_t i = 0; i < np; i++) {
            uint32_t p;
            const int64_t *ids;
            size_t c;

            err = strata_halo_map_receive_from(l->maps[q], i, &p, &ids, &c);
            if (err)
                return err;
            l->num_send[p]++;
        }
    }
    err = grow(&at, l->world * sizeof(struct halo_rank_plan), &where);
    for (uint32_t r = 0; r < l->world && !err; r++)
        err = place_rank(l, r, &at);
    l->path_off = 0;
    if (!err && l->paged)
        err = grow(&at, strlen(spec->gfg_path) + 1, &l->path_off);
    if (err)
        return err;
    l->ro_size = (at + HALO_ALIGN - 1) / HALO_ALIGN * HALO_ALIGN;
    err = mul(l->world, HALO_STATS_STRIDE, &n);
    if (!err && n > SIZE_MAX - l->ro_size)
        err = base_fail(STRATA_EINVAL, "halo plan: sizes overflow");
    l->total = l->ro_size + n;
    return err;
}

/* Whole rows per forward hand-off chunk, at least one. */
static uint64_t chunk_rows(const strata_halo_spec *spec)
{
    size_t rb = spec->features * strata_dtype_size(spec->dtype);
    size_t cb =
        spec->chunk_bytes ? spec->chunk_bytes : STRATA_HALO_CHUNK_BYTES_DEFAULT;

    return cb / rb > 0 ? cb / rb : 1;
}

/* Flag words count chunks in 32 bits, and a rank that fails part way
 * adds a whole block's count on top of what it handed over: no block
 * (at most max_pack rows) may take more than a quarter of that range. */
static void bound_chunks(struct halo_plan_hdr *h, uint64_t max_pack,
                         bool by_default)
{
    uint64_t least = max_pack / (UINT32_MAX / 4) + 1;

    /* The default unit grows with a large boundary: at most
     * HALO_DEFAULT_MAX_CHUNKS chunks per block, so that a rank does not
     * wait for its peer hundreds of times (each wait may cost a
     * scheduling slice on a loaded machine). */
    if (by_default && least < halo_chunks(max_pack, HALO_DEFAULT_MAX_CHUNKS))
        least = halo_chunks(max_pack, HALO_DEFAULT_MAX_CHUNKS);

    if (h->chunk_rows < least)
        h->chunk_rows = least;
}

static void fill_header(const strata_halo_spec *spec, const struct layout *l,
                        char *base)
{
    struct halo_plan_hdr *h = (struct halo_plan_hdr *)base;

    static uint64_t next_plan;

    /* Unique across processes too: chips cache their index arrays by it. */
    h->plan_id = ((uint64_t)getpid() << 32) |
                 __atomic_add_fetch(&next_plan, 1, __ATOMIC_RELAXED);
    h->magic = HALO_PLAN_MAGIC;
    h->version = HALO_PLAN_VERSION;
    h->world = l->world;
    h->dtype = (uint32_t)spec->dtype;
    h->reducer = (uint32_t)spec->reducer;
    h->schedule = (uint32_t)spec->schedule;
    h->num_rows = l->num_rows;
    h->features = spec->features;
    h->timeout_s =
        spec->timeout_s > 0 ? spec->timeout_s : HALO_DEFAULT_TIMEOUT_S;
    h->chunk_rows = chunk_rows(spec);
    h->ranks_off = sizeof(struct halo_plan_hdr);
    h->gfg_path_off = l->path_off;
    h->store = l->store;
    h->ro_size = l->ro_size;
    h->stats_off = l->ro_size;
    if (spec->reducer == STRATA_HALO_EDGE)
        snprintf(h->edge_name, sizeof(h->edge_name), "%s", spec->edge_kernel);
    if (l->paged)
        memcpy(base + l->path_off, spec->gfg_path, strlen(spec->gfg_path) + 1);
}

static void fill_rank(const strata_halo_spec *spec, const struct layout *l,
                      char *base, uint32_t r)
{
    struct halo_rank_plan *rp =
        (struct halo_rank_plan *)(base + sizeof(struct halo_plan_hdr)) + r;
    const strata_halo_map *m = l->maps[r];
    uint64_t b = strata_halo_map_owned_begin(m);
    uint64_t e = strata_halo_map_owned_end(m);

    rp->owned_begin = b;
    rp->owned_end = e;
    rp->nnz = l->nnz[r];
    rp->row_ptr_off = l->rp_off[r];
    rp->col_off = l->col_off[r];
    rp->num_ghosts = strata_halo_map_num_ghosts(m);
    rp->ghost_off = l->ghost_off[r];
    rp->num_recv = l->num_recv[r];
    rp->recv_off = l->recv_off[r];
    rp->num_send = l->num_send[r];
    rp->send_off = l->send_off[r];
    rp->pack_rows = 0;
    if (rp->num_ghosts > 0)
        memcpy(base + rp->ghost_off, strata_halo_map_ghost_ids(m),
               rp->num_ghosts * sizeof(int64_t));
    if (l->paged)
        return;
    int64_t *row_ptr = (int64_t *)(base + rp->row_ptr_off);
    int64_t first = spec->csr->row_ptr[b];

    for (uint64_t i = b; i <= e; i++)
        row_ptr[i - b] = spec->csr->row_ptr[i] - first;
    if (rp->nnz > 0)
        memcpy(base + rp->col_off, spec->csr->col_idx + first,
               rp->nnz * sizeof(int64_t));
}

/* Pairs every receive entry (q from p) with the send entry (p to q): q's
 * ghost group from p occupies the next slot of p's pack region. q runs
 * in ascending order, so every send list comes out ascending. */
static strata_err fill_peers(const struct layout *l, char *base,
                             uint64_t *filled)
{
    struct halo_rank_plan *rps =
        (struct halo_rank_plan *)(base + sizeof(struct halo_plan_hdr));

    for (uint32_t q = 0; q < l->world; q++) {
        struct halo_peer *recv = (struct halo_peer *)(base + rps[q].recv_off);
        uint64_t gi = 0;

        for (size_t i = 0; i < rps[q].num_recv; i++) {
            uint32_t p;
            const int64_t *ids;
            size_t c;
            strata_err err =
                strata_halo_map_receive_from(l->maps[q], i, &p, &ids, &c);
            struct halo_peer *send;

            if (err)
                return err;
            send = (struct halo_peer *)(base + rps[p].send_off) + filled[p]++;
            recv[i] = (struct halo_peer){p, c, gi, rps[p].pack_rows};
            *send = (struct halo_peer){q, c, rps[p].pack_rows, gi};
            rps[p].pack_rows += c;
            gi += c;
        }
    }
    return STRATA_OK;
}

static strata_err layout_alloc(struct layout *l, uint32_t world)
{
    l->world = world;
    l->maps = base_calloc(world, sizeof(*l->maps));
    l->nnz = base_calloc((size_t)world * 9, sizeof(uint64_t));
    if (!l->maps || !l->nnz)
        return base_fail(STRATA_ENOMEM, "halo plan: out of memory");
    l->num_recv = l->nnz + world;
    l->num_send = l->num_recv + world;
    l->rp_off = l->num_send + world;
    l->col_off = l->rp_off + world;
    l->ghost_off = l->col_off + world;
    l->recv_off = l->ghost_off + world;
    l->send_off = l->recv_off + world;
    return STRATA_OK;
}

static void layout_free(struct layout *l)
{
    if (l->maps)
        for (uint32_t r = 0; r < l->world; r++)
            strata_halo_map_destroy(l->maps[r]);
    base_free(l->maps);
    base_free(l->nnz);
}

strata_err halo_plan_build(strata_worker *w, const strata_halo_spec *spec,
                           strata_buffer **plan_out, uint64_t *max_pack_out,
                           uint64_t *max_ghosts_out)
{
    struct layout l = {.paged = spec->csr == NULL};
    const struct halo_rank_plan *rps;
    strata_buffer *plan = NULL;
    uint64_t max_pack = 0;
    uint64_t max_ghosts = 0;
    char *base;
    strata_err err;

    err = layout_alloc(&l, (uint32_t)spec->num_chips);
    if (!err)
        err = derive_maps(spec, &l);
    if (!err)
        err = place(spec, &l);
    if (!err)
        err = strata_worker_create_buffer(w, l.total, &plan);
    if (err)
        goto err_free;
    base = strata_buffer_data(plan);
    fill_header(spec, &l, base);
    for (uint32_t r = 0; r < l.world; r++)
        fill_rank(spec, &l, base, r);
    /* The last world entries of nnz's block are free: reuse them as the
     * per-peer fill counters. */
    err = fill_peers(&l, base, l.send_off + l.world);
    if (err)
        goto err_release;
    rps = (const struct halo_rank_plan *)(base + sizeof(struct halo_plan_hdr));
    for (uint32_t r = 0; r < l.world; r++) {
        if (rps[r].pack_rows > max_pack)
            max_pack = rps[r].pack_rows;
        if (rps[r].num_ghosts > max_ghosts)
            max_ghosts = rps[r].num_ghosts;
    }
    bound_chunks((struct halo_plan_hdr *)base, max_pack,
                 spec->chunk_bytes == 0);
    layout_free(&l);
    *plan_out = plan;
    *max_pack_out = max_pack;
    *max_ghosts_out = max_ghosts;
    return STRATA_OK;

err_release:
    if (strata_buffer_release(plan) != STRATA_OK)
        base_errmsg_prefix("halo: plan buffer kept");
err_free:
    layout_free(&l);
    return err;
}
