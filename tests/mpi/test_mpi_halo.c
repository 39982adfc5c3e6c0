/*
 * The halo mpi transport (strata_halo_spec.transport): a global handle
 * over the ranks of a real mpirun --oversubscribe group on this host,
 * whose rows between nodes travel as MPI messages between the ranks'
 * processes. Forward and VJP give the same bytes as the window transport
 * over the same members (which works here: every rank is on this host),
 * for 2 ranks of 1 and 2 chips and 3 and 4 ranks of 1, ranks interleaved,
 * in memory and paged, sum and mean, both schedules, one chunk or many;
 * the default transport takes mpi for a rank that reports another host; a
 * request where no MPI group is fails at create with STRATA_EINVAL naming
 * why; a rank kernel that fails ends the call at once (STRATA_ETASK); a
 * rank that dies or stops in the middle of an exchange (fault point
 * mpirank.halo.<r>) fails the call with STRATA_EPEER instead of hanging
 * it, and nothing of the job is left.
 */
#include "mt_env.h"
#include "mt_procs.h"
#include "remote_kit.h"
#include "worker/reclaim.h"

#include "halo_kit.h"

#include <strata/domain.h>

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_RANKS MT_MAX_RANKS
#define WAIT_S 20.0

static const int chips2[2] = {0, 1};
static const char *over[1] = {"--oversubscribe"};

/* ---- an L4 with one forked node and one group --------------------------- */

struct menv {
    testutil_snapshot before;
    strata_worker *w;
    int ids[MAX_RANKS]; /* the group's node ids, rank order */
    strata_buffer *x, *out, *grad_out, *grad_x;
    size_t cap;
};

/* menv_start without asserting (a forked L4 has no test to fail). */
static strata_err menv_try_start(struct menv *e, size_t ranks, size_t nchips,
                                 const char **args, size_t nargs, size_t cap)
{
    static const char *modules[1] = {RT_MODULE_PATH};
    strata_buffer **b[4] = {&e->x, &e->out, &e->grad_out, &e->grad_x};
    strata_mpi_group_spec s;
    strata_err err;

    memset(e, 0, sizeof(*e));
    testutil_snapshot_take(&e->before);
    memset(&s, 0, sizeof(s));
    s.ranks = ranks;
    s.chip_ids = chips2;
    s.num_chips = nchips;
    s.mpirun_path = MT_MPIRUN;
    s.mpirun_args = args;
    s.num_mpirun_args = nargs;
    s.rank_program = MT_RANK_PATH;
    s.modules = modules;
    s.num_modules = 1;
    /* Node 0 is forked; the group's ranks are nodes 1.. */
    err = rk_l4_create(1, NULL, 0, &e->w);
    if (!err)
        err =
            strata_worker_add_mpirun_worker_group(e->w, &s, e->ids, MAX_RANKS);
    if (!err)
        err = strata_worker_init(e->w);
    e->cap = cap;
    for (int i = 0; i < 4 && !err; i++)
        err = strata_worker_create_buffer(e->w, cap, b[i]);
    return err;
}

static void menv_start(struct menv *e, size_t ranks, size_t nchips,
                       const char **args, size_t nargs, size_t cap)
{
    it_ok(menv_try_start(e, ranks, nchips, args, nargs, cap));
}

static void menv_stop(struct menv *e, strata_err ok_too)
{
    strata_buffer *b[4] = {e->x, e->out, e->grad_out, e->grad_x};

    for (int i = 0; i < 4; i++)
        it_ok(strata_buffer_release(b[i]));
    rk_destroy(e->w, ok_too);
    testutil_assert_clean_within(&e->before, 10.0);
    assert_false(mt_ompi_dir_of(getpid()));
}

struct both {
    struct menv *e;
    strata_halo *h;
};

static strata_err both_orch(strata_orch *o, const strata_args *a, void *user)
{
    struct both *c = user;
    strata_err err;

    (void)a;
    err = strata_halo_forward(o, c->h, c->e->x, c->e->out);
    if (!err)
        err = strata_halo_vjp(o, c->h, c->e->grad_out, c->e->grad_x);
    return err;
}

static strata_err run_both(struct menv *e, strata_halo *h)
{
    struct both c = {e, h};

    return strata_worker_run(e->w, both_orch, NULL, &c);
}

/* ---- same bytes as the windows ------------------------------------------ */

