/*
 * bench_halo_billion: the billion-edge paged forward, run by hand (it needs
 * ~17 GiB of memory and ~5 GiB of disk; not part of any test).
 *
 * The workload of the reference system's headline result (FACTS.md): a
 * periodic graph of N = E / 16 rows, row i's sources i+o mod N for
 * o = -8..-1, 1..8; 32 float32 features per row; neighbour mean. The graph
 * lives in a .gfg store (int32 indices) that every chip pages its own rows
 * from; x and out are host buffers of N x 32 floats (8 GiB each at 1e9
 * edges). One warm-up call, then `calls` timed strata_halo_forward calls,
 * each in a run of its own; the median is reported. Sampled rows are
 * checked against the definition (integer inputs: every sum of the
 * 16-neighbour graphs is exact; the R-MAT graph's hub rows are checked
 * against the same float32 additions in the same order).
 *
 * --graph random: 16 sources per row, uniform (a hash of row and slot);
 * --graph rmat: a power-law R-MAT graph of the same edge count (rmat.h),
 * its sampled rows checked against the store's. The store must have been
 * written for the same graph (the DIR is reused as it is).
 *
 * --budget SIZE --spill-dir D: the worker's ram budget (IEC, e.g. 12GiB)
 * with LRU spill to D; the fields are then held as pages of --page-rows
 * rows (default 4 Mi rows, 512 MiB) and run by strata_halo_forward_pages
 * with --prefetch steps (default 0: as far ahead as the budget lets
 * restores go, the fastest in every run so far). --page-rows alone pages
 * the fields without a budget.
 *
 * Usage: bench_halo_billion [--edges E] [--chips K] [--calls C]
 *                           [--graph periodic|random|rmat] [--budget SIZE
 *                           --spill-dir D] [--page-rows R] [--prefetch P]
 *                           --store DIR
 *   E defaults to 1000000000 (a multiple of 16), K to 2, C to 3. DIR is
 *   created (graph written) when missing and reused when present.
 * Prints a summary and one JSON object as its last stdout line.
 */
#define _GNU_SOURCE
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <strata/strata.h>
#include <strata/tier.h>

#include "bench_common.h"
#include "fields.h"
#include "progress.h"
#include "rmat.h"
#include "stats.h"

#define NAME "bench_halo_billion"
#define FEATURES 32
#define DEGREE 16
#define MAX_CALLS 16

static int fail(const char *what, strata_err err)
{
    fprintf(stderr, NAME ": %s: %s: %s\n", what, strata_errname(err),
            strata_errmsg());
    return 1;
}

/* periodic (0): i+o mod N, o = -8..-1, 1..8; random (1): 16 sources
 * uniform over [0, N), a hash of (i, k), so that any row can be checked
 * without the graph in memory. */
static int graph_kind;
static const char *const graph_names[] = {"periodic", "random", "rmat"};

static int64_t source(uint64_t rows, uint64_t i, int k)
{
    int64_t o = k < DEGREE / 2 ? k - DEGREE / 2 : k - DEGREE / 2 + 1;

    if (graph_kind == 1) {
        uint64_t z = i * DEGREE + (uint64_t)k + 0x9e3779b97f4a7c15ull;

        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        return (int64_t)((double)(z >> 11) * 0x1.0p-53 * (double)rows);
    }
    return ((int64_t)i + o + (int64_t)rows) % (int64_t)rows;
}

/* strata_gfg_save as int32, with a progress line (bytes written, rate,
 * ETA) when stdout is a terminal; nothing extra otherwise, so the JSON
 * stays the last line of a captured run. */
static strata_err save(const char *dir, const strata_csr_view *csr)
{
    char *a = strdup(dir), *b = strdup(dir), prefix[300];
    uint64_t total =
        (csr->num_rows + 1 + (uint64_t)csr->row_ptr[csr->num_rows]) * 4;
    struct progress p;
    strata_err err;
    size_t n;

    if (!a || !b) {
        free(a);
        free(b);
        return strata_gfg_save(dir, csr, STRATA_I32);
    }
    for (n = strlen(b); n > 1 && b[n - 1] == '/'; n--)
        b[n - 1] = '\0';
    snprintf(prefix, sizeof(prefix), ".%.250s.", basename(b));
    progress_init(&p, stdout, PROGRESS_TTY_ONLY, NAME ": writing the store",
                  total);
    progress_watch(&p, dirname(a), prefix);
    err = strata_gfg_save(dir, csr, STRATA_I32);
    if (err) {
        progress_abandon(&p);
    } else {
        p.done = total;
        progress_done(&p);
    }
    free(a);
    free(b);
    return err;
}

