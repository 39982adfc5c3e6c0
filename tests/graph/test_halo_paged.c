/* The paged halo map: the same map as in memory, reading only the rank's
 * rows of a .gfg store. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/fault.h"
#include "graph_helpers.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static testutil_snapshot snap;
static char *tmp;

static int setup(void **state)
{
    (void)state;
    testutil_snapshot_take(&snap);
    tmp = gh_tmpdir();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gh_rmtree(tmp);
    free(tmp);
    tmp = NULL;
    testutil_assert_clean(&snap);
    return 0;
}

static void
expect_same_list(strata_err (*get)(const strata_halo_map *, size_t, uint32_t *,
                                   const int64_t **, size_t *),
                 const strata_halo_map *a, const strata_halo_map *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t pa;
        uint32_t pb;
        const int64_t *ia;
        const int64_t *ib;
        size_t na;
        size_t nb;

        assert_int_equal(get(a, i, &pa, &ia, &na), STRATA_OK);
        assert_int_equal(get(b, i, &pb, &ib, &nb), STRATA_OK);
        assert_int_equal(pa, pb);
        assert_int_equal(na, nb);
        assert_memory_equal(ia, ib, na * sizeof(int64_t));
    }
}

static void expect_same_map(const strata_halo_map *a, const strata_halo_map *b)
{
    assert_int_equal(strata_halo_map_rank(a), strata_halo_map_rank(b));
    assert_int_equal(strata_halo_map_world(a), strata_halo_map_world(b));
    assert_int_equal(strata_halo_map_owned_begin(a),
                     strata_halo_map_owned_begin(b));
    assert_int_equal(strata_halo_map_owned_end(a),
                     strata_halo_map_owned_end(b));
    assert_int_equal(strata_halo_map_num_ghosts(a),
                     strata_halo_map_num_ghosts(b));
    if (strata_halo_map_num_ghosts(a))
        assert_memory_equal(strata_halo_map_ghost_ids(a),
                            strata_halo_map_ghost_ids(b),
                            strata_halo_map_num_ghosts(a) * sizeof(int64_t));
    assert_int_equal(strata_halo_map_num_receive_peers(a),
                     strata_halo_map_num_receive_peers(b));
    expect_same_list(strata_halo_map_receive_from, a, b,
                     strata_halo_map_num_receive_peers(a));
    assert_int_equal(strata_halo_map_num_send_peers(a),
                     strata_halo_map_num_send_peers(b));
    expect_same_list(strata_halo_map_send_to, a, b,
                     strata_halo_map_num_send_peers(a));
}

/* For every rank: paged (by handle and by path) == in memory, both with
 * the requests an exchange would deliver and without. */
static void compare_all_ranks(const struct gh_graph *g, const char *path,
                              uint32_t world)
{
    strata_csr_view v = gh_view(g);
    strata_halo_map **maps = calloc(world, sizeof(*maps));
    strata_id_list *req = calloc(world, sizeof(*req));
    strata_gfg *s;

    assert_non_null(maps);
    assert_non_null(req);
    assert_int_equal(strata_gfg_open(path, &s), STRATA_OK);
    assert_int_equal(strata_halo_maps_collective(&v, world, maps), STRATA_OK);
    for (uint32_t r = 0; r < world; r++) {
        strata_halo_map *mem = NULL;
        strata_halo_map *paged = NULL;

        memset(req, 0, world * sizeof(*req));
        for (size_t j = 0; j < strata_halo_map_num_send_peers(maps[r]); j++) {
            uint32_t q;
            const int64_t *ids;
            size_t n;

            assert_int_equal(strata_halo_map_send_to(maps[r], j, &q, &ids, &n),
                             STRATA_OK);
            req[q].ids = ids;
            req[q].count = n;
        }
        assert_int_equal(strata_halo_map_derive_gfg(s, world, r, req, &paged),
                         STRATA_OK);
        expect_same_map(paged, maps[r]);
        strata_halo_map_destroy(paged);
        assert_int_equal(
            strata_halo_map_derive_paged(path, world, r, NULL, &paged),
            STRATA_OK);
        assert_int_equal(strata_halo_map_derive(&v, world, r, NULL, &mem),
                         STRATA_OK);
        expect_same_map(paged, mem);
        strata_halo_map_destroy(paged);
        strata_halo_map_destroy(mem);
    }
    for (uint32_t r = 0; r < world; r++)
        strata_halo_map_destroy(maps[r]);
    strata_gfg_close(s);
    free(maps);
    free(req);
}

