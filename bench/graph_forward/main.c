/*
 * bench_graph_forward: edges per second of strata_halo_forward and
 * strata_halo_vjp on 1 and 2 chips, over three graph families, against a
 * plain single-process CSR loop and memory bounds, all measured in the
 * same run.
 *
 * Graphs (N = E / 16 rows, int64 indices, 32 float32 features per row):
 * - periodic: row i's sources are i+o mod N for o = -8..-1, 1..8;
 * - random: 16 sources per row, uniform over [0, N);
 * - rmat: E edges drawn by R-MAT (Graph500's a = 0.57, b = c = 0.19,
 *   d = 0.05) over 2^ceil(log2 N) ids (pairs outside [0, N) drawn again),
 *   then every id relabelled by one random permutation (as Graph500 does,
 *   so the heavy rows are scattered), rows listing their sources in the
 *   order drawn. In-degrees follow a power law; some rows have none.
 * Sizes: 10 M and 100 M edges (--quick: 1 M and 10 M). --graph NAME runs
 * one family.
 *
 * Operations: forward sum and mean, VJP sum and mean. Measured, interleaved
 * per round so that a slow phase of a shared machine hits every side alike
 * (one warm-up round, then 9 rounds at the smaller size and 5 at the larger,
 * --quick 3, --reps K; medians over rounds; every ratio judged is the
 * median of per-round ratios, the two calls compared having run in the same
 * round):
 * - triad1 / triad2: a STREAM-like triad over three 128 MiB double arrays
 *   in this process (1 core) and in two forked processes at once (bytes as
 *   STREAM counts them); memcpy1: one 128 MiB memcpy, bytes copied / s.
 * - plain: a single-threaded C loop over the same CSR and field (features
 *   a compile-time 32): out_i = sum (or mean) of x_j in entry order; the
 *   VJP grad_x_j += w_i * g_i in row and entry order.
 * - strata 1 chip / 2 chips: one call per round inside an orch fn, timed
 *   around the call (domain allocation, dispatch, exchange, compute).
 *   Forward outputs equal the plain loop's bit for bit (same additions in
 *   the same order); VJP outputs too on 1 chip, and on 2 (peers'
 *   cotangents are added after the owned ones) element j within
 *   2 (n_j + 1) x 2^-24 relative, n_j the entries that name row j: the
 *   rounding of two orders of non-negative float32 terms.
 *
 * Bounds (per edge, bytes a forward must move at the least): bandwidth =
 * 8 (index) + (8 + 128 + 128) / 16 = 24.5 B (every row read once); gather =
 * 8 + 128 + (8 + 128) / 16 = 144.5 B (every source row a cache miss, the
 * random families). bound = triad GB/s / bytes.
 *
 * From the halo trace (2 chips, forward, slowest rank): exchange GB/s per
 * rank = rows packed x 128 B / time packing; boundary edges/s = boundary
 * rows' entries / time computing them (waits excluded), against interior
 * edges/s = the 1-chip call's entries / its compute span (every row
 * interior).
 *
 * Targets (JSON "pass"):
 * - periodic, forward mean (as before): strata edges/s per chip >= 0.8 x
 *   plain and >= 0.5 x the bandwidth bound, both sizes, 1 and 2 chips;
 * - random and rmat, every size, forward and VJP, sum and mean: 2 chips >=
 *   1.5 x 1 chip; 1 chip >= 1.0 x plain; forward: exchange GB/s per rank >=
 *   0.5 x memcpy1; boundary edges/s >= 0.8 x interior edges/s.
 *
 * The last stdout line is one JSON object (see bench/CMakeLists.txt).
 * Usage: bench_graph_forward [--quick] [--reps K]
 *                            [--graph periodic|random|rmat]
 *                            [--schedule overlapped|serialized|in_place]
 *                            [--verbose]
 * --verbose prints every round's call time and each rank's compute span to
 * stderr.
 */
#include <inttypes.h>
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
#define ROW_BYTES (FEATURES * sizeof(float))
#define DEGREE 16
#define NUM_SIZES 2
#define NUM_CHIPS 2
#define MAX_REPS 15
#define TRIAD_N ((size_t)16 << 20) /* doubles per array: 128 MiB */
#define BYTES_PER_EDGE (8.0 + (8.0 + 2.0 * ROW_BYTES) / DEGREE) /* 24.5 */
#define GATHER_BYTES_PER_EDGE                                                  \
    (8.0 + ROW_BYTES + (8.0 + ROW_BYTES) / DEGREE) /* 144.5 */
#define TARGET_PLAIN 0.8
#define TARGET_BOUND 0.5
#define TARGET_SCALE 1.5
#define TARGET_PLAIN_RANDOM 1.0
#define TARGET_XFER 0.5
#define TARGET_BOUNDARY 0.8
/* The 2-chip VJP adds a row's received cotangents after its own ones:
 * another order than the plain loop's, so float32 rounding differs. Every
 * term is >= 0 (fill_field, weights 1 / deg), so each order's relative
 * error is at most about n u for a row that n entries name (u = 2^-24):
 * element j may differ by 2 (n_j + 1) u relatively, no more. */
