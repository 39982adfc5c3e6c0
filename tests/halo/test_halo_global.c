/* Halo execution over a global domain: a handle whose ranks are members
 * (node, chip) of an L4's nodes, run from the L4's orch fn across a forked
 * L3 node and a remote L3 node in a real strata-node daemon on 127.0.0.1
 * (fresh PSK). Checked against the single-process reference (the ring's
 * exact values, random graphs with sum and mean, paged == in-memory), the
 * trace's node ids, the windows freed at each run's fence, every new
 * validation error, and a rank that fails on the remote node without
 * hanging its peers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gd_kit.h"
#include "halo_kit.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WAIT_S 10.0 /* every in-kernel wait */
#define CAP (4096 * sizeof(double))

static struct gd_daemon daemon_;

/* An edge kernel that only this process (and its forked nodes) has. */
static void unit_edge(int64_t dst, int64_t src, strata_dtype dtype,
                      size_t features, const void *in_row, void *acc_row)
{
    (void)dst;
    (void)src;
    for (size_t f = 0; f < features; f++) {
        if (dtype == STRATA_F32)
            ((float *)acc_row)[f] += ((const float *)in_row)[f];
        else
            ((double *)acc_row)[f] += ((const double *)in_row)[f];
    }
}

static int setup(void **state)
{
    (void)state;
    /* Forked nodes inherit the table; the daemon never sees it. */
    if (strata_halo_register_edge("hg.local_only", unit_edge, unit_edge) !=
        STRATA_OK)
        return -1;
    return gd_daemon_start(&daemon_, NULL, NULL);
}

static int teardown(void **state)
{
    (void)state;
    return gd_daemon_stop(&daemon_);
}

/* ---- an L4 with fields and one handle --------------------------------- */

struct genv {
    testutil_snapshot before;
    strata_worker *w;
    strata_buffer *x, *out, *grad_out, *grad_x;
};

/* forked forked nodes and nremote (0 or 1) remote nodes, chips each. */
static void genv_start(struct genv *e, size_t forked, size_t nremote,
                       size_t chips)
{
    const struct gd_daemon *ds[1] = {&daemon_};
    strata_buffer **b[4] = {&e->x, &e->out, &e->grad_out, &e->grad_x};

    memset(e, 0, sizeof(*e));
    testutil_snapshot_take(&e->before);
    gd_ok(gd_l4_start(forked, chips, ds, nremote, chips, &e->w));
    for (int i = 0; i < 4; i++)
        gd_ok(strata_worker_create_buffer(e->w, CAP, b[i]));
}

/* Destroys the worker and checks that nothing is left: no window mapped
 * anywhere below, no session in the daemon, no child, no segment. */
static void genv_stop(struct genv *e)
{
    assert_int_equal(gd_window_maps_below(), 0);
    gd_destroy(e->w, STRATA_OK);
    assert_true(gd_daemon_idle(&daemon_, 10.0));
    testutil_assert_clean_within(&e->before, 5.0);
}

static strata_halo *make(struct genv *e, const strata_csr_view *v,
                         const char *path, const strata_global_member *m,
                         size_t n, strata_dtype dt)
{
    strata_halo_spec spec;
    strata_halo *h = NULL;

    strata_halo_spec_init(&spec);
    spec.csr = v;
    spec.gfg_path = path;
    spec.members = m;
    spec.num_members = n;
    spec.dtype = dt;
    spec.timeout_s = WAIT_S;
    gd_ok(strata_halo_create(e->w, &spec, &h));
    return h;
}

/* What one run does: ops[i] false = forward, true = VJP. */
struct calls {
    struct genv *e;
    strata_halo *h;
    const bool *ops;
    size_t n;
};

static strata_err calls_orch(strata_orch *o, const strata_args *a, void *user)
{
    struct calls *c = user;
    strata_err err = STRATA_OK;

    (void)a;
    for (size_t i = 0; i < c->n && err == STRATA_OK; i++)
        err = c->ops[i] ? strata_halo_vjp(o, c->h, c->e->grad_out, c->e->grad_x)
                        : strata_halo_forward(o, c->h, c->e->x, c->e->out);
    return err;
}

