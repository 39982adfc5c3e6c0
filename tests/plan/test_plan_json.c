/* Bundle plans as JSON (schema tiga.executable-bundle-plan.v1): a plan
 * written and read back is the same plan; files in the reference
 * compiler's style load; malformed input is refused with the path of the
 * bad field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <strata/plan.h>

#include "base/fault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef PLAN_DATA_DIR
#error "PLAN_DATA_DIR must name tests/plan/data"
#endif

static char *slurp(const char *name, size_t *len)
{
    char path[512];
    FILE *f;
    char *buf;
    long n;

    snprintf(path, sizeof(path), "%s/%s", PLAN_DATA_DIR, name);
    f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    n = ftell(f);
    assert_true(n > 0);
    rewind(f);
    buf = malloc((size_t)n);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void same_str(const char *a, const char *b)
{
    if (!a || !b)
        assert_ptr_equal(a, b);
    else
        assert_string_equal(a, b);
}

/* Field by field, the two plans are the same. */
static void same_plan(const strata_plan *x, const strata_plan *y)
{
    assert_int_equal(strata_plan_num_resources(x),
                     strata_plan_num_resources(y));
    for (size_t i = 0; i < strata_plan_num_resources(x); i++) {
        const strata_plan_resource *a = strata_plan_resource_at(x, i);
        const strata_plan_resource *b = strata_plan_resource_at(y, i);

        same_str(a->name, b->name);
        same_str(a->memory_space, b->memory_space);
        same_str(a->layout, b->layout);
        same_str(a->device, b->device);
        assert_int_equal(a->capacity_bytes, b->capacity_bytes);
        assert_int_equal(a->snapshot_version, b->snapshot_version);
        assert_int_equal(a->external, b->external);
    }
    assert_int_equal(strata_plan_num_invocations(x),
                     strata_plan_num_invocations(y));
    for (size_t i = 0; i < strata_plan_num_invocations(x); i++) {
        const strata_plan_invocation *a = strata_plan_invocation_at(x, i);
        const strata_plan_invocation *b = strata_plan_invocation_at(y, i);

        same_str(a->name, b->name);
        same_str(a->callable, b->callable);
        same_str(a->task_kind, b->task_kind);
        same_str(a->phase, b->phase);
        same_str(a->metadata_json, b->metadata_json);
        assert_int_equal(a->snapshot_version, b->snapshot_version);
        assert_int_equal(a->num_depends_on, b->num_depends_on);
        for (size_t k = 0; k < a->num_depends_on; k++)
            same_str(a->depends_on[k], b->depends_on[k]);
        assert_int_equal(a->num_arguments, b->num_arguments);
        for (size_t k = 0; k < a->num_arguments; k++) {
            same_str(a->arguments[k].parameter, b->arguments[k].parameter);
            same_str(a->arguments[k].resource, b->arguments[k].resource);
        }
        assert_int_equal(a->num_accesses, b->num_accesses);
        for (size_t k = 0; k < a->num_accesses; k++) {
            same_str(a->accesses[k].resource, b->accesses[k].resource);
            assert_int_equal(a->accesses[k].mode, b->accesses[k].mode);
            assert_int_equal(a->accesses[k].snapshot_version,
                             b->accesses[k].snapshot_version);
            same_str(a->accesses[k].partitioning, b->accesses[k].partitioning);
            same_str(a->accesses[k].partition, b->accesses[k].partition);
        }
        assert_int_equal(a->num_scalars, b->num_scalars);
        for (size_t k = 0; k < a->num_scalars; k++)
            assert_int_equal(a->scalars[k], b->scalars[k]);
    }
    assert_int_equal(strata_plan_num_terminals(x),
                     strata_plan_num_terminals(y));
    for (size_t i = 0; i < strata_plan_num_terminals(x); i++)
        same_str(strata_plan_terminal_at(x, i), strata_plan_terminal_at(y, i));
}

/* Writes p, reads it back, compares; the text of the copy is the same. */
static void round_trip(const strata_plan *p)
{
    char *text, *again;
    size_t len, len2;
    strata_plan *q = NULL;

    assert_int_equal(strata_plan_to_json(p, &text, &len), STRATA_OK);
    assert_int_equal(strlen(text), len);
    assert_int_equal(text[len - 1], '\n');
    if (strata_plan_from_json(text, len, &q) != STRATA_OK)
        fail_msg("written plan does not read back: %s\n%s", strata_errmsg(),
                 text);
    same_plan(p, q);
    assert_int_equal(strata_plan_to_json(q, &again, &len2), STRATA_OK);
    assert_string_equal(text, again);
    strata_plan_json_free(text);
    strata_plan_json_free(again);
    strata_plan_destroy(q);
}