#define VJP_ULP_PER_TERM (2.0 * 0x1p-24)

enum family { PERIODIC, RANDOM, RMAT, NUM_FAMILIES };
enum op { FWD_SUM, FWD_MEAN, VJP_SUM, VJP_MEAN, NUM_OPS };

static const char *const family_names[NUM_FAMILIES] = {"periodic", "random",
                                                       "rmat"};
static const char *const op_names[NUM_OPS] = {"forward_sum", "forward_mean",
                                              "vjp_sum", "vjp_mean"};
static const int chip_counts[NUM_CHIPS] = {1, 2};
static bool verbose; /* --verbose: every round's call and ranks on stderr */

static bool op_vjp(int op)
{
    return op == VJP_SUM || op == VJP_MEAN;
}

struct options {
    bool quick;
    int reps[NUM_SIZES]; /* rounds per size, after the warm-up round */
    int family;          /* -1: all */
    uint64_t edges[NUM_SIZES];
};

/* One (operation, chip count) of one graph. */
struct point {
    double call_s;       /* median around the call */
    double compute_s;    /* slowest rank's compute span */
    double xfer_GBps;    /* slowest rank's packing rate (forward) */
    double boundary_eps; /* slowest rank's boundary edges/s (forward) */
    uint64_t boundary_rows;
    uint64_t sent_rows;
    bool exact;     /* bit for bit (forward, 1-chip VJP) or within tol */
    double max_rel; /* largest relative difference from the plain loop */
    /* Medians of per-round ratios (the calls compared ran in one round):
     * strata edges/s / plain edges/s; / the 1-chip call's edges/s (c = 1);
     * boundary edges/s / the 1-chip call's compute edges/s (c = 1). */
    double vs_plain, vs_1chip, bnd_vs_int;
};

struct size_result {
    int family;
    int reps; /* rounds measured (after the warm-up round) */
    uint64_t edges, rows;
    double triad1, triad2, memcpy1; /* GB/s, medians */
    double plain_s[NUM_OPS];
    struct point pt[NUM_OPS][NUM_CHIPS];
    double setup_s[NUM_CHIPS]; /* strata_halo_create, mean */
    double gen_s;
};

struct job {
    strata_halo *h;
    strata_buffer *x, *out;
    bool vjp;
    double call_s;
};

static void report(const char *what, strata_err err)
{
    fprintf(stderr, "bench_graph_forward: %s: %s (%s): %s\n", what,
            strata_errname(err), strata_strerror(err), strata_errmsg());
}

/* ---- triad and memcpy ---- */

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

/* One memcpy of 128 MiB (b into a); GB/s of bytes copied. */
static double memcpy_pass(struct triad *t)
{
    double t0 = bench_now_s(), dt;

    memcpy(t->a, t->b, TRIAD_N * sizeof(double));
    dt = bench_now_s() - t0;
    __asm__ volatile("" : : "r"(t->a) : "memory");
    return sizeof(double) * (double)TRIAD_N / dt / 1e9;
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

/* ---- graphs ---- */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, n). */
static uint64_t below(uint64_t *s, uint64_t n)
{
    return (uint64_t)((double)(splitmix(s) >> 11) * 0x1.0p-53 * (double)n);
}

static void build_periodic(uint64_t rows, int64_t *row_ptr, int64_t *col)
{
    static const int off[DEGREE] = {-8, -7, -6, -5, -4, -3, -2, -1,
                                    1,  2,  3,  4,  5,  6,  7,  8};

    for (uint64_t i = 0; i <= rows; i++)
        row_ptr[i] = (int64_t)(i * DEGREE);
    for (uint64_t i = 0; i < rows; i++)
        for (int k = 0; k < DEGREE; k++)
            col[i * DEGREE + (uint64_t)k] =
                (int64_t)((i + rows + (uint64_t)(int64_t)off[k]) % rows);
}

static void build_random(uint64_t rows, int64_t *row_ptr, int64_t *col)
{
    uint64_t s = 0x5eed0001;

    for (uint64_t i = 0; i <= rows; i++)
        row_ptr[i] = (int64_t)(i * DEGREE);
    for (uint64_t k = 0; k < rows * DEGREE; k++)
        col[k] = (int64_t)below(&s, rows);
}

/* One R-MAT pair over 2^scale ids: (destination, source). */
static void rmat_pair(uint64_t *s, int scale, uint64_t *dst, uint64_t *src)
{
    uint64_t d = 0, c = 0;

    for (int b = 0; b < scale; b++) {
        /* a = 0.57, b = 0.19, c = 0.19, d = 0.05 in 1/2^32 steps. */
        uint64_t r = splitmix(s) >> 32;

        d <<= 1;
        c <<= 1;
        if (r < 2448131359u) {        /* a: 0.57 */
        } else if (r < 3264175145u) { /* b: +0.19, source half */
            c |= 1;
        } else if (r < 4080218931u) { /* c: +0.19, destination half */
            d |= 1;
        } else { /* d */
            d |= 1;
            c |= 1;
        }
    }
    *dst = d;
    *src = c;
}

