/* The ghost set of one rank: sorted unique remote columns, gathered in
 * bounded memory so a paged derive never holds all of a rank's edges. */
#include "base/alloc.h"
#include "base/err.h"
#include "graph_int.h"

#include <stdlib.h>
#include <string.h>

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a;
    int64_t y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

/* Sorts ids in place and drops duplicates; returns the new count. */
static size_t sort_unique(int64_t *ids, size_t n)
{
    size_t out = 0;

    if (n == 0)
        return 0;
    qsort(ids, n, sizeof(*ids), cmp_i64);
    for (size_t i = 1; i < n; i++)
        if (ids[i] != ids[out])
            ids[++out] = ids[i];
    return out + 1;
}

void graph_ghosts_init(struct graph_ghosts *g, uint64_t begin, uint64_t end,
                       size_t chunk_cap)
{
    memset(g, 0, sizeof(*g));
    g->begin = begin;
    g->end = end;
    g->chunk_cap = chunk_cap ? chunk_cap : GRAPH_GHOST_CHUNK;
}

/* Merges the buffered chunk into ids. */
static strata_err flush(struct graph_ghosts *g)
{
    size_t n = sort_unique(g->chunk, g->chunk_len);
    size_t i = 0;
    size_t j = 0;
    size_t k = 0;
    int64_t *merged;

    g->chunk_len = 0;
    if (n == 0)
        return STRATA_OK;
    merged = base_malloc((g->count + n) * sizeof(*merged));
    if (!merged)
        return base_fail(STRATA_ENOMEM, "halo map: no memory for %zu ghosts",
                         g->count + n);
    while (i < g->count || j < n) {
        int64_t v;

        if (j == n || (i < g->count && g->ids[i] <= g->chunk[j]))
            v = g->ids[i++];
        else
            v = g->chunk[j++];
        if (k == 0 || merged[k - 1] != v)
            merged[k++] = v;
    }
    base_free(g->ids);
    g->ids = merged;
    g->count = k;
    return STRATA_OK;
}

void graph_ghosts_use_bitmap(struct graph_ghosts *g, uint64_t n)
{
    g->n = n;
}

static strata_err bits_add(struct graph_ghosts *g, const int64_t *cols,
                           size_t n)
{
    if (!g->bits) {
        g->bits = base_calloc((size_t)(g->n / 64 + 1), sizeof(uint64_t));
        if (!g->bits)
            return base_fail(STRATA_ENOMEM,
                             "halo map: no memory for a bitmap of %llu ids",
                             (unsigned long long)g->n);
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t c = (uint64_t)cols[i];

        if (c < g->begin || c >= g->end)
            g->bits[c / 64] |= (uint64_t)1 << (c % 64);
    }
    return STRATA_OK;
}

/* The bitmap's ids, ascending, into ids/count. */
static strata_err bits_finish(struct graph_ghosts *g)
{
    size_t words = (size_t)(g->n / 64 + 1), k = 0;
    int64_t *ids;

    for (size_t w = 0; w < words; w++)
        k += (size_t)__builtin_popcountll(g->bits[w]);
    ids = base_malloc((k + 1) * sizeof(*ids));
    if (!ids)
        return base_fail(STRATA_ENOMEM, "halo map: no memory for %zu ghosts",
                         k);
    k = 0;
    for (size_t w = 0; w < words; w++)
        for (uint64_t b = g->bits[w]; b; b &= b - 1)
            ids[k++] = (int64_t)(w * 64 + (size_t)__builtin_ctzll(b));
    base_free(g->bits);
    g->bits = NULL;
    base_free(g->ids);
    g->ids = ids;
    g->count = k;
    return STRATA_OK;
}

strata_err graph_ghosts_add(struct graph_ghosts *g, const int64_t *cols,
                            size_t n)
{
    strata_err err;

    if (g->n)
        return bits_add(g, cols, n);

    for (size_t i = 0; i < n; i++) {
        uint64_t c = (uint64_t)cols[i];

        if (c >= g->begin && c < g->end)
            continue;
        if (!g->chunk) {
            g->chunk = base_malloc(g->chunk_cap * sizeof(*g->chunk));
            if (!g->chunk)
                return base_fail(STRATA_ENOMEM,
                                 "halo map: no memory for a %zu-entry chunk",
                                 g->chunk_cap);
        }
        g->chunk[g->chunk_len++] = cols[i];
        if (g->chunk_len == g->chunk_cap) {
            err = flush(g);
            if (err != STRATA_OK)
                return err;
        }
    }
    return STRATA_OK;
}

strata_err graph_ghosts_finish(struct graph_ghosts *g)
{
    strata_err err = STRATA_OK;

    if (g->bits)
        return bits_finish(g);
    if (g->chunk_len)
        err = flush(g);
    base_free(g->chunk);
    g->chunk = NULL;
    return err;
}

void graph_ghosts_fini(struct graph_ghosts *g)
{
    base_free(g->chunk);
    base_free(g->ids);
    base_free(g->bits);
    g->chunk = NULL;
    g->ids = NULL;
    g->bits = NULL;
    g->count = 0;
    g->chunk_len = 0;
}
