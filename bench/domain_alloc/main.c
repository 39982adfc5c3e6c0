/*
 * bench_domain_alloc: what it costs to allocate and free a communication
 * domain, against MPI_Win_allocate_shared + MPI_Win_free on as many ranks.
 *
 * For 2, 4 and 8 chips (one L3 worker per chip count, chips 0..n-1):
 * 1. First allocation: the worker's first domain also sends COMM_INIT to
 *    every chip; timed once, inside the orch fn.
 * 2. Cycle: many runs of an orch fn that allocates a domain over every
 *    chip and releases it; the windows are freed at the run's fence. The
 *    whole strata_worker_run is the cycle time; the allocation alone is
 *    timed inside the orch fn; free = from the orch fn's return to
 *    strata_worker_run's return (fence + unmap + free). Windows of 4 KiB
 *    and 64 MiB per rank; medians.
 * 3. Touch (64 MiB): a fresh window costs nothing until its pages are
 *    touched, so a group of kernels, one per member, memsets its own
 *    window once (first touch: page faults + zeroing by the kernel +
 *    write) and once more (write only); the fence then frees the touched
 *    windows, timed as above.
 * The reference, in the same run: bench_domain_alloc_mpi under
 * `mpirun --oversubscribe -np n` for the same sizes (mpi_helper.c). This
 * process never initializes MPI; it reads the helper's line over a pipe.
 *
 * The whole comparison runs --rounds times (full: 3, --quick: 1); each
 * figure is the median of the rounds' medians. The share of the CPU that
 * other processes used meanwhile is reported (machine_load.c).
 *
 * The last stdout line is one JSON object (see bench/CMakeLists.txt).
 * Usage: bench_domain_alloc [--quick] [--rounds K]
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <strata/strata.h>

#include "bench_common.h"
#include "machine_load.h"
#include "mpi_launch.h"
#include "stats.h"

#define NUM_N 3
#define NUM_SIZES 2
#define MAX_CHIPS 8
#define SMALL ((size_t)4 << 10)
#define LARGE ((size_t)64 << 20)
#define TARGET_RATIO 0.5 /* strata cycle <= 0.5 x MPI's at 4 KiB */
#define HEADLINE_N 1     /* index into chip_counts: 4 chips */
#define MPI_TIMEOUT_S 120.0
#define MAX_ROUNDS 9

static const int chip_counts[NUM_N] = {2, 4, 8};
static const size_t sizes[NUM_SIZES] = {SMALL, LARGE};

struct options {
    bool quick;
    int rounds;      /* the whole comparison, repeated; medians of rounds */
    int iters;       /* alloc/release cycles per size and round */
    int touch_iters; /* touch runs at 64 MiB per round */
};

/* Medians for one chip count and window size. Touch fields only for the
 * large window; -1 where not measured. */
struct point {
    double alloc_us, free_us, cycle_us;
    /* strata, 4 KiB: the cycle with a no-op kernel per member (which maps
     * the windows before it runs) and its free (unmapping everywhere). */
    double used_cycle_us, used_free_us;
    double touch_ms, rewrite_ms, touch_wall_ms, free_touched_us;
};

struct result {
    double first_alloc_us;          /* strata, with COMM_INIT */
    double empty_run_us;            /* strata, a run that does nothing */
    struct point strata[NUM_SIZES]; /* by size */
    struct point mpi[NUM_SIZES];    /* by size; cycle_us < 0: none */
    bool mpi_ok;
};

struct results {
    struct result by_n[NUM_N];
    double other_cpu_pct; /* other processes' share of the CPUs, or -1 */
    char mpi_note[512];   /* why MPI numbers are missing, if they are */
};

/* What one run's orch fn does and what it measured. */
struct job {
    const int *workers;
    size_t n;
    size_t window;
    bool touch;
    bool use; /* a group of no-op kernels over the members */
    strata_callable touch_kernel, noop_kernel;
    strata_buffer *times; /* touch: 4 doubles per rank */
    double alloc_us;      /* out */
    double orch_end_us;   /* out: when the orch fn returned */
    strata_domain *domain;
};

