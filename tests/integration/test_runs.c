/*
 * Dependency inference and concurrency through the public API on real chip
 * and sub processes: chains, diamonds, byte ranges (disjoint slices run
 * concurrently, overlapping views serialize), random accesses against
 * the order rule, groups, subs.
 */
#define _GNU_SOURCE
#include "it_kernels.h"

#include <string.h>

static strata_callable k_pair, k_log_op, k_barrier, k_touch;

/* t0: my slice; t1 (NO_DEP): two flags; s0: my index. Raises my flag and
 * waits for the other's, so two of these finish only when concurrent. */
static strata_err pair_kernel(strata_chip *chip, const strata_args *a)
{
    (void)chip;
    uint32_t *flags = it_arg_u32(a, 1);
    size_t me = (size_t)strata_args_scalar(a, 0);
    testutil_store_u32(&flags[me], 1);
    if (!testutil_wait_u32(&flags[1 - me], 1, IT_WAIT_S)) {
        strata_errmsg_set("pair %zu: the other half never ran alongside", me);
        return STRATA_ETIMEDOUT;
    }
    uint32_t *t = it_arg_u32(a, 0);
    for (size_t i = 0; i < it_arg_count(a, 0); i++)
        t[i] += (uint32_t)me + 1;
    return STRATA_OK;
}

/* t0 (NO_DEP): log {counter, then start/end ticket per task id}; s0: task
 * id; s1: 0 = fill t1 with s2, 1 = copy t1 into t2. Takes ~20 ms. */
static strata_err log_op_kernel(strata_chip *chip, const strata_args *a)
{
    (void)chip;
    uint32_t *log = it_arg_u32(a, 0);
    size_t id = (size_t)strata_args_scalar(a, 0);
    testutil_store_u32(&log[1 + 2 * id], testutil_add_u32(&log[0], 1) + 1);
    testutil_busy(0.02);
    uint32_t *t1 = it_arg_u32(a, 1);
    for (size_t i = 0; i < it_arg_count(a, 1); i++) {
        if (strata_args_scalar(a, 1) == 0)
            t1[i] = (uint32_t)strata_args_scalar(a, 2);
        else
            it_arg_u32(a, 2)[i] = t1[i];
    }
    testutil_store_u32(&log[2 + 2 * id], testutil_add_u32(&log[0], 1) + 1);
    return STRATA_OK;
}

/* t0 (NO_DEP): arrival counter; t1: my output word; s0: group size. */
static strata_err barrier_kernel(strata_chip *chip, const strata_args *a)
{
    uint32_t *count = it_arg_u32(a, 0);
    testutil_add_u32(count, 1);
    if (!testutil_wait_u32_ge(count, (uint32_t)strata_args_scalar(a, 0),
                              IT_WAIT_S)) {
        strata_errmsg_set("group member on chip %d waited alone",
                          strata_chip_id(chip));
        return STRATA_ETIMEDOUT;
    }
    it_arg_u32(a, 1)[0] = 100 + (uint32_t)strata_chip_id(chip);
    return STRATA_OK;
}

/* t0 (NO_DEP): log {counter, then start/end ticket per task id}; t1: the
 * range it reads or writes; s0: task id. About 1 ms. */
static strata_err touch_kernel(strata_chip *chip, const strata_args *a)
{
    (void)chip;
    uint32_t *log = it_arg_u32(a, 0);
    size_t id = (size_t)strata_args_scalar(a, 0);
    testutil_store_u32(&log[1 + 2 * id], testutil_add_u32(&log[0], 1) + 1);
    testutil_busy(0.001);
    testutil_store_u32(&log[2 + 2 * id], testutil_add_u32(&log[0], 1) + 1);
    return STRATA_OK;
}

/* ---- chain and diamond */

static strata_err chain_orch(strata_orch *o, const strata_args *args,
                             void *user)
{
    struct it_fx *f = user;
    /* The run's own args reach the orch fn. */
    if (strata_args_num_scalars(args) != 1 || strata_args_num_tensors(args))
        return STRATA_EINVAL;
    uint32_t base = (uint32_t)strata_args_scalar(args, 0);
    it_try(it_submit_fill(o, 0, f->b[0], 0, f->n, base, 20000));
    it_try(it_submit_scale(o, 1, f->b[0], f->b[1], f->n, 2, 1));
    return it_submit_scale(o, 2, f->b[1], f->b[2], f->n, 3, 0);
}

