/* The .gfg store: byte compatibility with hand-written v1 stores, round
 * trips, v2 reading, manifest strictness, corruption, crash-safe save. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/fault.h"
#include "graph_helpers.h"
#include "graph_int.h"
#include "testutil.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const int64_t ex_row_ptr[] = {0, 3, 5, 7, 9, 11, 13};
static const int64_t ex_col_idx[] = {0, 2, 5, 1, 3, 2, 4, 0, 3, 1, 4, 2, 5};

static const char manifest_i32[] = "{\n"
                                   "  \"format\": \"tiga.gfg.csr.v1\",\n"
                                   "  \"index_dtype\": \"int32\",\n"
                                   "  \"num_dst\": 6,\n"
                                   "  \"num_edges\": 13,\n"
                                   "  \"num_src\": 6,\n"
                                   "  \"sorted_by_dst\": true\n"
                                   "}\n";

/* row_ptr of the example as raw little-endian int32, written out. */
static const unsigned char row_ptr_i32[] = {
    0, 0, 0, 0, 3, 0, 0,  0, 5, 0, 0,  0, 7, 0,
    0, 0, 9, 0, 0, 0, 11, 0, 0, 0, 13, 0, 0, 0,
};

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
    base_fault_disarm_all();
    gh_rmtree(tmp);
    free(tmp);
    tmp = NULL;
    testutil_assert_clean(&snap);
    return 0;
}

static strata_csr_view example(void)
{
    strata_csr_view v = {6, 6, ex_row_ptr, ex_col_idx};

    return v;
}

/* Little-endian bytes of n values of item bytes (malloc'd). */
static unsigned char *le_bytes(const int64_t *v, size_t n, size_t item)
{
    unsigned char *b = malloc(n * item + 1);

    assert_non_null(b);
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < item; k++)
            b[i * item + k] = (unsigned char)((uint64_t)v[i] >> (8 * k));
    return b;
}

/* Makes dir/name as a store with the given manifest and index bytes. */
static char *make_store(const char *name, const char *manifest,
                        const void *rows, size_t rows_n, const void *cols,
                        size_t cols_n)
{
    char *dir = gh_join(tmp, name);

    assert_int_equal(mkdir(dir, 0755), 0);
    if (manifest)
        gh_write_file(dir, "manifest.json", manifest, strlen(manifest));
    if (rows)
        gh_write_file(dir, "row_ptr.bin", rows, rows_n);
    if (cols)
        gh_write_file(dir, "col_idx.bin", cols, cols_n);
    return dir;
}

/* The example store with index bytes of item (4 or 8). */
static char *make_example(const char *name, const char *manifest, size_t item)
{
    unsigned char *rows = le_bytes(ex_row_ptr, 7, item);
    unsigned char *cols = le_bytes(ex_col_idx, 13, item);
    char *dir = make_store(name, manifest, rows, 7 * item, cols, 13 * item);

    free(rows);
    free(cols);
    return dir;
}

static void expect_file_equal(const char *a, const char *b, const char *name)
{
    size_t na = 0;
    size_t nb = 0;
    char *fa = gh_read_file(a, name, &na);
    char *fb = gh_read_file(b, name, &nb);

    assert_non_null(fa);
    assert_non_null(fb);
    assert_int_equal(na, nb);
    assert_memory_equal(fa, fb, na);
    free(fa);
    free(fb);
}

static void expect_rows(const strata_gfg *g, uint64_t b, uint64_t e,
                        const int64_t *row_ptr, const int64_t *col_idx)
{
    int64_t rp[64];
    int64_t cols[64];
    uint64_t count = 99;

    assert_int_equal(strata_gfg_row_edges(g, b, e, &count), STRATA_OK);
    assert_int_equal(count, (uint64_t)(row_ptr[e] - row_ptr[b]));
    assert_int_equal(strata_gfg_read_rows(g, b, e, rp, cols, count), STRATA_OK);
    for (uint64_t i = 0; i <= e - b; i++)
        assert_int_equal(rp[i], row_ptr[b + i] - row_ptr[b]);
    for (uint64_t i = 0; i < count; i++)
        assert_int_equal(cols[i], col_idx[row_ptr[b] + (int64_t)i]);
}

static void check_example_store(const char *dir, strata_dtype dtype)
{
    strata_gfg *g = NULL;

    assert_int_equal(strata_gfg_open(dir, &g), STRATA_OK);
    assert_int_equal(strata_gfg_num_rows(g), 6);
    assert_int_equal(strata_gfg_num_entities(g), 6);
    assert_int_equal(strata_gfg_num_edges(g), 13);
    assert_int_equal(strata_gfg_index_dtype(g), dtype);
    expect_rows(g, 0, 6, ex_row_ptr, ex_col_idx);
    expect_rows(g, 2, 4, ex_row_ptr, ex_col_idx);
    expect_rows(g, 5, 6, ex_row_ptr, ex_col_idx);
    expect_rows(g, 3, 3, ex_row_ptr, ex_col_idx);
    strata_gfg_close(g);
}