static void report(const char *what, strata_err err)
{
    fprintf(stderr, "bench_domain_alloc: %s: %s (%s): %s\n", what,
            strata_errname(err), strata_strerror(err), strata_errmsg());
}

/* Writes the whole window twice: out[0..3) = start, end of the first pass
 * (first touch), end of the second (pages present), in monotonic us. */
static strata_err touch_kernel(strata_chip *chip, const strata_args *args)
{
    const strata_comm_context *cc =
        strata_chip_comm_context(chip, strata_args_scalar(args, 0));
    double *out = strata_args_tensor_data(args, 0);
    unsigned char *win;

    if (cc == NULL) {
        strata_errmsg_set("touch: no domain context");
        return STRATA_ENOENT;
    }
    win = cc->window_base[cc->rank];
    out[0] = bench_now_us();
    memset(win, 0xa5, cc->window_size);
    out[1] = bench_now_us();
    memset(win, 0x5a, cc->window_size);
    out[2] = bench_now_us();
    if (win[cc->window_size - 1] != 0x5a) {
        strata_errmsg_set("touch: window does not hold what was written");
        return STRATA_EIO;
    }
    return STRATA_OK;
}

/* Runs in a mapped window: the context is there, and nothing else. */
static strata_err noop_kernel(strata_chip *chip, const strata_args *args)
{
    if (!strata_chip_comm_context(chip, strata_args_scalar(args, 0))) {
        strata_errmsg_set("noop: no domain context");
        return STRATA_ENOENT;
    }
    return STRATA_OK;
}

/* One kernel per member, as a group: the touch kernel, or the no-op one
 * (j->use). */
static strata_err submit_group(strata_orch *o, struct job *j)
{
    strata_args *a[MAX_CHIPS] = {0};
    strata_err err = STRATA_OK;

    for (size_t r = 0; r < j->n && err == STRATA_OK; r++) {
        static const size_t shape[1] = {4};
        strata_chip_domain_ctx ctx;

        err = strata_domain_context(j->domain, j->workers[r], &ctx);
        if (err == STRATA_OK)
            err = strata_args_create(&a[r]);
        if (err == STRATA_OK)
            err = strata_args_add_tensor(a[r], j->times, r * 4 * sizeof(double),
                                         STRATA_F64, 1, shape, STRATA_OUT);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(a[r], ctx.device_ctx);
    }
    if (err == STRATA_OK)
        err = strata_orch_scope_begin(o);
    if (err == STRATA_OK) {
        err = strata_orch_submit_next_level_group(
            o, j->use ? j->noop_kernel : j->touch_kernel,
            (const strata_args *const *)a, j->workers, j->n);
        strata_err end = strata_orch_scope_end(o);
        if (err == STRATA_OK)
            err = end;
    }
    for (size_t r = 0; r < j->n; r++)
        strata_args_destroy(a[r]);
    return err;
}

/* Allocates a domain over every worker with one buffer filling the
 * window, optionally touches it from the chips, releases it. */
static strata_err cycle_orch(strata_orch *o, const strata_args *unused,
                             void *user)
{
    struct job *j = user;
    strata_comm_buffer_spec buf = {"data", STRATA_U8, j->window, j->window};
    strata_domain_spec spec = {"bench", j->workers, j->n, j->window, &buf, 1};
    strata_err err;
    double t0;

    (void)unused;
    t0 = bench_now_us();
    err = strata_orch_allocate_domain(o, &spec, &j->domain);
    j->alloc_us = bench_now_us() - t0;
    if (err == STRATA_OK && (j->touch || j->use))
        err = submit_group(o, j);
    if (err == STRATA_OK)
        err = strata_domain_release(j->domain);
    j->orch_end_us = bench_now_us();
    return err;
}

