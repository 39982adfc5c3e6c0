/*
 * halo_mixed_l3: the 8-node ring of halo_ring, out_i = x_{i-1} + x_i +
 * x_{i+1} (periodic) with x_i = i, and the VJP of sum(out), run as halo
 * execution over a 4-rank GLOBAL domain that spans two L3 nodes of an L4:
 *
 *   node 0: a forked L3 child of this process   ranks 0, 1 (chips 0, 1)
 *   node 1: a remote L3 in a strata-node daemon  ranks 2, 3 (chips 0, 1)
 *           this program starts on 127.0.0.1 (port 0, TLS 1.3 with a fresh
 *           pre-shared key)
 *
 * Everything goes through the public halo API. The L4 creates a halo
 * handle whose ranks are members (node id, chip id) instead of chips of
 * one worker; inside an L4 orch fn, strata_halo_forward and
 * strata_halo_vjp allocate a global domain over the members, run the
 * library's node callable on both nodes as one group (it submits the rank
 * kernels to the node's member chips) and release the domain. The
 * program writes no node-side code for it: the only code the daemon loads
 * from this example is the ring's per-edge kernel (node.c), because a
 * remote node runs only code it loaded itself.
 *
 * The result must equal the in-memory single-node run: the program first
 * runs the same ring through the same API on a 4-chip L3 worker (a local
 * handle), then over the global domain, and compares every value.
 *
 * The daemon gets SIGTERM and is reaped on every path (and dies with the
 * program through PR_SET_PDEATHSIG); its secret and port file live in a
 * mkdtemp directory removed as soon as both sides have read the secret.
 *
 * Usage: halo_mixed_l3
 * STRATA_NODE / HMIX_MODULE override the strata-node binary and module
 * paths built next to this program.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <strata/strata.h>

#include "example_node.h"

#include "node.h"

#ifndef HMIX_NODE_PATH
#define HMIX_NODE_PATH "strata-node"
#endif
#ifndef HMIX_MODULE_PATH
#define HMIX_MODULE_PATH "libhalo_mixed_l3_node.so"
#endif

#define NAME "halo_mixed_l3"
#define NODES 2
#define CHIPS 2 /* per node */
#define RANKS (NODES * CHIPS)
#define N 8 /* ring nodes = rows */
#define START_DEADLINE_S 10

static const int chip_ids[RANKS] = {0, 1, 2, 3};

/* Rank order: node 0's chips, then node 1's. */
static const strata_global_member members[RANKS] = {
    {0, 0}, {0, 1}, {1, 0}, {1, 1}};

/* The ring's fields: x, out, grad_out, grad_x. */
struct fields {
    strata_buffer *x, *out, *grad_out, *grad_x;
};

/* What the orch fn runs, and how long each call took. */
struct ring_run {
    strata_halo *halo;
    struct fields *f;
    double forward_ms, vjp_ms;
};

static int fail(const char *what, strata_err err)
{
    fprintf(stderr, NAME ": FAILED: %s: %s (%s): %s\n", what,
            strata_errname(err), strata_strerror(err), strata_errmsg());
    return 1;
}

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- the ring ---------------------------------------------------------- */

static int64_t row_ptr[N + 1];
static int64_t col_idx[3 * N];
static const strata_csr_view ring = {N, N, row_ptr, col_idx};

/* Row i lists its sources i-1, i, i+1 (periodic). */
static void make_ring(void)
{
    for (int i = 0; i < N; i++) {
        row_ptr[i] = 3 * i;
        col_idx[3 * i] = (i + N - 1) % N;
        col_idx[3 * i + 1] = i;
        col_idx[3 * i + 2] = (i + 1) % N;
    }
    row_ptr[N] = 3 * N;
}

/* The spec both runs share; the caller says where the ranks run. */
static void spec_for(strata_halo_spec *spec)
{
    strata_halo_spec_init(spec);
    spec->csr = &ring;
    spec->features = 1;
    spec->dtype = STRATA_F32;
    spec->reducer = STRATA_HALO_EDGE;
    spec->edge_kernel = HMIX_EDGE;
    spec->timeout_s = HMIX_WAIT_S;
}