static void test_gfg_handwritten_v1_read_and_saved_identically(void **state)
{
    strata_csr_view v = example();
    char *ref32 = make_store("ref32.gfg", manifest_i32, row_ptr_i32,
                             sizeof(row_ptr_i32), NULL, 0);
    unsigned char *cols = le_bytes(ex_col_idx, 13, 4);
    char *manifest_i64 = strdup(manifest_i32);
    char *ref64;
    char *ours32 = gh_join(tmp, "ours32.gfg");
    char *ours64 = gh_join(tmp, "ours64.gfg");

    (void)state;
    gh_write_file(ref32, "col_idx.bin", cols, 13 * 4);
    memcpy(strstr(manifest_i64, "int32"), "int64", 5);
    ref64 = make_example("ref64.gfg", manifest_i64, 8);
    check_example_store(ref32, STRATA_I32);
    check_example_store(ref64, STRATA_I64);

    assert_int_equal(strata_gfg_save(ours32, &v, STRATA_I32), STRATA_OK);
    assert_int_equal(strata_gfg_save(ours64, &v, STRATA_I64), STRATA_OK);
    for (int i = 0; i < 3; i++) {
        static const char *const names[] = {"manifest.json", "row_ptr.bin",
                                            "col_idx.bin"};

        expect_file_equal(ref32, ours32, names[i]);
        expect_file_equal(ref64, ours64, names[i]);
    }
    assert_int_equal(gh_count_entries(ours32), 3);
    /* Four stores and nothing else: no temporary directory left. */
    assert_int_equal(gh_count_entries(tmp), 4);
    check_example_store(ours32, STRATA_I32);
    free(cols);
    free(manifest_i64);
    free(ref32);
    free(ref64);
    free(ours32);
    free(ours64);
}

static void round_trip(const struct gh_graph *g, uint64_t num_entities,
                       strata_dtype dtype, uint64_t *seed)
{
    strata_csr_view v = gh_view(g);
    char *path = gh_join(tmp, "rt.gfg");
    strata_gfg *s = NULL;
    int64_t *rp = malloc((g->n + 1) * sizeof(int64_t));
    int64_t *cols = malloc(((size_t)g->row_ptr[g->n] + 1) * sizeof(int64_t));

    assert_non_null(rp);
    assert_non_null(cols);
    v.num_entities = num_entities;
    assert_int_equal(strata_gfg_save(path, &v, dtype), STRATA_OK);
    assert_int_equal(strata_gfg_open(path, &s), STRATA_OK);
    assert_int_equal(strata_gfg_num_rows(s), g->n);
    assert_int_equal(strata_gfg_num_entities(s), num_entities);
    assert_int_equal(strata_gfg_num_edges(s), g->row_ptr[g->n]);
    assert_int_equal(strata_gfg_index_dtype(s), dtype);
    for (int i = 0; i < 20; i++) {
        uint64_t b = gh_rand(seed) % (g->n + 1);
        uint64_t e = b + gh_rand(seed) % (g->n - b + 1);
        uint64_t count;

        if (i == 0) {
            b = 0;
            e = g->n;
        }
        assert_int_equal(strata_gfg_row_edges(s, b, e, &count), STRATA_OK);
        assert_int_equal(strata_gfg_read_rows(s, b, e, rp, cols, count),
                         STRATA_OK);
        for (uint64_t r = 0; r <= e - b; r++)
            assert_int_equal(rp[r], g->row_ptr[b + r] - g->row_ptr[b]);
        for (uint64_t k = 0; k < count; k++)
            assert_int_equal(cols[k], g->col_idx[g->row_ptr[b] + (int64_t)k]);
    }
    strata_gfg_close(s);
    gh_rmtree(path);
    free(path);
    free(rp);
    free(cols);
}

static void test_gfg_round_trip_int32_int64(void **state)
{
    static const uint64_t sizes[] = {0, 1, 2, 37, 500, 3000};
    uint64_t seed = 99;

    (void)state;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        struct gh_graph g;

        gh_graph_random(&g, sizes[i], 8, &seed);
        round_trip(&g, g.n, STRATA_I32, &seed);
        round_trip(&g, g.n, STRATA_I64, &seed);
        /* A rectangular relation: more sources than destinations. */
        round_trip(&g, g.n * 3 + 1, STRATA_I32, &seed);
        gh_graph_free(&g);
    }
    assert_int_equal(gh_count_entries(tmp), 0);
}