static strata_err empty_orch(strata_orch *o, const strata_args *unused,
                             void *user)
{
    (void)o;
    (void)unused;
    (void)user;
    return STRATA_OK;
}

/* One cycle: the whole run, and from the orch fn's return to the run's
 * (the fence, then unmapping and freeing every window). */
static strata_err one_cycle(strata_worker *w, struct job *j, double *cycle_us,
                            double *free_us)
{
    double t0 = bench_now_us(), t1;
    strata_err err = strata_worker_run(w, cycle_orch, NULL, j);

    t1 = bench_now_us();
    *cycle_us = t1 - t0;
    *free_us = t1 - j->orch_end_us;
    if (err == STRATA_OK && !strata_domain_freed(j->domain)) {
        strata_errmsg_set("domain not freed after the fence");
        err = STRATA_ESTATE;
    }
    return err;
}

/* Medians of iters cycles (after 5 warm-up cycles) into p. */
static strata_err measure_cycles(strata_worker *w, struct job *j, int iters,
                                 struct point *p)
{
    double *a = calloc((size_t)iters, sizeof(double));
    double *f = calloc((size_t)iters, sizeof(double));
    double *c = calloc((size_t)iters, sizeof(double));
    strata_err err = STRATA_OK;

    j->touch = false;
    if (!a || !f || !c)
        err = STRATA_ENOMEM;
    for (int i = -5; i < iters && err == STRATA_OK; i++) {
        double cyc, fr;

        err = one_cycle(w, j, &cyc, &fr);
        if (i >= 0) {
            a[i] = j->alloc_us;
            f[i] = fr;
            c[i] = cyc;
        }
    }
    if (err == STRATA_OK) {
        p->alloc_us = stats_median(a, (size_t)iters);
        p->free_us = stats_median(f, (size_t)iters);
        p->cycle_us = stats_median(c, (size_t)iters);
    }
    free(a);
    free(f);
    free(c);
    return err;
}

/* Cycles whose domain a group of no-op kernels uses: medians into p's
 * used fields. */
static strata_err measure_used(strata_worker *w, struct job *j, int iters,
                               struct point *p)
{
    struct point q;
    strata_err err;

    j->use = true;
    err = measure_cycles(w, j, iters, &q);
    j->use = false;
    p->used_cycle_us = q.cycle_us;
    p->used_free_us = q.free_us;
    return err;
}

/* Touch runs: allocate, a group of kernels writes every window twice,
 * release; medians into p's touch fields. */
static strata_err measure_touch(strata_worker *w, struct job *j, int iters,
                                struct point *p)
{
    double touch[16], rewrite[16], wall[16], freed[16];
    const double *t = strata_buffer_data(j->times);
    strata_err err = STRATA_OK;

    if (iters > 16)
        iters = 16;
    j->touch = true;
    for (int i = 0; i < iters && err == STRATA_OK; i++) {
        double cyc, start_min = 1e300, end_max = 0;

        err = one_cycle(w, j, &cyc, &freed[i]);
        touch[i] = rewrite[i] = 0;
        for (size_t r = 0; r < j->n; r++) {
            const double *q = t + 4 * r;
            double a = (q[1] - q[0]) / 1e3, b = (q[2] - q[1]) / 1e3;

            touch[i] = a > touch[i] ? a : touch[i];
            rewrite[i] = b > rewrite[i] ? b : rewrite[i];
            start_min = q[0] < start_min ? q[0] : start_min;
            end_max = q[1] > end_max ? q[1] : end_max;
        }
        wall[i] = (end_max - start_min) / 1e3;
    }
    j->touch = false;
    if (err == STRATA_OK) {
        p->touch_ms = stats_median(touch, (size_t)iters);
        p->rewrite_ms = stats_median(rewrite, (size_t)iters);
        p->touch_wall_ms = stats_median(wall, (size_t)iters);
        p->free_touched_us = stats_median(freed, (size_t)iters);
    }
    return err;
}

