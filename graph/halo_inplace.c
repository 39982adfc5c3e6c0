/* The chip side of STRATA_HALO_IN_PLACE: rank r computes its owned rows
 * reading every source row where it lies in the whole input field, so
 * nothing is exchanged and no domain is needed.
 *
 * Forward: the rank's rows, interior rows (every source owned) first and
 * then boundary rows, timed apart, each one halo_rowsum over its sources
 * in order: the plain loop's bits.
 *
 * VJP: grad_x of an owned row j is the sum, over every entry (i, j) of
 * the whole graph in row order, of w_i * grad_out_i. The entries naming
 * the rank's rows are gathered once per plan into a transposed index
 * (every rank's rows are read: the plan's, or the store's), kept in the
 * chip's halo cache (halo_cache.h) beside the exchange kernels' arrays.
 * The terms are added in the order the one-chip scatter adds them, so the
 * bits do not depend on the number of chips. */
#include "base/alloc.h"
#include "base/clock.h"
#include "base/env.h"
#include "base/err.h"
#include "halo_cache.h"
#include "halo_exec_int.h"
#include "halo_kernel.h"
#include "rowsum.h"
#include "trace/trace.h"

#include <stdio.h>
#include <string.h>

/* Rows of a store read at a time while the transposed index is built. */
#define INPLACE_CHUNK_ROWS 16384

/* A rank's index for one direction of one plan. */
struct inplace_index {
    size_t bytes;
    /* Forward: the rank's rows (a store's, or NULL: the plan's) and its
     * rows in compute order, interior first. */
    int64_t *rows;
    int64_t *cols;
    uint64_t *order;
    /* VJP: owned row q's terms are [tptr[q], tptr[q + 1]) of tsrc (the
     * reading row) and, for a mean, tw (1 / that row's degree). */
    int64_t *tptr;
    uint64_t *tsrc;
    double *tw;
    uint64_t num_interior;
    uint64_t boundary_edges;
    /* VJP: the index would not fit the cache, so every call scatters
     * from the whole graph instead (same terms, same order). */
    bool scatter;
};

struct inplace_task {
    const char *plan;
    const struct halo_plan_hdr *hdr;
    const struct halo_rank_plan *rp;
    struct halo_stats *stats;
    uint32_t rank;
    bool vjp;
    strata_dtype dtype;
    size_t features, rb;
    uint64_t rows;
    const char *in; /* the whole field */
    char *out;      /* the owned rows */
    const struct halo_edge_entry *edge;
    struct inplace_index ix; /* this call's (a copy of a cache entry's) */
};

static const struct halo_rank_plan *rank_plan(const struct inplace_task *t,
                                              uint64_t r)
{
    return halo_plan_rank(t->plan, r);
}

static strata_err nomem(const struct inplace_task *t)
{
    return base_fail(STRATA_ENOMEM,
                     "halo in-place kernel: rank %u: out of "
                     "memory",
                     t->rank);
}

static void index_free(struct inplace_index *ix)
{
    base_free(ix->rows);
    base_free(ix->cols);
    base_free(ix->order);
    base_free(ix->tptr);
    base_free(ix->tsrc);
    base_free(ix->tw);
    memset(ix, 0, sizeof(*ix));
}

/* Tensors: the plan, the rank's stats slot, then the whole input field
 * when the graph has rows and the owned rows of the output when the rank
 * has some. Scalars: the rank, then 1 for the VJP. */
static strata_err task_open(strata_chip *chip, const strata_args *args,
                            struct inplace_task *t)
{
    size_t nt = strata_args_num_tensors(args);

