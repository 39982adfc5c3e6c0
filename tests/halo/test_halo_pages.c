/* strata_halo_forward_pages: the forward over fields held as pages gives
 * strata_halo_forward's bits, whatever the page sizes, chips, reducer,
 * dtype or graph source (CSR or store); under a ram budget with LRU spill
 * it spills and restores pages and still gives them; its argument checks
 * each name what was wrong. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "halo_kit.h"
#include "testutil.h"

#include <strata/tier.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define N 1500
#define MAXP N
#define SF 64 /* features in the budget test */

static testutil_snapshot snap;
static struct hk_env env;

/* A linear edge: acc += (1 + (dst + src) % 3) * in. */
static void edge_fwd(int64_t dst, int64_t src, strata_dtype dtype,
                     size_t features, const void *in, void *acc)
{
    double w = (double)(1 + (dst + src) % 3);

    for (size_t f = 0; f < features; f++)
        if (dtype == STRATA_F32)
            ((float *)acc)[f] += (float)w * ((const float *)in)[f];
        else
            ((double *)acc)[f] += w * ((const double *)in)[f];
}

static int setup(void **state)
{
    (void)state;
    testutil_snapshot_take(&snap);
    assert_int_equal(strata_halo_register_edge("pages.test", edge_fwd, NULL),
                     STRATA_OK);
    hk_env_start(&env, (size_t)N * 8 * sizeof(double));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    hk_env_stop(&env);
    testutil_assert_clean(&snap);
    return 0;
}

/* A field as pages of page_rows rows, on worker w. */
struct field {
    strata_buffer *page[MAXP];
    strata_halo_pages p;
};

static void field_make(strata_worker *w, struct field *fl, uint64_t rows,
                       size_t row_bytes)
{
    memset(fl, 0, sizeof(*fl));
    fl->p.page_rows = rows;
    fl->p.num_pages = (N + rows - 1) / rows;
    fl->p.pages = fl->page;
    for (size_t k = 0; k < fl->p.num_pages; k++) {
        uint64_t n = N - k * rows < rows ? N - k * rows : rows;

        assert_int_equal(
            strata_worker_create_buffer(w, n * row_bytes, &fl->page[k]),
            STRATA_OK);
    }
}

static void field_free(struct field *fl)
{
    for (size_t k = 0; k < fl->p.num_pages; k++)
        assert_int_equal(strata_buffer_release(fl->page[k]), STRATA_OK);
}

/* Row i of the whole field at src copied into (to_pages) or out of fl. */
static void field_copy(struct field *fl, void *whole, size_t row_bytes,
                       bool to_pages)
{
    for (size_t k = 0; k < fl->p.num_pages; k++) {
        uint64_t b = k * fl->p.page_rows;
        uint64_t n = N - b < fl->p.page_rows ? N - b : fl->p.page_rows;
        char *pg = strata_buffer_data(fl->page[k]);
        char *wh = (char *)whole + b * row_bytes;

        assert_non_null(pg);
        if (to_pages)
            memcpy(pg, wh, n * row_bytes);
        else
            memcpy(wh, pg, n * row_bytes);
    }
}

struct pcall {
    strata_halo *h;
    struct field *x, *out;
    size_t prefetch;
    const strata_halo_pages *xp, *op; /* pages_raw_orch */
};

static strata_err pages_raw_orch(strata_orch *o, const strata_args *a,
                                 void *user)
{
    struct pcall *c = user;

    (void)a;
    return strata_halo_forward_pages(o, c->h, c->xp, c->op, c->prefetch);
}

static strata_err pages_orch(strata_orch *o, const strata_args *a, void *user)
{
    struct pcall *c = user;

    (void)a;
    return strata_halo_forward_pages(o, c->h, &c->x->p, &c->out->p,
                                     c->prefetch);
}

static strata_err pages_call(strata_worker *w, strata_halo *h, struct field *x,
                             struct field *out, size_t prefetch)
{
    struct pcall c = {h, x, out, prefetch, NULL, NULL};

    return strata_worker_run(w, pages_orch, NULL, &c);
}

static void expect_err(strata_worker *w, strata_halo *h, struct field *x,
                       struct field *out, strata_err want, const char *needle);