static strata_err measure_empty(strata_worker *w, int iters, double *out)
{
    double *v = calloc((size_t)iters, sizeof(double));
    strata_err err = v ? STRATA_OK : STRATA_ENOMEM;

    for (int i = -5; i < iters && err == STRATA_OK; i++) {
        double t0 = bench_now_us();

        err = strata_worker_run(w, empty_orch, NULL, NULL);
        if (i >= 0)
            v[i] = bench_now_us() - t0;
    }
    if (err == STRATA_OK)
        *out = stats_median(v, (size_t)iters);
    free(v);
    return err;
}

/* Every strata measurement for one chip count, on a fresh worker. */
static int bench_strata(int n, const strata_callable kernels[2],
                        const struct options *opt, struct result *res)
{
    int ids[MAX_CHIPS];
    strata_worker_config cfg;
    strata_worker *w = NULL;
    struct job j = {0};
    strata_err err;
    double cyc, fr;
    int rc = 1;

    for (int i = 0; i < n; i++)
        ids[i] = i;
    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = ids;
    cfg.num_chips = (size_t)n;
    err = strata_worker_create(&cfg, &w);
    if (err == STRATA_OK)
        err = strata_worker_init(w);
    if (err == STRATA_OK)
        err = strata_worker_create_buffer(w, MAX_CHIPS * 4 * sizeof(double),
                                          &j.times);
    if (err != STRATA_OK) {
        report("worker setup", err);
        goto out;
    }
    j.workers = ids;
    j.n = (size_t)n;
    j.touch_kernel = kernels[0];
    j.noop_kernel = kernels[1];
    j.window = SMALL;
    err = one_cycle(w, &j, &cyc, &fr); /* the first: with COMM_INIT */
    res->first_alloc_us = j.alloc_us;
    if (err == STRATA_OK)
        err = measure_empty(w, opt->iters, &res->empty_run_us);
    for (int s = 0; s < NUM_SIZES && err == STRATA_OK; s++) {
        j.window = sizes[s];
        err = measure_cycles(w, &j, opt->iters, &res->strata[s]);
        if (err == STRATA_OK && sizes[s] == SMALL)
            err = measure_used(w, &j, opt->iters, &res->strata[s]);
        if (err == STRATA_OK && sizes[s] == LARGE)
            err = measure_touch(w, &j, opt->touch_iters, &res->strata[s]);
    }
    if (err != STRATA_OK) {
        report("domain cycles", err);
        goto out;
    }
    rc = 0;
out:
    err = strata_worker_destroy(w);
    if (err != STRATA_OK) {
        report("worker destroy", err);
        rc = 1;
    }
    return rc;
}

struct mpi_parse {
    struct result *res;
    int np;
};

static int on_mpi_line(const char *line, void *user)
{
    struct mpi_parse *mp = user;
    struct point p;
    size_t bytes;
    int np, iters, titers;

    if (sscanf(line,
               "MPIRES bytes=%zu np=%d iters=%d alloc_us=%lf free_us=%lf "
               "cycle_us=%lf touch_iters=%d touch_ms=%lf rewrite_ms=%lf "
               "touch_wall_ms=%lf free_touched_us=%lf",
               &bytes, &np, &iters, &p.alloc_us, &p.free_us, &p.cycle_us,
               &titers, &p.touch_ms, &p.rewrite_ms, &p.touch_wall_ms,
               &p.free_touched_us) != 11 ||
        np != mp->np)
        return -1;
    for (int s = 0; s < NUM_SIZES; s++)
        if (sizes[s] == bytes) {
            mp->res->mpi[s] = p;
            return 0;
        }
    return -1;
}

static void bench_mpi(int n, const struct options *opt, struct results *all,
                      struct result *res)
{
    char helper[4096], args[256], why[400];
    struct mpi_parse mp = {res, n};

