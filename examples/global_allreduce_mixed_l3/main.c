/*
 * global_allreduce_mixed_l3: one global communication domain across a
 * forked L3 node and a remote L3 node, two sim chips each, four ranks.
 *
 *   node 0: a forked L3 child of this process   ranks 0, 1 (chips 0, 1)
 *   node 1: a remote L3 in a strata-node daemon  ranks 2, 3 (chips 0, 1)
 *           this program starts on 127.0.0.1 (port 0, TLS 1.3 with a fresh
 *           pre-shared key)
 *
 * Run 1 (compute): the L4 orch fn allocates the domain with
 * retain_after_run, as a PREPARE_EXPORT / IMPORT / COMMIT transaction the
 * L4 fans out to both nodes. Each node's orch callable looks the committed
 * domain up (strata_orch_get_global_domain) and runs an allreduce kernel
 * on its two member chips: every rank writes its contribution into its
 * window, signals every rank, waits for all four, and sums all four
 * windows into its own window's "sum" buffer. The run ends; the domain and
 * the sums in its windows stay.
 *
 * Run 2 (read back): a second L4 orch fn asks each node to copy its
 * members' "sum" buffers into an L4 buffer (a node task; the remote node's
 * part comes back with its completion), and releases the domain. The
 * program checks all 4 x 4096 sums against a host reference and that the
 * windows were freed.
 *
 * The daemon gets SIGTERM and is reaped on every path (and dies with the
 * program through PR_SET_PDEATHSIG); its secret and port file live in a
 * mkdtemp directory removed as soon as both sides have read the secret.
 *
 * Usage: global_allreduce_mixed_l3
 * STRATA_NODE / GAR_MODULE override the strata-node binary and module
 * paths built next to this program.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <strata/strata.h>

#include "example_node.h"

#include "kernels.h"

#ifndef GAR_NODE_PATH
#define GAR_NODE_PATH "strata-node"
#endif
#ifndef GAR_MODULE_PATH
#define GAR_MODULE_PATH "libglobal_allreduce_mixed_l3_kernels.so"
#endif

#define NAME "global_allreduce_mixed_l3"
#define NODES 2
#define CHIPS 2 /* per node */
#define RANKS (NODES * CHIPS)
#define START_DEADLINE_S 10
#define FREE_DEADLINE_S 10

static const int chip_ids[CHIPS] = {0, 1};

struct job {
    strata_callable compute, read; /* node callables, by name */
    strata_global_domain *domain;
    uint64_t id;
    strata_buffer *sums; /* f32[RANKS][GAR_N], rank order */
};

static int fail(const char *what, strata_err err)
{
    fprintf(stderr, NAME ": FAILED: %s: %s (%s): %s\n", what,
            strata_errname(err), strata_strerror(err), strata_errmsg());
    return 1;
}

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- the L4 worker ----------------------------------------------------- */

/* Run 1: the transaction, then the allreduce on both nodes. */
static strata_err compute_orch(strata_orch *o, const strata_args *unused,
                               void *user)
{
    struct job *j = user;
    /* Rank order: node 0's chips, then node 1's. */
    static const strata_global_member members[RANKS] = {
        {0, 0}, {0, 1}, {1, 0}, {1, 1}};
    static const strata_comm_buffer_spec bufs[3] = {
        {GAR_BUF_DATA, STRATA_F32, GAR_N, GAR_N * sizeof(float)},
        {GAR_BUF_SUM, STRATA_F32, GAR_N, GAR_N * sizeof(float)},
        {GAR_BUF_FLAG, STRATA_U32, 1, sizeof(uint32_t)},
    };
    strata_global_domain_spec spec = {
        .name = "gar",
        .members = members,
        .num_members = RANKS,
        .window_size = 2 * GAR_N * sizeof(float) + 64,
        .buffers = bufs,
        .num_buffers = 3,
        .retain_after_run = true, /* the sums stay for run 2 */
    };
    strata_args *a = NULL;
    strata_err err;

    (void)unused;
    err = strata_orch_allocate_global_domain(o, &spec, &j->domain);
    if (err != STRATA_OK)
        return err;
    j->id = strata_global_domain_id(j->domain);
    err = strata_args_create(&a);
    if (err == STRATA_OK)
        err = strata_args_add_scalar(a, j->id);
    for (int node = 0; node < NODES && err == STRATA_OK; node++)
        err = strata_orch_submit_next_level(o, j->compute, a, node);
    strata_args_destroy(a);
    return err;
}

