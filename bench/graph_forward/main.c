/*
 * bench_graph_forward: edges per second of a neighbour-mean forward
 * through strata_halo_forward on 1 and 2 chips, against a plain
 * single-process CSR loop and a memory-bandwidth bound, all measured in
 * the same run.
 *
 * The graph: periodic, N = E / 16 rows, row i's sources are i+o mod N for
 * o = -8..-1, 1..8 (16 entries, int64 indices); 32 float32 features per
 * row; STRATA_HALO_MEAN. Sizes: 10 M and 100 M edges (--quick: 1 M and
 * 10 M).
 *
 * Measured, interleaved per round so that a slow phase of a shared
 * machine hits every side alike (one warm-up round, then `reps` rounds;
 * medians over rounds):
 * - triad1 / triad2: a STREAM-like triad a[i] = b[i] + s * c[i] over three
 *   double arrays of 128 MiB each, in this process (1 core) and in two
 *   forked processes at once (2 cores, bandwidths added); bytes counted
 *   as STREAM does (24 per element, no write-allocate).
 * - plain: a single-threaded C loop over the same CSR and the same field
 *   buffer (features a compile-time 32): the reference for "per core".
 * - strata 1 chip / 2 chips: one strata_halo_forward call per round inside
 *   an orch fn, timed around the call (domain allocation, group dispatch,
 *   the kernels' per-call setup, exchange and compute all included); the
 *   trace gives the compute span too. The output is compared with the
 *   plain loop's bit for bit (same additions in the same order).
 *
 * The bandwidth bound: the bytes a neighbour mean over this graph must
 * move at the least, per edge: its column index (8 B), plus per row its
 * row_ptr entry (8 B), one read of its 128-byte feature row and one write
 * of its 128-byte output row, shared by its 16 edges: 8 + (8 + 128 + 128)
 * / 16 = 24.5 B/edge. bound (edges/s) = triad bandwidth / 24.5 (triad1 for
 * 1 chip and the plain loop, triad2 for 2 chips).
 *
 * Targets: strata edges/s per core (chips) >= 80 % of the plain loop, and
 * >= 50 % of the bound, at both sizes and both chip counts.
 *
 * The last stdout line is one JSON object (see bench/CMakeLists.txt).
 * Usage: bench_graph_forward [--quick] [--reps K]
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <strata/strata.h>

#include "bench_common.h"
#include "machine_load.h"
#include "stats.h"

#define FEATURES 32
#define DEGREE 16
#define NUM_SIZES 2
#define NUM_CHIPS 2
#define MAX_REPS 15
#define TRIAD_N ((size_t)16 << 20) /* doubles per array: 128 MiB */
#define BYTES_PER_EDGE                                                         \
    (8.0 + (8.0 + 2.0 * FEATURES * sizeof(float)) / DEGREE) /* 24.5 */
#define TARGET_PLAIN 0.8
#define TARGET_BOUND 0.5

static const int chip_counts[NUM_CHIPS] = {1, 2};

struct options {
    bool quick;
    int reps;
    uint64_t edges[NUM_SIZES];
};

struct size_result {
    uint64_t edges, rows;
    double triad1, triad2;             /* GB/s, medians */
    double plain_s;                    /* median seconds per forward */
    double call_s[NUM_CHIPS];          /* strata, around the call */
    double compute_s[NUM_CHIPS];       /* strata, slowest rank's compute */
    double kernel_s[NUM_CHIPS];        /* strata, exchange start..end */
    uint64_t boundary_rows[NUM_CHIPS]; /* from the trace */
    bool exact[NUM_CHIPS];
    double setup_s[NUM_CHIPS]; /* strata_halo_create */
};

struct job {
    strata_halo *h;
    strata_buffer *x, *out;
    double call_s;
};

static void report(const char *what, strata_err err)
{
    fprintf(stderr, "bench_graph_forward: %s: %s (%s): %s\n", what,
            strata_errname(err), strata_strerror(err), strata_errmsg());
}