    res->mpi_ok = false;
    for (int s = 0; s < NUM_SIZES; s++)
        res->mpi[s].cycle_us = -1;
    if (all->mpi_note[0] != '\0')
        return; /* it failed before: do not try again */
    if (!mpi_helper_path("bench_domain_alloc_mpi", helper, sizeof(helper))) {
        snprintf(all->mpi_note, sizeof(all->mpi_note),
                 "MPI reference helper bench_domain_alloc_mpi not found next "
                 "to this executable (built without MPI?)");
        return;
    }
    snprintf(args, sizeof(args), "--iters %d --touch-iters %d %zu %zu",
             opt->iters, opt->touch_iters, SMALL, LARGE);
    if (mpi_launch(helper, n, args, MPI_TIMEOUT_S, "MPIRES", on_mpi_line, &mp,
                   why, sizeof(why)) != 0) {
        snprintf(all->mpi_note, sizeof(all->mpi_note),
                 "MPI reference not runnable: %s", why);
        return;
    }
    for (int s = 0; s < NUM_SIZES; s++)
        if (res->mpi[s].cycle_us <= 0) {
            snprintf(all->mpi_note, sizeof(all->mpi_note),
                     "MPI helper gave no result for %zu bytes on %d ranks",
                     sizes[s], n);
            return;
        }
    res->mpi_ok = true;
}

static double median_of(double *v, int n)
{
    return stats_median(v, (size_t)n);
}

/* Field-wise median of n points. */
static void median_point(const struct point *pts, int n, struct point *out)
{
    double v[MAX_ROUNDS];

#define MEDIAN_FIELD(f)                                                        \
    do {                                                                       \
        for (int i = 0; i < n; i++)                                            \
            v[i] = pts[i].f;                                                   \
        out->f = median_of(v, n);                                              \
    } while (0)
    MEDIAN_FIELD(alloc_us);
    MEDIAN_FIELD(free_us);
    MEDIAN_FIELD(cycle_us);
    MEDIAN_FIELD(used_cycle_us);
    MEDIAN_FIELD(used_free_us);
    MEDIAN_FIELD(touch_ms);
    MEDIAN_FIELD(rewrite_ms);
    MEDIAN_FIELD(touch_wall_ms);
    MEDIAN_FIELD(free_touched_us);
#undef MEDIAN_FIELD
}

/* The rounds' medians, field by field, into out. */
static void combine_rounds(const struct results *rounds, int n,
                           struct results *out)
{
    for (int i = 0; i < NUM_N; i++) {
        struct result *o = &out->by_n[i];
        struct point pts[MAX_ROUNDS];
        double v[MAX_ROUNDS];

        o->mpi_ok = true;
        for (int k = 0; k < n; k++)
            o->mpi_ok = o->mpi_ok && rounds[k].by_n[i].mpi_ok;
        for (int k = 0; k < n; k++)
            v[k] = rounds[k].by_n[i].first_alloc_us;
        o->first_alloc_us = median_of(v, n);
        for (int k = 0; k < n; k++)
            v[k] = rounds[k].by_n[i].empty_run_us;
        o->empty_run_us = median_of(v, n);
        for (int s = 0; s < NUM_SIZES; s++) {
            for (int k = 0; k < n; k++)
                pts[k] = rounds[k].by_n[i].strata[s];
            median_point(pts, n, &o->strata[s]);
            for (int k = 0; k < n; k++)
                pts[k] = rounds[k].by_n[i].mpi[s];
            median_point(pts, n, &o->mpi[s]);
        }
    }
}

static const char *size_name(size_t b)
{
    return b == SMALL ? "4 KiB" : "64 MiB";
}

static double ratio_of(const struct result *r)
{
    return r->mpi_ok && r->mpi[0].cycle_us > 0
               ? r->strata[0].cycle_us / r->mpi[0].cycle_us
               : -1;
}