/* Run 2: each node copies its members' sums into j->sums, then the
 * domain is released (freed once the run's work is done). */
static strata_err read_orch(strata_orch *o, const strata_args *unused,
                            void *user)
{
    const struct job *j = user;
    const size_t shape[1] = {CHIPS * GAR_N};
    strata_args *a = NULL;
    strata_err err;

    (void)unused;
    err = strata_args_create(&a);
    for (int node = 0; node < NODES && err == STRATA_OK; node++) {
        strata_args_clear(a);
        err = strata_args_add_tensor(
            a, j->sums, (size_t)node * CHIPS * GAR_N * sizeof(float),
            STRATA_F32, 1, shape, STRATA_OUT);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(a, j->id);
        if (err == STRATA_OK)
            err = strata_orch_submit_next_level(o, j->read, a, node);
    }
    strata_args_destroy(a);
    if (err == STRATA_OK)
        err = strata_global_domain_release(j->domain);
    return err;
}

/* Every rank's sums against the host reference; a table of what each
 * rank holds. */
static int check(const struct job *j, const struct example_node *d)
{
    const float *s = strata_buffer_data(j->sums);
    size_t bad = 0;

    printf("  rank  node  where            chip  sum[0]  sum[1]  "
           "sum[4095]  checked\n");
    for (uint32_t r = 0; r < RANKS; r++) {
        size_t wrong = 0;

        for (uint32_t i = 0; i < GAR_N; i++) {
            float want = 0.0f;

            for (uint32_t q = 0; q < RANKS; q++)
                want += gar_value(q, i);
            if (s[r * GAR_N + i] != want && wrong++ < 3)
                fprintf(stderr, NAME ": rank %u sum[%u] = %g, want %g\n", r, i,
                        (double)s[r * GAR_N + i], (double)want);
        }
        printf("  %4u  %4u  %-15s  %4u  %6.1f  %6.1f  %9.1f  %s\n", r,
               r / CHIPS, r / CHIPS == 0 ? "forked L3" : d->endpoint, r % CHIPS,
               (double)s[r * GAR_N], (double)s[r * GAR_N + 1],
               (double)s[r * GAR_N + GAR_N - 1], wrong ? "WRONG" : "ok");
        bad += wrong;
    }
    if (bad != 0)
        fprintf(stderr, NAME ": FAILED: %zu of %d sums wrong\n", bad,
                RANKS * GAR_N);
    return bad != 0;
}

/* Release is asynchronous (every node unmaps its members' windows);
 * waits for it under a deadline. */
static int wait_freed(const struct job *j)
{
    uint64_t t0 = now_ns();
    struct timespec ms = {0, 1000000};

    while (!strata_global_domain_freed(j->domain)) {
        if (now_ns() - t0 > FREE_DEADLINE_S * 1000000000ull) {
            fprintf(stderr,
                    NAME ": FAILED: the released domain was not "
                         "freed within %d s\n",
                    FREE_DEADLINE_S);
            return 1;
        }
        nanosleep(&ms, NULL);
    }
    printf(NAME ": released in run 2; every window unmapped and freed "
                "(%.3f ms after the run)\n",
           (double)(now_ns() - t0) / 1e6);
    return 0;
}

