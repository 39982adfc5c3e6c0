/* Halo execution API: the 8-node ring exactly, paged == in-memory, the
 * trace file and records, per-edge kernels, spec and call validation, and
 * a rank that fails without hanging its peers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "halo_kit.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static testutil_snapshot snap;
static struct hk_env env;
static char *tmp;

/* Per-edge weight 1 + (dst + src) mod 3, linear in its input. */
static double edge_w(int64_t dst, int64_t src)
{
    return 1.0 + (double)((dst + src) % 3);
}

static void edge_apply(int64_t dst, int64_t src, strata_dtype dtype,
                       size_t features, const void *in_row, void *acc_row)
{
    double w = edge_w(dst, src);

    for (size_t f = 0; f < features; f++) {
        if (dtype == STRATA_F32)
            ((float *)acc_row)[f] += (float)w * ((const float *)in_row)[f];
        else
            ((double *)acc_row)[f] += w * ((const double *)in_row)[f];
    }
}

static int setup(void **state)
{
    (void)state;
    /* Chips fork at init and inherit the edge table. */
    assert_int_equal(
        strata_halo_register_edge("test.weighted", edge_apply, edge_apply),
        STRATA_OK);
    assert_int_equal(
        strata_halo_register_edge("test.forward_only", edge_apply, NULL),
        STRATA_OK);
    testutil_snapshot_take(&snap);
    tmp = gh_tmpdir();
    hk_env_start(&env, 4096 * sizeof(double));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    hk_env_stop(&env);
    gh_rmtree(tmp);
    free(tmp);
    testutil_assert_clean(&snap);
    return 0;
}

static const int chips[HK_CHIPS] = {0, 1, 2, 3, 4, 5, 6, 7};

/* A reducer and the edge kernel it runs (NULL: sum). */
struct red {
    strata_dtype dt;
    strata_halo_reducer reducer;
    const char *edge;
};

/* Every reducer in both dtypes. */
static const struct red reds[] = {
    {STRATA_F64, STRATA_HALO_SUM, NULL},
    {STRATA_F32, STRATA_HALO_SUM, NULL},
    {STRATA_F64, STRATA_HALO_MEAN, NULL},
    {STRATA_F32, STRATA_HALO_MEAN, NULL},
    {STRATA_F64, STRATA_HALO_EDGE, "test.weighted"},
    {STRATA_F32, STRATA_HALO_EDGE, "test.weighted"},
};

/* The schedule make_red gives its handles (tests that run in place too
 * set it and put it back). */
static strata_halo_schedule make_sched = STRATA_HALO_OVERLAPPED;

/* A handle with r, handing rows over in chunks of chunk bytes (0: the
 * default). */
static strata_halo *make_red(const strata_csr_view *v, const char *path,
                             size_t world, const struct red *r, size_t chunk)
{
    strata_halo_spec spec;
    strata_halo *h = NULL;

    strata_halo_spec_init(&spec);
    spec.csr = v;
    spec.gfg_path = path;
    spec.chips = chips;
    spec.num_chips = world;
    spec.dtype = r->dt;
    spec.reducer = r->reducer;
    spec.edge_kernel = r->edge;
    spec.chunk_bytes = chunk;
    spec.schedule = make_sched;
    assert_int_equal(strata_halo_create(env.w, &spec, &h), STRATA_OK);
    return h;
}

static strata_halo *make(const strata_csr_view *v, const char *path,
                         size_t world, strata_dtype dt)
{
    struct red r = {dt, STRATA_HALO_SUM, NULL};

    return make_red(v, path, world, &r, 0);
}

