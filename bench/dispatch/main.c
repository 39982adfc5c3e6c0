/*
 * bench_dispatch: what it costs strata to dispatch a task.
 *
 * 1. Floor: a raw two-process ping-pong over a shared page, spinning and
 *    with futex wait/wake (pingpong.c). No runtime can round-trip to a
 *    parked child faster than the futex number on the same machine.
 * 2. Dispatch: an L3 worker with one sim chip and one sub worker. For k in
 *    1, 2, 4, ..., 256, many runs of an orch fn that submits k independent
 *    no-op tasks (no tensors) are timed; the median of several repetitions
 *    gives time(k). A least-squares fit time(k) = fixed + k * per_task
 *    gives the per-run fixed overhead and the per-task overhead, for the
 *    kernel path (chip) and the sub path.
 * 3. Idle: a fresh worker with two chips and one sub worker, after one run
 *    through each child, is left alone for a second; the CPU time its
 *    children (and the parent's scheduler) used in that second is read
 *    from /proc.
 *
 * The last stdout line is one JSON object (see bench/CMakeLists.txt).
 * Usage: bench_dispatch [--quick]
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <strata/strata.h>

#include "bench_common.h"
#include "pingpong.h"
#include "stats.h"

#define NUM_K 9 /* k = 1, 2, 4, ..., 256 */
#define MAX_REPS 15

/* Targets from issue 2 and the competitor's published numbers (FACTS.md). */
#define TARGET_PER_TASK_US 2.0
#define TARGET_PER_RUN_FIXED_US 10.0
#define TARGET_IDLE_CPU_PCT 1.0
#define COMPETITOR_PER_TASK_US 8.08
#define COMPETITOR_PER_RUN_FIXED_US 43.3

struct options {
    bool quick;
    size_t tasks_per_rep; /* tasks timed per repetition, roughly */
    size_t min_runs;      /* runs per repetition, at least */
    size_t reps;          /* repetitions per k; the median is kept */
    size_t spin_iters, futex_iters, pingpong_blocks;
};

/* time(k) and its fits for one dispatch path. */
struct path_result {
    double run_us[NUM_K]; /* median time of one run with k tasks */
    /* Weighted by 1 / time(k)^2: the run-to-run noise grows with the run's
     * length, so each point counts by its relative error. The headline. */
    struct stats_line fit;
    struct stats_line ols; /* unweighted, for comparison */
};

struct results {
    double spin_rtt_us, futex_rtt_us;
    /* Per-task time of k = TRACE_K kernel tasks with the timeline trace
     * off and on (docs/tracing.md): the best of alternating rounds (the
     * machine's noise only ever adds time). */
    double trace_off_us, trace_on_us;
    struct path_result kernel, sub;
    double idle_children_pct;    /* from utime + stime in /proc/<pid>/stat */
    double idle_children_ns_pct; /* from /proc/<pid>/schedstat, ns precise */
    double idle_parent_pct;      /* the whole parent process, main asleep */
};

/* What the orch fn submits. */
struct dispatch {
    strata_callable callable;
    bool sub;
    size_t k;
    strata_args *empty; /* an argument list without tensors or scalars */
};

static const size_t ks[NUM_K] = {1, 2, 4, 8, 16, 32, 64, 128, 256};

/* The tracing comparison: runs of TRACE_K tasks, rounds (5 quick, 11
 * full) of a worker without and one with a trace file, alternating so that
 * a slow phase of the machine hits both. */
#define TRACE_K 256
#define TRACE_ROUNDS_MAX 11
/* Issue 19: tracing on may cost at most this share of a task. */
#define TARGET_TRACE_PCT 10.0

static strata_callable noop_kernel_callable;

static void report(const char *what, strata_err err)
{
    fprintf(stderr, "bench_dispatch: %s: %s (%s): %s\n", what,
            strata_errname(err), strata_strerror(err), strata_errmsg());
}

static strata_err noop_kernel(strata_chip *chip, const strata_args *args)
{
    (void)chip;
    (void)args;
    return STRATA_OK;
}

static strata_err noop_sub(const strata_args *args)
{
    (void)args;
    return STRATA_OK;
}