    memset(t, 0, sizeof(*t));
    if (nt < 2 || strata_args_num_scalars(args) != 2)
        return base_fail(STRATA_EINVAL, "halo in-place kernel: malformed "
                                        "arguments");
    t->plan = strata_args_tensor_data(args, 0);
    t->hdr = (const struct halo_plan_hdr *)t->plan;
    t->stats = strata_args_tensor_data(args, 1);
    t->rank = (uint32_t)strata_args_scalar(args, 0);
    t->vjp = strata_args_scalar(args, 1) != 0;
    if (t->hdr->magic != HALO_PLAN_MAGIC ||
        t->hdr->version != HALO_PLAN_VERSION || t->rank >= t->hdr->world)
        return base_fail(STRATA_EINVAL, "halo in-place kernel: not a halo "
                                        "plan, or no such rank");
    t->rp = rank_plan(t, t->rank);
    t->rows = t->rp->owned_end - t->rp->owned_begin;
    if (nt != 2u + (t->hdr->num_rows > 0) + (t->rows > 0))
        return base_fail(STRATA_EINVAL,
                         "halo in-place kernel: rank %u owns %llu rows but "
                         "has %zu tensors",
                         t->rank, (unsigned long long)t->rows, nt);
    if (t->hdr->num_rows > 0)
        t->in = strata_args_tensor_data(args, 2);
    if (t->rows > 0)
        t->out = strata_args_tensor_data(args, 3);
    t->dtype = (strata_dtype)t->hdr->dtype;
    t->features = (size_t)t->hdr->features;
    t->rb = t->features * strata_dtype_size(t->dtype);
    if (t->hdr->reducer == STRATA_HALO_EDGE) {
        t->edge = halo_edge_find(t->hdr->edge_name);
        if (!t->edge)
            return base_fail(STRATA_ENOENT,
                             "halo in-place kernel: edge kernel '%s' is not "
                             "registered in chip %d",
                             t->hdr->edge_name, strata_chip_id(chip));
        if (t->vjp && !t->edge->vjp)
            return base_fail(STRATA_ENOTSUP,
                             "halo: edge kernel '%s' has no vjp",
                             t->edge->name);
    }
    return STRATA_OK;
}

/* ---- reading rows: the plan's, or a store's in chunks ---- */

struct row_reader {
    const struct inplace_task *t;
    strata_gfg *g;
    int64_t *rows; /* a chunk's offsets (store) */
    int64_t *cols; /* its ids (store) */
    size_t cap;
};

static strata_err reader_open(const struct inplace_task *t,
                              struct row_reader *rd)
{
    char who[64];

    memset(rd, 0, sizeof(*rd));
    rd->t = t;
    if (t->hdr->gfg_path_off == 0)
        return STRATA_OK;
    snprintf(who, sizeof(who), "halo in-place kernel: rank %u", t->rank);
    rd->rows = base_malloc((INPLACE_CHUNK_ROWS + 1) * sizeof(int64_t));
    if (!rd->rows)
        return nomem(t);
    return halo_store_open(t->plan, who, &rd->g);
}

static void reader_close(struct row_reader *rd)
{
    strata_gfg_close(rd->g);
    base_free(rd->rows);
    base_free(rd->cols);
}

/* Rows [a, z) (of one rank, when the plan holds them): their offsets
 * (*rp, from (*rp)[0]) and ids (*cols). */
static strata_err reader_load(struct row_reader *rd, uint64_t a, uint64_t z,
                              const int64_t **rp, const int64_t **cols)
{
    uint64_t n = 0;
    strata_err err;

    if (!rd->g) {
        const struct halo_rank_plan *q = halo_plan_rank(rd->t->plan, 0);

        while (a >= q->owned_end)
            q++;
        *rp = (const int64_t *)(rd->t->plan + q->row_ptr_off) +
              (a - q->owned_begin);
        *cols = (const int64_t *)(rd->t->plan + q->col_off) + (*rp)[0];
        return STRATA_OK;
    }
    err = strata_gfg_row_edges(rd->g, a, z, &n);
    if (!err && n > rd->cap) {
        base_free(rd->cols);
        rd->cols = base_malloc((size_t)n * sizeof(int64_t));
        rd->cap = rd->cols ? (size_t)n : 0;
        if (!rd->cols)
            err = nomem(rd->t);
    }
    if (!err)
        err = strata_gfg_read_rows(rd->g, a, z, rd->rows, rd->cols, rd->cap);
    *rp = rd->rows;
    *cols = rd->cols;
    return err;
}

/* The next chunk [a, z) from a: within one rank's rows for a plan. */
static uint64_t chunk_end(const struct row_reader *rd, uint64_t a)
{
    const struct halo_plan_hdr *hdr = rd->t->hdr;
    uint64_t z = hdr->num_rows - a < INPLACE_CHUNK_ROWS
                     ? hdr->num_rows
                     : a + INPLACE_CHUNK_ROWS;

    if (!rd->g) {
        const struct halo_rank_plan *q = halo_plan_rank(rd->t->plan, 0);

        while (a >= q->owned_end)
            q++;
        if (z > q->owned_end)
            z = q->owned_end;
    }
    return z;
}

/* ---- the forward index ---- */