static void test_runs_chain_ordered_values(void **state)
{
    (void)state;
    struct it_fx f;
    strata_args *args = NULL;
    it_fx_start(&f, 256);
    it_ok(strata_args_create(&args));
    it_ok(strata_args_add_scalar(args, 10));
    it_ok(strata_worker_run(f.w, chain_orch, args, &f));
    strata_args_destroy(args);
    for (uint32_t i = 0; i < f.n; i++)
        assert_int_equal(it_fx_w(&f, 2)[i], 3 * (2 * (i + 10) + 1));
    it_fx_end(&f);
}

static strata_err diamond_orch(strata_orch *o, const strata_args *args,
                               void *user)
{
    (void)args;
    struct it_fx *f = user;
    strata_args *a = NULL;
    it_try(it_submit_fill(o, 0, f->b[0], 0, f->n, 1, 20000));
    it_try(it_submit_scale(o, 1, f->b[0], f->b[1], f->n, 2, 0));
    it_try(it_submit_scale(o, 2, f->b[0], f->b[2], f->n, 3, 0));
    it_try(it_args1(f->b[1], 0, f->n, STRATA_IN, &a));
    strata_err e = it_add_u32(a, f->b[2], 0, f->n, STRATA_IN);
    if (e == STRATA_OK)
        e = it_add_u32(a, f->b[3], 0, f->n, STRATA_OUT);
    if (e == STRATA_OK)
        e = strata_orch_submit_next_level(o, it_k_add, a, 3);
    strata_args_destroy(a);
    return e;
}

static void test_runs_diamond_joins_both_branches(void **state)
{
    (void)state;
    struct it_fx f;
    it_fx_start(&f, 128);
    it_ok(strata_worker_run(f.w, diamond_orch, NULL, &f));
    for (uint32_t i = 0; i < f.n; i++)
        assert_int_equal(it_fx_w(&f, 3)[i], 5 * (i + 1));
    it_fx_end(&f);
}

/* ---- independent tasks and concurrency */

static strata_err independent_orch(strata_orch *o, const strata_args *args,
                                   void *user)
{
    (void)args;
    struct it_fx *f = user;
    for (size_t i = 0; i < 16; i++)
        it_try(it_submit1(o, it_k_chip_id, it_ids4[i % 4], f->b[0], i, 1,
                          STRATA_OUT));
    return STRATA_OK;
}

static void test_runs_independent_tasks_on_four_chips(void **state)
{
    (void)state;
    struct it_fx f;
    it_fx_start(&f, 16);
    memset(it_fx_w(&f, 0), 0xff, 16 * sizeof(uint32_t));
    it_ok(strata_worker_run(f.w, independent_orch, NULL, &f));
    for (size_t i = 0; i < 16; i++)
        assert_int_equal(it_fx_w(&f, 0)[i], (uint32_t)it_ids4[i % 4]);
    it_fx_end(&f);
}

struct pair_ctx {
    struct it_fx *f;
    strata_tag tag;
};

static strata_err pair_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)args;
    struct pair_ctx *p = user;
    size_t half = p->f->n / 2;
    for (size_t me = 0; me < 2; me++) {
        strata_args *a = NULL;
        it_try(it_args1(p->f->b[0], me * half, half, p->tag, &a));
        strata_err e = it_add_u32(a, p->f->b[1], 0, 2, STRATA_NO_DEP);
        if (e == STRATA_OK)
            e = strata_args_add_scalar(a, me);
        if (e == STRATA_OK)
            e = strata_orch_submit_next_level(o, k_pair, a, (int)me);
        strata_args_destroy(a);
        it_try(e);
    }
    return STRATA_OK;
}