/* ---- triad ---- */

struct triad {
    double *a, *b, *c;
};

static int triad_alloc(struct triad *t)
{
    t->a = malloc(TRIAD_N * sizeof(double));
    t->b = malloc(TRIAD_N * sizeof(double));
    t->c = malloc(TRIAD_N * sizeof(double));
    if (!t->a || !t->b || !t->c)
        return -1;
    for (size_t i = 0; i < TRIAD_N; i++) {
        t->a[i] = 0;
        t->b[i] = 1.0;
        t->c[i] = 2.0;
    }
    return 0;
}

static void triad_free(struct triad *t)
{
    free(t->a);
    free(t->b);
    free(t->c);
}

/* One pass; GB/s. */
static double triad_pass(struct triad *t)
{
    double *restrict a = t->a;
    const double *restrict b = t->b;
    const double *restrict c = t->c;
    const double s = 3.0;
    double t0 = bench_now_s(), dt;

    for (size_t i = 0; i < TRIAD_N; i++)
        a[i] = b[i] + s * c[i];
    dt = bench_now_s() - t0;
    __asm__ volatile("" : : "r"(a) : "memory");
    return 3.0 * sizeof(double) * (double)TRIAD_N / dt / 1e9;
}

/* Two processes at once, each the median of three passes; the sum. */
static double triad_two(void)
{
    int go[2], back[2];
    pid_t kid[2];
    double sum = 0;

    if (pipe(go) != 0 || pipe(back) != 0)
        return -1;
    for (int k = 0; k < 2; k++) {
        kid[k] = fork();
        if (kid[k] == 0) {
            struct triad t;
            double v[3] = {0, 0, 0};
            char c;

            close(go[1]);
            close(back[0]);
            if (triad_alloc(&t) == 0 && read(go[0], &c, 1) == 1)
                for (int i = 0; i < 3; i++)
                    v[i] = triad_pass(&t);
            v[0] = stats_median(v, 3);
            if (write(back[1], &v[0], sizeof(v[0])) != sizeof(v[0]))
                _exit(1);
            _exit(0);
        }
    }
    close(go[0]);
    close(back[1]);
    usleep(300000); /* both children allocated and touched their arrays */
    if (write(go[1], "gg", 2) != 2)
        sum = -1;
    close(go[1]);
    for (int k = 0; k < 2; k++) {
        double v = -1;

        if (kid[k] <= 0 || read(back[0], &v, sizeof(v)) != sizeof(v) || v <= 0)
            sum = -1;
        else if (sum >= 0)
            sum += v;
    }
    close(back[0]);
    for (int k = 0; k < 2; k++)
        if (kid[k] > 0)
            waitpid(kid[k], NULL, 0);
    return sum;
}

/* ---- graph and the plain loop ---- */

static int build_graph(uint64_t rows, int64_t **row_ptr, int64_t **col)
{
    static const int off[DEGREE] = {-8, -7, -6, -5, -4, -3, -2, -1,
                                    1,  2,  3,  4,  5,  6,  7,  8};

    *row_ptr = malloc((rows + 1) * sizeof(int64_t));
    *col = malloc(rows * DEGREE * sizeof(int64_t));
    if (!*row_ptr || !*col)
        return -1;
    for (uint64_t i = 0; i <= rows; i++)
        (*row_ptr)[i] = (int64_t)(i * DEGREE);
    for (uint64_t i = 0; i < rows; i++)
        for (int k = 0; k < DEGREE; k++)
            (*col)[i * DEGREE + k] =
                (int64_t)((i + rows + (uint64_t)(int64_t)off[k]) % rows);
    return 0;
}

static void fill_field(float *x, uint64_t rows)
{
    for (uint64_t i = 0; i < rows; i++)
        for (int f = 0; f < FEATURES; f++)
            x[i * FEATURES + f] = (float)((i * 7 + (uint64_t)f) % 113) * 0.5f;
}

