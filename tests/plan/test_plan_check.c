/* Bundle plans, construction: what strata_plan_create refuses (cycles,
 * hazards, undeclared resources, ...) and names, and what it accepts
 * (ordered conflicts, disjoint partitions, concurrent reads). No worker:
 * a plan is checked before anything runs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <strata/plan.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_(a) (sizeof(a) / sizeof((a)[0]))

static const strata_plan_access RD_X = {"x", STRATA_PLAN_READ, 0, NULL, NULL};
static const strata_plan_access WR_X = {"x", STRATA_PLAN_WRITE, 0, NULL, NULL};
static const strata_plan_access RW_X = {"x", STRATA_PLAN_READ_WRITE, 0, NULL,
                                        NULL};
static const strata_plan_argument ARG_X[] = {{"x", "x"}};

/* An invocation of callable "k" on x with one access and deps. */
static strata_plan_invocation inv(const char *name, const strata_plan_access *a,
                                  const char *const *deps, size_t ndeps)
{
    strata_plan_invocation v = {0};

    v.name = name;
    v.callable = "k";
    v.depends_on = deps;
    v.num_depends_on = ndeps;
    v.arguments = ARG_X;
    v.num_arguments = 1;
    v.accesses = a;
    v.num_accesses = a ? 1 : 0;
    return v;
}

static strata_err make(const strata_plan_invocation *v, size_t n,
                       strata_plan **out)
{
    strata_plan_spec s = {0};

    s.invocations = v;
    s.num_invocations = n;
    return strata_plan_create(&s, out);
}

/* err is EINVAL and the message holds every one of the words. */
static void refused(strata_err err, const char *w1, const char *w2)
{
    assert_int_equal(err, STRATA_EINVAL);
    if (!strstr(strata_errmsg(), w1) || (w2 && !strstr(strata_errmsg(), w2)))
        fail_msg("message '%s' lacks '%s' or '%s'", strata_errmsg(), w1,
                 w2 ? w2 : "");
}

static void test_plan_cycle_refused_naming_both(void **state)
{
    static const char *const on_b[] = {"b"}, *const on_a[] = {"a"};
    strata_plan_invocation v[] = {inv("a", &RD_X, on_b, 1),
                                  inv("b", &RD_X, on_a, 1)};
    strata_plan *p = NULL;

    (void)state;
    refused(make(v, 2, &p), "'a'", "'b'");
    assert_non_null(strstr(strata_errmsg(), "cycle"));
    assert_null(p);
}

static void test_plan_long_cycle_refused_naming_two_members(void **state)
{
    static const char *const on_c[] = {"c"}, *const on_a[] = {"a"},
                             *const on_b[] = {"b"};
    strata_plan_invocation v[] = {
        inv("root", NULL, NULL, 0), inv("a", NULL, on_c, 1),
        inv("b", NULL, on_a, 1), inv("c", NULL, on_b, 1)};
    strata_plan *p = NULL;
    const char *m;
    int named = 0;

    (void)state;
    assert_int_equal(make(v, 4, &p), STRATA_EINVAL);
    m = strata_errmsg();
    named = !!strstr(m, "'a'") + !!strstr(m, "'b'") + !!strstr(m, "'c'");
    if (named < 2 || strstr(m, "'root'") || !strstr(m, "a cycle of 3"))
        fail_msg("cycle message: %s", m);
}

static void test_plan_self_dependency_refused(void **state)
{
    static const char *const on_a[] = {"a"};
    strata_plan_invocation v[] = {inv("a", NULL, on_a, 1)};
    strata_plan *p = NULL;

    (void)state;
    refused(make(v, 1, &p), "'a'", "itself");
}

static void test_plan_unordered_writes_refused_naming_both(void **state)
{
    strata_plan_invocation v[] = {inv("left", &WR_X, NULL, 0),
                                  inv("right", &WR_X, NULL, 0)};
    strata_plan *p = NULL;

    (void)state;
    refused(make(v, 2, &p), "'left'", "'right'");
    assert_non_null(strstr(strata_errmsg(), "'x'"));
}

static void test_plan_unordered_read_write_refused(void **state)
{
    strata_plan_invocation v[] = {inv("reader", &RD_X, NULL, 0),
                                  inv("mid", NULL, NULL, 0),
                                  inv("writer", &RW_X, NULL, 0)};
    strata_plan *p = NULL;

    (void)state;
    refused(make(v, 3, &p), "'reader'", "'writer'");
}

static void test_plan_concurrent_reads_accepted(void **state)
{
    strata_plan_invocation v[] = {inv("r1", &RD_X, NULL, 0),
                                  inv("r2", &RD_X, NULL, 0)};
    strata_plan *p = NULL;

    (void)state;
    assert_int_equal(make(v, 2, &p), STRATA_OK);
    assert_int_equal(strata_plan_num_terminals(p), 2);
    strata_plan_destroy(p);
}