static void test_gfg_int32_overflow_refused_einval(void **state)
{
    static const int64_t rp[] = {0, 1};
    static const int64_t big[] = {(int64_t)1 << 32};
    strata_csr_view v = {1, (uint64_t)1 << 33, rp, big};
    char *path = gh_join(tmp, "big.gfg");
    strata_gfg *g;
    int64_t out_rp[2];
    int64_t out_col[1];

    (void)state;
    assert_int_equal(strata_gfg_save(path, &v, STRATA_I32), STRATA_EINVAL);
    assert_non_null(strstr(strata_errmsg(), "int32"));
    assert_int_equal(gh_count_entries(tmp), 0);
    assert_int_equal(strata_gfg_save(path, &v, STRATA_F32), STRATA_EINVAL);
    assert_int_equal(strata_gfg_save(path, &v, STRATA_I64), STRATA_OK);
    assert_int_equal(strata_gfg_open(path, &g), STRATA_OK);
    assert_int_equal(strata_gfg_read_rows(g, 0, 1, out_rp, out_col, 1),
                     STRATA_OK);
    assert_int_equal(out_col[0], (int64_t)1 << 32);
    strata_gfg_close(g);
    free(path);
}

static void test_gfg_v2_and_optional_keys_read(void **state)
{
    static const char v2[] =
        "{\n  \"fields\": [{\"dtype\": \"float32\", \"file\": "
        "\"fields/src.x.bin\", \"name\": \"x\", \"role\": \"src\", "
        "\"shape\": [6, 4]}],\n  \"format\": \"tiga.gfg.csr.v2\",\n"
        "  \"index_dtype\": \"int64\",\n  \"num_dst\": 6,\n"
        "  \"num_edges\": 13,\n  \"num_src\": 6,\n  \"sorted_by_dst\": true,\n"
        "  \"zz_future\": {\"a\": [null, false, -1.5e3, \"\\u00e9\"]}\n}\n";
    static const char v1_extra[] =
        "{\"format\": \"tiga.gfg.csr.v1\", \"index_dtype\": \"int64\", "
        "\"num_dst\": 6, \"num_edges\": 13, \"num_src\": 6, "
        "\"sorted_by_dst\": true, \"fields\": []}";
    static const char v1_compact[] =
        "{\"num_src\":6,\"num_edges\":13,\"num_dst\":6,"
        "\"index_dtype\":\"int64\",\"format\":\"tiga.gfg.csr.v1\"}";
    char *a = make_example("v2.gfg", v2, 8);
    char *b = make_example("v1extra.gfg", v1_extra, 8);
    char *c = make_example("v1compact.gfg", v1_compact, 8);
    strata_gfg *g = NULL;

    (void)state;
    check_example_store(a, STRATA_I64);
    check_example_store(c, STRATA_I64);
    assert_int_equal(strata_gfg_open(b, &g), STRATA_EINVAL);
    assert_non_null(strstr(strata_errmsg(), "unknown key \"fields\""));
    assert_null(g);
    free(a);
    free(b);
    free(c);
}

struct bad_manifest {
    const char *text;
    strata_err err;
    const char *reason;
};

#define GOOD_TAIL                                                              \
    "\"index_dtype\": \"int32\", \"num_dst\": 6, \"num_edges\": 13, "          \
    "\"num_src\": 6}"
#define V1 "{\"format\": \"tiga.gfg.csr.v1\", "