static strata_err run_ops(struct genv *e, strata_halo *h, const bool *ops,
                          size_t n)
{
    struct calls c = {e, h, ops, n};

    return strata_worker_run(e->w, calls_orch, NULL, &c);
}

/* Forward then VJP, in one run. */
static strata_err run_both(struct genv *e, strata_halo *h)
{
    static const bool both[2] = {false, true};

    return run_ops(e, h, both, 2);
}

/* ---- values ------------------------------------------------------------ */

static void ring_inputs(struct genv *e, strata_dtype dt)
{
    for (int i = 0; i < 8; i++) {
        if (dt == STRATA_F32) {
            ((float *)strata_buffer_data(e->x))[i] = (float)i;
            ((float *)strata_buffer_data(e->grad_out))[i] = 1.0f;
        } else {
            ((double *)strata_buffer_data(e->x))[i] = i;
            ((double *)strata_buffer_data(e->grad_out))[i] = 1.0;
        }
    }
    memset(strata_buffer_data(e->out), 0, CAP);
    memset(strata_buffer_data(e->grad_x), 0, CAP);
}

/* The ring on 2 ranks (one on each node) and on 4 (two on each), F32 and
 * F64: exactly the single-node values, twice in one run and again in a
 * second run; the trace names each rank's node and chip. */
static void test_halo_global_ring_forked_and_remote_exact(void **state)
{
    static const double want[8] = {8, 3, 6, 9, 12, 15, 18, 13};
    static const strata_global_member m2[2] = {{0, 0}, {1, 0}};
    static const strata_global_member m4[4] = {{0, 0}, {0, 1}, {1, 0}, {1, 1}};
    static const bool twice[4] = {false, true, false, true};
    struct gh_graph g;
    strata_csr_view v;
    struct genv e;

    (void)state;
    gh_graph_ring(&g, 8);
    v = gh_view(&g);
    genv_start(&e, 1, 1, 2);
    for (int world = 2; world <= 4; world += 2) {
        for (int d = 0; d < 2; d++) {
            strata_dtype dt = d ? STRATA_F64 : STRATA_F32;
            strata_halo *h =
                make(&e, &v, NULL, world == 2 ? m2 : m4, (size_t)world, dt);
            strata_halo_rank_trace t;

            ring_inputs(&e, dt);
            gd_ok(run_ops(&e, h, twice, 4));
            /* The domains of the run are gone at its fence. */
            assert_int_equal(gd_window_maps_below(), 0);
            for (int i = 0; i < 8; i++) {
                assert_true(hk_get(e.out, dt, (size_t)i) == want[i]);
                assert_true(hk_get(e.grad_x, dt, (size_t)i) == 3.0);
            }
            ring_inputs(&e, dt);
            gd_ok(run_both(&e, h));
            for (int i = 0; i < 8; i++) {
                assert_true(hk_get(e.out, dt, (size_t)i) == want[i]);
                assert_true(hk_get(e.grad_x, dt, (size_t)i) == 3.0);
            }
            for (uint32_t r = 0; r < (uint32_t)world; r++) {
                const strata_global_member *m = world == 2 ? &m2[r] : &m4[r];

                gd_ok(strata_halo_last_trace(h, r, &t));
                assert_int_equal(t.rank, r);
                assert_int_equal(t.node, m->node_worker_id);
                assert_int_equal(t.chip, m->local_chip);
                assert_int_equal(t.ghosts, 2);
                assert_int_equal(t.owned_end - t.owned_begin, 8 / world);
                assert_true(t.compute_end_ns >= t.compute_start_ns);
            }
            gd_ok(strata_halo_destroy(h));
        }
    }
    genv_stop(&e);
    gh_graph_free(&g);
}

/* Interleaved ranks over three nodes (two forked, one remote), an uneven
 * partition, sum and mean, both schedules, 3 features: the reference
 * within rounding, rows handed over in one chunk or two at a time; a .gfg
 * store paged by the chips gives the same bytes, and the trace file names
 * the nodes. */