static strata_err make_fields(strata_worker *w, struct fields *f)
{
    strata_buffer **b[4] = {&f->x, &f->out, &f->grad_out, &f->grad_x};
    strata_err err = STRATA_OK;

    for (int i = 0; i < 4 && err == STRATA_OK; i++)
        err = strata_worker_create_buffer(w, N * sizeof(float), b[i]);
    for (int i = 0; err == STRATA_OK && i < N; i++) {
        ((float *)strata_buffer_data(f->x))[i] = (float)i;
        ((float *)strata_buffer_data(f->grad_out))[i] = 1.0f; /* d sum/d out */
    }
    return err;
}

/* Forward, then VJP: the same orch fn for the local and the global run. */
static strata_err ring_orch(strata_orch *o, const strata_args *unused,
                            void *user)
{
    struct ring_run *r = user;
    double t0 = now_ms();
    strata_err err;

    (void)unused;
    err = strata_halo_forward(o, r->halo, r->f->x, r->f->out);
    r->forward_ms = now_ms() - t0;
    if (err == STRATA_OK) {
        t0 = now_ms();
        err = strata_halo_vjp(o, r->halo, r->f->grad_out, r->f->grad_x);
        r->vjp_ms = now_ms() - t0;
    }
    return err;
}

/* ---- the reference: a local handle on one 4-chip L3 ------------------- */

/* Runs the ring in memory on one node and keeps out and grad_x. */
static int reference(float *out, float *grad)
{
    strata_worker_config cfg;
    strata_worker *w = NULL;
    strata_halo_spec spec;
    struct fields f = {0};
    struct ring_run r = {NULL, &f, 0, 0};
    strata_err err;
    int rc;

    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = chip_ids;
    cfg.num_chips = RANKS;
    err = strata_worker_create(&cfg, &w);
    if (err != STRATA_OK)
        return fail("reference: worker create", err);
    spec_for(&spec);
    spec.chips = chip_ids; /* rank r = chip r */
    spec.num_chips = RANKS;
    err = make_fields(w, &f);
    if (err == STRATA_OK)
        err = strata_worker_init(w);
    if (err == STRATA_OK)
        err = strata_halo_create(w, &spec, &r.halo);
    if (err == STRATA_OK)
        err = strata_worker_run(w, ring_orch, NULL, &r);
    if (err == STRATA_OK) {
        memcpy(out, strata_buffer_data(f.out), N * sizeof(float));
        memcpy(grad, strata_buffer_data(f.grad_x), N * sizeof(float));
        rc = 0;
    } else {
        rc = fail("reference: in-memory halo run on one 4-chip L3", err);
    }
    if (r.halo != NULL && (err = strata_halo_destroy(r.halo)) != STRATA_OK)
        rc = fail("reference: halo destroy", err);
    if ((err = strata_worker_destroy(w)) != STRATA_OK)
        rc = fail("reference: worker destroy", err);
    return rc;
}

/* ---- the L4 worker ----------------------------------------------------- */

static void print_rows(const char *label, const float *v, uint64_t b,
                       uint64_t e)
{
    printf(" %s [", label);
    for (uint64_t i = b; i < e; i++)
        printf("%s%g", i > b ? "," : "", (double)v[i]);
    printf("]");
}

/* Every rank's rows (where the trace says it ran) against the ring
 * formula and the reference. */
static int check(const strata_halo *h, const struct fields *f,
                 const struct example_node *d, const float *ref_out,
                 const float *ref_grad)
{
    const float *out = strata_buffer_data(f->out);
    const float *gx = strata_buffer_data(f->grad_x);
    strata_halo_rank_trace t;
    int bad = 0;

    for (uint32_t r = 0; r < RANKS; r++) {
        strata_err err = strata_halo_last_trace(h, r, &t);

        if (err != STRATA_OK)
            return fail("read the trace", err);
        printf(NAME ": rank %u (node %d, %s, chip %d; rows %llu..%llu, %llu "
                    "ghosts):",
               r, t.node, t.node == 0 ? "forked" : d->endpoint, t.chip,
               (unsigned long long)t.owned_begin,
               (unsigned long long)t.owned_end - 1,
               (unsigned long long)t.ghosts);
        print_rows("out", out, t.owned_begin, t.owned_end);
        print_rows("grad", gx, t.owned_begin, t.owned_end);
        printf("\n");
    }
    for (int i = 0; i < N; i++) {
        float want = (float)((i + N - 1) % N + i + (i + 1) % N);

        if (out[i] != want || gx[i] != 3.0f || out[i] != ref_out[i] ||
            gx[i] != ref_grad[i]) {
            fprintf(stderr,
                    NAME ": row %d: out %g (want %g, in-memory %g), grad %g "
                         "(want 3, in-memory %g)\n",
                    i, (double)out[i], (double)want, (double)ref_out[i],
                    (double)gx[i], (double)ref_grad[i]);
            bad = 1;
        }
    }
    if (bad)
        fprintf(stderr, NAME ": FAILED: wrong values\n");
    else
        printf(NAME ": equal to the in-memory single-node run (out and grad, "
                    "all %d rows)\n",
               N);
    return bad;
}

