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
 * The public halo API (strata_halo_forward / strata_halo_vjp) allocates a
 * local domain on the calling worker's chips; it has no global-domain
 * entry yet. So the L4 builds the halo plan with the library's own plan
 * builder (the same per-rank plans strata_halo_create makes, ranks 0..3 =
 * the global domain's ranks), sizes the global domain's windows exactly as
 * graph/halo_exec.c sizes its local ones, and submits the node callable
 * "hmix.node_halo" to both nodes as ONE group (the ranks wait on each
 * other across nodes). On each node it submits the library's halo kernel
 * ("strata.halo.forward" or "strata.halo.vjp") to the node's two member
 * chips as one group, with the arguments the library passes for a local
 * domain. Each call gets a fresh domain (the kernels need zeroed flags).
 *
 * The result must equal the in-memory single-node run: the program first
 * runs the same ring through the public API on a 4-chip L3 worker, then
 * over the global domain, and compares every value.
 *
 * The daemon gets SIGTERM and is reaped on every path (and dies with the
 * program through PR_SET_PDEATHSIG); its secret and port file live in a
 * mkdtemp directory removed as soon as both sides have read the secret.
 *
 * Usage: halo_mixed_l3
 * STRATA_NODE / HMIX_MODULE override the strata-node binary and module
 * paths built next to this program.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <strata/strata.h>

#include "example_node.h"

#include "halo_exec_int.h" /* halo_plan_build, the plan layout */
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
#define FREE_DEADLINE_S 10

static const int chip_ids[RANKS] = {0, 1, 2, 3};

/* One halo call over the global domain. */
struct job {
    strata_callable node_halo;
    strata_buffer *plan; /* the halo plan, on the L4 */
    size_t window;       /* bytes per rank: flags, stamps, data */
    bool vjp;
    strata_buffer *in, *out;
    strata_global_domain *domain;
    uint64_t id;
};

/* The ring's fields: x, out, grad_out, grad_x. */
struct fields {
    strata_buffer *x, *out, *grad_out, *grad_x;
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

/* 32 random bytes as hex, in a new file only its owner may read. */

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

static void spec_for(strata_halo_spec *spec)
{
    strata_halo_spec_init(spec);
    spec->csr = &ring;
    spec->chips = chip_ids; /* rank r = global domain rank r */
    spec->num_chips = RANKS;
    spec->features = 1;
    spec->dtype = STRATA_F32;
    spec->reducer = STRATA_HALO_SUM;
    spec->timeout_s = HMIX_WAIT_S;
}

static strata_err make_fields(strata_worker *w, struct fields *f)
{
    strata_buffer **b[4] = {&f->x, &f->out, &f->grad_out, &f->grad_x};
    strata_err err = STRATA_OK;

    for (int i = 0; i < 4 && err == STRATA_OK; i++) {
        err = strata_worker_create_buffer(w, N * sizeof(float), b[i]);
        if (err == STRATA_OK)
            memset(strata_buffer_data(*b[i]), 0, N * sizeof(float));
    }
    for (int i = 0; err == STRATA_OK && i < N; i++) {
        ((float *)strata_buffer_data(f->x))[i] = (float)i;
        ((float *)strata_buffer_data(f->grad_out))[i] = 1.0f; /* d sum/d out */
    }
    return err;
}

/* ---- the reference: the public API on one 4-chip L3 ------------------- */

struct local {
    strata_halo *halo;
    struct fields *f;
};

static strata_err local_orch(strata_orch *o, const strata_args *unused,
                             void *user)
{
    struct local *l = user;
    strata_err err;

    (void)unused;
    err = strata_halo_forward(o, l->halo, l->f->x, l->f->out);
    if (err == STRATA_OK)
        err = strata_halo_vjp(o, l->halo, l->f->grad_out, l->f->grad_x);
    return err;
}

/* Runs the ring in memory on one node and keeps out and grad_x. */
static int reference(float *out, float *grad)
{
    strata_worker_config cfg;
    strata_worker *w = NULL;
    strata_halo_spec spec;
    struct fields f = {0};
    struct local l = {NULL, &f};
    strata_err err;
    int rc = 1;

    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = chip_ids;
    cfg.num_chips = RANKS;
    err = strata_worker_create(&cfg, &w);
    if (err != STRATA_OK)
        return fail("reference: worker create", err);
    spec_for(&spec);
    err = make_fields(w, &f);
    if (err == STRATA_OK)
        err = strata_worker_init(w);
    if (err == STRATA_OK)
        err = strata_halo_create(w, &spec, &l.halo);
    if (err == STRATA_OK)
        err = strata_worker_run(w, local_orch, NULL, &l);
    if (err == STRATA_OK) {
        memcpy(out, strata_buffer_data(f.out), N * sizeof(float));
        memcpy(grad, strata_buffer_data(f.grad_x), N * sizeof(float));
        rc = 0;
    } else {
        rc = fail("reference: in-memory halo run on one 4-chip L3", err);
    }
    if (l.halo != NULL && (err = strata_halo_destroy(l.halo)) != STRATA_OK)
        rc = fail("reference: halo destroy", err);
    if ((err = strata_worker_destroy(w)) != STRATA_OK)
        rc = fail("reference: worker destroy", err);
    return rc;
}

/* ---- the L4 worker ----------------------------------------------------- */

static int build_worker(struct example_node *d, strata_worker **out)
{
    strata_worker_config c4, c3;
    strata_remote_spec spec;
    strata_worker *w = NULL, *local = NULL;
    strata_err err;
    int id;

    strata_worker_config_init(&c4, 4);
    err = strata_worker_create(&c4, &w);
    if (err != STRATA_OK)
        return fail("create the L4 worker", err);
    *out = w;
    /* Node 0: a forked L3 with chips 0 and 1. */
    strata_worker_config_init(&c3, 3);
    c3.chip_ids = chip_ids;
    c3.num_chips = CHIPS;
    err = strata_worker_create(&c3, &local);
    if (err == STRATA_OK)
        err = strata_worker_add_worker(w, local, &id);
    if (err != STRATA_OK) {
        if (local != NULL && strata_worker_destroy(local) != STRATA_OK)
            fprintf(stderr, NAME ": %s\n", strata_errmsg());
        return fail("add the forked node", err);
    }
    /* Node 1: the daemon's L3 with chips 0 and 1. */
    memset(&spec, 0, sizeof(spec));
    spec.endpoint = d->endpoint;
    spec.secret_file = d->secret;
    spec.chip_ids = chip_ids;
    spec.num_chips = CHIPS;
    err = strata_worker_add_remote_worker(w, &spec, &id);
    if (err != STRATA_OK)
        return fail("add the remote node", err);
    /* Both sides have read the key: nothing on disk needs it any more. */
    example_node_forget_files(d, NAME);
    return 0;
}

/* The slice [begin, end) of rows of a field, as a tensor. */
static strata_err add_rows(strata_args *a, strata_buffer *b, uint64_t begin,
                           uint64_t end, strata_tag tag)
{
    const size_t shape[2] = {(size_t)(end - begin), 1};

    return strata_args_add_tensor(a, b, (size_t)begin * sizeof(float),
                                  STRATA_F32, 2, shape, tag);
}

/* One node's share: the plan, its ranks' stats slots, its ranks' rows. */
static strata_err node_args(const struct job *j, int node, strata_args *a)
{
    const struct halo_plan_hdr *hdr = strata_buffer_data(j->plan);
    const struct halo_rank_plan *rps =
        (const struct halo_rank_plan *)((const char *)hdr + hdr->ranks_off);
    uint32_t first = (uint32_t)node * CHIPS;
    uint64_t b = rps[first].owned_begin;
    uint64_t e = rps[first + CHIPS - 1].owned_end;
    const size_t ro_shape[1] = {hdr->ro_size};
    const size_t st_shape[1] = {CHIPS * HALO_STATS_STRIDE};
    strata_err err;

    err = strata_args_add_tensor(a, j->plan, 0, STRATA_U8, 1, ro_shape,
                                 STRATA_IN);
    if (err == STRATA_OK)
        err = strata_args_add_tensor(a, j->plan,
                                     hdr->stats_off + first * HALO_STATS_STRIDE,
                                     STRATA_U8, 1, st_shape, STRATA_OUT);
    if (err == STRATA_OK && e > b)
        err = add_rows(a, j->in, b, e, STRATA_IN);
    if (err == STRATA_OK && e > b)
        err = add_rows(a, j->out, b, e, STRATA_OUT);
    if (err == STRATA_OK)
        err = strata_args_add_scalar(a, j->id);
    if (err == STRATA_OK)
        err = strata_args_add_scalar(a, j->vjp ? 1 : 0);
    if (err == STRATA_OK)
        err = strata_args_add_scalar(a, first);
    if (err == STRATA_OK)
        err = strata_args_add_scalar(a, halo_data_offset(RANKS));
    return err;
}

/* One halo call: a fresh global domain (zeroed flags), both nodes' tasks
 * as one group, then the domain is released (freed at the run's fence). */
static strata_err halo_orch(strata_orch *o, const strata_args *unused,
                            void *user)
{
    struct job *j = user;
    /* Rank order = the plan's ranks: node 0's chips, then node 1's. */
    static const strata_global_member members[RANKS] = {
        {0, 0}, {0, 1}, {1, 0}, {1, 1}};
    static const int nodes[NODES] = {0, 1};
    strata_global_domain_spec spec = {
        .name = j->vjp ? "hmix.vjp" : "hmix.fwd",
        .members = members,
        .num_members = RANKS,
        .window_size = j->window,
    };
    strata_args *a[NODES] = {0};
    strata_err err, end, rel;

    (void)unused;
    err = strata_orch_allocate_global_domain(o, &spec, &j->domain);
    if (err != STRATA_OK)
        return err;
    j->id = strata_global_domain_id(j->domain);
    for (int n = 0; n < NODES && err == STRATA_OK; n++) {
        err = strata_args_create(&a[n]);
        if (err == STRATA_OK)
            err = node_args(j, n, a[n]);
    }
    if (err == STRATA_OK)
        err = strata_orch_scope_begin(o);
    if (err == STRATA_OK) {
        err = strata_orch_submit_next_level_group(
            o, j->node_halo, (const strata_args *const *)a, nodes, NODES);
        end = strata_orch_scope_end(o); /* closes even after a failure */
        if (err == STRATA_OK)
            err = end;
    }
    for (int n = 0; n < NODES; n++)
        strata_args_destroy(a[n]);
    rel = strata_global_domain_release(j->domain);
    return err != STRATA_OK ? err : rel;
}

/* Release is asynchronous (every node unmaps its members' windows). */
static int wait_freed(const struct job *j)
{
    uint64_t t0 = now_ns();
    struct timespec ms = {0, 1000000};

    while (!strata_global_domain_freed(j->domain)) {
        if (now_ns() - t0 > FREE_DEADLINE_S * 1000000000ull) {
            fprintf(stderr,
                    NAME ": FAILED: the released domain was not freed "
                         "within %d s\n",
                    FREE_DEADLINE_S);
            return 1;
        }
        nanosleep(&ms, NULL);
    }
    return 0;
}

static int call(strata_worker *w, struct job *j, bool vjp, strata_buffer *in,
                strata_buffer *out)
{
    const struct halo_plan_hdr *hdr = strata_buffer_data(j->plan);
    uint64_t t0 = now_ns();
    strata_err err;

    j->vjp = vjp;
    j->in = in;
    j->out = out;
    /* Stale stats must not pass for this call's. */
    memset((char *)strata_buffer_data(j->plan) + hdr->stats_off, 0,
           RANKS * HALO_STATS_STRIDE);
    err = strata_worker_run(w, halo_orch, NULL, j);
    if (err != STRATA_OK)
        return fail(vjp ? "the VJP over the global domain"
                        : "the forward over the global domain",
                    err);
    if (wait_freed(j) != 0)
        return 1;
    printf(NAME ": %s: global domain %llu (4 ranks, 2 nodes, %zu-byte "
                "windows), one group of 2 node tasks: %.3f ms, freed\n",
           vjp ? "vjp    " : "forward", (unsigned long long)j->id, j->window,
           (double)(now_ns() - t0) / 1e6);
    for (uint32_t r = 0; r < RANKS; r++) {
        const struct halo_stats *st =
            (const struct halo_stats *)((const char *)hdr + hdr->stats_off +
                                        r * HALO_STATS_STRIDE);

        if (__atomic_load_n(&st->done, __ATOMIC_ACQUIRE) != 1) {
            fprintf(stderr, NAME ": FAILED: rank %u reported nothing\n", r);
            return 1;
        }
    }
    return 0;
}

static void print_rows(const char *label, const float *v, uint64_t b,
                       uint64_t e)
{
    printf(" %s [", label);
    for (uint64_t i = b; i < e; i++)
        printf("%s%g", i > b ? "," : "", (double)v[i]);
    printf("]");
}

/* Every rank's rows against the ring formula and the reference. */
static int check(const struct job *j, const struct fields *f,
                 const struct example_node *d, const float *ref_out,
                 const float *ref_grad)
{
    const struct halo_plan_hdr *hdr = strata_buffer_data(j->plan);
    const struct halo_rank_plan *rps =
        (const struct halo_rank_plan *)((const char *)hdr + hdr->ranks_off);
    const float *out = strata_buffer_data(f->out);
    const float *gx = strata_buffer_data(f->grad_x);
    int bad = 0;

    for (uint32_t r = 0; r < RANKS; r++) {
        printf(NAME ": rank %u (node %u, %s, chip %u; rows %llu..%llu, %llu "
                    "ghosts):",
               r, r / CHIPS, r / CHIPS == 0 ? "forked" : d->endpoint, r % CHIPS,
               (unsigned long long)rps[r].owned_begin,
               (unsigned long long)rps[r].owned_end - 1,
               (unsigned long long)rps[r].num_ghosts);
        print_rows("out", out, rps[r].owned_begin, rps[r].owned_end);
        print_rows("grad", gx, rps[r].owned_begin, rps[r].owned_end);
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

static int run_all(strata_worker *w, struct job *j,
                   const struct example_node *d, const float *ref_out,
                   const float *ref_grad)
{
    strata_halo_spec spec;
    struct fields f = {0};
    uint64_t max_pack = 0, max_ghosts = 0, rows;
    strata_err err;

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
    /* The plan strata_halo_create would make for ranks 0..3, on the L4;
     * every window as graph/halo_exec.c sizes a local domain's: the
     * flags, the stamps, and the larger of the forward pack region and
     * the VJP ghost region. */
    spec_for(&spec);
    err = halo_plan_build(w, &spec, &j->plan, &max_pack, &max_ghosts);
    if (err != STRATA_OK)
        return fail("build the halo plan", err);
    rows = max_pack > max_ghosts ? max_pack : max_ghosts;
    j->window = halo_data_offset(RANKS) + (size_t)rows * sizeof(float);
    if (call(w, j, false, f.x, f.out) != 0 ||
        call(w, j, true, f.grad_out, f.grad_x) != 0)
        return 1;
    return check(j, &f, d, ref_out, ref_grad);
}

int main(int argc, char **argv)
{
    struct example_node d = {.pidfd = -1};
    float ref_out[N], ref_grad[N];
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
    make_ring();
    printf(NAME ": the 8-node ring over a 4-rank global domain on a forked "
                "and a remote L3 node\n");
    if (reference(ref_out, ref_grad) != 0)
        return EXIT_FAILURE;
    printf(NAME ": in-memory reference on one 4-chip L3 node done\n");
    /* The forked node inherits this registry; the remote node has the same
     * callable from the module, and the halo kernels from the library. */
    err = strata_module_init();
    if (err == STRATA_OK)
        err = strata_callable_by_name(STRATA_CALLABLE_ORCH, HMIX_NODE_HALO,
                                      &j.node_halo);
    if (err != STRATA_OK)
        return fail("register the node callable", err);
    if (example_node_start(&d, NAME,
                           example_env_or("STRATA_NODE", HMIX_NODE_PATH),
                           example_env_or("HMIX_MODULE", HMIX_MODULE_PATH),
                           START_DEADLINE_S) != 0)
        goto out;
    printf(NAME ": strata-node (pid %d) listening on %s\n", (int)d.pid,
           d.endpoint);
    if (build_worker(&d, &w) == 0 && run_all(w, &j, &d, ref_out, ref_grad) == 0)
        rc = 0;
out:
    /* Every path: the plan, the worker (GOODBYE to node 1, node 0 reaped),
     * then the daemon (SIGTERM, reaped), then the files. */
    if (j.plan != NULL && (err = strata_buffer_release(j.plan)) != STRATA_OK)
        rc = fail("release the plan", err);
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
