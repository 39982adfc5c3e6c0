/* The chip side of strata_halo_forward_pages: rank r's rows [lo, hi) of
 * the forward, each source row read in place from the page of x it lies
 * in (the task names every page its rows read; halo_exec_pages.c). A row
 * is one halo_rowsum over its sources in order, then the scale (or the
 * edge kernel per entry): the whole-field kernel's arithmetic, so both
 * give the same bits. */
#include "base/alloc.h"
#include "base/err.h"
#include "halo_kernel.h"

#include <string.h>

/* Rows whose entries are located at a time. */
#define PAGES_CHUNK_ROWS 16384

struct pages_task {
    struct rank_ctx c;
    uint64_t lo, hi;
    uint64_t x_rows;   /* rows per page of x */
    unsigned x_shift;  /* log2(x_rows) when a power of two, else 64 */
    const char **page; /* page k of x, NULL unless named */
    uint64_t num_pages;
    strata_gfg *g;    /* a paged plan's store */
    int64_t *rows;    /* a chunk's offsets, read from the store */
    int64_t *cols;    /* its entries' ids, read from the store */
    const void **src; /* entry k's source row */
    size_t cap;       /* entries src (and cols) hold */
};

static strata_err task_fail_nomem(const struct pages_task *t)
{
    return base_fail(STRATA_ENOMEM,
                     "halo pages kernel: rank %u: out of "
                     "memory",
                     t->c.rank);
}

/* The scalars and tensors (HALO_PAGES_SCALARS in halo_exec_int.h). */
static strata_err task_open(strata_chip *chip, const strata_args *args,
                            struct pages_task *t)
{
    size_t ns = strata_args_num_scalars(args);
    size_t nt = strata_args_num_tensors(args);
    uint64_t named;

    memset(t, 0, sizeof(*t));
    if (nt < 2 || ns < HALO_PAGES_SCALARS)
        return base_fail(STRATA_EINVAL,
                         "halo pages kernel: %zu tensors and "
                         "%zu scalars",
                         nt, ns);
    t->c.plan = strata_args_tensor_data(args, 0);
    t->c.hdr = (const struct halo_plan_hdr *)t->c.plan;
    t->c.rank = (uint32_t)strata_args_scalar(args, 0);
    t->lo = strata_args_scalar(args, 1);
    t->hi = strata_args_scalar(args, 2);
    t->x_rows = strata_args_scalar(args, 3);
    t->num_pages = strata_args_scalar(args, 4);
    named = strata_args_scalar(args, 5);
    if (t->c.hdr->magic != HALO_PLAN_MAGIC ||
        t->c.hdr->version != HALO_PLAN_VERSION ||
        t->c.rank >= t->c.hdr->world || t->x_rows == 0 ||
        t->num_pages > HALO_PAGES_MAX_X || named != nt - 2 ||
        ns < HALO_PAGES_SCALARS +
                 (named + HALO_PAGES_PER_SCALAR - 1) / HALO_PAGES_PER_SCALAR)
        return base_fail(STRATA_EINVAL, "halo pages kernel: malformed "
                                        "arguments");
    t->c.rp = halo_k_rank_plan(&t->c, t->c.rank);
    if (t->lo > t->hi || t->lo < t->c.rp->owned_begin ||
        t->hi > t->c.rp->owned_end)
        return base_fail(STRATA_EINVAL,
                         "halo pages kernel: rows [%llu, %llu) outside rank "
                         "%u's",
                         (unsigned long long)t->lo, (unsigned long long)t->hi,
                         t->c.rank);
    t->c.dtype = (strata_dtype)t->c.hdr->dtype;
    t->c.features = (size_t)t->c.hdr->features;
    t->c.rb = t->c.features * strata_dtype_size(t->c.dtype);
    t->c.out = strata_args_tensor_data(args, 1);
    t->x_shift = 64;
    for (unsigned b = 0; b < 63; b++)
        if (t->x_rows == (uint64_t)1 << b)
            t->x_shift = b;
    if (t->c.hdr->reducer == STRATA_HALO_EDGE) {
        t->c.edge = halo_edge_find(t->c.hdr->edge_name);
        if (!t->c.edge)
            return base_fail(STRATA_ENOENT,
                             "halo pages kernel: edge kernel '%s' is not "
                             "registered in chip %d",
                             t->c.hdr->edge_name, strata_chip_id(chip));
    }
    t->page = base_calloc(t->num_pages + 1, sizeof(*t->page));
    if (!t->page)
        return task_fail_nomem(t);
    for (uint64_t i = 0; i < named; i++) {
        uint64_t s = strata_args_scalar(
            args, HALO_PAGES_SCALARS + (size_t)(i / HALO_PAGES_PER_SCALAR));
        uint64_t k = s >> (16 * (i % HALO_PAGES_PER_SCALAR)) & 0xffff;

        if (k >= t->num_pages)
            return base_fail(STRATA_EINVAL,
                             "halo pages kernel: page %llu "
                             "of %llu",
                             (unsigned long long)k,
                             (unsigned long long)t->num_pages);
        t->page[k] = strata_args_tensor_data(args, 2 + (size_t)i);
    }
    if (t->c.hdr->gfg_path_off)
        return halo_k_open_store(&t->c, &t->g);
    return STRATA_OK;
}