static int build_rmat(uint64_t rows, int64_t *row_ptr, int64_t *col)
{
    uint64_t edges = rows * DEGREE;
    uint64_t s = 0x5eed0002;
    int scale = 0;
    uint32_t *dst = malloc(edges * sizeof(uint32_t));
    uint32_t *src = malloc(edges * sizeof(uint32_t));
    uint32_t *perm = malloc(rows * sizeof(uint32_t));

    if (!dst || !src || !perm || rows > UINT32_MAX) {
        free(dst);
        free(src);
        free(perm);
        return -1;
    }
    while (((uint64_t)1 << scale) < rows)
        scale++;
    for (uint64_t i = 0; i < rows; i++)
        perm[i] = (uint32_t)i;
    for (uint64_t i = rows - 1; i > 0; i--) {
        uint64_t j = below(&s, i + 1);
        uint32_t t = perm[i];

        perm[i] = perm[j];
        perm[j] = t;
    }
    for (uint64_t k = 0; k < edges;) {
        uint64_t d, c;

        rmat_pair(&s, scale, &d, &c);
        if (d >= rows || c >= rows)
            continue;
        dst[k] = perm[d];
        src[k] = perm[c];
        k++;
    }
    /* Counting sort by destination, stable (sources in the order drawn). */
    memset(row_ptr, 0, (rows + 1) * sizeof(int64_t));
    for (uint64_t k = 0; k < edges; k++)
        row_ptr[dst[k] + 1]++;
    for (uint64_t i = 0; i < rows; i++)
        row_ptr[i + 1] += row_ptr[i];
    for (uint64_t k = 0; k < edges; k++)
        col[row_ptr[dst[k]]++] = src[k];
    for (uint64_t i = rows; i > 0; i--)
        row_ptr[i] = row_ptr[i - 1];
    row_ptr[0] = 0;
    free(dst);
    free(src);
    free(perm);
    return 0;
}

static int build_graph(int family, uint64_t rows, int64_t **row_ptr,
                       int64_t **col)
{
    *row_ptr = malloc((rows + 1) * sizeof(int64_t));
    *col = malloc(rows * DEGREE * sizeof(int64_t));
    if (!*row_ptr || !*col)
        return -1;
    switch (family) {
    case PERIODIC:
        build_periodic(rows, *row_ptr, *col);
        return 0;
    case RANDOM:
        build_random(rows, *row_ptr, *col);
        return 0;
    default:
        return build_rmat(rows, *row_ptr, *col);
    }
}

/* Half-integers below 57: every sum of a row's sources is exact. */
static void fill_field(float *x, uint64_t rows)
{
    for (uint64_t i = 0; i < rows; i++)
        for (int f = 0; f < FEATURES; f++)
            x[i * FEATURES + f] = (float)((i * 7 + (uint64_t)f) % 113) * 0.5f;
}

/* ---- the plain loops ---- */

/* out_i = sum of x_j over row i's entries, in entry order, accumulated in
 * the output row, times 1/deg for mean (the faster of the two obvious C
 * forms here: a local float[32] accumulator ran ~20 % slower at -O3
 * without -march). */
static void plain_forward(uint64_t rows, const int64_t *restrict row_ptr,
                          const int64_t *restrict col, const float *restrict x,
                          float *restrict out, bool mean)
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
        if (mean && deg > 0) {
            float w = (float)(1.0 / (double)deg);

            for (int f = 0; f < FEATURES; f++)
                acc[f] *= w;
        }
    }
}

/* grad_x = 0; grad_x_j += w_i * g_i for every entry (i, j), rows and
 * entries in order (w_i = 1, or 1/deg for mean). */
static void plain_vjp(uint64_t rows, const int64_t *restrict row_ptr,
                      const int64_t *restrict col, const float *restrict g,
                      float *restrict gx, bool mean)
{
    memset(gx, 0, rows * ROW_BYTES);
    for (uint64_t i = 0; i < rows; i++) {
        const float *restrict gi = g + i * FEATURES;
        int64_t deg = row_ptr[i + 1] - row_ptr[i];
        float w = mean && deg > 0 ? (float)(1.0 / (double)deg) : 1.0f;

        for (int64_t k = row_ptr[i]; k < row_ptr[i + 1]; k++) {
            float *restrict a = gx + (uint64_t)col[k] * FEATURES;

            for (int f = 0; f < FEATURES; f++)
                a[f] += w * gi[f];
        }
    }
}

/* ---- strata ---- */

static strata_err call_orch(strata_orch *o, const strata_args *unused,
                            void *user)
{
    struct job *j = user;
    double t0 = bench_now_s();
    strata_err err;

    (void)unused;
    err = j->vjp ? strata_halo_vjp(o, j->h, j->x, j->out)
                 : strata_halo_forward(o, j->h, j->x, j->out);
    j->call_s = bench_now_s() - t0;
    return err;
}