/* Runs spec (members given) with the window transport and then the mpi
 * one on the same inputs: the outputs must be the same bytes, and close
 * to the reference. */
static void compare(struct menv *e, const struct gh_graph *g,
                    strata_halo_spec *spec, uint64_t seed)
{
    size_t bytes = g->n * spec->features * strata_dtype_size(spec->dtype);
    size_t count = g->n * spec->features;
    char *fwd = malloc(bytes), *bwd = malloc(bytes);
    double *in = malloc(count * sizeof(double));
    double *ref = malloc(count * sizeof(double));
    strata_halo *win = NULL, *mpi = NULL;

    assert_true(fwd && bwd && in && ref && bytes <= e->cap);
    spec->transport = STRATA_HALO_TRANSPORT_DEFAULT;
    it_ok(strata_halo_create(e->w, spec, &win));
    spec->transport = STRATA_HALO_TRANSPORT_MPI;
    it_ok(strata_halo_create(e->w, spec, &mpi));
    hk_fill(e->x, spec->dtype, g->n, spec->features, seed);
    hk_fill(e->grad_out, spec->dtype, g->n, spec->features, seed + 5);
    it_ok(run_both(e, win));
    memcpy(fwd, strata_buffer_data(e->out), bytes);
    memcpy(bwd, strata_buffer_data(e->grad_x), bytes);
    for (size_t i = 0; i < count; i++)
        in[i] = hk_get(e->x, spec->dtype, i);
    hk_reference(g, spec->reducer, NULL, false, in, spec->features, ref);
    hk_expect_close(e->out, spec->dtype, ref, count, "windows forward");
    /* Twice: the second call reuses each node's mailbox. */
    for (int k = 0; k < 2; k++) {
        memset(strata_buffer_data(e->out), 0x5a, bytes);
        memset(strata_buffer_data(e->grad_x), 0x5a, bytes);
        it_ok(run_both(e, mpi));
        assert_memory_equal(fwd, strata_buffer_data(e->out), bytes);
        assert_memory_equal(bwd, strata_buffer_data(e->grad_x), bytes);
    }
    it_ok(strata_halo_destroy(win));
    it_ok(strata_halo_destroy(mpi));
    free(fwd);
    free(bwd);
    free(in);
    free(ref);
}

/* The 8-node ring: the exact values, over 2 ranks of one chip. */
static void ring_exact(struct menv *e)
{
    static const double want[8] = {8, 3, 6, 9, 12, 15, 18, 13};
    const strata_global_member m[2] = {{e->ids[0], 0}, {e->ids[1], 0}};
    strata_halo_spec spec;
    strata_halo *h = NULL;
    struct gh_graph g;
    strata_csr_view v;

    gh_graph_ring(&g, 8);
    v = gh_view(&g);
    strata_halo_spec_init(&spec);
    spec.csr = &v;
    spec.members = m;
    spec.num_members = 2;
    spec.dtype = STRATA_F64;
    spec.timeout_s = WAIT_S;
    spec.transport = STRATA_HALO_TRANSPORT_MPI;
    it_ok(strata_halo_create(e->w, &spec, &h));
    for (int i = 0; i < 8; i++) {
        ((double *)strata_buffer_data(e->x))[i] = i;
        ((double *)strata_buffer_data(e->grad_out))[i] = 1.0;
    }
    it_ok(run_both(e, h));
    for (int i = 0; i < 8; i++) {
        assert_true(hk_get(e->out, STRATA_F64, (size_t)i) == want[i]);
        assert_true(hk_get(e->grad_x, STRATA_F64, (size_t)i) == 3.0);
    }
    it_ok(strata_halo_destroy(h));
    gh_graph_free(&g);
}

/* Two ranks of two chips each: members on one node exchange in place,
 * across nodes by MPI; ranks interleaved over the nodes or not. */