/* out_i = mean of x_j over row i's entries, in entry order, accumulated
 * in the output row (the faster of the two obvious C forms here: a local
 * float[32] accumulator ran ~20 % slower at -O3 without -march). */
static void plain_forward(uint64_t rows, const int64_t *restrict row_ptr,
                          const int64_t *restrict col, const float *restrict x,
                          float *restrict out)
{
    for (uint64_t i = 0; i < rows; i++) {
        float *restrict acc = out + i * FEATURES;
        int64_t deg = row_ptr[i + 1] - row_ptr[i];

        for (int f = 0; f < FEATURES; f++)
            acc[f] = 0;
        for (int64_t k = row_ptr[i]; k < row_ptr[i + 1]; k++) {
            const float *restrict s = x + (uint64_t)col[k] * FEATURES;

            for (int f = 0; f < FEATURES; f++)
                acc[f] += s[f];
        }
        if (deg > 0) {
            float w = (float)(1.0 / (double)deg);

            for (int f = 0; f < FEATURES; f++)
                acc[f] *= w;
        }
    }
}

/* ---- strata ---- */

static strata_err forward_orch(strata_orch *o, const strata_args *unused,
                               void *user)
{
    struct job *j = user;
    double t0 = bench_now_s();
    strata_err err;

    (void)unused;
    err = strata_halo_forward(o, j->h, j->x, j->out);
    j->call_s = bench_now_s() - t0;
    return err;
}

/* The slowest rank's compute span and first-pack-to-last-row span. */
static void trace_spans(const strata_halo *h, int chips, double *compute_s,
                        double *kernel_s, uint64_t *boundary)
{
    *compute_s = *kernel_s = 0;
    *boundary = 0;
    for (int r = 0; r < chips; r++) {
        strata_halo_rank_trace t;

        if (strata_halo_last_trace(h, (uint32_t)r, &t) != STRATA_OK)
            continue;
        double c = (double)(t.compute_end_ns - t.compute_start_ns) / 1e9;
        double k = (double)(t.compute_end_ns - t.exchange_start_ns) / 1e9;

        *compute_s = c > *compute_s ? c : *compute_s;
        *kernel_s = k > *kernel_s ? k : *kernel_s;
        *boundary += t.boundary_rows;
    }
}

static int bench_size(const struct options *opt, uint64_t edges,
                      struct size_result *res)
{
    static const int ids[NUM_CHIPS] = {0, 1};
    uint64_t rows = edges / DEGREE;
    size_t field = (size_t)rows * FEATURES * sizeof(float);
    int64_t *row_ptr = NULL, *col = NULL;
    float *plain_out = NULL;
    strata_worker_config cfg;
    strata_worker *w = NULL;
    strata_halo *h[NUM_CHIPS] = {NULL, NULL};
    strata_buffer *x = NULL, *out = NULL;
    struct triad tr = {NULL, NULL, NULL};
    double t1[MAX_REPS], t2[MAX_REPS], pl[MAX_REPS];
    double cs[NUM_CHIPS][MAX_REPS], cp[NUM_CHIPS][MAX_REPS],
        ks[NUM_CHIPS][MAX_REPS];
    strata_err err = STRATA_OK;
    int rc = 1;