/* The slowest rank's compute span, packing rate and boundary rate. */
static void trace_spans(const strata_halo *h, int chips, double *compute_s,
                        double *xfer, double *beps, uint64_t *boundary,
                        uint64_t *sent)
{
    *compute_s = 0;
    *xfer = *beps = -1;
    *boundary = *sent = 0;
    for (int r = 0; r < chips; r++) {
        strata_halo_rank_trace t;

        if (strata_halo_last_trace(h, (uint32_t)r, &t) != STRATA_OK)
            continue;
        double c = (double)(t.compute_end_ns - t.compute_start_ns) / 1e9;

        if (verbose)
            fprintf(stderr, " [rank %d: start %.2f ms, compute %.2f ms]", r,
                    (double)(t.compute_start_ns - t.exchange_start_ns) / 1e6,
                    c * 1e3);

        *compute_s = c > *compute_s ? c : *compute_s;
        *boundary += t.boundary_rows;
        *sent += t.sent_rows;
        if (t.pack_ns > 0) {
            double x = (double)t.sent_rows * ROW_BYTES / (double)t.pack_ns;

            *xfer = *xfer < 0 || x < *xfer ? x : *xfer;
        }
        if (t.boundary_ns > 0) {
            double b = (double)t.boundary_edges * 1e9 / (double)t.boundary_ns;

            *beps = *beps < 0 || b < *beps ? b : *beps;
        }
    }
}

/* Largest |a - b| / max(1, |b|). */
static double max_rel(const float *a, const float *b, size_t n)
{
    double worst = 0;

    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        double m = fabs((double)b[i]);

        d /= m > 1 ? m : 1;
        if (d > worst || isnan(d))
            worst = isnan(d) ? INFINITY : d;
    }
    return worst;
}

struct bufs {
    strata_worker *w;
    strata_buffer *x, *out;
    float *plain_out;
    struct triad tr;
    int64_t *row_ptr, *col;
    uint32_t *named; /* per row: how many entries name it as a source */
};

/* The worst |a - b| / max(1, |b|) over the allowed bound of its row (the
 * VJP's rounding, VJP_ULP_PER_TERM); <= 1 when every element is within. */
static double vjp_excess(const float *a, const float *b, const uint32_t *named,
                         uint64_t rows)
{
    double worst = 0;

    for (uint64_t i = 0; i < rows; i++) {
        double allowed = VJP_ULP_PER_TERM * ((double)named[i] + 1);

        for (int f = 0; f < FEATURES; f++) {
            size_t k = i * FEATURES + (size_t)f;
            double d = fabs((double)a[k] - (double)b[k]);
            double m = fabs((double)b[k]);
            double r = d / (m > 1 ? m : 1) / allowed;

            if (r > worst || isnan(r))
                worst = isnan(r) ? INFINITY : r;
        }
    }
    return worst;
}

/* The schedule every handle uses (--schedule). */
static strata_halo_schedule schedule = STRATA_HALO_IN_PLACE;
static const char *const schedule_names[] = {"overlapped", "serialized",
                                             "in_place"};

static strata_err make_handles(struct bufs *b, uint64_t rows, bool mean,
                               strata_halo *h[NUM_CHIPS], double *setup_s)
{
    static const int ids[NUM_CHIPS] = {0, 1};
    strata_csr_view csr = {rows, rows, b->row_ptr, b->col};
    strata_err err = STRATA_OK;

    for (int c = 0; c < NUM_CHIPS && err == STRATA_OK; c++) {
        strata_halo_spec spec;
        double t0 = bench_now_s();

        strata_halo_spec_init(&spec);
        spec.csr = &csr;
        spec.chips = ids;
        spec.num_chips = (size_t)chip_counts[c];
        spec.features = FEATURES;
        spec.dtype = STRATA_F32;
        spec.reducer = mean ? STRATA_HALO_MEAN : STRATA_HALO_SUM;
        spec.schedule = schedule;
        err = strata_halo_create(b->w, &spec, &h[c]);
        if (setup_s)
            setup_s[c] = bench_now_s() - t0;
    }
    return err;
}

static int drop_handles(strata_halo *h[NUM_CHIPS])
{
    int rc = 0;

    for (int c = 0; c < NUM_CHIPS; c++) {
        strata_err err;

        if (h[c] != NULL && (err = strata_halo_destroy(h[c])) != STRATA_OK) {
            report("halo destroy", err);
            rc = 1;
        }
        h[c] = NULL;
    }
    return rc;
}

