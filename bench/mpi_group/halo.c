/*
 * bench_mpi_halo: the halo exchange of the mpi transport (a global halo
 * handle over the ranks of a 2-rank Open MPI group, one chip each,
 * mpirun --oversubscribe on this host) against MPI_Neighbor_alltoallv run
 * alone with the same bytes (bench_halo_exchange's MPI helper, built here
 * as bench_mpi_halo_ref, its "ring" pattern on 2 ranks: two blocks of B
 * bytes each way with the one neighbour), in the same run.
 *
 * The graph: n = 16k rows in two halves, one per rank; row i reads
 * itself and, for the first 2k rows of each half, the row opposite in the
 * other half; 64 float32 features (256 B a row), k = B / 256, so each
 * rank needs 2k rows (2 B bytes) of the other. Forward calls, serialized
 * schedule (the exchange completes before any row is computed), one call per
 * run; from the trace, an exchange lasts from the moment the later rank began
 * packing to the moment the last ghost chunk had landed and been signalled
 * (max exchange_end - max exchange_start over the ranks: the dispatch skew
 * between the ranks' tasks is not part of the exchange). Median over the
 * calls. The reference: the helper's per-exchange time with its pack and
 * a read of the received bytes (us; bench_halo_exchange's reference),
 * median of its repetitions; its bare call (no pack, no read) is printed
 * too. strata's span has no read: its chips read the ghosts in place
 * while they compute, outside the span.
 * Target (issue 16): reference / strata >= 0.9 at >= 64 KiB.
 * Last stdout line: one JSON object (bench/CMakeLists.txt).
 *
 * The reference job is kept up through the run and driven point by point
 * (bench/halo_exchange/mpi_session.c): 9 rounds (3 with --quick) of, per
 * size, one reference point (5 repetitions) and K strata calls.
 *
 * Usage: bench_mpi_halo [--quick] [--rounds K]   (K: calls per block)
 * As root, set OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strata/strata.h>

#include "bench_common.h"
#include "mpi_launch.h"
#include "mpi_session.h"
#include "stats.h"

#ifndef BENCH_RANK_PATH
#define BENCH_RANK_PATH "strata-rank"
#endif
#ifndef BENCH_MPIRUN
#define BENCH_MPIRUN "mpirun"
#endif

#define NAME "mpi_halo"
#define RANKS 2
#define FEATURES 64
#define ROW_BYTES (FEATURES * 4)
#define MAX_ROUNDS 200
#define NSIZES 2

static const size_t sizes[NSIZES] = {64 << 10, 1 << 20};

struct point {
    size_t bytes;
    double strata_us, ref_us, ref_bare_us;
};

struct call {
    strata_halo *h;
    strata_buffer *x, *out;
};

static strata_err fwd_orch(strata_orch *o, const strata_args *a, void *user)
{
    struct call *c = user;

    (void)a;
    return strata_halo_forward(o, c->h, c->x, c->out);
}

/* ---- the reference ------------------------------------------------------ */

static int ref_open(struct mpi_session *ms, bool quick, char *why, size_t cap)
{
    char helper[4096];

    if (!mpi_helper_path("bench_mpi_halo_ref", helper, sizeof(helper))) {
        snprintf(why, cap, "bench_mpi_halo_ref is not built");
        return -1;
    }
    return mpi_session_open(ms, helper, RANKS, quick ? 3 : 5, 120, why, cap);
}

/* ---- strata ------------------------------------------------------------- */

static strata_err start(strata_worker **out, int *ids)
{
    static const int chips[1] = {0};
    static const char *const args[1] = {"--oversubscribe"};
    const char *rank = getenv("STRATA_RANK");
    strata_mpi_group_spec g = {
        .ranks = RANKS,
        .chip_ids = chips,
        .num_chips = 1,
        .mpirun_path = getenv("MPIRUN") ? getenv("MPIRUN") : BENCH_MPIRUN,
        .mpirun_args = args,
        .num_mpirun_args = 1,
        .rank_program = rank ? rank : BENCH_RANK_PATH,
    };
    strata_worker_config c4;
    strata_err err;

    strata_worker_config_init(&c4, 4);
    c4.startup_timeout_s = 60;
    err = strata_worker_create(&c4, out);
    if (!err)
        err = strata_worker_add_mpirun_worker_group(*out, &g, ids, RANKS);
    if (!err)
        err = strata_worker_init(*out);
    return err;
}

/* n rows, two halves (one per rank): row i reads itself and, when
 * i % (n / 2) < 2k, the row opposite, i + n / 2 (mod n); so each rank
 * needs 2k rows of the other. */