    memset(res, 0, sizeof(*res));
    res->edges = edges;
    res->rows = rows;
    if (build_graph(rows, &row_ptr, &col) != 0 ||
        (plain_out = malloc(field)) == NULL || triad_alloc(&tr) != 0) {
        fprintf(stderr, "bench_graph_forward: out of memory\n");
        goto out;
    }
    memset(plain_out, 0, field);
    /* The two-core triad first, before this process has chips or threads
     * (the children fork from it). */
    for (int k = 0; k < opt->reps; k++)
        t2[k] = triad_two();
    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = ids;
    cfg.num_chips = NUM_CHIPS;
    err = strata_worker_create(&cfg, &w);
    if (err == STRATA_OK)
        err = strata_worker_create_buffer(w, field, &x);
    if (err == STRATA_OK)
        err = strata_worker_create_buffer(w, field, &out);
    if (err == STRATA_OK)
        fill_field(strata_buffer_data(x), rows);
    for (int c = 0; c < NUM_CHIPS && err == STRATA_OK; c++) {
        strata_csr_view csr = {rows, rows, row_ptr, col};
        strata_halo_spec spec;
        double t0 = bench_now_s();

        strata_halo_spec_init(&spec);
        spec.csr = &csr;
        spec.chips = ids;
        spec.num_chips = (size_t)chip_counts[c];
        spec.features = FEATURES;
        spec.dtype = STRATA_F32;
        spec.reducer = STRATA_HALO_MEAN;
        err = strata_halo_create(w, &spec, &h[c]);
        res->setup_s[c] = bench_now_s() - t0;
    }
    if (err == STRATA_OK)
        err = strata_worker_init(w);
    if (err != STRATA_OK) {
        report("worker / halo setup", err);
        goto out;
    }
    /* Round 0 warms up (page faults, caches); rounds 1..reps count. */
    for (int k = 0; k <= opt->reps; k++) {
        double t0;

        t1[k] = triad_pass(&tr);
        t0 = bench_now_s();
        plain_forward(rows, row_ptr, col, strata_buffer_data(x), plain_out);
        pl[k] = bench_now_s() - t0;
        for (int c = 0; c < NUM_CHIPS; c++) {
            struct job j = {h[c], x, out, 0};
            uint64_t boundary;

            memset(strata_buffer_data(out), 0xff, 64); /* a stale result */
            err = strata_worker_run(w, forward_orch, NULL, &j);
            if (err != STRATA_OK) {
                report("forward run", err);
                goto out;
            }
            cs[c][k] = j.call_s;
            trace_spans(h[c], chip_counts[c], &cp[c][k], &ks[c][k], &boundary);
            res->boundary_rows[c] = boundary;
            if (k == 0)
                res->exact[c] =
                    memcmp(strata_buffer_data(out), plain_out, field) == 0;
        }
    }
    res->triad1 = stats_median(t1 + 1, (size_t)opt->reps);
    res->triad2 = stats_median(t2, (size_t)opt->reps);
    res->plain_s = stats_median(pl + 1, (size_t)opt->reps);
    for (int c = 0; c < NUM_CHIPS; c++) {
        res->call_s[c] = stats_median(cs[c] + 1, (size_t)opt->reps);
        res->compute_s[c] = stats_median(cp[c] + 1, (size_t)opt->reps);
        res->kernel_s[c] = stats_median(ks[c] + 1, (size_t)opt->reps);
        if (!res->exact[c]) {
            const float *a = strata_buffer_data(out);
            double worst = 0;

            for (size_t i = 0; i < (size_t)rows * FEATURES; i++)
                if (fabs((double)a[i] - (double)plain_out[i]) > worst)
                    worst = fabs((double)a[i] - (double)plain_out[i]);
            fprintf(stderr,
                    "bench_graph_forward: %d chip(s): output differs from "
                    "the plain loop (max |diff| %g)\n",
                    chip_counts[c], worst);
            goto out;
        }
    }
    rc = 0;
out:
    for (int c = 0; c < NUM_CHIPS; c++)
        if (h[c] != NULL && (err = strata_halo_destroy(h[c])) != STRATA_OK) {
            report("halo destroy", err);
            rc = 1;
        }
    if (w != NULL && (err = strata_worker_destroy(w)) != STRATA_OK) {
        report("worker destroy", err);
        rc = 1;
    }
    triad_free(&tr);
    free(plain_out);
    free(row_ptr);
    free(col);
    return rc;
}

/* ---- reporting ---- */

static double eps(uint64_t edges, double s)
{
    return s > 0 ? (double)edges / s : -1;
}

static double bound_eps(const struct size_result *r, int chips)
{
    double bw = chips == 1 ? r->triad1 : r->triad2;

    return bw > 0 ? bw * 1e9 / BYTES_PER_EDGE : -1;
}