static void test_mpi_halo_two_ranks_same_bytes_as_windows(void **state)
{
    struct menv e;
    struct gh_graph g;
    strata_csr_view v;
    uint64_t st = 29;

    (void)state;
    menv_start(&e, 2, 2, over, 1, 1 << 20);
    ring_exact(&e);
    gh_graph_random(&g, 403, 9, &st);
    v = gh_view(&g);
    for (int k = 0; k < 7; k++) {
        const strata_global_member blocks[4] = {
            {e.ids[0], 0}, {e.ids[0], 1}, {e.ids[1], 0}, {e.ids[1], 1}};
        const strata_global_member mixed[4] = {
            {e.ids[1], 1}, {e.ids[0], 0}, {e.ids[1], 0}, {e.ids[0], 1}};
        const strata_global_member two[2] = {{e.ids[0], 1}, {e.ids[1], 0}};
        /* k 6: both members on one rank, no message at all. */
        const strata_global_member one[2] = {{e.ids[1], 1}, {e.ids[1], 0}};
        strata_halo_spec spec;

        strata_halo_spec_init(&spec);
        spec.csr = &v;
        spec.members = k == 6 ? one : k == 4 ? two : k & 1 ? mixed : blocks;
        spec.num_members = k >= 4 ? 2 : 4;
        spec.features = 3;
        spec.dtype = k & 2 ? STRATA_F32 : STRATA_F64;
        spec.reducer = k & 1 ? STRATA_HALO_MEAN : STRATA_HALO_SUM;
        spec.schedule =
            k == 3 ? STRATA_HALO_SERIALIZED : STRATA_HALO_OVERLAPPED;
        spec.timeout_s = WAIT_S;
        /* A few rows a chunk: many messages per pair, in order. */
        spec.chunk_bytes = k < 3 ? 3 * 3 * sizeof(double) : 0;
        compare(&e, &g, &spec, (uint64_t)k + 1);
    }
    gh_graph_free(&g);
    menv_stop(&e, STRATA_OK);
}

/* `ranks` ranks of one chip, in reverse rank order: every exchange
 * crosses nodes; in memory and paged from a store. */
static void one_chip_ranks(size_t ranks, uint64_t seed)
{
    struct menv e;
    struct gh_graph g;
    strata_csr_view v;
    strata_global_member m[MAX_RANKS];
    uint64_t st = seed;
    char *tmp = gh_tmpdir(), *store = gh_join(tmp, "g.gfg");

    menv_start(&e, ranks, 1, over, 1, 1 << 20);
    gh_graph_random(&g, 257, 6, &st);
    v = gh_view(&g);
    assert_int_equal(strata_gfg_save(store, &v, STRATA_I64), STRATA_OK);
    for (size_t r = 0; r < ranks; r++)
        m[r] = (strata_global_member){e.ids[ranks - 1 - r], 0};
    /* k 2: the graph paged from a store by the ranks' chips. */
    for (int k = 0; k < 3; k++) {
        strata_halo_spec spec;

        strata_halo_spec_init(&spec);
        spec.csr = &v;
        spec.members = m;
        spec.num_members = ranks;
        spec.features = 5;
        spec.dtype = STRATA_F32;
        spec.reducer = k == 1 ? STRATA_HALO_MEAN : STRATA_HALO_SUM;
        spec.timeout_s = WAIT_S;
        spec.chunk_bytes = k == 1 ? 0 : 4 * 5 * sizeof(float);
        if (k == 2) {
            spec.csr = NULL;
            spec.gfg_path = store;
        }
        compare(&e, &g, &spec, (uint64_t)k + 11);
    }
    gh_rmtree(tmp);
    free(store);
    free(tmp);
    gh_graph_free(&g);
    menv_stop(&e, STRATA_OK);
}

static void test_mpi_halo_three_ranks_same_bytes_as_windows(void **state)
{
    (void)state;
    one_chip_ranks(3, 71);
}

static void test_mpi_halo_four_ranks_same_bytes_as_windows(void **state)
{
    (void)state;
    one_chip_ranks(4, 73);
}

/* Rank 1 says it runs on another host (test hook mpirank.otherhost.1):
 * windows over it are refused at the call (the sim profile needs one
 * host), while the default transport takes mpi there and gives the bytes
 * the mpi transport named gives. */
