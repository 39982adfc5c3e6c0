/* Index arrays of the plans a chip ran lately (halo_kernel.h). */
#include "base/alloc.h"
#include "halo_kernel.h"

#include <string.h>
#include <unistd.h>

/* The plans this chip ran lately, by plan id and rank: their paged rows
 * and index arrays do not change, so repeated calls skip rebuilding them
 * (8 bytes per edge, page-faulted afresh each time otherwise). A few
 * entries, least recently used out first, so a chip that serves two
 * handles in turn (a forward and a second graph, or two chip counts) does
 * not rebuild on every call; at most an eighth of the machine's memory
 * (and at least 256 MiB) stays allocated. */
#define CACHE_SLOTS 4

size_t halo_k_cache_cap(void)
{
    static size_t cap;

    if (!cap) {
        long pages = sysconf(_SC_PHYS_PAGES);
        long page = sysconf(_SC_PAGESIZE);
        size_t c = pages > 0 && page > 0 ? (size_t)pages * (size_t)page / 8
                                         : (size_t)1 << 30;

        cap = c < ((size_t)256 << 20) ? (size_t)256 << 20 : c;
    }
    return cap;
}

struct cache_entry {
    bool used;
    uint64_t plan_id;
    uint32_t rank;
    uint64_t stamp; /* last use */
    size_t bytes;
    int64_t *paged_rows;
    int64_t *paged_cols;
    uint64_t *loc;
    uint64_t *order;
    uint64_t num_interior;
};

static struct cache_entry cache[CACHE_SLOTS];
static uint64_t cache_clock;

static void entry_drop(struct cache_entry *e)
{
    base_free(e->paged_rows);
    base_free(e->paged_cols);
    base_free(e->loc);
    base_free(e->order);
    memset(e, 0, sizeof(*e));
}

static struct cache_entry *cache_find(uint64_t plan_id, uint32_t rank)
{
    for (int i = 0; i < CACHE_SLOTS; i++)
        if (cache[i].used && cache[i].plan_id == plan_id &&
            cache[i].rank == rank)
            return &cache[i];
    return NULL;
}

static bool cache_owns(const uint64_t *loc)
{
    for (int i = 0; i < CACHE_SLOTS; i++)
        if (cache[i].used && cache[i].loc == loc)
            return true;
    return false;
}

bool halo_k_cache_take(struct rank_ctx *c)
{
    struct cache_entry *e = cache_find(c->hdr->plan_id, c->rank);

    if (!e)
        return false;
    e->stamp = ++cache_clock;
    c->paged_rows = e->paged_rows;
    c->paged_cols = e->paged_cols;
    c->loc = e->loc;
    c->order = e->order;
    c->num_interior = e->num_interior;
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

/* Keeps c's arrays; false when they are too large to keep. */
static bool cache_keep(struct rank_ctx *c)
{
    struct cache_entry *e = cache_find(c->hdr->plan_id, c->rank);
    size_t bytes = halo_k_index_bytes(c);
    size_t total = 0;

    if (e && e->loc == c->loc) {
        e->stamp = ++cache_clock;
        return true;
    }
    if (e)
        entry_drop(e);
    if (bytes > halo_k_cache_cap())
        return false;
    for (;;) {
        struct cache_entry *free_slot = NULL, *oldest = NULL;

        total = 0;
        for (int i = 0; i < CACHE_SLOTS; i++) {
            if (!cache[i].used) {
                free_slot = free_slot ? free_slot : &cache[i];
                continue;
            }
            total += cache[i].bytes;
            if (!oldest || cache[i].stamp < oldest->stamp)
                oldest = &cache[i];
        }
        if (free_slot && total + bytes <= halo_k_cache_cap()) {
            e = free_slot;
            break;
        }
        entry_drop(oldest);
    }
    e->used = true;
    e->plan_id = c->hdr->plan_id;
    e->rank = c->rank;
    e->stamp = ++cache_clock;
    e->bytes = bytes;
    e->paged_rows = c->paged_rows;
    e->paged_cols = c->paged_cols;
    e->loc = c->loc;
    e->order = c->order;
    e->num_interior = c->num_interior;
    return true;
}

void halo_k_cache_release(struct rank_ctx *c, bool ok)
{
    if (ok && cache_keep(c))
        return;
    if (cache_owns(c->loc))
        return; /* an entry still holds them */
    base_free(c->paged_rows);
    base_free(c->paged_cols);
    base_free(c->loc);
    base_free(c->order);
}