/* The paged forward against the whole-field one, for every case of a
 * handle made from spec (features and dtype from it). */
static void compare(const strata_halo_spec *spec, const char *label)
{
    static const uint64_t sizes[][2] = {
        {N, N}, {64, 64}, {256, 100}, {7, 1}, {500, 499}};
    size_t rb = spec->features * strata_dtype_size(spec->dtype);
    char *want = malloc((size_t)N * rb), *got = malloc((size_t)N * rb);
    strata_halo *h = NULL;

    assert_non_null(want);
    assert_non_null(got);
    assert_int_equal(strata_halo_create(env.w, spec, &h), STRATA_OK);
    hk_fill(env.x, spec->dtype, N, spec->features, 7);
    memset(strata_buffer_data(env.out), 0xee, env.cap);
    assert_int_equal(hk_call(&env, h, false), STRATA_OK);
    memcpy(want, strata_buffer_data(env.out), (size_t)N * rb);
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        struct field x, out;

        field_make(env.w, &x, sizes[s][0], rb);
        field_make(env.w, &out, sizes[s][1], rb);
        field_copy(&x, strata_buffer_data(env.x), rb, true);
        for (size_t pf = 0; pf < 3; pf++) {
            strata_err err = pages_call(env.w, h, &x, &out, pf);

            if (err)
                fail_msg("%s pages %llu/%llu prefetch %zu: %s: %s", label,
                         (unsigned long long)sizes[s][0],
                         (unsigned long long)sizes[s][1], pf,
                         strata_errname(err), strata_errmsg());
            field_copy(&out, got, rb, false);
            for (size_t i = 0; i < N; i++)
                if (memcmp(got + i * rb, want + i * rb, rb) != 0)
                    fail_msg("%s pages %llu/%llu prefetch %zu: row %zu "
                             "differs from strata_halo_forward's (first "
                             "word %08x, want %08x)",
                             label, (unsigned long long)sizes[s][0],
                             (unsigned long long)sizes[s][1], pf, i,
                             *(const unsigned *)(got + i * rb),
                             *(const unsigned *)(want + i * rb));
            memset(got, 0, (size_t)N * rb);
            for (size_t k = 0; k < out.p.num_pages; k++)
                memset(strata_buffer_data(out.page[k]), 0xee,
                       strata_buffer_size(out.page[k]));
        }
        field_free(&x);
        field_free(&out);
    }
    assert_int_equal(strata_halo_destroy(h), STRATA_OK);
    free(want);
    free(got);
}

static void spec_for(strata_halo_spec *spec, const strata_csr_view *v,
                     size_t world, strata_halo_reducer red, strata_dtype dt)
{
    static const int chips[4] = {2, 0, 3, 1};

    strata_halo_spec_init(spec);
    spec->csr = v;
    spec->chips = chips;
    spec->num_chips = world;
    spec->features = dt == STRATA_F32 ? 8 : 5;
    spec->dtype = dt;
    spec->reducer = red;
    if (red == STRATA_HALO_EDGE)
        spec->edge_kernel = "pages.test";
}

static void test_pages_match_whole_forward(void **state)
{
    static const strata_halo_reducer reds[3] = {
        STRATA_HALO_SUM, STRATA_HALO_MEAN, STRATA_HALO_EDGE};
    uint64_t seed = 99;
    struct gh_graph g;
    strata_csr_view v;
    char label[96];

    (void)state;
    gh_graph_random(&g, N, 24, &seed);
    v = gh_view(&g);
    for (size_t world = 1; world <= 4; world++)
        for (int r = 0; r < 3; r++)
            for (int d = 0; d < 2; d++) {
                strata_halo_spec spec;

                spec_for(&spec, &v, world, reds[r],
                         d ? STRATA_F64 : STRATA_F32);
                snprintf(label, sizeof(label), "world %zu reducer %d %s", world,
                         r, d ? "f64" : "f32");
                compare(&spec, label);
            }
    gh_graph_free(&g);
}

/* After a call with these page sizes (whose reads are then known), the
 * store is touched: the next call is refused up front, not by a task. */