/* Writes the graph to a new store at dir. */
static void rmat_progress(double done)
{
    fprintf(stderr, "\r" NAME ": building the R-MAT graph: %3.0f %%",
            100.0 * done);
}

static int make_store(const char *dir, uint64_t rows)
{
    uint64_t edges = rows * DEGREE;
    int64_t *row_ptr = malloc((rows + 1) * sizeof(int64_t));
    int64_t *col = malloc(edges * sizeof(int64_t));
    strata_csr_view csr = {rows, rows, row_ptr, col};
    strata_err err;
    double t0 = bench_now_s();
    bool tty = isatty(STDERR_FILENO);

    if (!row_ptr || !col) {
        fprintf(stderr, NAME ": no memory for the CSR (%.1f GiB)\n",
                (double)(edges + rows) * 8 / (1u << 30));
        free(row_ptr);
        free(col);
        return 1;
    }
    if (graph_kind == 2) {
        rmat_fill(rows, row_ptr, col, tty ? rmat_progress : NULL);
    } else {
        for (uint64_t i = 0; i <= rows; i++)
            row_ptr[i] = (int64_t)(i * DEGREE);
    }
    for (uint64_t i = 0; graph_kind != 2 && i < rows; i++) {
        for (int k = 0; k < DEGREE; k++)
            col[i * DEGREE + (uint64_t)k] = source(rows, i, k);
        /* A person waiting on a terminal sees it move. */
        if (tty && (i + 1) % (rows / 100 + 1) == 0)
            fprintf(stderr, "\r" NAME ": building the graph: %3.0f %%",
                    100.0 * (double)(i + 1) / (double)rows);
    }
    if (tty)
        fprintf(stderr, "\r" NAME ": built; writing %s (int32) ...\n", dir);
    err = save(dir, &csr);
    free(row_ptr);
    free(col);
    if (err)
        return fail("strata_gfg_save", err);
    printf(NAME ": wrote %s (%llu rows, %llu edges, int32) in %.1f s\n", dir,
           (unsigned long long)rows, (unsigned long long)edges,
           bench_now_s() - t0);
    return 0;
}

static float x_value(uint64_t i, int f)
{
    return (float)((i * 7 + (uint64_t)f * 13) % 1000);
}

struct job {
    strata_halo *h;
    struct fields f;
    size_t prefetch;
};

static strata_err forward_orch(strata_orch *o, const strata_args *a, void *user)
{
    struct job *j = user;

    (void)a;
    return fields_forward(o, j->h, &j->f, j->prefetch);
}