static strata_err build_forward(struct inplace_task *t)
{
    struct inplace_index *ix = &t->ix;
    uint64_t b = t->rp->owned_begin, e = t->rp->owned_end, nb = 0;
    const int64_t *rp, *cols;
    strata_err err = STRATA_OK;

    ix->order = base_malloc((t->rows + 1) * sizeof(uint64_t));
    if (!ix->order)
        return nomem(t);
    if (t->hdr->gfg_path_off) {
        struct row_reader rd;

        ix->rows = base_malloc((t->rows + 1) * sizeof(int64_t));
        ix->cols = base_malloc((t->rp->nnz + 1) * sizeof(int64_t));
        if (!ix->rows || !ix->cols)
            return nomem(t);
        err = reader_open(t, &rd);
        if (!err && t->rows > 0)
            err = strata_gfg_read_rows(rd.g, b, e, ix->rows, ix->cols,
                                       (size_t)t->rp->nnz);
        if (!err && t->rows > 0 && (uint64_t)ix->rows[t->rows] != t->rp->nnz)
            err = base_fail(STRATA_EINVAL,
                            "halo in-place kernel: rank %u: the store "
                            "changed since the plan was made",
                            t->rank);
        reader_close(&rd);
        if (err)
            return err;
    }
    rp = ix->rows ? ix->rows : (const int64_t *)(t->plan + t->rp->row_ptr_off);
    cols = ix->cols ? ix->cols : (const int64_t *)(t->plan + t->rp->col_off);
    for (uint64_t i = 0; i < t->rows; i++) {
        bool boundary = false;

        for (int64_t k = rp[i]; k < rp[i + 1] && !boundary; k++)
            boundary = (uint64_t)cols[k] < b || (uint64_t)cols[k] >= e;
        /* Boundary rows from the end, then turned around: both kinds
         * ascend, so the row stream runs forward. */
        if (boundary) {
            ix->order[t->rows - 1 - nb++] = i;
            ix->boundary_edges += (uint64_t)(rp[i + 1] - rp[i]);
        } else {
            ix->order[ix->num_interior++] = i;
        }
    }
    for (uint64_t a = ix->num_interior, z = t->rows; a + 1 < z; a++, z--) {
        uint64_t tmp = ix->order[a];

        ix->order[a] = ix->order[z - 1];
        ix->order[z - 1] = tmp;
    }
    ix->bytes = (t->rows + 1) * sizeof(uint64_t);
    if (ix->cols)
        ix->bytes += (t->rows + 1 + t->rp->nnz) * sizeof(int64_t);
    return STRATA_OK;
}

/* ---- the transposed (VJP) index ---- */

/* Every entry of every row [0, N), in row order: pass 0 counts the
 * entries naming the rank's rows, pass 1 places them. */
static strata_err transpose_pass(struct inplace_task *t, struct row_reader *rd,
                                 int pass, int64_t *fill)
{
    struct inplace_index *ix = &t->ix;
    uint64_t b = t->rp->owned_begin, e = t->rp->owned_end;
    bool mean = t->hdr->reducer == STRATA_HALO_MEAN;
    strata_err err = STRATA_OK;

    for (uint64_t a = 0; a < t->hdr->num_rows && !err;) {
        uint64_t z = chunk_end(rd, a);
        const int64_t *rp, *cols;

        err = reader_load(rd, a, z, &rp, &cols);
        for (uint64_t i = a; i < z && !err; i++) {
            int64_t lo = rp[i - a], hi = rp[i - a + 1];

            for (int64_t k = lo; k < hi; k++) {
                uint64_t j = (uint64_t)cols[k - rp[0]];

                if (j < b || j >= e)
                    continue;
                if (pass == 0) {
                    ix->tptr[j - b + 1]++;
                    continue;
                }
                ix->tsrc[fill[j - b]] = i;
                if (mean)
                    ix->tw[fill[j - b]] = 1.0 / (double)(hi - lo);
                fill[j - b]++;
            }
        }
        a = z;
    }
    return err;
}

/* STRATA_HALO_STREAM (the tests' knob for the paths of indices too
 * large to keep) makes every in-place VJP scatter. */
static bool scatter_forced(void)
{
    static int forced = -1;

    if (forced < 0)
        forced = base_env_flag("STRATA_HALO_STREAM");
    return forced != 0;
}