static void test_halo_global_random_matches_reference(void **state)
{
    static const strata_global_member m[5] = {
        {2, 0}, {0, 0}, {2, 1}, {1, 1}, {0, 1}};
    struct gh_graph g;
    strata_csr_view v;
    struct genv e;
    uint64_t st = 17;
    size_t bytes, n;
    double *in, *ref, *fwd, *bwd;
    char *tmp, *store, *text;

    (void)state;
    gh_graph_random(&g, 301, 7, &st);
    v = gh_view(&g);
    bytes = g.n * 3 * sizeof(double);
    in = malloc(bytes);
    ref = malloc(bytes);
    fwd = malloc(bytes);
    bwd = malloc(bytes);
    assert_true(in && ref && fwd && bwd);
    tmp = gh_tmpdir();
    store = gh_join(tmp, "g.gfg");
    assert_int_equal(strata_gfg_save(store, &v, STRATA_I64), STRATA_OK);
    genv_start(&e, 2, 1, 2);
    for (int k = 0; k < 4; k++) {
        strata_halo_spec spec;
        strata_halo *h = NULL;
        strata_halo *paged = NULL;

        strata_halo_spec_init(&spec);
        spec.csr = &v;
        spec.members = m;
        spec.num_members = 5;
        spec.features = 3;
        spec.dtype = STRATA_F64;
        spec.reducer = k & 1 ? STRATA_HALO_MEAN : STRATA_HALO_SUM;
        spec.schedule = k & 2 ? STRATA_HALO_SERIALIZED : STRATA_HALO_OVERLAPPED;
        spec.timeout_s = WAIT_S;
        spec.trace_path = k == 0 ? gh_join(tmp, "trace.json") : NULL;
        spec.chunk_bytes = k & 1 ? 48 : 0; /* 2 rows a chunk, or 1 chunk */
        gd_ok(strata_halo_create(e.w, &spec, &h));
        free((char *)(uintptr_t)spec.trace_path);
        spec.trace_path = NULL;
        spec.csr = NULL;
        spec.gfg_path = store;
        gd_ok(strata_halo_create(e.w, &spec, &paged));
        hk_fill(e.x, STRATA_F64, g.n, 3, (uint64_t)k + 1);
        hk_fill(e.grad_out, STRATA_F64, g.n, 3, (uint64_t)k + 7);
        gd_ok(run_both(&e, h));
        memcpy(in, strata_buffer_data(e.x), bytes);
        hk_reference(&g, spec.reducer, NULL, false, in, 3, ref);
        hk_expect_close(e.out, STRATA_F64, ref, g.n * 3, "global forward");
        memcpy(in, strata_buffer_data(e.grad_out), bytes);
        hk_reference(&g, spec.reducer, NULL, true, in, 3, ref);
        hk_expect_close(e.grad_x, STRATA_F64, ref, g.n * 3, "global vjp");
        memcpy(fwd, strata_buffer_data(e.out), bytes);
        memcpy(bwd, strata_buffer_data(e.grad_x), bytes);
        memset(strata_buffer_data(e.out), 0, bytes);
        memset(strata_buffer_data(e.grad_x), 0, bytes);
        gd_ok(run_both(&e, paged));
        assert_memory_equal(fwd, strata_buffer_data(e.out), bytes);
        assert_memory_equal(bwd, strata_buffer_data(e.grad_x), bytes);
        gd_ok(strata_halo_destroy(h));
        gd_ok(strata_halo_destroy(paged));
    }
    text = gh_read_file(tmp, "trace.json", &n);
    assert_non_null(text);
    gd_assert_contains(text, "\"op\": \"vjp\"");
    gd_assert_contains(text, "\"world\": 5");
    gd_assert_contains(text, "{\"rank\": 0, \"node\": 2, \"chip\": 0,");
    gd_assert_contains(text, "{\"rank\": 3, \"node\": 1, \"chip\": 1,");
    free(text);
    genv_stop(&e);
    gh_rmtree(tmp);
    free(store);
    free(tmp);
    free(in);
    free(ref);
    free(fwd);
    free(bwd);
    gh_graph_free(&g);
}