static void print_summary(const struct options *opt, const struct results *r,
                          const struct results *rounds)
{
    printf("bench_domain_alloc (%s, %d round%s): medians, us unless marked\n",
           opt->quick ? "quick" : "full", opt->rounds,
           opt->rounds > 1 ? "s, median of the rounds' medians" : "");
    printf("allocate + release cycle (strata: alloc in the orch fn, free at "
           "the run fence;\nMPI: MPI_Win_allocate_shared + MPI_Win_free, "
           "slowest rank):\n");
    printf("  %5s %7s | %9s %9s %9s | %9s %9s %9s | %6s\n", "chips", "window",
           "s.alloc", "s.free", "s.cycle", "mpi.alloc", "mpi.free", "mpi.cycle",
           "ratio");
    for (int i = 0; i < NUM_N; i++) {
        const struct result *x = &r->by_n[i];

        for (int s = 0; s < NUM_SIZES; s++) {
            const struct point *a = &x->strata[s], *m = &x->mpi[s];

            printf("  %5d %7s | %9.1f %9.1f %9.1f | ", chip_counts[i],
                   size_name(sizes[s]), a->alloc_us, a->free_us, a->cycle_us);
            if (x->mpi_ok)
                printf("%9.1f %9.1f %9.1f | %6.3f\n", m->alloc_us, m->free_us,
                       m->cycle_us, a->cycle_us / m->cycle_us);
            else
                printf("%9s %9s %9s | %6s\n", "-", "-", "-", "-");
        }
    }
    printf("strata extras: first allocation of a worker (with COMM_INIT), "
           "empty run:\n");
    for (int i = 0; i < NUM_N; i++)
        printf("  %d chips: first alloc %.1f us, empty run %.2f us\n",
               chip_counts[i], r->by_n[i].first_alloc_us,
               r->by_n[i].empty_run_us);
    printf("used 4 KiB domain: the cycle with a no-op kernel per member (each "
           "maps every\nwindow before it runs; the free unmaps them all), us, "
           "and / MPI's cycle:\n");
    for (int i = 0; i < NUM_N; i++) {
        const struct result *x = &r->by_n[i];

        printf("  %d chips: cycle %.1f, free %.1f", chip_counts[i],
               x->strata[0].used_cycle_us, x->strata[0].used_free_us);
        if (x->mpi_ok && x->mpi[0].cycle_us > 0)
            printf(", %.3f x MPI\n",
                   x->strata[0].used_cycle_us / x->mpi[0].cycle_us);
        else
            printf("\n");
    }
    printf("64 MiB windows, zero-fill = first touch by the owner (each rank "
           "writes its whole\nwindow once, then again), ms; free of the "
           "touched windows, us:\n");
    printf("  %5s | %8s %8s %8s %8s %9s | %8s %8s %8s %8s %9s\n", "chips",
           "s.touch", "s.rewr", "s.wall", "s.GB/s", "s.free", "m.touch",
           "m.rewr", "m.wall", "m.GB/s", "m.free");
    for (int i = 0; i < NUM_N; i++) {
        const struct point *a = &r->by_n[i].strata[1], *m = &r->by_n[i].mpi[1];
        double total = (double)LARGE * chip_counts[i];

        printf("  %5d | %8.2f %8.2f %8.2f %8.2f %9.0f | ", chip_counts[i],
               a->touch_ms, a->rewrite_ms, a->touch_wall_ms,
               total / (a->touch_wall_ms * 1e6), a->free_touched_us);
        if (r->by_n[i].mpi_ok)
            printf("%8.2f %8.2f %8.2f %8.2f %9.0f\n", m->touch_ms,
                   m->rewrite_ms, m->touch_wall_ms,
                   total / (m->touch_wall_ms * 1e6), m->free_touched_us);
        else
            printf("%8s %8s %8s %8s %9s\n", "-", "-", "-", "-", "-");
    }
    if (opt->rounds > 1) {
        printf("4 KiB cycle by round, strata / MPI (us):\n");
        for (int i = 0; i < NUM_N; i++) {
            printf("  %d chips:", chip_counts[i]);
            for (int k = 0; k < opt->rounds; k++)
                printf(" %.0f/%.0f", rounds[k].by_n[i].strata[0].cycle_us,
                       rounds[k].by_n[i].mpi[0].cycle_us);
            printf("\n");
        }
    }
    printf("target: strata cycle <= %.1f x MPI at 4 KiB for every chip count "
           "(8 ranks oversubscribe 2 cores)\n",
           TARGET_RATIO);
    bench_print_load(r->other_cpu_pct);
    if (r->mpi_note[0] != '\0')
        printf("NOTE: %s; reference is null and pass is false\n", r->mpi_note);
}