static strata_err build_vjp(struct inplace_task *t)
{
    struct inplace_index *ix = &t->ix;
    bool mean = t->hdr->reducer == STRATA_HALO_MEAN;
    struct row_reader rd;
    int64_t *fill = NULL;
    uint64_t n;
    strata_err err;

    ix->tptr = base_calloc(t->rows + 1, sizeof(int64_t));
    if (!ix->tptr)
        return nomem(t);
    err = reader_open(t, &rd);
    if (!err)
        err = transpose_pass(t, &rd, 0, NULL);
    for (uint64_t q = 0; q < t->rows && !err; q++)
        ix->tptr[q + 1] += ix->tptr[q];
    n = (uint64_t)ix->tptr[t->rows];
    ix->bytes = (t->rows + 1) * sizeof(int64_t) +
                (n + 1) * (sizeof(uint64_t) + (mean ? sizeof(double) : 0));
    if (!err && (ix->bytes > halo_cache_cap() || scatter_forced())) {
        /* Built again by every call, it would cost more than it saves. */
        base_free(ix->tptr);
        ix->tptr = NULL;
        ix->bytes = 0;
        ix->scatter = true;
        reader_close(&rd);
        return STRATA_OK;
    }
    if (!err) {
        ix->tsrc = base_malloc((n + 1) * sizeof(uint64_t));
        ix->tw = mean ? base_malloc((n + 1) * sizeof(double)) : NULL;
        fill = base_malloc((t->rows + 1) * sizeof(int64_t));
        if (!ix->tsrc || (mean && !ix->tw) || !fill)
            err = nomem(t);
    }
    if (!err) {
        memcpy(fill, ix->tptr, (t->rows + 1) * sizeof(int64_t));
        err = transpose_pass(t, &rd, 1, fill);
    }
    /* A store that changed between the passes would leave holes. */
    for (uint64_t q = 0; q < t->rows && !err; q++)
        if (fill[q] != ix->tptr[q + 1])
            err = base_fail(STRATA_EINVAL,
                            "halo in-place kernel: rank %u: the store "
                            "changed since the plan was made",
                            t->rank);
    base_free(fill);
    reader_close(&rd);
    return err;
}

/* ---- the cache ---- */

static struct halo_cache_key key_of(const struct inplace_task *t)
{
    return (struct halo_cache_key){t->hdr->plan_id, t->rank,
                                   t->vjp ? HALO_CACHE_INPLACE_VJP
                                          : HALO_CACHE_INPLACE_FWD};
}

static void index_drop(void *data)
{
    index_free(data);
    base_free(data);
}

/* Keeps t's index in the chip's halo cache; false when it is not kept
 * (too large, or no memory for the entry). */
static bool index_keep(struct inplace_task *t)
{
    struct inplace_index *s = base_malloc(sizeof(*s));

    if (!s)
        return false;
    *s = t->ix;
    if (halo_cache_keep(key_of(t), s, s->bytes, index_drop))
        return true;
    base_free(s);
    return false;
}

/* t->ix from the cache (*cached) or built. */
static strata_err index_get(struct inplace_task *t, bool *cached)
{
    const struct inplace_index *s = halo_cache_find(key_of(t));
    char who[64];

    *cached = false;
    if (s) {
        snprintf(who, sizeof(who), "halo in-place kernel: rank %u", t->rank);
        t->ix = *s;
        *cached = true;
        return halo_store_same(t->plan, who);
    }
    return t->vjp ? build_vjp(t) : build_forward(t);
}

/* ---- the work ---- */

static void forward_edge_rows(const struct inplace_task *t, const int64_t *rp,
                              const int64_t *cols, const uint64_t *order,
                              uint64_t count)
{
    for (uint64_t q = 0; q < count; q++) {
        uint64_t i = order[q];
        char *acc = t->out + i * t->rb;

        memset(acc, 0, t->rb);
        for (int64_t k = rp[i]; k < rp[i + 1]; k++)
            t->edge->forward((int64_t)(t->rp->owned_begin + i), cols[k],
                             t->dtype, t->features,
                             t->in + (uint64_t)cols[k] * t->rb, acc);
    }
}

static void forward_rows(const struct inplace_task *t, const uint64_t *order,
                         uint64_t count)
{
    const int64_t *rp = t->ix.rows
                            ? t->ix.rows
                            : (const int64_t *)(t->plan + t->rp->row_ptr_off);
    const int64_t *cols =
        t->ix.cols ? t->ix.cols : (const int64_t *)(t->plan + t->rp->col_off);
    /* Ids are non-negative: the same bits as uint64_t. */
    struct halo_csr_rows cr = {.rows = order,
                               .count = count,
                               .row_ptr = rp,
                               .idx = (const uint64_t *)cols,
                               .base = t->in,
                               .stride = t->rb,
                               .out = t->out,
                               .mean = t->hdr->reducer == STRATA_HALO_MEAN};

    if (count == 0)
        return;
    if (t->edge)
        forward_edge_rows(t, rp, cols, order, count);
    else
        halo_rowsum_csr(t->dtype, t->features, &cr);
}

static void forward(struct inplace_task *t)
{
    int64_t mid;

    forward_rows(t, t->ix.order, t->ix.num_interior);
    mid = (int64_t)base_now_ns();
    forward_rows(t, t->ix.order + t->ix.num_interior,
                 t->rows - t->ix.num_interior);
    t->stats->boundary_ns = (int64_t)base_now_ns() - mid;
    t->stats->boundary_edges = t->ix.boundary_edges;
}

