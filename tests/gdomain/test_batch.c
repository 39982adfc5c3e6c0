/*
 * The whole transaction at once (domain/global/gdomain_batch.c): once a
 * node has named a domain's windows as every node computes them, the L4
 * sends it PREPARE_EXPORT, IMPORT with the predicted table and COMMIT in
 * one command and waits once.
 *
 * - Which allocations take that path: a node's first domain does not, its
 *   later ones do, forked and remote (the L4's fault point gdomain.batch,
 *   armed in this process, fails the first allocation that gets there,
 *   before anything is sent, and leaves nothing behind).
 * - Domains made that way work: every member maps every window, an
 *   allreduce is exact, many in a row over a forked and a remote node.
 * - A remote node that does not grant WIRE_CAP_ORDERED_DOMAIN_CMDS (an
 *   older strata-node) always goes phase by phase.
 * - A node that names its windows otherwise this time (gnode.lazy armed
 *   in it: its members exchange descriptors, as when its reserved range
 *   is full) refuses the predicted IMPORT before any member maps; the L4
 *   aborts and makes the domain again phase by phase, every node
 *   exchanging, under the next id, which works, and no node ever sees the
 *   aborted id. The same for a node's first domain, where the mixed table
 *   shows it.
 *
 * Failures inside such a transaction are in test_faults.c (the warm
 * cases).
 */
#define _GNU_SOURCE
#include "gd_kit.h"

#include "base/fault.h"

#include <string.h>

#define COUNT 256
#define WINDOW 8192

static struct gd_daemon daemon_;
/* Its sessions do not grant ORDERED_DOMAIN_CMDS, as an older node. */
static struct gd_daemon unordered;
static strata_callable o_arm;

/* In the node process: s0 nth hit of gnode.lazy fails. */
static strata_err arm_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)o;
    (void)user;
    base_fault_arm("gnode.lazy", (long)strata_args_scalar(args, 0),
                   BASE_FAULT_FAIL);
    return STRATA_OK;
}

static int setup(void **state)
{
    if (gd_setup(state) != 0 ||
        strata_register_orch("gd.t.batch.arm", arm_orch, &o_arm) != STRATA_OK)
        return -1;
    if (gd_daemon_start(&daemon_, NULL, NULL) != 0)
        return -1;
    return gd_daemon_start(&unordered, NULL, "session.unordered:1");
}

static int teardown(void **state)
{
    int rc = gd_daemon_stop(&unordered);

    (void)state;
    return gd_daemon_stop(&daemon_) || rc ? -1 : 0;
}

struct use {
    struct gd_spec s;
    strata_global_domain *g;
    uint64_t id;
    strata_buffer *out, *q;
    size_t maps_live;
    uint32_t seed;
};

static strata_err use_orch(strata_orch *o, const strata_args *args, void *user)
{
    struct use *u = user;

    (void)args;
    gd_try(strata_orch_allocate_global_domain(o, &u->s.spec, &u->g));
    u->id = strata_global_domain_id(u->g);
    gd_try(strata_orch_scope_begin(o));
    gd_try(gd_submit_query(o, &u->s, u->id, u->q));
    gd_try(gd_submit_allreduce(o, &u->s, u->id, u->out, COUNT, u->seed, 1));
    gd_try(strata_orch_scope_end(o));
    u->maps_live = gd_domain_maps_below(u->id);
    return STRATA_OK;
}

static strata_err alloc_orch(strata_orch *o, const strata_args *args,
                             void *user)
{
    struct use *u = user;

    (void)args;
    return strata_orch_allocate_global_domain(o, &u->s.spec, &u->g);
}

/* Queries domain u->id on every member (no allocation). */
static strata_err query_orch(strata_orch *o, const strata_args *args,
                             void *user)
{
    struct use *u = user;

    (void)args;
    gd_try(strata_orch_scope_begin(o));
    gd_try(gd_submit_query(o, &u->s, u->id, u->q));
    return strata_orch_scope_end(o);
}

/* Every member answers for domain id as rank r of n, or (gone) not at
 * all. */
