/* The streamed forward of a paged rank too large for the index cache
 * (halo_kernel.h). */
#include "base/alloc.h"
#include "base/clock.h"
#include "base/env.h"
#include "base/err.h"
#include "base/log.h"
#include "halo_kernel.h"
#include "rowsum.h"

#include <stdlib.h>
#include <string.h>

/* ---- streamed forward of a large paged plan ---- */

#define STREAM_PAGE_ROWS 65536

/* Rows per page: STREAM_PAGE_ROWS, or N when STRATA_HALO_STREAM=N > 1
 * (tests: pages that split a small graph). */
static uint64_t page_rows(void)
{
    static uint64_t rows;

    if (rows == 0) {
        const char *env = getenv("STRATA_HALO_STREAM");
        uint64_t n = env ? strtoull(env, NULL, 10) : 0;

        rows = n > 1 && n < STREAM_PAGE_ROWS ? n : STREAM_PAGE_ROWS;
    }
    return rows;
}

/* A paged rank whose rows and index arrays (16 bytes per edge) would not
 * fit the index cache streams its rows through a small page instead, in
 * the serialized schedule (exchange, then rows; no overlap), each source
 * resolved as it is read. */
bool halo_k_streams(const struct rank_ctx *c)
{
    static int forced = -1; /* STRATA_HALO_STREAM: every paged rank */

    if (forced < 0)
        forced = base_env_flag("STRATA_HALO_STREAM");
    return c->hdr->gfg_path_off != 0 &&
           (forced || halo_k_index_bytes(c) > halo_k_cache_cap());
}

/* Rows [a, b) of the rank, from its open store. */
struct page {
    strata_gfg *g;
    uint64_t span; /* rows per page */
    int64_t *rows; /* span + 1, rebased */
    int64_t *cols;
    uint64_t cap;
};

static strata_err page_open(struct rank_ctx *c, struct page *pg)
{
    memset(pg, 0, sizeof(*pg));
    pg->span = page_rows();
    pg->rows = base_malloc((pg->span + 1) * sizeof(int64_t));
    if (!pg->rows)
        return base_fail(STRATA_ENOMEM, "halo kernel: rank %u: out of memory",
                         c->rank);
    return strata_gfg_open(c->plan + c->hdr->gfg_path_off, &pg->g);
}

static void page_close(struct page *pg)
{
    strata_gfg_close(pg->g);
    base_free(pg->rows);
    base_free(pg->cols);
}

static strata_err page_read(const struct rank_ctx *c, struct page *pg,
                            uint64_t a, uint64_t b)
{
    uint64_t begin = c->rp->owned_begin, n = 0;
    strata_err err = strata_gfg_row_edges(pg->g, begin + a, begin + b, &n);

    if (!err && n > pg->cap) {
        void *p = base_realloc(pg->cols, n * sizeof(int64_t));

        if (!p)
            return base_fail(STRATA_ENOMEM,
                             "halo kernel: rank %u: out of memory for %llu "
                             "edges",
                             c->rank, (unsigned long long)n);
        pg->cols = p;
        pg->cap = n;
    }
    if (!err)
        err = strata_gfg_read_rows(pg->g, begin + a, begin + b, pg->rows,
                                   pg->cols, (size_t)pg->cap);
    return err;
}

/* Where source j's row is: owned (in) or a ghost (*ghost set). */
static strata_err locate(const struct rank_ctx *c, int64_t j, uint64_t *idx,
                         bool *ghost)
{
    uint64_t l = (uint64_t)j - c->rp->owned_begin;

    if (l < c->rows) {
        *idx = l;
        *ghost = false;
        return STRATA_OK;
    }
    *ghost = true;
    return halo_k_ghost_index(c, j, idx);
}

static strata_err stream_row(struct rank_ctx *c, uint64_t i,
                             const int64_t *cols, int64_t lo, int64_t hi,
                             bool *boundary)
{
    uint64_t begin = c->rp->owned_begin;
    char *acc = c->out + i * c->rb;
    strata_err err = STRATA_OK;
    const void *src[HALO_K_SRC_BATCH];
    struct halo_rows rs = {src, 0};

    memset(acc, 0, c->rb);
    for (int64_t k = lo; k < hi && !err; k++) {
        uint64_t l = 0;
        bool ghost = false;

        err = locate(c, cols[k], &l, &ghost);
        if (err)
            break;
        src[rs.n] = ghost ? c->ghost_row[l] : c->in + l * c->rb;
        *boundary |= ghost;
        if (c->edge)
            c->edge->forward((int64_t)(begin + i), cols[k], c->dtype,
                             c->features, src[rs.n], acc);
        else if (++rs.n == HALO_K_SRC_BATCH) {
            halo_rowsum(c->dtype, c->features, acc, &rs, false, 1.0);
            rs.n = 0;
        }
    }
    if (rs.n && !err)
        halo_rowsum(c->dtype, c->features, acc, &rs, false, 1.0);
    if (!err && c->hdr->reducer == STRATA_HALO_MEAN && hi > lo)
        halo_k_row_scale(c, acc, 1.0 / (double)(hi - lo));
    return err;
}

