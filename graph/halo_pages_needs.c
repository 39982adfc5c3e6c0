/* Which pages of x each rank's rows in each page of out read, for
 * strata_halo_forward_pages (halo_pages.h): found once per pair of page
 * sizes, from the plan's CSR or the rank's rows of the store, and kept
 * in the handle. */
#include "base/alloc.h"
#include "base/err.h"
#include "halo_pages.h"

/* Rows read from a store at a time while finding the pages. */
#define NEEDS_READ_ROWS 65536
/* Largest set of bitmaps kept (bytes): pages far smaller than that are
 * not what paging is for. */
#define NEEDS_MAX_BYTES ((size_t)64 << 20)

/* ceil(rows / page_rows), without overflow for any page_rows > 0. */
uint64_t halo_pages_for(uint64_t rows, uint64_t page_rows)
{
    return rows / page_rows + (rows % page_rows != 0);
}

/* The end of the page of page_rows rows that starts at row b, within
 * limit rows (no overflow). */
uint64_t halo_page_end(uint64_t b, uint64_t page_rows, uint64_t limit)
{
    return page_rows < limit - b ? b + page_rows : limit;
}

void halo_needs_free(struct halo_page_needs *n)
{
    if (!n)
        return;
    base_free(n->first);
    base_free(n->count);
    base_free(n->slot0);
    base_free(n->bits);
    base_free(n);
}

uint64_t *halo_needs_bits(const struct halo_page_needs *n, uint32_t r,
                          uint64_t page)
{
    return n->bits + (n->slot0[r] + page - n->first[r]) * n->words;
}

/* Marks the pages of x read by rows [b, e) of rank r, whose entries
 * row_ptr[i - b] .. row_ptr[i - b + 1] (rebased) of cols are global ids. */
static void mark_rows(struct halo_page_needs *n, uint32_t r, uint64_t b,
                      uint64_t e, const int64_t *row_ptr, const int64_t *cols)
{
    for (uint64_t i = b; i < e;) {
        uint64_t page = i / n->out_rows;
        uint64_t end = halo_page_end(page * n->out_rows, n->out_rows, e);
        uint64_t *bits = halo_needs_bits(n, r, page);

        for (int64_t k = row_ptr[i - b]; k < row_ptr[end - b]; k++) {
            uint64_t xp = (uint64_t)cols[k] / n->x_rows;

            bits[xp / 64] |= (uint64_t)1 << (xp % 64);
        }
        i = end;
    }
}

/* Rank r's rows, read from the store in bounded pieces. */
static strata_err mark_store(struct halo_page_needs *n, const strata_gfg *g,
                             uint32_t r, uint64_t b, uint64_t e)
{
    int64_t *rows = base_malloc((NEEDS_READ_ROWS + 1) * sizeof(int64_t));
    int64_t *cols = NULL;
    size_t cap = 0;
    strata_err err = rows ? STRATA_OK : STRATA_ENOMEM;

    for (uint64_t a = b; a < e && !err;) {
        uint64_t z = e - a < NEEDS_READ_ROWS ? e : a + NEEDS_READ_ROWS;
        uint64_t cnt = 0;

        err = strata_gfg_row_edges(g, a, z, &cnt);
        if (!err && cnt > cap) {
            base_free(cols);
            cap = (size_t)cnt;
            cols = base_malloc(cap * sizeof(int64_t));
            err = cols ? STRATA_OK : STRATA_ENOMEM;
        }
        if (!err)
            err = strata_gfg_read_rows(g, a, z, rows, cols, cap);
        if (!err)
            mark_rows(n, r, a, z, rows, cols);
        a = z;
    }
    base_free(rows);
    base_free(cols);
    if (err == STRATA_ENOMEM)
        return base_fail(err, "strata_halo_forward_pages: out of memory "
                              "reading the store");
    return err;
}