/* strata per core / plain, and strata / bound. */
static void ratios(const struct size_result *r, int c, double *vs_plain,
                   double *vs_bound)
{
    double s = eps(r->edges, r->call_s[c]);

    *vs_plain = s / chip_counts[c] / eps(r->edges, r->plain_s);
    *vs_bound = s / bound_eps(r, chip_counts[c]);
}

static bool all_pass(const struct size_result *res, int n)
{
    bool ok = true;

    for (int i = 0; i < n; i++)
        for (int c = 0; c < NUM_CHIPS; c++) {
            double vp, vb;

            ratios(&res[i], c, &vp, &vb);
            ok = ok && res[i].exact[c] && vp >= TARGET_PLAIN &&
                 vb >= TARGET_BOUND;
        }
    return ok;
}

static void print_summary(const struct options *opt,
                          const struct size_result *res, double other_pct)
{
    printf("bench_graph_forward (%s, %d rounds, medians): periodic graph, %d "
           "neighbours per row,\n%d float32 features, neighbour mean. bound = "
           "triad GB/s / %.1f B per edge.\n",
           opt->quick ? "quick" : "full", opt->reps, DEGREE, FEATURES,
           BYTES_PER_EDGE);
    for (int i = 0; i < NUM_SIZES; i++) {
        const struct size_result *r = &res[i];

        printf("%llu edges (%llu rows): triad %.2f GB/s (1 core), %.2f GB/s "
               "(2 cores)\n",
               (unsigned long long)r->edges, (unsigned long long)r->rows,
               r->triad1, r->triad2);
        printf("  plain loop (1 core): %.3f s, %.1f M edges/s; bound 1 core "
               "%.1f M edges/s (%.0f %%)\n",
               r->plain_s, eps(r->edges, r->plain_s) / 1e6,
               bound_eps(r, 1) / 1e6,
               100 * eps(r->edges, r->plain_s) / bound_eps(r, 1));
        for (int c = 0; c < NUM_CHIPS; c++) {
            double vp, vb;

            ratios(r, c, &vp, &vb);
            printf("  strata %d chip%s: call %.3f s = %.1f M edges/s (%.1f "
                   "per core) | kernel %.3f s, compute %.3f s | %.0f %% of "
                   "plain/core%s, %.0f %% of bound%s | %llu boundary rows, "
                   "create %.2f s, %s\n",
                   chip_counts[c], chip_counts[c] > 1 ? "s" : "", r->call_s[c],
                   eps(r->edges, r->call_s[c]) / 1e6,
                   eps(r->edges, r->call_s[c]) / 1e6 / chip_counts[c],
                   r->kernel_s[c], r->compute_s[c], 100 * vp,
                   vp >= TARGET_PLAIN ? "" : " (!)", 100 * vb,
                   vb >= TARGET_BOUND ? "" : " (!)",
                   (unsigned long long)r->boundary_rows[c], r->setup_s[c],
                   r->exact[c] ? "output == plain" : "OUTPUT DIFFERS");
        }
    }
    printf("targets: strata per core >= %.0f %% of plain, >= %.0f %% of "
           "bound; (!) = missed.\ncall = around strata_halo_forward in the "
           "orch fn; kernel = first pack to last row\n(slowest rank, from "
           "the trace); compute = first to last owned row.\n",
           100 * TARGET_PLAIN, 100 * TARGET_BOUND);
    bench_print_load(other_pct);
}