/* Exchange, then every row through the page. */
strata_err halo_k_forward_stream(struct rank_ctx *c)
{
    const struct halo_peer *r = halo_k_peers(c, false);
    uint64_t boundary_rows = 0;
    struct page pg;
    strata_err err;

    c->ghost_row = base_malloc((c->rp->num_ghosts + 1) * sizeof(char *));
    err = c->ghost_row
              ? page_open(c, &pg)
              : base_fail(STRATA_ENOMEM, "halo kernel: rank %u: out of memory",
                          c->rank);
    if (err) {
        if (c->ghost_row)
            page_close(&pg);
        return err;
    }
    LOG_DEBUG("halo: rank %u streams %llu rows (%llu edges) from the store",
              c->rank, (unsigned long long)c->rows,
              (unsigned long long)c->rp->nnz);
    c->stats->exchange_start_ns = (int64_t)base_now_ns();
    halo_k_pack(c);
    halo_k_signal_all(c, true);
    halo_k_point_ghosts(c);
    for (uint64_t i = 0; i < c->rp->num_recv && !err; i++)
        err = halo_k_wait_for(c, r[i].peer,
                              halo_chunks(r[i].count, c->hdr->chunk_rows));
    if (!err) {
        halo_k_exchange_done(c);
        c->stats->compute_start_ns = (int64_t)base_now_ns();
    }
    for (uint64_t a = 0; a < c->rows && !err;) {
        uint64_t b = c->rows - a < pg.span ? c->rows : a + pg.span;

        err = page_read(c, &pg, a, b);
        for (uint64_t i = a; i < b && !err; i++) {
            bool boundary = false;

            err = stream_row(c, i, pg.cols, pg.rows[i - a], pg.rows[i - a + 1],
                             &boundary);
            boundary_rows += boundary;
        }
        a = b;
    }
    c->stats->compute_end_ns = (int64_t)base_now_ns();
    c->num_interior = c->rows - boundary_rows;
    page_close(&pg);
    return err;
}

/* Row i's cotangent (in, row i) into its sources: with ghosts, its ghost
 * sources (into this rank's window), else its owned ones (into out). */
static strata_err stream_vjp_row(struct rank_ctx *c, uint64_t i,
                                 const int64_t *cols, int64_t lo, int64_t hi,
                                 bool ghosts, bool *boundary)
{
    const char *g = c->in + i * c->rb;
    double w = c->hdr->reducer == STRATA_HALO_MEAN && hi > lo
                   ? 1.0 / (double)(hi - lo)
                   : 1.0;

    for (int64_t k = lo; k < hi; k++) {
        uint64_t l = 0;
        bool ghost = false;
        strata_err err = locate(c, cols[k], &l, &ghost);
        char *acc;

        if (err)
            return err;
        *boundary |= ghost;
        if (ghost != ghosts)
            continue;
        acc = ghost ? halo_k_window_data(c, c->rank) + l * c->rb
                    : c->out + l * c->rb;
        if (c->edge)
            c->edge->vjp((int64_t)(c->rp->owned_begin + i), cols[k], c->dtype,
                         c->features, g, acc);
        else
            halo_k_row_axpy(c, acc, w, g);
    }
    return STRATA_OK;
}

/* Ghost cotangents first, in the order the whole-rank path takes (rows
 * descending), then the owned ones (rows ascending), then the peers'
 * contributions: the same additions in the same order, so the same bits. */
strata_err halo_k_vjp_stream(struct rank_ctx *c)
{
    const struct halo_peer *s = halo_k_peers(c, true);
    uint64_t boundary_rows = 0;
    struct page pg;
    strata_err err = page_open(c, &pg);

    if (err) {
        page_close(&pg);
        return err;
    }
    LOG_DEBUG("halo: rank %u streams its VJP over %llu rows", c->rank,
              (unsigned long long)c->rows);
    c->stats->exchange_start_ns = (int64_t)base_now_ns();
    for (uint64_t b = c->rows; b > 0 && !err;) {
        uint64_t a = b < pg.span ? 0 : b - pg.span;

        err = page_read(c, &pg, a, b);
        for (uint64_t i = b; i > a && !err;) {
            bool boundary = false;

            i--;
            err = stream_vjp_row(c, i, pg.cols, pg.rows[i - a],
                                 pg.rows[i - a + 1], true, &boundary);
            boundary_rows += boundary;
        }
        b = a;
    }
    if (err) {
        page_close(&pg);
        return err;
    }
    halo_k_signal_all(c, false);
    for (uint64_t i = 0; i < c->rp->num_send && !err; i++)
        err = halo_k_wait_for(c, s[i].peer, 1);
    if (!err) {
        halo_k_exchange_done(c);
        c->stats->compute_start_ns = (int64_t)base_now_ns();
        if (c->rows > 0)
            memset(c->out, 0, c->rows * c->rb);
    }
    for (uint64_t a = 0; a < c->rows && !err;) {
        uint64_t b = c->rows - a < pg.span ? c->rows : a + pg.span;
        bool unused = false;

        err = page_read(c, &pg, a, b);
        for (uint64_t i = a; i < b && !err; i++)
            err = stream_vjp_row(c, i, pg.cols, pg.rows[i - a],
                                 pg.rows[i - a + 1], false, &unused);
        a = b;
    }
    for (uint64_t i = 0; i < c->rp->num_send && !err; i++)
        halo_k_vjp_receive(c, &s[i]);
    c->stats->compute_end_ns = (int64_t)base_now_ns();
    c->num_interior = c->rows - boundary_rows;
    page_close(&pg);
    return err;
}