static strata_err needs_alloc(const strata_halo *h, const void *plan,
                              uint64_t x_rows, uint64_t out_rows,
                              struct halo_page_needs **out)
{
    uint64_t nx = halo_pages_for(h->num_rows, x_rows), slots = 0;
    struct halo_page_needs *n = base_calloc(1, sizeof(*n));

    if (!n)
        return base_fail(STRATA_ENOMEM, "strata_halo_forward_pages: out of "
                                        "memory");
    n->x_rows = x_rows;
    n->out_rows = out_rows;
    n->words = nx ? (size_t)((nx + 63) / 64) : 1; /* no rows: no task */
    n->first = base_calloc(h->world, sizeof(uint64_t));
    n->count = base_calloc(h->world, sizeof(uint64_t));
    n->slot0 = base_calloc(h->world, sizeof(uint64_t));
    if (!n->first || !n->count || !n->slot0) {
        halo_needs_free(n);
        return base_fail(STRATA_ENOMEM, "strata_halo_forward_pages: out of "
                                        "memory");
    }
    for (uint32_t r = 0; r < h->world; r++) {
        const struct halo_rank_plan *rp = halo_plan_rank(plan, r);

        n->slot0[r] = slots;
        if (rp->owned_end > rp->owned_begin) {
            n->first[r] = rp->owned_begin / out_rows;
            n->count[r] = (rp->owned_end - 1) / out_rows - n->first[r] + 1;
        }
        slots += n->count[r];
    }
    if (slots > NEEDS_MAX_BYTES / 8 / n->words) {
        halo_needs_free(n);
        return base_fail(STRATA_EINVAL,
                         "strata_halo_forward_pages: pages of %llu rows (x) "
                         "and %llu rows (out) are too small for %llu rows",
                         (unsigned long long)x_rows,
                         (unsigned long long)out_rows,
                         (unsigned long long)h->num_rows);
    }
    n->bits = base_calloc((size_t)slots * n->words + 1, sizeof(uint64_t));
    if (!n->bits) {
        halo_needs_free(n);
        return base_fail(STRATA_ENOMEM, "strata_halo_forward_pages: out of "
                                        "memory");
    }
    *out = n;
    return STRATA_OK;
}

/* h->needs for these page sizes, found now unless they already are. */
strata_err halo_needs_get(strata_halo *h, uint64_t x_rows, uint64_t out_rows)
{
    const void *plan = strata_buffer_data(h->plan);
    const struct halo_plan_hdr *hdr = plan;
    struct halo_page_needs *n = NULL;
    strata_gfg *g = NULL;
    strata_err err;

    if (h->needs && h->needs->x_rows == x_rows &&
        h->needs->out_rows == out_rows)
        return STRATA_OK;
    err = needs_alloc(h, plan, x_rows, out_rows, &n);
    if (!err && hdr->gfg_path_off)
        err = halo_store_open(plan, "strata_halo_forward_pages", &g);
    for (uint32_t r = 0; r < h->world && !err; r++) {
        const struct halo_rank_plan *rp = halo_plan_rank(plan, r);

        if (rp->owned_end == rp->owned_begin)
            continue;
        if (g)
            err = mark_store(n, g, r, rp->owned_begin, rp->owned_end);
        else
            mark_rows(n, r, rp->owned_begin, rp->owned_end,
                      (const int64_t *)((const char *)plan + rp->row_ptr_off),
                      (const int64_t *)((const char *)plan + rp->col_off));
    }
    strata_gfg_close(g);
    if (err) {
        if (n)
            halo_needs_free(n);
        return err;
    }
    halo_needs_free(h->needs);
    h->needs = n;
    return STRATA_OK;
}

size_t halo_next_page(const uint64_t *bits, size_t k, size_t n)
{
    while (k < n) {
        uint64_t w = bits[k / 64] >> (k % 64);

        if (w) {
            k += (size_t)__builtin_ctzll(w);
            return k < n ? k : n;
        }
        k = (k / 64 + 1) * 64;
    }
    return n;
}