static void test_runs_disjoint_slices_run_concurrently(void **state)
{
    (void)state;
    struct it_fx f;
    static const strata_tag tags[] = {STRATA_OUT, STRATA_INOUT,
                                      STRATA_OUT_EXISTING};
    it_fx_start(&f, 64);
    for (size_t t = 0; t < 3; t++) {
        struct pair_ctx p = {&f, tags[t]};
        memset(it_fx_w(&f, 0), 0, 64 * sizeof(uint32_t));
        memset(it_fx_w(&f, 1), 0, 2 * sizeof(uint32_t));
        it_ok(strata_worker_run(f.w, pair_orch, NULL, &p));
        for (size_t i = 0; i < 64; i++)
            assert_int_equal(it_fx_w(&f, 0)[i], i < 32 ? 1 : 2);
    }
    it_fx_end(&f);
}

static strata_err submit_log_op(strata_orch *o, struct it_fx *f, int chip,
                                uint32_t id, size_t off, size_t n,
                                strata_tag tag, uint32_t value)
{
    strata_args *a = NULL;
    it_try(it_args1(f->b[5], 0, f->n, STRATA_NO_DEP, &a));
    strata_err e = it_add_u32(a, f->b[0], off, n, tag);
    if (e == STRATA_OK && tag == STRATA_IN) /* copy into b[1][0..n) */
        e = it_add_u32(a, f->b[1], 0, n, STRATA_OUT);
    if (e == STRATA_OK)
        e = strata_args_add_scalar(a, id);
    if (e == STRATA_OK)
        e = strata_args_add_scalar(a, tag == STRATA_IN ? 1 : 0);
    if (e == STRATA_OK)
        e = strata_args_add_scalar(a, value);
    if (e == STRATA_OK)
        e = strata_orch_submit_next_level(o, k_log_op, a, chip);
    strata_args_destroy(a);
    return e;
}

static strata_err overlap_orch(strata_orch *o, const strata_args *args,
                               void *user)
{
    (void)args;
    struct it_fx *f = user;
    /* T0 writes [0,64); T1 reads [32,96) (RAW on [32,64)); T2 writes
     * [48,80) (WAR on T1, WAW on T0); each on its own chip. */
    it_try(submit_log_op(o, f, 0, 0, 0, 64, STRATA_OUT, 1));
    it_try(submit_log_op(o, f, 1, 1, 32, 64, STRATA_IN, 0));
    return submit_log_op(o, f, 2, 2, 48, 32, STRATA_OUT_EXISTING, 3);
}

static void test_runs_overlapping_views_serialize(void **state)
{
    (void)state;
    struct it_fx f;
    it_fx_start(&f, 128);
    it_ok(strata_worker_run(f.w, overlap_orch, NULL, &f));
    const uint32_t *log = it_fx_w(&f, 5), *x = it_fx_w(&f, 0),
                   *y = it_fx_w(&f, 1);
    assert_int_equal(log[0], 6);
    assert_true(log[2 + 0] < log[1 + 2]); /* T0 ends before T1 starts */
    assert_true(log[2 + 2] < log[1 + 4]); /* T1 ends before T2 starts */
    for (size_t i = 0; i < 64; i++)
        assert_int_equal(y[i], i < 32 ? 1 : 0);
    for (size_t i = 0; i < 128; i++)
        assert_int_equal(x[i], i < 48 ? 1 : i < 80 ? 3 : 0);
    it_fx_end(&f);
}

/* ---- random accesses: every conflicting pair runs in submission order */

#define RAND_TASKS 80
#define RAND_WORDS 64

struct rand_access {
    size_t off, n;
    bool write;
    bool group; /* with the next one, a group of two (both write) */
};

static struct rand_access rand_plan[RAND_TASKS];

/* Writes that cover earlier accesses, chains of them, partial overlaps,
 * reads between, and groups of two writers of one range (which do not
 * depend on each other: a later access must wait for both). */
static void rand_plan_make(uint32_t seed)
{
    for (size_t i = 0; i < RAND_TASKS; i++) {
        struct rand_access *r = &rand_plan[i];

        seed = seed * 1103515245u + 12345u;
        r->off = (seed >> 8) % RAND_WORDS;
        seed = seed * 1103515245u + 12345u;
        r->n = 1 + (seed >> 8) % (RAND_WORDS - r->off);
        if ((seed >> 20) % 4 == 0) { /* a whole-buffer write */
            r->off = 0;
            r->n = RAND_WORDS;
        }
        r->write = (seed >> 24) % 3 != 0;
        r->group = false;
        if (i + 1 < RAND_TASKS && (seed >> 12) % 7 == 0) {
            r->write = true;
            r->group = true;
            rand_plan[i + 1] = *r;
            rand_plan[i + 1].group = false;
            i++;
        }
    }
}

