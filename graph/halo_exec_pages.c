/* strata_halo_forward_pages: the forward over fields held as pages, one
 * task per rank and page of out, each naming only the pages of x its
 * rows read, so that a worker under a ram budget spills and restores
 * pages instead of holding both fields. The pages each task reads are
 * found here once per pair of page sizes (halo_page_needs); the rows are
 * computed by halo_pages_kernel.c. */
#include "base/alloc.h"
#include "base/err.h"
#include "halo_exec_int.h"

#include <strata/tier.h>

#include <stdlib.h>
#include <string.h>

/* Rows read from a store at a time while finding the pages. */
#define NEEDS_READ_ROWS 65536
/* Largest set of bitmaps kept (bytes): pages far smaller than that are
 * not what paging is for. */
#define NEEDS_MAX_BYTES ((size_t)64 << 20)

/* Per rank r, one slot per page of out its rows touch (pages first[r] ..
 * first[r] + count[r] - 1, slots from slot0[r]), each a bitmap of the
 * pages of x those rows read. */
struct halo_page_needs {
    uint64_t x_rows, out_rows; /* page sizes they were found for */
    size_t words;              /* 64-bit words per bitmap */
    uint64_t *first, *count, *slot0;
    uint64_t *bits;
    /* Calls alternate the order of each rank's pages: under LRU the
     * pages a call used last are the ones still resident, so the next
     * call starts with them. */
    bool down;
};

/* ceil(rows / page_rows), without overflow for any page_rows > 0. */
static uint64_t pages_for(uint64_t rows, uint64_t page_rows)
{
    return rows / page_rows + (rows % page_rows != 0);
}

/* The end of the page of page_rows rows that starts at row b, within
 * limit rows (no overflow). */
static uint64_t page_end(uint64_t b, uint64_t page_rows, uint64_t limit)
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

static const struct halo_rank_plan *rank_plan(const void *plan, uint32_t r)
{
    const struct halo_plan_hdr *hdr = plan;

    return (const struct halo_rank_plan *)((const char *)plan +
                                           hdr->ranks_off) +
           r;
}