static void test_plan_json_round_trip_of_built_plan(void **state)
{
    static const strata_plan_argument args_a[] = {{"in", "src"},
                                                  {"out", "mid"}};
    static const strata_plan_access acc_a[] = {
        {"src", STRATA_PLAN_READ, 2, NULL, NULL},
        {"mid", STRATA_PLAN_WRITE, 2, "rows", "0"}};
    static const strata_plan_access acc_b[] = {
        {"mid", STRATA_PLAN_WRITE, 2, "rows", "1"}};
    static const strata_plan_access acc_c[] = {
        {"mid", STRATA_PLAN_READ_WRITE, 2, NULL, NULL}};
    static const uint64_t scalars[] = {0, 7, UINT64_MAX, (uint64_t)1 << 63};
    static const char *const on_ab[] = {"a", "b"};
    static const strata_plan_resource res[] = {
        {"mid", "nvme", "packed", "host", 4096, 2, false},
        {"src", "ram", "rows", "host", 0, 2, true}};
    strata_plan_invocation v[3] = {{0}};
    strata_plan_spec s = {res, 2, v, 3, NULL, 0};
    strata_plan *p = NULL;

    (void)state;
    v[0] = (strata_plan_invocation){
        "a",     "fill",
        "local", "materialize",
        NULL,    0,
        args_a,  2,
        acc_a,   2,
        2,       scalars,
        4,       "{\"z\": [1, {\"y\": null}], \"a\": 1.5}"};
    v[1] =
        (strata_plan_invocation){"b", "fill", NULL, NULL, NULL, 0, args_a + 1,
                                 1,   acc_b,  1,    2,    NULL, 0, NULL};
    v[2] =
        (strata_plan_invocation){"c", "sum", NULL, NULL, on_ab, 2, args_a + 1,
                                 1,   acc_c, 1,    2,    NULL,  0, "{}"};
    assert_int_equal(strata_plan_create(&s, &p), STRATA_OK);
    /* Defaults filled in, metadata made canonical. */
    assert_string_equal(strata_plan_invocation_at(p, 1)->phase, "execute");
    assert_string_equal(strata_plan_invocation_at(p, 1)->task_kind, "local");
    assert_string_equal(strata_plan_invocation_at(p, 0)->metadata_json,
                        "{\"a\":1.5,\"z\":[1,{\"y\":null}]}");
    assert_null(strata_plan_invocation_at(p, 2)->metadata_json);
    round_trip(p);
    strata_plan_destroy(p);
}

static void test_plan_json_reference_file_loads(void **state)
{
    size_t len;
    char *text = slurp("degree_buckets.json", &len);
    strata_plan *p = NULL;
    const strata_plan_invocation *v;

    (void)state;
    if (strata_plan_from_json(text, len, &p) != STRATA_OK)
        fail_msg("reference plan refused: %s", strata_errmsg());
    free(text);
    assert_int_equal(strata_plan_num_invocations(p), 4);
    assert_int_equal(strata_plan_num_resources(p), 1);
    assert_string_equal(strata_plan_resource_at(p, 0)->layout,
                        "degree-row-worklist");
    assert_int_equal(strata_plan_resource_at(p, 0)->capacity_bytes, 1096);
    v = strata_plan_invocation_at(p, 0);
    assert_string_equal(v->callable, "build_worklist");
    assert_string_equal(v->phase, "materialize");
    assert_string_equal(v->metadata_json,
                        "{\"upper_bounds\":[8,32,64,1048576]}");
    v = strata_plan_invocation_at(p, 2);
    assert_string_equal(v->accesses[1].partitioning, "degree-worklist");
    assert_string_equal(v->accesses[1].partition, "bucket:1");
    assert_string_equal(v->metadata_json, "{\"bucket_ordinal\":1}");
    assert_string_equal(strata_plan_invocation_at(p, 3)->callable,
                        STRATA_PLAN_JOIN);
    assert_int_equal(strata_plan_num_terminals(p), 1);
    assert_string_equal(strata_plan_terminal_at(p, 0), "join:0");
    round_trip(p);
    strata_plan_destroy(p);

    text = slurp("prefetch_release.json", &len);
    assert_int_equal(strata_plan_from_json(text, len, &p), STRATA_OK);
    free(text);
    assert_string_equal(strata_plan_invocation_at(p, 0)->callable,
                        STRATA_PLAN_TRANSFER);
    round_trip(p);
    strata_plan_destroy(p);
}

/* One malformed document: text, and the words its refusal must hold. */
struct bad_doc {
    const char *json;
    const char *path;
    const char *why;
};

