/*
 * An 80-chip domain: no fixed rank cap anywhere between the spec and the
 * kernel's strata_comm_context. 80 chip processes, workers in a shuffled
 * order, tiny windows, an allreduce-style exchange checked on every rank,
 * then a second domain over every other chip in the same run.
 */
#define _GNU_SOURCE
#include "dom_kit.h"

#include <stdlib.h>
#include <string.h>

#define CHIPS 80
#define COUNT 16

struct big {
    int chip_ids[CHIPS]; /* worker config: 100, 101, ... */
    int order[CHIPS];    /* domain workers: a permutation */
    int half[CHIPS / 2];
    strata_buffer *out, *out2, *probe;
    strata_domain *d, *d2;
    strata_chip_domain_ctx last;
};

static strata_err big_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)args;
    struct big *b = user;
    struct dom_spec sp;

    dom_spec_init(&sp, "eighty", b->order, CHIPS, 256);
    dom_spec_buf(&sp, "vec", STRATA_U32, COUNT);
    dom_spec_buf(&sp, "flag", STRATA_U32, 1);
    it_try(strata_orch_allocate_domain(o, &sp.spec, &b->d));
    it_try(strata_domain_context(b->d, b->order[CHIPS - 1], &b->last));
    it_try(dom_submit_probe(o, b->d, b->order, CHIPS, b->probe));
    it_try(dom_submit_allreduce(o, b->d, b->order, CHIPS, 0, COUNT, COUNT * 4,
                                77, b->out));
    dom_spec_init(&sp, "forty", b->half, CHIPS / 2, 256);
    it_try(strata_orch_allocate_domain(o, &sp.spec, &b->d2));
    return dom_submit_allreduce(o, b->d2, b->half, CHIPS / 2, 0, COUNT,
                                COUNT * 4, 78, b->out2);
}

static void test_domain_scale_80_chip_allreduce(void **state)
{
    (void)state;
    testutil_snapshot before;
    struct big b;
    strata_worker *w = NULL;
    testutil_snapshot_take(&before);
    for (int i = 0; i < CHIPS; i++) {
        b.chip_ids[i] = 100 + i;
        /* 37 is coprime with 80: a full permutation. */
        b.order[i] = 100 + (i * 37 + 5) % CHIPS;
    }
    for (int i = 0; i < CHIPS / 2; i++)
        b.half[i] = b.order[2 * i + 1];
    double t0 = testutil_now();
    it_ok(it_worker_start(b.chip_ids, CHIPS, 0, &w));
    double t_init = testutil_now() - t0;
    it_ok(strata_worker_create_buffer(w, CHIPS * COUNT * 4, &b.out));
    it_ok(strata_worker_create_buffer(w, CHIPS * COUNT * 4, &b.out2));
    it_ok(strata_worker_create_buffer(w, CHIPS * sizeof(struct dom_probe),
                                      &b.probe));
    t0 = testutil_now();
    it_ok(strata_worker_run(w, big_orch, NULL, &b));
    double t_run = testutil_now() - t0;
    print_message("80 chips: init %.3f s, run %.3f s\n", t_init, t_run);
    assert_int_equal(b.last.domain_rank, CHIPS - 1);
    assert_int_equal(b.last.domain_size, CHIPS);
    const struct dom_probe *p = strata_buffer_data(b.probe);
    for (uint32_t r = 0; r < CHIPS; r++) {
        assert_int_equal(p[r].found, 1);
        assert_int_equal(p[r].chip, b.order[r]);
        assert_int_equal(p[r].rank, r);
        assert_int_equal(p[r].rank_count, CHIPS);
        assert_int_equal(p[r].bases_seen, CHIPS);
    }
    assert_int_equal(dom_check_allreduce(b.out, CHIPS, COUNT, 77), 0);
    assert_int_equal(dom_check_allreduce(b.out2, CHIPS / 2, COUNT, 78), 0);
    assert_true(strata_domain_freed(b.d));
    assert_true(strata_domain_freed(b.d2));
    assert_int_equal(dom_chip_window_maps(w, b.chip_ids, CHIPS), 0);
    it_ok(it_worker_destroy(w));
    testutil_assert_clean(&before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_domain_scale_80_chip_allreduce,
                                  it_teardown),
    };
    return cmocka_run_group_tests(tests, dom_setup, NULL);
}
