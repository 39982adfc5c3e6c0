/* Index arrays of the plans a chip ran lately (halo_kernel.h). */
#include "base/alloc.h"
#include "halo_cache.h"
#include "halo_kernel.h"

/* The plans this chip ran lately, by plan id and rank: their paged rows
 * and index arrays do not change, so repeated calls skip rebuilding them
 * (8 bytes per edge, page-faulted afresh each time otherwise), kept in
 * the chip's halo cache (halo_cache.h) beside the in-place kernel's. */
struct arrays {
    int64_t *paged_rows;
    int64_t *paged_cols;
    uint64_t *loc;
    uint64_t *order;
    uint64_t num_interior;
};

static struct halo_cache_key key_of(const struct rank_ctx *c)
{
    return (struct halo_cache_key){c->hdr->plan_id, c->rank,
                                   HALO_CACHE_EXCHANGE};
}

static void ctx_free_arrays(struct rank_ctx *c)
{
    base_free(c->paged_rows);
    base_free(c->paged_cols);
    base_free(c->loc);
    base_free(c->order);
}

static void arrays_drop(void *data)
{
    struct arrays *a = data;

    base_free(a->paged_rows);
    base_free(a->paged_cols);
    base_free(a->loc);
    base_free(a->order);
    base_free(a);
}

bool halo_k_cache_take(struct rank_ctx *c)
{
    const struct arrays *a = halo_cache_find(key_of(c));

    if (!a)
        return false;
    c->cached = true;
    c->paged_rows = a->paged_rows;
    c->paged_cols = a->paged_cols;
    c->loc = a->loc;
    c->order = a->order;
    c->num_interior = a->num_interior;
    halo_k_round_layout(c);
    if (c->paged_rows) {
        c->row_ptr = c->paged_rows;
        c->cols = c->paged_cols;
    } else {
        c->row_ptr = (const int64_t *)(c->plan + c->rp->row_ptr_off);
        c->cols = (const int64_t *)(c->plan + c->rp->col_off);
    }
    return true;
}

size_t halo_k_index_bytes(const struct rank_ctx *c)
{
    /* loc (one per edge) and order (rows and rounds), and for a paged
     * rank its rows and columns too. */
    size_t bytes = (c->rp->nnz + 1 + halo_k_order_len(c)) * sizeof(uint64_t);

    if (c->hdr->gfg_path_off != 0)
        bytes += (c->rows + 1 + c->rp->nnz) * sizeof(int64_t);
    return bytes;
}

void halo_k_cache_release(struct rank_ctx *c, bool ok)
{
    struct arrays *a;

    if (c->cached)
        return; /* an entry holds them */
    a = ok ? base_malloc(sizeof(*a)) : NULL;
    if (a) {
        *a = (struct arrays){c->paged_rows, c->paged_cols, c->loc, c->order,
                             c->num_interior};
        if (halo_cache_keep(key_of(c), a, halo_k_index_bytes(c), arrays_drop))
            return;
        base_free(a);
    }
    ctx_free_arrays(c);
}