/* An edge kernel the remote node's chips lack: their ranks fail, still
 * signal their peers, so the call ends at once with STRATA_ETASK naming
 * the kernel; the worker stays usable. */
static void test_halo_global_remote_rank_failure_fails_fast(void **state)
{
    static const strata_global_member m[4] = {{0, 0}, {0, 1}, {1, 0}, {1, 1}};
    struct gh_graph g;
    strata_csr_view v;
    strata_halo_spec spec;
    strata_halo *h = NULL;
    struct genv e;
    double t0;

    (void)state;
    gh_graph_ring(&g, 64);
    v = gh_view(&g);
    genv_start(&e, 1, 1, 2);
    strata_halo_spec_init(&spec);
    spec.csr = &v;
    spec.members = m;
    spec.num_members = 4;
    spec.reducer = STRATA_HALO_EDGE;
    spec.edge_kernel = "hg.local_only";
    spec.timeout_s = WAIT_S;
    gd_ok(strata_halo_create(e.w, &spec, &h));
    t0 = testutil_now();
    gd_expect(STRATA_ETASK, run_both(&e, h));
    gd_assert_contains(strata_errmsg(), "hg.local_only");
    assert_true(testutil_now() - t0 < WAIT_S);
    gd_ok(strata_halo_destroy(h));
    h = make(&e, &v, NULL, m, 4, STRATA_F32);
    hk_fill(e.x, STRATA_F32, g.n, 1, 3);
    gd_ok(run_both(&e, h));
    gd_ok(strata_halo_destroy(h));
    genv_stop(&e);
    gh_graph_free(&g);
}

/* ---- validation ---------------------------------------------------------- */

/* create fails with STRATA_EINVAL, *out untouched, and a message that
 * contains what. */
static void expect_einval(strata_worker *w, const strata_halo_spec *s,
                          const char *what)
{
    strata_halo *h = NULL;

    gd_expect(STRATA_EINVAL, strata_halo_create(w, s, &h));
    assert_null(h);
    gd_assert_contains(strata_errmsg(), what);
}

static struct {
    strata_halo *h;
    struct genv *e;
} other;

static strata_err other_orch(strata_orch *o, const strata_args *a, void *user)
{
    (void)a;
    (void)user;
    return strata_halo_forward(o, other.h, other.e->x, other.e->out);
}

/* The library's node callable, submitted by hand without a plan. */
static strata_err bare_node_orch(strata_orch *o, const strata_args *a,
                                 void *user)
{
    static const uint64_t sc[5] = {1, 0, 64, 1, 0};
    strata_callable node;

    (void)a;
    (void)user;
    gd_try(strata_callable_by_name(STRATA_CALLABLE_ORCH, "strata.halo.node",
                                   &node));
    return gd_node_task(o, 0, node, NULL, 0, 0, STRATA_IN, sc, 5);
}