static void store_changed(const strata_csr_view *v, const char *path)
{
    static const int chips[1] = {0};
    struct timespec ts[2] = {{0, UTIME_OMIT}, {12345, 0}};
    strata_halo_spec spec;
    strata_halo *h = NULL;
    struct field x, out;
    char *col = gh_join(path, "col_idx.bin");

    spec_for(&spec, v, 1, STRATA_HALO_SUM, STRATA_F32);
    spec.chips = chips;
    spec.csr = NULL;
    spec.gfg_path = path;
    assert_int_equal(strata_halo_create(env.w, &spec, &h), STRATA_OK);
    field_make(env.w, &x, 256, 8 * sizeof(float));
    field_make(env.w, &out, 256, 8 * sizeof(float));
    assert_int_equal(pages_call(env.w, h, &x, &out, 0), STRATA_OK);
    assert_int_equal(utimensat(AT_FDCWD, col, ts, 0), 0);
    expect_err(env.w, h, &x, &out, STRATA_EINVAL,
               "the store changed since the plan was made");
    field_free(&x);
    field_free(&out);
    assert_int_equal(strata_halo_destroy(h), STRATA_OK);
    free(col);
}

/* A plan made from a store: each task reads its rows from the store. */
static void test_pages_from_store(void **state)
{
    uint64_t seed = 5;
    struct gh_graph g;
    strata_csr_view v;
    char *dir = gh_tmpdir(), *path = gh_join(dir, "g.gfg");

    (void)state;
    gh_graph_random(&g, N, 30, &seed);
    v = gh_view(&g);
    assert_int_equal(strata_gfg_save(path, &v, STRATA_I32), STRATA_OK);
    for (size_t world = 1; world <= 3; world += 2) {
        strata_halo_spec spec;

        spec_for(&spec, &v, world, STRATA_HALO_MEAN, STRATA_F32);
        spec.csr = NULL;
        spec.gfg_path = path;
        compare(&spec, world == 1 ? "store, 1 chip" : "store, 3 chips");
    }
    store_changed(&v, path);
    gh_graph_free(&g);
    gh_rmtree(dir);
    free(path);
    free(dir);
}

static void expect_err(strata_worker *w, strata_halo *h, struct field *x,
                       struct field *out, strata_err want, const char *needle)
{
    strata_err err = pages_call(w, h, x, out, 0);

    if (err != want || !strstr(strata_errmsg(), needle))
        fail_msg("wanted %s with \"%s\", got %s: %s", strata_errname(want),
                 needle, strata_errname(err), strata_errmsg());
}