static void print_json(const struct options *opt, const struct size_result *res,
                       int done, double other_pct, const char *error)
{
    const struct size_result *h = &res[NUM_SIZES - 1];
    bool have = error == NULL && done == NUM_SIZES;
    double s = have ? eps(h->edges, h->call_s[0]) : -1;
    double p = have ? eps(h->edges, h->plain_s) : -1;

    printf("{\"bench\":\"graph_forward\",\"metric\":\"edges_per_s_%lluM_"
           "1chip\",\"unit\":\"edges/s\",",
           (unsigned long long)(opt->edges[NUM_SIZES - 1] / 1000000));
    bench_json_num("strata", s, true);
    printf("\"reference_name\":\"plain_csr_neighbour_mean_1core\",");
    bench_json_num("reference", p, true);
    bench_json_num("ratio", have ? s / p : -1, true);
    bench_json_num("target", have ? TARGET_PLAIN * p : -1, true);
    printf("\"pass\":%s,", have && all_pass(res, done) ? "true" : "false");
    printf("\"target_rule\":\"strata edges/s per chip >= 0.8 x plain loop and "
           ">= 0.5 x bandwidth bound, every size, 1 and 2 chips\",");
    printf("\"bytes_per_edge_bound\":%.2f,\"points\":[", BYTES_PER_EDGE);
    for (int i = 0; i < done; i++) {
        const struct size_result *r = &res[i];

        for (int c = 0; c < NUM_CHIPS; c++) {
            double vp, vb;

            ratios(r, c, &vp, &vb);
            printf("%s{\"edges\":%llu,\"rows\":%llu,\"chips\":%d,",
                   i + c ? "," : "", (unsigned long long)r->edges,
                   (unsigned long long)r->rows, chip_counts[c]);
            bench_json_num("strata_call_s", r->call_s[c], true);
            bench_json_num("strata_kernel_s", r->kernel_s[c], true);
            bench_json_num("strata_compute_s", r->compute_s[c], true);
            bench_json_num("strata_edges_per_s", eps(r->edges, r->call_s[c]),
                           true);
            bench_json_num("plain_s", r->plain_s, true);
            bench_json_num("plain_edges_per_s", eps(r->edges, r->plain_s),
                           true);
            bench_json_num("triad_GBps",
                           chip_counts[c] == 1 ? r->triad1 : r->triad2, true);
            bench_json_num("bound_edges_per_s", bound_eps(r, chip_counts[c]),
                           true);
            bench_json_num("per_core_vs_plain", vp, true);
            bench_json_num("vs_bound", vb, true);
            bench_json_num("create_s", r->setup_s[c], true);
            printf("\"boundary_rows\":%llu,\"exact\":%s}",
                   (unsigned long long)r->boundary_rows[c],
                   r->exact[c] ? "true" : "false");
        }
    }
    printf("],");
    bench_json_num("other_cpu_pct", other_pct, true);
    printf("\"reps\":%d,\"quick\":%s", opt->reps,
           opt->quick ? "true" : "false");
    if (error != NULL)
        printf(",\"error\":\"%s\"", error);
    printf("}\n");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    static struct size_result res[NUM_SIZES];
    struct machine_load load0, load1;
    struct options opt = {0};
    double other;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            opt.quick = true;
        } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            opt.reps = atoi(argv[++i]);
            if (opt.reps < 1 || opt.reps >= MAX_REPS) {
                fprintf(stderr, "bench_graph_forward: reps 1..%d\n",
                        MAX_REPS - 1);
                return 2;
            }
        } else {
            fprintf(stderr,
                    "usage: bench_graph_forward [--quick] [--reps K]\n");
            return 2;
        }
    }
    if (opt.reps == 0)
        opt.reps = opt.quick ? 3 : 5;
    opt.edges[0] = opt.quick ? 1000000 : 10000000;
    opt.edges[1] = opt.quick ? 10000000 : 100000000;
    machine_load_sample(&load0);
    for (int i = 0; i < NUM_SIZES; i++)
        if (bench_size(&opt, opt.edges[i], &res[i]) != 0) {
            machine_load_sample(&load1);
            print_json(&opt, res, i, machine_load_other_pct(&load0, &load1),
                       "measurement failed");
            return 1;
        }
    machine_load_sample(&load1);
    other = machine_load_other_pct(&load0, &load1);
    print_summary(&opt, res, other);
    print_json(&opt, res, NUM_SIZES, other, NULL);
    return 0;
}
