/* Halo maps: the FACTS worked example, the 8-node ring, symmetry on random
 * irregular graphs, every validation error, allocation failures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/fault.h"
#include "graph_helpers.h"
#include "graph_int.h"

#include <stdlib.h>
#include <string.h>

/* The FACTS example: N = 6, W = 3. */
static const int64_t ex_row_ptr[] = {0, 3, 5, 7, 9, 11, 13};
static const int64_t ex_col_idx[] = {0, 2, 5, 1, 3, 2, 4, 0, 3, 1, 4, 2, 5};

static strata_csr_view example(void)
{
    strata_csr_view v = {6, 6, ex_row_ptr, ex_col_idx};

    return v;
}

static void expect_ids(const int64_t *got, size_t count, const int64_t *want,
                       size_t want_count)
{
    assert_int_equal(count, want_count);
    for (size_t i = 0; i < count; i++)
        assert_int_equal(got[i], want[i]);
}

static void expect_recv(const strata_halo_map *m, size_t i, uint32_t peer,
                        const int64_t *ids, size_t n)
{
    uint32_t p;
    const int64_t *got;
    size_t count;

    assert_int_equal(strata_halo_map_receive_from(m, i, &p, &got, &count),
                     STRATA_OK);
    assert_int_equal(p, peer);
    expect_ids(got, count, ids, n);
}

static void expect_send(const strata_halo_map *m, size_t i, uint32_t peer,
                        const int64_t *ids, size_t n)
{
    uint32_t p;
    const int64_t *got;
    size_t count;

    assert_int_equal(strata_halo_map_send_to(m, i, &p, &got, &count),
                     STRATA_OK);
    assert_int_equal(p, peer);
    expect_ids(got, count, ids, n);
}

#define IDS(...) ((const int64_t[]){__VA_ARGS__})
#define NIDS(...) (sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

static void test_halo_map_facts_example_exact(void **state)
{
    strata_csr_view v = example();
    strata_id_list req[3] = {{NULL, 0}, {IDS(0), 1}, {IDS(1, 0), 2}};
    strata_halo_map *m = NULL;

    (void)state;
    assert_int_equal(strata_halo_map_derive(&v, 3, 0, req, &m), STRATA_OK);
    assert_int_equal(strata_halo_map_rank(m), 0);
    assert_int_equal(strata_halo_map_world(m), 3);
    assert_int_equal(strata_halo_map_owned_begin(m), 0);
    assert_int_equal(strata_halo_map_owned_end(m), 2);
    expect_ids(strata_halo_map_ghost_ids(m), strata_halo_map_num_ghosts(m),
               IDS(2, 3, 5), 3);
    assert_int_equal(strata_halo_map_num_receive_peers(m), 2);
    expect_recv(m, 0, 1, IDS(2, 3), 2);
    expect_recv(m, 1, 2, IDS(5), 1);
    assert_int_equal(strata_halo_map_num_send_peers(m), 2);
    expect_send(m, 0, 1, IDS(0), 1);
    expect_send(m, 1, 2, IDS(0, 1), 2);
    assert_int_equal(strata_halo_map_bytes_for(m, 4, 16), 192);
    assert_int_equal(strata_halo_map_bytes_for(m, 8, 1), 24);
    assert_int_equal(strata_halo_map_bytes_for(m, SIZE_MAX, 2), SIZE_MAX);
    strata_halo_map_destroy(m);

    /* Without peer requests send_to is empty. */
    assert_int_equal(strata_halo_map_derive(&v, 3, 0, NULL, &m), STRATA_OK);
    assert_int_equal(strata_halo_map_num_ghosts(m), 3);
    assert_int_equal(strata_halo_map_num_send_peers(m), 0);
    strata_halo_map_destroy(m);
    strata_halo_map_destroy(NULL);
}

