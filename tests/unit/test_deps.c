/* Dependency inference: byte ranges, read/write hazards, pruning. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "orch_int.h"

#include <string.h>

static char storage[4096];
static strata_buffer buf_a;
static strata_buffer buf_b;
static struct orch_sched *s;

struct acc {
    strata_buffer *buf;
    size_t offset;
    size_t floats;
    strata_tag tag;
};

static int setup(void **state)
{
    struct orch_sched_cfg cfg = {0};

    (void)state;
    memset(&buf_a, 0, sizeof(buf_a));
    memset(&buf_b, 0, sizeof(buf_b));
    buf_a.id = 1;
    buf_a.size = 1024;
    buf_a.data = storage;
    buf_b.id = 2;
    buf_b.size = 1024;
    buf_b.data = storage + 1024;
    return orch_sched_create(&cfg, &s) == STRATA_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    orch_deps_forget(&buf_a);
    orch_deps_forget(&buf_b);
    orch_sched_destroy(s);
    return 0;
}

static strata_args *build(const struct acc *accs, size_t n)
{
    strata_args *a;

    assert_int_equal(strata_args_create(&a), STRATA_OK);
    for (size_t i = 0; i < n; i++) {
        size_t shape[1] = {accs[i].floats};

        assert_int_equal(strata_args_add_tensor(a, accs[i].buf, accs[i].offset,
                                                STRATA_F32, 1, shape,
                                                accs[i].tag),
                         STRATA_OK);
    }
    return a;
}

/* Plans and commits one task; returns it (slot stays allocated). */
static struct orch_task *task(const struct acc *accs, size_t n)
{
    strata_args *a = build(accs, n);
    struct dep_plan *p;
    struct orch_task *t;

    assert_int_equal(orch_slot_alloc(s, &t), STRATA_OK);
    assert_int_equal(orch_deps_plan(s, a, t, &p), STRATA_OK);
    orch_deps_commit(s, p, a, t);
    orch_deps_plan_free(s, p);
    strata_args_destroy(a);
    return t;
}

#define TASK(...)                                                              \
    task((const struct acc[]){__VA_ARGS__},                                    \
         sizeof((const struct acc[]){__VA_ARGS__}) / sizeof(struct acc))

/* Retire a task the way completion does: unpin, free the slot. */
static void retire(struct orch_task *t)
{
    for (uint32_t i = 0; i < t->num_bufs; i++)
        t->bufs[i]->pins--;
    t->num_bufs = 0;
    t->num_fanout = 0;
    orch_slot_free(s, t);
}

static bool depends(const struct orch_task *pred, const struct orch_task *t)
{
    for (uint32_t i = 0; i < pred->num_fanout; i++)
        if (pred->fanout[i].slot == t->slot && pred->fanout[i].gen == t->gen)
            return true;
    return false;
}

static void test_deps_read_after_write_waits(void **state)
{
    struct orch_task *w = TASK({&buf_a, 0, 4, STRATA_OUT});
    struct orch_task *r = TASK({&buf_a, 0, 4, STRATA_IN});

    (void)state;
    assert_int_equal(r->fanin, 1);
    assert_true(depends(w, r));
    assert_int_equal(buf_a.pins, 2);
    retire(r);
    retire(w);
    assert_int_equal(buf_a.pins, 0);
}

static void test_deps_disjoint_slices_independent(void **state)
{
    struct orch_task *w1 = TASK({&buf_a, 0, 4, STRATA_OUT});
    struct orch_task *w2 = TASK({&buf_a, 16, 4, STRATA_OUT});
    struct orch_task *r = TASK({&buf_a, 16, 4, STRATA_IN});

    (void)state;
    assert_int_equal(w2->fanin, 0);
    assert_int_equal(r->fanin, 1);
    assert_true(depends(w2, r));
    assert_false(depends(w1, r));
    retire(r);
    retire(w2);
    retire(w1);
}

static void test_deps_overlapping_views_serialize(void **state)
{
    struct orch_task *w = TASK({&buf_a, 0, 4, STRATA_OUT});
    struct orch_task *r1 = TASK({&buf_a, 8, 4, STRATA_IN});  /* [8,24) */
    struct orch_task *r2 = TASK({&buf_a, 16, 4, STRATA_IN}); /* [16,32) */

    (void)state;
    assert_true(depends(w, r1));
    assert_false(depends(w, r2));
    assert_int_equal(r2->fanin, 0);
    retire(r2);
    retire(r1);
    retire(w);
}

static void test_deps_write_after_read_and_write_wait(void **state)
{
    struct orch_task *r1 = TASK({&buf_a, 0, 4, STRATA_IN});
    struct orch_task *r2 = TASK({&buf_a, 0, 4, STRATA_IN});
    struct orch_task *w = TASK({&buf_a, 0, 4, STRATA_OUT_EXISTING});
    struct orch_task *w2 = TASK({&buf_a, 4, 1, STRATA_INOUT});

    (void)state;
    assert_int_equal(r2->fanin, 0); /* readers share */
    assert_int_equal(w->fanin, 2);  /* waits for both readers */
    assert_true(depends(r1, w));
    assert_true(depends(r2, w));
    assert_true(depends(w, w2)); /* write after write */
    retire(w2);
    retire(w);
    retire(r2);
    retire(r1);
}

