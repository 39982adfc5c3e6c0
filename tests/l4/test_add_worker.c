/*
 * strata_worker_add_worker and the L4 configuration: wrong level pairs,
 * ownership, started workers, destroying an owned child, an L4 with chips.
 */
#include "l4_kit.h"

#include <unistd.h>

static strata_worker *make(int level, size_t chips)
{
    static const int ids[2] = {0, 1};
    strata_worker_config cfg;
    strata_worker *w = NULL;
    strata_worker_config_init(&cfg, level);
    cfg.chip_ids = chips ? ids : NULL;
    cfg.num_chips = chips;
    it_ok(it_worker_create(&cfg, &w));
    return w;
}

/* Adds child to parent and returns its node id (then call owned()). */
static int add(strata_worker *parent, strata_worker *child)
{
    int id = -7;
    it_ok(strata_worker_add_worker(parent, child, &id));
    return id;
}

static void expect_add(strata_err want, strata_worker *parent,
                       strata_worker *child)
{
    int id = -7;
    it_expect(want, strata_worker_add_worker(parent, child, &id));
    assert_int_equal(id, -7); /* not written on failure */
    assert_true(strata_errmsg()[0] != '\0');
}

/* A child now owned by a parent: destroying it directly is refused with
 * STRATA_ESTATE, which also drops it from the fixture's tracking. */
static strata_worker *owned(strata_worker *child)
{
    assert_int_equal(it_worker_destroy(child), STRATA_ESTATE);
    return child;
}

static strata_err fill_node0(strata_orch *o, const strata_args *args,
                             void *user)
{
    (void)args;
    return l4_fill(o, 0, user, 0, 8, 40, 0);
}

static void test_add_worker_wrong_levels_einval(void **state)
{
    (void)state;
    testutil_snapshot before;
    testutil_snapshot_take(&before);
    strata_worker *l3a = make(3, 1), *l3b = make(3, 1);
    strata_worker *l4a = make(4, 0), *l4b = make(4, 0), *l5 = make(5, 0);

    expect_add(STRATA_EINVAL, l3a, l3b); /* an L3 takes no workers */
    l4_assert_contains(strata_errmsg(), "level-3");
    expect_add(STRATA_EINVAL, l4a, l4b); /* L4 under L4 */
    expect_add(STRATA_EINVAL, l5, l3a);  /* two levels down */
    expect_add(STRATA_EINVAL, l3a, l4a); /* upside down */
    expect_add(STRATA_EINVAL, l4a, l4a); /* itself */
    expect_add(STRATA_EINVAL, NULL, l3a);
    expect_add(STRATA_EINVAL, l4a, NULL);
    it_expect(STRATA_EINVAL, strata_worker_add_worker(l4a, l3a, NULL));
    assert_int_equal(strata_worker_num_nodes(l4a), 0);
    assert_int_equal(strata_worker_num_nodes(NULL), 0);
    /* A refused child is still the caller's: destroy works. */
    it_ok(it_worker_destroy(l3a));
    it_ok(it_worker_destroy(l3b));
    it_ok(it_worker_destroy(l4a));
    it_ok(it_worker_destroy(l4b));
    it_ok(it_worker_destroy(l5));
    testutil_assert_clean(&before);
}

static void test_add_worker_l4_with_chips_einval(void **state)
{
    (void)state;
    testutil_snapshot before;
    static const int ids[2] = {0, 1};
    strata_worker_config cfg;
    strata_worker *w = NULL;
    testutil_snapshot_take(&before);
    strata_worker_config_init(&cfg, 4);
    cfg.chip_ids = ids;
    cfg.num_chips = 2;
    it_expect(STRATA_EINVAL, strata_worker_create(&cfg, &w));
    assert_null(w);
    l4_assert_contains(strata_errmsg(), "strata_worker_add_worker");
    testutil_assert_clean(&before);
}

static void test_add_worker_child_already_owned_estate(void **state)
{
    (void)state;
    testutil_snapshot before;
    testutil_snapshot_take(&before);
    strata_worker *p1 = make(4, 0), *p2 = make(4, 0);
    strata_worker *c = make(3, 1);

    assert_int_equal(add(p1, c), 0);
    owned(c);
    expect_add(STRATA_ESTATE, p2, c);
    expect_add(STRATA_ESTATE, p1, c);
    assert_int_equal(strata_worker_num_nodes(p1), 1);
    assert_int_equal(strata_worker_num_nodes(p2), 0);
    /* An owned child is started by its parent, not directly. */
    it_expect(STRATA_ESTATE, strata_worker_init(c));
    /* A parent destroyed before init frees its never-started children. */
    it_ok(it_worker_destroy(p1));
    it_ok(it_worker_destroy(p2));
    testutil_assert_clean(&before);
}