static void test_plan_path_orders_conflict(void **state)
{
    /* w1 -> j -> w2: ordered through a third invocation. */
    static const char *const on_w1[] = {"w1"}, *const on_j[] = {"j"};
    strata_plan_invocation v[] = {inv("w2", &WR_X, on_j, 1),
                                  inv("j", NULL, on_w1, 1),
                                  inv("w1", &WR_X, NULL, 0)};
    strata_plan *p = NULL;

    (void)state;
    v[1].callable = STRATA_PLAN_JOIN;
    v[1].num_arguments = 0;
    assert_int_equal(make(v, 3, &p), STRATA_OK);
    /* Dependencies first: w1, j, w2. */
    assert_int_equal(strata_plan_order_at(p, 0), 2);
    assert_int_equal(strata_plan_order_at(p, 1), 1);
    assert_int_equal(strata_plan_order_at(p, 2), 0);
    assert_int_equal(strata_plan_order_at(p, 3), SIZE_MAX);
    assert_int_equal(strata_plan_num_terminals(p), 1);
    assert_string_equal(strata_plan_terminal_at(p, 0), "w2");
    strata_plan_destroy(p);
}

static void test_plan_partitioned_writes_accepted(void **state)
{
    static const strata_plan_access b0 = {"x", STRATA_PLAN_WRITE, 0, "rows",
                                          "0"};
    static const strata_plan_access b1 = {"x", STRATA_PLAN_WRITE, 0, "rows",
                                          "1"};
    static const strata_plan_access b1_again = {"x", STRATA_PLAN_WRITE, 0,
                                                "rows", "1"};
    static const strata_plan_access other = {"x", STRATA_PLAN_WRITE, 0, "cols",
                                             "2"};
    strata_plan_invocation v[] = {inv("b0", &b0, NULL, 0),
                                  inv("b1", &b1, NULL, 0)};
    strata_plan *p = NULL;

    (void)state;
    assert_int_equal(make(v, 2, &p), STRATA_OK);
    strata_plan_destroy(p);
    p = NULL;
    /* The same partition twice is no proof of disjointness. */
    v[0].accesses = &b1_again;
    refused(make(v, 2, &p), "'b0'", "'b1'");
    /* Nor are partitions of two different partitionings. */
    v[0].accesses = &other;
    refused(make(v, 2, &p), "'b0'", "'b1'");
    /* Nor a partitioned write against a whole read. */
    v[0].accesses = &RD_X;
    refused(make(v, 2, &p), "'b0'", "'b1'");
}

static void test_plan_undeclared_resource_refused(void **state)
{
    static const strata_plan_access ghost = {"ghost", STRATA_PLAN_READ, 0, NULL,
                                             NULL};
    strata_plan_invocation v[] = {inv("a", &ghost, NULL, 0)};
    strata_plan_resource r = {"declared", NULL, NULL, NULL, 8, 0, false};
    strata_plan_spec s = {&r, 1, v, 1, NULL, 0};
    strata_plan *p = NULL;

    (void)state;
    refused(strata_plan_create(&s, &p), "'a'", "'ghost'");
    /* A requirement declares it. */
    r.name = "ghost";
    assert_int_equal(strata_plan_create(&s, &p), STRATA_OK);
    assert_string_equal(strata_plan_resource_at(p, 0)->memory_space, "ram");
    strata_plan_destroy(p);
}