static void test_halo_ring_values_exact(void **state)
{
    static const double want2[8] = {8, 3, 6, 9, 12, 15, 18, 13};
    struct gh_graph g;
    strata_csr_view v;

    (void)state;
    gh_graph_ring(&g, 8);
    v = gh_view(&g);
    for (size_t world = 2; world <= 4; world += 2) {
        for (int d = 0; d < 2; d++) {
            strata_dtype dt = d ? STRATA_F64 : STRATA_F32;
            strata_halo *h = make(&v, NULL, world, dt);
            strata_halo_rank_trace t;

            for (int i = 0; i < 8; i++) {
                if (dt == STRATA_F32) {
                    ((float *)strata_buffer_data(env.x))[i] = (float)i;
                    ((float *)strata_buffer_data(env.grad_out))[i] = 1.0f;
                } else {
                    ((double *)strata_buffer_data(env.x))[i] = i;
                    ((double *)strata_buffer_data(env.grad_out))[i] = 1.0;
                }
            }
            assert_int_equal(hk_call(&env, h, false), STRATA_OK);
            assert_int_equal(hk_call(&env, h, true), STRATA_OK);
            for (int i = 0; i < 8; i++) {
                assert_true(hk_get(env.out, dt, (size_t)i) == want2[i]);
                assert_true(hk_get(env.grad_x, dt, (size_t)i) == 3.0);
            }
            assert_int_equal(strata_halo_last_trace(h, 0, &t), STRATA_OK);
            assert_int_equal(t.ghosts, 2);
            assert_int_equal(t.owned_end - t.owned_begin, 8 / world);
            assert_int_equal(strata_halo_destroy(h), STRATA_OK);
        }
    }
    gh_graph_free(&g);
}

/* A paged handle gives the in-memory one's bits, forward and VJP, for
 * every reducer and dtype. halo_api_streamed runs this with every paged
 * rank streaming in pages of 7 rows, so pages split the ranks' rows.
 * The in-memory handle hands its rows over in one chunk, the paged one a
 * row at a time: the chunks change when rows are computed, never how. */
static void test_halo_paged_equals_in_memory(void **state)
{
    static const size_t worlds[] = {1, 3, 8};
    struct gh_graph g;
    strata_csr_view v;
    uint64_t st = 5;
    char *store;

    (void)state;
    gh_graph_random(&g, 300, 7, &st);
    v = gh_view(&g);
    store = gh_join(tmp, "g.gfg");
    assert_int_equal(strata_gfg_save(store, &v, STRATA_I64), STRATA_OK);
    for (size_t k = 0; k < sizeof(reds) / sizeof(reds[0]); k++) {
        size_t bytes = g.n * strata_dtype_size(reds[k].dt);

        for (size_t i = 0; i < sizeof(worlds) / sizeof(worlds[0]); i++) {
            strata_halo *mem = make_red(&v, NULL, worlds[i], &reds[k], 0);
            strata_halo *paged = make_red(NULL, store, worlds[i], &reds[k], 1);
            char *fwd = malloc(bytes);
            char *bwd = malloc(bytes);

            assert_non_null(fwd);
            assert_non_null(bwd);
            hk_fill(env.x, reds[k].dt, g.n, 1, worlds[i]);
            hk_fill(env.grad_out, reds[k].dt, g.n, 1, worlds[i] + 1);
            assert_int_equal(hk_call(&env, mem, false), STRATA_OK);
            assert_int_equal(hk_call(&env, mem, true), STRATA_OK);
            memcpy(fwd, strata_buffer_data(env.out), bytes);
            memcpy(bwd, strata_buffer_data(env.grad_x), bytes);
            memset(strata_buffer_data(env.out), 0, bytes);
            memset(strata_buffer_data(env.grad_x), 0, bytes);
            assert_int_equal(hk_call(&env, paged, false), STRATA_OK);
            assert_int_equal(hk_call(&env, paged, true), STRATA_OK);
            assert_memory_equal(fwd, strata_buffer_data(env.out), bytes);
            assert_memory_equal(bwd, strata_buffer_data(env.grad_x), bytes);
            free(fwd);
            free(bwd);
            assert_int_equal(strata_halo_destroy(mem), STRATA_OK);
            assert_int_equal(strata_halo_destroy(paged), STRATA_OK);
        }
    }
    free(store);
    gh_graph_free(&g);
}

/* In place: the forward is the exchange's, bit for bit; the VJP is the
 * one-rank VJP's on every number of ranks (terms in row order); a store
 * gives the in-memory plan's bits; every reducer and dtype, ranks that
 * own nothing included (8 ranks, 5 rows). */