static void test_add_worker_started_parent_or_child_estate(void **state)
{
    (void)state;
    testutil_snapshot before;
    testutil_snapshot_take(&before);
    strata_worker *p = make(4, 0), *c = make(3, 1), *late = make(3, 1);
    strata_worker *p2 = make(4, 0), *started = make(3, 1);

    assert_int_equal(add(p, c), 0);
    owned(c);
    it_ok(strata_worker_init(p));
    expect_add(STRATA_ESTATE, p, late); /* parent started */
    it_ok(strata_worker_init(started));
    expect_add(STRATA_ESTATE, p2, started); /* child started */
    assert_int_equal(strata_worker_num_nodes(p), 1);
    assert_int_equal(strata_worker_num_nodes(p2), 0);
    it_ok(it_worker_destroy(late));
    it_ok(it_worker_destroy(started));
    it_ok(it_worker_destroy(p2));
    it_ok(it_worker_destroy(p));
    testutil_assert_clean(&before);
}

static void test_add_worker_destroy_owned_child_estate(void **state)
{
    (void)state;
    testutil_snapshot before;
    strata_buffer *b = NULL;
    testutil_snapshot_take(&before);
    strata_worker *p = make(4, 0), *c0 = make(3, 2), *c1 = make(3, 1);

    assert_int_equal(add(p, c0), 0);
    assert_int_equal(add(p, c1), 1);
    owned(c0);
    owned(c1);
    /* Before and after the parent starts: refused, nothing breaks. */
    it_expect(STRATA_ESTATE, strata_worker_destroy(c0));
    l4_assert_contains(strata_errmsg(), "parent");
    assert_int_equal(strata_worker_num_nodes(p), 2);
    assert_int_equal(strata_worker_node_pid(p, 0), -1); /* not started */
    it_ok(strata_worker_init(p));
    it_expect(STRATA_ESTATE, strata_worker_destroy(c1));
    assert_true(strata_worker_node_pid(p, 0) > 0);
    assert_true(strata_worker_node_pid(p, 1) > 0);
    assert_int_not_equal(strata_worker_node_pid(p, 0),
                         strata_worker_node_pid(p, 1));
    assert_int_equal(strata_worker_node_pid(p, 2), -1);
    assert_int_equal(strata_worker_node_pid(p, -1), -1);
    assert_int_equal(strata_worker_chip_pid(p, 0), -1); /* an L4 has none */
    assert_int_equal(strata_worker_num_chips(p), 0);
    it_ok(strata_worker_create_buffer(p, 8 * sizeof(uint32_t), &b));
    it_ok(strata_worker_run(p, fill_node0, NULL, b));
    for (uint32_t i = 0; i < 8; i++)
        assert_int_equal(it_u32(b)[i], 40 + i);
    it_expect(STRATA_ESTATE, strata_worker_destroy(c0));
    it_ok(strata_worker_run(p, fill_node0, NULL, b));
    it_ok(it_worker_destroy(p));
    testutil_assert_clean(&before);
}

static void test_add_worker_ids_sequential_ok(void **state)
{
    (void)state;
    testutil_snapshot before;
    testutil_snapshot_take(&before);
    strata_worker *p = make(4, 0);
    for (int i = 0; i < 3; i++) {
        strata_worker *c = make(3, 1);
        assert_int_equal(add(p, c), i);
        owned(c);
    }
    assert_int_equal(strata_worker_num_nodes(p), 3);
    it_ok(strata_worker_init(p));
    for (int i = 0; i < 3; i++) {
        pid_t pid = strata_worker_node_pid(p, i);
        assert_true(pid > 0);
        assert_true(testutil_pid_exists(pid));
        assert_int_not_equal(pid, getpid());
    }
    it_expect(STRATA_ESTATE, strata_worker_init(p));
    it_ok(it_worker_destroy(p));
    testutil_assert_clean(&before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_add_worker_wrong_levels_einval,
                                  it_teardown),
        cmocka_unit_test_teardown(test_add_worker_l4_with_chips_einval,
                                  it_teardown),
        cmocka_unit_test_teardown(test_add_worker_child_already_owned_estate,
                                  it_teardown),
        cmocka_unit_test_teardown(
            test_add_worker_started_parent_or_child_estate, it_teardown),
        cmocka_unit_test_teardown(test_add_worker_destroy_owned_child_estate,
                                  it_teardown),
        cmocka_unit_test_teardown(test_add_worker_ids_sequential_ok,
                                  it_teardown),
    };
    return cmocka_run_group_tests(tests, l4_setup, NULL);
}