static void test_halo_map_facts_example_collective(void **state)
{
    strata_csr_view v = example();
    strata_halo_map *maps[3] = {NULL, NULL, NULL};

    (void)state;
    assert_int_equal(strata_halo_maps_collective(&v, 3, maps), STRATA_OK);
    /* Rank 0 as in FACTS, except that rank 2 needs only 1 from it. */
    expect_ids(strata_halo_map_ghost_ids(maps[0]),
               strata_halo_map_num_ghosts(maps[0]), IDS(2, 3, 5), 3);
    assert_int_equal(strata_halo_map_num_send_peers(maps[0]), 2);
    expect_send(maps[0], 0, 1, IDS(0), 1);
    expect_send(maps[0], 1, 2, IDS(1), 1);
    /* Rank 1 owns [2, 4): rows 2 (2, 4) and 3 (0, 3). */
    expect_ids(strata_halo_map_ghost_ids(maps[1]),
               strata_halo_map_num_ghosts(maps[1]), IDS(0, 4), 2);
    expect_recv(maps[1], 0, 0, IDS(0), 1);
    expect_recv(maps[1], 1, 2, IDS(4), 1);
    expect_send(maps[1], 0, 0, IDS(2, 3), 2);
    expect_send(maps[1], 1, 2, IDS(2), 1);
    /* Rank 2 owns [4, 6): rows 4 (1, 4) and 5 (2, 5). */
    expect_ids(strata_halo_map_ghost_ids(maps[2]),
               strata_halo_map_num_ghosts(maps[2]), IDS(1, 2), 2);
    expect_send(maps[2], 0, 0, IDS(5), 1);
    expect_send(maps[2], 1, 1, IDS(4), 1);
    for (int r = 0; r < 3; r++)
        strata_halo_map_destroy(maps[r]);
}

static void test_halo_map_ring_two_ranks_ghosts(void **state)
{
    struct gh_graph g;
    strata_csr_view v;
    strata_halo_map *maps[4];

    (void)state;
    gh_graph_ring(&g, 8);
    v = gh_view(&g);
    assert_int_equal(strata_halo_maps_collective(&v, 2, maps), STRATA_OK);
    expect_ids(strata_halo_map_ghost_ids(maps[0]),
               strata_halo_map_num_ghosts(maps[0]), IDS(4, 7), 2);
    expect_ids(strata_halo_map_ghost_ids(maps[1]),
               strata_halo_map_num_ghosts(maps[1]), IDS(0, 3), 2);
    expect_recv(maps[0], 0, 1, IDS(4, 7), 2);
    expect_send(maps[0], 0, 1, IDS(0, 3), 2);
    expect_send(maps[1], 0, 0, IDS(4, 7), 2);
    strata_halo_map_destroy(maps[0]);
    strata_halo_map_destroy(maps[1]);

    /* Four ranks: each needs its two neighbours' boundary rows. */
    assert_int_equal(strata_halo_maps_collective(&v, 4, maps), STRATA_OK);
    expect_ids(strata_halo_map_ghost_ids(maps[0]),
               strata_halo_map_num_ghosts(maps[0]), IDS(2, 7), 2);
    expect_recv(maps[0], 0, 1, IDS(2), 1);
    expect_recv(maps[0], 1, 3, IDS(7), 1);
    expect_ids(strata_halo_map_ghost_ids(maps[2]),
               strata_halo_map_num_ghosts(maps[2]), IDS(3, 6), 2);
    for (int r = 0; r < 4; r++)
        strata_halo_map_destroy(maps[r]);
    gh_graph_free(&g);
}

/* Checks one collective result against the brute-force reference and the
 * symmetry invariants, and that derive with the same requests agrees. */
