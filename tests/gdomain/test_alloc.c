/*
 * Allocating and using global domains: on two forked nodes, on a forked
 * and a remote node, with members in any rank order, several at once and
 * many in a row; what nodes see of a domain before and after COMMIT;
 * COMM_INIT, as far as it shows from outside the L4; valid attachment
 * matrices; and that the phases reach the nodes in parallel (an
 * allocation behind 300 ms of work on each of 4 nodes takes ~300 ms).
 *
 * What a domain looks like from outside: while it lives, every member
 * chip maps every member's window (n x n mappings below the test); once it
 * is freed, none. The node side is probed with gd.o.query (what
 * strata_orch_get_global_domain and strata_global_view_context answer on
 * a node) and used with kernels (gd.o.allreduce, gd.o.read).
 *
 * The chips' base communicator state is read inside a forked node with
 * orch/control.h (INTERNAL): the public API does not show it.
 */
#define _GNU_SOURCE
#include "gd_kit.h"

#include "orch/control.h"

#include <stdlib.h>
#include <string.h>

#define COUNT 256
#define WINDOW 8192

static struct gd_daemon daemon_;
static strata_callable o_comm_state;

/* t0 OUT u32[chips]: 1 where the node's chip has its base communicator. */
static strata_err comm_state_orch(strata_orch *o, const strata_args *args,
                                  void *user)
{
    struct orch_sched *s = orch_sched_of(o);
    uint32_t *out = strata_args_tensor_data(args, 0);
    size_t n = strata_args_tensor_nbytes(args, 0) / 4;

    (void)user;
    orch_lock(s);
    for (size_t i = 0; i < n && i < orch_num_chips(s); i++)
        out[i] = orch_comm_ready(s, (int)i);
    orch_unlock(s);
    return STRATA_OK;
}

static int setup(void **state)
{
    if (gd_setup(state) != 0)
        return -1;
    if (strata_register_orch("gd.t.comm_state", comm_state_orch,
                             &o_comm_state) != STRATA_OK)
        return -1;
    return gd_daemon_start(&daemon_, NULL, NULL);
}

static int teardown(void **state)
{
    (void)state;
    return gd_daemon_stop(&daemon_);
}

/* ---- one domain, used -------------------------------------------------- */

struct use {
    struct gd_spec s;
    strata_buffer *out, *q;
    uint64_t id;
    size_t maps_live;
    strata_global_domain *g;
};

static strata_err use_orch(strata_orch *o, const strata_args *args, void *user)
{
    struct use *u = user;

    (void)args;
    gd_try(strata_orch_allocate_global_domain(o, &u->s.spec, &u->g));
    u->id = strata_global_domain_id(u->g);
    gd_try(strata_orch_scope_begin(o));
    gd_try(gd_submit_query(o, &u->s, u->id, u->q));
    gd_try(gd_submit_allreduce(o, &u->s, u->id, u->out, COUNT, 11, 1));
    gd_try(strata_orch_scope_end(o));
    /* Every member has mapped every window (at IMPORT, or before its
     * first task), and nothing is unmapped before the fence. */
    u->maps_live = gd_domain_maps_below(u->id);
    return STRATA_OK;
}

/* Slot k of q answered for member rank (gd_slot_of). */
static void check_query(const struct gd_spec *s, strata_buffer *q,
                        size_t buffers)
{
    const struct gd_query *r = strata_buffer_data(q);
    size_t n = s->spec.num_members;

    for (size_t rank = 0; rank < n; rank++) {
        const struct gd_query *x = &r[gd_slot_of(s, rank)];

        if (x->get_err || x->ctx_err || x->rank != rank || x->size != n ||
            x->buffers != buffers || !x->ctx_found)
            fail_msg("rank %zu (node %d chip %d): get %s ctx %s rank %u "
                     "size %u buffers %u found %u",
                     rank, s->m[rank].node_worker_id, s->m[rank].local_chip,
                     strata_errname((strata_err)x->get_err),
                     strata_errname((strata_err)x->ctx_err), x->rank, x->size,
                     x->buffers, x->ctx_found);
    }
}

