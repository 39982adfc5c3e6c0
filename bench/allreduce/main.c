/*
 * bench_allreduce: bandwidth of an allreduce through a communication
 * domain's windows, against MPI_Allreduce on as many ranks.
 *
 * The window allreduce (one kernel per member, submitted as a group since
 * the kernels wait on each other): each member copies its input vector
 * into its own window, signals every peer, waits for every peer's signal,
 * sums all windows (its own included, in rank order) into its output
 * vector, and signals every peer that it is done reading. A member writes
 * its window again only after every peer has signalled done, so one
 * domain serves any number of back-to-back allreduces. Floats, MPI_SUM.
 *
 * For 2 and 4 chips and 4 KiB, 64 KiB, 1 MiB, 16 MiB per rank, strata is
 * timed three ways:
 * - kernel: inside the kernels. A group runs a barrier, then `iters`
 *   allreduces back to back between two timestamps; the slowest member's
 *   mean per allreduce counts for the group. Median over repetitions.
 *   This is what the MPI reference measures too (barrier, loop, slowest
 *   rank), so it is the headline and the JSON's `strata`.
 * - dispatched: one group per allreduce, `iters` groups in a scope timed
 *   by the orch fn: adds the group's dispatch and completion per call.
 * - run: a whole strata_worker_run that allocates a domain, runs one
 *   allreduce and releases it (window allocation, first touch of fresh
 *   window pages and the free at the fence included).
 * The reference, in the same run: bench_allreduce_mpi under
 * `mpirun --oversubscribe -np n` (mpi_helper.c), read over a pipe.
 * Algorithm bandwidth = bytes per rank / time per allreduce.
 *
 * The whole comparison runs --rounds times (full: 3, --quick: 1); each
 * figure is the median of the rounds' medians. The share of the CPU that
 * other processes used meanwhile is reported (machine_load.c).
 *
 * The last stdout line is one JSON object (see bench/CMakeLists.txt).
 * Usage: bench_allreduce [--quick] [--rounds K]
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

#define NUM_N 2
#define NUM_SIZES 4
#define MAX_CHIPS 4
#define MAX_REPS 16
#define CTRL_BYTES 192 /* three signal words, one cache line apart */
#define CHUNK 2048     /* floats summed per pass over the ranks */
#define WAIT_S 60.0    /* a signal wait longer than this is a hang */
#define MPI_TIMEOUT_S 240.0
#define HEADLINE_N 0 /* 2 ranks */
#define HEADLINE_S 2 /* 1 MiB */
#define MAX_ROUNDS 9

static const int chip_counts[NUM_N] = {2, 4};
static const size_t sizes[NUM_SIZES] = {(size_t)4 << 10, (size_t)64 << 10,
                                        (size_t)1 << 20, (size_t)16 << 20};

struct options {
    bool quick;
    int rounds;    /* the whole comparison, repeated; medians of rounds */
    size_t budget; /* bytes per rank per repetition: sets iters */
    int min_iters, max_iters, reps, dispatched_max, run_count;
};

struct point {
    int iters;
    double kernel_us;     /* median per allreduce, slowest member */
    double kernel_min_us; /* best repetition */
    double dispatched_us; /* one group per allreduce */
    double run_us;        /* allocate + one allreduce + release, whole run */
    double mpi_us;        /* < 0: none */
    double mpi_min_us;
};

struct results {
    struct point p[NUM_N][NUM_SIZES];
    bool mpi_ok[NUM_N];
    double other_cpu_pct; /* other processes' share of the CPUs, or -1 */
    char mpi_note[512];
};

/* The orch fn's plan and what it measured. */
struct job {
    const int *workers;
    size_t n, bytes;
    int iters, reps, dispatched;
    bool one_shot; /* a run of one allreduce only */
    strata_callable kernel;
    strata_buffer *in, *out, *times;
    size_t stride; /* bytes between ranks' vectors in in/out */
    /* out */
    double kernel_us[MAX_REPS];
    double dispatched_us;
};

/* Counters of one domain, so that generations line up across groups. */
struct domain_state {
    strata_domain *d;
    uint64_t ctx[MAX_CHIPS];
    uint32_t gens, barriers;
};