static void test_gfg_manifest_malformed_rejected(void **state)
{
    static const struct bad_manifest cases[] = {
        {"", STRATA_EINVAL, "expected '{'"},
        {"[]", STRATA_EINVAL, "expected '{'"},
        {"{}", STRATA_EINVAL, "no \"format\""},
        {V1 GOOD_TAIL " x", STRATA_EINVAL, "trailing data"},
        {V1 GOOD_TAIL "}", STRATA_EINVAL, "trailing data"},
        {V1 "\"index_dtype\": \"int32\", \"num_dst\": 6, ", STRATA_EINVAL,
         "expected a string"},
        {V1 "\"index_dtype\": \"int32\", \"num_dst\": 6, \"num_edges\": 13}",
         STRATA_EINVAL, "missing key \"num_src\""},
        {V1 "\"index_dtype\": \"int32\", \"num_dst\": 6, \"num_edges\": 13, "
            "\"num_src\": 6,}",
         STRATA_EINVAL, "expected a string"},
        {V1 "\"num_src\": 6, " GOOD_TAIL, STRATA_EINVAL, "duplicate key"},
        {V1 "\"index_dtype\": \"int32\", \"num_dst\": -6, \"num_edges\": 13, "
            "\"num_src\": 6}",
         STRATA_EINVAL, "non-negative integer"},
        {V1 "\"index_dtype\": \"int32\", \"num_dst\": 6.0, \"num_edges\": 13, "
            "\"num_src\": 6}",
         STRATA_EINVAL, "non-negative integer"},
        {V1 "\"index_dtype\": \"int32\", \"num_dst\": 6e0, \"num_edges\": 13, "
            "\"num_src\": 6}",
         STRATA_EINVAL, "non-negative integer"},
        {V1 "\"index_dtype\": \"int32\", \"num_dst\": 06, \"num_edges\": 13, "
            "\"num_src\": 6}",
         STRATA_EINVAL, "leading zero"},
        {V1 "\"index_dtype\": \"int32\", \"num_dst\": \"6\", \"num_edges\": "
            "13, \"num_src\": 6}",
         STRATA_EINVAL, "must be a number"},
        {V1 "\"index_dtype\": \"int32\", \"num_dst\": 9223372036854775808, "
            "\"num_edges\": 13, \"num_src\": 6}",
         STRATA_EINVAL, "below 2^63"},
        {V1 "\"index_dtype\": \"float32\", \"num_dst\": 6, \"num_edges\": 13, "
            "\"num_src\": 6}",
         STRATA_EINVAL, "not int32 or int64"},
        {V1 "\"index_dtype\": 32, \"num_dst\": 6, \"num_edges\": 13, "
            "\"num_src\": 6}",
         STRATA_EINVAL, "must be a string"},
        {V1 "\"sorted_by_dst\": 1, " GOOD_TAIL, STRATA_EINVAL, "true or false"},
        {"{\"format\": \"tiga.gfg.csr.v3\", " GOOD_TAIL, STRATA_ENOTSUP,
         "unsupported format \"tiga.gfg.csr.v3\""},
        {"{\"format\": \"tiga.gfg.csr.v1 \", " GOOD_TAIL, STRATA_ENOTSUP,
         "unsupported format"},
        {"{\"format\": 1, " GOOD_TAIL, STRATA_EINVAL, "must be a string"},
        {"{\"format\": \"tiga.gfg.csr.v1\" " GOOD_TAIL, STRATA_EINVAL,
         "expected ',' or '}'"},
        {"{\"format\" \"tiga.gfg.csr.v1\", " GOOD_TAIL, STRATA_EINVAL,
         "expected ':'"},
        {"{\"form\tat\": 1}", STRATA_EINVAL, "control character"},
        {"{\"f\\x\": 1}", STRATA_EINVAL, "bad escape"},
        {"{\"f\\u12G4\": 1}", STRATA_EINVAL, "bad \\u escape"},
        {"{\"format\": \"tiga.gfg.csr.v1", STRATA_EINVAL, "unterminated"},
        {V1 "\"zz\": 1, " GOOD_TAIL, STRATA_EINVAL, "unknown key \"zz\""},
        {"{\"format\": \"tiga.gfg.csr.v2\", \"x\": [[[[[[[[[[[[[[[[[[[[[[[[["
         "[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]], " GOOD_TAIL,
         STRATA_EINVAL, "nesting too deep"},
        {"{\"format\": \"tiga.gfg.csr.v2\", \"x\": [1,], " GOOD_TAIL,
         STRATA_EINVAL, "expected a value"},
        {"{\"format\": \"tiga.gfg.csr.v2\", \"x\": tru, " GOOD_TAIL,
         STRATA_EINVAL, "unexpected character"},
        {"{\"format\": \"tiga.gfg.csr.v2\", \"x\": -, " GOOD_TAIL,
         STRATA_EINVAL, "bad number"},
        {"{\"format\": \"tiga.gfg.csr.v2\", \"x\": 1., " GOOD_TAIL,
         STRATA_EINVAL, "bad fraction"},
        {"{\"format\": \"tiga.gfg.csr.v2\", \"x\": 1e, " GOOD_TAIL,
         STRATA_EINVAL, "bad exponent"},
        /* An escaped NUL does not make "format" match. */
        {"{\"format\\u0000\": \"tiga.gfg.csr.v1\", " GOOD_TAIL, STRATA_EINVAL,
         "no \"format\""},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct graph_manifest m;
        strata_err err;

        memset(&m, 0x5a, sizeof(m));
        err = graph_manifest_parse(cases[i].text, strlen(cases[i].text), &m);
        if (err != cases[i].err || !strstr(strata_errmsg(), cases[i].reason))
            fail_msg("case %zu (%s): got %s \"%s\", want %s \"%s\"", i,
                     cases[i].text, strata_errname(err), strata_errmsg(),
                     strata_errname(cases[i].err), cases[i].reason);
        assert_int_equal(m.num_src, 0x5a5a5a5a5a5a5a5aULL);
    }
}

