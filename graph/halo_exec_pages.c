/* strata_halo_forward_pages: the forward over fields held as pages, one
 * task per rank and page of out, each naming only the pages of x its
 * rows read, so that a worker under a ram budget spills and restores
 * pages instead of holding both fields. The pages each task reads are
 * found once per pair of page sizes (halo_pages_needs.c); the rows are
 * computed by halo_pages_kernel.c. */
#include "base/alloc.h"
#include "base/err.h"
#include "halo_pages.h"

#include <strata/tier.h>

#include <stdlib.h>
#include <string.h>

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
    if (p->num_pages != halo_pages_for(h->num_rows, p->page_rows))
        return base_fail(
            STRATA_EINVAL,
            "%s: %s has %zu pages; %llu rows in pages of %llu "
            "rows need %llu",
            fn, what, p->num_pages, (unsigned long long)h->num_rows,
            (unsigned long long)p->page_rows,
            (unsigned long long)halo_pages_for(h->num_rows, p->page_rows));
    for (size_t k = 0; k < p->num_pages; k++) {
        uint64_t b = k * p->page_rows;
        uint64_t e = halo_page_end(b, p->page_rows, h->num_rows);
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
    const struct halo_rank_plan *rp =
        halo_plan_rank(strata_buffer_data(h->plan), r);
    uint64_t pb;

    t->r = r;
    t->page = n->first[r] + s;
    pb = t->page * out->page_rows;
    t->lo = pb > rp->owned_begin ? pb : rp->owned_begin;
    t->hi = halo_page_end(pb, out->page_rows, rp->owned_end);
    t->bits = halo_needs_bits(n, r, t->page);
    t->reads = 0;
    t->bytes =
        strata_buffer_size(out->pages[t->page]) + strata_buffer_size(h->plan);
    for (size_t k = halo_next_page(t->bits, 0, x->num_pages); k < x->num_pages;
         k = halo_next_page(t->bits, k + 1, x->num_pages)) {
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
    uint64_t pb = t->page * out->page_rows, packed = 0;
    size_t named = 0;
    strata_err err;

    strata_args_clear(a);
    err = halo_add_plan(a, h);
    if (!err) {
        const size_t shape[2] = {(size_t)(t->hi - t->lo), h->spec.features};

        err = strata_args_add_tensor(a, out->pages[t->page],
                                     (size_t)(t->lo - pb) * h->row_bytes,
                                     h->spec.dtype, 2, shape, STRATA_OUT);
    }
    for (size_t k = halo_next_page(t->bits, 0, x->num_pages);
         k < x->num_pages && !err;
         k = halo_next_page(t->bits, k + 1, x->num_pages)) {
        uint64_t b = k * x->page_rows;
        uint64_t e = halo_page_end(b, x->page_rows, h->num_rows);
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
    for (size_t k = halo_next_page(t->bits, 0, x->num_pages);
         k < x->num_pages && !err;
         k = halo_next_page(t->bits, k + 1, x->num_pages)) {
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
    err = halo_store_same(strata_buffer_data(h->plan),
                          "strata_halo_forward_pages");
    if (!err)
        err = halo_needs_get(h, x->page_rows, out->page_rows);
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