static void report(const char *what, strata_err err)
{
    fprintf(stderr, "bench_allreduce: %s: %s (%s): %s\n", what,
            strata_errname(err), strata_strerror(err), strata_errmsg());
}

static float input_value(size_t i, size_t rank)
{
    return (float)(i % 997) + (float)rank;
}

/* Signal words after the vector in rank r's window. */
static volatile uint32_t *ctrl_word(const strata_comm_context *cc, uint32_t r,
                                    size_t bytes, size_t which)
{
    return (volatile uint32_t *)((char *)cc->window_base[r] + bytes +
                                 which * 64);
}

enum { ARRIVED = 0, CONSUMED = 1, BARRIER = 2 };

static void signal_peers(const strata_comm_context *cc, size_t bytes,
                         size_t which)
{
    for (uint32_t p = 0; p < cc->rank_count; p++)
        if (p != cc->rank)
            strata_signal_add(ctrl_word(cc, p, bytes, which), 1);
}

/* out = sum of every rank's window, in rank order, a chunk at a time so
 * that the output stays in cache while the ranks are added. */
static void sum_windows(const strata_comm_context *cc, float *restrict out,
                        size_t count)
{
    uint32_t n = cc->rank_count;

    for (size_t off = 0; off < count; off += CHUNK) {
        size_t len = count - off < CHUNK ? count - off : CHUNK;
        const float *restrict a = (const float *)cc->window_base[0] + off;
        const float *restrict b = (const float *)cc->window_base[1] + off;
        float *restrict o = out + off;

        for (size_t i = 0; i < len; i++)
            o[i] = a[i] + b[i];
        for (uint32_t r = 2; r < n; r++) {
            const float *restrict c = (const float *)cc->window_base[r] + off;

            for (size_t i = 0; i < len; i++)
                o[i] += c[i];
        }
    }
}

/* args: tensors in (IN), out (OUT), times (OUT, 2 doubles); scalars
 * device_ctx, iters, generations before this group, barriers before it,
 * whether to run a barrier first. */
static strata_err allreduce_kernel(strata_chip *chip, const strata_args *args)
{
    const strata_comm_context *cc =
        strata_chip_comm_context(chip, strata_args_scalar(args, 0));
    const float *in = strata_args_tensor_data(args, 0);
    float *out = strata_args_tensor_data(args, 1);
    double *times = strata_args_tensor_data(args, 2);
    size_t bytes = strata_args_tensor_nbytes(args, 0);
    uint32_t iters = (uint32_t)strata_args_scalar(args, 1);
    uint32_t gen0 = (uint32_t)strata_args_scalar(args, 2);
    uint32_t bar0 = (uint32_t)strata_args_scalar(args, 3);
    bool barrier = strata_args_scalar(args, 4) != 0;
    uint32_t peers;
    strata_err err;

    if (cc == NULL || cc->rank_count < 2) {
        strata_errmsg_set("allreduce: no domain context of 2+ ranks");
        return STRATA_ENOENT;
    }
    peers = cc->rank_count - 1;
    if (barrier) {
        signal_peers(cc, bytes, BARRIER);
        err = strata_signal_wait(ctrl_word(cc, cc->rank, bytes, BARRIER),
                                 (bar0 + 1) * peers, WAIT_S);
        if (err != STRATA_OK)
            return err;
    }
    times[0] = bench_now_us();
    for (uint32_t g = gen0 + 1; g <= gen0 + iters; g++) {
        /* Every peer has read my previous vector. */
        err = strata_signal_wait(ctrl_word(cc, cc->rank, bytes, CONSUMED),
                                 (g - 1) * peers, WAIT_S);
        if (err != STRATA_OK)
            return err;
        memcpy(cc->window_base[cc->rank], in, bytes);
        signal_peers(cc, bytes, ARRIVED);
        /* A peer signals generation g + 1 only after I consumed g, so
         * g * peers arrivals mean every peer's vector g is in place. */
        err = strata_signal_wait(ctrl_word(cc, cc->rank, bytes, ARRIVED),
                                 g * peers, WAIT_S);
        if (err != STRATA_OK)
            return err;
        sum_windows(cc, out, bytes / sizeof(float));
        signal_peers(cc, bytes, CONSUMED);
    }
    times[1] = bench_now_us();
    return STRATA_OK;
}