static void test_mpi_halo_default_takes_mpi_across_hosts(void **state)
{
    const char *args[3] = {"--oversubscribe", "-x",
                           "STRATA_FAULT=mpirank.otherhost.1"};
    struct menv e;
    struct gh_graph g;
    strata_csr_view v;
    strata_halo_spec spec;
    strata_halo *h[3] = {NULL, NULL, NULL};
    uint64_t st = 5;
    size_t bytes;
    char *want;

    (void)state;
    gh_graph_random(&g, 97, 5, &st);
    v = gh_view(&g);
    bytes = g.n * 2 * sizeof(float);
    want = malloc(2 * bytes);
    assert_non_null(want);
    menv_start(&e, 2, 1, args, 3, 4096);
    const strata_global_member m[2] = {{e.ids[0], 0}, {e.ids[1], 0}};
    strata_halo_spec_init(&spec);
    spec.csr = &v;
    spec.members = m;
    spec.num_members = 2;
    spec.features = 2;
    spec.timeout_s = WAIT_S;
    for (int t = 0; t < 3; t++) {
        spec.transport = (strata_halo_transport)t; /* default, windows, mpi */
        it_ok(strata_halo_create(e.w, &spec, &h[t]));
    }
    hk_fill(e.x, STRATA_F32, g.n, 2, 9);
    hk_fill(e.grad_out, STRATA_F32, g.n, 2, 10);
    it_ok(run_both(&e, h[2]));
    memcpy(want, strata_buffer_data(e.out), bytes);
    memcpy(want + bytes, strata_buffer_data(e.grad_x), bytes);
    assert_int_equal(run_both(&e, h[1]), STRATA_EINVAL);
    print_message("windows: %s\n", strata_errmsg());
    rk_assert_contains(strata_errmsg(), "needs every node on one host");
    memset(strata_buffer_data(e.out), 0, bytes);
    memset(strata_buffer_data(e.grad_x), 0, bytes);
    it_ok(run_both(&e, h[0]));
    assert_memory_equal(want, strata_buffer_data(e.out), bytes);
    assert_memory_equal(want + bytes, strata_buffer_data(e.grad_x), bytes);
    for (int t = 0; t < 3; t++)
        it_ok(strata_halo_destroy(h[t]));
    menv_stop(&e, STRATA_OK);
    free(want);
    gh_graph_free(&g);
}

/* ---- refusals ------------------------------------------------------------ */

static void expect_einval(strata_worker *w, const strata_halo_spec *s,
                          const char *needle)
{
    strata_halo *h = NULL;

    assert_int_equal(strata_halo_create(w, s, &h), STRATA_EINVAL);
    assert_null(h);
    print_message("refused: %s\n", strata_errmsg());
    rk_assert_contains(strata_errmsg(), needle);
}

/* The mpi transport where no MPI group is: on the chips of one worker, on
 * a forked node, on a forked node and a rank; an unknown transport. The
 * window transport over the same members works. */
static void test_mpi_halo_without_group_einval(void **state)
{
    struct menv e;
    struct gh_graph g;
    strata_csr_view v;
    strata_halo_spec spec;
    strata_worker_config c3;
    strata_worker *l3 = NULL;
    strata_halo *h = NULL;
    const strata_global_member forked[2] = {{0, 0}, {0, 1}};

    (void)state;
    gh_graph_ring(&g, 8);
    v = gh_view(&g);
    menv_start(&e, 1, 2, over, 1, 4096);
    const strata_global_member mixed[2] = {{e.ids[0], 0}, {0, 0}};
    strata_halo_spec_init(&spec);
    spec.csr = &v;
    spec.transport = STRATA_HALO_TRANSPORT_MPI;
    spec.members = forked;
    spec.num_members = 2;
    expect_einval(e.w, &spec,
                  "the mpi transport needs every member on a rank of one MPI "
                  "group (strata_worker_add_mpirun_worker_group), and node 0 "
                  "of members[0] is not an MPI rank");
    spec.members = mixed;
    expect_einval(e.w, &spec, "node 0 of members[1] is not an MPI rank");
    spec.transport = (strata_halo_transport)7;
    expect_einval(e.w, &spec, "unknown transport 7");
    spec.transport = STRATA_HALO_TRANSPORT_WINDOWS;
    it_ok(strata_halo_create(e.w, &spec, &h));
    it_ok(strata_halo_destroy(h));
    menv_stop(&e, STRATA_OK);
    /* A local handle: its chips share windows. */
    strata_worker_config_init(&c3, 3);
    c3.num_chips = 2;
    c3.chip_ids = chips2;
    it_ok(strata_worker_create(&c3, &l3));
    spec.members = NULL;
    spec.num_members = 0;
    spec.chips = chips2;
    spec.num_chips = 2;
    spec.transport = STRATA_HALO_TRANSPORT_MPI;
    expect_einval(l3, &spec, "the mpi transport needs members on the ranks");
    it_ok(strata_worker_destroy(l3));
    gh_graph_free(&g);
}