/* Rounds of one reducer: forward and VJP, plain, 1 and 2 chips. */
static int run_reducer(struct bufs *b, bool mean, struct size_result *res,
                       double t1[], double mc[])
{
    uint64_t rows = res->rows;
    size_t n = (size_t)rows * FEATURES;
    strata_halo *h[NUM_CHIPS] = {NULL, NULL};
    double pl[2][MAX_REPS];
    double cs[2][NUM_CHIPS][MAX_REPS], cp[2][NUM_CHIPS][MAX_REPS];
    double xf[2][NUM_CHIPS][MAX_REPS], be[2][NUM_CHIPS][MAX_REPS];
    strata_err err;
    int rc = 1;

    err = make_handles(b, rows, mean, h, mean ? res->setup_s : NULL);
    if (err != STRATA_OK) {
        report("halo create", err);
        goto out;
    }
    /* Round 0 warms up (page faults, caches, index arrays). */
    for (int k = 0; k <= res->reps; k++) {
        if (!mean) {
            t1[k] = triad_pass(&b->tr);
            mc[k] = memcpy_pass(&b->tr);
        }
        for (int v = 0; v < 2; v++) {
            int op = (v ? VJP_SUM : FWD_SUM) + (mean ? 1 : 0);
            double t0 = bench_now_s();

            if (v)
                plain_vjp(rows, b->row_ptr, b->col, strata_buffer_data(b->x),
                          b->plain_out, mean);
            else
                plain_forward(rows, b->row_ptr, b->col,
                              strata_buffer_data(b->x), b->plain_out, mean);
            pl[v][k] = bench_now_s() - t0;
            for (int c = 0; c < NUM_CHIPS; c++) {
                struct job j = {h[c], b->x, b->out, v != 0, 0};
                struct point *p = &res->pt[op][c];

                memset(strata_buffer_data(b->out), 0xff, 64); /* stale */
                err = strata_worker_run(b->w, call_orch, NULL, &j);
                if (err != STRATA_OK) {
                    report(op_names[op], err);
                    goto out;
                }
                cs[v][c][k] = j.call_s;
                if (verbose)
                    fprintf(stderr,
                            "%s %" PRIu64 " %s round %d, %d chip(s): "
                            "call %.2f ms (plain %.2f ms)",
                            family_names[res->family], res->edges, op_names[op],
                            k, chip_counts[c], j.call_s * 1e3, pl[v][k] * 1e3);
                trace_spans(h[c], chip_counts[c], &cp[v][c][k], &xf[v][c][k],
                            &be[v][c][k], &p->boundary_rows, &p->sent_rows);
                if (verbose)
                    fputc('\n', stderr);
                if (k == 0) {
                    p->max_rel =
                        max_rel(strata_buffer_data(b->out), b->plain_out, n);
                    /* In place, the VJP's terms are added in row order on
                     * any number of chips. */
                    p->exact =
                        (v && c > 0 && schedule != STRATA_HALO_IN_PLACE)
                            ? vjp_excess(strata_buffer_data(b->out),
                                         b->plain_out, b->named, rows) <= 1.0
                            : memcmp(strata_buffer_data(b->out), b->plain_out,
                                     n * sizeof(float)) == 0;
                    if (!p->exact)
                        fprintf(stderr,
                                "bench_graph_forward: %s %s, %d chip(s): "
                                "output differs from the plain loop (max "
                                "relative difference %g)\n",
                                family_names[res->family], op_names[op],
                                chip_counts[c], p->max_rel);
                }
            }
        }
    }
    for (int v = 0; v < 2; v++) {
        int op = (v ? VJP_SUM : FWD_SUM) + (mean ? 1 : 0);
        size_t reps = (size_t)res->reps;

        res->plain_s[op] = stats_median(pl[v] + 1, reps);
        for (int c = 0; c < NUM_CHIPS; c++) {
            struct point *p = &res->pt[op][c];
            double rp[MAX_REPS], r1[MAX_REPS], rb[MAX_REPS];
            size_t nb = 0;

            p->call_s = stats_median(cs[v][c] + 1, reps);
            p->compute_s = stats_median(cp[v][c] + 1, reps);
            p->xfer_GBps = stats_median(xf[v][c] + 1, reps);
            p->boundary_eps = stats_median(be[v][c] + 1, reps);
            for (size_t k = 1; k <= reps; k++) {
                rp[k - 1] = pl[v][k] / cs[v][c][k];
                r1[k - 1] = cs[v][0][k] / cs[v][c][k];
                if (be[v][c][k] > 0 && cp[v][0][k] > 0)
                    rb[nb++] = be[v][c][k] * cp[v][0][k] / (double)res->edges;
            }
            p->vs_plain = stats_median(rp, reps);
            p->vs_1chip = c > 0 ? stats_median(r1, reps) : -1;
            p->bnd_vs_int = c > 0 && nb > 0 ? stats_median(rb, nb) : -1;
        }
    }
    rc = 0;
out:
    if (drop_handles(h) != 0)
        rc = 1;
    return rc;
}

static int bench_size(const struct options *opt, int family, int size,
                      struct size_result *res)
{
    static const int ids[NUM_CHIPS] = {0, 1};
    uint64_t edges = opt->edges[size];
    uint64_t rows = edges / DEGREE;
    size_t field = (size_t)rows * ROW_BYTES;
    struct bufs b = {0};
    strata_worker_config cfg;
    double t1[MAX_REPS], t2[MAX_REPS], mc[MAX_REPS];
    strata_err err = STRATA_OK;
    double t0 = bench_now_s();
    int rc = 1;