static void check_collective(const struct gh_graph *g, uint32_t world,
                             strata_halo_map **maps)
{
    strata_csr_view v = gh_view(g);
    uint64_t next = 0;

    for (uint32_t r = 0; r < world; r++) {
        const strata_halo_map *m = maps[r];
        uint64_t b = strata_halo_map_owned_begin(m);
        uint64_t e = strata_halo_map_owned_end(m);
        size_t nref;
        int64_t *ref = gh_ref_ghosts(g, world, r, &nref);
        const int64_t *gh = strata_halo_map_ghost_ids(m);
        size_t ng = strata_halo_map_num_ghosts(m);
        size_t at = 0;
        strata_id_list *req = calloc(world, sizeof(*req));
        strata_halo_map *d = NULL;

        assert_non_null(req);
        assert_int_equal(b, next);
        next = e;
        expect_ids(gh, ng, ref, nref);
        for (size_t i = 0; i < ng; i++)
            assert_false((uint64_t)gh[i] >= b && (uint64_t)gh[i] < e);
        /* receive_from concatenates to the ghosts, owners ascending. */
        for (size_t i = 0; i < strata_halo_map_num_receive_peers(m); i++) {
            uint32_t p;
            uint32_t owner;
            const int64_t *ids;
            size_t n;

            assert_int_equal(strata_halo_map_receive_from(m, i, &p, &ids, &n),
                             STRATA_OK);
            assert_true(n > 0);
            assert_int_not_equal(p, r);
            assert_ptr_equal(ids, gh + at);
            for (size_t k = 0; k < n; k++) {
                assert_int_equal(strata_destination_owner((uint64_t)ids[k],
                                                          g->n, world, &owner),
                                 STRATA_OK);
                assert_int_equal(owner, p);
            }
            at += n;
            /* The owner sends exactly these ids to r. */
            for (size_t j = 0;; j++) {
                uint32_t q;
                const int64_t *sids;
                size_t sn;

                assert_int_equal(
                    strata_halo_map_send_to(maps[p], j, &q, &sids, &sn),
                    STRATA_OK);
                if (q != r)
                    continue;
                expect_ids(sids, sn, ids, n);
                break;
            }
        }
        assert_int_equal(at, ng);
        /* Every send entry is someone's receive entry; build the requests
         * r would get from an exchange. */
        for (size_t j = 0; j < strata_halo_map_num_send_peers(m); j++) {
            uint32_t q;
            const int64_t *ids;
            size_t n;

            assert_int_equal(strata_halo_map_send_to(m, j, &q, &ids, &n),
                             STRATA_OK);
            assert_true(n > 0);
            assert_int_not_equal(q, r);
            if (j > 0) {
                uint32_t prev;
                const int64_t *pi;
                size_t pn;

                assert_int_equal(
                    strata_halo_map_send_to(m, j - 1, &prev, &pi, &pn),
                    STRATA_OK);
                assert_true(prev < q);
            }
            for (size_t k = 0; k < n; k++)
                assert_true((uint64_t)ids[k] >= b && (uint64_t)ids[k] < e);
            req[q].ids = ids;
            req[q].count = n;
        }
        assert_int_equal(strata_halo_map_derive(&v, world, r, req, &d),
                         STRATA_OK);
        expect_ids(strata_halo_map_ghost_ids(d), strata_halo_map_num_ghosts(d),
                   gh, ng);
        assert_int_equal(strata_halo_map_num_send_peers(d),
                         strata_halo_map_num_send_peers(m));
        for (size_t j = 0; j < strata_halo_map_num_send_peers(m); j++) {
            uint32_t q;
            const int64_t *ids;
            size_t n;

            assert_int_equal(strata_halo_map_send_to(m, j, &q, &ids, &n),
                             STRATA_OK);
            expect_send(d, j, q, ids, n);
        }
        strata_halo_map_destroy(d);
        free(req);
        free(ref);
    }
    assert_int_equal(next, g->n);
}

static void test_halo_map_random_graphs_symmetric(void **state)
{
    uint64_t seed = 0x9E3779B97F4A7C15ULL;

    (void)state;
    for (int trial = 0; trial < 60; trial++) {
        uint64_t n = gh_rand(&seed) % 50;
        struct gh_graph g;
        strata_csr_view v;
        static const uint32_t worlds[] = {1, 2, 3, 4, 5, 8, 13, 64};

        if (trial < 3)
            n = (uint64_t)trial; /* 0, 1, 2 nodes */
        gh_graph_random(&g, n, 1 + trial % 7, &seed);
        v = gh_view(&g);
        for (size_t w = 0; w < sizeof(worlds) / sizeof(worlds[0]); w++) {
            strata_halo_map **maps = calloc(worlds[w], sizeof(*maps));

            assert_non_null(maps);
            assert_int_equal(strata_halo_maps_collective(&v, worlds[w], maps),
                             STRATA_OK);
            check_collective(&g, worlds[w], maps);
            for (uint32_t r = 0; r < worlds[w]; r++)
                strata_halo_map_destroy(maps[r]);
            free(maps);
        }
        gh_graph_free(&g);
    }
}

/* The ghost accumulator gives the same set whatever its chunk size, so
 * the sort-and-merge path matches a single sort. */