/* ---- failures ------------------------------------------------------------ */

/* A handle over two members of the mpi transport, rows of v. */
static void mpi_spec2(strata_halo_spec *spec, const strata_csr_view *v,
                      const strata_global_member *m, double timeout_s)
{
    strata_halo_spec_init(spec);
    spec->csr = v;
    spec->members = m;
    spec->num_members = 2;
    spec->timeout_s = timeout_s;
    spec->transport = STRATA_HALO_TRANSPORT_MPI;
}

/* A group of 2 ranks x 1 chip (mpirun arguments args) and an mpi
 * handle over a 64-row ring on chip 0 of rank 0 and chip chip1 of rank 1
 * (timeout_s), x filled. The graph is g's, to free after the handle. */
static strata_halo *ring64_start(struct menv *e, struct gh_graph *g,
                                 const char **args, size_t nargs, int chip1,
                                 double timeout_s)
{
    strata_csr_view v;
    strata_halo_spec spec;
    strata_halo *h = NULL;

    gh_graph_ring(g, 64);
    v = gh_view(g);
    menv_start(e, 2, 1, args, nargs, 4096);
    const strata_global_member m[2] = {{e->ids[0], 0}, {e->ids[1], chip1}};
    mpi_spec2(&spec, &v, m, timeout_s);
    it_ok(strata_halo_create(e->w, &spec, &h));
    hk_fill(e->x, STRATA_F32, 64, 1, 3);
    return h;
}

/* A forward and VJP over h fail with want, naming needle, well within
 * 30 s (the calls' timeout_s is longer). */
static void fails_fast(struct menv *e, strata_halo *h, strata_err want,
                       const char *needle)
{
    double t0 = testutil_now();
    strata_err err = run_both(e, h);

    /* Printed first, so that a failure below says what happened. */
    print_message("failed after %.1f s (%s): %s\n", testutil_now() - t0,
                  strata_errname(err), strata_errmsg());
    assert_int_equal(err, want);
    rk_assert_contains(strata_errmsg(), needle);
    assert_true(testutil_now() - t0 < 30.0);
}

/* Rank 1 fails in its exchange as fault (STRATA_FAULT, armed through
 * mpirun -x) says, the call's timeout_s being timeout_s: the call fails
 * with STRATA_EPEER naming the MPI rank, well within 30 s, and the
 * group is gone cleanly. */
static void rank_fault_case(const char *fault, double timeout_s)
{
    const char *args[3] = {"--oversubscribe", "-x", fault};
    struct menv e;
    struct gh_graph g;
    strata_halo *h = ring64_start(&e, &g, args, 3, 0, timeout_s);

    fails_fast(&e, h, STRATA_EPEER, "MPI rank");
    it_ok(strata_halo_destroy(h));
    menv_stop(&e, STRATA_EPEER);
    gh_graph_free(&g);
}

/* Rank 1 dies with its receives posted (fault point mpirank.halo.1): the
 * call fails within the heartbeat bound, not after the exchange deadline
 * (120 s). */
static void test_mpi_halo_rank_dies_mid_exchange_epeer(void **state)
{
    (void)state;
    rank_fault_case("STRATA_FAULT=mpirank.halo.1:1", 120);
}

/* An edge kernel this process has and the ranks lack: every rank fails
 * in its kernel, still hands its (unused) rows over, so the call ends at
 * once with STRATA_ETASK naming the kernel; the group stays usable. */
static void only_here(int64_t dst, int64_t src, strata_dtype dtype,
                      size_t features, const void *in_row, void *acc_row)
{
    (void)dst;
    (void)src;
    (void)dtype;
    for (size_t f = 0; f < features; f++)
        ((float *)acc_row)[f] += ((const float *)in_row)[f];
}