/* Allocates u->s on w, allreduces, checks, and sees it freed. */
static void use_once(strata_worker *w, struct use *u)
{
    size_t n = u->s.spec.num_members;

    gd_ok(strata_worker_create_buffer(w, n * COUNT * 4, &u->out));
    gd_ok(strata_worker_create_buffer(w, n * sizeof(struct gd_query), &u->q));
    gd_ok(strata_worker_run(w, use_orch, NULL, u));
    assert_int_equal(u->maps_live, n * n);
    check_query(&u->s, u->q, u->s.spec.num_buffers);
    assert_int_equal(gd_check_allreduce(u->out, n, COUNT, 11), 0);
    /* Not retained: freed at the fence of its run. */
    assert_true(strata_global_domain_released(u->g));
    assert_true(strata_global_domain_freed(u->g));
    assert_int_equal(gd_window_maps_below(), 0);
    assert_int_equal(gd_shm_windows_below(NULL, 0), 0);
}

static void spec_4(struct gd_spec *s)
{
    gd_spec_init(s, "four", WINDOW);
    gd_spec_grid(s, 0, 2, 2);
    gd_spec_buf(s, "vec", STRATA_U32, COUNT);
    gd_spec_buf(s, "flag", STRATA_U32, 1);
}

static void test_gd_alloc_two_forked_nodes_allreduce_ok(void **state)
{
    (void)state;
    testutil_snapshot before;
    static struct use u;
    strata_worker *w = NULL;

    testutil_snapshot_take(&before);
    memset(&u, 0, sizeof(u));
    spec_4(&u.s);
    gd_ok(gd_l4_start(2, 2, NULL, 0, 0, &w));
    use_once(w, &u);
    gd_destroy(w, STRATA_OK);
    testutil_assert_clean(&before);
}

static void test_gd_alloc_forked_and_remote_allreduce_ok(void **state)
{
    (void)state;
    testutil_snapshot before;
    static struct use u;
    const struct gd_daemon *ds[1] = {&daemon_};
    strata_worker *w = NULL;
    pid_t sessions[4];

    testutil_snapshot_take(&before);
    memset(&u, 0, sizeof(u));
    spec_4(&u.s); /* node 1 is the remote one */
    gd_ok(gd_l4_start(1, 2, ds, 1, 2, &w));
    assert_int_equal(gd_daemon_sessions(&daemon_, sessions, 4), 1);
    use_once(w, &u);
    /* The remote chips mapped and unmapped too (they are below us). */
    assert_int_equal(gd_shm_windows(sessions, 1), 0);
    gd_destroy(w, STRATA_OK);
    assert_true(gd_daemon_idle(&daemon_, 10.0));
    testutil_assert_clean_within(&before, 5.0);
}

/* Ranks in no node order: node 1 chip 1, node 0 chip 0, node 1 chip 0,
 * node 0 chip 1, and a remote node in the middle of the ranks. */
static void test_gd_alloc_interleaved_ranks_ok(void **state)
{
    (void)state;
    testutil_snapshot before;
    static struct use u;
    const struct gd_daemon *ds[1] = {&daemon_};
    strata_worker *w = NULL;

    testutil_snapshot_take(&before);
    memset(&u, 0, sizeof(u));
    gd_spec_init(&u.s, "mixed-order", WINDOW);
    gd_spec_member(&u.s, 1, 1);
    gd_spec_member(&u.s, 0, 0);
    gd_spec_member(&u.s, 2, 1); /* remote */
    gd_spec_member(&u.s, 1, 0);
    gd_spec_member(&u.s, 0, 1);
    gd_spec_member(&u.s, 2, 0); /* remote */
    gd_spec_buf(&u.s, "vec", STRATA_U32, COUNT);
    gd_ok(gd_l4_start(2, 2, ds, 1, 2, &w));
    use_once(w, &u);
    gd_destroy(w, STRATA_OK);
    assert_true(gd_daemon_idle(&daemon_, 10.0));
    testutil_assert_clean_within(&before, 5.0);
}

/* ---- several at once, many in a row ------------------------------------ */

#define LIVE 3

struct many {
    struct gd_spec s[LIVE];
    strata_global_domain *g[LIVE];
    strata_buffer *out[LIVE];
    size_t maps_live;
    int rounds;
};

