/* The streamed forward of a paged rank too large for the index cache
 * (halo_kernel.h). */
#include "base/alloc.h"
#include "base/clock.h"
#include "base/env.h"
#include "base/err.h"
#include "base/log.h"
#include "halo_cache.h"
#include "halo_kernel.h"

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
 * the serialized schedule (exchange, then rows; no overlap), each page's
 * sources located as it is read; the rows themselves are computed by the
 * whole-rank path's functions, so both give the same bits. */
bool halo_k_streams(const struct rank_ctx *c)
{
    static int forced = -1; /* STRATA_HALO_STREAM: every paged rank */

    if (forced < 0)
        forced = base_env_flag("STRATA_HALO_STREAM");
    return c->hdr->gfg_path_off != 0 &&
           (forced || halo_k_index_bytes(c) > halo_cache_cap());
}

/* Rows [a, b) of the rank, from its open store. */
struct page {
    strata_gfg *g;
    uint64_t span; /* rows per page */
    int64_t *rows; /* span + 1, rebased */
    int64_t *cols;
    uint64_t *loc; /* per entry, as rank_ctx.loc */
    uint64_t cap;
    uint64_t edges; /* read so far */
};

static strata_err page_open(struct rank_ctx *c, struct page *pg)
{
    memset(pg, 0, sizeof(*pg));
    pg->span = page_rows();
    pg->rows = base_malloc((pg->span + 1) * sizeof(int64_t));
    if (!pg->rows)
        return base_fail(STRATA_ENOMEM, "halo kernel: rank %u: out of memory",
                         c->rank);
    return halo_k_open_store(c, &pg->g);
}

static void page_close(struct page *pg)
{
    strata_gfg_close(pg->g);
    base_free(pg->rows);
    base_free(pg->cols);
    base_free(pg->loc);
}

/* Where each entry's source row is, as translate() finds it for a rank
 * it keeps whole: owned, or rows + its ghost index. */
static strata_err page_locate(const struct rank_ctx *c, struct page *pg,
                              uint64_t n)
{
    for (uint64_t k = 0; k < n; k++) {
        uint64_t l = (uint64_t)pg->cols[k] - c->rp->owned_begin;
        strata_err err;

        if (l < c->rows) {
            pg->loc[k] = l;
            continue;
        }
        err = halo_k_ghost_index(c, pg->cols[k], &pg->loc[k]);
        if (err)
            return err;
        pg->loc[k] += c->rows;
    }
    return STRATA_OK;
}

/* Rows [a, b) of the rank into the page, their sources located. */
static strata_err page_read(const struct rank_ctx *c, struct page *pg,
                            uint64_t a, uint64_t b)
{
    uint64_t begin = c->rp->owned_begin, n = 0;
    strata_err err = strata_gfg_row_edges(pg->g, begin + a, begin + b, &n);

    if (!err && n > pg->cap) {
        void *p = base_realloc(pg->cols, n * sizeof(int64_t));
        void *q = p ? base_realloc(pg->loc, n * sizeof(uint64_t)) : NULL;

        if (p)
            pg->cols = p;
        if (q)
            pg->loc = q;
        if (!p || !q)
            return base_fail(STRATA_ENOMEM,
                             "halo kernel: rank %u: out of memory for %llu "
                             "edges",
                             c->rank, (unsigned long long)n);
        pg->cap = n;
    }
    if (!err)
        err = strata_gfg_read_rows(pg->g, begin + a, begin + b, pg->rows,
                                   pg->cols, (size_t)pg->cap);
    if (!err)
        err = page_locate(c, pg, n);
    pg->edges += n;
    return err;
}

/* The plan counted the rank's entries when it was made. */
static strata_err page_done(const struct rank_ctx *c, const struct page *pg)
{
    if (pg->edges != c->rp->nnz)
        return base_fail(STRATA_EINVAL,
                         "halo kernel: rank %u: the store changed since the "
                         "plan was made",
                         c->rank);
    return STRATA_OK;
}

/* Whether page row i - a reads a ghost. */
static bool page_boundary(const struct rank_ctx *c, const struct page *pg,
                          uint64_t r)
{
    for (int64_t k = pg->rows[r]; k < pg->rows[r + 1]; k++)
        if (pg->loc[k] >= c->rows)
            return true;
    return false;
}

/* Exchange, then every row through the page. */
strata_err halo_k_forward_stream(struct rank_ctx *c)
{
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
    err = halo_k_wait_ghosts(c);
    if (!err) {
        halo_k_exchange_done(c);
        c->stats->compute_start_ns = (int64_t)base_now_ns();
    }
    for (uint64_t a = 0; a < c->rows && !err;) {
        uint64_t b = c->rows - a < pg.span ? c->rows : a + pg.span;

        err = page_read(c, &pg, a, b);
        for (uint64_t i = a; i < b && !err; i++) {
            boundary_rows += page_boundary(c, &pg, i - a);
            halo_k_forward_row(c, i, pg.cols, pg.loc, pg.rows[i - a],
                               pg.rows[i - a + 1]);
        }
        a = b;
    }
    if (!err)
        err = page_done(c, &pg);
    c->stats->compute_end_ns = (int64_t)base_now_ns();
    c->num_interior = c->rows - boundary_rows;
    page_close(&pg);
    return err;
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
    halo_k_ghosts_zero(c);
    for (uint64_t b = c->rows; b > 0 && !err;) {
        uint64_t a = b < pg.span ? 0 : b - pg.span;

        err = page_read(c, &pg, a, b);
        for (uint64_t i = b; i > a && !err;) {
            i--;
            boundary_rows += page_boundary(c, &pg, i - a);
            halo_k_vjp_row(c, i, pg.cols, pg.loc, pg.rows[i - a],
                           pg.rows[i - a + 1], true);
        }
        b = a;
    }
    if (!err)
        err = page_done(c, &pg);
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
    pg.edges = 0;
    for (uint64_t a = 0; a < c->rows && !err;) {
        uint64_t b = c->rows - a < pg.span ? c->rows : a + pg.span;

        err = page_read(c, &pg, a, b);
        for (uint64_t i = a; i < b && !err; i++)
            halo_k_vjp_row(c, i, pg.cols, pg.loc, pg.rows[i - a],
                           pg.rows[i - a + 1], false);
        a = b;
    }
    if (!err)
        err = page_done(c, &pg);
    for (uint64_t i = 0; i < c->rp->num_send && !err; i++)
        halo_k_vjp_receive(c, &s[i]);
    c->stats->compute_end_ns = (int64_t)base_now_ns();
    c->num_interior = c->rows - boundary_rows;
    page_close(&pg);
    return err;
}