#define HEAD "{\"schema\":\"tiga.executable-bundle-plan.v1\","
#define INV(extra)                                                             \
    "{\"name\":\"a\",\"task_kind\":\"k\",\"phase\":\"execute\","               \
    "\"executable_symbol\":\"f\",\"depends_on\":[],\"arguments\":"             \
    "[{\"parameter\":\"x\",\"resource\":\"x\"}],\"snapshot_version\":0,"       \
    "\"accesses\":[{\"binding\":\"x\",\"mode\":\"read\","                      \
    "\"snapshot_version\":0}]" extra "}"
#define TAIL "\"terminals\":[\"a\"]}"

static const struct bad_doc bad_docs[] = {
    {"", "line 1", NULL},
    {"{\"schema\": ", "line 1", NULL},
    {"[]", "$", "object"},
    {"{\"invocations\":[]}", "$.schema", "missing"},
    {"{\"schema\":\"tiga.executable-bundle-plan.v2\"}", "$.schema", NULL},
    {HEAD "\"invocations\":{}," TAIL, "$.invocations", "array"},
    {HEAD "\"invocations\":[]," TAIL, "$.invocations", "at least one"},
    {HEAD "\"invocations\":[" INV("") "],\"terminals\":[]}", "$.terminals",
     "at least one"},
    {HEAD "\"invocations\":[" INV("") "],\"terminals\":[3]}", "$.terminals[0]",
     "string"},
    {HEAD "\"invocations\":[7]," TAIL, "$.invocations[0]", "object"},
    {HEAD "\"invocations\":[" INV("") "," INV(",\"phase\":1") "]," TAIL, "line",
     NULL}, /* a duplicate key */
    {HEAD "\"invocations\":[" INV("") ",{\"name\":\"b\"}]," TAIL,
     "$.invocations[1].task_kind", "missing"},
    {HEAD "\"invocations\":[{\"name\":\"\"}]," TAIL, "$.invocations[0].name",
     "1 to 255"},
    {HEAD
     "\"resources\":[{\"name\":\"x\"}],\"invocations\":[" INV("") "]," TAIL,
     "$.resources[0].memory_space", "missing"},
    {HEAD "\"resources\":[{\"name\":\"x\",\"memory_space\":\"ram\","
          "\"layout\":\"p\",\"device\":\"h\",\"capacity_bytes\":-1,"
          "\"snapshot_version\":0,\"external\":false}],"
          "\"invocations\":[" INV("") "]," TAIL,
     "$.resources[0].capacity_bytes", "non-negative"},
    {HEAD "\"resources\":[{\"name\":\"x\",\"memory_space\":\"ram\","
          "\"layout\":\"p\",\"device\":\"h\",\"capacity_bytes\":1,"
          "\"snapshot_version\":0,\"external\":0}],"
          "\"invocations\":[" INV("") "]," TAIL,
     "$.resources[0].external", "true or false"},
    {HEAD "\"resources\":[{\"name\":\"x\",\"memory_space\":\"ram\","
          "\"layout\":\"p\",\"device\":\"h\",\"capacity_bytes\":1,"
          "\"snapshot_version\":0,\"external\":false,\"color\":1}],"
          "\"invocations\":[" INV("") "]," TAIL,
     "$.resources[0].color", "not a key"},
    {HEAD "\"invocations\":[" INV(",\"scalars\":[1.5]") "]," TAIL,
     "$.invocations[0].scalars[0]", "integer"},
    {HEAD "\"invocations\":[{\"name\":\"a\",\"task_kind\":\"k\","
          "\"phase\":\"execute\",\"executable_symbol\":\"f\","
          "\"depends_on\":[],\"arguments\":[{\"parameter\":\"x\"}],"
          "\"snapshot_version\":0,\"accesses\":[]}]," TAIL,
     "$.invocations[0].arguments[0].resource", "missing"},
    {HEAD
     "\"invocations\":[{\"name\":\"a\",\"task_kind\":\"k\","
     "\"phase\":\"execute\",\"executable_symbol\":\"f\","
     "\"depends_on\":[],\"arguments\":[{\"parameter\":\"x\","
     "\"resource\":\"x\"}],\"snapshot_version\":0,\"accesses\":"
     "[{\"binding\":\"x\",\"mode\":\"append\",\"snapshot_version\":0}]}]," TAIL,
     "$.invocations[0].accesses[0].mode", "read_write"},
    {HEAD "\"invocations\":[{\"name\":\"a\",\"task_kind\":\"k\","
          "\"phase\":\"execute\",\"executable_symbol\":\"f\","
          "\"depends_on\":[],\"arguments\":[{\"parameter\":\"x\","
          "\"resource\":\"x\"}],\"snapshot_version\":0,\"accesses\":"
          "[{\"binding\":\"x\",\"mode\":\"write\",\"snapshot_version\":0,"
          "\"partitioning\":\"rows\"}]}]," TAIL,
     "$.invocations[0].accesses[0]", "together"},
    {HEAD "\"invocations\":[{\"name\":\"a\",\"task_kind\":\"k\","
          "\"phase\":\"execute\",\"executable_symbol\":\"f\","
          "\"depends_on\":[1],\"arguments\":[],\"snapshot_version\":0,"
          "\"accesses\":[]}]," TAIL,
     "$.invocations[0].depends_on[0]", "string"},
    {HEAD "\"invocations\":[{\"name\":\"a\",\"task_kind\":\"k\","
          "\"phase\":\"execute\",\"executable_symbol\":\"f\","
          "\"depends_on\":[],\"arguments\":[],\"snapshot_version\":true,"
          "\"accesses\":[]}]," TAIL,
     "$.invocations[0].snapshot_version", "integer"},
    /* Well-formed, but illegal: the checks of strata_plan_create. */
    {HEAD "\"invocations\":[" INV("") "],"
                                      "\"terminals\":[\"b\"]}",
     "'b'", "terminal"},
};