static void test_deps_no_dep_is_untracked(void **state)
{
    struct orch_task *w = TASK({&buf_a, 0, 4, STRATA_OUT});
    struct orch_task *n = TASK({&buf_a, 0, 4, STRATA_NO_DEP});
    struct orch_task *w2 = TASK({&buf_a, 0, 4, STRATA_OUT});

    (void)state;
    assert_int_equal(n->fanin, 0);
    assert_false(depends(n, w2));
    assert_int_equal(n->num_bufs, 1); /* still pinned */
    retire(w2);
    retire(n);
    retire(w);
}

static void test_deps_finished_writer_pruned_newer_kept(void **state)
{
    struct orch_task *w1 = TASK({&buf_a, 0, 4, STRATA_OUT});
    struct orch_task *w2 = TASK({&buf_a, 0, 4, STRATA_OUT});
    struct orch_task *r;

    (void)state;
    assert_true(depends(w1, w2));
    retire(w1); /* the older writer retires first */
    r = TASK({&buf_a, 0, 4, STRATA_IN});
    assert_int_equal(r->fanin, 1);
    assert_true(depends(w2, r)); /* the newer writer's entry survives */
    retire(r);
    retire(w2);
    r = TASK({&buf_a, 0, 4, STRATA_IN});
    assert_int_equal(r->fanin, 0);
    retire(r);
}

static void test_deps_one_edge_per_predecessor(void **state)
{
    struct orch_task *w =
        TASK({&buf_a, 0, 8, STRATA_OUT}, {&buf_b, 0, 8, STRATA_OUT});
    struct orch_task *r =
        TASK({&buf_a, 0, 4, STRATA_IN}, {&buf_a, 16, 4, STRATA_IN},
             {&buf_b, 0, 8, STRATA_IN});

    (void)state;
    assert_int_equal(r->fanin, 1);
    assert_int_equal(w->num_fanout, 1);
    assert_int_equal(r->num_bufs, 2);
    retire(r);
    retire(w);
}

static void test_deps_self_overlapping_writes_rejected(void **state)
{
    strata_args *a = build((const struct acc[]){{&buf_a, 0, 4, STRATA_OUT},
                                                {&buf_a, 8, 4, STRATA_INOUT}},
                           2);
    struct dep_plan *p;
    struct orch_task *t;

    (void)state;
    assert_int_equal(orch_slot_alloc(s, &t), STRATA_OK);
    assert_int_equal(orch_deps_plan(s, a, t, &p), STRATA_EINVAL);
    assert_non_null(strstr(strata_errmsg(), "overlapping"));
    orch_slot_free(s, t);
    strata_args_destroy(a);
    /* Reading and writing the same bytes in one task is fine. */
    t = TASK({&buf_a, 0, 4, STRATA_IN}, {&buf_a, 0, 4, STRATA_OUT});
    assert_int_equal(t->fanin, 0);
    retire(t);
}

static void test_deps_plans_before_commit_share_reservations(void **state)
{
    struct orch_task *w = TASK({&buf_a, 0, 4, STRATA_OUT});
    strata_args *a = build((const struct acc[]){{&buf_a, 0, 4, STRATA_IN}}, 1);
    struct orch_task *m[8];
    struct dep_plan *p[8];

    (void)state;
    /* Like a group: every member planned, then every member committed. */
    for (int i = 0; i < 8; i++) {
        assert_int_equal(orch_slot_alloc(s, &m[i]), STRATA_OK);
        assert_int_equal(orch_deps_plan(s, a, m[i], &p[i]), STRATA_OK);
    }
    assert_int_equal(w->pending_fanout, 8);
    for (int i = 0; i < 8; i++) {
        orch_deps_commit(s, p[i], a, m[i]);
        orch_deps_plan_free(s, p[i]);
    }
    assert_int_equal(w->pending_fanout, 0);
    assert_int_equal(w->num_fanout, 8);
    for (int i = 0; i < 8; i++)
        retire(m[i]);
    retire(w);
    strata_args_destroy(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deps_read_after_write_waits),
        cmocka_unit_test(test_deps_disjoint_slices_independent),
        cmocka_unit_test(test_deps_overlapping_views_serialize),
        cmocka_unit_test(test_deps_write_after_read_and_write_wait),
        cmocka_unit_test(test_deps_no_dep_is_untracked),
        cmocka_unit_test(test_deps_finished_writer_pruned_newer_kept),
        cmocka_unit_test(test_deps_one_edge_per_predecessor),
        cmocka_unit_test(test_deps_self_overlapping_writes_rejected),
        cmocka_unit_test(test_deps_plans_before_commit_share_reservations),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
