/*
 * vector_add_mixed_l3: one L4 worker, two L3 nodes of two sim chips each,
 * one vector add split across them.
 *
 *   node 0: a forked L3 child of this process (shared memory, no copies)
 *   node 1: a remote L3 in a strata-node daemon that this program starts
 *           on 127.0.0.1 (port 0: the kernel picks a free one), reached
 *           over TCP + TLS 1.3 with a freshly generated pre-shared key
 *
 * The L4 orch fn gives each node half of c = a + b; each node's orch
 * callable ("vadd.node") splits its half over its two chips. Inputs travel
 * to the remote node with its task and its half of c comes back into the
 * same buffer, so the program checks every element against a host
 * reference without knowing which node computed it. A last run keeps node
 * 1's inputs and output on the node (remote buffers): the inputs are
 * written there once, the task moves no bytes, the sum is read back.
 *
 * The daemon is started with --port-file; the program waits for the file
 * with inotify and for the daemon's death with a pidfd (an event each, no
 * fixed sleeps; a deadline bounds the start). The secret and port file
 * live in a mkdtemp directory that is removed as soon as both sides have
 * read the secret, and on every exit path. The daemon gets SIGTERM and is
 * reaped on every path (and PR_SET_PDEATHSIG if this program is killed).
 *
 * Usage: vector_add_mixed_l3 [elements]       (default 1048576)
 * STRATA_NODE / VADD_MODULE override the strata-node binary and module
 * paths built next to this program.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

#include <strata/strata.h>

#include "example_node.h"

#include "kernels.h"

#ifndef VADD_NODE_PATH
#define VADD_NODE_PATH "strata-node"
#endif
#ifndef VADD_MODULE_PATH
#define VADD_MODULE_PATH "libvector_add_mixed_l3_kernels.so"
#endif

#define NAME "vector_add_mixed_l3"
#define NODES 2
#define CHIPS 2 /* per node */
#define RUNS 2  /* the first is cold: the remote node creates its copies */
#define START_DEADLINE_S 10

static const int chip_ids[CHIPS] = {0, 1};

