/*
 * bench_mpi_group: per-rank lanes of an Open MPI group. The round trip of a
 * no-op orch task to rank 1 of a 2-rank group (mpirun --oversubscribe on
 * this host) while rank 0 runs a long task, against the same round trip
 * while rank 0 is idle, measured in the same run. Target (issue 16): busy
 * <= 1.2 x idle. Last stdout line: one JSON object (bench/CMakeLists.txt).
 *
 * Usage: bench_mpi_group [--quick] [--rounds K]
 * As root, set OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strata/strata.h>

#include "bench_common.h"
#include "stats.h"

#ifndef BENCH_RANK_PATH
#define BENCH_RANK_PATH "strata-rank"
#endif
#ifndef BENCH_MODULE_PATH
#define BENCH_MODULE_PATH "libbench_mpi_module.so"
#endif
#ifndef BENCH_MPIRUN
#define BENCH_MPIRUN "mpirun"
#endif

#define NAME "mpi_group"
#define MAX_ROUNDS 100000

struct ctx {
    strata_callable noop, sleep;
    int node;
    uint64_t ms;
};

static strata_err noop_l4(strata_orch *o, const strata_args *args, void *user)
{
    const struct ctx *c = user;

    (void)args;
    return strata_orch_submit_next_level(o, c->noop, NULL, c->node);
}

static strata_err sleep_l4(strata_orch *o, const strata_args *args, void *user)
{
    const struct ctx *c = user;
    strata_args *a = NULL;
    strata_err err = strata_args_create(&a);

    (void)args;
    if (!err)
        err = strata_args_add_scalar(a, c->ms);
    if (!err)
        err = strata_orch_submit_next_level(o, c->sleep, a, c->node);
    strata_args_destroy(a);
    return err;
}

/* Median round trip (us) of n no-op runs to node. */
static strata_err rtt(strata_worker *w, struct ctx *c, int node, int n,
                      double *v, double *median_out)
{
    c->node = node;
    for (int i = 0; i < n; i++) {
        double t0 = bench_now_us();
        strata_err err = strata_worker_run(w, noop_l4, NULL, c);

        if (err)
            return err;
        v[i] = bench_now_us() - t0;
    }
    *median_out = stats_median(v, (size_t)n);
    return STRATA_OK;
}

static strata_err start(strata_worker **out, int *ids)
{
    static const int chips[1] = {0};
    static const char *const args[1] = {"--oversubscribe"};
    const char *module = getenv("BENCH_MODULE");
    const char *modules[1] = {module ? module : BENCH_MODULE_PATH};
    const char *rank = getenv("STRATA_RANK");
    strata_mpi_group_spec g = {
        .ranks = 2,
        .chip_ids = chips,
        .num_chips = 1,
        .mpirun_path = getenv("MPIRUN") ? getenv("MPIRUN") : BENCH_MPIRUN,
        .mpirun_args = args,
        .num_mpirun_args = 1,
        .rank_program = rank ? rank : BENCH_RANK_PATH,
        .modules = modules,
        .num_modules = 1,
    };
    strata_worker_config c4;
    strata_err err;

    strata_worker_config_init(&c4, 4);
    c4.startup_timeout_s = 60;
    err = strata_worker_create(&c4, out);
    if (!err)
        err = strata_worker_add_mpirun_worker_group(*out, &g, ids, 2);
    if (!err)
        err = strata_worker_init(*out);
    return err;
}

int main(int argc, char **argv)
{
    bool quick = false;
    int rounds = 0, ids[2];
    struct ctx c = {0};
    strata_worker *w = NULL;
    strata_run *run = NULL;
    double idle = -1, busy = -1, *v;
    strata_err err;
    const char *error = NULL;
    char why[STRATA_ERRMSG_MAX] = "";

    if (bench_parse_rounds(argc, argv, "bench_" NAME, MAX_ROUNDS, &quick,
                           &rounds) != 0)
        return 2;
    if (rounds == 0)
        rounds = quick ? 300 : 3000;
    v = calloc((size_t)rounds, sizeof(*v));
    err = v ? strata_callable_by_name(STRATA_CALLABLE_ORCH, "bench.mpi_noop",
                                      &c.noop)
            : STRATA_ENOMEM;
    if (!err)
        err = strata_callable_by_name(STRATA_CALLABLE_ORCH, "bench.mpi_sleep",
                                      &c.sleep);
    if (!err)
        err = start(&w, ids);
    /* Warm both lanes, then rank 1 with rank 0 idle. */
    if (!err)
        err = rtt(w, &c, ids[0], rounds / 10 + 1, v, &idle);
    if (!err)
        err = rtt(w, &c, ids[1], rounds / 10 + 1, v, &idle);
    if (!err)
        err = rtt(w, &c, ids[1], rounds, v, &idle);
    /* Rank 0 busy for far longer than the busy measurement takes. */
    c.node = ids[0];
    c.ms = (uint64_t)(idle * rounds / 1000.0 * 4) + 2000;
    if (!err)
        err = strata_worker_submit(w, sleep_l4, NULL, &c, &run);
    if (!err)
        err = rtt(w, &c, ids[1], rounds, v, &busy);
    if (!err && strata_run_wait(run, 0.0) != STRATA_ETIMEDOUT)
        snprintf(why, sizeof(why),
                 "rank 0's task ended before the busy rounds did");
    if (run && strata_run_wait(run, 120.0) != STRATA_OK && !err)
        err = STRATA_EPEER;
    strata_run_free(run);
    if (err) {
        snprintf(why, sizeof(why), "%s: %s", strata_errname(err),
                 strata_errmsg());
        error = why;
    }
    if (w && strata_worker_destroy(w) != STRATA_OK && !error)
        error = "destroy failed";
    printf("no-op task round trip to rank 1 of 2 (median of %d): idle %.1f "
           "us, while rank 0 runs a long task %.1f us\n",
           rounds, idle, busy);
    printf("{\"bench\":\"" NAME "\",\"metric\":\"busy_neighbour_rtt_us\","
           "\"unit\":\"us\",");
    bench_json_num("strata", error ? -1 : busy, true);
    printf("\"reference_name\":\"idle_neighbour_rtt_us\",");
    bench_json_num("reference", error ? -1 : idle, true);
    bench_json_num("ratio", error ? -1 : busy / idle, true);
    bench_json_num("target", 1.2, true);
    printf("\"pass\":%s",
           !error && !why[0] && busy <= 1.2 * idle ? "true" : "false");
    bench_json_end(error ? "" : why, error);
    free(v);
    return error ? 1 : 0;
}