static void test_mpi_halo_rank_kernel_fails_fast(void **state)
{
    struct menv e;
    struct gh_graph g;
    strata_csr_view v;
    strata_halo_spec spec;
    strata_halo *h = NULL;
    double t0;

    (void)state;
    it_ok(strata_halo_register_edge("mh.only_here", only_here, only_here));
    gh_graph_ring(&g, 64);
    v = gh_view(&g);
    menv_start(&e, 2, 1, over, 1, 4096);
    const strata_global_member m[2] = {{e.ids[0], 0}, {e.ids[1], 0}};
    strata_halo_spec_init(&spec);
    spec.csr = &v;
    spec.members = m;
    spec.num_members = 2;
    spec.reducer = STRATA_HALO_EDGE;
    spec.edge_kernel = "mh.only_here";
    spec.timeout_s = 120; /* the failure must not wait for it */
    spec.transport = STRATA_HALO_TRANSPORT_MPI;
    it_ok(strata_halo_create(e.w, &spec, &h));
    t0 = testutil_now();
    assert_int_equal(run_both(&e, h), STRATA_ETASK);
    print_message("failed: %s\n", strata_errmsg());
    rk_assert_contains(strata_errmsg(), "mh.only_here");
    assert_true(testutil_now() - t0 < 30.0);
    it_ok(strata_halo_destroy(h));
    ring_exact(&e); /* the group still works */
    menv_stop(&e, STRATA_OK);
    gh_graph_free(&g);
}

/* A node that cannot run its members fails before its chips start, while
 * its peer is already exchanging: it still takes part in the exchange,
 * so the call fails at once with its reason, not after timeout_s (120 s)
 * with an ended MPI job. Two causes: a member on a chip rank 1 does not
 * have (the L4 cannot know its chips), and an injected failure
 * (halo.mpinode, armed on every rank for its first call). The group
 * stays usable. */
static void node_fails_case(const char **args, size_t nargs, int chip1,
                            const char *why)
{
    struct menv e;
    struct gh_graph g;
    strata_halo *h = ring64_start(&e, &g, args, nargs, chip1, 120);

    /* The fault fires once per rank; a missing chip stays missing. */
    for (int i = 0; i < (chip1 == 0 ? 1 : 2); i++)
        fails_fast(&e, h, STRATA_ETASK, why);
    it_ok(strata_halo_destroy(h));
    if (chip1 == 0)
        ring_exact(&e);
    menv_stop(&e, STRATA_OK);
    gh_graph_free(&g);
}

static void test_mpi_halo_member_chip_missing_fails_fast(void **state)
{
    (void)state;
    /* Named as the spec names it: members[1], not its node's group's
     * member 0. */
    node_fails_case(over, 1, 7, "members[1] names chip 7");
}

static void test_mpi_halo_node_task_fails_fast(void **state)
{
    static const char *args[3] = {"--oversubscribe", "-x",
                                  "STRATA_FAULT=halo.mpinode:1"};

    (void)state;
    node_fails_case(args, 3, 0, "injected failure");
}

/* The chip of halo rank 1 dies as its kernel starts
 * (halo.mpichip.1:1:kill) while rank 0's exchange waits for its rows:
 * rank 1's node sends its rows as they are, so the call fails at once
 * naming the dead chip instead of waiting out timeout_s (120 s) and
 * ending the MPI job; the rank and its node live on. */
static void test_mpi_halo_chip_dies_mid_exchange_fails_fast(void **state)
{
    static const char *args[3] = {"--oversubscribe", "-x",
                                  "STRATA_FAULT=halo.mpichip.1:1:kill"};
    struct menv e;
    struct gh_graph g;
    strata_halo *h;
    double t0;
    strata_err err;

    (void)state;
    h = ring64_start(&e, &g, args, 3, 0, 120);
    t0 = testutil_now();
    err = run_both(&e, h);
    print_message("failed after %.1f s: %s\n", testutil_now() - t0,
                  strata_errmsg());
    assert_true(err == STRATA_ETASK || err == STRATA_EPEER);
    rk_assert_contains(strata_errmsg(), "died");
    assert_true(testutil_now() - t0 < 30.0);
    /* The next call finds the chip dead before it starts: rank 1's node
     * stands in from the start (before, nothing of its moved, and both
     * ranks waited out timeout_s and ended the MPI job). */
    t0 = testutil_now();
    err = run_both(&e, h);
    print_message("again after %.1f s: %s\n", testutil_now() - t0,
                  strata_errmsg());
    assert_true(err == STRATA_ETASK || err == STRATA_EPEER);
    rk_assert_contains(strata_errmsg(), "chip 0 is dead");
    assert_true(testutil_now() - t0 < 30.0);
    /* The group is still there: rank 1's node answers (its chip is gone). */
    assert_true(strata_worker_node_pid(e.w, e.ids[1]) > 0);
    it_ok(strata_halo_destroy(h));
    menv_stop(&e, STRATA_EPEER);
    gh_graph_free(&g);
}