static void test_halo_paged_random_graphs_equal_in_memory(void **state)
{
    static const uint32_t worlds[] = {1, 2, 3, 4, 8};
    uint64_t seed = 0xC0FFEE;

    (void)state;
    for (int trial = 0; trial < 24; trial++) {
        struct gh_graph g;
        strata_csr_view v;
        char *path = gh_join(tmp, "g.gfg");

        gh_graph_random(&g, trial < 2 ? (uint64_t)trial : gh_rand(&seed) % 90,
                        1 + trial % 9, &seed);
        v = gh_view(&g);
        assert_int_equal(
            strata_gfg_save(path, &v, trial % 2 ? STRATA_I32 : STRATA_I64),
            STRATA_OK);
        for (size_t w = 0; w < sizeof(worlds) / sizeof(worlds[0]); w++)
            compare_all_ranks(&g, path, worlds[w]);
        gh_rmtree(path);
        free(path);
        gh_graph_free(&g);
    }
}

static void test_halo_paged_facts_example_exact(void **state)
{
    static const int64_t rp[] = {0, 3, 5, 7, 9, 11, 13};
    static const int64_t ci[] = {0, 2, 5, 1, 3, 2, 4, 0, 3, 1, 4, 2, 5};
    strata_csr_view v = {6, 6, rp, ci};
    strata_id_list req[3] = {
        {NULL, 0}, {(const int64_t[]){0}, 1}, {(const int64_t[]){1, 0}, 2}};
    char *path = gh_join(tmp, "ex.gfg");
    strata_halo_map *m;
    uint32_t p;
    const int64_t *ids;
    size_t n;

    (void)state;
    assert_int_equal(strata_gfg_save(path, &v, STRATA_I32), STRATA_OK);
    assert_int_equal(strata_halo_map_derive_paged(path, 3, 0, req, &m),
                     STRATA_OK);
    assert_int_equal(strata_halo_map_num_ghosts(m), 3);
    assert_memory_equal(strata_halo_map_ghost_ids(m),
                        ((const int64_t[]){2, 3, 5}), 3 * sizeof(int64_t));
    assert_int_equal(strata_halo_map_receive_from(m, 1, &p, &ids, &n),
                     STRATA_OK);
    assert_int_equal(p, 2);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 5);
    assert_int_equal(strata_halo_map_send_to(m, 1, &p, &ids, &n), STRATA_OK);
    assert_int_equal(p, 2);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 0);
    assert_int_equal(ids[1], 1);
    assert_int_equal(strata_halo_map_bytes_for(m, 4, 16), 192);
    strata_halo_map_destroy(m);
    free(path);
}

/* More rows than a row page and more edges than a column chunk per rank,
 * so the paged derive crosses page and chunk boundaries. */
static void test_halo_paged_large_graph_crosses_pages(void **state)
{
    const uint64_t n = 300000;
    const unsigned deg = 8;
    struct gh_graph g;
    strata_csr_view v;
    uint64_t seed = 5;
    char *path = gh_join(tmp, "large.gfg");

    (void)state;
    g.n = n;
    g.row_ptr = malloc((n + 1) * sizeof(int64_t));
    g.col_idx = malloc(n * deg * sizeof(int64_t));
    assert_non_null(g.row_ptr);
    assert_non_null(g.col_idx);
    for (uint64_t r = 0; r <= n; r++)
        g.row_ptr[r] = (int64_t)(r * deg);
    for (uint64_t e = 0; e < n * deg; e++)
        g.col_idx[e] =
            e % deg < 2 ? (int64_t)(e / deg) : (int64_t)(gh_rand(&seed) % n);
    v = gh_view(&g);
    assert_int_equal(strata_gfg_save(path, &v, STRATA_I32), STRATA_OK);
    compare_all_ranks(&g, path, 2);
    free(path);
    gh_graph_free(&g);
}

static void put_le64(char *p, int64_t v)
{
    for (int k = 0; k < 8; k++)
        p[k] = (char)((uint64_t)v >> (8 * k));
}

/* A rank reads only its own rows: damage in another rank's rows does not
 * reach it, while the rank that owns them reports it. */