static void test_pages_bad_arguments(void **state)
{
    uint64_t seed = 3;
    struct gh_graph g;
    strata_csr_view v;
    strata_halo_spec spec;
    strata_halo *h = NULL;
    struct field x, out, one;
    strata_buffer *keep_x, *keep_out;
    size_t rb;

    (void)state;
    gh_graph_random(&g, N, 8, &seed);
    v = gh_view(&g);
    spec_for(&spec, &v, 2, STRATA_HALO_SUM, STRATA_F32);
    rb = spec.features * sizeof(float);
    assert_int_equal(strata_halo_create(env.w, &spec, &h), STRATA_OK);
    field_make(env.w, &x, 100, rb);
    field_make(env.w, &out, 100, rb);

    x.p.page_rows = 0;
    expect_err(env.w, h, &x, &out, STRATA_EINVAL, "x.page_rows is 0");
    x.p.page_rows = 100;
    out.p.num_pages--;
    expect_err(env.w, h, &x, &out, STRATA_EINVAL,
               "out has 14 pages; 1500 rows in pages of 100 rows need 15");
    out.p.num_pages++;
    keep_x = x.page[3];
    keep_out = out.page[3];
    x.page[3] = NULL;
    expect_err(env.w, h, &x, &out, STRATA_EINVAL, "x page 3 is NULL");
    x.page[3] = out.page[3];
    expect_err(env.w, h, &x, &out, STRATA_EINVAL,
               "x page 3 is also a page of out");
    x.page[3] = x.page[4];
    expect_err(env.w, h, &x, &out, STRATA_EINVAL,
               "one buffer holds two pages of x");
    x.page[3] = keep_x;
    out.page[3] = out.page[5];
    expect_err(env.w, h, &x, &out, STRATA_EINVAL,
               "one buffer holds two pages of out");
    out.page[3] = keep_out;
    /* A page too small for its rows. */
    assert_int_equal(strata_worker_create_buffer(env.w, 99 * rb, &one.page[0]),
                     STRATA_OK);
    {
        strata_buffer *keep = out.page[2];

        out.page[2] = one.page[0];
        expect_err(env.w, h, &x, &out, STRATA_EINVAL,
                   "out page 2 has 3168 bytes; its 100 rows need 3200");
        out.page[2] = keep;
    }
    assert_int_equal(strata_buffer_release(one.page[0]), STRATA_OK);
    field_free(&x);
    /* Pages of one row: a page of out of 1500 rows reads them all. */
    field_make(env.w, &x, 1, rb);
    {
        struct field whole;

        field_make(env.w, &whole, N, rb);
        expect_err(env.w, h, &x, &whole, STRATA_EINVAL,
                   "a task reads at most 254");
        field_free(&whole);
    }
    field_free(&x);
    field_free(&out);
    assert_int_equal(strata_halo_forward_pages(NULL, h, NULL, NULL, 0),
                     STRATA_EINVAL);
    /* From another worker's orch fn. */
    {
        static const int chip0[1] = {0};
        strata_worker_config cfg;
        strata_worker *w2 = NULL;

        strata_worker_config_init(&cfg, 3);
        cfg.chip_ids = chip0;
        cfg.num_chips = 1;
        assert_int_equal(strata_worker_create(&cfg, &w2), STRATA_OK);
        assert_int_equal(strata_worker_init(w2), STRATA_OK);
        field_make(env.w, &x, 100, rb);
        field_make(env.w, &out, 100, rb);
        expect_err(w2, h, &x, &out, STRATA_EINVAL, "another worker");
        field_free(&x);
        field_free(&out);
        assert_int_equal(strata_worker_destroy(w2), STRATA_OK);
    }
    assert_int_equal(strata_halo_destroy(h), STRATA_OK);
    gh_graph_free(&g);
}

/* A graph of no rows: no page, nothing to do; one page as large as
 * any row count can be. */
static void test_pages_edge_sizes(void **state)
{
    static const int64_t zero_rows[1] = {0};
    const strata_csr_view empty = {0, 0, zero_rows, NULL};
    uint64_t seed = 8;
    struct gh_graph g;
    strata_csr_view v;
    strata_halo_spec spec;
    strata_halo *h = NULL;
    strata_buffer *none[1] = {NULL};
    struct field x, out;
    strata_halo_pages nx = {none, 0, 10}, no = {none, 0, 10};
    struct pcall c = {NULL, NULL, NULL, 0, NULL, NULL};

    (void)state;
    spec_for(&spec, &empty, 2, STRATA_HALO_SUM, STRATA_F32);
    assert_int_equal(strata_halo_create(env.w, &spec, &h), STRATA_OK);
    c.h = h;
    c.xp = &nx;
    c.op = &no;
    assert_int_equal(strata_worker_run(env.w, pages_raw_orch, NULL, &c),
                     STRATA_OK);
    assert_int_equal(strata_halo_destroy(h), STRATA_OK);

    gh_graph_random(&g, N, 8, &seed);
    v = gh_view(&g);
    spec_for(&spec, &v, 2, STRATA_HALO_MEAN, STRATA_F32);
    assert_int_equal(strata_halo_create(env.w, &spec, &h), STRATA_OK);
    field_make(env.w, &x, N, 8 * sizeof(float));
    field_make(env.w, &out, N, 8 * sizeof(float));
    x.p.page_rows = UINT64_MAX;
    out.p.page_rows = UINT64_MAX - 3;
    assert_int_equal(pages_call(env.w, h, &x, &out, 0), STRATA_OK);
    field_free(&x);
    field_free(&out);
    assert_int_equal(strata_halo_destroy(h), STRATA_OK);
    gh_graph_free(&g);
}

/* A worker whose ram budget cannot hold x and out: the pages spill and
 * come back, the values are exact, and the peak stays within the
 * budget; a task that alone exceeds it is refused by name. */
