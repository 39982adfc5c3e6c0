/*
 * Wide global domains across several nodes: 64 ranks on 4 forked nodes of
 * 16 chips, and on 3 forked nodes plus one remote node of 16 chips each,
 * and 128 ranks on 4 forked nodes of 32 chips (past the 64-rank cap of the
 * runtime strata replaces). Tiny windows; every rank maps every window
 * (ranks^2 mappings while the domain lives, none after), the allreduce
 * over all ranks is right, and a second domain on the same nodes works
 * too. A few seconds on two cores.
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        gd_test(test_gd_scale_64_ranks_4_forked_nodes_ok),
        gd_test(test_gd_scale_64_ranks_3_forked_1_remote_ok),
        gd_test(test_gd_scale_128_ranks_4_forked_nodes_ok),
    };

    return cmocka_run_group_tests(tests, gd_setup, NULL);
}