static strata_err allocate(strata_orch *o, struct job *j,
                           struct domain_state *ds)
{
    strata_comm_buffer_spec bufs[2] = {
        {"vec", STRATA_F32, j->bytes / sizeof(float), j->bytes},
        {"ctrl", STRATA_U32, CTRL_BYTES / sizeof(uint32_t), CTRL_BYTES}};
    strata_domain_spec spec = {"allreduce",           j->workers, j->n,
                               j->bytes + CTRL_BYTES, bufs,       2};
    strata_err err;

    memset(ds, 0, sizeof(*ds));
    err = strata_orch_allocate_domain(o, &spec, &ds->d);
    for (size_t r = 0; r < j->n && err == STRATA_OK; r++) {
        strata_chip_domain_ctx ctx;

        err = strata_domain_context(ds->d, j->workers[r], &ctx);
        ds->ctx[r] = ctx.device_ctx;
    }
    return err;
}

/* Submits one group running iters allreduces. */
static strata_err submit_group(strata_orch *o, struct job *j,
                               struct domain_state *ds, uint32_t iters,
                               bool barrier)
{
    strata_args *a[MAX_CHIPS] = {0};
    strata_err err = STRATA_OK;

    for (size_t r = 0; r < j->n && err == STRATA_OK; r++) {
        size_t count = j->bytes / sizeof(float), two = 2;

        err = strata_args_create(&a[r]);
        if (err == STRATA_OK)
            err = strata_args_add_tensor(a[r], j->in, r * j->stride, STRATA_F32,
                                         1, &count, STRATA_IN);
        if (err == STRATA_OK)
            err = strata_args_add_tensor(a[r], j->out, r * j->stride,
                                         STRATA_F32, 1, &count, STRATA_OUT);
        if (err == STRATA_OK)
            err = strata_args_add_tensor(a[r], j->times, r * 2 * sizeof(double),
                                         STRATA_F64, 1, &two, STRATA_OUT);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(a[r], ds->ctx[r]);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(a[r], iters);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(a[r], ds->gens);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(a[r], ds->barriers);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(a[r], barrier);
    }
    if (err == STRATA_OK)
        err = strata_orch_submit_next_level_group(
            o, j->kernel, (const strata_args *const *)a, j->workers, j->n);
    if (err == STRATA_OK) {
        ds->gens += iters;
        ds->barriers += barrier;
    }
    for (size_t r = 0; r < j->n; r++)
        strata_args_destroy(a[r]);
    return err;
}

/* The slowest member's mean time per allreduce of the last group. */
static double group_kernel_us(const struct job *j, uint32_t iters)
{
    const double *t = strata_buffer_data(j->times);
    double worst = 0;

    for (size_t r = 0; r < j->n; r++) {
        double us = (t[2 * r + 1] - t[2 * r]) / iters;

        worst = us > worst ? us : worst;
    }
    return worst;
}

static strata_err scoped_group(strata_orch *o, struct job *j,
                               struct domain_state *ds, uint32_t iters,
                               bool barrier)
{
    strata_err err = strata_orch_scope_begin(o);

    if (err == STRATA_OK) {
        strata_err end;

        err = submit_group(o, j, ds, iters, barrier);
        end = strata_orch_scope_end(o);
        err = err ? err : end;
    }
    return err;
}

/* One run: a domain, then (unless one_shot) warm-up, the kernel-timed
 * repetitions and the dispatched groups; release. */