static void test_gfg_manifest_escapes_and_layout_accepted(void **state)
{
    static const char *const ok[] = {
        " \r\n\t{\"\\u0066ormat\":\"tiga.gfg.csr.v1\",\"index_dtype\":"
        "\"int\\u0033\\u0032\",\"num_dst\":6,\"num_edges\":13,\"num_src\":0,"
        "\"sorted_by_dst\":false}\n\n",
        "{\"format\": \"tiga.gfg.csr.v2\", \"\\ud83d\\ude00\": \"\\\"\\\\\\/"
        "\\b\\f\\n\\r\\t\", \"\": {}, \"a\": [], " GOOD_TAIL,
    };
    struct graph_manifest m;
    char buf[512];
    size_t n;

    (void)state;
    assert_int_equal(graph_manifest_parse(ok[0], strlen(ok[0]), &m), STRATA_OK);
    assert_int_equal(m.version, 1);
    assert_int_equal(m.index_dtype, STRATA_I32);
    assert_int_equal(m.num_dst, 6);
    assert_int_equal(m.num_edges, 13);
    assert_int_equal(m.num_src, 0);
    assert_false(m.sorted_by_dst);
    assert_int_equal(graph_manifest_parse(ok[1], strlen(ok[1]), &m), STRATA_OK);
    assert_int_equal(m.version, 2);
    assert_true(m.sorted_by_dst);
    /* The writer's text is exactly the reference text. */
    m.version = 1;
    m.num_src = 6;
    n = graph_manifest_format(&m, buf, sizeof(buf));
    assert_int_equal(n, strlen(manifest_i32));
    assert_string_equal(buf, manifest_i32);
    assert_int_equal(graph_manifest_format(&m, buf, 20), 0);
}

/* Replaces dir's row_ptr.bin by a directory. */
static void f_dir_rows(const char *dir)
{
    char *f = gh_join(dir, "row_ptr.bin");

    assert_int_equal(unlink(f), 0);
    assert_int_equal(mkdir(f, 0755), 0);
    free(f);
}

static void expect_open_fails(const char *dir, strata_err want,
                              const char *reason)
{
    strata_gfg *g = NULL;
    strata_err err = strata_gfg_open(dir, &g);

    if (err != want || !strstr(strata_errmsg(), reason))
        fail_msg("open %s: got %s \"%s\", want %s \"%s\"", dir,
                 strata_errname(err), strata_errmsg(), strata_errname(want),
                 reason);
    assert_null(g);
}