/* Submits d->k independent no-op tasks to chip 0 or the sub queue. */
static strata_err dispatch_orch(strata_orch *o, const strata_args *unused,
                                void *user)
{
    const struct dispatch *d = user;
    strata_err err = STRATA_OK;

    (void)unused;
    for (size_t i = 0; i < d->k && err == STRATA_OK; i++) {
        if (d->sub)
            err = strata_orch_submit_sub(o, d->callable, d->empty);
        else
            err = strata_orch_submit_next_level(o, d->callable, d->empty, 0);
    }
    return err;
}

/* Mean time of one run with d->k tasks over a batch of runs. */
static strata_err time_batch(strata_worker *w, struct dispatch *d,
                             const struct options *opt, double *run_us_out)
{
    size_t runs = opt->tasks_per_rep / d->k;
    double t0;
    strata_err err;

    if (runs < opt->min_runs)
        runs = opt->min_runs;
    t0 = bench_now_us();
    for (size_t i = 0; i < runs; i++) {
        err = strata_worker_run(w, dispatch_orch, NULL, d);
        if (err != STRATA_OK)
            return err;
    }
    *run_us_out = (bench_now_us() - t0) / (double)runs;
    return STRATA_OK;
}

/* time(k) for every k: the median over opt->reps repetitions. Each
 * repetition sweeps all k, so a slow phase of the machine (another
 * process, a migration) spreads over every k instead of bending one. */
static strata_err measure_path(strata_worker *w, struct dispatch *d,
                               const struct options *opt,
                               struct path_result *out)
{
    double samples[NUM_K][MAX_REPS], x[NUM_K], w_rel[NUM_K];
    strata_err err;

    for (size_t i = 0; i < NUM_K; i++) {
        d->k = ks[i];
        x[i] = (double)ks[i];
        for (size_t r = 0; r < 3; r++) { /* warm-up */
            err = strata_worker_run(w, dispatch_orch, NULL, d);
            if (err != STRATA_OK)
                return err;
        }
    }
    for (size_t r = 0; r < opt->reps; r++) {
        for (size_t i = 0; i < NUM_K; i++) {
            d->k = ks[i];
            err = time_batch(w, d, opt, &samples[i][r]);
            if (err != STRATA_OK)
                return err;
        }
    }
    for (size_t i = 0; i < NUM_K; i++) {
        out->run_us[i] = stats_median(samples[i], opt->reps);
        w_rel[i] = 1.0 / (out->run_us[i] * out->run_us[i]);
    }
    stats_fit_line(x, out->run_us, w_rel, NUM_K, &out->fit);
    stats_fit_line(x, out->run_us, NULL, NUM_K, &out->ols);
    return STRATA_OK;
}

/* The dispatch measurement: one chip (id 0) and one sub worker. */
static int bench_dispatch(const struct options *opt, struct results *res)
{
    static const int chip_ids[1] = {0};
    strata_worker_config cfg;
    strata_worker *w = NULL;
    struct dispatch d = {0};
    strata_callable kernel, sub;
    strata_err err;
    int rc = 1;

    err = strata_register_kernel("bench.noop_kernel", noop_kernel, &kernel);
    if (err == STRATA_OK)
        err = strata_register_sub("bench.noop_sub", noop_sub, &sub);
    if (err == STRATA_OK)
        err = strata_args_create(&d.empty);
    if (err != STRATA_OK) {
        report("setup", err);
        goto out;
    }
    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = chip_ids;
    cfg.num_chips = 1;
    cfg.num_sub_workers = 1;
    err = strata_worker_create(&cfg, &w);
    if (err == STRATA_OK)
        err = strata_worker_init(w);
    if (err != STRATA_OK) {
        report("worker create/init", err);
        goto out;
    }
    noop_kernel_callable = kernel;
    d.callable = kernel;
    d.sub = false;
    err = measure_path(w, &d, opt, &res->kernel);
    if (err != STRATA_OK) {
        report("kernel dispatch runs", err);
        goto out;
    }
    d.callable = sub;
    d.sub = true;
    err = measure_path(w, &d, opt, &res->sub);
    if (err != STRATA_OK) {
        report("sub dispatch runs", err);
        goto out;
    }
    rc = 0;
out:
    err = strata_worker_destroy(w);
    if (err != STRATA_OK) {
        report("worker destroy", err);
        rc = 1;
    }
    strata_args_destroy(d.empty);
    return rc;
}