static void test_halo_in_place_matches_exchange(void **state)
{
    static const size_t worlds[] = {1, 2, 3, 8};
    static const uint64_t sizes[] = {300, 5};
    uint64_t st = 77;

    (void)state;
    for (size_t z = 0; z < 2; z++) {
        struct gh_graph g;
        strata_csr_view v;
        char *store;

        gh_graph_random(&g, sizes[z], 9, &st);
        v = gh_view(&g);
        store = gh_join(tmp, "inplace.gfg");
        assert_int_equal(strata_gfg_save(store, &v, STRATA_I64), STRATA_OK);
        for (size_t k = 0; k < sizeof(reds) / sizeof(reds[0]); k++) {
            size_t bytes = g.n * strata_dtype_size(reds[k].dt);
            char *fwd = malloc(bytes);
            char *bwd = malloc(bytes);
            strata_halo *one;

            assert_non_null(fwd);
            assert_non_null(bwd);
            hk_fill(env.x, reds[k].dt, g.n, 1, k + 3);
            hk_fill(env.grad_out, reds[k].dt, g.n, 1, k + 4);
            make_sched = STRATA_HALO_OVERLAPPED;
            one = make_red(&v, NULL, 1, &reds[k], 0);
            assert_int_equal(hk_call(&env, one, false), STRATA_OK);
            assert_int_equal(hk_call(&env, one, true), STRATA_OK);
            memcpy(fwd, strata_buffer_data(env.out), bytes);
            memcpy(bwd, strata_buffer_data(env.grad_x), bytes);
            assert_int_equal(strata_halo_destroy(one), STRATA_OK);
            make_sched = STRATA_HALO_IN_PLACE;
            for (size_t i = 0; i < sizeof(worlds) / sizeof(worlds[0]); i++)
                for (int paged = 0; paged < 2; paged++) {
                    strata_halo *h =
                        make_red(paged ? NULL : &v, paged ? store : NULL,
                                 worlds[i], &reds[k], 0);

                    /* Twice: the second call runs from the chips'
                     * cached indices. */
                    for (int call = 0; call < 2; call++) {
                        memset(strata_buffer_data(env.out), 0xff, bytes);
                        memset(strata_buffer_data(env.grad_x), 0xff, bytes);
                        assert_int_equal(hk_call(&env, h, false), STRATA_OK);
                        assert_int_equal(hk_call(&env, h, true), STRATA_OK);
                        assert_memory_equal(fwd, strata_buffer_data(env.out),
                                            bytes);
                        assert_memory_equal(bwd, strata_buffer_data(env.grad_x),
                                            bytes);
                    }
                    assert_int_equal(strata_halo_destroy(h), STRATA_OK);
                }
            make_sched = STRATA_HALO_OVERLAPPED;
            free(fwd);
            free(bwd);
        }
        gh_rmtree(store);
        free(store);
        gh_graph_free(&g);
    }
}

enum { CACHE_GRAPHS = 6 };

/* Handles of one cache test: graph k, exchange (0) or in place (1). */
struct cache_case {
    struct gh_graph g[CACHE_GRAPHS];
    strata_csr_view v[CACHE_GRAPHS];
    strata_halo *h[CACHE_GRAPHS][2];
    char *want[CACHE_GRAPHS][2][2]; /* graph, schedule, vjp */
};

/* Graph k's four calls (both schedules, forward and VJP): each gives the
 * bits its handle gave first, and in place the exchange's forward. */
static void cache_calls(struct cache_case *cc, int k)
{
    size_t bytes = cc->g[k].n * sizeof(float);

    for (int s = 0; s < 2; s++)
        for (int vjp = 0; vjp < 2; vjp++) {
            strata_buffer *out = vjp ? env.grad_x : env.out;

            hk_fill(env.x, STRATA_F32, cc->g[k].n, 1, (size_t)k + 1);
            hk_fill(env.grad_out, STRATA_F32, cc->g[k].n, 1, (size_t)k + 2);
            memset(strata_buffer_data(out), 0xff, bytes);
            assert_int_equal(hk_call(&env, cc->h[k][s], vjp != 0), STRATA_OK);
            if (!cc->want[k][s][vjp]) {
                cc->want[k][s][vjp] = malloc(bytes);
                assert_non_null(cc->want[k][s][vjp]);
                memcpy(cc->want[k][s][vjp], strata_buffer_data(out), bytes);
            }
            assert_memory_equal(cc->want[k][s][vjp], strata_buffer_data(out),
                                bytes);
            if (s == 1 && !vjp)
                assert_memory_equal(cc->want[k][0][0], strata_buffer_data(out),
                                    bytes);
        }
}