static void test_plan_json_malformed_names_the_field(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(bad_docs) / sizeof(bad_docs[0]); i++) {
        const struct bad_doc *d = &bad_docs[i];
        strata_plan *p = NULL;
        strata_err err = strata_plan_from_json(d->json, strlen(d->json), &p);
        const char *m = strata_errmsg();

        if (err != STRATA_EINVAL || p || !strstr(m, d->path) ||
            (d->why && !strstr(m, d->why)))
            fail_msg("doc %zu: %s (%s), wanted '%s' and '%s'", i,
                     strata_errname(err), m, d->path, d->why ? d->why : "");
    }
}

static void test_plan_json_not_terminated_text(void **state)
{
    static const char doc[] = HEAD "\"invocations\":[" INV("") "]," TAIL;
    size_t n = sizeof(doc) - 1;
    char *exact = malloc(n);
    strata_plan *p = NULL;

    (void)state;
    /* Exactly the document's bytes, no NUL after them. */
    assert_non_null(exact);
    memcpy(exact, doc, n);
    assert_int_equal(strata_plan_from_json(exact, n, &p), STRATA_OK);
    strata_plan_destroy(p);
    /* One byte short: not JSON any more. */
    assert_int_equal(strata_plan_from_json(exact, n - 1, &p), STRATA_EINVAL);
    free(exact);
    /* No "terminals": derived, as for a strata_plan_spec without them. */
    {
        static const char bare[] = HEAD "\"invocations\":[" INV("") "]}";

        assert_int_equal(strata_plan_from_json(bare, sizeof(bare) - 1, &p),
                         STRATA_OK);
        assert_int_equal(strata_plan_num_terminals(p), 1);
        assert_string_equal(strata_plan_terminal_at(p, 0), "a");
        strata_plan_destroy(p);
    }
    assert_int_equal(strata_plan_from_json(NULL, 1, &p), STRATA_EINVAL);
    assert_non_null(strstr(strata_errmsg(), "json"));
    assert_int_equal(strata_plan_from_json(doc, n, NULL), STRATA_EINVAL);
    assert_int_equal(strata_plan_to_json(NULL, NULL, NULL), STRATA_EINVAL);
    strata_plan_json_free(NULL);
}

/* The n-th allocation failing, for every n: STRATA_ENOMEM, nothing else,
 * and (in the ASan build) no leak. */
static void test_plan_json_allocation_countdown(void **state)
{
    size_t len;
    char *text = slurp("degree_buckets.json", &len);
    long n;

    (void)state;
    for (n = 1; n < 100000; n++) {
        strata_plan *p = NULL;
        char *out = NULL;
        strata_err err;

        base_alloc_fail_after(n);
        err = strata_plan_from_json(text, len, &p);
        if (!err) {
            err = strata_plan_to_json(p, &out, NULL);
            strata_plan_json_free(out);
            strata_plan_destroy(p);
        }
        base_alloc_fail_after(0);
        if (err && err != STRATA_ENOMEM)
            fail_msg("allocation %ld: %s (%s)", n, strata_errname(err),
                     strata_errmsg());
        if (!err && base_alloc_failures() == 0)
            break;
    }
    assert_true(n > 10 && n < 100000);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_json_round_trip_of_built_plan),
        cmocka_unit_test(test_plan_json_reference_file_loads),
        cmocka_unit_test(test_plan_json_malformed_names_the_field),
        cmocka_unit_test(test_plan_json_not_terminated_text),
        cmocka_unit_test(test_plan_json_allocation_countdown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