/* Per-task time of runs of TRACE_K no-op kernel tasks on a fresh worker
 * (one chip) that traces into path, or not (path NULL): the fastest run's,
 * since a run the machine's other load preempted (a chip descheduled
 * stalls the pipeline for a time slice) says nothing about tracing. */
static strata_err trace_round(const char *path, const struct options *opt,
                              struct dispatch *d, double *per_task_us)
{
    static const int chip_ids[1] = {0};
    size_t runs = opt->quick ? 16 : 48;
    strata_worker_config cfg;
    strata_worker *w = NULL;
    strata_err err, derr;
    double best = 0;

    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = chip_ids;
    cfg.num_chips = 1;
    cfg.trace_path = path;
    err = strata_worker_create(&cfg, &w);
    if (err == STRATA_OK)
        err = strata_worker_init(w);
    for (size_t i = 0; i < 3 + runs && err == STRATA_OK; i++) {
        double t0 = bench_now_us(), t;

        err = strata_worker_run(w, dispatch_orch, NULL, d);
        t = bench_now_us() - t0;
        if (i >= 3 && (best == 0 || t < best)) /* after the warm-up */
            best = t;
    }
    if (err == STRATA_OK)
        *per_task_us = best / (double)TRACE_K;
    derr = strata_worker_destroy(w);
    return err != STRATA_OK ? err : derr;
}

/* Tracing on against off (res->trace_*); the trace goes to a temporary
 * file, removed after each round. STRATA_TRACE is ignored here: "off"
 * must be off. */
static int bench_trace(const struct options *opt, struct results *res)
{
    size_t rounds = opt->quick ? 5 : TRACE_ROUNDS_MAX;
    double best_on = 0, best_off = 0, on, off;
    char dir[] = "/tmp/strata-bench-trace-XXXXXX", path[64];
    struct dispatch d = {.callable = noop_kernel_callable, .k = TRACE_K};
    strata_err err = strata_args_create(&d.empty);
    int rc = 1;

    unsetenv("STRATA_TRACE");
    if (err != STRATA_OK || !mkdtemp(dir)) {
        report("trace setup", err);
        strata_args_destroy(d.empty);
        return 1;
    }
    snprintf(path, sizeof(path), "%s/trace.json", dir);
    for (size_t r = 0; r < rounds; r++) {
        /* Each goes first every other round: the first of a pair meets
         * the machine as the previous round's teardown left it. */
        bool on_first = r % 2;

        err =
            trace_round(on_first ? path : NULL, opt, &d, on_first ? &on : &off);
        if (err == STRATA_OK)
            err = trace_round(on_first ? NULL : path, opt, &d,
                              on_first ? &off : &on);
        unlink(path);
        if (err != STRATA_OK) {
            report("trace rounds", err);
            goto out;
        }
        best_off = r == 0 || off < best_off ? off : best_off;
        best_on = r == 0 || on < best_on ? on : best_on;
    }
    res->trace_off_us = best_off;
    res->trace_on_us = best_on;
    rc = 0;
out:
    rmdir(dir);
    strata_args_destroy(d.empty);
    return rc;
}

/* utime + stime of a process, in clock ticks. The command name (field 2)
 * may hold spaces, so parsing starts after its closing parenthesis. */
static int read_stat_ticks(const char *pid, unsigned long long *ticks_out)
{
    char path[64], line[1024], *p;
    unsigned long long utime, stime;
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), "/proc/%s/stat", pid);
    f = fopen(path, "r");
    if (f == NULL)
        return -1;
    n = fread(line, 1, sizeof(line) - 1, f);
    fclose(f);
    line[n] = '\0';
    p = strrchr(line, ')');
    /* After ")": state is field 3; utime and stime are fields 14 and 15. */
    if (p == NULL || sscanf(p + 1,
                            " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
                            "%llu %llu",
                            &utime, &stime) != 2)
        return -1;
    *ticks_out = utime + stime;
    return 0;
}