static void test_halo_map_ghost_chunks_merge_equal(void **state)
{
    uint64_t seed = 42;

    (void)state;
    for (int trial = 0; trial < 20; trial++) {
        struct gh_graph g;
        size_t nref;
        int64_t *ref;

        gh_graph_random(&g, 200, 9, &seed);
        ref = gh_ref_ghosts(&g, 3, 1, &nref);
        for (size_t cap = 1; cap <= 40; cap += 3) {
            struct graph_ghosts gs;
            uint64_t b;
            uint64_t e;
            int64_t first;
            int64_t last;

            assert_int_equal(strata_owned_range(200, 3, 1, &b, &e), STRATA_OK);
            first = g.row_ptr[b];
            last = g.row_ptr[e];
            graph_ghosts_init(&gs, b, e, cap);
            /* Feed in uneven pieces, as pages would. */
            for (int64_t at = first; at < last;) {
                size_t piece = 1 + (size_t)(gh_rand(&seed) % 17);

                if ((int64_t)piece > last - at)
                    piece = (size_t)(last - at);
                assert_int_equal(graph_ghosts_add(&gs, g.col_idx + at, piece),
                                 STRATA_OK);
                at += (int64_t)piece;
            }
            assert_int_equal(graph_ghosts_finish(&gs), STRATA_OK);
            expect_ids(gs.ids, gs.count, ref, nref);
            graph_ghosts_fini(&gs);
        }
        /* The bitmap gives the same set. */
        {
            struct graph_ghosts gs;
            uint64_t b, e;

            assert_int_equal(strata_owned_range(200, 3, 1, &b, &e), STRATA_OK);
            graph_ghosts_init(&gs, b, e, 0);
            graph_ghosts_use_bitmap(&gs, 200);
            assert_int_equal(
                graph_ghosts_add(&gs, g.col_idx + g.row_ptr[b],
                                 (size_t)(g.row_ptr[e] - g.row_ptr[b])),
                STRATA_OK);
            assert_int_equal(graph_ghosts_finish(&gs), STRATA_OK);
            expect_ids(gs.ids, gs.count, ref, nref);
            graph_ghosts_fini(&gs);
        }
        free(ref);
        gh_graph_free(&g);
    }
}

/* Ranks fed more entries than one chunk take the bitmap path inside
 * strata_halo_map_derive: the same ghosts as the brute force. */
static void test_halo_map_large_rank_bitmap(void **state)
{
    const uint64_t n = 150000;
    uint64_t seed = 77;
    struct gh_graph g;

    (void)state;
    g.n = n;
    g.row_ptr = malloc((n + 1) * sizeof(int64_t));
    g.col_idx = malloc(n * 16 * sizeof(int64_t));
    assert_non_null(g.row_ptr);
    assert_non_null(g.col_idx);
    for (uint64_t i = 0; i <= n; i++)
        g.row_ptr[i] = (int64_t)(i * 16);
    for (uint64_t k = 0; k < n * 16; k++)
        g.col_idx[k] = (int64_t)(gh_rand(&seed) % n);
    for (uint32_t r = 0; r < 2; r++) {
        strata_csr_view v = gh_view(&g);
        strata_halo_map *m = NULL;
        size_t nref;
        int64_t *ref = gh_ref_ghosts(&g, 2, r, &nref);

        assert_int_equal(strata_halo_map_derive(&v, 2, r, NULL, &m), STRATA_OK);
        expect_ids(strata_halo_map_ghost_ids(m), strata_halo_map_num_ghosts(m),
                   ref, nref);
        strata_halo_map_destroy(m);
        free(ref);
    }
    gh_graph_free(&g);
}

static void expect_einval(strata_err err, const char *reason)
{
    assert_int_equal(err, STRATA_EINVAL);
    if (!strstr(strata_errmsg(), reason))
        fail_msg("message \"%s\" lacks \"%s\"", strata_errmsg(), reason);
}

/* Runs derive on every rank and collective on csr; all must fail. */
static void expect_both_fail(const strata_csr_view *v, uint32_t world,
                             const char *reason)
{
    strata_halo_map *m = (strata_halo_map *)0x1;
    strata_halo_map *maps[4] = {NULL, NULL, NULL, NULL};

    for (uint32_t r = 0; r < world; r++) {
        expect_einval(strata_halo_map_derive(v, world, r, NULL, &m), reason);
        assert_ptr_equal(m, (strata_halo_map *)0x1);
    }
    expect_einval(strata_halo_maps_collective(v, world, maps), reason);
    for (int i = 0; i < 4; i++)
        assert_null(maps[i]);
}