/* Many handles served by the same chips in turn: each chip's one cache
 * (the exchange kernels' arrays and the in-place forward's and VJP's
 * indices under one least-recently-used order, 8 entries) holds fewer
 * entries than the 18 keys per chip they need. Graph 0's calls come
 * between every other graph's, so its three entries stay recent and are
 * found again while the others evict each other around them; the others
 * are rebuilt after being evicted. Every call gives its handle's first
 * bits. */
static void test_halo_many_handles_share_the_chip_cache(void **state)
{
    struct cache_case *cc = calloc(1, sizeof(*cc));
    uint64_t st = 4242;

    (void)state;
    assert_non_null(cc);
    for (int k = 0; k < CACHE_GRAPHS; k++) {
        struct red r = {STRATA_F32, k % 2 ? STRATA_HALO_MEAN : STRATA_HALO_SUM,
                        NULL};

        gh_graph_random(&cc->g[k], 150 + 40 * (uint64_t)k, 5 + k, &st);
        cc->v[k] = gh_view(&cc->g[k]);
        for (int s = 0; s < 2; s++) {
            make_sched = s ? STRATA_HALO_IN_PLACE : STRATA_HALO_OVERLAPPED;
            cc->h[k][s] = make_red(&cc->v[k], NULL, 2, &r, 0);
        }
    }
    make_sched = STRATA_HALO_OVERLAPPED;
    for (int round = 0; round < 2; round++)
        for (int k = 1; k < CACHE_GRAPHS; k++) {
            cache_calls(cc, 0);
            cache_calls(cc, k);
        }
    for (int k = 0; k < CACHE_GRAPHS; k++) {
        for (int s = 0; s < 2; s++) {
            assert_int_equal(strata_halo_destroy(cc->h[k][s]), STRATA_OK);
            free(cc->want[k][s][0]);
            free(cc->want[k][s][1]);
        }
        gh_graph_free(&cc->g[k]);
    }
    free(cc);
}

static void check_trace(const char *text, const char *schedule)
{
    static const char *keys[] = {"\"schema\": \"strata.halo-trace.v1\"",
                                 "\"interior_rows\"",
                                 "\"boundary_rows\"",
                                 "\"exchange_start_ns\"",
                                 "\"exchange_end_ns\"",
                                 "\"compute_start_ns\"",
                                 "\"compute_end_ns\"",
                                 "\"measured_overlap_ns\"",
                                 "\"measured_overlap_ms\"",
                                 "\"ranks\"",
                                 "\"op\": \"forward\""};
    char sched[64];

    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (!strstr(text, keys[i]))
            fail_msg("trace lacks %s:\n%s", keys[i], text);
    snprintf(sched, sizeof(sched), "\"schedule\": \"%s\"", schedule);
    assert_non_null(strstr(text, sched));
}