static void test_gfg_corrupt_store_clear_errors(void **state)
{
    unsigned char *cols = le_bytes(ex_col_idx, 13, 4);
    unsigned char rows[sizeof(row_ptr_i32)];
    char *d;

    (void)state;
    d = make_store("short_rows", manifest_i32, row_ptr_i32,
                   sizeof(row_ptr_i32) - 1, cols, 52);
    expect_open_fails(d, STRATA_EINVAL, "row_ptr.bin has 27 bytes");
    free(d);
    d = make_store("short_cols", manifest_i32, row_ptr_i32, sizeof(row_ptr_i32),
                   cols, 48);
    expect_open_fails(d, STRATA_EINVAL, "col_idx.bin has 48 bytes");
    free(d);
    d = make_store("long_cols", manifest_i32, row_ptr_i32, sizeof(row_ptr_i32),
                   cols, 53);
    expect_open_fails(d, STRATA_EINVAL, "col_idx.bin has 53 bytes");
    free(d);
    memcpy(rows, row_ptr_i32, sizeof(rows));
    rows[0] = 1;
    d = make_store("bad_first", manifest_i32, rows, sizeof(rows), cols, 52);
    expect_open_fails(d, STRATA_EINVAL, "endpoints");
    free(d);
    rows[0] = 0;
    rows[24] = 12;
    d = make_store("bad_last", manifest_i32, rows, sizeof(rows), cols, 52);
    expect_open_fails(d, STRATA_EINVAL, "endpoints");
    free(d);
    d = make_store("no_rows", manifest_i32, NULL, 0, cols, 52);
    expect_open_fails(d, STRATA_ENOENT, "row_ptr.bin");
    free(d);
    d = make_store("no_cols", manifest_i32, row_ptr_i32, sizeof(row_ptr_i32),
                   NULL, 0);
    expect_open_fails(d, STRATA_ENOENT, "col_idx.bin");
    free(d);
    d = make_store("no_manifest", NULL, row_ptr_i32, sizeof(row_ptr_i32), cols,
                   52);
    expect_open_fails(d, STRATA_ENOENT, "no manifest.json");
    free(d);
    d = make_store("bad_json", "{\"format\": \"tiga.gfg.csr.v1\", ",
                   row_ptr_i32, sizeof(row_ptr_i32), cols, 52);
    expect_open_fails(d, STRATA_EINVAL, "manifest.json: expected a string");
    free(d);
    d = make_store("v9", "{\"format\": \"tiga.gfg.csr.v9\"}", row_ptr_i32,
                   sizeof(row_ptr_i32), cols, 52);
    expect_open_fails(d, STRATA_ENOTSUP, "unsupported format");
    free(d);
    d = make_store("dir_manifest", NULL, row_ptr_i32, sizeof(row_ptr_i32), cols,
                   52);
    {
        char *m = gh_join(d, "manifest.json");

        assert_int_equal(mkdir(m, 0755), 0);
        free(m);
    }
    expect_open_fails(d, STRATA_EINVAL, "not a regular file");
    free(d);
    /* FIFOs open at once and are refused (a reader used to wait for a
     * writer forever); so is an index file that is a directory. */
    {
        static const char *const fifos[] = {"manifest.json", "row_ptr.bin",
                                            "col_idx.bin"};

        for (size_t i = 0; i < 3; i++) {
            char name[32], *f;

            snprintf(name, sizeof(name), "fifo_%zu", i);
            d = make_store(name, i ? manifest_i32 : NULL, row_ptr_i32,
                           sizeof(row_ptr_i32), cols, 52);
            f = gh_join(d, fifos[i]);
            unlink(f);
            assert_int_equal(mkfifo(f, 0600), 0);
            free(f);
            expect_open_fails(d, STRATA_EINVAL, "not a regular file");
            free(d);
        }
        d = make_store("dir_rows", manifest_i32, row_ptr_i32,
                       sizeof(row_ptr_i32), cols, 52);
        f_dir_rows(d);
        expect_open_fails(d, STRATA_EINVAL,
                          "row_ptr.bin is not a regular file");
        free(d);
    }
    d = gh_join(tmp, "missing");
    expect_open_fails(d, STRATA_ENOENT, "missing");
    free(d);
    expect_open_fails("", STRATA_EINVAL, "empty");
    free(cols);
}

/* open checks only endpoints and sizes; the rest is checked when read. */
static void test_gfg_corrupt_rows_found_when_read(void **state)
{
    int64_t rp[7];
    int64_t ci[13];
    unsigned char *rows;
    unsigned char *cols;
    char *d;
    strata_gfg *g = NULL;
    int64_t out_rp[7];
    int64_t out_col[13];
    uint64_t count;

    (void)state;
    memcpy(rp, ex_row_ptr, sizeof(rp));
    memcpy(ci, ex_col_idx, sizeof(ci));
    rp[3] = 4; /* row_ptr[2] = 5 > row_ptr[3] */
    ci[12] = 6;
    rows = le_bytes(rp, 7, 4);
    cols = le_bytes(ci, 13, 4);
    d = make_store("mid", manifest_i32, rows, 28, cols, 52);
    assert_int_equal(strata_gfg_open(d, &g), STRATA_OK);
    expect_rows(g, 0, 2, ex_row_ptr, ex_col_idx);
    assert_int_equal(strata_gfg_read_rows(g, 1, 4, out_rp, out_col, 13),
                     STRATA_EINVAL);
    assert_non_null(strstr(strata_errmsg(), "not monotonic"));
    assert_int_equal(strata_gfg_row_edges(g, 3, 2, &count), STRATA_EINVAL);
    assert_int_equal(strata_gfg_read_rows(g, 4, 6, out_rp, out_col, 13),
                     STRATA_EINVAL);
    assert_non_null(strstr(strata_errmsg(), "col_idx[12] = 6"));
    /* Truncated behind the handle's back: a short read is STRATA_EIO. */
    {
        char *p = gh_join(d, "col_idx.bin");

        assert_int_equal(truncate(p, 16), 0);
        free(p);
    }
    assert_int_equal(strata_gfg_read_rows(g, 0, 2, out_rp, out_col, 13),
                     STRATA_EIO);
    assert_non_null(strstr(strata_errmsg(), "truncated"));
    strata_gfg_close(g);
    strata_gfg_close(NULL);
    free(rows);
    free(cols);
    free(d);
}

