/* Task slots: generations, growth with stable pointers, FIFO queues. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "orch_int.h"

static struct orch_sched *make(void)
{
    struct orch_sched_cfg cfg = {0};
    struct orch_sched *s;

    assert_int_equal(orch_sched_create(&cfg, &s), STRATA_OK);
    return s;
}

static void test_slots_reuse_bumps_generation(void **state)
{
    struct orch_sched *s = make();
    struct orch_task *t;
    struct orch_task *u;
    struct edge e;

    (void)state;
    assert_int_equal(orch_slot_alloc(s, &t), STRATA_OK);
    e.slot = t->slot;
    e.gen = t->gen;
    assert_ptr_equal(orch_slot_live(s, e), t);
    orch_slot_free(s, t);
    assert_null(orch_slot_live(s, e)); /* stale, not dangling */
    assert_int_equal(orch_slot_alloc(s, &u), STRATA_OK);
    assert_int_equal(u->slot, e.slot); /* LIFO reuse */
    assert_int_not_equal(u->gen, e.gen);
    assert_null(orch_slot_live(s, e));
    orch_slot_free(s, u);
    orch_sched_destroy(s);
}

static void test_slots_growth_keeps_pointers(void **state)
{
    struct orch_sched *s = make();
    struct orch_task *ts[300];

    (void)state;
    for (int i = 0; i < 300; i++)
        assert_int_equal(orch_slot_alloc(s, &ts[i]), STRATA_OK);
    for (int i = 0; i < 300; i++) {
        assert_ptr_equal(s->slots[ts[i]->slot], ts[i]);
        for (int j = 0; j < i; j++)
            assert_int_not_equal(ts[i]->slot, ts[j]->slot);
    }
    for (int i = 0; i < 300; i++)
        orch_slot_free(s, ts[i]);
    orch_sched_destroy(s);
}

static void test_slots_queue_is_fifo(void **state)
{
    struct orch_sched *s = make();
    uint32_t head = ORCH_NONE;
    uint32_t tail = ORCH_NONE;
    struct orch_task *ts[5];

    (void)state;
    assert_null(orch_queue_pop(s, &head, &tail));
    for (int i = 0; i < 5; i++) {
        assert_int_equal(orch_slot_alloc(s, &ts[i]), STRATA_OK);
        orch_queue_push(s, &head, &tail, ts[i]);
    }
    for (int i = 0; i < 5; i++)
        assert_ptr_equal(orch_queue_pop(s, &head, &tail), ts[i]);
    assert_null(orch_queue_pop(s, &head, &tail));
    assert_int_equal(head, ORCH_NONE);
    assert_int_equal(tail, ORCH_NONE);
    for (int i = 0; i < 5; i++)
        orch_slot_free(s, ts[i]);
    orch_sched_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slots_reuse_bumps_generation),
        cmocka_unit_test(test_slots_growth_keeps_pointers),
        cmocka_unit_test(test_slots_queue_is_fifo),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