static void check_query(const struct use *u, uint64_t id, bool gone)
{
    const struct gd_query *r = strata_buffer_data(u->q);
    size_t n = u->s.spec.num_members;

    for (size_t rank = 0; rank < n; rank++) {
        const struct gd_query *x = &r[gd_slot_of(&u->s, rank)];

        if (gone ? x->get_err != STRATA_ENOENT
                 : x->get_err || x->ctx_err || x->rank != rank ||
                       x->size != n || !x->ctx_found)
            fail_msg("domain %llu, rank %zu: get %s ctx %s rank %u size %u",
                     (unsigned long long)id, rank,
                     strata_errname((strata_err)x->get_err),
                     strata_errname((strata_err)x->ctx_err), x->rank, x->size);
    }
}

/* One run: allocate, query, allreduce; all of it checked. */
static void use_once(strata_worker *w, struct use *u)
{
    size_t n = u->s.spec.num_members;

    u->seed++;
    gd_ok(strata_worker_run(w, use_orch, NULL, u));
    assert_int_equal(u->maps_live, n * n);
    check_query(u, u->id, false);
    assert_int_equal(gd_check_allreduce(u->out, n, COUNT, u->seed), 0);
    assert_true(strata_global_domain_freed(u->g));
    assert_int_equal(gd_window_maps_below(), 0);
    assert_int_equal(gd_shm_windows_below(NULL, 0), 0);
}

static void use_init(strata_worker *w, struct use *u, const char *name)
{
    size_t n;

    memset(u, 0, sizeof(*u));
    gd_spec_init(&u->s, name, WINDOW);
    gd_spec_grid(&u->s, 0, 2, 2);
    gd_spec_buf(&u->s, "vec", STRATA_U32, COUNT);
    gd_spec_buf(&u->s, "flag", STRATA_U32, 1);
    n = u->s.spec.num_members;
    gd_ok(strata_worker_create_buffer(w, n * COUNT * 4, &u->out));
    gd_ok(strata_worker_create_buffer(w, n * sizeof(struct gd_query), &u->q));
}

/* A forked and a remote node: the first domain phase by phase, the
 * second at once (the point proves it), then many more at once. */
static void test_gd_batch_warm_nodes_get_one_command_ok(void **state)
{
    testutil_snapshot before;
    const struct gd_daemon *ds[1] = {&daemon_};
    static struct use u;
    strata_worker *w = NULL;
    pid_t sessions[4];

    (void)state;
    testutil_snapshot_take(&before);
    gd_ok(gd_l4_start(1, 2, ds, 1, 2, &w));
    assert_int_equal(gd_daemon_sessions(&daemon_, sessions, 4), 1);
    use_init(w, &u, "warm");
    base_fault_arm("gdomain.batch", 1, BASE_FAULT_FAIL);
    use_once(w, &u); /* cold: the point is not reached */
    assert_int_equal(strata_worker_run(w, alloc_orch, NULL, &u), STRATA_EIO);
    gd_assert_contains(strata_errmsg(), "fault point gdomain.batch");
    assert_int_equal(gd_window_maps_below(), 0);
    assert_int_equal(gd_shm_windows_below(sessions, 1), 0);
    for (int i = 0; i < 20; i++)
        use_once(w, &u);
    assert_int_equal(gd_shm_windows(sessions, 1), 0);
    base_fault_disarm_all();
    gd_destroy(w, STRATA_OK);
    assert_true(gd_daemon_idle(&daemon_, 10.0));
    testutil_assert_clean_within(&before, 5.0);
}

static strata_err arm_node_orch(strata_orch *o, const strata_args *args,
                                void *user)
{
    uint64_t nth = 1;

    (void)args;
    (void)user;
    gd_try(strata_orch_scope_begin(o));
    gd_try(gd_node_task(o, 1, o_arm, NULL, 0, 0, STRATA_IN, &nth, 1));
    return strata_orch_scope_end(o);
}

/* Node 1 names its windows otherwise once: the domain is made again,
 * phase by phase, under the next id; then at once again. */