static void test_halo_map_bad_csr_einval(void **state)
{
    int64_t rp[7];
    int64_t ci[13];
    strata_csr_view v = {6, 6, rp, ci};

    (void)state;
    memcpy(rp, ex_row_ptr, sizeof(rp));
    memcpy(ci, ex_col_idx, sizeof(ci));
    rp[0] = 1;
    expect_both_fail(&v, 3, "endpoints");
    rp[0] = -1;
    expect_both_fail(&v, 3, "endpoints");
    rp[0] = 0;
    rp[3] = 4; /* 5 > 4 < 9 */
    expect_both_fail(&v, 3, "not monotonic");
    rp[3] = 7;
    rp[6] = 12; /* the last offset falls below the one before */
    rp[5] = 13;
    expect_both_fail(&v, 3, "not monotonic");
    rp[5] = 11;
    rp[6] = 13;
    ci[12] = 6; /* column == N, in a row rank 0 does not own */
    expect_both_fail(&v, 3, "column out of range");
    ci[12] = -1;
    expect_both_fail(&v, 3, "column out of range");
    ci[12] = 5;
    v.col_idx = NULL;
    expect_both_fail(&v, 3, "col_idx is NULL");
    v.col_idx = ci;
    v.row_ptr = NULL;
    expect_both_fail(&v, 3, "row_ptr is NULL");
    v.row_ptr = rp;
    v.num_entities = 7;
    expect_both_fail(&v, 3, "num_rows == num_entities");
    v.num_entities = 6;
    v.num_rows = (uint64_t)1 << 63;
    v.num_entities = v.num_rows;
    expect_both_fail(&v, 1, "fit int64");
}

static void test_halo_map_bad_world_and_args_einval(void **state)
{
    strata_csr_view v = example();
    strata_halo_map *m = NULL;
    strata_halo_map *maps[3];

    (void)state;
    expect_einval(strata_halo_map_derive(&v, 0, 0, NULL, &m), "world > 0");
    expect_einval(strata_halo_map_derive(&v, 3, 3, NULL, &m), "rank < world");
    expect_einval(strata_halo_maps_collective(&v, 0, maps), "world > 0");
    expect_einval(strata_halo_map_derive(NULL, 3, 0, NULL, &m), "NULL");
    expect_einval(strata_halo_map_derive(&v, 3, 0, NULL, NULL), "NULL");
    expect_einval(strata_halo_maps_collective(NULL, 3, maps), "NULL");
    expect_einval(strata_halo_maps_collective(&v, 3, NULL), "NULL");
    assert_null(m);
}

static void test_halo_map_bad_peer_requests_einval(void **state)
{
    strata_csr_view v = example();
    strata_halo_map *m = NULL;
    strata_id_list req[3] = {{NULL, 0}, {IDS(0), 1}, {IDS(1, 0), 2}};

    (void)state;
    req[2].ids = IDS(1, 2); /* rank 0 owns [0, 2) */
    expect_einval(strata_halo_map_derive(&v, 3, 0, req, &m), "does not own");
    req[2].ids = IDS(-1, 0);
    expect_einval(strata_halo_map_derive(&v, 3, 0, req, &m), "does not own");
    req[2].ids = NULL;
    expect_einval(strata_halo_map_derive(&v, 3, 0, req, &m), "NULL array");
    req[2].ids = IDS(1, 0);
    req[0].ids = IDS(1);
    req[0].count = 1;
    expect_einval(strata_halo_map_derive(&v, 3, 0, req, &m), "from itself");
    /* Rank 1 owns [2, 4): rank 0's request for 0 is not its to serve. */
    req[0].ids = IDS(0);
    expect_einval(strata_halo_map_derive(&v, 3, 1, req, &m), "does not own");
    assert_null(m);
    /* Duplicates collapse and order does not matter. */
    req[0].ids = IDS(3, 2, 3, 3);
    req[0].count = 4;
    req[1].count = 0;
    req[2].ids = IDS(2, 2);
    assert_int_equal(strata_halo_map_derive(&v, 3, 1, req, &m), STRATA_OK);
    assert_int_equal(strata_halo_map_num_send_peers(m), 2);
    expect_send(m, 0, 0, IDS(2, 3), 2);
    expect_send(m, 1, 2, IDS(2), 1);
    strata_halo_map_destroy(m);
}