static void test_gfg_read_rows_bad_arguments_einval(void **state)
{
    strata_csr_view v = example();
    char *path = gh_join(tmp, "ex.gfg");
    strata_gfg *g;
    int64_t rp[8];
    int64_t cols[16];
    uint64_t count;

    (void)state;
    assert_int_equal(strata_gfg_save(path, &v, STRATA_I64), STRATA_OK);
    assert_int_equal(strata_gfg_open(path, &g), STRATA_OK);
    assert_int_equal(strata_gfg_read_rows(g, 0, 6, rp, cols, 12),
                     STRATA_EINVAL);
    assert_non_null(strstr(strata_errmsg(), "have 13 edges; col_out holds 12"));
    assert_int_equal(strata_gfg_read_rows(g, 0, 6, rp, NULL, 13),
                     STRATA_EINVAL);
    assert_int_equal(strata_gfg_read_rows(g, 4, 3, rp, cols, 16),
                     STRATA_EINVAL);
    assert_int_equal(strata_gfg_read_rows(g, 0, 7, rp, cols, 16),
                     STRATA_EINVAL);
    assert_int_equal(strata_gfg_read_rows(g, 0, 1, NULL, cols, 16),
                     STRATA_EINVAL);
    assert_int_equal(strata_gfg_read_rows(NULL, 0, 1, rp, cols, 16),
                     STRATA_EINVAL);
    assert_int_equal(strata_gfg_row_edges(g, 0, 7, &count), STRATA_EINVAL);
    assert_int_equal(strata_gfg_row_edges(g, 0, 1, NULL), STRATA_EINVAL);
    /* An empty range needs no column buffer. */
    rp[0] = 7;
    assert_int_equal(strata_gfg_read_rows(g, 6, 6, rp, NULL, 0), STRATA_OK);
    assert_int_equal(rp[0], 0);
    assert_int_equal(strata_gfg_num_rows(NULL), 0);
    strata_gfg_close(g);
    free(path);
}

static void test_gfg_save_existing_destination_eexist(void **state)
{
    strata_csr_view v = example();
    char *dir = gh_join(tmp, "exists.gfg");
    char *file = gh_join(tmp, "file.gfg");
    char *orphan = gh_join(tmp, "no/such/parent.gfg");

    (void)state;
    assert_int_equal(mkdir(dir, 0755), 0);
    gh_write_file(tmp, "file.gfg", "keep", 4);
    assert_int_equal(strata_gfg_save(dir, &v, STRATA_I64), STRATA_EEXIST);
    assert_int_equal(gh_count_entries(dir), 0);
    assert_int_equal(strata_gfg_save(file, &v, STRATA_I64), STRATA_EEXIST);
    assert_int_equal(strata_gfg_save(orphan, &v, STRATA_I64), STRATA_ENOENT);
    assert_int_equal(strata_gfg_save("", &v, STRATA_I64), STRATA_EINVAL);
    assert_int_equal(strata_gfg_save(dir, NULL, STRATA_I64), STRATA_EINVAL);
    assert_int_equal(gh_count_entries(tmp), 2);
    /* Saving twice: the second is refused and the first is intact. */
    free(dir);
    dir = gh_join(tmp, "twice.gfg/");
    assert_int_equal(strata_gfg_save(dir, &v, STRATA_I32), STRATA_OK);
    assert_int_equal(strata_gfg_save(dir, &v, STRATA_I64), STRATA_EEXIST);
    check_example_store(dir, STRATA_I32);
    assert_int_equal(gh_count_entries(tmp), 3);
    free(dir);
    free(file);
    free(orphan);
}

static void test_gfg_save_relative_path_ok(void **state)
{
    strata_csr_view v = example();
    char cwd[4096];

    (void)state;
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    assert_int_equal(chdir(tmp), 0);
    assert_int_equal(strata_gfg_save("rel.gfg", &v, STRATA_I32), STRATA_OK);
    assert_int_equal(strata_gfg_save(".", &v, STRATA_I32), STRATA_EEXIST);
    assert_int_equal(chdir(cwd), 0);
    {
        char *p = gh_join(tmp, "rel.gfg");

        check_example_store(p, STRATA_I32);
        free(p);
    }
    assert_int_equal(gh_count_entries(tmp), 1);
}

/* A failure at any write, fsync or the rename leaves nothing behind. */
/* A temporary store directory as a save killed midway leaves it:
 * .sweep.gfg.<six>, a partial file in it, mtime age_s ago. */
static char *plant_tmp(const char *six, double age_s)
{
    char name[64], *d;
    struct timespec t[2];

    snprintf(name, sizeof(name), ".sweep.gfg.%s", six);
    d = gh_join(tmp, name);
    assert_int_equal(mkdir(d, 0700), 0);
    gh_write_file(d, "row_ptr.bin", row_ptr_i32, 8);
    clock_gettime(CLOCK_REALTIME, &t[0]);
    t[0].tv_sec -= (time_t)age_s;
    t[1] = t[0];
    assert_int_equal(utimensat(AT_FDCWD, d, t, 0), 0);
    return d;
}