static strata_err many_orch(strata_orch *o, const strata_args *args, void *user)
{
    struct many *m = user;
    uint64_t ids[LIVE];

    (void)args;
    for (int i = 0; i < LIVE; i++) {
        gd_try(strata_orch_allocate_global_domain(o, &m->s[i].spec, &m->g[i]));
        ids[i] = strata_global_domain_id(m->g[i]);
    }
    /* Three allreduces at once, one per domain, on shared chips: each
     * node's three groups queue on its chips, none waits on another. */
    gd_try(strata_orch_scope_begin(o));
    for (int i = 0; i < LIVE; i++)
        gd_try(gd_submit_allreduce(o, &m->s[i], ids[i], m->out[i], COUNT,
                                   (uint32_t)(20 + i + m->rounds), 1));
    gd_try(strata_orch_scope_end(o));
    m->maps_live = gd_window_maps_below();
    return STRATA_OK;
}

static void test_gd_alloc_three_live_domains_distinct_ok(void **state)
{
    (void)state;
    testutil_snapshot before;
    static struct many m;
    strata_worker *w = NULL;
    size_t expect_maps = 0;

    testutil_snapshot_take(&before);
    memset(&m, 0, sizeof(m));
    gd_ok(gd_l4_start(3, 2, NULL, 0, 0, &w));
    /* {0,1} x 2 chips, {1,2} x 2 chips, and chip 1 of each node. */
    gd_spec_init(&m.s[0], "a", WINDOW);
    gd_spec_grid(&m.s[0], 0, 2, 2);
    gd_spec_init(&m.s[1], "b", WINDOW);
    gd_spec_grid(&m.s[1], 1, 2, 2);
    gd_spec_init(&m.s[2], "c", WINDOW);
    for (int node = 0; node < 3; node++)
        gd_spec_member(&m.s[2], node, 1);
    for (int i = 0; i < LIVE; i++) {
        size_t n = m.s[i].spec.num_members;

        expect_maps += n * n;
        gd_ok(strata_worker_create_buffer(w, n * COUNT * 4, &m.out[i]));
    }
    for (m.rounds = 0; m.rounds < 5; m.rounds++) {
        gd_ok(strata_worker_run(w, many_orch, NULL, &m));
        assert_int_equal(m.maps_live, expect_maps);
        for (int i = 0; i < LIVE; i++) {
            size_t n = m.s[i].spec.num_members;

            assert_int_equal(gd_check_allreduce(m.out[i], n, COUNT,
                                                (uint32_t)(20 + i + m.rounds)),
                             0);
            assert_true(strata_global_domain_freed(m.g[i]));
            for (int k = 0; k < i; k++)
                assert_int_not_equal(strata_global_domain_id(m.g[i]),
                                     strata_global_domain_id(m.g[k]));
        }
        assert_int_equal(gd_window_maps_below(), 0);
    }
    gd_destroy(w, STRATA_OK);
    testutil_assert_clean(&before);
}

/* ---- visibility on the nodes ----------------------------------------- */

struct vis {
    struct gd_spec s;
    strata_buffer *q[6];
    uint64_t first_id;
    strata_global_domain *g;
};

static strata_err query_scoped(strata_orch *o, const struct gd_spec *s,
                               uint64_t id, strata_buffer *q)
{
    gd_try(strata_orch_scope_begin(o));
    gd_try(gd_submit_query(o, s, id, q));
    return strata_orch_scope_end(o);
}

/* Run 1: ids that were never allocated, then the domain's own id before
 * it exists (the queries have finished before the allocation starts),
 * then after COMMIT. */
static strata_err vis_orch1(strata_orch *o, const strata_args *args, void *user)
{
    struct vis *v = user;
    strata_global_domain *probe;
    struct gd_spec tiny;

    (void)args;
    /* Learn the current id: the next allocation gets a larger one. */
    gd_spec_init(&tiny, "probe", 64);
    gd_spec_member(&tiny, 0, 0);
    gd_try(strata_orch_allocate_global_domain(o, &tiny.spec, &probe));
    v->first_id = strata_global_domain_id(probe);
    gd_try(query_scoped(o, &v->s, 0, v->q[0]));
    gd_try(query_scoped(o, &v->s, UINT64_MAX, v->q[1]));
    gd_try(query_scoped(o, &v->s, v->first_id + 1, v->q[2]));
    gd_try(strata_orch_allocate_global_domain(o, &v->s.spec, &v->g));
    return query_scoped(o, &v->s, strata_global_domain_id(v->g), v->q[3]);
}