/* The VJP without an index: every row of the graph, in order, scatters
 * into the rank's rows the terms that name them. */
static strata_err vjp_scatter(struct inplace_task *t)
{
    uint64_t b = t->rp->owned_begin, e = t->rp->owned_end;
    struct row_reader rd;
    strata_err err;

    if (t->rows > 0)
        memset(t->out, 0, t->rows * t->rb);
    err = reader_open(t, &rd);
    for (uint64_t a = 0; a < t->hdr->num_rows && t->rows > 0 && !err;) {
        uint64_t z = chunk_end(&rd, a);
        const int64_t *rp, *cols;

        err = reader_load(&rd, a, z, &rp, &cols);
        if (!err && !t->edge) {
            /* Entry k of the chunk's rows is cols[k - rp[0]]. */
            const struct halo_scatter_csr cs = {
                .row0 = 0,
                .count = (size_t)(z - a),
                .row_ptr = rp,
                .loc = (const uint64_t *)cols - rp[0],
                .first = b,
                .end = e,
                .base = t->out,
                .stride = t->rb,
                .g = t->in + a * t->rb,
                .mean = t->hdr->reducer == STRATA_HALO_MEAN,
            };

            halo_rowaxpy_csr(t->dtype, t->features, &cs);
        }
        for (uint64_t i = a; i < z && !err && t->edge; i++)
            for (int64_t k = rp[i - a]; k < rp[i - a + 1]; k++) {
                uint64_t j = (uint64_t)cols[k - rp[0]];

                if (j >= b && j < e)
                    t->edge->vjp((int64_t)i, (int64_t)j, t->dtype, t->features,
                                 t->in + i * t->rb, t->out + (j - b) * t->rb);
            }
        a = z;
    }
    reader_close(&rd);
    return err;
}

static void vjp(struct inplace_task *t)
{
    const struct inplace_index *ix = &t->ix;
    struct halo_gather_csr gc = {.count = (size_t)t->rows,
                                 .ptr = ix->tptr,
                                 .src = ix->tsrc,
                                 .w = ix->tw,
                                 .g = t->in,
                                 .out = t->out,
                                 .stride = t->rb};

    if (t->rows == 0)
        return;
    if (!t->edge) {
        halo_rowgather_csr(t->dtype, t->features, &gc);
        return;
    }
    for (uint64_t q = 0; q < t->rows; q++) {
        char *acc = t->out + q * t->rb;

        memset(acc, 0, t->rb);
        for (int64_t k = ix->tptr[q]; k < ix->tptr[q + 1]; k++)
            t->edge->vjp((int64_t)ix->tsrc[k],
                         (int64_t)(t->rp->owned_begin + q), t->dtype,
                         t->features, t->in + ix->tsrc[k] * t->rb, acc);
    }
}

strata_err halo_kernel_inplace(strata_chip *chip, const strata_args *args)
{
    struct inplace_task t;
    bool cached = false;
    int64_t start;
    strata_err err = task_open(chip, args, &t);

    if (err)
        return err;
    memset(t.stats, 0, sizeof(*t.stats));
    start = (int64_t)base_now_ns();
    err = index_get(&t, &cached);
    if (!err) {
        t.stats->exchange_start_ns = start;
        t.stats->exchange_end_ns = start;
        t.stats->wait_end_ns = start;
        t.stats->compute_start_ns = (int64_t)base_now_ns();
        if (t.vjp && t.ix.scatter)
            err = vjp_scatter(&t);
        else if (t.vjp)
            vjp(&t);
        else
            forward(&t);
    }
    if (!err) {
        t.stats->compute_end_ns = (int64_t)base_now_ns();
        t.stats->interior_rows = t.vjp ? 0 : t.ix.num_interior;
        t.stats->boundary_rows = t.vjp ? 0 : t.rows - t.ix.num_interior;
        t.stats->edges = t.rp->nnz;
        if (trace_enabled())
            trace_record_ns(
                TRACE_K_SPAN, TRACE_CAT_HALO, TRACE_LANE_HALO_COMPUTE,
                (uint64_t)t.stats->compute_start_ns,
                (uint64_t)t.stats->compute_end_ns, t.rank, t.stats->edges, 0, 0,
                t.vjp ? "halo vjp in place" : "halo in place");
        __atomic_store_n(&t.stats->done, 1, __ATOMIC_RELEASE);
    }
    if (!cached && (err || !index_keep(&t)))
        index_free(&t.ix);
    return err;
}