/* x, row by row, one span (a page, or the whole field) at a time. */
static int fill(struct fields *fl)
{
    for (uint64_t i = 0, end = 0; i < fl->rows; i = end) {
        float *x = fields_span(fl, false, i, &end);

        if (!x)
            return fail("strata_buffer_data", STRATA_EIO);
        for (uint64_t r = i; r < end; r++, x += FEATURES)
            for (int f = 0; f < FEATURES; f++)
                x[f] = x_value(r, f);
    }
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* Row i's sources into *src (grown as needed, *cap entries), *deg of
 * them: from the definition, or read from the store g (R-MAT). */
static bool row_sources(const strata_gfg *g, uint64_t rows, uint64_t i,
                        int64_t **src, size_t *cap, size_t *deg)
{
    int64_t rp[2];
    uint64_t n = DEGREE;

    if (g && strata_gfg_row_edges(g, i, i + 1, &n) != STRATA_OK)
        return false;
    if (n > *cap || !*src) {
        free(*src);
        *cap = n > DEGREE ? (size_t)n : DEGREE;
        *src = malloc(*cap * sizeof(int64_t));
        if (!*src)
            return false;
    }
    *deg = (size_t)n;
    if (g)
        return strata_gfg_read_rows(g, i, i + 1, rp, *src, *cap) == STRATA_OK;
    for (int k = 0; k < DEGREE; k++)
        (*src)[k] = source(rows, i, k);
    return true;
}

/* Rows 0, 1, N-1 and 997 spread ones against the definition (the R-MAT
 * graph: against the store's rows), in ascending order (a page of out is
 * restored once). */
static uint64_t check(struct fields *fl, const char *store)
{
    uint64_t rows = fl->rows, sample[1000], bad = 0, end = 0;
    const float *out = NULL;
    int64_t *src = NULL;
    strata_gfg *g = NULL;
    size_t deg = 0, cap = 0;

    if (graph_kind == 2 && strata_gfg_open(store, &g) != STRATA_OK) {
        fail("strata_gfg_open", STRATA_EIO);
        return (uint64_t)FEATURES * 1000;
    }

    for (uint64_t s = 0; s < 1000; s++)
        sample[s] = s < 3 ? (s == 2 ? rows - 1 : s) : (s * 1000003u) % rows;
    qsort(sample, 1000, sizeof(sample[0]), cmp_u64);
    for (uint64_t s = 0, at = 0; s < 1000; s++) {
        uint64_t i = sample[s];

        if (!out || i >= end) {
            out = fields_span(fl, true, i, &end);
            at = i;
            if (!out) {
                bad = (uint64_t)FEATURES * 1000;
                break;
            }
        }
        if (!row_sources(g, rows, i, &src, &cap, &deg)) {
            bad = (uint64_t)FEATURES * 1000;
            break;
        }
        for (int f = 0; f < FEATURES; f++) {
            float sum = 0;

            for (size_t k = 0; k < deg; k++)
                sum += x_value((uint64_t)src[k], f);
            if (deg > 0)
                sum *= (float)(1.0 / (double)deg);
            if (out[(i - at) * FEATURES + (uint64_t)f] != sum)
                bad++;
        }
    }
    free(src);
    strata_gfg_close(g);
    return bad;
}

/* The worker's memory report, as JSON fields after a comma. */
static void memory_json(strata_worker *w, char *buf, size_t cap)
{
    strata_tier_report r;

    if (strata_worker_memory_report(w, &r) != STRATA_OK) {
        snprintf(buf, cap, "\"memory\":null");
        return;
    }
    snprintf(buf, cap,
             "\"ram_peak_gib\":%.3f,\"spills\":%llu,\"restores\":%llu,"
             "\"spilled_gib\":%.3f,\"restored_gib\":%.3f",
             (double)r.tiers[STRATA_TIER_RAM].peak / (1 << 30),
             (unsigned long long)r.spills, (unsigned long long)r.restores,
             (double)r.moved[STRATA_TIER_RAM][STRATA_TIER_NVME] / (1 << 30),
             (double)r.moved[STRATA_TIER_NVME][STRATA_TIER_RAM] / (1 << 30));
}

struct opts {
    uint64_t edges, page_rows;
    int chips, calls;
    size_t prefetch;
    const char *store, *budget, *spill_dir;
};

static bool parse(int argc, char **argv, struct opts *op)
{
    *op = (struct opts){
        .edges = 1000000000ull, .chips = 2, .calls = 3, .prefetch = 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (!v)
            return false;
        if (!strcmp(a, "--edges"))
            op->edges = strtoull(v, NULL, 0);
        else if (!strcmp(a, "--chips"))
            op->chips = atoi(v);
        else if (!strcmp(a, "--calls"))
            op->calls = atoi(v);
        else if (!strcmp(a, "--store"))
            op->store = v;
        else if (!strcmp(a, "--budget"))
            op->budget = v;
        else if (!strcmp(a, "--spill-dir"))
            op->spill_dir = v;
        else if (!strcmp(a, "--page-rows"))
            op->page_rows = strtoull(v, NULL, 0);
        else if (!strcmp(a, "--prefetch"))
            op->prefetch = strtoull(v, NULL, 0);
        else if (!strcmp(a, "--graph") && !strcmp(v, "periodic"))
            graph_kind = 0;
        else if (!strcmp(a, "--graph") && !strcmp(v, "random"))
            graph_kind = 1;
        else if (!strcmp(a, "--graph") && !strcmp(v, "rmat"))
            graph_kind = 2;
        else
            return false;
        i++;
    }
    if (op->budget && op->page_rows == 0)
        op->page_rows = (uint64_t)1 << 22;
    return op->store && op->edges >= DEGREE * 4 && op->edges % DEGREE == 0 &&
           op->chips >= 1 && op->chips <= 8 && op->calls >= 1 &&
           op->calls <= MAX_CALLS && !op->budget == !op->spill_dir;
}

int main(int argc, char **argv)
{
    struct opts op;
    uint64_t rows;
    int ids[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    double t[MAX_CALLS], t0, create_s, fill_s, med;
    char budgets[64], mem[256] = "\"memory\":null";
    strata_worker_config cfg;
    strata_halo_spec spec;
    strata_worker *w = NULL;
    struct job j = {0};
    struct rusage self, kids;
    struct stat st;
    strata_err err;
    uint64_t bad = 0;
    int rc = 1;

    if (!parse(argc, argv, &op)) {
        fprintf(stderr, "usage: " NAME " [--edges E] [--chips K] [--calls C] "
                        "[--graph periodic|random|rmat] [--budget SIZE "
                        "--spill-dir DIR] [--page-rows R] [--prefetch P] "
                        "--store DIR\n");
        return 2;
    }
    rows = op.edges / DEGREE;
    if (stat(op.store, &st) != 0 && make_store(op.store, rows) != 0)
        return 1;

    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = ids;
    cfg.num_chips = (size_t)op.chips;
    if (op.budget) {
        snprintf(budgets, sizeof(budgets), "ram=%s", op.budget);
        cfg.budgets = budgets;
        cfg.spill_dir = op.spill_dir;
        cfg.eviction = STRATA_EVICT_LRU;
    }
    err = strata_worker_create(&cfg, &w);
    if (err)
        return fail("strata_worker_create", err);
    strata_halo_spec_init(&spec);
    spec.gfg_path = op.store;
    spec.chips = ids;
    spec.num_chips = (size_t)op.chips;
    spec.features = FEATURES;
    spec.dtype = STRATA_F32;
    spec.reducer = STRATA_HALO_MEAN;
    t0 = bench_now_s();
    err = strata_halo_create(w, &spec, &j.h);
    create_s = bench_now_s() - t0;
    if (!err)
        err = strata_worker_init(w);
    if (!err)
        err = fields_create(w, rows, FEATURES * sizeof(float), op.page_rows,
                            &j.f);
    if (err) {
        rc = fail("set-up", err);
        goto out;
    }
    j.prefetch = op.prefetch;
    t0 = bench_now_s();
    if (fill(&j.f) != 0)
        goto out;
    fill_s = bench_now_s() - t0;
    printf(NAME ": %llu edges, %llu rows x %d float32, %d chips; halo "
                "create %.1f s, x filled in %.1f s\n",
           (unsigned long long)op.edges, (unsigned long long)rows, FEATURES,
           op.chips, create_s, fill_s);
    if (op.page_rows)
        printf(NAME ": fields in pages of %llu rows (%.0f MiB), prefetch "
                    "%zu, ram budget %s\n",
               (unsigned long long)op.page_rows,
               (double)op.page_rows * FEATURES * 4 / (1 << 20), op.prefetch,
               op.budget ? op.budget : "none");
    for (int c = -1; c < op.calls; c++) {
        t0 = bench_now_s();
        err = strata_worker_run(w, forward_orch, NULL, &j);
        if (err) {
            rc = fail("forward", err);
            goto out;
        }
        if (c >= 0)
            t[c] = bench_now_s() - t0;
        printf(NAME ": forward %s: %.2f s\n", c < 0 ? "warm-up" : "timed",
               bench_now_s() - t0);
    }
    bad = check(&j.f, op.store);
    memory_json(w, mem, sizeof(mem));
    rc = bad != 0;
out:
    fields_release(&j.f);
    if (j.h && strata_halo_destroy(j.h) != STRATA_OK)
        rc = fail("strata_halo_destroy", STRATA_ESTATE);
    if (w && strata_worker_destroy(w) != STRATA_OK)
        rc = fail("strata_worker_destroy", STRATA_ESTATE);
    if (rc != 0 && bad == 0)
        return rc;
    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &kids);
    med = stats_median(t, (size_t)op.calls);
    printf(NAME ": median forward %.2f s = %.1f M edges/s; peak RSS: this "
                "process %.2f GiB, largest chip %.2f GiB; %s\n",
           med, (double)op.edges / med / 1e6,
           (double)self.ru_maxrss / (1 << 20),
           (double)kids.ru_maxrss / (1 << 20),
           bad ? "WRONG VALUES" : "1000 sampled rows exact");
    printf("{\"bench\":\"halo_billion\",\"metric\":\"forward_s\",\"unit\":"
           "\"s\",\"strata\":%.3f,\"reference_name\":\"reference system, "
           "1 GPU, paged from NVMe (FACTS.md)\",\"reference\":414.25,"
           "\"ratio\":%.5f,\"pass\":%s,\"graph\":\"%s\",\"edges\":%llu,"
           "\"chips\":%d,\"budget\":%s%s%s,\"page_rows\":%llu,"
           "\"prefetch\":%zu,\"create_s\":%.2f,\"maxrss_self_gib\":%.3f,"
           "\"maxrss_chip_gib\":%.3f,\"bad_values\":%llu,%s}\n",
           med, med / 414.25, bad == 0 && med < 414.25 ? "true" : "false",
           graph_names[graph_kind], (unsigned long long)op.edges, op.chips,
           op.budget ? "\"" : "", op.budget ? op.budget : "null",
           op.budget ? "\"" : "", (unsigned long long)op.page_rows, op.prefetch,
           create_s, (double)self.ru_maxrss / (1 << 20),
           (double)kids.ru_maxrss / (1 << 20), (unsigned long long)bad, mem);
    return bad ? 1 : 0;
}