static void test_halo_trace_written_with_schema(void **state)
{
    struct gh_graph g;
    strata_csr_view v;
    strata_halo_spec spec;
    uint64_t st = 11;
    char *path;

    (void)state;
    gh_graph_random(&g, 500, 6, &st);
    v = gh_view(&g);
    path = gh_join(tmp, "trace.json");
    for (int s = 0; s < 3; s++) {
        static const char *const names[] = {"overlapped", "serialized",
                                            "in_place"};
        strata_halo *h = NULL;
        strata_halo_rank_trace t;
        uint64_t rows = 0;
        size_t n;
        char *text;

        strata_halo_spec_init(&spec);
        spec.csr = &v;
        spec.chips = chips;
        spec.num_chips = 4;
        spec.schedule = (strata_halo_schedule)s;
        spec.trace_path = path;
        assert_int_equal(strata_halo_last_trace(NULL, 0, &t), STRATA_EINVAL);
        assert_int_equal(strata_halo_create(env.w, &spec, &h), STRATA_OK);
        assert_int_equal(strata_halo_last_trace(h, 0, &t), STRATA_ESTATE);
        hk_fill(env.x, STRATA_F32, g.n, 1, 1);
        assert_int_equal(hk_call(&env, h, false), STRATA_OK);
        text = gh_read_file(tmp, "trace.json", &n);
        assert_non_null(text);
        check_trace(text, names[s]);
        free(text);
        for (uint32_t r = 0; r < 4; r++) {
            assert_int_equal(strata_halo_last_trace(h, r, &t), STRATA_OK);
            assert_int_equal(t.interior_rows + t.boundary_rows,
                             t.owned_end - t.owned_begin);
            assert_true(t.exchange_end_ns >= t.exchange_start_ns);
            assert_true(t.compute_end_ns >= t.compute_start_ns);
            assert_true(t.exchange_start_ns > 0);
            assert_true(t.wait_end_ns >= t.exchange_end_ns);
            if (s) {
                assert_int_equal(t.overlap_ns, 0);
                assert_true(t.compute_start_ns >= t.wait_end_ns);
            }
            if (s == STRATA_HALO_IN_PLACE) {
                /* Nothing exchanged: the exchange is the call's start. */
                assert_int_equal(t.exchange_end_ns, t.exchange_start_ns);
                assert_int_equal(t.sent_rows, 0);
                assert_int_equal(t.pack_ns, 0);
            }
            rows += t.owned_end - t.owned_begin;
        }
        assert_int_equal(rows, g.n);
        assert_int_equal(strata_halo_last_trace(h, 4, &t), STRATA_EINVAL);
        assert_int_equal(strata_halo_destroy(h), STRATA_OK);
    }
    free(path);
    gh_graph_free(&g);
}

static void test_halo_edge_kernel_matches_reference(void **state)
{
    struct gh_graph g;
    strata_csr_view v;
    strata_halo_spec spec;
    strata_halo *h = NULL;
    uint64_t st = 21;
    double in[200 * 2];
    double ref[200 * 2];

    (void)state;
    gh_graph_random(&g, 200, 5, &st);
    v = gh_view(&g);
    strata_halo_spec_init(&spec);
    spec.csr = &v;
    spec.chips = chips;
    spec.num_chips = 3;
    spec.features = 2;
    spec.dtype = STRATA_F64;
    spec.reducer = STRATA_HALO_EDGE;
    spec.edge_kernel = "test.weighted";
    assert_int_equal(strata_halo_create(env.w, &spec, &h), STRATA_OK);
    hk_fill(env.x, STRATA_F64, g.n, 2, 8);
    hk_fill(env.grad_out, STRATA_F64, g.n, 2, 9);
    assert_int_equal(hk_call(&env, h, false), STRATA_OK);
    assert_int_equal(hk_call(&env, h, true), STRATA_OK);
    memcpy(in, strata_buffer_data(env.x), sizeof(in));
    hk_reference(&g, STRATA_HALO_EDGE, edge_w, false, in, 2, ref);
    hk_expect_close(env.out, STRATA_F64, ref, g.n * 2, "edge forward");
    memcpy(in, strata_buffer_data(env.grad_out), sizeof(in));
    hk_reference(&g, STRATA_HALO_EDGE, edge_w, true, in, 2, ref);
    hk_expect_close(env.grad_x, STRATA_F64, ref, g.n * 2, "edge vjp");
    assert_int_equal(strata_halo_destroy(h), STRATA_OK);

    /* Without a vjp function the VJP is refused up front. */
    spec.edge_kernel = "test.forward_only";
    assert_int_equal(strata_halo_create(env.w, &spec, &h), STRATA_OK);
    assert_int_equal(hk_call(&env, h, false), STRATA_OK);
    assert_int_equal(hk_call(&env, h, true), STRATA_ENOTSUP);
    assert_int_equal(strata_halo_destroy(h), STRATA_OK);
    assert_int_equal(
        strata_halo_register_edge("test.weighted", edge_apply, NULL),
        STRATA_EEXIST);
    assert_int_equal(strata_halo_register_edge("", edge_apply, NULL),
                     STRATA_EINVAL);
    assert_int_equal(strata_halo_register_edge("x", NULL, NULL), STRATA_EINVAL);
    gh_graph_free(&g);
}

static void expect_create(const strata_halo_spec *spec, strata_err want)
{
    strata_halo *h = NULL;

    assert_int_equal(strata_halo_create(env.w, spec, &h), want);
    assert_null(h);
}

