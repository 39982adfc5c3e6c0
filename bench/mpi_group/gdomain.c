/*
 * bench_mpi_gdomain: allocating a global domain over every rank of a
 * 4-rank Open MPI group (mpirun --oversubscribe on this host), one member
 * chip per rank. The ranks gather the window descriptors among themselves
 * with MPI_Allgather (one L4 round) against the L4 path forced with
 * STRATA_MPI_GATHER=0 (PREPARE_EXPORT, IMPORT, COMMIT fanned out by the
 * L4), alternating in blocks within the same run. Each sample is the time
 * of one strata_orch_allocate_global_domain (COMM_INIT is done in the
 * warm-up); the domain is released at its run's fence, outside the
 * sample. Target (issue 16): gathered <= 0.5 x the L4 path.
 * Last stdout line: one JSON object (bench/CMakeLists.txt).
 *
 * Usage: bench_mpi_gdomain [--quick] [--rounds K] [--ranks N]
 * As root, set OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strata/domain.h>
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

#define NAME "mpi_gdomain"
#define MAX_ROUNDS 20000
#define MAX_RANKS 16
#define BLOCK 10 /* samples per block; the two ways alternate by block */

struct ctx {
    const int *ids;
    int ranks;
    double us; /* the last allocation's time */
};

static strata_err alloc_orch(strata_orch *o, const strata_args *args,
                             void *user)
{
    struct ctx *c = user;
    double t0;
    strata_err err;
    strata_global_member m[MAX_RANKS];
    const strata_comm_buffer_spec buf = {"v", STRATA_U32, 256, 1024};
    strata_global_domain_spec spec = {.name = "bench_mpi_gd",
                                      .members = m,
                                      .num_members = (size_t)c->ranks,
                                      .window_size = 4096,
                                      .buffers = &buf,
                                      .num_buffers = 1};
    strata_global_domain *g = NULL;

    (void)args;
    for (int r = 0; r < c->ranks; r++)
        m[r] = (strata_global_member){c->ids[r], 0};
    t0 = bench_now_us();
    err = strata_orch_allocate_global_domain(o, &spec, &g);
    c->us = bench_now_us() - t0;
    return err;
}

static strata_err start(int ranks, strata_worker **out, int *ids)
{
    static const int chips[1] = {0};
    static const char *const args[1] = {"--oversubscribe"};
    const char *module = getenv("BENCH_MODULE");
    const char *modules[1] = {module ? module : BENCH_MODULE_PATH};
    const char *rank = getenv("STRATA_RANK");
    strata_mpi_group_spec g = {
        .ranks = (size_t)ranks,
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
        err =
            strata_worker_add_mpirun_worker_group(*out, &g, ids, (size_t)ranks);
    if (!err)
        err = strata_worker_init(*out);
    return err;
}

/* One sample (us) of an allocation the way `gather` says. */
static strata_err sample(strata_worker *w, struct ctx *c, bool gather,
                         double *us)
{
    strata_err err;

    if (gather)
        unsetenv("STRATA_MPI_GATHER");
    else
        setenv("STRATA_MPI_GATHER", "0", 1);
    err = strata_worker_run(w, alloc_orch, NULL, c);
    *us = c->us;
    return err;
}

int main(int argc, char **argv)
{
    bool quick = false;
    int rounds = 0, ranks = 4, ids[MAX_RANKS];
    struct ctx c = {.ids = ids};
    strata_worker *w = NULL;
    double *vg, *vl, gathered = -1, l4 = -1, us;
    size_t ng = 0, nl = 0;
    strata_err err;
    const char *error = NULL;
    char why[STRATA_ERRMSG_MAX] = "";

    /* --ranks N before the common options. */
    if (argc >= 3 && strcmp(argv[1], "--ranks") == 0) {
        ranks = atoi(argv[2]);
        argv[2] = argv[0];
        argv += 2;
        argc -= 2;
    }
    if (ranks < 2 || ranks > MAX_RANKS) {
        fprintf(stderr, "bench_" NAME ": --ranks must be 2..%d\n", MAX_RANKS);
        return 2;
    }
    if (bench_parse_rounds(argc, argv, "bench_" NAME, MAX_ROUNDS, &quick,
                           &rounds) != 0)
        return 2;
    if (rounds == 0)
        rounds = quick ? 100 : 1000;
    c.ranks = ranks;
    vg = calloc((size_t)rounds, sizeof(*vg));
    vl = calloc((size_t)rounds, sizeof(*vl));
    err = vg && vl ? start(ranks, &w, ids) : STRATA_ENOMEM;
    /* Warm-up: COMM_INIT once per rank, both ways' first allocations. */
    for (int i = 0; !err && i < 2 * BLOCK; i++)
        err = sample(w, &c, i % 2 == 0, &us);
    for (int i = 0; !err && (ng < (size_t)rounds || nl < (size_t)rounds); i++) {
        bool gather = (i / BLOCK) % 2 == 0;

        err = sample(w, &c, gather, &us);
        if (gather && ng < (size_t)rounds)
            vg[ng++] = us;
        else if (!gather && nl < (size_t)rounds)
            vl[nl++] = us;
    }
    unsetenv("STRATA_MPI_GATHER");
    if (!err) {
        gathered = stats_median(vg, ng);
        l4 = stats_median(vl, nl);
    } else {
        snprintf(why, sizeof(why), "%s: %s", strata_errname(err),
                 strata_errmsg());
        error = why;
    }
    if (w && strata_worker_destroy(w) != STRATA_OK && !error)
        error = "destroy failed";
    printf("global domain over all %d ranks of a group (median of %d): "
           "gathered in the group %.1f us, the L4 path %.1f us\n",
           ranks, rounds, gathered, l4);
    printf("{\"bench\":\"" NAME "\",\"metric\":\"gathered_alloc_us\","
           "\"unit\":\"us\",");
    bench_json_num("strata", error ? -1 : gathered, true);
    printf("\"reference_name\":\"l4_path_alloc_us\",");
    bench_json_num("reference", error ? -1 : l4, true);
    bench_json_num("ratio", error ? -1 : gathered / l4, true);
    bench_json_num("target", 0.5, true);
    printf("\"ranks\":%d,", ranks);
    printf("\"pass\":%s", !error && gathered <= 0.5 * l4 ? "true" : "false");
    bench_json_end("", error);
    free(vg);
    free(vl);
    return error ? 1 : 0;
}