static strata_err bench_orch(strata_orch *o, const strata_args *unused,
                             void *user)
{
    struct job *j = user;
    struct domain_state ds;
    strata_err err;

    (void)unused;
    err = allocate(o, j, &ds);
    if (err == STRATA_OK && j->one_shot)
        err = submit_group(o, j, &ds, 1, false);
    if (err == STRATA_OK && !j->one_shot)
        err = scoped_group(o, j, &ds, (uint32_t)(2 + j->iters / 10), true);
    for (int r = 0; r < j->reps && err == STRATA_OK && !j->one_shot; r++) {
        err = scoped_group(o, j, &ds, (uint32_t)j->iters, true);
        if (err == STRATA_OK)
            j->kernel_us[r] = group_kernel_us(j, (uint32_t)j->iters);
    }
    if (err == STRATA_OK && !j->one_shot) {
        double t0 = bench_now_us();

        err = strata_orch_scope_begin(o);
        for (int i = 0; i < j->dispatched && err == STRATA_OK; i++)
            err = submit_group(o, j, &ds, 1, false);
        if (err == STRATA_OK)
            err = strata_orch_scope_end(o);
        j->dispatched_us = (bench_now_us() - t0) / j->dispatched;
    }
    if (ds.d != NULL) {
        strata_err rel = strata_domain_release(ds.d);

        err = err ? err : rel;
    }
    return err;
}

static bool check_output(const struct job *j)
{
    const char *base = strata_buffer_data(j->out);
    size_t count = j->bytes / sizeof(float);
    float off = (float)(j->n * (j->n - 1) / 2);

    for (size_t r = 0; r < j->n; r++) {
        const float *o = (const float *)(base + r * j->stride);

        for (size_t i = 0; i < count; i++)
            if (o[i] != (float)j->n * (float)(i % 997) + off) {
                fprintf(stderr,
                        "bench_allreduce: wrong sum on rank %zu at %zu: "
                        "%g\n",
                        r, i, (double)o[i]);
                return false;
            }
    }
    return true;
}

static int iters_for(const struct options *opt, size_t bytes)
{
    size_t it = opt->budget / bytes;

    if (it < (size_t)opt->min_iters)
        it = (size_t)opt->min_iters;
    if (it > (size_t)opt->max_iters)
        it = (size_t)opt->max_iters;
    return (int)it;
}