/* Nanoseconds the process's main thread has spent on a CPU. */
static int read_schedstat_ns(const char *pid, unsigned long long *ns_out)
{
    char path[64];
    FILE *f;
    int ok;

    snprintf(path, sizeof(path), "/proc/%s/schedstat", pid);
    f = fopen(path, "r");
    if (f == NULL)
        return -1;
    ok = fscanf(f, "%llu", ns_out) == 1;
    fclose(f);
    return ok ? 0 : -1;
}

/* One sample of every child's and the parent's CPU counters. */
struct cpu_sample {
    unsigned long long child_ticks, child_ns, self_ticks;
    bool have_ns;
};

static int sample_cpu(const int *pids, size_t n, struct cpu_sample *s)
{
    char pid[24];

    memset(s, 0, sizeof(*s));
    s->have_ns = true;
    for (size_t i = 0; i < n; i++) {
        unsigned long long ticks, ns;
        snprintf(pid, sizeof(pid), "%d", pids[i]);
        if (read_stat_ticks(pid, &ticks) != 0) {
            fprintf(stderr, "bench_dispatch: cannot read /proc/%s/stat\n", pid);
            return -1;
        }
        s->child_ticks += ticks;
        if (read_schedstat_ns(pid, &ns) == 0)
            s->child_ns += ns;
        else
            s->have_ns = false;
    }
    return read_stat_ticks("self", &s->self_ticks);
}

/* Runs one no-op on each child so the whole tree has worked and parked. */
static strata_err touch_orch(strata_orch *o, const strata_args *unused,
                             void *user)
{
    const strata_callable *c = user; /* [kernel, sub] */
    strata_args *a = NULL;
    strata_err err;

    (void)unused;
    err = strata_args_create(&a);
    if (err == STRATA_OK)
        err = strata_orch_submit_next_level(o, c[0], a, 0);
    if (err == STRATA_OK)
        err = strata_orch_submit_next_level(o, c[0], a, 1);
    if (err == STRATA_OK)
        err = strata_orch_submit_sub(o, c[1], a);
    strata_args_destroy(a);
    return err;
}

static int measure_idle(strata_worker *w, struct results *res)
{
    struct timespec one_second = {1, 0};
    struct cpu_sample a, b;
    double t0, wall_s, ticks_per_s = (double)sysconf(_SC_CLK_TCK);
    int pids[3];

    pids[0] = strata_worker_chip_pid(w, 0);
    pids[1] = strata_worker_chip_pid(w, 1);
    pids[2] = strata_worker_sub_pid(w, 0);
    if (pids[0] <= 0 || pids[1] <= 0 || pids[2] <= 0) {
        fprintf(stderr, "bench_dispatch: no child pids\n");
        return -1;
    }
    t0 = bench_now_us();
    if (sample_cpu(pids, 3, &a) != 0)
        return -1;
    while (nanosleep(&one_second, &one_second) != 0 && errno == EINTR)
        ;
    if (sample_cpu(pids, 3, &b) != 0)
        return -1;
    wall_s = (bench_now_us() - t0) / 1e6;
    res->idle_children_pct =
        100.0 * (double)(b.child_ticks - a.child_ticks) / ticks_per_s / wall_s;
    res->idle_children_ns_pct =
        a.have_ns && b.have_ns
            ? 100.0 * (double)(b.child_ns - a.child_ns) / 1e9 / wall_s
            : -1;
    res->idle_parent_pct =
        100.0 * (double)(b.self_ticks - a.self_ticks) / ticks_per_s / wall_s;
    return 0;
}

/* The idle measurement: chips 0 and 1 and one sub worker. */
static int bench_idle(struct results *res)
{
    static const int chip_ids[2] = {0, 1};
    strata_worker_config cfg;
    strata_worker *w = NULL;
    strata_callable c[2];
    strata_err err;
    int rc = 1;

    err = strata_register_kernel("bench.noop_kernel", noop_kernel, &c[0]);
    if (err == STRATA_OK)
        err = strata_register_sub("bench.noop_sub", noop_sub, &c[1]);
    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = chip_ids;
    cfg.num_chips = 2;
    cfg.num_sub_workers = 1;
    if (err == STRATA_OK)
        err = strata_worker_create(&cfg, &w);
    if (err == STRATA_OK)
        err = strata_worker_init(w);
    if (err == STRATA_OK)
        err = strata_worker_run(w, touch_orch, NULL, c);
    if (err != STRATA_OK)
        report("idle worker setup", err);
    else
        rc = measure_idle(w, res);
    err = strata_worker_destroy(w);
    if (err != STRATA_OK) {
        report("idle worker destroy", err);
        rc = 1;
    }
    return rc;
}