/* Run 2: the domain was freed at run 1's fence. */
static strata_err vis_orch2(strata_orch *o, const strata_args *args, void *user)
{
    struct vis *v = user;

    (void)args;
    return query_scoped(o, &v->s, strata_global_domain_id(v->g), v->q[4]);
}

static void assert_all_enoent(const struct gd_spec *s, strata_buffer *q,
                              const char *when)
{
    const struct gd_query *r = strata_buffer_data(q);

    for (size_t k = 0; k < s->spec.num_members; k++)
        if (r[k].get_err != STRATA_ENOENT)
            fail_msg("%s: slot %zu saw %s, want STRATA_ENOENT", when, k,
                     strata_errname((strata_err)r[k].get_err));
}

static void test_gd_alloc_view_only_after_commit_enoent(void **state)
{
    (void)state;
    testutil_snapshot before;
    static struct vis v;
    const struct gd_daemon *ds[1] = {&daemon_};
    strata_worker *w = NULL;

    testutil_snapshot_take(&before);
    memset(&v, 0, sizeof(v));
    spec_4(&v.s); /* node 1 is remote */
    gd_ok(gd_l4_start(1, 2, ds, 1, 2, &w));
    for (int i = 0; i < 6; i++)
        gd_ok(strata_worker_create_buffer(w, 4 * sizeof(struct gd_query),
                                          &v.q[i]));
    gd_ok(strata_worker_run(w, vis_orch1, NULL, &v));
    assert_true(strata_global_domain_id(v.g) > v.first_id);
    assert_all_enoent(&v.s, v.q[0], "domain id 0");
    assert_all_enoent(&v.s, v.q[1], "domain id UINT64_MAX");
    assert_all_enoent(&v.s, v.q[2], "the next id, before allocation");
    check_query(&v.s, v.q[3], 2);
    gd_ok(strata_worker_run(w, vis_orch2, NULL, &v));
    assert_all_enoent(&v.s, v.q[4], "after the fence that freed it");
    gd_destroy(w, STRATA_OK);
    assert_true(gd_daemon_idle(&daemon_, 10.0));
    testutil_assert_clean_within(&before, 5.0);
}

/* ---- COMM_INIT ---------------------------------------------------------- */

/* What shows of COMM_INIT outside the L4: a node's chips get their base
 * communicator with the first domain that has a member on that node (all
 * of its chips, members or not), and not before; nodes without members
 * are left alone. Whether the L4 sends COMM_INIT again later does not show
 * (a node answers a repeat without touching its chips), so the rest is
 * behaviour: every later allocation on the same nodes, and on a new mix,
 * works. */
struct ci {
    struct gd_spec s[4];
    strata_buffer *state[4]; /* per step: 3 nodes x 2 chips */
    strata_buffer *out;
    strata_global_domain *g[4];
};

static strata_err comm_state(strata_orch *o, strata_buffer *b)
{
    gd_try(strata_orch_scope_begin(o));
    for (int node = 0; node < 3; node++)
        gd_try(gd_node_task(o, node, o_comm_state, b, (size_t)node * 8, 8,
                            STRATA_OUT, NULL, 0));
    return strata_orch_scope_end(o);
}

static strata_err ci_orch(strata_orch *o, const strata_args *args, void *user)
{
    struct ci *c = user;

    (void)args;
    gd_try(comm_state(o, c->state[0]));
    for (int i = 0; i < 3; i++) {
        gd_try(strata_orch_allocate_global_domain(o, &c->s[i].spec, &c->g[i]));
        gd_try(comm_state(o, c->state[i + 1]));
        gd_try(strata_orch_scope_begin(o));
        gd_try(gd_submit_allreduce(o, &c->s[i],
                                   strata_global_domain_id(c->g[i]), c->out,
                                   COUNT, (uint32_t)(40 + i), 1));
        gd_try(strata_orch_scope_end(o));
        if (gd_check_allreduce(c->out, c->s[i].spec.num_members, COUNT,
                               (uint32_t)(40 + i)) != 0) {
            strata_errmsg_set("allreduce %d is wrong", i);
            return STRATA_EIO;
        }
    }
    return STRATA_OK;
}