/* Every strata measurement for one chip count, on a fresh worker. */
static int bench_strata(int ni, strata_callable kernel,
                        const struct options *opt, struct results *res)
{
    int n = chip_counts[ni], ids[MAX_CHIPS];
    size_t stride = sizes[NUM_SIZES - 1];
    strata_worker_config cfg;
    strata_worker *w = NULL;
    struct job j = {0};
    strata_err err;
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
        err = strata_worker_create_buffer(w, (size_t)n * stride, &j.in);
    if (err == STRATA_OK)
        err = strata_worker_create_buffer(w, (size_t)n * stride, &j.out);
    if (err == STRATA_OK)
        err = strata_worker_create_buffer(w, (size_t)n * 2 * sizeof(double),
                                          &j.times);
    if (err != STRATA_OK) {
        report("worker setup", err);
        goto out;
    }
    for (int r = 0; r < n; r++) {
        float *v = (float *)((char *)strata_buffer_data(j.in) + r * stride);

        for (size_t i = 0; i < stride / sizeof(float); i++)
            v[i] = input_value(i, (size_t)r);
    }
    memset(strata_buffer_data(j.out), 0, (size_t)n * stride); /* touch */
    j.workers = ids;
    j.n = (size_t)n;
    j.kernel = kernel;
    j.stride = stride;
    for (int s = 0; s < NUM_SIZES; s++) {
        struct point *p = &res->p[ni][s];
        double run[64];
        int runs = opt->run_count;

        j.bytes = sizes[s];
        j.iters = iters_for(opt, sizes[s]);
        j.reps = opt->reps;
        j.dispatched =
            j.iters < opt->dispatched_max ? j.iters : opt->dispatched_max;
        j.one_shot = false;
        p->iters = j.iters;
        memset(strata_buffer_data(j.out), 0, (size_t)n * stride);
        err = strata_worker_run(w, bench_orch, NULL, &j);
        if (err != STRATA_OK || !check_output(&j)) {
            report("allreduce run", err);
            goto out;
        }
        p->kernel_us = stats_median(j.kernel_us, (size_t)j.reps);
        p->kernel_min_us = j.kernel_us[0]; /* sorted by the median */
        p->dispatched_us = j.dispatched_us;
        /* One-shot runs: fewer of them for large vectors. */
        if ((size_t)runs > opt->budget / sizes[s])
            runs = (int)(opt->budget / sizes[s]);
        runs = runs < 3 ? 3 : runs > 64 ? 64 : runs;
        j.one_shot = true;
        for (int i = 0; i < runs && err == STRATA_OK; i++) {
            double t0 = bench_now_us();

            err = strata_worker_run(w, bench_orch, NULL, &j);
            run[i] = bench_now_us() - t0;
        }
        if (err != STRATA_OK || !check_output(&j)) {
            report("one-shot allreduce run", err);
            goto out;
        }
        p->run_us = stats_median(run, (size_t)runs);
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
    struct point *row;
    int np;
};

static int on_mpi_line(const char *line, void *user)
{
    struct mpi_parse *mp = user;
    size_t bytes;
    int np, iters, reps, ok;
    double us, min_us;

    if (sscanf(line,
               "MPIAR bytes=%zu np=%d iters=%d reps=%d us=%lf min_us=%lf "
               "ok=%d",
               &bytes, &np, &iters, &reps, &us, &min_us, &ok) != 7 ||
        np != mp->np || ok != 1)
        return -1;
    for (int s = 0; s < NUM_SIZES; s++)
        if (sizes[s] == bytes) {
            mp->row[s].mpi_us = us;
            mp->row[s].mpi_min_us = min_us;
            return 0;
        }
    return -1;
}

static void bench_mpi(int ni, const struct options *opt, struct results *all,
                      struct results *res)
{
    char helper[4096], args[512], why[400];
    struct mpi_parse mp = {res->p[ni], chip_counts[ni]};
    size_t len;

    res->mpi_ok[ni] = false;
    for (int s = 0; s < NUM_SIZES; s++)
        res->p[ni][s].mpi_us = res->p[ni][s].mpi_min_us = -1;
    if (all->mpi_note[0] != '\0')
        return; /* it failed before: do not try again */
    if (!mpi_helper_path("bench_allreduce_mpi", helper, sizeof(helper))) {
        snprintf(all->mpi_note, sizeof(res->mpi_note),
                 "MPI reference helper bench_allreduce_mpi not found next to "
                 "this executable (built without MPI?)");
        return;
    }
    len = (size_t)snprintf(args, sizeof(args), "--reps %d", opt->reps);
    for (int s = 0; s < NUM_SIZES && len < sizeof(args); s++)
        len += (size_t)snprintf(args + len, sizeof(args) - len, " %zu:%d",
                                sizes[s], iters_for(opt, sizes[s]));
    if (mpi_launch(helper, chip_counts[ni], args, MPI_TIMEOUT_S, "MPIAR",
                   on_mpi_line, &mp, why, sizeof(why)) != 0) {
        snprintf(all->mpi_note, sizeof(all->mpi_note),
                 "MPI reference not runnable: %s", why);
        return;
    }
    for (int s = 0; s < NUM_SIZES; s++)
        if (res->p[ni][s].mpi_us <= 0) {
            snprintf(all->mpi_note, sizeof(all->mpi_note),
                     "MPI helper gave no result for %zu bytes on %d ranks",
                     sizes[s], chip_counts[ni]);
            return;
        }
    res->mpi_ok[ni] = true;
}

/* Field-wise medians of the rounds into out. */
static void combine_rounds(const struct results *rounds, int n,
                           struct results *out)
{
    double v[MAX_ROUNDS];

    for (int i = 0; i < NUM_N; i++) {
        out->mpi_ok[i] = true;
        for (int k = 0; k < n; k++)
            out->mpi_ok[i] = out->mpi_ok[i] && rounds[k].mpi_ok[i];
        for (int s = 0; s < NUM_SIZES; s++) {
            struct point *o = &out->p[i][s];

            o->iters = rounds[0].p[i][s].iters;
#define MEDIAN_FIELD(f)                                                        \
    do {                                                                       \
        for (int k = 0; k < n; k++)                                            \
            v[k] = rounds[k].p[i][s].f;                                        \
        o->f = stats_median(v, (size_t)n);                                     \
    } while (0)
            MEDIAN_FIELD(kernel_us);
            MEDIAN_FIELD(kernel_min_us);
            MEDIAN_FIELD(dispatched_us);
            MEDIAN_FIELD(run_us);
            MEDIAN_FIELD(mpi_us);
            MEDIAN_FIELD(mpi_min_us);
#undef MEDIAN_FIELD
        }
    }
}

static const char *size_name(size_t b)
{
    static char buf[NUM_SIZES][24];
    static int next;
    char *out = buf[next++ % NUM_SIZES];

    if (b >= ((size_t)1 << 20))
        snprintf(out, 24, "%zu MiB", b >> 20);
    else
        snprintf(out, 24, "%zu KiB", b >> 10);
    return out;
}

/* GB/s (1e9 bytes) for bytes per rank in us; -1 for none. */
static double gbps(size_t bytes, double us)
{
    return us > 0 ? (double)bytes / (us * 1e3) : -1;
}

static void print_summary(const struct options *opt, const struct results *r,
                          const struct results *rounds)
{
    printf("bench_allreduce (%s, %d round%s): float sum, time per allreduce "
           "(us) and algorithm\nbandwidth (bytes per rank / time, GB/s); "
           "medians%s; kernel = timed inside the kernels\n",
           opt->quick ? "quick" : "full", opt->rounds,
           opt->rounds > 1 ? "s" : "",
           opt->rounds > 1 ? " of the rounds' medians" : "");
    printf("  %5s %7s %5s | %9s %7s | %9s %7s | %6s | %10s %10s\n", "ranks",
           "size", "iters", "kernel", "GB/s", "MPI", "GB/s", "ratio",
           "dispatched", "run");
    for (int i = 0; i < NUM_N; i++)
        for (int s = 0; s < NUM_SIZES; s++) {
            const struct point *p = &r->p[i][s];

            printf("  %5d %7s %5d | %9.2f %7.2f | ", chip_counts[i],
                   size_name(sizes[s]), p->iters, p->kernel_us,
                   gbps(sizes[s], p->kernel_us));
            if (r->mpi_ok[i])
                printf("%9.2f %7.2f | %6.3f | ", p->mpi_us,
                       gbps(sizes[s], p->mpi_us), p->mpi_us / p->kernel_us);
            else
                printf("%9s %7s | %6s | ", "-", "-", "-");
            printf("%10.2f %10.2f\n", p->dispatched_us, p->run_us);
        }
    printf("ratio = strata bandwidth / MPI bandwidth (kernel-side time); "
           "dispatched = one group\nper allreduce; run = a whole run that "
           "allocates a domain, runs one allreduce,\nreleases it. 4 ranks "
           "oversubscribe the 2 cores.\n");
    if (opt->rounds > 1) {
        printf("kernel / MPI time by round (us):\n");
        for (int i = 0; i < NUM_N; i++)
            for (int s = 0; s < NUM_SIZES; s++) {
                printf("  %d ranks %7s:", chip_counts[i], size_name(sizes[s]));
                for (int k = 0; k < opt->rounds; k++)
                    printf(" %.1f/%.1f", rounds[k].p[i][s].kernel_us,
                           rounds[k].p[i][s].mpi_us);
                printf("\n");
            }
    }
    bench_print_load(r->other_cpu_pct);
    if (r->mpi_note[0] != '\0')
        printf("NOTE: %s; reference is null and pass is false\n", r->mpi_note);
}

static void print_json(const struct options *opt, const struct results *r,
                       const char *error)
{
    const struct point *h = &r->p[HEADLINE_N][HEADLINE_S];
    bool ok = error == NULL && r->mpi_ok[0] && r->mpi_ok[1];
    double s_bw = error ? -1 : gbps(sizes[HEADLINE_S], h->kernel_us);
    double m_bw = ok ? gbps(sizes[HEADLINE_S], h->mpi_us) : -1;

    printf("{\"bench\":\"allreduce\",\"metric\":\"algbw_1MiB_2ranks_kernel\","
           "\"unit\":\"GB/s\",");
    bench_json_num("strata", s_bw, true);
    printf("\"reference_name\":\"MPI_Allreduce_float_sum_2ranks_OpenMPI\",");
    bench_json_num("reference", m_bw, true);
    bench_json_num("ratio", ok ? s_bw / m_bw : -1, true);
    bench_json_num("target", m_bw, true);
    printf("\"pass\":%s,\"strata_time\":\"kernel\",",
           ok && s_bw >= m_bw ? "true" : "false");
    printf("\"points\":[");
    for (int i = 0; i < NUM_N; i++)
        for (int s = 0; s < NUM_SIZES; s++) {
            const struct point *p = &r->p[i][s];
            bool m = r->mpi_ok[i];

            printf("%s{\"ranks\":%d,\"bytes\":%zu,\"iters\":%d,",
                   i + s ? "," : "", chip_counts[i], sizes[s], p->iters);
            bench_json_num("kernel_us", p->kernel_us, true);
            bench_json_num("kernel_GBps", gbps(sizes[s], p->kernel_us), true);
            bench_json_num("dispatched_us", p->dispatched_us, true);
            bench_json_num("run_us", p->run_us, true);
            bench_json_num("mpi_us", m ? p->mpi_us : -1, true);
            bench_json_num("mpi_GBps", m ? gbps(sizes[s], p->mpi_us) : -1,
                           true);
            bench_json_num("ratio", m ? p->mpi_us / p->kernel_us : -1, false);
            printf("}");
        }
    printf("],");
    bench_json_num("other_cpu_pct", r->other_cpu_pct, true);
    printf("\"rounds\":%d,\"reps\":%d,\"quick\":%s", opt->rounds, opt->reps,
           opt->quick ? "true" : "false");
    bench_json_end(r->mpi_note, error);
}

static int parse_options(int argc, char **argv, struct options *opt)
{
    memset(opt, 0, sizeof(*opt));
    if (bench_parse_rounds(argc, argv, "bench_allreduce", MAX_ROUNDS,
                           &opt->quick, &opt->rounds) != 0)
        return -1;
    if (opt->rounds == 0)
        opt->rounds = opt->quick ? 1 : 3;
    opt->budget = opt->quick ? (size_t)32 << 20 : (size_t)128 << 20;
    opt->min_iters = opt->quick ? 2 : 4;
    opt->max_iters = opt->quick ? 500 : 1000;
    opt->reps = opt->quick ? 5 : 7;
    opt->dispatched_max = opt->quick ? 50 : 200;
    opt->run_count = opt->quick ? 10 : 30;
    return 0;
}

int main(int argc, char **argv)
{
    static struct results res, rounds[MAX_ROUNDS];
    struct machine_load load0, load1;
    struct options opt;
    strata_callable kernel;
    strata_err err;

    if (parse_options(argc, argv, &opt) != 0)
        return 2;
    res.other_cpu_pct = -1;
    err = strata_register_kernel("bench.window_allreduce", allreduce_kernel,
                                 &kernel);
    if (err != STRATA_OK) {
        report("register", err);
        print_json(&opt, &res, "kernel registration failed");
        return 1;
    }
    machine_load_sample(&load0);
    /* Rounds spread a slow phase of a shared machine over both sides. */
    for (int k = 0; k < opt.rounds; k++)
        for (int i = 0; i < NUM_N; i++) {
            /* strata first, then MPI, never both at once (two cores). */
            if (bench_strata(i, kernel, &opt, &rounds[k]) != 0) {
                print_json(&opt, &res, "strata measurement failed");
                return 1;
            }
            bench_mpi(i, &opt, &res, &rounds[k]);
        }
    combine_rounds(rounds, opt.rounds, &res);
    machine_load_sample(&load1);
    res.other_cpu_pct = machine_load_other_pct(&load0, &load1);
    print_summary(&opt, &res, rounds);
    print_json(&opt, &res, NULL);
    return 0;
}