    memset(res, 0, sizeof(*res));
    res->family = family;
    res->reps = opt->reps[size];
    res->edges = edges;
    res->rows = rows;
    if (build_graph(family, rows, &b.row_ptr, &b.col) != 0 ||
        (b.plain_out = malloc(field)) == NULL ||
        (b.named = calloc(rows, sizeof(uint32_t))) == NULL ||
        triad_alloc(&b.tr) != 0) {
        fprintf(stderr, "bench_graph_forward: out of memory\n");
        goto out;
    }
    for (int64_t k = 0; k < b.row_ptr[rows]; k++)
        b.named[b.col[k]]++;
    res->gen_s = bench_now_s() - t0;
    memset(b.plain_out, 0, field);
    /* The two-core triad first, before this process has chips or threads
     * (the children fork from it). */
    for (int k = 0; k < res->reps; k++)
        t2[k] = triad_two();
    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = ids;
    cfg.num_chips = NUM_CHIPS;
    err = strata_worker_create(&cfg, &b.w);
    if (err == STRATA_OK)
        err = strata_worker_create_buffer(b.w, field, &b.x);
    if (err == STRATA_OK)
        err = strata_worker_create_buffer(b.w, field, &b.out);
    if (err == STRATA_OK)
        fill_field(strata_buffer_data(b.x), rows);
    if (err == STRATA_OK)
        err = strata_worker_init(b.w);
    if (err != STRATA_OK) {
        report("worker setup", err);
        goto out;
    }
    /* One reducer at a time: two plans (1 and 2 chips) alive at once. */
    if (run_reducer(&b, false, res, t1, mc) != 0 ||
        run_reducer(&b, true, res, t1, mc) != 0)
        goto out;
    res->triad1 = stats_median(t1 + 1, (size_t)res->reps);
    res->triad2 = stats_median(t2, (size_t)res->reps);
    res->memcpy1 = stats_median(mc + 1, (size_t)res->reps);
    rc = 0;
    for (int op = 0; op < NUM_OPS; op++)
        for (int c = 0; c < NUM_CHIPS; c++)
            if (!res->pt[op][c].exact)
                rc = 1;
out:
    if (b.w != NULL && (err = strata_worker_destroy(b.w)) != STRATA_OK) {
        report("worker destroy", err);
        rc = 1;
    }
    triad_free(&b.tr);
    free(b.plain_out);
    free(b.row_ptr);
    free(b.col);
    free(b.named);
    return rc;
}

/* ---- targets and reporting ---- */

static double eps(uint64_t edges, double s)
{
    return s > 0 ? (double)edges / s : -1;
}

static double bound_eps(const struct size_result *r, int chips, double bytes)
{
    double bw = chips == 1 ? r->triad1 : r->triad2;

    return bw > 0 ? bw * 1e9 / bytes : -1;
}

/* The target figures of one point (op, chip index c). */
struct verdict {
    double per_core_vs_plain; /* strata edges/s / chips / plain edges/s */
    double vs_bound;          /* strata edges/s / bandwidth bound */
    double scale;             /* 2 chips / 1 chip edges/s (c = 1) */
    double xfer_vs_memcpy;    /* exchange GB/s per rank / memcpy1 */
    double boundary_vs_interior;
    bool pass;
};

static struct verdict judge(const struct size_result *r, int op, int c)
{
    const struct point *p = &r->pt[op][c];
    double s = eps(r->edges, p->call_s);
    struct verdict v = {-1, -1, -1, -1, -1, p->exact};

    v.per_core_vs_plain = p->vs_plain / chip_counts[c];
    v.vs_bound = s / bound_eps(r, chip_counts[c], BYTES_PER_EDGE);
    if (c > 0) {
        v.scale = p->vs_1chip;
        if (!op_vjp(op) && p->xfer_GBps > 0 && r->memcpy1 > 0)
            v.xfer_vs_memcpy = p->xfer_GBps / r->memcpy1;
        if (!op_vjp(op))
            v.boundary_vs_interior = p->bnd_vs_int;
    }
    if (r->family == PERIODIC) {
        if (op == FWD_MEAN)
            v.pass = v.pass && v.per_core_vs_plain >= TARGET_PLAIN &&
                     v.vs_bound >= TARGET_BOUND;
        return v;
    }
    if (c == 0)
        v.pass = v.pass && v.per_core_vs_plain >= TARGET_PLAIN_RANDOM;
    else
        v.pass = v.pass && v.scale >= TARGET_SCALE &&
                 (op_vjp(op) ||
                  ((v.xfer_vs_memcpy >= TARGET_XFER || p->sent_rows == 0) &&
                   v.boundary_vs_interior >= TARGET_BOUNDARY));
    return v;
}

static bool all_pass(const struct size_result *res, int n)
{
    bool ok = true;

    for (int i = 0; i < n; i++)
        for (int op = 0; op < NUM_OPS; op++)
            for (int c = 0; c < NUM_CHIPS; c++)
                ok = ok && judge(&res[i], op, c).pass;
    return ok;
}