static strata_err rand_args(struct it_fx *f, size_t i, strata_args **a)
{
    const struct rand_access *r = &rand_plan[i];

    it_try(it_args1(f->b[5], 0, 1 + 2 * RAND_TASKS, STRATA_NO_DEP, a));
    it_try(it_add_u32(*a, f->b[0], r->off, r->n,
                      r->write ? STRATA_INOUT : STRATA_IN));
    return strata_args_add_scalar(*a, i);
}

static strata_err rand_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)args;
    struct it_fx *f = user;
    strata_err e = STRATA_OK;

    for (size_t i = 0; i < RAND_TASKS && e == STRATA_OK; i++) {
        strata_args *a[2] = {0};

        e = rand_args(f, i, &a[0]);
        if (e == STRATA_OK && rand_plan[i].group) {
            const int ids[2] = {(int)(i % 4), (int)((i + 1) % 4)};

            e = rand_args(f, i + 1, &a[1]);
            if (e == STRATA_OK)
                e = strata_orch_submit_next_level_group(
                    o, k_touch, (const strata_args *const *)a, ids, 2);
            i++;
        } else if (e == STRATA_OK) {
            e = strata_orch_submit_next_level(o, k_touch, a[0], (int)(i % 4));
        }
        strata_args_destroy(a[0]);
        strata_args_destroy(a[1]);
    }
    return e;
}

static bool conflict(const struct rand_access *x, const struct rand_access *y)
{
    return (x->write || y->write) && x->off < y->off + y->n &&
           y->off < x->off + x->n;
}

static void test_runs_random_accesses_keep_order(void **state)
{
    (void)state;
    struct it_fx f;

    it_fx_start(&f, 1 + 2 * RAND_TASKS);
    for (uint32_t seed = 1; seed <= 4; seed++) {
        uint32_t *log = it_fx_w(&f, 5);

        memset(log, 0, (1 + 2 * RAND_TASKS) * sizeof(uint32_t));
        rand_plan_make(seed);
        it_ok(strata_worker_run(f.w, rand_orch, NULL, &f));
        assert_int_equal(log[0], 2 * RAND_TASKS);
        for (size_t j = 0; j < RAND_TASKS; j++)
            for (size_t i = 0; i < j; i++) {
                bool members = rand_plan[i].group && i + 1 == j;

                if (!members && conflict(&rand_plan[i], &rand_plan[j]) &&
                    log[2 + 2 * i] > log[1 + 2 * j])
                    fail_msg("seed %u: task %zu ([%zu, +%zu) %s) started "
                             "before task %zu ([%zu, +%zu) %s) ended",
                             seed, j, rand_plan[j].off, rand_plan[j].n,
                             rand_plan[j].write ? "w" : "r", i,
                             rand_plan[i].off, rand_plan[i].n,
                             rand_plan[i].write ? "w" : "r");
            }
    }
    it_fx_end(&f);
}

/* ---- groups and subs */

static strata_err group_orch(strata_orch *o, const strata_args *args,
                             void *user)
{
    (void)args;
    struct it_fx *f = user;
    strata_args *a[4] = {0};
    strata_err e = STRATA_OK;
    /* Keep chip 2 busy first: the group must wait for it. */
    it_try(it_submit_fill(o, 2, f->b[2], 0, 1, 5, 30000));
    for (size_t i = 0; i < 4 && e == STRATA_OK; i++) {
        e = it_args1(f->b[1], 0, 1, STRATA_NO_DEP, &a[i]);
        if (e == STRATA_OK)
            e = it_add_u32(a[i], f->b[0], i, 1, STRATA_OUT);
        if (e == STRATA_OK)
            e = strata_args_add_scalar(a[i], 4);
    }
    if (e == STRATA_OK)
        e = strata_orch_submit_next_level_group(
            o, k_barrier, (const strata_args *const *)a, it_ids4, 4);
    for (size_t i = 0; i < 4; i++)
        strata_args_destroy(a[i]);
    return e;
}