static int run_all(strata_worker *w, struct job *j,
                   const struct example_node *d)
{
    strata_err err;
    uint64_t t0;

    err = strata_worker_init(w);
    if (err != STRATA_OK)
        return fail("init (forks node 0, connects to node 1)", err);
    printf(NAME ": node 0: forked L3 (pid %d), chips 0 and 1 = ranks 0, 1\n",
           strata_worker_node_pid(w, 0));
    printf(NAME ": node 1: remote L3 at %s (TLS 1.3, pre-shared key), "
                "chips 0 and 1 = ranks 2, 3\n",
           d->endpoint);
    err =
        strata_worker_create_buffer(w, RANKS * GAR_N * sizeof(float), &j->sums);
    if (err != STRATA_OK)
        return fail("create the result buffer", err);
    t0 = now_ns();
    err = strata_worker_run(w, compute_orch, NULL, j);
    if (err != STRATA_OK)
        return fail("run 1 (allocate + allreduce)", err);
    printf(NAME ": run 1: global domain %llu (4 ranks, 2 nodes) allocated, "
                "allreduce of %d floats per rank into the windows: %.3f ms\n",
           (unsigned long long)j->id, GAR_N, (double)(now_ns() - t0) / 1e6);
    if (strata_global_domain_released(j->domain) ||
        strata_global_domain_freed(j->domain)) {
        fprintf(stderr, NAME ": FAILED: the retained domain did not "
                             "outlive run 1\n");
        return 1;
    }
    printf(NAME ": after run 1 the domain is retained (released %d, "
                "freed %d)\n",
           strata_global_domain_released(j->domain),
           strata_global_domain_freed(j->domain));
    t0 = now_ns();
    err = strata_worker_run(w, read_orch, NULL, j);
    if (err != STRATA_OK)
        return fail("run 2 (read back + release)", err);
    printf(NAME ": run 2: read the sums out of the windows into the L4: "
                "%.3f ms\n",
           (double)(now_ns() - t0) / 1e6);
    if (check(j, d) != 0)
        return 1;
    return wait_freed(j);
}

int main(int argc, char **argv)
{
    struct example_node d = {.pidfd = -1};
    struct job j;
    strata_worker *w = NULL;
    strata_err err;
    int rc = 1;

    (void)argv;
    if (argc > 1) {
        fprintf(stderr, "usage: " NAME "\n");
        return 2;
    }
    memset(&j, 0, sizeof(j));
    printf(NAME ": a 4-rank global domain over a forked and a remote L3 "
                "node\n");
    /* The forked node inherits this registry; the remote node has the same
     * callables from the module. The L4 names them. */
    err = strata_module_init();
    if (err == STRATA_OK)
        err = strata_callable_by_name(STRATA_CALLABLE_ORCH, GAR_NODE_COMPUTE,
                                      &j.compute);
    if (err == STRATA_OK)
        err = strata_callable_by_name(STRATA_CALLABLE_ORCH, GAR_NODE_READ,
                                      &j.read);
    if (err != STRATA_OK)
        return fail("register the callables", err);
    if (example_node_start(&d, NAME,
                           example_env_or("STRATA_NODE", GAR_NODE_PATH),
                           example_env_or("GAR_MODULE", GAR_MODULE_PATH),
                           START_DEADLINE_S) != 0)
        goto out;
    printf(NAME ": strata-node (pid %d) listening on %s\n", (int)d.pid,
           d.endpoint);
    if (example_l4_build(&d, NAME, chip_ids, CHIPS, &w) == 0 &&
        run_all(w, &j, &d) == 0)
        rc = 0;
out:
    /* Every path: the worker (GOODBYE to node 1, node 0 reaped), then the
     * daemon (SIGTERM, reaped), then the files. */
    if (w != NULL) {
        err = strata_worker_destroy(w);
        if (err != STRATA_OK)
            rc = fail("destroy", err);
    }
    if (example_node_stop(&d, NAME) != 0)
        rc = 1;
    if (rc != 0)
        return EXIT_FAILURE;
    printf(NAME ": OK (%d ranks x %d sums checked, read back in a second "
                "run)\n",
           RANKS, GAR_N);
    return EXIT_SUCCESS;
}