static void print_json(const struct options *opt, const struct results *r,
                       const char *error)
{
    const struct result *h = &r->by_n[HEADLINE_N];
    bool all_ok = error == NULL, pass;

    for (int i = 0; i < NUM_N; i++)
        all_ok = all_ok && r->by_n[i].mpi_ok;
    pass = all_ok;
    for (int i = 0; i < NUM_N && pass; i++)
        pass = ratio_of(&r->by_n[i]) <= TARGET_RATIO;
    printf("{\"bench\":\"domain_alloc\",\"metric\":\"alloc_release_us_4KiB_"
           "4chips\",\"unit\":\"us\",");
    bench_json_num("strata", error ? -1 : h->strata[0].cycle_us, true);
    printf("\"reference_name\":\"MPI_Win_allocate_shared+MPI_Win_free_4ranks_"
           "OpenMPI\",");
    bench_json_num("reference", all_ok ? h->mpi[0].cycle_us : -1, true);
    bench_json_num("ratio", all_ok ? ratio_of(h) : -1, true);
    bench_json_num("target", all_ok ? TARGET_RATIO * h->mpi[0].cycle_us : -1,
                   true);
    printf("\"pass\":%s,\"target_ratio\":%.1f,", pass ? "true" : "false",
           TARGET_RATIO);
    printf("\"ratio_4KiB\":{");
    for (int i = 0; i < NUM_N; i++) {
        char key[8];

        snprintf(key, sizeof(key), "%d", chip_counts[i]);
        bench_json_num(key, all_ok ? ratio_of(&r->by_n[i]) : -1, i + 1 < NUM_N);
    }
    printf("},\"points\":[");
    for (int i = 0; i < NUM_N; i++) {
        const struct result *x = &r->by_n[i];

        for (int s = 0; s < NUM_SIZES; s++) {
            const struct point *a = &x->strata[s], *m = &x->mpi[s];

            printf("%s{\"chips\":%d,\"window\":%zu,", i + s ? "," : "",
                   chip_counts[i], sizes[s]);
            bench_json_num("strata_alloc_us", a->alloc_us, true);
            bench_json_num("strata_free_us", a->free_us, true);
            bench_json_num("strata_cycle_us", a->cycle_us, true);
            if (sizes[s] == SMALL) {
                bench_json_num("strata_used_cycle_us", a->used_cycle_us, true);
                bench_json_num("strata_used_free_us", a->used_free_us, true);
                bench_json_num("used_ratio",
                               x->mpi_ok && m->cycle_us > 0
                                   ? a->used_cycle_us / m->cycle_us
                                   : -1,
                               true);
            }
            bench_json_num("mpi_alloc_us", x->mpi_ok ? m->alloc_us : -1, true);
            bench_json_num("mpi_free_us", x->mpi_ok ? m->free_us : -1, true);
            bench_json_num("mpi_cycle_us", x->mpi_ok ? m->cycle_us : -1,
                           sizes[s] == LARGE);
            if (sizes[s] == LARGE) {
                bench_json_num("strata_touch_ms", a->touch_ms, true);
                bench_json_num("strata_rewrite_ms", a->rewrite_ms, true);
                bench_json_num("strata_touch_wall_ms", a->touch_wall_ms, true);
                bench_json_num("strata_free_touched_us", a->free_touched_us,
                               true);
                bench_json_num("mpi_touch_ms", x->mpi_ok ? m->touch_ms : -1,
                               true);
                bench_json_num("mpi_rewrite_ms", x->mpi_ok ? m->rewrite_ms : -1,
                               true);
                bench_json_num("mpi_touch_wall_ms",
                               x->mpi_ok ? m->touch_wall_ms : -1, true);
                bench_json_num("mpi_free_touched_us",
                               x->mpi_ok ? m->free_touched_us : -1, false);
            }
            printf("}");
        }
    }
    printf("],\"first_alloc_us\":{");
    for (int i = 0; i < NUM_N; i++) {
        char key[8];

        snprintf(key, sizeof(key), "%d", chip_counts[i]);
        bench_json_num(key, r->by_n[i].first_alloc_us, i + 1 < NUM_N);
    }
    printf("},\"empty_run_us\":{");
    for (int i = 0; i < NUM_N; i++) {
        char key[8];

        snprintf(key, sizeof(key), "%d", chip_counts[i]);
        bench_json_num(key, r->by_n[i].empty_run_us, i + 1 < NUM_N);
    }
    printf("},");
    bench_json_num("other_cpu_pct", r->other_cpu_pct, true);
    printf("\"rounds\":%d,\"iters\":%d,\"touch_iters\":%d,\"quick\":%s",
           opt->rounds, opt->iters, opt->touch_iters,
           opt->quick ? "true" : "false");
    bench_json_end(r->mpi_note, error);
}