/* The global handle: created on the L4, called from its orch fn. */
static int run_global(strata_worker *w, const struct example_node *d,
                      const float *ref_out, const float *ref_grad)
{
    strata_halo_spec spec;
    struct fields f = {0};
    struct ring_run r = {NULL, &f, 0, 0};
    strata_err err;
    int rc;

    err = strata_worker_init(w);
    if (err != STRATA_OK)
        return fail("init (forks node 0, connects to node 1)", err);
    printf(NAME ": node 0: forked L3 (pid %d), chips 0 and 1 = ranks 0, 1\n",
           strata_worker_node_pid(w, 0));
    printf(NAME ": node 1: remote L3 at %s (TLS 1.3, pre-shared key), "
                "chips 0 and 1 = ranks 2, 3\n",
           d->endpoint);
    err = make_fields(w, &f);
    if (err != STRATA_OK)
        return fail("create the fields", err);
    spec_for(&spec);
    spec.members = members; /* rank r = members[r] */
    spec.num_members = RANKS;
    err = strata_halo_create(w, &spec, &r.halo);
    if (err != STRATA_OK)
        return fail("create the global halo handle", err);
    err = strata_worker_run(w, ring_orch, NULL, &r);
    if (err != STRATA_OK) {
        rc = fail("forward and VJP over the global domain", err);
    } else {
        printf(NAME ": forward: 4 ranks on 2 nodes (a fresh global domain, "
                    "one group of 2 node tasks): %.3f ms\n",
               r.forward_ms);
        printf(NAME ": vjp    : 4 ranks on 2 nodes (a fresh global domain, "
                    "one group of 2 node tasks): %.3f ms\n",
               r.vjp_ms);
        rc = check(r.halo, &f, d, ref_out, ref_grad);
    }
    /* Outside the run, before the worker goes. */
    err = strata_halo_destroy(r.halo);
    if (err != STRATA_OK)
        rc = fail("destroy the halo handle", err);
    return rc;
}

int main(int argc, char **argv)
{
    struct example_node d = {.pidfd = -1};
    float ref_out[N], ref_grad[N];
    strata_worker *w = NULL;
    strata_err err;
    int rc = 1;

    (void)argv;
    if (argc > 1) {
        fprintf(stderr, "usage: " NAME "\n");
        return 2;
    }
    make_ring();
    printf(NAME ": the 8-node ring over a 4-rank global domain on a forked "
                "and a remote L3 node\n");
    /* The edge kernel, here (chips and the forked node inherit it) and in
     * the daemon, which loads the same code as its module. */
    err = strata_module_init();
    if (err != STRATA_OK)
        return fail("register the edge kernel", err);
    if (reference(ref_out, ref_grad) != 0)
        return EXIT_FAILURE;
    printf(NAME ": in-memory reference on one 4-chip L3 node done\n");
    if (example_node_start(&d, NAME,
                           example_env_or("STRATA_NODE", HMIX_NODE_PATH),
                           example_env_or("HMIX_MODULE", HMIX_MODULE_PATH),
                           START_DEADLINE_S) != 0)
        goto out;
    printf(NAME ": strata-node (pid %d) listening on %s\n", (int)d.pid,
           d.endpoint);
    if (example_l4_build(&d, NAME, chip_ids, CHIPS, &w) == 0 &&
        run_global(w, &d, ref_out, ref_grad) == 0)
        rc = 0;
out:
    /* Every path: the worker (GOODBYE to node 1, node 0 reaped, buffers
     * and domains freed), then the daemon (SIGTERM, reaped), then the
     * files. */
    if (w != NULL) {
        err = strata_worker_destroy(w);
        if (err != STRATA_OK)
            rc = fail("destroy", err);
    }
    if (example_node_stop(&d, NAME) != 0)
        rc = 1;
    if (rc != 0)
        return EXIT_FAILURE;
    printf(NAME ": OK\n");
    return EXIT_SUCCESS;
}