static void test_halo_global_bad_specs_einval(void **state)
{
    static const int64_t rp[3] = {0, 1, 2};
    static const int64_t col[2] = {1, 0};
    static const int chips[2] = {0, 1};
    static const strata_global_member good[2] = {{0, 0}, {1, 1}};
    static const strata_global_member neg_node[2] = {{0, 0}, {-1, 0}};
    static const strata_global_member no_node[2] = {{0, 0}, {2, 0}};
    static const strata_global_member neg_chip[2] = {{0, 0}, {1, -3}};
    static const strata_global_member dup[3] = {{0, 1}, {1, 1}, {0, 1}};
    static const strata_global_member no_chip[2] = {{0, 0}, {1, 7}};
    static strata_global_member crowd[STRATA_HALO_NODE_MAX_MEMBERS + 1];
    const strata_csr_view v = {2, 2, rp, col};
    strata_worker_config cfg;
    strata_worker *l3 = NULL;
    strata_halo_spec base, s;
    strata_halo *h = NULL;
    struct genv e;

    (void)state;
    genv_start(&e, 2, 0, 2);
    strata_halo_spec_init(&base);
    base.csr = &v;
    base.members = good;
    base.num_members = 2;
    base.timeout_s = WAIT_S;
#define BAD(field, value, what)                                                \
    do {                                                                       \
        s = base;                                                              \
        s.field = value;                                                       \
        expect_einval(e.w, &s, what);                                          \
    } while (0)
    /* Both places to run, or a half-given one. */
    BAD(chips, chips, "exactly one of chips and members");
    BAD(num_chips, 2, "exactly one of chips and members");
    BAD(members, NULL, "no members");
    BAD(num_members, 0, "no members");
    BAD(members, neg_node, "members[1].node_worker_id -1");
    BAD(members, no_node, "members[1].node_worker_id 2 is not a node");
    BAD(members, neg_chip, "members[1].local_chip = -3");
    s = base;
    s.members = dup;
    s.num_members = 3;
    expect_einval(e.w, &s,
                  "members[0] and members[2] are both chip 1 of "
                  "node 0");
    for (int i = 0; i <= STRATA_HALO_NODE_MAX_MEMBERS; i++)
        crowd[i] = (strata_global_member){1, i};
    s = base;
    s.members = crowd;
    s.num_members = STRATA_HALO_NODE_MAX_MEMBERS + 1;
    expect_einval(e.w, &s, "node 1 has more than 85 members");
    /* The spec checks that do not depend on where ranks run still apply. */
    BAD(features, 0, "features is 0");
    BAD(schedule, STRATA_HALO_IN_PLACE, "STRATA_HALO_IN_PLACE needs a local");
#undef BAD
    /* A worker without nodes (level 3) has no members to give. */
    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = chips;
    cfg.num_chips = 2;
    gd_ok(strata_worker_create(&cfg, &l3));
    expect_einval(l3, &base, "members[0].node_worker_id 0 is not a node");
    /* A chip the node lacks: found by the domain allocation, at the call,
     * with nothing allocated. */
    s = base;
    s.members = no_chip;
    gd_ok(strata_halo_create(e.w, &s, &h));
    gd_expect(STRATA_EINVAL, run_both(&e, h));
    gd_assert_contains(strata_errmsg(), "node 1 has no chip 7");
    gd_ok(strata_halo_destroy(h));
    /* A global handle called from another worker's orch fn. */
    gd_ok(strata_halo_create(e.w, &base, &h));
    gd_ok(strata_worker_init(l3));
    other.h = h;
    other.e = &e;
    gd_expect(STRATA_EINVAL, strata_worker_run(l3, other_orch, NULL, NULL));
    gd_assert_contains(strata_errmsg(), "level-4 worker it was created on");
    gd_ok(strata_worker_destroy(l3));
    /* The shared call checks: NULLs, input == output. */
    {
        strata_buffer *saved = e.out;

        e.out = e.x;
        gd_expect(STRATA_EINVAL, run_both(&e, h));
        e.out = saved;
    }
    gd_expect(STRATA_EINVAL, strata_halo_forward(NULL, h, e.x, e.out));
    /* The node callable checks what it is given. */
    gd_expect(STRATA_ETASK, strata_worker_run(e.w, bare_node_orch, NULL, NULL));
    gd_assert_contains(strata_errmsg(), "not a halo plan");
    /* The handle still works after the refusals. */
    gd_ok(run_both(&e, h));
    gd_ok(strata_halo_destroy(h));
    genv_stop(&e);
}

int main(void)
{
#define T(f) cmocka_unit_test_teardown(f, gd_teardown)
    const struct CMUnitTest tests[] = {
        T(test_halo_global_ring_forked_and_remote_exact),
        T(test_halo_global_random_matches_reference),
        T(test_halo_global_remote_rank_failure_fails_fast),
        T(test_halo_global_bad_specs_einval),
    };
#undef T
    return cmocka_run_group_tests(tests, setup, teardown);
}