static strata_err make_halo(strata_worker *w, const int *ids, int64_t n,
                            int64_t k, strata_halo **h)
{
    int64_t half = n / 2;
    int64_t *rp = malloc((size_t)(n + 1) * sizeof(int64_t));
    int64_t *col = malloc((size_t)(2 * n) * sizeof(int64_t));
    strata_global_member m[RANKS];
    strata_csr_view v = {(uint64_t)n, (uint64_t)n, rp, col};
    strata_halo_spec spec;
    strata_err err;
    int64_t at = 0;

    if (!rp || !col) {
        free(rp);
        free(col);
        return STRATA_ENOMEM;
    }
    for (int64_t i = 0; i < n; i++) {
        rp[i] = at;
        col[at++] = i;
        if (i % half < 2 * k)
            col[at++] = (i + half) % n;
    }
    rp[n] = at;
    for (int r = 0; r < RANKS; r++)
        m[r] = (strata_global_member){ids[r], 0};
    strata_halo_spec_init(&spec);
    spec.csr = &v;
    spec.members = m;
    spec.num_members = RANKS;
    spec.features = FEATURES;
    spec.schedule = STRATA_HALO_SERIALIZED;
    spec.transport = STRATA_HALO_TRANSPORT_MPI;
    err = strata_halo_create(w, &spec, h);
    free(rp);
    free(col);
    return err;
}

/* The exchange of the last call (us), from the trace. */
static double exchange_us(const strata_halo *h)
{
    int64_t start = 0, end = 0;

    for (uint32_t r = 0; r < RANKS; r++) {
        strata_halo_rank_trace t;

        if (strata_halo_last_trace(h, r, &t) != STRATA_OK)
            return -1;
        start = t.exchange_start_ns > start ? t.exchange_start_ns : start;
        end = t.exchange_end_ns > end ? t.exchange_end_ns : end;
    }
    return end > start ? (double)(end - start) / 1e3 : 0;
}

struct side {
    struct call c;
    double *v; /* per size: rounds x block samples */
    size_t n;
};

static strata_err side_open(strata_worker *w, const int *ids, size_t bytes,
                            size_t cap, struct side *sd)
{
    int64_t k = (int64_t)(bytes / ROW_BYTES);
    int64_t n = 16 * k;
    strata_err err;

    memset(sd, 0, sizeof(*sd));
    sd->v = calloc(cap, sizeof(double));
    err = sd->v ? make_halo(w, ids, n, k, &sd->c.h) : STRATA_ENOMEM;
    if (!err)
        err = strata_worker_create_buffer(w, (size_t)n * ROW_BYTES, &sd->c.x);
    if (!err)
        err = strata_worker_create_buffer(w, (size_t)n * ROW_BYTES, &sd->c.out);
    /* Warm-up: the mailboxes' pages, the chips' index caches. */
    for (int i = 0; !err && i < 3; i++)
        err = strata_worker_run(w, fwd_orch, NULL, &sd->c);
    return err;
}

static strata_err side_block(strata_worker *w, struct side *sd, int calls)
{
    strata_err err = STRATA_OK;

    for (int i = 0; !err && i < calls; i++) {
        err = strata_worker_run(w, fwd_orch, NULL, &sd->c);
        if (!err)
            sd->v[sd->n++] = exchange_us(sd->c.h);
    }
    return err;
}

static void side_close(struct side *sd)
{
    if (sd->c.h && strata_halo_destroy(sd->c.h) != STRATA_OK)
        fprintf(stderr, "bench_" NAME ": halo destroy: %s\n", strata_errmsg());
    if (sd->c.x && strata_buffer_release(sd->c.x) != STRATA_OK)
        fprintf(stderr, "bench_" NAME ": release: %s\n", strata_errmsg());
    if (sd->c.out && strata_buffer_release(sd->c.out) != STRATA_OK)
        fprintf(stderr, "bench_" NAME ": release: %s\n", strata_errmsg());
    free(sd->v);
}

/* Rounds of, per size, one reference point and then a block of strata
 * calls, so that each side is measured beside the other. */