/* Rank 1 stops (SIGSTOP) in the middle of its exchange: rank 0's
 * exchange passes its deadline (timeout_s, 3 s), rank 0 ends the MPI job,
 * and the call fails with STRATA_EPEER instead of hanging. */
static void test_mpi_halo_rank_hangs_mid_exchange_epeer(void **state)
{
    (void)state;
    rank_fault_case("STRATA_FAULT=mpirank.halo.1:1:stop", 3);
}

/* ---- the L4 killed mid-exchange ------------------------------------------ */

/* In a forked L4: a group of 2 whose rank 1 stops in its first exchange
 * and a handle over it (timeout_s 120), '1' on fd once they are there,
 * then a call over it; then it waits to be killed. */
_Noreturn static void exchange_l4_child(int fd)
{
    static const char *args[3] = {"--oversubscribe", "-x",
                                  "STRATA_FAULT=mpirank.halo.1:1:stop"};
    static struct menv e;
    static struct gh_graph g;
    static strata_csr_view v;
    static struct both c;
    strata_halo_spec spec;
    strata_halo *h = NULL;
    strata_err err;
    char ok;

    gh_graph_ring(&g, 64);
    v = gh_view(&g);
    err = menv_try_start(&e, 2, 1, args, 3, 4096);
    const strata_global_member m[2] = {{e.ids[0], 0}, {e.ids[1], 0}};
    mpi_spec2(&spec, &v, m, 120);
    if (!err)
        err = strata_halo_create(e.w, &spec, &h);
    c.e = &e;
    c.h = h;
    ok = err ? '0' : '1';
    if (err)
        fprintf(stderr, "l4 child: %s\n", strata_errmsg());
    if (write(fd, &ok, 1) != 1)
        _exit(1);
    /* Returns only when the call fails (rank 1 stopped): by then the
     * test has killed this process. */
    if (!err && strata_worker_run(e.w, both_orch, NULL, &c) != STRATA_OK)
        fprintf(stderr, "l4 child: %s\n", strata_errmsg());
    for (;;)
        pause();
}

static bool stopped(void *arg)
{
    return mt_state(*(pid_t *)arg) == 'T';
}

/* The L4 SIGKILLed while rank 0 waits in an exchange on rank 1 (stopped
 * there): rank 0's session ends, its chips are killed, and its exchange
 * gives up at once and ends the job, instead of waiting out timeout_s
 * (120 s) with mpirun and both ranks left running. */
static void test_mpi_halo_l4_killed_mid_exchange_ends_job(void **state)
{
    testutil_snapshot before;
    pid_t l4, pids[MAX_RANKS];

    (void)state;
    testutil_snapshot_take(&before);
    l4 = mt_fork_l4(exchange_l4_child, pids);
    assert_true(testutil_wait_until(stopped, &pids[1], 60.0));
    mt_kill_l4_expect_gone(l4, pids, 1);
    testutil_assert_clean(&before);
}

/* ---- setup --------------------------------------------------------------- */

static int setup(void **state)
{
    (void)state;
    return mt_env_setup();
}

static int teardown(void **state)
{
    (void)state;
    mt_env_teardown();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mpi_halo_without_group_einval),
        cmocka_unit_test(test_mpi_halo_two_ranks_same_bytes_as_windows),
        cmocka_unit_test(test_mpi_halo_three_ranks_same_bytes_as_windows),
        cmocka_unit_test(test_mpi_halo_four_ranks_same_bytes_as_windows),
        cmocka_unit_test(test_mpi_halo_default_takes_mpi_across_hosts),
        cmocka_unit_test(test_mpi_halo_rank_kernel_fails_fast),
        cmocka_unit_test(test_mpi_halo_member_chip_missing_fails_fast),
        cmocka_unit_test(test_mpi_halo_node_task_fails_fast),
        cmocka_unit_test(test_mpi_halo_rank_dies_mid_exchange_epeer),
        cmocka_unit_test(test_mpi_halo_rank_hangs_mid_exchange_epeer),
        cmocka_unit_test(test_mpi_halo_chip_dies_mid_exchange_fails_fast),
        cmocka_unit_test(test_mpi_halo_l4_killed_mid_exchange_ends_job),
    };

    rk_filter_from_env();
    return cmocka_run_group_tests(tests, setup, teardown);
}