/* A save killed midway (Ctrl-C on gfg convert) leaves its temporary
 * directory; the next save to the same destination removes it, but not
 * one a live saver holds (flock), nor one just made. */
static void test_gfg_save_sweeps_a_killed_save(void **state)
{
    strata_csr_view v = example();
    char *path = gh_join(tmp, "sweep.gfg");
    char *dead = plant_tmp("Dd0001", 30);
    char *held = plant_tmp("Hh0002", 30);
    char *young = plant_tmp("Yy0003", 0);
    int fd = open(held, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct stat st;

    (void)state;
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX), 0);
    assert_int_equal(strata_gfg_save(path, &v, STRATA_I32), STRATA_OK);
    check_example_store(path, STRATA_I32);
    assert_int_not_equal(lstat(dead, &st), 0);
    assert_int_equal(lstat(held, &st), 0);
    assert_int_equal(lstat(young, &st), 0);
    close(fd);
    gh_rmtree(held);
    gh_rmtree(young);
    gh_rmtree(path);
    assert_int_equal(gh_count_entries(tmp), 0);
    free(dead);
    free(held);
    free(young);
    free(path);
}

static void test_gfg_save_faults_leave_nothing(void **state)
{
    static const char *const points[] = {"graph.gfg_save.write",
                                         "graph.gfg_save.fsync",
                                         "graph.gfg_save.rename"};
    strata_csr_view v = example();
    char *path = gh_join(tmp, "faulty.gfg");

    (void)state;
    for (size_t p = 0; p < sizeof(points) / sizeof(points[0]); p++) {
        for (long nth = 1;; nth++) {
            strata_err err;

            base_fault_arm(points[p], nth, BASE_FAULT_FAIL);
            err = strata_gfg_save(path, &v, STRATA_I32);
            base_fault_disarm_all();
            if (err == STRATA_OK) {
                assert_true(nth > 1);
                break;
            }
            assert_int_equal(err, STRATA_EIO);
            assert_non_null(strstr(strata_errmsg(), "injected"));
            assert_int_equal(gh_count_entries(tmp), 0);
        }
        check_example_store(path, STRATA_I32);
        gh_rmtree(path);
    }
    /* If only the final sync of the parent fails, the store is in place
     * (the rename happened) and the error is still reported. */
    base_fault_arm("graph.gfg_save.sync_parent", 1, BASE_FAULT_FAIL);
    assert_int_equal(strata_gfg_save(path, &v, STRATA_I32), STRATA_EIO);
    base_fault_disarm_all();
    check_example_store(path, STRATA_I32);
    assert_int_equal(gh_count_entries(tmp), 1);
    free(path);
}

static void test_gfg_alloc_failures_enomem(void **state)
{
    strata_csr_view v = example();
    char *path = gh_join(tmp, "alloc.gfg");
    strata_err err;
    long n;

    (void)state;
    for (n = 1;; n++) {
        base_alloc_fail_after(n);
        err = strata_gfg_save(path, &v, STRATA_I32);
        base_alloc_fail_after(0);
        if (err == STRATA_OK)
            break;
        assert_int_equal(err, STRATA_ENOMEM);
        assert_int_equal(gh_count_entries(tmp), 0);
    }
    assert_true(n > 2);
    for (n = 1;; n++) {
        strata_gfg *g = NULL;

        base_alloc_fail_after(n);
        err = strata_gfg_open(path, &g);
        base_alloc_fail_after(0);
        if (err == STRATA_OK) {
            strata_gfg_close(g);
            break;
        }
        assert_int_equal(err, STRATA_ENOMEM);
        assert_null(g);
    }
    assert_true(n > 1);
    free(path);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_gfg_handwritten_v1_read_and_saved_identically),
        T(test_gfg_round_trip_int32_int64),
        T(test_gfg_int32_overflow_refused_einval),
        T(test_gfg_v2_and_optional_keys_read),
        T(test_gfg_manifest_malformed_rejected),
        T(test_gfg_manifest_escapes_and_layout_accepted),
        T(test_gfg_corrupt_store_clear_errors),
        T(test_gfg_corrupt_rows_found_when_read),
        T(test_gfg_read_rows_bad_arguments_einval),
        T(test_gfg_save_existing_destination_eexist),
        T(test_gfg_save_relative_path_ok),
        T(test_gfg_save_faults_leave_nothing),
        T(test_gfg_save_sweeps_a_killed_save),
        T(test_gfg_alloc_failures_enomem),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