static void print_fit(const char *name, const struct path_result *p)
{
    printf("  %-6s fixed %7.2f us, per task %6.3f us, r2 %.4f  "
           "[fixed %7.2f us, per task %6.3f us, r2 %.4f]\n",
           name, p->fit.intercept, p->fit.slope, p->fit.r2, p->ols.intercept,
           p->ols.slope, p->ols.r2);
}

/* Tracing's cost on the per-task time, percent of the time without. */
static double trace_pct(const struct results *r)
{
    return r->trace_off_us > 0
               ? 100.0 * (r->trace_on_us - r->trace_off_us) / r->trace_off_us
               : 0;
}

static void print_summary(const struct options *opt, const struct results *r)
{
    printf("bench_dispatch (%s)\n", opt->quick ? "quick" : "full");
    printf("machine floor, two processes, one shared page:\n");
    printf("  spin ping-pong round trip    %8.3f us\n", r->spin_rtt_us);
    printf("  futex ping-pong round trip   %8.3f us\n", r->futex_rtt_us);
    printf("strata L3 worker, no-op tasks, time of one run with k tasks:\n");
    printf("  %5s  %14s  %14s\n", "k", "kernel (us)", "sub (us)");
    for (size_t i = 0; i < NUM_K; i++)
        printf("  %5zu  %14.2f  %14.2f\n", ks[i], r->kernel.run_us[i],
               r->sub.run_us[i]);
    printf("fit time(k) = fixed + k * per_task, least squares weighted by "
           "1/time(k)^2\n(unweighted fit in brackets):\n");
    print_fit("kernel", &r->kernel);
    print_fit("sub", &r->sub);
    printf("  targets: fixed <= %.0f us, per task <= %.0f us "
           "(competitor: %.1f us, %.2f us)\n",
           TARGET_PER_RUN_FIXED_US, TARGET_PER_TASK_US,
           COMPETITOR_PER_RUN_FIXED_US, COMPETITOR_PER_TASK_US);
    printf("timeline trace, runs of %d kernel tasks, per task (fastest run): "
           "off %.3f us, on %.3f us (%+.1f %%, target <= %.0f %%)\n",
           TRACE_K, r->trace_off_us, r->trace_on_us, trace_pct(r),
           TARGET_TRACE_PCT);
    printf("idle worker (2 chips + 1 sub) over 1 s:\n");
    printf("  children CPU %.2f %% (ticks), %.3f %% (schedstat); parent "
           "CPU %.2f %%\n",
           r->idle_children_pct, r->idle_children_ns_pct, r->idle_parent_pct);
}

static bool passed(const struct results *r)
{
    return r->kernel.fit.slope <= TARGET_PER_TASK_US &&
           r->kernel.fit.intercept <= TARGET_PER_RUN_FIXED_US &&
           r->idle_children_pct < TARGET_IDLE_CPU_PCT;
}

/* The last stdout line. error != NULL marks a failed bench (pass false,
 * numbers as far as measured). */