static void test_halo_map_accessor_bounds_einval(void **state)
{
    strata_csr_view v = example();
    strata_halo_map *m;
    uint32_t p;
    const int64_t *ids;
    size_t n;

    (void)state;
    assert_int_equal(strata_halo_map_derive(&v, 3, 0, NULL, &m), STRATA_OK);
    assert_int_equal(strata_halo_map_receive_from(m, 2, &p, &ids, &n),
                     STRATA_EINVAL);
    assert_int_equal(strata_halo_map_send_to(m, 0, &p, &ids, &n),
                     STRATA_EINVAL);
    assert_int_equal(strata_halo_map_receive_from(m, 0, NULL, &ids, &n),
                     STRATA_EINVAL);
    assert_int_equal(strata_halo_map_receive_from(NULL, 0, &p, &ids, &n),
                     STRATA_EINVAL);
    assert_int_equal(strata_halo_map_send_to(NULL, 0, &p, &ids, &n),
                     STRATA_EINVAL);
    assert_int_equal(strata_halo_map_num_ghosts(NULL), 0);
    assert_null(strata_halo_map_ghost_ids(NULL));
    assert_int_equal(strata_halo_map_bytes_for(NULL, 4, 4), 0);
    strata_halo_map_destroy(m);

    /* A rank with nothing remote has no ghosts and NULL ids. */
    assert_int_equal(strata_halo_map_derive(&v, 1, 0, NULL, &m), STRATA_OK);
    assert_int_equal(strata_halo_map_num_ghosts(m), 0);
    assert_null(strata_halo_map_ghost_ids(m));
    assert_int_equal(strata_halo_map_num_receive_peers(m), 0);
    assert_int_equal(strata_halo_map_bytes_for(m, 4, 16), 0);
    strata_halo_map_destroy(m);
}

/* Fails the n-th allocation for every n: each call returns STRATA_ENOMEM
 * and writes nothing until the calls succeed. */
static void test_halo_map_alloc_failures_enomem(void **state)
{
    struct gh_graph g;
    strata_csr_view v;
    uint64_t seed = 7;
    strata_id_list req[3] = {{IDS(20), 1}, {NULL, 0}, {IDS(21, 22), 2}};
    strata_err err;
    long n;

    (void)state;
    gh_graph_random(&g, 60, 6, &seed);
    v = gh_view(&g);
    for (n = 1;; n++) {
        strata_halo_map *maps[3] = {NULL, NULL, NULL};

        base_alloc_fail_after(n);
        err = strata_halo_maps_collective(&v, 3, maps);
        base_alloc_fail_after(0);
        if (err == STRATA_OK) {
            for (int r = 0; r < 3; r++)
                strata_halo_map_destroy(maps[r]);
            break;
        }
        assert_int_equal(err, STRATA_ENOMEM);
        for (int r = 0; r < 3; r++)
            assert_null(maps[r]);
    }
    assert_true(n > 3);
    for (n = 1;; n++) {
        strata_halo_map *m = NULL;

        base_alloc_fail_after(n);
        err = strata_halo_map_derive(&v, 3, 1, req, &m);
        base_alloc_fail_after(0);
        if (err == STRATA_OK) {
            strata_halo_map_destroy(m);
            break;
        }
        assert_int_equal(err, STRATA_ENOMEM);
        assert_null(m);
    }
    assert_true(n > 3);
    gh_graph_free(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_halo_map_facts_example_exact),
        cmocka_unit_test(test_halo_map_facts_example_collective),
        cmocka_unit_test(test_halo_map_ring_two_ranks_ghosts),
        cmocka_unit_test(test_halo_map_random_graphs_symmetric),
        cmocka_unit_test(test_halo_map_ghost_chunks_merge_equal),
        cmocka_unit_test(test_halo_map_large_rank_bitmap),
        cmocka_unit_test(test_halo_map_bad_csr_einval),
        cmocka_unit_test(test_halo_map_bad_world_and_args_einval),
        cmocka_unit_test(test_halo_map_bad_peer_requests_einval),
        cmocka_unit_test(test_halo_map_accessor_bounds_einval),
        cmocka_unit_test(test_halo_map_alloc_failures_enomem),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
