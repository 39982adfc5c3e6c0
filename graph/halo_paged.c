/* The paged halo map: derive one rank's map from a .gfg store, reading
 * only that rank's rows, a bounded page at a time. */
#include "base/alloc.h"
#include "base/err.h"
#include "graph_int.h"

static const char *const who = "strata_halo_map_derive_gfg";

/* Reads row_ptr[begin..end] page by page and checks it is monotonic within
 * [0, num_edges]; *first_out and *last_out get its two ends. */
static strata_err scan_rows(const strata_gfg *g, uint64_t begin, uint64_t end,
                            int64_t *page, int64_t *first_out,
                            int64_t *last_out)
{
    int64_t prev = 0;
    int64_t limit = (int64_t)strata_gfg_num_edges(g);
    strata_err err;

    for (uint64_t row = begin; row <= end;) {
        size_t n = end + 1 - row < GRAPH_PAGE_ROWS ? (size_t)(end + 1 - row)
                                                   : GRAPH_PAGE_ROWS;

        err = graph_gfg_read_row_ptr(g, row, n, page);
        if (err != STRATA_OK)
            return err;
        if (row == begin)
            *first_out = prev = page[0];
        for (size_t i = 0; i < n; i++) {
            if (page[i] < prev || page[i] < 0 || page[i] > limit)
                return base_fail(STRATA_EINVAL,
                                 "%s: corrupt store: "
                                 "row_ptr[%llu] = %lld is not monotonic "
                                 "within [0, %lld]",
                                 who, (unsigned long long)(row + i),
                                 (long long)page[i], (long long)limit);
            prev = page[i];
        }
        row += n;
    }
    *last_out = prev;
    return STRATA_OK;
}

/* Feeds edges [first, last) to the ghost set, checking every column. */
static strata_err scan_cols(const strata_gfg *g, int64_t first, int64_t last,
                            int64_t *page, struct graph_ghosts *ghosts)
{
    uint64_t n_src = strata_gfg_num_entities(g);
    strata_err err;

    for (int64_t e = first; e < last;) {
        size_t n = (uint64_t)(last - e) < GRAPH_GHOST_CHUNK ? (size_t)(last - e)
                                                            : GRAPH_GHOST_CHUNK;

        err = graph_gfg_read_cols(g, (uint64_t)e, n, page);
        if (err != STRATA_OK)
            return err;
        for (size_t i = 0; i < n; i++)
            if (page[i] < 0 || (uint64_t)page[i] >= n_src)
                return base_fail(STRATA_EINVAL,
                                 "%s: column out of range: "
                                 "col_idx[%llu] = %lld is not in [0, %llu)",
                                 who, (unsigned long long)e + i,
                                 (long long)page[i], (unsigned long long)n_src);
        err = graph_ghosts_add(ghosts, page, n);
        if (err != STRATA_OK)
            return err;
        e += (int64_t)n;
    }
    return STRATA_OK;
}

strata_err strata_halo_map_derive_gfg(const strata_gfg *g, uint32_t world,
                                      uint32_t rank,
                                      const strata_id_list *peer_requests,
                                      strata_halo_map **out)
{
    struct graph_ghosts ghosts;
    uint64_t n = strata_gfg_num_rows(g);
    uint64_t begin;
    uint64_t end;
    int64_t first = 0;
    int64_t last = 0;
    int64_t *page;
    size_t page_len;
    strata_err err;

    if (!g || !out)
        return base_fail_null(who, !g ? "g" : "out");
    if (world == 0 || rank >= world)
        return base_fail(STRATA_EINVAL,
                         "%s: need world > 0 and rank < world "
                         "(got rank %u, world %u)",
                         who, rank, world);
    if (n != strata_gfg_num_entities(g))
        return base_fail(STRATA_EINVAL,
                         "%s: halo maps need num_rows == "
                         "num_entities (got %llu rows, %llu entities)",
                         who, (unsigned long long)n,
                         (unsigned long long)strata_gfg_num_entities(g));
    err = strata_owned_range(n, world, rank, &begin, &end);
    if (err != STRATA_OK)
        return err;
    page_len = end - begin + 1 < GRAPH_PAGE_ROWS ? (size_t)(end - begin + 1)
                                                 : GRAPH_PAGE_ROWS;
    page = base_malloc(page_len * sizeof(*page));
    if (!page)
        return base_fail(STRATA_ENOMEM, "%s: no memory", who);
    err = scan_rows(g, begin, end, page, &first, &last);
    if (err != STRATA_OK)
        goto out;
    /* Columns come a chunk at a time, so the page grows to one chunk. */
    if ((uint64_t)(last - first) > page_len) {
        size_t want = (uint64_t)(last - first) < GRAPH_GHOST_CHUNK
                          ? (size_t)(last - first)
                          : GRAPH_GHOST_CHUNK;
        int64_t *bigger = base_realloc(page, want * sizeof(*page));

        if (!bigger) {
            err = base_fail(STRATA_ENOMEM, "%s: no memory", who);
            goto out;
        }
        page = bigger;
    }
    graph_ghosts_init(&ghosts, begin, end,
                      (uint64_t)(last - first) < GRAPH_GHOST_CHUNK
                          ? (size_t)(last - first) + 1
                          : GRAPH_GHOST_CHUNK);
    if ((uint64_t)(last - first) > GRAPH_GHOST_CHUNK &&
        strata_gfg_num_entities(g) / 64 <= (uint64_t)(last - first))
        graph_ghosts_use_bitmap(&ghosts, strata_gfg_num_entities(g));
    err = scan_cols(g, first, last, page, &ghosts);
    if (err == STRATA_OK)
        err = graph_ghosts_finish(&ghosts);
    if (err == STRATA_OK)
        err = graph_halo_map_build(n, world, rank, &ghosts, peer_requests, out);
    graph_ghosts_fini(&ghosts);
out:
    base_free(page);
    return err;
}

strata_err strata_halo_map_derive_paged(const char *gfg_path, uint32_t world,
                                        uint32_t rank,
                                        const strata_id_list *peer_requests,
                                        strata_halo_map **out)
{
    strata_gfg *g;
    strata_err err;

    if (!gfg_path || !out)
        return base_fail_null("strata_halo_map_derive_paged",
                              !gfg_path ? "gfg_path" : "out");
    if (!*gfg_path)
        return base_fail(STRATA_EINVAL,
                         "strata_halo_map_derive_paged: gfg_path is empty");
    err = strata_gfg_open(gfg_path, &g);
    if (err != STRATA_OK)
        return err;
    err = strata_halo_map_derive_gfg(g, world, rank, peer_requests, out);
    strata_gfg_close(g);
    return err;
}