static uint64_t *slot_bits(const struct halo_page_needs *n, uint32_t r,
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
        uint64_t end = page_end(page * n->out_rows, n->out_rows, e);
        uint64_t *bits = slot_bits(n, r, page);

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

/* The store a paged plan was made from, refused when it changed since. */
static strata_err open_store(const void *plan, strata_gfg **out)
{
    const struct halo_plan_hdr *hdr = plan;
    struct graph_gfg_stamp now;
    strata_err err =
        strata_gfg_open((const char *)plan + hdr->gfg_path_off, out);

    if (!err)
        err = graph_gfg_stamp_of(*out, &now);
    if (!err && memcmp(&now, &hdr->store, sizeof(now)) != 0)
        err = base_fail(STRATA_EINVAL, "strata_halo_forward_pages: the store "
                                       "changed since the plan was made");
    if (err) {
        strata_gfg_close(*out);
        *out = NULL;
    }
    return err;
}

static strata_err needs_alloc(const strata_halo *h, const void *plan,
                              uint64_t x_rows, uint64_t out_rows,
                              struct halo_page_needs **out)
{
    uint64_t nx = pages_for(h->num_rows, x_rows), slots = 0;
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
        const struct halo_rank_plan *rp = rank_plan(plan, r);

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

/* A paged plan's store is still the one the plan was made from (two
 * stats; checked at every call, so that a change is refused here and not
 * by the first task that reads it). */
static strata_err check_store(const strata_halo *h)
{
    const void *plan = strata_buffer_data(h->plan);
    const struct halo_plan_hdr *hdr = plan;
    struct graph_gfg_stamp now;
    strata_err err;

    if (!hdr->gfg_path_off)
        return STRATA_OK;
    err = graph_gfg_stamp_at((const char *)plan + hdr->gfg_path_off, &now);
    if (!err && memcmp(&now, &hdr->store, sizeof(now)) != 0)
        err = base_fail(STRATA_EINVAL, "strata_halo_forward_pages: the store "
                                       "changed since the plan was made");
    return err;
}

/* h->needs for these page sizes, found now unless they already are. */
static strata_err needs_get(strata_halo *h, uint64_t x_rows, uint64_t out_rows)
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
        err = open_store(plan, &g);
    for (uint32_t r = 0; r < h->world && !err; r++) {
        const struct halo_rank_plan *rp = rank_plan(plan, r);

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

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (void *const *)a;
    uintptr_t y = (uintptr_t) * (void *const *)b;

    return x < y ? -1 : x > y;
}

/* A list's shape and pages: page k large enough for its rows. */
static strata_err check_list(const strata_halo *h, const strata_halo_pages *p,
                             const char *what)
{
    const char *fn = "strata_halo_forward_pages";

    if (!p->pages)
        return base_fail(STRATA_EINVAL, "%s: %s.pages is NULL", fn, what);
    if (p->page_rows == 0)
        return base_fail(STRATA_EINVAL, "%s: %s.page_rows is 0", fn, what);
    if (p->num_pages != pages_for(h->num_rows, p->page_rows))
        return base_fail(
            STRATA_EINVAL,
            "%s: %s has %zu pages; %llu rows in pages of %llu "
            "rows need %llu",
            fn, what, p->num_pages, (unsigned long long)h->num_rows,
            (unsigned long long)p->page_rows,
            (unsigned long long)pages_for(h->num_rows, p->page_rows));
    for (size_t k = 0; k < p->num_pages; k++) {
        uint64_t b = k * p->page_rows;
        uint64_t e = page_end(b, p->page_rows, h->num_rows);
        size_t need = (size_t)(e - b) * h->row_bytes;

        if (!p->pages[k])
            return base_fail(STRATA_EINVAL, "%s: %s page %zu is NULL", fn, what,
                             k);
        if (strata_buffer_size(p->pages[k]) < need)
            return base_fail(STRATA_EINVAL,
                             "%s: %s page %zu has %zu bytes; its %llu rows "
                             "need %zu",
                             fn, what, k, strata_buffer_size(p->pages[k]),
                             (unsigned long long)(e - b), need);
    }
    return STRATA_OK;
}

/* No buffer twice among out's pages, nor in both lists. */
/* A sorted copy of p's buffers; NULL (the error set) when out of memory. */
static strata_buffer **sorted_pages(const strata_halo_pages *p)
{
    strata_buffer **all = base_malloc((p->num_pages + 1) * sizeof(*all));

    if (!all) {
        base_fail(STRATA_ENOMEM, "strata_halo_forward_pages: out of memory");
        return NULL;
    }
    memcpy(all, p->pages, p->num_pages * sizeof(*all));
    qsort(all, p->num_pages, sizeof(*all), cmp_ptr);
    return all;
}

/* No buffer twice in a list (each page lies at byte 0 of its own), nor
 * in both lists. */
static strata_err check_distinct(const strata_halo_pages *x,
                                 const strata_halo_pages *out)
{
    strata_buffer **xs = sorted_pages(x), **os = xs ? sorted_pages(out) : NULL;
    strata_err err = os ? STRATA_OK : STRATA_ENOMEM;

    for (size_t k = 1; k < x->num_pages && !err; k++)
        if (xs[k] == xs[k - 1])
            err = base_fail(STRATA_EINVAL, "strata_halo_forward_pages: one "
                                           "buffer holds two pages of x");
    for (size_t k = 1; k < out->num_pages && !err; k++)
        if (os[k] == os[k - 1])
            err = base_fail(STRATA_EINVAL, "strata_halo_forward_pages: one "
                                           "buffer holds two pages of out");
    for (size_t k = 0; k < x->num_pages && !err; k++)
        if (bsearch(&x->pages[k], os, out->num_pages, sizeof(*os), cmp_ptr))
            err = base_fail(STRATA_EINVAL,
                            "strata_halo_forward_pages: x page %zu is also a "
                            "page of out",
                            k);
    base_free(xs);
    base_free(os);
    return err;
}

static strata_err check_pages_call(strata_orch *o, strata_halo *h,
                                   const strata_halo_pages *x,
                                   const strata_halo_pages *out)
{
    strata_err err;

    if (!o || !h || !x || !out)
        return base_fail_null("strata_halo_forward_pages", !o   ? "orch"
                                                           : !h ? "h"
                                                           : !x ? "x"
                                                                : "out");
    if (h->groups)
        return base_fail(STRATA_ENOTSUP, "strata_halo_forward_pages: a "
                                         "global handle's fields are not "
                                         "paged; only local handles");
    if (strata_orch_worker(o) != h->w)
        return base_fail(STRATA_EINVAL,
                         "strata_halo_forward_pages: the handle belongs to "
                         "another worker than this orch fn's");
    /* Under LRU the plan may have been spilled: this restores it (every
     * task reads it). */
    if (!strata_buffer_data(h->plan)) {
        base_errmsg_prefix("strata_halo_forward_pages: the handle's plan "
                           "cannot be restored");
        return STRATA_EIO;
    }
    err = check_list(h, x, "x");
    if (!err)
        err = check_list(h, out, "out");
    if (!err && x->num_pages > HALO_PAGES_MAX_X)
        err = base_fail(STRATA_EINVAL,
                        "strata_halo_forward_pages: x has %zu pages; at most "
                        "%u",
                        x->num_pages, HALO_PAGES_MAX_X);
    if (!err)
        err = check_distinct(x, out);
    return err;
}

/* The first page of x at or after k (of n) that bits names, or n. */
static size_t next_page(const uint64_t *bits, size_t k, size_t n)
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

/* One task: rank r's rows of out's page p. */
struct page_task {
    uint32_t r;
    uint64_t page, lo, hi; /* rows [lo, hi) */
    const uint64_t *bits;
    size_t reads; /* pages of x set in bits */
    size_t bytes; /* of the pages it names */
};

static void task_at(const strata_halo *h, const strata_halo_pages *x,
                    const strata_halo_pages *out, uint32_t r, uint64_t s,
                    struct page_task *t)
{
    const struct halo_page_needs *n = h->needs;
    const struct halo_rank_plan *rp = rank_plan(strata_buffer_data(h->plan), r);
    uint64_t pb;

    t->r = r;
    t->page = n->first[r] + s;
    pb = t->page * out->page_rows;
    t->lo = pb > rp->owned_begin ? pb : rp->owned_begin;
    t->hi = page_end(pb, out->page_rows, rp->owned_end);
    t->bits = slot_bits(n, r, t->page);
    t->reads = 0;
    t->bytes =
        strata_buffer_size(out->pages[t->page]) + strata_buffer_size(h->plan);
    for (size_t k = next_page(t->bits, 0, x->num_pages); k < x->num_pages;
         k = next_page(t->bits, k + 1, x->num_pages)) {
        t->reads++;
        t->bytes += strata_buffer_size(x->pages[k]);
    }
}

/* Every task within the limits: its reads, and its bytes on the budget. */
static strata_err check_tasks(strata_halo *h, const strata_halo_pages *x,
                              const strata_halo_pages *out)
{
    strata_tier_report rep;
    uint64_t budget = UINT64_MAX;
    struct page_task t;

    if (strata_worker_memory_report(h->w, &rep) == STRATA_OK)
        budget = rep.tiers[STRATA_TIER_RAM].budget;
    for (uint32_t r = 0; r < h->world; r++)
        for (uint64_t s = 0; s < h->needs->count[r]; s++) {
            task_at(h, x, out, r, s, &t);
            if (t.reads > STRATA_HALO_PAGES_MAX_READ)
                return base_fail(STRATA_EINVAL,
                                 "strata_halo_forward_pages: rank %u's rows "
                                 "in page %llu of out read %zu pages of x; "
                                 "a task reads at most %d (make the pages "
                                 "larger)",
                                 r, (unsigned long long)t.page, t.reads,
                                 STRATA_HALO_PAGES_MAX_READ);
            if (t.bytes > budget)
                return base_fail(STRATA_EBUDGET,
                                 "strata_halo_forward_pages: rank %u's task "
                                 "for page %llu of out names %zu bytes (its "
                                 "pages and the handle's plan), over the "
                                 "ram budget of %llu bytes (make the pages "
                                 "smaller)",
                                 r, (unsigned long long)t.page, t.bytes,
                                 (unsigned long long)budget);
        }
    return STRATA_OK;
}

static strata_err task_args(const strata_halo *h, const strata_halo_pages *x,
                            const strata_halo_pages *out,
                            const struct page_task *t, strata_args *a)
{
    const struct halo_plan_hdr *hdr = strata_buffer_data(h->plan);
    size_t ro_shape[1] = {hdr->ro_size};
    uint64_t pb = t->page * out->page_rows, packed = 0;
    size_t named = 0;
    strata_err err;

    strata_args_clear(a);
    err = strata_args_add_tensor(a, h->plan, 0, STRATA_U8, 1, ro_shape,
                                 STRATA_IN);
    if (!err) {
        const size_t shape[2] = {(size_t)(t->hi - t->lo), h->spec.features};

        err = strata_args_add_tensor(a, out->pages[t->page],
                                     (size_t)(t->lo - pb) * h->row_bytes,
                                     h->spec.dtype, 2, shape, STRATA_OUT);
    }
    for (size_t k = next_page(t->bits, 0, x->num_pages);
         k < x->num_pages && !err;
         k = next_page(t->bits, k + 1, x->num_pages)) {
        uint64_t b = k * x->page_rows;
        uint64_t e = page_end(b, x->page_rows, h->num_rows);
        const size_t shape[2] = {(size_t)(e - b), h->spec.features};

        err = strata_args_add_tensor(a, x->pages[k], 0, h->spec.dtype, 2, shape,
                                     STRATA_IN);
    }
    if (!err)
        err = strata_args_add_scalar(a, t->r);
    if (!err)
        err = strata_args_add_scalar(a, t->lo);
    if (!err)
        err = strata_args_add_scalar(a, t->hi);
    if (!err)
        err = strata_args_add_scalar(a, x->page_rows);
    if (!err)
        err = strata_args_add_scalar(a, x->num_pages);
    if (!err)
        err = strata_args_add_scalar(a, t->reads);
    for (size_t k = next_page(t->bits, 0, x->num_pages);
         k < x->num_pages && !err;
         k = next_page(t->bits, k + 1, x->num_pages)) {
        packed |= (uint64_t)k << (16 * (named % HALO_PAGES_PER_SCALAR));
        if (++named % HALO_PAGES_PER_SCALAR == 0) {
            err = strata_args_add_scalar(a, packed);
            packed = 0;
        }
    }
    if (!err && named % HALO_PAGES_PER_SCALAR)
        err = strata_args_add_scalar(a, packed);
    return err;
}

/* Steps [s0, s1): each rank's s-th task, rank by rank. */
static strata_err submit_steps(strata_orch *o, strata_halo *h,
                               const strata_halo_pages *x,
                               const strata_halo_pages *out, uint64_t s0,
                               uint64_t s1, strata_args *a)
{
    strata_err err = strata_orch_scope_begin(o);
    strata_err end;
    struct page_task t;

    if (err)
        return err;
    for (uint64_t s = s0; s < s1 && !err; s++)
        for (uint32_t r = 0; r < h->world && !err; r++) {
            if (s >= h->needs->count[r])
                continue;
            task_at(h, x, out, r,
                    h->needs->down ? h->needs->count[r] - 1 - s : s, &t);
            err = task_args(h, x, out, &t, a);
            if (!err)
                err = strata_orch_submit_next_level(o, halo_pages_kernel(), a,
                                                    h->chips[r]);
        }
    /* The scope must close even when a submit failed. */
    end = strata_orch_scope_end(o);
    return err ? err : end;
}

strata_err strata_halo_forward_pages(strata_orch *o, strata_halo *h,
                                     const strata_halo_pages *x,
                                     const strata_halo_pages *out,
                                     size_t prefetch)
{
    uint64_t steps = 0;
    strata_args *a = NULL;
    strata_err err;

    err = check_pages_call(o, h, x, out);
    if (!err)
        err = halo_busy_take(h);
    if (err)
        return err;
    err = check_store(h);
    if (!err)
        err = needs_get(h, x->page_rows, out->page_rows);
    if (!err)
        err = check_tasks(h, x, out);
    if (!err)
        err = strata_args_create(&a);
    for (uint32_t r = 0; r < h->world && !err; r++)
        steps = h->needs->count[r] > steps ? h->needs->count[r] : steps;
    for (uint64_t s = 0; s < steps && !err;) {
        uint64_t e =
            prefetch == 0 || steps - s <= prefetch ? steps : s + prefetch;

        err = submit_steps(o, h, x, out, s, e, a);
        s = e;
    }
    if (h->needs)
        h->needs->down = !h->needs->down;
    strata_args_destroy(a);
    __atomic_store_n(&h->busy, 0, __ATOMIC_RELEASE);
    return err;
}