static void print_summary(const struct options *opt,
                          const struct size_result *res, int n,
                          double other_pct)
{
    printf("bench_graph_forward (%s, %d and %d rounds, medians, schedule %s): "
           "%d sources per row on average, %d float32 features.\nbound = "
           "triad GB/s / %.1f B per edge; gather bound = triad GB/s / %.1f B "
           "per edge; ratios are medians of per-round ratios.\n",
           opt->quick ? "quick" : "full", opt->reps[0], opt->reps[1],
           schedule_names[schedule], DEGREE, FEATURES, BYTES_PER_EDGE,
           GATHER_BYTES_PER_EDGE);
    for (int i = 0; i < n; i++) {
        const struct size_result *r = &res[i];

        printf("%s, %llu edges (%llu rows, built in %.1f s): triad %.2f GB/s "
               "(1 core), %.2f GB/s (2 cores); memcpy %.2f GB/s; bound %.0f, "
               "gather bound %.0f M edges/s (1 core); create %.2f s (1 "
               "chip), %.2f s (2)\n",
               family_names[r->family], (unsigned long long)r->edges,
               (unsigned long long)r->rows, r->gen_s, r->triad1, r->triad2,
               r->memcpy1, bound_eps(r, 1, BYTES_PER_EDGE) / 1e6,
               bound_eps(r, 1, GATHER_BYTES_PER_EDGE) / 1e6, r->setup_s[0],
               r->setup_s[1]);
        for (int op = 0; op < NUM_OPS; op++) {
            printf("  %-12s plain %6.1f M edges/s", op_names[op],
                   eps(r->edges, r->plain_s[op]) / 1e6);
            for (int c = 0; c < NUM_CHIPS; c++) {
                const struct point *p = &r->pt[op][c];
                struct verdict v = judge(r, op, c);

                printf(" | %d chip%s %6.1f (%.2fx plain/core", chip_counts[c],
                       c ? "s" : " ", eps(r->edges, p->call_s) / 1e6,
                       v.per_core_vs_plain);
                if (c > 0)
                    printf(", %.2fx 1 chip", v.scale);
                if (v.xfer_vs_memcpy > 0)
                    printf(", xchg %.1f GB/s", p->xfer_GBps);
                if (v.boundary_vs_interior > 0)
                    printf(", bnd %.2fx int", v.boundary_vs_interior);
                printf(")%s%s", p->exact ? "" : " WRONG", v.pass ? "" : " (!)");
            }
            printf("\n");
        }
    }
    printf("targets: periodic forward mean per chip >= %.0f %% of plain and "
           ">= %.0f %% of bound; random/rmat: 2 chips >= %.1fx 1 chip, 1 "
           "chip >= %.1fx plain,\nexchange >= %.0f %% of memcpy per rank, "
           "boundary edges/s >= %.0f %% of interior (forward; in place, "
           "nothing is exchanged). (!) = missed.\n",
           100 * TARGET_PLAIN, 100 * TARGET_BOUND, TARGET_SCALE,
           TARGET_PLAIN_RANDOM, 100 * TARGET_XFER, 100 * TARGET_BOUNDARY);
    bench_print_load(other_pct);
}