static void test_halo_bad_specs_einval(void **state)
{
    static const int64_t rp[3] = {0, 1, 2};
    static const int64_t bad_col[2] = {0, 5};
    static const int64_t ok_col[2] = {1, 0};
    static const int dup[2] = {1, 1};
    const strata_csr_view good = {2, 2, rp, ok_col};
    const strata_csr_view out_of_range = {2, 2, rp, bad_col};
    const strata_csr_view rect = {2, 3, rp, ok_col};
    strata_halo_spec base;
    strata_halo_spec s;
    strata_halo *h = NULL;

    (void)state;
    strata_halo_spec_init(&base);
    base.csr = &good;
    base.chips = chips;
    base.num_chips = 2;
    assert_int_equal(strata_halo_create(NULL, &base, &h), STRATA_EINVAL);
    assert_int_equal(strata_halo_create(env.w, NULL, &h), STRATA_EINVAL);
    assert_int_equal(strata_halo_create(env.w, &base, NULL), STRATA_EINVAL);
#define BAD(field, value, err)                                                 \
    do {                                                                       \
        s = base;                                                              \
        s.field = value;                                                       \
        expect_create(&s, err);                                                \
    } while (0)
    BAD(csr, NULL, STRATA_EINVAL);                /* no graph */
    BAD(gfg_path, "/nonexistent", STRATA_EINVAL); /* two graphs */
    BAD(csr, &out_of_range, STRATA_EINVAL);
    /* Named as the user gave it, not by an internal call. */
    assert_non_null(strstr(strata_errmsg(), "halo spec: csr: "));
    assert_null(strstr(strata_errmsg(), "strata_halo_maps_collective"));
    BAD(csr, &rect, STRATA_EINVAL);
    assert_non_null(strstr(strata_errmsg(), "halo spec: csr: "));
    BAD(features, 0, STRATA_EINVAL);
    BAD(dtype, STRATA_I32, STRATA_EINVAL);
    BAD(reducer, (strata_halo_reducer)99, STRATA_EINVAL);
    BAD(schedule, (strata_halo_schedule)7, STRATA_EINVAL);
    BAD(num_chips, 0, STRATA_EINVAL);
    BAD(chips, NULL, STRATA_EINVAL);
    BAD(chips, dup, STRATA_EINVAL);
    BAD(reducer, STRATA_HALO_EDGE, STRATA_EINVAL); /* no edge kernel */
    s = base;
    s.reducer = STRATA_HALO_EDGE;
    s.edge_kernel = "test.unregistered";
    expect_create(&s, STRATA_EINVAL);
    s = base;
    s.csr = NULL;
    s.gfg_path = "/nonexistent/halo.gfg";
    expect_create(&s, STRATA_ENOENT);
#undef BAD
    /* Calls: same buffer twice, a buffer too small, NULLs. */
    assert_int_equal(strata_halo_create(env.w, &base, &h), STRATA_OK);
    {
        strata_buffer *saved = env.out;

        env.out = env.x;
        assert_int_equal(hk_call(&env, h, false), STRATA_EINVAL);
        env.out = saved;
    }
    assert_int_equal(strata_halo_forward(NULL, h, env.x, env.out),
                     STRATA_EINVAL);
    assert_int_equal(strata_halo_destroy(h), STRATA_OK);
    assert_int_equal(strata_halo_destroy(NULL), STRATA_OK);
}

static void test_halo_buffer_too_small_einval(void **state)
{
    struct gh_graph g;
    strata_csr_view v;
    strata_halo *h;

    (void)state;
    gh_graph_ring(&g, 4096 + 1); /* one row more than the buffers hold */
    v = gh_view(&g);
    h = make(&v, NULL, 2, STRATA_F64);
    assert_int_equal(hk_call(&env, h, false), STRATA_EINVAL);
    assert_int_equal(strata_halo_destroy(h), STRATA_OK);
    gh_graph_free(&g);
}