static void test_pages_spill_under_budget(void **state)
{
    static const int chips[2] = {0, 1};
    char *dir = gh_tmpdir();
    strata_worker_config cfg;
    strata_worker *w = NULL;
    strata_halo_spec spec;
    strata_halo *h = NULL, *hr = NULL;
    struct gh_graph ring, rnd;
    strata_csr_view v, vr;
    struct field x, out;
    strata_tier_report rep;
    uint64_t seed = 17;
    size_t rb = SF * sizeof(float);
    double *xin = malloc((size_t)N * SF * sizeof(double));
    double *ref = malloc((size_t)N * SF * sizeof(double));

    (void)state;
    assert_non_null(xin);
    assert_non_null(ref);
    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = chips;
    cfg.num_chips = 2;
    /* The fields are 375 KiB each; a task of the ring names four pages
     * (100 KiB), the plans take about 150 KiB (spilled when idle). */
    cfg.budgets = "ram=256KiB";
    cfg.spill_dir = dir;
    cfg.eviction = STRATA_EVICT_LRU;
    assert_int_equal(strata_worker_create(&cfg, &w), STRATA_OK);
    gh_graph_ring(&ring, N);
    v = gh_view(&ring);
    gh_graph_random(&rnd, N, 16, &seed);
    vr = gh_view(&rnd);
    strata_halo_spec_init(&spec);
    spec.csr = &v;
    spec.chips = chips;
    spec.num_chips = 2;
    spec.features = SF;
    assert_int_equal(strata_halo_create(w, &spec, &h), STRATA_OK);
    /* One chip: no ghosts, so no exchange buffer to hold. */
    spec.csr = &vr;
    spec.num_chips = 1;
    assert_int_equal(strata_halo_create(w, &spec, &hr), STRATA_OK);
    assert_int_equal(strata_worker_init(w), STRATA_OK);
    field_make(w, &x, 100, rb);
    field_make(w, &out, 100, rb);
    for (size_t k = 0; k < x.p.num_pages; k++) {
        float *p = strata_buffer_data(x.page[k]);

        assert_non_null(p);
        for (size_t i = 0; i < 100 * SF; i++) {
            p[i] = (float)((k * 100 * SF + i) % 17);
            xin[k * 100 * SF + i] = p[i];
        }
    }
    hk_reference(&ring, STRATA_HALO_SUM, NULL, false, xin, SF, ref);
    for (size_t pf = 0; pf < 3; pf++) {
        assert_int_equal(pages_call(w, h, &x, &out, pf), STRATA_OK);
        for (size_t k = 0; k < out.p.num_pages; k++) {
            const float *p = strata_buffer_data(out.page[k]);

            assert_non_null(p);
            for (size_t i = 0; i < 100 * SF; i++)
                if ((double)p[i] != ref[k * 100 * SF + i])
                    fail_msg("prefetch %zu: out[%zu] = %g, reference %g", pf,
                             k * 100 * SF + i, (double)p[i],
                             ref[k * 100 * SF + i]);
        }
    }
    assert_int_equal(strata_worker_memory_report(w, &rep), STRATA_OK);
    assert_true(rep.spills > 0);
    assert_true(rep.restores > 0);
    assert_true(rep.tiers[STRATA_TIER_RAM].peak <= 256 * 1024);
    /* Every row of the random graph reads all over x: one task names
     * every page of x, more than the budget. */
    expect_err(w, hr, &x, &out, STRATA_EBUDGET, "over the ram budget");
    field_free(&x);
    field_free(&out);
    assert_int_equal(strata_halo_destroy(h), STRATA_OK);
    assert_int_equal(strata_halo_destroy(hr), STRATA_OK);
    assert_int_equal(strata_worker_destroy(w), STRATA_OK);
    assert_int_equal(gh_count_entries(dir), 0);
    gh_rmtree(dir);
    free(dir);
    free(xin);
    free(ref);
    gh_graph_free(&ring);
    gh_graph_free(&rnd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pages_match_whole_forward),
        cmocka_unit_test(test_pages_from_store),
        cmocka_unit_test(test_pages_bad_arguments),
        cmocka_unit_test(test_pages_edge_sizes),
        cmocka_unit_test(test_pages_spill_under_budget),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