static void print_json(const struct options *opt, const struct size_result *res,
                       int done, double other_pct, const char *error)
{
    const struct size_result *h = done > 0 ? &res[done - 1] : NULL;
    bool have = error == NULL && h != NULL;
    double s = have ? eps(h->edges, h->pt[FWD_MEAN][0].call_s) : -1;
    double p = have ? eps(h->edges, h->plain_s[FWD_MEAN]) : -1;

    printf("{\"bench\":\"graph_forward\",\"metric\":\"edges_per_s_%s_%lluM_"
           "1chip\",\"unit\":\"edges/s\",",
           h ? family_names[h->family] : "none",
           (unsigned long long)(opt->edges[NUM_SIZES - 1] / 1000000));
    bench_json_num("strata", s, true);
    printf("\"reference_name\":\"plain_csr_neighbour_mean_1core\",");
    bench_json_num("reference", p, true);
    bench_json_num("ratio", have ? s / p : -1, true);
    bench_json_num("target", have ? p : -1, true);
    printf("\"pass\":%s,", have && all_pass(res, done) ? "true" : "false");
    printf("\"target_rule\":\"periodic forward mean: per chip >= 0.8 x plain "
           "and >= 0.5 x bandwidth bound; random and rmat, forward and vjp, "
           "sum and mean: 2 chips >= 1.5 x 1 chip, 1 chip >= 1.0 x plain, "
           "forward exchange per rank >= 0.5 x memcpy (none in place), "
           "boundary edges/s >= 0.8 x interior; every size\",");
    printf("\"schedule\":\"%s\",", schedule_names[schedule]);
    printf("\"bytes_per_edge_bound\":%.2f,\"bytes_per_edge_gather\":%.2f,"
           "\"points\":[",
           BYTES_PER_EDGE, GATHER_BYTES_PER_EDGE);
    for (int i = 0; i < done; i++) {
        const struct size_result *r = &res[i];

        for (int op = 0; op < NUM_OPS; op++)
            for (int c = 0; c < NUM_CHIPS; c++) {
                const struct point *pt = &r->pt[op][c];
                struct verdict v = judge(r, op, c);

                printf("%s{\"graph\":\"%s\",\"op\":\"%s\",\"edges\":%llu,"
                       "\"rows\":%llu,\"chips\":%d,",
                       i + op + c ? "," : "", family_names[r->family],
                       op_names[op], (unsigned long long)r->edges,
                       (unsigned long long)r->rows, chip_counts[c]);
                bench_json_num("strata_call_s", pt->call_s, true);
                bench_json_num("strata_compute_s", pt->compute_s, true);
                bench_json_num("strata_edges_per_s", eps(r->edges, pt->call_s),
                               true);
                bench_json_num("plain_edges_per_s",
                               eps(r->edges, r->plain_s[op]), true);
                bench_json_num("triad_GBps", c == 0 ? r->triad1 : r->triad2,
                               true);
                bench_json_num("memcpy_GBps", r->memcpy1, true);
                bench_json_num("bound_edges_per_s",
                               bound_eps(r, chip_counts[c], BYTES_PER_EDGE),
                               true);
                bench_json_num(
                    "gather_bound_edges_per_s",
                    bound_eps(r, chip_counts[c], GATHER_BYTES_PER_EDGE), true);
                bench_json_num("per_core_vs_plain", v.per_core_vs_plain, true);
                bench_json_num("vs_bound", v.vs_bound, true);
                bench_json_num("vs_1chip", v.scale, true);
                bench_json_num("vs_1chip_of_medians",
                               c > 0 ? r->pt[op][0].call_s / pt->call_s : -1,
                               true);
                bench_json_num("exchange_GBps_per_rank", pt->xfer_GBps, true);
                bench_json_num("exchange_vs_memcpy", v.xfer_vs_memcpy, true);
                bench_json_num("boundary_vs_interior", v.boundary_vs_interior,
                               true);
                printf("\"boundary_rows\":%llu,\"sent_rows\":%llu,"
                       "\"exact\":%s,\"pass\":%s}",
                       (unsigned long long)pt->boundary_rows,
                       (unsigned long long)pt->sent_rows,
                       pt->exact ? "true" : "false", v.pass ? "true" : "false");
            }
    }
    printf("],");
    bench_json_num("other_cpu_pct", other_pct, true);
    printf("\"reps\":[%d,%d],\"quick\":%s", opt->reps[0], opt->reps[1],
           opt->quick ? "true" : "false");
    if (error != NULL)
        printf(",\"error\":\"%s\"", error);
    printf("}\n");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    static struct size_result res[NUM_FAMILIES * NUM_SIZES];
    struct machine_load load0, load1;
    struct options opt = {.family = -1};
    double other;
    int n = 0;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            opt.quick = true;
        } else if (strcmp(argv[i], "--verbose") == 0) {
            verbose = true;
        } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            opt.reps[0] = opt.reps[1] = atoi(argv[++i]);
            if (opt.reps[0] < 1 || opt.reps[0] >= MAX_REPS) {
                fprintf(stderr, "bench_graph_forward: reps 1..%d\n",
                        MAX_REPS - 1);
                return 2;
            }
        } else if (strcmp(argv[i], "--schedule") == 0 && i + 1 < argc) {
            const char *sc = argv[++i];
            int k = -1;

            for (int q = 0; q < 3; q++)
                if (strcmp(sc, schedule_names[q]) == 0)
                    k = q;
            if (k < 0) {
                fprintf(stderr, "bench_graph_forward: --schedule overlapped, "
                                "serialized or in_place\n");
                return 2;
            }
            schedule = (strata_halo_schedule)k;
        } else if (strcmp(argv[i], "--graph") == 0 && i + 1 < argc) {
            const char *g = argv[++i];

            for (int f = 0; f < NUM_FAMILIES; f++)
                if (strcmp(g, family_names[f]) == 0)
                    opt.family = f;
            if (opt.family < 0) {
                fprintf(stderr, "bench_graph_forward: --graph periodic, "
                                "random or rmat\n");
                return 2;
            }
        } else {
            fprintf(stderr, "usage: bench_graph_forward [--quick] [--reps K] "
                            "[--graph periodic|random|rmat]\n"
                            "       [--schedule overlapped|serialized|"
                            "in_place] [--verbose]\n");
            return 2;
        }
    }
    /* A smaller size's calls are short, so one slow phase of a shared
     * machine spans more of its rounds: it gets more of them. */
    if (opt.reps[0] == 0) {
        opt.reps[0] = opt.quick ? 3 : 9;
        opt.reps[1] = opt.quick ? 3 : 5;
    }
    opt.edges[0] = opt.quick ? 1000000 : 10000000;
    opt.edges[1] = opt.quick ? 10000000 : 100000000;
    machine_load_sample(&load0);
    for (int f = 0; f < NUM_FAMILIES; f++) {
        if (opt.family >= 0 && f != opt.family)
            continue;
        for (int i = 0; i < NUM_SIZES; i++, n++)
            if (bench_size(&opt, f, i, &res[n]) != 0) {
                machine_load_sample(&load1);
                print_json(&opt, res, n, machine_load_other_pct(&load0, &load1),
                           "measurement failed");
                return 1;
            }
    }
    machine_load_sample(&load1);
    other = machine_load_other_pct(&load0, &load1);
    print_summary(&opt, res, n, other);
    print_json(&opt, res, n, other, NULL);
    return 0;
}