/* N = 0: every rank owns nothing; calls still run and trace. */
static void test_halo_empty_graph_ok(void **state)
{
    static const int64_t rp[1] = {0};
    const strata_csr_view v = {0, 0, rp, NULL};
    strata_halo_rank_trace t;
    strata_halo *h;

    (void)state;
    for (int s = 0; s < 2; s++) {
        make_sched = s ? STRATA_HALO_IN_PLACE : STRATA_HALO_OVERLAPPED;
        h = make(&v, NULL, 3, STRATA_F32);
        make_sched = STRATA_HALO_OVERLAPPED;
        assert_int_equal(hk_call(&env, h, false), STRATA_OK);
        assert_int_equal(hk_call(&env, h, true), STRATA_OK);
        assert_int_equal(strata_halo_last_trace(h, 2, &t), STRATA_OK);
        assert_int_equal(t.owned_end - t.owned_begin, 0);
        assert_int_equal(strata_halo_destroy(h), STRATA_OK);
    }
}

/* A chip id the worker lacks is found when the domain is allocated. */
static void test_halo_unknown_chip_einval(void **state)
{
    static const int bad[2] = {0, 42};
    struct gh_graph g;
    strata_csr_view v;
    strata_halo_spec spec;
    strata_halo *h = NULL;

    (void)state;
    gh_graph_ring(&g, 8);
    v = gh_view(&g);
    strata_halo_spec_init(&spec);
    spec.csr = &v;
    spec.chips = bad;
    spec.num_chips = 2;
    assert_int_equal(strata_halo_create(env.w, &spec, &h), STRATA_OK);
    assert_int_equal(hk_call(&env, h, false), STRATA_EINVAL);
    assert_int_equal(strata_halo_destroy(h), STRATA_OK);
    /* In place, the group's submission finds it. */
    spec.schedule = STRATA_HALO_IN_PLACE;
    assert_int_equal(strata_halo_create(env.w, &spec, &h), STRATA_OK);
    assert_int_equal(hk_call(&env, h, false), STRATA_EINVAL);
    assert_non_null(strstr(strata_errmsg(), "42"));
    assert_int_equal(strata_halo_destroy(h), STRATA_OK);
    gh_graph_free(&g);
}

/* The store disappears after the plan was made: every chip fails to page
 * its rows, signals its peers anyway, and the call fails fast with
 * STRATA_ETASK; the worker stays usable. */
/* The halo kernels are callables anyone can name: given arguments that
 * are no halo call, one fails the task with a message saying so (its
 * failure path read the plan before checking one was open) and the chip
 * runs the next task. */
static strata_err bad_halo_orch(strata_orch *o, const strata_args *unused,
                                void *user)
{
    strata_callable fwd;
    strata_args *a = NULL;
    size_t count = 4;
    strata_err err;

    (void)unused;
    (void)user;
    err = strata_callable_by_name(STRATA_CALLABLE_KERNEL, "strata.halo.forward",
                                  &fwd);
    if (!err)
        err = strata_args_create(&a);
    if (!err)
        err = strata_args_add_tensor(a, env.x, 0, STRATA_F32, 1, &count,
                                     STRATA_IN);
    if (!err)
        err = strata_orch_submit_next_level(o, fwd, a, 0);
    strata_args_destroy(a);
    return err;
}

static void test_halo_kernel_bad_args_fail_the_task(void **state)
{
    struct gh_graph g;
    strata_csr_view v;
    strata_halo *h;

    (void)state;
    assert_int_equal(strata_worker_run(env.w, bad_halo_orch, NULL, NULL),
                     STRATA_ETASK);
    assert_non_null(strstr(strata_errmsg(), "halo kernel: 1 tensors"));
    gh_graph_ring(&g, 8);
    v = gh_view(&g);
    h = make(&v, NULL, 2, STRATA_F32);
    hk_fill(env.x, STRATA_F32, g.n, 1, 3);
    assert_int_equal(hk_call(&env, h, false), STRATA_OK);
    assert_int_equal(strata_halo_destroy(h), STRATA_OK);
    gh_graph_free(&g);
}

/* A store rewritten after the handle was made fails the call, naming
 * why, on the whole-rank path (rows cached by an earlier call or not)
 * and, under halo_api_streamed, on the streamed one: first with the same
 * edge count and every column moved, then with only self loops. */
static void store_changed(strata_halo_schedule sched);

static void test_halo_store_changed_fails_the_call(void **state)
{
    (void)state;
    for (int s = 0; s < 2; s++)
        store_changed(s ? STRATA_HALO_IN_PLACE : STRATA_HALO_OVERLAPPED);
}