static int parse_options(int argc, char **argv, struct options *opt)
{
    memset(opt, 0, sizeof(*opt));
    if (bench_parse_rounds(argc, argv, "bench_domain_alloc", MAX_ROUNDS,
                           &opt->quick, &opt->rounds) != 0)
        return -1;
    if (opt->rounds == 0)
        opt->rounds = opt->quick ? 1 : 3;
    opt->iters = opt->quick ? 100 : 500;
    opt->touch_iters = opt->quick ? 2 : 5;
    return 0;
}

int main(int argc, char **argv)
{
    static struct results res, rounds[MAX_ROUNDS];
    struct machine_load load0, load1;
    struct options opt;
    strata_callable kernels[2];
    strata_err err;

    if (parse_options(argc, argv, &opt) != 0)
        return 2;
    res.other_cpu_pct = -1;
    err =
        strata_register_kernel("bench.domain_touch", touch_kernel, &kernels[0]);
    if (err == STRATA_OK)
        err = strata_register_kernel("bench.domain_noop", noop_kernel,
                                     &kernels[1]);
    if (err != STRATA_OK) {
        report("register", err);
        print_json(&opt, &res, "kernel registration failed");
        return 1;
    }
    machine_load_sample(&load0);
    /* Rounds spread a slow phase of a shared machine over both sides. */
    for (int k = 0; k < opt.rounds; k++) {
        for (int i = 0; i < NUM_N; i++) {
            /* strata first, then MPI, never both at once: the machine has
             * two cores. The worker is gone before mpirun starts. */
            if (bench_strata(chip_counts[i], kernels, &opt,
                             &rounds[k].by_n[i]) != 0) {
                print_json(&opt, &res, "strata measurement failed");
                return 1;
            }
            bench_mpi(chip_counts[i], &opt, &res, &rounds[k].by_n[i]);
        }
    }
    combine_rounds(rounds, opt.rounds, &res);
    machine_load_sample(&load1);
    res.other_cpu_pct = machine_load_other_pct(&load0, &load1);
    print_summary(&opt, &res, rounds);
    print_json(&opt, &res, NULL);
    return 0;
}