static void test_plan_bad_fields_refused(void **state)
{
    static const char *const unknown[] = {"nobody"};
    static const strata_plan_access half = {"x", STRATA_PLAN_WRITE, 0, "rows",
                                            NULL};
    static const strata_plan_access bad_mode = {"x", (strata_plan_mode)9, 0,
                                                NULL, NULL};
    static const strata_plan_access other_version = {"x", STRATA_PLAN_READ, 1,
                                                     NULL, NULL};
    static const strata_plan_argument one_arg[] = {{"x", "x"}};
    strata_plan_invocation v[2];
    strata_plan *p = NULL;
    const char *terms[] = {"a"};
    strata_plan_spec s = {0};

    (void)state;
    v[0] = inv("a", &RD_X, unknown, 1);
    refused(make(v, 1, &p), "'a'", "'nobody'");
    v[0] = inv("a", &half, NULL, 0);
    refused(make(v, 1, &p), "'a'", "partition");
    v[0] = inv("a", &bad_mode, NULL, 0);
    refused(make(v, 1, &p), "'a'", "mode");
    v[0] = inv("a", &other_version, NULL, 0);
    refused(make(v, 1, &p), "'a'", "snapshot");
    v[0] = inv("a", &RD_X, NULL, 0);
    v[1] = inv("a", &RD_X, NULL, 0);
    refused(make(v, 2, &p), "'a'", "twice");
    v[1] = inv("b", &RD_X, NULL, 0);
    v[1].snapshot_version = 4;
    refused(make(v, 2, &p), "'b'", "snapshot");
    v[1] = inv("", &RD_X, NULL, 0);
    refused(make(v, 2, &p), "invocation 1", NULL);
    v[0].phase = "later";
    refused(make(v, 1, &p), "'a'", "phase");
    v[0] = inv("t", NULL, NULL, 0);
    v[0].callable = STRATA_PLAN_TRANSFER;
    v[0].arguments = one_arg;
    refused(make(v, 1, &p), "'t'", "destination");
    /* Terminals that disagree with the DAG. */
    v[0] = inv("a", &RD_X, NULL, 0);
    v[1] = inv("b", &RD_X, NULL, 0);
    s.invocations = v;
    s.num_invocations = 2;
    s.terminals = terms;
    s.num_terminals = 1;
    refused(strata_plan_create(&s, &p), "'b'", "terminal");
    terms[0] = "zed";
    refused(strata_plan_create(&s, &p), "'zed'", NULL);
    /* Metadata must be an object without the schema's keys. */
    v[0].metadata_json = "[1]";
    refused(make(v, 1, &p), "'a'", "metadata");
    v[0].metadata_json = "{\"phase\": 1}";
    refused(make(v, 1, &p), "'a'", "phase");
    assert_null(p);
}

static void test_plan_edges_of_arguments(void **state)
{
    strata_plan_invocation v[] = {inv("a", &RD_X, NULL, 0)};
    strata_plan_spec s = {NULL, 0, v, 1, NULL, 0};
    strata_plan *p = NULL;

    (void)state;
    refused(strata_plan_create(NULL, &p), "spec", NULL);
    refused(strata_plan_create(&s, NULL), "out", NULL);
    s.num_invocations = 0;
    refused(strata_plan_create(&s, &p), "no invocations", NULL);
    s.num_invocations = STRATA_PLAN_MAX_INVOCATIONS + 1;
    refused(strata_plan_create(&s, &p), "4096", NULL);
    s.num_invocations = 1;
    v[0].num_depends_on = 1; /* depends_on NULL */
    refused(strata_plan_create(&s, &p), "NULL", NULL);
    strata_plan_destroy(NULL);
    assert_int_equal(strata_plan_num_invocations(NULL), 0);
    assert_null(strata_plan_invocation_at(NULL, 0));
    assert_null(strata_plan_terminal_at(NULL, 0));
    assert_int_equal(strata_plan_order_at(NULL, 0), SIZE_MAX);
}

/* A wide plan at the limit stays quick to check: 4096 invocations, each
 * writing x after the one before (a chain), and 4095 readers of the
 * last. */
static void test_plan_large_chain_accepted(void **state)
{
    size_t n = STRATA_PLAN_MAX_INVOCATIONS;
    strata_plan_invocation *v = calloc(n, sizeof(*v));
    char(*names)[16] = calloc(n, sizeof(*names));
    const char **deps = calloc(n, sizeof(*deps));
    strata_plan *p = NULL;

    (void)state;
    assert_non_null(v);
    for (size_t i = 0; i < n; i++) {
        snprintf(names[i], sizeof(names[i]), "i%zu", i);
        deps[i] = names[i ? i - 1 : 0];
        v[i] = inv(names[i], &WR_X, &deps[i], i ? 1 : 0);
    }
    assert_int_equal(make(v, n, &p), STRATA_OK);
    assert_int_equal(strata_plan_order_at(p, n - 1), n - 1);
    strata_plan_destroy(p);
    free(v);
    free(names);
    free(deps);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_cycle_refused_naming_both),
        cmocka_unit_test(test_plan_long_cycle_refused_naming_two_members),
        cmocka_unit_test(test_plan_self_dependency_refused),
        cmocka_unit_test(test_plan_unordered_writes_refused_naming_both),
        cmocka_unit_test(test_plan_unordered_read_write_refused),
        cmocka_unit_test(test_plan_concurrent_reads_accepted),
        cmocka_unit_test(test_plan_path_orders_conflict),
        cmocka_unit_test(test_plan_partitioned_writes_accepted),
        cmocka_unit_test(test_plan_undeclared_resource_refused),
        cmocka_unit_test(test_plan_bad_fields_refused),
        cmocka_unit_test(test_plan_edges_of_arguments),
        cmocka_unit_test(test_plan_large_chain_accepted),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