static void store_changed(strata_halo_schedule sched)
{
    struct gh_graph g, moved, self;
    strata_csr_view v, mv, sv;
    strata_halo *paged;
    char *store;

    gh_graph_ring(&g, 16);
    v = gh_view(&g);
    store = gh_join(tmp, "changed.gfg");
    assert_int_equal(strata_gfg_save(store, &v, STRATA_I64), STRATA_OK);
    make_sched = sched;
    paged = make(NULL, store, 2, STRATA_F32);
    make_sched = STRATA_HALO_OVERLAPPED;
    hk_fill(env.x, STRATA_F32, g.n, 1, 4);
    assert_int_equal(hk_call(&env, paged, false), STRATA_OK);
    moved.n = self.n = g.n;
    moved.row_ptr = calloc(g.n + 1, sizeof(int64_t));
    moved.col_idx = calloc((size_t)g.row_ptr[g.n], sizeof(int64_t));
    self.row_ptr = calloc(g.n + 1, sizeof(int64_t));
    self.col_idx = calloc(g.n, sizeof(int64_t));
    assert_true(moved.row_ptr && moved.col_idx && self.row_ptr && self.col_idx);
    memcpy(moved.row_ptr, g.row_ptr, (g.n + 1) * sizeof(int64_t));
    for (int64_t e = 0; e < g.row_ptr[g.n]; e++)
        moved.col_idx[e] = (g.col_idx[e] + 5) % (int64_t)g.n;
    for (uint64_t i = 0; i < g.n; i++) {
        self.row_ptr[i + 1] = (int64_t)i + 1;
        self.col_idx[i] = (int64_t)i;
    }
    mv = gh_view(&moved);
    sv = gh_view(&self);
    gh_rmtree(store);
    assert_int_equal(strata_gfg_save(store, &mv, STRATA_I64), STRATA_OK);
    assert_int_equal(hk_call(&env, paged, false), STRATA_ETASK);
    assert_non_null(strstr(strata_errmsg(), "the store changed"));
    gh_rmtree(store);
    assert_int_equal(strata_gfg_save(store, &sv, STRATA_I64), STRATA_OK);
    assert_int_equal(hk_call(&env, paged, true), STRATA_ETASK);
    assert_non_null(strstr(strata_errmsg(), "the store changed"));
    assert_int_equal(strata_halo_destroy(paged), STRATA_OK);
    gh_graph_free(&moved);
    gh_graph_free(&self);
    gh_graph_free(&g);
    gh_rmtree(store);
    free(store);
}

static void test_halo_rank_failure_fails_fast(void **state)
{
    struct gh_graph g;
    strata_csr_view v;
    strata_halo *paged;
    strata_halo *mem;
    char *store;
    double t0;

    (void)state;
    gh_graph_ring(&g, 64);
    v = gh_view(&g);
    store = gh_join(tmp, "gone.gfg");
    assert_int_equal(strata_gfg_save(store, &v, STRATA_I32), STRATA_OK);
    paged = make(NULL, store, 4, STRATA_F32);
    gh_rmtree(store);
    t0 = testutil_now();
    assert_int_equal(hk_call(&env, paged, false), STRATA_ETASK);
    assert_true(testutil_now() - t0 < 10.0);
    assert_int_equal(strata_halo_destroy(paged), STRATA_OK);
    mem = make(&v, NULL, 4, STRATA_F32);
    hk_fill(env.x, STRATA_F32, g.n, 1, 2);
    assert_int_equal(hk_call(&env, mem, false), STRATA_OK);
    assert_int_equal(strata_halo_destroy(mem), STRATA_OK);
    free(store);
    gh_graph_free(&g);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_halo_ring_values_exact),
        T(test_halo_paged_equals_in_memory),
        T(test_halo_in_place_matches_exchange),
        T(test_halo_many_handles_share_the_chip_cache),
        T(test_halo_trace_written_with_schema),
        T(test_halo_edge_kernel_matches_reference),
        T(test_halo_bad_specs_einval),
        T(test_halo_buffer_too_small_einval),
        T(test_halo_empty_graph_ok),
        T(test_halo_unknown_chip_einval),
        T(test_halo_rank_failure_fails_fast),
        T(test_halo_store_changed_fails_the_call),
        T(test_halo_kernel_bad_args_fail_the_task),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