static void expect_state(strata_buffer *b, const uint32_t want[6],
                         const char *when)
{
    const uint32_t *v = strata_buffer_data(b);

    for (int i = 0; i < 6; i++)
        if (v[i] != want[i])
            fail_msg("%s: node %d chip %d comm ready = %u, want %u", when,
                     i / 2, i % 2, v[i], want[i]);
}

static void test_gd_alloc_comm_init_per_member_node_ok(void **state)
{
    (void)state;
    testutil_snapshot before;
    static struct ci c;
    static const uint32_t none[6] = {0, 0, 0, 0, 0, 0};
    static const uint32_t node0[6] = {1, 1, 0, 0, 0, 0};
    static const uint32_t nodes01[6] = {1, 1, 1, 1, 0, 0};
    static const uint32_t all[6] = {1, 1, 1, 1, 1, 1};
    strata_worker *w = NULL;

    testutil_snapshot_take(&before);
    memset(&c, 0, sizeof(c));
    gd_ok(gd_l4_start(3, 2, NULL, 0, 0, &w));
    /* Chip 0 of node 0 only; then nodes 0 and 1; then nodes 1 and 2. */
    gd_spec_init(&c.s[0], "n0", WINDOW);
    gd_spec_member(&c.s[0], 0, 0);
    gd_spec_init(&c.s[1], "n01", WINDOW);
    gd_spec_grid(&c.s[1], 0, 2, 2);
    gd_spec_init(&c.s[2], "n12", WINDOW);
    gd_spec_grid(&c.s[2], 1, 2, 2);
    for (int i = 0; i < 4; i++)
        gd_ok(strata_worker_create_buffer(w, 6 * 4, &c.state[i]));
    gd_ok(strata_worker_create_buffer(w, 4 * COUNT * 4, &c.out));
    gd_ok(strata_worker_run(w, ci_orch, NULL, &c));
    expect_state(c.state[0], none, "before any domain");
    expect_state(c.state[1], node0, "after a domain on node 0 chip 0");
    expect_state(c.state[2], nodes01, "after a domain on nodes 0 and 1");
    expect_state(c.state[3], all, "after a domain on nodes 1 and 2");
    /* And once more in a later run, on the same topologies. */
    gd_ok(strata_worker_run(w, ci_orch, NULL, &c));
    expect_state(c.state[0], all, "second run");
    gd_destroy(w, STRATA_OK);
    testutil_assert_clean(&before);
}

/* ---- the phases fan out in parallel ------------------------------------ */

/* Long beside the allocation's own cost, which grows on a loaded machine
 * (0.5 s seen with busy loops beside it): serial and parallel stay apart. */
#define BUSY_MS 1000

struct par {
    struct gd_spec s;
    strata_global_domain *g;
    double alloc_s;
    size_t nodes;
};

/* Every node is busy for BUSY_MS (its chips sleep; a forked node serves
 * one frame at a time, and with the descriptor exchange a remote node's
 * chips take the domain command after their kernel); then the
 * allocation. Sent node by node, it would wait about
 * nodes x BUSY_MS; fanned out, about BUSY_MS. Sleeping takes no CPU, so
 * this holds on two cores. */
static strata_err par_orch(strata_orch *o, const strata_args *args, void *user)
{
    struct par *p = user;
    double t0;

    (void)args;
    for (size_t node = 0; node < p->nodes; node++) {
        uint64_t sc[4] = {BUSY_MS, 2, 0, 1};

        gd_try(gd_node_task(o, (int)node, gd_o_sleep, NULL, 0, 0, STRATA_IN, sc,
                            4));
    }
    t0 = testutil_now();
    gd_try(strata_orch_allocate_global_domain(o, &p->s.spec, &p->g));
    p->alloc_s = testutil_now() - t0;
    return STRATA_OK;
}