struct job {
    size_t n;
    strata_callable node_orch; /* "vadd.node", by name */
    strata_buffer *a, *b, *c, *who;
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

/* Appends [first, first + count) float32 elements of buf. */
static strata_err add_slice(strata_args *a, strata_buffer *buf, size_t first,
                            size_t count, strata_tag tag)
{
    const size_t shape[1] = {count};

    return strata_args_add_tensor(a, buf, first * sizeof(float), STRATA_F32, 1,
                                  shape, tag);
}

/* The L4 orchestration: half of the vector to each node. */
static strata_err l4_orch(strata_orch *o, const strata_args *unused, void *user)
{
    const struct job *j = user;
    strata_args *a = NULL;
    strata_err err;

    (void)unused;
    err = strata_args_create(&a);
    for (int node = 0; node < NODES && err == STRATA_OK; node++) {
        size_t first = j->n * (size_t)node / NODES;
        size_t count = j->n * (size_t)(node + 1) / NODES - first;
        const size_t who_shape[1] = {CHIPS * sizeof(struct vadd_who)};

        strata_args_clear(a);
        err = add_slice(a, j->a, first, count, STRATA_IN);
        if (err == STRATA_OK)
            err = add_slice(a, j->b, first, count, STRATA_IN);
        if (err == STRATA_OK)
            err = add_slice(a, j->c, first, count, STRATA_OUT);
        if (err == STRATA_OK)
            err =
                strata_args_add_tensor(a, j->who, (size_t)node * who_shape[0],
                                       STRATA_U8, 1, who_shape, STRATA_NO_DEP);
        if (err == STRATA_OK)
            err = strata_orch_submit_next_level(o, j->node_orch, a, node);
    }
    strata_args_destroy(a);
    return err;
}

static void fill_inputs(const struct job *j, int run)
{
    float *a = strata_buffer_data(j->a);
    float *b = strata_buffer_data(j->b);
    float *c = strata_buffer_data(j->c);

    /* Small integers: every sum is exact in float32. */
    for (size_t i = 0; i < j->n; i++) {
        a[i] = (float)(i % 4096) + (float)run;
        b[i] = (float)((i / 4096) % 4096);
        c[i] = -1.0f;
    }
    memset(strata_buffer_data(j->who), 0, strata_buffer_size(j->who));
}

static int check(const struct job *j)
{
    const float *a = strata_buffer_data(j->a);
    const float *b = strata_buffer_data(j->b);
    const float *c = strata_buffer_data(j->c);
    size_t bad = 0;

    for (size_t i = 0; i < j->n; i++) {
        if (c[i] != a[i] + b[i] && bad++ < 5)
            fprintf(stderr, NAME ": c[%zu] = %g, expected %g (node %zu)\n", i,
                    (double)c[i], (double)(a[i] + b[i]), i * NODES / j->n);
    }
    if (bad != 0)
        fprintf(stderr, NAME ": FAILED: %zu of %zu elements wrong\n", bad,
                j->n);
    return bad != 0;
}

static int show_who(const struct job *j, const struct example_node *d)
{
    const struct vadd_who *who = strata_buffer_data(j->who);
    int64_t total = 0;

    printf("  node  where                    chip  pid      elements  "
           "kernel us\n");
    for (int node = 0; node < NODES; node++) {
        for (int chip = 0; chip < CHIPS; chip++) {
            const struct vadd_who *r = &who[node * CHIPS + chip];

            printf("  %4d  %-23s  %4lld  %-7lld  %8lld  %9.1f\n", node,
                   node == 0 ? "forked L3" : d->endpoint, (long long)r->chip,
                   (long long)r->pid, (long long)r->elements,
                   (double)r->ns / 1e3);
            if (r->chip != chip || r->pid <= 0) {
                fprintf(stderr,
                        NAME ": FAILED: chip %d of node %d left no "
                             "record\n",
                        chip, node);
                return 1;
            }
            total += r->elements;
        }
    }
    if ((size_t)total != j->n) {
        fprintf(stderr, NAME ": FAILED: the chips did %lld of %zu elements\n",
                (long long)total, j->n);
        return 1;
    }
    return 0;
}

/* Node 1's half again, with a, b and c living on node 1 only. */
struct resident {
    const struct job *j;
    strata_buffer *a, *b, *c;
    size_t count;
};

static strata_err resident_orch(strata_orch *o, const strata_args *unused,
                                void *user)
{
    const struct resident *r = user;
    const size_t who_shape[1] = {CHIPS * sizeof(struct vadd_who)};
    strata_args *a = NULL;
    strata_err err;

    (void)unused;
    err = strata_args_create(&a);
    if (err == STRATA_OK)
        err = add_slice(a, r->a, 0, r->count, STRATA_IN);
    if (err == STRATA_OK)
        err = add_slice(a, r->b, 0, r->count, STRATA_IN);
    if (err == STRATA_OK)
        err = add_slice(a, r->c, 0, r->count, STRATA_OUT);
    if (err == STRATA_OK)
        err = strata_args_add_tensor(a, r->j->who, who_shape[0], STRATA_U8, 1,
                                     who_shape, STRATA_NO_DEP);
    if (err == STRATA_OK)
        err = strata_orch_submit_next_level(o, r->j->node_orch, a, 1);
    strata_args_destroy(a);
    return err;
}

static int run_resident(strata_worker *w, const struct job *j)
{
    size_t first = j->n / NODES;
    struct resident r = {.j = j, .count = j->n - first};
    size_t bytes = r.count * sizeof(float);
    const float *a = (const float *)strata_buffer_data(j->a) + first;
    const float *b = (const float *)strata_buffer_data(j->b) + first;
    float *c = malloc(bytes);
    strata_err err = c ? STRATA_OK : STRATA_ENOMEM;
    size_t bad = 0;
    uint64_t t0;

    if (err == STRATA_OK)
        err = strata_worker_create_remote_buffer(w, 1, bytes, &r.a);
    if (err == STRATA_OK)
        err = strata_worker_create_remote_buffer(w, 1, bytes, &r.b);
    if (err == STRATA_OK)
        err = strata_worker_create_remote_buffer(w, 1, bytes, &r.c);
    /* The inputs go to node 1 once; the task itself carries no bytes. */
    if (err == STRATA_OK)
        err = strata_buffer_write(r.a, 0, a, bytes);
    if (err == STRATA_OK)
        err = strata_buffer_write(r.b, 0, b, bytes);
    t0 = now_ns();
    if (err == STRATA_OK)
        err = strata_worker_run(w, resident_orch, NULL, &r);
    if (err == STRATA_OK)
        printf(NAME ": run 3 (a, b, c resident on node 1): %.3f ms, no "
                    "bytes with the task\n",
               (double)(now_ns() - t0) / 1e6);
    if (err == STRATA_OK)
        err = strata_buffer_read(r.c, 0, c, bytes);
    for (size_t i = 0; err == STRATA_OK && i < r.count; i++)
        if (c[i] != a[i] + b[i] && bad++ < 5)
            fprintf(stderr, NAME ": resident c[%zu] = %g, expected %g\n", i,
                    (double)c[i], (double)(a[i] + b[i]));
    free(c);
    /* Released here, or with the worker on an error path. */
    if (err == STRATA_OK)
        err = strata_buffer_release(r.a);
    if (err == STRATA_OK)
        err = strata_buffer_release(r.b);
    if (err == STRATA_OK)
        err = strata_buffer_release(r.c);
    if (err != STRATA_OK)
        return fail("remote buffers", err);
    if (bad != 0) {
        fprintf(stderr, NAME ": FAILED: %zu resident sums wrong\n", bad);
        return 1;
    }
    printf(NAME ": node 1's half computed in remote buffers matches\n");
    return 0;
}

static int run_all(strata_worker *w, struct job *j,
                   const struct example_node *d)
{
    size_t bytes = j->n * sizeof(float);
    size_t remote = bytes - bytes / NODES;
    strata_err err;

    err = strata_worker_init(w);
    if (err != STRATA_OK)
        return fail("init (forks node 0, connects to node 1)", err);
    printf(NAME ": node 0: forked L3 (pid %d), chips 0 and 1\n",
           strata_worker_node_pid(w, 0));
    printf(NAME ": node 1: remote L3 at %s (TLS 1.3, pre-shared key), "
                "chips 0 and 1\n",
           d->endpoint);
    if ((err = strata_worker_create_buffer(w, bytes, &j->a)) != STRATA_OK ||
        (err = strata_worker_create_buffer(w, bytes, &j->b)) != STRATA_OK ||
        (err = strata_worker_create_buffer(w, bytes, &j->c)) != STRATA_OK ||
        (err = strata_worker_create_buffer(
             w, NODES * CHIPS * sizeof(struct vadd_who), &j->who)) != STRATA_OK)
        return fail("create buffers", err);
    for (int run = 1; run <= RUNS; run++) {
        uint64_t t0;

        fill_inputs(j, run);
        t0 = now_ns();
        err = strata_worker_run(w, l4_orch, NULL, j);
        if (err != STRATA_OK)
            return fail("run", err);
        printf(NAME ": run %d (%s): %.3f ms, %.1f KiB to node 1 and "
                    "%.1f KiB back\n",
               run, run == 1 ? "cold" : "warm", (double)(now_ns() - t0) / 1e6,
               2.0 * (double)remote / 1024.0, (double)remote / 1024.0);
        if (check(j) != 0)
            return 1;
    }
    printf(NAME ": every element of c equals a + b; who did the work:\n");
    if (show_who(j, d) != 0)
        return 1;
    return run_resident(w, j);
}

int main(int argc, char **argv)
{
    struct example_node d = {.pidfd = -1};
    struct job j = {0};
    strata_worker *w = NULL;
    strata_err err;
    int rc = 1;

    j.n = (size_t)1 << 20;
    if (argc > 1)
        j.n = strtoull(argv[1], NULL, 0);
    if (argc > 2 || j.n < NODES * CHIPS || j.n > ((size_t)1 << 28)) {
        fprintf(stderr, "usage: " NAME " [elements]   (4 .. 2^28)\n");
        return 2;
    }
    printf(NAME ": %zu float32 elements, c = a + b, half on each of 2 "
                "nodes\n",
           j.n);
    /* The forked node inherits this registry; the remote node has the same
     * callables from the module. The L4 names the node callable by name. */
    err = strata_module_init();
    if (err == STRATA_OK)
        err = strata_callable_by_name(STRATA_CALLABLE_ORCH, VADD_NODE_ORCH,
                                      &j.node_orch);
    if (err != STRATA_OK)
        return fail("register the callables", err);

    if (example_node_start(&d, NAME,
                           example_env_or("STRATA_NODE", VADD_NODE_PATH),
                           example_env_or("VADD_MODULE", VADD_MODULE_PATH),
                           START_DEADLINE_S) != 0)
        goto out;
    printf(NAME ": strata-node (pid %d) listening on %s with a fresh "
                "pre-shared key\n",
           (int)d.pid, d.endpoint);
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
    printf(NAME ": OK (%zu elements checked)\n", j.n);
    return EXIT_SUCCESS;
}