static void test_runs_group_members_meet(void **state)
{
    (void)state;
    struct it_fx f;
    it_fx_start(&f, 8);
    for (int round = 0; round < 3; round++) {
        it_fx_w(&f, 1)[0] = 0;
        memset(it_fx_w(&f, 0), 0, 4 * sizeof(uint32_t));
        it_ok(strata_worker_run(f.w, group_orch, NULL, &f));
        for (size_t i = 0; i < 4; i++)
            assert_int_equal(it_fx_w(&f, 0)[i], 100 + (uint32_t)it_ids4[i]);
        assert_int_equal(it_fx_w(&f, 2)[0], 5);
    }
    it_fx_end(&f);
}

static strata_err subs_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)args;
    struct it_fx *f = user;
    /* chip fill -> sub scale -> chip scale -> sub scale */
    it_try(it_submit_fill(o, 0, f->b[0], 0, f->n, 1, 10000));
    it_try(it_submit_scale(o, -1, f->b[0], f->b[1], f->n, 2, 1));
    it_try(it_submit_scale(o, 1, f->b[1], f->b[2], f->n, 3, 0));
    it_try(it_submit_scale(o, -1, f->b[2], f->b[3], f->n, 1, 7));
    /* Independent sub tasks: more than there are sub workers. */
    for (size_t i = 0; i < 6; i++) {
        strata_args *a = NULL;
        it_try(it_args1(f->b[4], i, 1, STRATA_IN, &a));
        strata_err e = it_add_u32(a, f->b[4], 8 + i, 1, STRATA_OUT);
        if (e == STRATA_OK)
            e = strata_args_add_scalar(a, 10);
        if (e == STRATA_OK)
            e = strata_args_add_scalar(a, (uint32_t)i);
        if (e == STRATA_OK)
            e = strata_orch_submit_sub(o, it_s_scale, a);
        strata_args_destroy(a);
        it_try(e);
    }
    return STRATA_OK;
}

static void test_runs_sub_tasks_mix_with_chips(void **state)
{
    (void)state;
    struct it_fx f;
    it_fx_start(&f, 64);
    for (uint32_t i = 0; i < 6; i++)
        it_fx_w(&f, 4)[i] = i + 1;
    it_ok(strata_worker_run(f.w, subs_orch, NULL, &f));
    for (uint32_t i = 0; i < f.n; i++)
        assert_int_equal(it_fx_w(&f, 3)[i], 3 * (2 * (i + 1) + 1) + 7);
    for (uint32_t i = 0; i < 6; i++)
        assert_int_equal(it_fx_w(&f, 4)[8 + i], (i + 1) * 10 + i);
    it_fx_end(&f);
}

static int setup(void **state)
{
    (void)state;
    if (it_kernels_register() != 0)
        return -1;
    it_register(kernel, "runs.pair", pair_kernel, &k_pair);
    it_register(kernel, "runs.log_op", log_op_kernel, &k_log_op);
    it_register(kernel, "runs.barrier", barrier_kernel, &k_barrier);
    it_register(kernel, "runs.touch", touch_kernel, &k_touch);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_runs_chain_ordered_values, it_teardown),
        cmocka_unit_test_teardown(test_runs_diamond_joins_both_branches,
                                  it_teardown),
        cmocka_unit_test_teardown(test_runs_independent_tasks_on_four_chips,
                                  it_teardown),
        cmocka_unit_test_teardown(test_runs_disjoint_slices_run_concurrently,
                                  it_teardown),
        cmocka_unit_test_teardown(test_runs_overlapping_views_serialize,
                                  it_teardown),
        cmocka_unit_test_teardown(test_runs_random_accesses_keep_order,
                                  it_teardown),
        cmocka_unit_test_teardown(test_runs_group_members_meet, it_teardown),
        cmocka_unit_test_teardown(test_runs_sub_tasks_mix_with_chips,
                                  it_teardown),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