static void test_gd_alloc_phases_fan_out_in_parallel(void **state)
{
    (void)state;
    testutil_snapshot before;
    static struct par p;
    const struct gd_daemon *ds[1] = {&daemon_};
    strata_worker *w = NULL;

    testutil_snapshot_take(&before);
    memset(&p, 0, sizeof(p));
    p.nodes = 4; /* 3 forked, 1 remote */
    gd_spec_init(&p.s, "parallel", WINDOW);
    gd_spec_grid(&p.s, 0, p.nodes, 2);
    gd_ok(gd_l4_start(p.nodes - 1, 2, ds, 1, 2, &w));
    gd_ok(strata_worker_run(w, par_orch, NULL, &p));
    print_message("allocation behind %d ms of work on each of %zu nodes: "
                  "%.3f s\n",
                  BUSY_MS, p.nodes, p.alloc_s);
    if (p.alloc_s < 0.9 * BUSY_MS / 1000.0)
        fail_msg("the allocation did not wait for the busy nodes (%.3f s)",
                 p.alloc_s);
    if (p.alloc_s >= 2.5 * BUSY_MS / 1000.0)
        fail_msg("the allocation took %.3f s: the nodes were driven one "
                 "after another (%zu x %d ms = %.1f s), not in parallel",
                 p.alloc_s, p.nodes, BUSY_MS, p.nodes * BUSY_MS / 1000.0);
    assert_true(strata_global_domain_freed(p.g));
    gd_destroy(w, STRATA_OK);
    assert_true(gd_daemon_idle(&daemon_, 10.0));
    testutil_assert_clean_within(&before, 5.0);
}

/* ---- attachments that are valid ---------------------------------------- */

struct att {
    struct gd_spec s;
    strata_buffer *out;
    strata_global_domain *g;
};

static strata_err att_orch(strata_orch *o, const strata_args *args, void *user)
{
    struct att *a = user;

    (void)args;
    gd_try(strata_orch_allocate_global_domain(o, &a->s.spec, &a->g));
    return gd_submit_allreduce(o, &a->s, strata_global_domain_id(a->g), a->out,
                               COUNT, 5, 1);
}

/* Every adapter kind with a profile, both spaces and roles, on both
 * receiving nodes: carried with PREPARE_EXPORT and accepted; the domain
 * works as without them (the sim backend maps host windows whatever the
 * record says). */
static void test_gd_alloc_attachment_matrix_accepted_ok(void **state)
{
    (void)state;
    testutil_snapshot before;
    static struct att a;
    static const char *const profiles[6] = {"",         "sim-map", "peer",
                                            "delegate", "xfer",    "coll"};
    const struct gd_daemon *ds[1] = {&daemon_};
    strata_worker *w = NULL;

    testutil_snapshot_take(&before);
    memset(&a, 0, sizeof(a));
    gd_spec_init(&a.s, "attached", WINDOW);
    gd_spec_grid(&a.s, 0, 2, 2);
    for (uint32_t k = 0; k < 8; k++) {
        strata_attachment *x = &a.s.at[a.s.spec.num_attachments++];
        uint32_t adapter = k % 6;

        x->receiving_node = (int)(k / 4);
        x->member_rank = k % 4;
        x->address_space = k % 2 ? STRATA_SPACE_DEVICE : STRATA_SPACE_HOST;
        x->role = k % 3 ? STRATA_ROLE_CONSUMER : STRATA_ROLE_PROVIDER;
        x->adapter = adapter;
        x->adapter_profile = profiles[adapter];
    }
    gd_ok(gd_l4_start(1, 2, ds, 1, 2, &w));
    gd_ok(strata_worker_create_buffer(w, 4 * COUNT * 4, &a.out));
    gd_ok(strata_worker_run(w, att_orch, NULL, &a));
    assert_int_equal(gd_check_allreduce(a.out, 4, COUNT, 5), 0);
    assert_true(strata_global_domain_freed(a.g));
    gd_destroy(w, STRATA_OK);
    assert_true(gd_daemon_idle(&daemon_, 10.0));
    testutil_assert_clean_within(&before, 5.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        gd_test(test_gd_alloc_two_forked_nodes_allreduce_ok),
        gd_test(test_gd_alloc_forked_and_remote_allreduce_ok),
        gd_test(test_gd_alloc_interleaved_ranks_ok),
        gd_test(test_gd_alloc_three_live_domains_distinct_ok),
        gd_test(test_gd_alloc_view_only_after_commit_enoent),
        gd_test(test_gd_alloc_comm_init_per_member_node_ok),
        gd_test(test_gd_alloc_phases_fan_out_in_parallel),
        gd_test(test_gd_alloc_attachment_matrix_accepted_ok),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