static void test_halo_paged_reads_only_own_rows(void **state)
{
    struct gh_graph g;
    strata_csr_view v;
    char *path = gh_join(tmp, "ring.gfg");
    strata_halo_map *m = NULL;

    (void)state;
    gh_graph_ring(&g, 8);
    g.col_idx[3 * 6 + 1] = 8; /* row 6, owned by rank 1 of 2 */
    v = gh_view(&g);
    v.num_entities = 9; /* save accepts it as a rectangle... */
    assert_int_equal(strata_gfg_save(path, &v, STRATA_I32), STRATA_OK);
    /* ...but halo maps need a square relation. */
    assert_int_equal(strata_halo_map_derive_paged(path, 2, 0, NULL, &m),
                     STRATA_EINVAL);
    assert_non_null(strstr(strata_errmsg(), "num_rows == num_entities"));
    gh_rmtree(path);

    /* Write the damaged ring as a square store by hand: save a good one,
     * then overwrite one column in place. */
    g.col_idx[3 * 6 + 1] = 6;
    v = gh_view(&g);
    assert_int_equal(strata_gfg_save(path, &v, STRATA_I64), STRATA_OK);
    g.col_idx[3 * 6 + 1] = 99;
    {
        size_t len;
        char *bytes = gh_read_file(path, "col_idx.bin", &len);

        assert_non_null(bytes);
        put_le64(bytes + (3 * 6 + 1) * 8, g.col_idx[3 * 6 + 1]);
        gh_write_file(path, "col_idx.bin", bytes, len);
        free(bytes);
    }
    assert_int_equal(strata_halo_map_derive_paged(path, 2, 0, NULL, &m),
                     STRATA_OK);
    assert_int_equal(strata_halo_map_num_ghosts(m), 2);
    strata_halo_map_destroy(m);
    m = NULL;
    assert_int_equal(strata_halo_map_derive_paged(path, 2, 1, NULL, &m),
                     STRATA_EINVAL);
    assert_non_null(strstr(strata_errmsg(), "column out of range"));
    assert_null(m);
    /* The in-memory derive validates the whole graph, so rank 0 fails. */
    assert_int_equal(strata_halo_map_derive(&v, 2, 0, NULL, &m), STRATA_EINVAL);
    gh_rmtree(path);

    /* A non-monotonic row_ptr inside rank 1's rows. */
    g.col_idx[3 * 6 + 1] = 6;
    assert_int_equal(strata_gfg_save(path, &v, STRATA_I64), STRATA_OK);
    {
        size_t len;
        char *bytes = gh_read_file(path, "row_ptr.bin", &len);

        assert_non_null(bytes);
        put_le64(bytes + 6 * 8, 30);
        gh_write_file(path, "row_ptr.bin", bytes, len);
        free(bytes);
    }
    assert_int_equal(strata_halo_map_derive_paged(path, 2, 0, NULL, &m),
                     STRATA_OK);
    strata_halo_map_destroy(m);
    m = NULL;
    assert_int_equal(strata_halo_map_derive_paged(path, 2, 1, NULL, &m),
                     STRATA_EINVAL);
    assert_non_null(strstr(strata_errmsg(), "not monotonic"));
    assert_null(m);
    free(path);
    gh_graph_free(&g);
}

static void test_halo_paged_bad_arguments_einval(void **state)
{
    struct gh_graph g;
    strata_csr_view v;
    char *path = gh_join(tmp, "ring.gfg");
    char *missing = gh_join(tmp, "missing.gfg");
    strata_halo_map *m = NULL;
    strata_id_list req[2] = {{NULL, 0}, {(const int64_t[]){5}, 1}};
    strata_gfg *s;

    (void)state;
    gh_graph_ring(&g, 8);
    v = gh_view(&g);
    assert_int_equal(strata_gfg_save(path, &v, STRATA_I32), STRATA_OK);
    assert_int_equal(strata_halo_map_derive_paged(path, 0, 0, NULL, &m),
                     STRATA_EINVAL);
    assert_int_equal(strata_halo_map_derive_paged(path, 2, 2, NULL, &m),
                     STRATA_EINVAL);
    assert_int_equal(strata_halo_map_derive_paged(path, 2, 0, req, &m),
                     STRATA_EINVAL);
    assert_non_null(strstr(strata_errmsg(), "does not own"));
    assert_int_equal(strata_halo_map_derive_paged(missing, 2, 0, NULL, &m),
                     STRATA_ENOENT);
    assert_int_equal(strata_halo_map_derive_paged(path, 2, 0, NULL, NULL),
                     STRATA_EINVAL);
    assert_int_equal(strata_halo_map_derive_gfg(NULL, 2, 0, NULL, &m),
                     STRATA_EINVAL);
    assert_null(m);
    assert_int_equal(strata_gfg_open(path, &s), STRATA_OK);
    for (long n = 1;; n++) {
        strata_err err;

        base_alloc_fail_after(n);
        err = strata_halo_map_derive_gfg(s, 2, 1, NULL, &m);
        base_alloc_fail_after(0);
        if (err == STRATA_OK)
            break;
        assert_int_equal(err, STRATA_ENOMEM);
        assert_null(m);
    }
    strata_halo_map_destroy(m);
    strata_gfg_close(s);
    free(path);
    free(missing);
    gh_graph_free(&g);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_halo_paged_random_graphs_equal_in_memory),
        T(test_halo_paged_facts_example_exact),
        T(test_halo_paged_large_graph_crosses_pages),
        T(test_halo_paged_reads_only_own_rows),
        T(test_halo_paged_bad_arguments_einval),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