static const char *measure(strata_worker *w, const int *ids,
                           struct mpi_session *ms, struct point *p, int rounds,
                           int block, char *why, size_t cap)
{
    struct side sd[NSIZES] = {0};
    double ref[NSIZES][32], bare[NSIZES][32];
    strata_err err = STRATA_OK;
    const char *error = NULL;

    for (int s = 0; s < NSIZES && !err; s++)
        err = side_open(w, ids, p[s].bytes, (size_t)(rounds * block), &sd[s]);
    for (int r = 0; r < rounds && !err && !error; r++)
        for (int s = 0; s < NSIZES && !err && !error; s++) {
            struct mpi_session_result res;

            if (mpi_session_point(ms, "ring", p[s].bytes, s == 0 ? 200 : 40,
                                  120, &res, why, cap) != 0) {
                error = why;
                break;
            }
            ref[s][r] = res.us;
            bare[s][r] = res.bare_us;
            err = side_block(w, &sd[s], block);
        }
    if (err && !error) {
        snprintf(why, cap, "%s: %s", strata_errname(err), strata_errmsg());
        error = why;
    }
    for (int s = 0; s < NSIZES; s++) {
        if (!error) {
            p[s].strata_us = stats_median(sd[s].v, sd[s].n);
            p[s].ref_us = stats_median(ref[s], (size_t)rounds);
            p[s].ref_bare_us = stats_median(bare[s], (size_t)rounds);
        }
        side_close(&sd[s]);
    }
    return error;
}

int main(int argc, char **argv)
{
    bool quick = false, pass = true;
    int rounds = 0, ids[RANKS];
    struct point p[NSIZES];
    strata_worker *w = NULL;
    strata_err err = STRATA_OK;
    const char *error = NULL;
    char why[STRATA_ERRMSG_MAX] = "", why2[300] = "";
    struct mpi_session ms = {0};

    if (bench_parse_rounds(argc, argv, "bench_" NAME, MAX_ROUNDS, &quick,
                           &rounds) != 0)
        return 2;
    if (rounds == 0)
        rounds = quick ? 5 : 10; /* strata calls per block */
    for (int i = 0; i < NSIZES; i++)
        p[i] = (struct point){sizes[i], -1, -1, -1};
    if (ref_open(&ms, quick, why, sizeof(why)) != 0)
        error = why;
    if (!error)
        err = start(&w, ids);
    if (err && !error) {
        snprintf(why, sizeof(why), "%s: %s", strata_errname(err),
                 strata_errmsg());
        error = why;
    }
    if (!error)
        error =
            measure(w, ids, &ms, p, quick ? 3 : 9, rounds, why, sizeof(why));
    if (mpi_session_close(&ms, error != NULL, why2, sizeof(why2)) != 0 &&
        !error)
        error = why2;
    if (w && strata_worker_destroy(w) != STRATA_OK && !error)
        error = "destroy failed";
    printf("halo exchange between 2 MPI ranks, 2 blocks of B bytes each way "
           "(median):\n");
    for (int i = 0; i < NSIZES; i++) {
        printf("  B = %7zu: mpi transport %9.1f us, MPI_Neighbor_alltoallv "
               "%9.1f us (bare call %9.1f us), ratio %.2f\n",
               p[i].bytes, p[i].strata_us, p[i].ref_us, p[i].ref_bare_us,
               p[i].strata_us > 0 ? p[i].ref_us / p[i].strata_us : -1);
        pass = pass && p[i].strata_us > 0 && p[i].ref_us > 0 &&
               p[i].ref_us / p[i].strata_us >= 0.9;
    }
    printf("{\"bench\":\"" NAME "\",\"metric\":\"exchange_us_64k\","
           "\"unit\":\"us\",");
    bench_json_num("strata", error ? -1 : p[0].strata_us, true);
    printf("\"reference_name\":\"neighbor_alltoallv_us_64k\",");
    bench_json_num("reference", error ? -1 : p[0].ref_us, true);
    bench_json_num(
        "ratio",
        error || p[0].strata_us <= 0 ? -1 : p[0].ref_us / p[0].strata_us, true);
    bench_json_num("target", 0.9, true);
    bench_json_num("reference_bare_us", error ? -1 : p[0].ref_bare_us, true);
    bench_json_num("strata_1m_us", error ? -1 : p[1].strata_us, true);
    bench_json_num("reference_1m_us", error ? -1 : p[1].ref_us, true);
    bench_json_num(
        "ratio_1m",
        error || p[1].strata_us <= 0 ? -1 : p[1].ref_us / p[1].strata_us, true);
    printf("\"ranks\":%d,", RANKS);
    printf("\"pass\":%s", !error && pass ? "true" : "false");
    bench_json_end("ratio = reference time / strata time (higher is "
                   "better); the reference packs, exchanges and reads the "
                   "received bytes, strata's exchange packs and exchanges "
                   "(its chips read the ghosts while computing); "
                   "reference_bare_us: the call alone",
                   error);
    return error ? 1 : 0;
}
