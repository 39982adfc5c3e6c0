/*
 * Wide global domains across several nodes: 64 ranks on 4 forked nodes of
 * 16 chips, and on 3 forked nodes plus one remote node of 16 chips each,
 * and 128 ranks on 4 forked nodes of 32 chips (past the 64-rank cap of the
 * runtime strata replaces). Tiny windows; every rank maps every window
 * (ranks^2 mappings while the domain lives, none after), the allreduce
 * over all ranks is right, and a second domain on the same nodes works
 * too. And many domains: a node keeps at most 4096 live at once (a parent
 * that never releases is refused past that, with STRATA_EBUSY naming the
 * cap), and takes new ones again once some are released. A few seconds on
 * two cores.
 */
#define _GNU_SOURCE
#include "gd_kit.h"

#include <string.h>

#define NODES 4
#define COUNT 16
#define WINDOW 4096

struct big {
    struct gd_spec s;
    strata_global_domain *g;
    strata_buffer *out, *q;
    size_t maps_live;
    double alloc_s;
    uint32_t seed;
};

static strata_err big_orch(strata_orch *o, const strata_args *args, void *user)
{
    struct big *b = user;
    uint64_t id;
    double t0 = testutil_now();

    (void)args;
    gd_try(strata_orch_allocate_global_domain(o, &b->s.spec, &b->g));
    b->alloc_s = testutil_now() - t0;
    id = strata_global_domain_id(b->g);
    gd_try(strata_orch_scope_begin(o));
    gd_try(gd_submit_query(o, &b->s, id, b->q));
    gd_try(gd_submit_allreduce(o, &b->s, id, b->out, COUNT, b->seed, 1));
    gd_try(strata_orch_scope_end(o));
    /* Members map at IMPORT, or before their first task. */
    b->maps_live = gd_domain_maps_below(id);
    return STRATA_OK;
}

static void scale_case(size_t chips, size_t nremote)
{
    const size_t ranks = NODES * chips;
    testutil_snapshot before;
    static struct big b;
    struct gd_daemon d;
    const struct gd_daemon *ds[1] = {&d};
    strata_worker *w = NULL;
    const struct gd_query *q;
    double t0;

    if (nremote)
        assert_int_equal(gd_daemon_start(&d, NULL, NULL), 0);
    testutil_snapshot_take(&before);
    memset(&b, 0, sizeof(b));
    gd_spec_init(&b.s, "wide", WINDOW);
    gd_spec_grid(&b.s, 0, NODES, chips);
    gd_spec_buf(&b.s, "vec", STRATA_U32, COUNT);
    t0 = testutil_now();
    gd_ok(gd_l4_start(NODES - nremote, chips, ds, nremote, chips, &w));
    print_message("%d nodes (%zu remote) x %zu chips started in %.3f s\n",
                  NODES, nremote, chips, testutil_now() - t0);
    gd_ok(strata_worker_create_buffer(w, ranks * COUNT * 4, &b.out));
    gd_ok(
        strata_worker_create_buffer(w, ranks * sizeof(struct gd_query), &b.q));
    for (b.seed = 1; b.seed <= 2; b.seed++) {
        t0 = testutil_now();
        gd_ok(strata_worker_run(w, big_orch, NULL, &b));
        print_message("run %u: allocation %.3f s, run %.3f s\n", b.seed,
                      b.alloc_s, testutil_now() - t0);
        assert_int_equal(b.maps_live, ranks * ranks);
        q = strata_buffer_data(b.q);
        for (uint32_t r = 0; r < ranks; r++) {
            assert_int_equal(q[r].get_err, STRATA_OK);
            assert_int_equal(q[r].rank, r);
            assert_int_equal(q[r].size, ranks);
        }
        assert_int_equal(gd_check_allreduce(b.out, ranks, COUNT, b.seed), 0);
        assert_true(strata_global_domain_freed(b.g));
        assert_int_equal(gd_window_maps_below(), 0);
    }
    gd_destroy(w, STRATA_OK);
    if (nremote) {
        assert_true(gd_daemon_idle(&d, 10.0));
        testutil_assert_clean_within(&before, 5.0);
        assert_int_equal(gd_daemon_stop(&d), 0);
    } else {
        testutil_assert_clean(&before);
    }
}

static void test_gd_scale_64_ranks_4_forked_nodes_ok(void **state)
{
    (void)state;
    scale_case(16, 0);
}

static void test_gd_scale_64_ranks_3_forked_1_remote_ok(void **state)
{
    (void)state;
    scale_case(16, 1);
}

static void test_gd_scale_128_ranks_4_forked_nodes_ok(void **state)
{
    (void)state;
    scale_case(32, 0);
}

#define CAP 4096 /* GNODE_MAX_DOMAINS */

struct many {
    strata_global_domain *g[CAP + 1];
    size_t n;
    strata_err last;
    char msg[STRATA_ERRMSG_MAX];
};

/* Retained domains of one member until one is refused (or CAP + 1). */
static strata_err many_orch(strata_orch *o, const strata_args *args, void *user)
{
    struct many *m = user;
    struct gd_spec s;

    (void)args;
    gd_spec_init(&s, "many", 64);
    gd_spec_member(&s, 0, 0);
    s.spec.retain_after_run = true;
    while (m->n <= CAP) {
        m->last = strata_orch_allocate_global_domain(o, &s.spec, &m->g[m->n]);
        if (m->last != STRATA_OK) {
            snprintf(m->msg, sizeof(m->msg), "%s", strata_errmsg());
            break;
        }
        m->n++;
    }
    return STRATA_OK;
}

static void test_gd_scale_live_domains_capped_ebusy(void **state)
{
    testutil_snapshot before;
    static struct many m;
    strata_worker *w = NULL;

    (void)state;
    testutil_snapshot_take(&before);
    memset(&m, 0, sizeof(m));
    gd_ok(gd_l4_start(1, 1, NULL, 0, 0, &w));
    gd_ok(strata_worker_run(w, many_orch, NULL, &m));
    print_message("%zu domains live, then %s: %s\n", m.n,
                  strata_errname(m.last), m.msg);
    assert_int_equal(m.n, CAP);
    assert_int_equal(m.last, STRATA_EBUSY);
    gd_assert_contains(m.msg, "already holds 4096 global domains");
    /* One released (past its run's fence: freed now), one more fits. */
    gd_ok(strata_global_domain_release(m.g[0]));
    assert_true(strata_global_domain_freed(m.g[0]));
    m.n--;
    m.g[0] = m.g[m.n];
    gd_ok(strata_worker_run(w, many_orch, NULL, &m));
    assert_int_equal(m.n, CAP);
    assert_int_equal(m.last, STRATA_EBUSY);
    for (size_t i = 0; i < m.n; i++)
        gd_ok(strata_global_domain_release(m.g[i]));
    assert_int_equal(gd_window_maps_below(), 0);
    gd_destroy(w, STRATA_OK);
    testutil_assert_clean(&before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        gd_test(test_gd_scale_64_ranks_4_forked_nodes_ok),
        gd_test(test_gd_scale_64_ranks_3_forked_1_remote_ok),
        gd_test(test_gd_scale_128_ranks_4_forked_nodes_ok),
        gd_test(test_gd_scale_live_domains_capped_ebusy),
    };

    return cmocka_run_group_tests(tests, gd_setup, NULL);
}
