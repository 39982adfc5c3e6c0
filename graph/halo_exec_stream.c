/* The streamed forward of a paged rank too large for the index cache
 * (halo_kernel.h). */
#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "halo_kernel.h"

#include <stdlib.h>
#include <string.h>

/* ---- streamed forward of a large paged plan ---- */

#define STREAM_PAGE_ROWS 65536

/* A paged rank whose rows and index arrays (16 bytes per edge) would not
 * fit the index cache streams its rows through a small page instead:
 * exchange first, then every row in order (no overlap), each source
 * resolved as it is read. Forward only; the VJP loads the rank whole. */
bool halo_k_streams(const struct rank_ctx *c)
{
    static int forced = -1; /* STRATA_HALO_STREAM=1: every paged rank */

    if (forced < 0) {
        const char *env = getenv("STRATA_HALO_STREAM");

        forced = env && env[0] && strcmp(env, "0") != 0;
    }
    return c->hdr->gfg_path_off != 0 &&
           (forced ||
            (c->rp->nnz + c->rows) * 2 * sizeof(int64_t) > halo_k_cache_cap());
}

static strata_err stream_row(struct rank_ctx *c, uint64_t i,
                             const int64_t *cols, int64_t lo, int64_t hi,
                             bool *boundary)
{
    uint64_t begin = c->rp->owned_begin;
    char *acc = c->out + i * c->rb;
    strata_err err = STRATA_OK;

    memset(acc, 0, c->rb);
    for (int64_t k = lo; k < hi && !err; k++) {
        uint64_t j = (uint64_t)cols[k];
        const char *src;

        if (j - begin < c->rows) {
            src = c->in + (j - begin) * c->rb;
        } else {
            uint64_t g = 0;

            err = halo_k_ghost_index(c, cols[k], &g);
            src = err ? NULL : c->ghost_row[g];
            *boundary = true;
        }
        if (err)
            break;
        if (c->edge)
            c->edge->forward((int64_t)(begin + i), cols[k], c->dtype,
                             c->features, src, acc);
        else
            halo_k_row_axpy(c, acc, 1.0, src);
    }
    if (!err && c->hdr->reducer == STRATA_HALO_MEAN && hi > lo)
        halo_k_row_scale(c, acc, 1.0 / (double)(hi - lo));
    return err;
}

strata_err halo_k_forward_stream(struct rank_ctx *c)
{
    const struct halo_peer *r = halo_k_peers(c, false);
    uint64_t begin = c->rp->owned_begin, cap = 0, boundary_rows = 0;
    int64_t *rows_pg = base_malloc((STREAM_PAGE_ROWS + 1) * sizeof(int64_t));
    int64_t *cols_pg = NULL;
    strata_gfg *g = NULL;
    strata_err err;

    c->ghost_row = base_malloc((c->rp->num_ghosts + 1) * sizeof(char *));
    err = rows_pg && c->ghost_row
              ? strata_gfg_open(c->plan + c->hdr->gfg_path_off, &g)
              : base_fail(STRATA_ENOMEM, "halo kernel: rank %u: out of memory",
                          c->rank);
    if (err) {
        base_free(rows_pg);
        return err;
    }
    LOG_DEBUG("halo: rank %u streams %llu rows (%llu edges) from the store",
              c->rank, (unsigned long long)c->rows,
              (unsigned long long)c->rp->nnz);
    c->stats->exchange_start_ns = halo_k_now_ns();
    halo_k_pack(c);
    halo_k_signal_all(c, true);
    halo_k_point_ghosts(c);
    for (uint64_t i = 0; i < c->rp->num_recv && !err; i++)
        err = halo_k_wait_for(c, r[i].peer);
    if (!err) {
        halo_k_exchange_done(c);
        c->stats->compute_start_ns = halo_k_now_ns();
    }
    for (uint64_t a = 0; a < c->rows && !err;) {
        uint64_t b =
            c->rows - a < STREAM_PAGE_ROWS ? c->rows : a + STREAM_PAGE_ROWS;
        uint64_t n = 0;

        err = strata_gfg_row_edges(g, begin + a, begin + b, &n);
        if (!err && n > cap) {
            void *p = base_realloc(cols_pg, n * sizeof(int64_t));

            if (p) {
                cols_pg = p;
                cap = n;
            } else {
                err = base_fail(STRATA_ENOMEM,
                                "halo kernel: rank %u: out of memory for "
                                "%llu edges",
                                c->rank, (unsigned long long)n);
            }
        }
        if (!err)
            err = strata_gfg_read_rows(g, begin + a, begin + b, rows_pg,
                                       cols_pg, (size_t)cap);
        for (uint64_t i = a; i < b && !err; i++) {
            bool boundary = false;

            err = stream_row(c, i, cols_pg, rows_pg[i - a], rows_pg[i - a + 1],
                             &boundary);
            boundary_rows += boundary;
        }
        a = b;
    }
    c->stats->compute_end_ns = halo_k_now_ns();
    c->num_interior = c->rows - boundary_rows;
    strata_gfg_close(g);
    base_free(rows_pg);
    base_free(cols_pg);
    return err;
}