static void task_close(struct pages_task *t)
{
    strata_gfg_close(t->g);
    base_free(t->page);
    base_free(t->rows);
    base_free(t->cols);
    base_free(t->src);
}

/* Room for n entries in the per-entry arrays (cols only from a store). */
static strata_err task_reserve(struct pages_task *t, size_t n)
{
    if (n <= t->cap)
        return STRATA_OK;
    base_free(t->src);
    base_free(t->cols);
    t->cols = NULL;
    t->src = base_malloc(n * sizeof(*t->src));
    if (t->g)
        t->cols = base_malloc(n * sizeof(*t->cols));
    if (!t->src || (t->g && !t->cols)) {
        t->cap = 0;
        return task_fail_nomem(t);
    }
    t->cap = n;
    return STRATA_OK;
}

/* Rows [a, z): their offsets (*rp, from *rp[0]) and ids (*cols). */
static strata_err chunk_load(struct pages_task *t, uint64_t a, uint64_t z,
                             const int64_t **rp, const int64_t **cols)
{
    const struct rank_ctx *c = &t->c;
    uint64_t n = 0;
    strata_err err;

    if (!t->g) {
        const int64_t *row_ptr =
            (const int64_t *)(c->plan + c->rp->row_ptr_off);

        *rp = row_ptr + (a - c->rp->owned_begin);
        *cols = (const int64_t *)(c->plan + c->rp->col_off) + (*rp)[0];
        return task_reserve(t, (size_t)((*rp)[z - a] - (*rp)[0]));
    }
    err = strata_gfg_row_edges(t->g, a, z, &n);
    if (!err)
        err = task_reserve(t, (size_t)n);
    if (!err)
        err = strata_gfg_read_rows(t->g, a, z, t->rows, t->cols, t->cap);
    *rp = t->rows;
    *cols = t->cols;
    return err;
}

/* Where each of n entries' source row lies. */
static strata_err chunk_locate(struct pages_task *t, const int64_t *cols,
                               size_t n)
{
    for (size_t k = 0; k < n; k++) {
        uint64_t id = (uint64_t)cols[k];
        uint64_t p = t->x_shift < 64 ? id >> t->x_shift : id / t->x_rows;

        if (p >= t->num_pages || !t->page[p])
            return base_fail(STRATA_EINVAL,
                             "halo pages kernel: rank %u: source %llu lies "
                             "in page %llu of x, which the task does not "
                             "name",
                             t->c.rank, (unsigned long long)id,
                             (unsigned long long)p);
        t->src[k] = t->page[p] + (id - p * t->x_rows) * t->c.rb;
    }
    return STRATA_OK;
}

/* Output row i (global) from its n entries: ids cols, rows src. */
static void row(const struct pages_task *t, uint64_t i, const int64_t *cols,
                const void **src, size_t n)
{
    const struct rank_ctx *c = &t->c;
    char *acc = c->out + (i - t->lo) * c->rb;
    double w =
        c->hdr->reducer == STRATA_HALO_MEAN && n > 0 ? 1.0 / (double)n : 1.0;

    if (c->edge) {
        memset(acc, 0, c->rb);
        for (size_t k = 0; k < n; k++)
            c->edge->forward((int64_t)i, cols[k], c->dtype, c->features, src[k],
                             acc);
        if (w != 1.0)
            halo_k_row_scale(c, acc, w);
        return;
    }
    halo_rowsum(c->dtype, c->features, acc,
                &(struct halo_rows){(const void *const *)src, n}, true, w);
}

strata_err halo_kernel_forward_pages(strata_chip *chip, const strata_args *args)
{
    struct pages_task t;
    strata_err err = task_open(chip, args, &t);

    if (!err && t.g) {
        t.rows = base_malloc((PAGES_CHUNK_ROWS + 1) * sizeof(int64_t));
        if (!t.rows)
            err = task_fail_nomem(&t);
    }
    for (uint64_t a = t.lo; a < t.hi && !err;) {
        uint64_t z = t.hi - a < PAGES_CHUNK_ROWS ? t.hi : a + PAGES_CHUNK_ROWS;
        const int64_t *rp = NULL, *cols = NULL;

        err = chunk_load(&t, a, z, &rp, &cols);
        if (!err)
            err = chunk_locate(&t, cols, (size_t)(rp[z - a] - rp[0]));
        for (uint64_t i = a; i < z && !err; i++) {
            size_t k = (size_t)(rp[i - a] - rp[0]);
            size_t n = (size_t)(rp[i - a + 1] - rp[i - a]);

            /* A chunk without entries may have no arrays at all. */
            row(&t, i, n ? cols + k : NULL, n ? t.src + k : NULL, n);
        }
        a = z;
    }
    task_close(&t);
    return err;
}