static void print_json(const struct options *opt, const struct results *r,
                       const char *error)
{
    double ref = r->futex_rtt_us;

    printf("{\"bench\":\"dispatch\",\"metric\":\"per_task_us\",\"unit\":\"us\","
           "\"strata\":%.4f,\"reference_name\":\"futex_pingpong_rtt_us\","
           "\"reference\":%.4f,\"ratio\":%.4f,\"target\":%.1f,\"pass\":%s,",
           r->kernel.fit.slope, ref, ref > 0 ? r->kernel.fit.slope / ref : 0,
           TARGET_PER_TASK_US, error == NULL && passed(r) ? "true" : "false");
    printf("\"per_run_fixed_us\":%.4f,\"sub_per_task_us\":%.4f,"
           "\"sub_per_run_fixed_us\":%.4f,\"kernel_fit_r2\":%.5f,"
           "\"sub_fit_r2\":%.5f,",
           r->kernel.fit.intercept, r->sub.fit.slope, r->sub.fit.intercept,
           r->kernel.fit.r2, r->sub.fit.r2);
    printf("\"per_run_fixed_us_unweighted\":%.4f,"
           "\"per_task_us_unweighted\":%.4f,\"run_k1_us\":%.4f,"
           "\"sub_run_k1_us\":%.4f,\"run_k256_us\":%.4f,",
           r->kernel.ols.intercept, r->kernel.ols.slope, r->kernel.run_us[0],
           r->sub.run_us[0], r->kernel.run_us[NUM_K - 1]);
    printf("\"spin_pingpong_rtt_us\":%.4f,\"idle_children_cpu_pct\":%.3f,"
           "\"idle_children_cpu_pct_schedstat\":%.4f,"
           "\"idle_parent_cpu_pct\":%.3f,",
           r->spin_rtt_us, r->idle_children_pct, r->idle_children_ns_pct,
           r->idle_parent_pct);
    printf("\"targets\":{\"per_task_us\":%.0f,\"per_run_fixed_us\":%.0f,"
           "\"idle_children_cpu_pct\":%.0f},",
           TARGET_PER_TASK_US, TARGET_PER_RUN_FIXED_US, TARGET_IDLE_CPU_PCT);
    printf("\"competitor\":{\"per_task_us\":%.2f,\"per_run_fixed_us\":%.1f},",
           COMPETITOR_PER_TASK_US, COMPETITOR_PER_RUN_FIXED_US);
    printf("\"trace_off_per_task_us\":%.4f,\"trace_on_per_task_us\":%.4f,"
           "\"trace_overhead_pct\":%.2f,\"trace_target_pct\":%.0f,"
           "\"trace_pass\":%s,",
           r->trace_off_us, r->trace_on_us, trace_pct(r), TARGET_TRACE_PCT,
           r->trace_off_us > 0 && trace_pct(r) <= TARGET_TRACE_PCT ? "true"
                                                                   : "false");
    printf("\"quick\":%s", opt->quick ? "true" : "false");
    if (error != NULL)
        printf(",\"error\":\"%s\"", error);
    printf("}\n");
    fflush(stdout);
}

static int parse_options(int argc, char **argv, struct options *opt)
{
    memset(opt, 0, sizeof(*opt));
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            opt->quick = true;
        } else {
            fprintf(stderr, "usage: bench_dispatch [--quick]\n");
            return -1;
        }
    }
    opt->tasks_per_rep = opt->quick ? 2048 : 16384;
    opt->min_runs = opt->quick ? 8 : 40;
    opt->reps = opt->quick ? 5 : MAX_REPS;
    opt->spin_iters = opt->quick ? 20000 : 100000;
    opt->futex_iters = opt->quick ? 2000 : 10000;
    opt->pingpong_blocks = opt->quick ? 3 : 5;
    return 0;
}

int main(int argc, char **argv)
{
    struct options opt;
    struct results res = {0};

    if (parse_options(argc, argv, &opt) != 0)
        return 2;
    /* The floor first, while this process has no threads. */
    if (pingpong_measure(PINGPONG_SPIN, opt.spin_iters, opt.pingpong_blocks,
                         &res.spin_rtt_us) != 0 ||
        pingpong_measure(PINGPONG_FUTEX, opt.futex_iters, opt.pingpong_blocks,
                         &res.futex_rtt_us) != 0) {
        print_json(&opt, &res, "ping-pong failed");
        return 1;
    }
    if (bench_dispatch(&opt, &res) != 0) {
        print_json(&opt, &res, "dispatch measurement failed");
        return 1;
    }
    if (bench_trace(&opt, &res) != 0) {
        print_json(&opt, &res, "trace measurement failed");
        return 1;
    }
    if (bench_idle(&res) != 0) {
        print_json(&opt, &res, "idle measurement failed");
        return 1;
    }
    print_summary(&opt, &res);
    print_json(&opt, &res, NULL);
    return 0;
}