static void test_gd_batch_node_names_otherwise_made_again_ok(void **state)
{
    testutil_snapshot before;
    static struct use u;
    strata_worker *w = NULL;
    uint64_t last;

    (void)state;
    testutil_snapshot_take(&before);
    gd_ok(gd_l4_start(2, 2, NULL, 0, 0, &w));
    use_init(w, &u, "otherwise");
    use_once(w, &u);
    use_once(w, &u); /* at once */
    last = u.id;
    gd_ok(strata_worker_run(w, arm_node_orch, NULL, NULL));
    use_once(w, &u);
    /* The attempt at once took last + 1 and was aborted everywhere. */
    assert_int_equal(u.id, last + 2);
    u.id = last + 1;
    gd_ok(strata_worker_run(w, query_orch, NULL, &u));
    check_query(&u, last + 1, true);
    /* Made again with every node exchanging: the next domain goes phase
     * by phase (node 1 names lazily again), the one after at once. */
    use_once(w, &u);
    base_fault_arm("gdomain.batch", 1, BASE_FAULT_FAIL);
    assert_int_equal(strata_worker_run(w, alloc_orch, NULL, &u), STRATA_EIO);
    gd_assert_contains(strata_errmsg(), "fault point gdomain.batch");
    base_fault_disarm_all();
    use_once(w, &u);
    gd_destroy(w, STRATA_OK);
    testutil_assert_clean(&before);
}

static strata_err one_node_orch(strata_orch *o, const strata_args *args,
                                void *user)
{
    struct use *u = user;
    struct gd_spec one;

    (void)args;
    gd_spec_init(&one, "node0", 64);
    gd_spec_member(&one, 0, 0);
    gd_try(strata_orch_allocate_global_domain(o, &one.spec, &u->g));
    u->id = strata_global_domain_id(u->g);
    return strata_global_domain_release(u->g);
}

/* A node's first domain, phase by phase, while it names its windows
 * otherwise (its members exchange, as when its range is full) and the
 * other node's members map lazily: the table is mixed, so that attempt
 * is aborted and the domain made with every node exchanging, under the
 * next id; it works, and later domains are made as usual. */
static void test_gd_batch_mixed_nodes_all_exchange_ok(void **state)
{
    testutil_snapshot before;
    static struct use u;
    strata_worker *w = NULL;
    uint64_t first;

    (void)state;
    testutil_snapshot_take(&before);
    gd_ok(gd_l4_start(2, 2, NULL, 0, 0, &w));
    use_init(w, &u, "mixed");
    gd_ok(strata_worker_run(w, one_node_orch, NULL, &u));
    first = u.id;
    gd_ok(strata_worker_run(w, arm_node_orch, NULL, NULL));
    use_once(w, &u);
    assert_int_equal(u.id, first + 2);
    u.id = first + 1;
    gd_ok(strata_worker_run(w, query_orch, NULL, &u));
    check_query(&u, first + 1, true);
    for (int i = 0; i < 3; i++)
        use_once(w, &u);
    gd_destroy(w, STRATA_OK);
    testutil_assert_clean(&before);
}

/* A remote node that does not say it runs domain commands in order gets
 * every phase after the last one's replies, however warm it is: the
 * point on the way to the batch is never reached. */
static void test_gd_batch_unordered_node_phase_by_phase_ok(void **state)
{
    testutil_snapshot before;
    const struct gd_daemon *ds[1] = {&unordered};
    static struct use u;
    strata_worker *w = NULL;

    (void)state;
    testutil_snapshot_take(&before);
    gd_ok(gd_l4_start(1, 2, ds, 1, 2, &w));
    use_init(w, &u, "unordered");
    base_fault_arm("gdomain.batch", 1, BASE_FAULT_FAIL);
    for (int i = 0; i < 5; i++)
        use_once(w, &u);
    base_fault_disarm_all();
    gd_destroy(w, STRATA_OK);
    assert_true(gd_daemon_idle(&unordered, 10.0));
    testutil_assert_clean_within(&before, 5.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        gd_test(test_gd_batch_warm_nodes_get_one_command_ok),
        gd_test(test_gd_batch_node_names_otherwise_made_again_ok),
        gd_test(test_gd_batch_unordered_node_phase_by_phase_ok),
        gd_test(test_gd_batch_mixed_nodes_all_exchange_ok),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
