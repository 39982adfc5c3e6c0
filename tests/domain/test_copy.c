/*
 * Staging copies between host buffers and a member's window:
 * strata_orch_copy_to / strata_orch_copy_from land at the carved buffer's
 * offset, round-trip exactly, refuse every bad range or target, and are
 * ordered after the tasks that write (copy_to) or read (copy_from) the host
 * bytes they touch.
 */
#define _GNU_SOURCE
#include "dom_kit.h"

#include <stdlib.h>
#include <string.h>

static strata_callable k_slow_copy, k_slow_fail;

/* t0 IN, t1 OUT (same size); s0 busy microseconds before copying. */
static strata_err slow_copy_kernel(strata_chip *chip, const strata_args *a)
{
    (void)chip;
    testutil_busy((double)strata_args_scalar(a, 0) * 1e-6);
    if (strata_args_tensor_nbytes(a, 0) != strata_args_tensor_nbytes(a, 1))
        return STRATA_EINVAL;
    memcpy(strata_args_tensor_data(a, 1), strata_args_tensor_data(a, 0),
           strata_args_tensor_nbytes(a, 0));
    return STRATA_OK;
}

/* t0 OUT (never written); fails with STRATA_EIO after s0 us. */
static strata_err slow_fail_kernel(strata_chip *chip, const strata_args *a)
{
    testutil_busy((double)strata_args_scalar(a, 0) * 1e-6);
    strata_errmsg_set("slow_fail on chip %d", strata_chip_id(chip));
    return STRATA_EIO;
}

static int setup(void **state)
{
    if (dom_setup(state) != 0)
        return -1;
    it_register(kernel, "copy.slow_copy", slow_copy_kernel, &k_slow_copy);
    it_register(kernel, "copy.slow_fail", slow_fail_kernel, &k_slow_fail);
    return 0;
}

static const int ids13[2] = {1, 3};

#define WIN 4096
#define HDR_OFF 0
#define HDR_BYTES 16
#define DATA_OFF 16
#define DATA_BYTES 1000

/* Domain "stage" on chips {1,3}: "hdr" u32[4] then "data" u8[1000]. */
static strata_err alloc_stage(strata_orch *o, strata_domain **d)
{
    struct dom_spec sp;

    dom_spec_init(&sp, "stage", ids13, 2, WIN);
    dom_spec_buf(&sp, "hdr", STRATA_U32, 4);
    dom_spec_buf(&sp, "data", STRATA_U8, DATA_BYTES);
    return strata_orch_allocate_domain(o, &sp.spec, d);
}

/* Submits read_window on chip `on`: rank's window [off, off + n) into
 * out[out_off, ...). */
static strata_err submit_read(strata_orch *o, const strata_domain *d, int on,
                              uint64_t rank, size_t off, size_t n,
                              strata_buffer *out, size_t out_off)
{
    strata_chip_domain_ctx c;
    strata_args *a = NULL;
    size_t shape[1] = {n};
    strata_err e;

    it_try(strata_domain_context(d, on, &c));
    it_try(strata_args_create(&a));
    e = strata_args_add_tensor(a, out, out_off, STRATA_U8, 1, shape,
                               STRATA_OUT);
    if (e == STRATA_OK)
        e = strata_args_add_scalar(a, c.device_ctx);
    if (e == STRATA_OK)
        e = strata_args_add_scalar(a, rank);
    if (e == STRATA_OK)
        e = strata_args_add_scalar(a, off);
    if (e == STRATA_OK)
        e = strata_orch_submit_next_level(o, dom_k_read_window, a, on);
    strata_args_destroy(a);
    return e;
}

static unsigned char pattern(size_t i)
{
    return (unsigned char)(i * 37 + 11);
}

/* ---- round trip */

struct trip {
    struct it_fx *f;
    strata_domain *d;
};

/* b[0]: source pattern; b[1]: chip 3's whole window as chip 1 reads it;
 * b[2]: copy_from of the data range; b[3]: copy_from of hdr. */
static strata_err trip_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)args;
    struct trip *t = user;
    struct it_fx *f = t->f;

    it_try(alloc_stage(o, &t->d));
    /* src[8, 508) -> chip 3's "data" at 100: window [116, 616). */
    it_try(strata_orch_copy_to(o, t->d, 3, "data", 100, f->b[0], 8, 500));
    /* src[0, 16) -> chip 3's "hdr": window [0, 16). */
    it_try(strata_orch_copy_to(o, t->d, 3, "hdr", 0, f->b[0], 0, HDR_BYTES));
    /* The last byte of "data" on chip 1 (rank 0). */
    it_try(strata_orch_copy_to(o, t->d, 1, "data", DATA_BYTES - 1, f->b[0],
                               4000, 1));
    /* Chip 1 reads rank 1's (chip 3's) whole window. */
    it_try(submit_read(o, t->d, 1, 1, 0, WIN, f->b[1], 0));
    it_try(strata_orch_copy_from(o, t->d, 3, "data", 100, f->b[2], 4, 500));
    it_try(strata_orch_copy_from(o, t->d, 3, "hdr", 4, f->b[3], 0, 12));
    return strata_orch_copy_from(o, t->d, 1, "data", DATA_BYTES - 1, f->b[3],
                                 100, 1);
}

static void test_domain_copy_round_trip_lands_at_buffer_offset(void **state)
{
    (void)state;
    struct it_fx f;
    struct trip t = {.f = &f};
    it_fx_start(&f, WIN / 4);
    unsigned char *src = strata_buffer_data(f.b[0]);
    for (size_t i = 0; i < WIN; i++)
        src[i] = pattern(i);
    it_ok(strata_worker_run(f.w, trip_orch, NULL, &t));
    const unsigned char *win = strata_buffer_data(f.b[1]);
    for (size_t i = 0; i < WIN; i++) {
        unsigned char want = 0;
        if (i < HDR_BYTES)
            want = pattern(i);
        else if (i >= DATA_OFF + 100 && i < DATA_OFF + 600)
            want = pattern(i - (DATA_OFF + 100) + 8);
        if (win[i] != want)
            fail_msg("chip 3 window byte %zu = %u, want %u", i, win[i], want);
    }
    const unsigned char *back = strata_buffer_data(f.b[2]);
    for (size_t i = 0; i < WIN; i++) {
        unsigned char want = i >= 4 && i < 504 ? pattern(i - 4 + 8) : 0;
        if (back[i] != want)
            fail_msg("copy_from byte %zu = %u, want %u", i, back[i], want);
    }
    const unsigned char *hdr = strata_buffer_data(f.b[3]);
    for (size_t i = 0; i < 12; i++)
        assert_int_equal(hdr[i], pattern(4 + i));
    assert_int_equal(hdr[12], 0);
    assert_int_equal(hdr[100], pattern(4000));
    assert_true(strata_domain_freed(t.d));
    it_fx_end(&f);
}

/* ---- range and target errors */

#define MAX_ERR 32

struct errs {
    struct it_fx *f;
    size_t n;
    const char *what[MAX_ERR];
    strata_err want[MAX_ERR], got[MAX_ERR];
    strata_domain *d;
    strata_err good_after;
};

static void rec(struct errs *e, const char *what, strata_err want,
                strata_err got)
{
    e->what[e->n] = what;
    e->want[e->n] = want;
    e->got[e->n] = got;
    e->n++;
}

static strata_err errs_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)args;
    struct errs *e = user;
    strata_buffer *h = e->f->b[0]; /* 4096 bytes */
    const strata_domain *d;

    it_try(alloc_stage(o, &e->d));
    d = e->d;
#define BOTH(what, want, ...)                                                  \
    do {                                                                       \
        rec(e, "to: " what, want, strata_orch_copy_to(o, __VA_ARGS__));        \
        rec(e, "from: " what, want, strata_orch_copy_from(o, __VA_ARGS__));    \
    } while (0)
    BOTH("unknown buffer", STRATA_EINVAL, d, 1, "nope", 0, h, 0, 4);
    BOTH("NULL buffer name", STRATA_EINVAL, d, 1, NULL, 0, h, 0, 4);
    BOTH("past the buffer end", STRATA_EINVAL, d, 1, "hdr", 8, h, 0, 9);
    BOTH("spills into the next buffer", STRATA_EINVAL, d, 1, "hdr", 0, h, 0,
         HDR_BYTES + 1);
    BOTH("offset past the buffer", STRATA_EINVAL, d, 1, "data", DATA_BYTES + 1,
         h, 0, 1);
    BOTH("offset + nbytes wraps", STRATA_EINVAL, d, 1, "data", SIZE_MAX, h, 0,
         2);
    BOTH("host range past the end", STRATA_EINVAL, d, 1, "data", 0, h, 4000,
         200);
    BOTH("host offset + nbytes wraps", STRATA_EINVAL, d, 1, "data", 0, h,
         SIZE_MAX, 2);
    BOTH("chip 0 not a member", STRATA_ENOENT, d, 0, "data", 0, h, 0, 4);
    BOTH("chip 9 not in the worker", STRATA_ENOENT, d, 9, "data", 0, h, 0, 4);
    BOTH("NULL domain", STRATA_EINVAL, NULL, 1, "data", 0, h, 0, 4);
    BOTH("NULL host buffer", STRATA_EINVAL, d, 1, "data", 0, NULL, 0, 4);
    rec(e, "to: NULL orch", STRATA_EINVAL,
        strata_orch_copy_to(NULL, d, 1, "data", 0, h, 0, 4));
    rec(e, "from: NULL orch", STRATA_EINVAL,
        strata_orch_copy_from(NULL, d, 1, "data", 0, h, 0, 4));
    /* Exact fits still work after all that. */
    e->good_after =
        strata_orch_copy_to(o, d, 1, "data", 0, h, 4096 - 1000, DATA_BYTES);
    if (e->good_after == STRATA_OK)
        e->good_after = strata_orch_copy_from(o, d, 3, "hdr", 0, h, 0, 16);
    it_try(strata_domain_release(e->d));
    BOTH("after release", STRATA_ESTATE, d, 1, "data", 0, h, 0, 4);
#undef BOTH
    return STRATA_OK;
}

static void test_domain_copy_bad_ranges_and_targets_refused(void **state)
{
    (void)state;
    struct it_fx f;
    struct errs *e = calloc(1, sizeof(*e));
    assert_non_null(e);
    e->f = &f;
    it_fx_start(&f, 1024);
    it_ok(strata_worker_run(f.w, errs_orch, NULL, e));
    size_t bad = 0;
    for (size_t i = 0; i < e->n; i++) {
        if (e->got[i] == e->want[i])
            continue;
        print_error("%s: got %s, want %s\n", e->what[i],
                    strata_errname(e->got[i]), strata_errname(e->want[i]));
        bad++;
    }
    assert_int_equal(e->n, 28);
    assert_int_equal(bad, 0);
    it_ok(e->good_after);
    assert_true(strata_domain_freed(e->d));
    free(e);
    it_fx_end(&f);
}

/* ---- ordering */

struct order {
    struct it_fx *f;
    strata_domain *d;
};

/* copy_to after a slow task on another chip that writes the source:
 * the copy must carry the task's values. copy_from into a host range a
 * slow task on another chip still reads: the task must see the old bytes.
 * copy_from after a slow kernel that writes the window: the new bytes. */
static strata_err order_orch(strata_orch *o, const strata_args *args,
                             void *user)
{
    (void)args;
    struct order *t = user;
    struct it_fx *f = t->f;
    strata_chip_domain_ctx c;
    strata_args *a = NULL;
    strata_err e;

    it_try(alloc_stage(o, &t->d));
    /* RAW: b[0][0, 64) (u32) written by a 100 ms fill on chip 0. */
    it_try(it_submit_fill(o, 0, f->b[0], 0, 64, 500, 100000));
    it_try(strata_orch_copy_to(o, t->d, 3, "data", 0, f->b[0], 0, 256));
    it_try(strata_orch_copy_from(o, t->d, 3, "data", 0, f->b[1], 0, 256));

    /* WAR: a 100 ms copy of b[2] on chip 2 (IN), then copy_from into it. */
    it_try(strata_args_create(&a));
    e = it_add_u32(a, f->b[2], 0, 64, STRATA_IN);
    if (e == STRATA_OK)
        e = it_add_u32(a, f->b[3], 0, 64, STRATA_OUT);
    if (e == STRATA_OK)
        e = strata_args_add_scalar(a, 100000);
    if (e == STRATA_OK)
        e = strata_orch_submit_next_level(o, k_slow_copy, a, 2);
    strata_args_destroy(a);
    it_try(e);
    it_try(strata_orch_copy_from(o, t->d, 3, "data", 0, f->b[2], 0, 256));

    /* Chip 1's kernel writes its own "data" after 100 ms busy; then a
     * copy_from of chip 1's window must see it. */
    it_try(strata_domain_context(t->d, 1, &c));
    it_try(strata_args_create(&a));
    e = it_add_u32(a, f->b[4], 0, 16, STRATA_IN);
    if (e == STRATA_OK)
        e = strata_args_add_scalar(a, c.device_ctx);
    if (e == STRATA_OK)
        e = strata_args_add_scalar(a, DATA_OFF);
    if (e == STRATA_OK)
        e = strata_args_add_scalar(a, 100000);
    if (e == STRATA_OK)
        e = strata_orch_submit_next_level(o, dom_k_write_window, a, 1);
    strata_args_destroy(a);
    it_try(e);
    return strata_orch_copy_from(o, t->d, 1, "data", 0, f->b[5], 0, 64);
}

static void test_domain_copy_ordered_after_tasks_on_host_bytes(void **state)
{
    (void)state;
    struct it_fx f;
    struct order t = {.f = &f};
    it_fx_start(&f, 64);
    for (uint32_t i = 0; i < 64; i++) {
        it_fx_w(&f, 2)[i] = 7000 + i; /* old bytes the slow reader must see */
        it_fx_w(&f, 4)[i] = 9000 + i; /* what the window writer writes */
    }
    it_ok(strata_worker_run(f.w, order_orch, NULL, &t));
    for (uint32_t i = 0; i < 64; i++) {
        assert_int_equal(it_fx_w(&f, 1)[i], 500 + i);  /* RAW */
        assert_int_equal(it_fx_w(&f, 3)[i], 7000 + i); /* WAR: old bytes */
        assert_int_equal(it_fx_w(&f, 2)[i], 500 + i);  /* then overwritten */
    }
    for (uint32_t i = 0; i < 16; i++)
        assert_int_equal(it_fx_w(&f, 5)[i], 9000 + i);
    it_fx_end(&f);
}

/* Window copies come after every task submitted to their chip before
 * them, also tasks the scheduler still holds: one waiting on a slow task
 * of another chip, and a group waiting for a busy member. */
static strata_err write_own(const strata_domain *d, int chip,
                            strata_buffer *src, size_t off, strata_args **out)
{
    strata_chip_domain_ctx c;
    strata_err e;

    it_try(strata_domain_context(d, chip, &c));
    it_try(strata_args_create(out));
    e = it_add_u32(*out, src, off, 16, STRATA_IN);
    if (e == STRATA_OK)
        e = strata_args_add_scalar(*out, c.device_ctx);
    if (e == STRATA_OK)
        e = strata_args_add_scalar(*out, DATA_OFF);
    if (e == STRATA_OK)
        e = strata_args_add_scalar(*out, 0);
    return e;
}

static strata_err held_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)args;
    struct order *t = user;
    struct it_fx *f = t->f;
    static const int busy3[1] = {3};
    strata_args *a = NULL, *g[2] = {NULL, NULL};
    strata_err e;

    it_try(alloc_stage(o, &t->d));
    /* Chip 1's writer reads b[1], which a 100 ms task on chip 0 makes
     * (from b[0]): it waits on that task, not in chip 1's queue. */
    it_try(strata_args_create(&a));
    e = it_add_u32(a, f->b[0], 0, 16, STRATA_IN);
    if (e == STRATA_OK)
        e = it_add_u32(a, f->b[1], 0, 16, STRATA_OUT);
    if (e == STRATA_OK)
        e = strata_args_add_scalar(a, 100000);
    if (e == STRATA_OK)
        e = strata_orch_submit_next_level(o, k_slow_copy, a, 0);
    strata_args_destroy(a);
    it_try(e);
    e = write_own(t->d, 1, f->b[1], 0, &a);
    if (e == STRATA_OK)
        e = strata_orch_submit_next_level(o, dom_k_write_window, a, 1);
    strata_args_destroy(a);
    it_try(e);
    it_try(strata_orch_copy_from(o, t->d, 1, "data", 0, f->b[2], 0, 64));

    /* A group on {1, 3} writing b[3] while chip 3 runs 100 ms of other
     * work: the group is held until both are idle. */
    it_try(strata_args_create(&a));
    e = it_add_u32(a, f->b[5], 0, 16, STRATA_IN);
    if (e == STRATA_OK)
        e = it_add_u32(a, f->b[5], 32, 16, STRATA_OUT);
    if (e == STRATA_OK)
        e = strata_args_add_scalar(a, 100000);
    if (e == STRATA_OK)
        e = strata_orch_submit_next_level(o, k_slow_copy, a, busy3[0]);
    strata_args_destroy(a);
    it_try(e);
    e = write_own(t->d, 1, f->b[3], 0, &g[0]);
    if (e == STRATA_OK)
        e = write_own(t->d, 3, f->b[3], 0, &g[1]);
    if (e == STRATA_OK)
        e = strata_orch_submit_next_level_group(
            o, dom_k_write_window, (const strata_args *const *)g, ids13, 2);
    strata_args_destroy(g[0]);
    strata_args_destroy(g[1]);
    it_try(e);
    return strata_orch_copy_from(o, t->d, 1, "data", 0, f->b[4], 0, 64);
}

static void test_domain_copy_after_held_tasks_of_its_chip(void **state)
{
    (void)state;
    struct it_fx f;
    struct order t = {.f = &f};
    it_fx_start(&f, 64);
    for (uint32_t i = 0; i < 16; i++) {
        it_fx_w(&f, 0)[i] = 3000 + i; /* via chip 0's slow copy */
        it_fx_w(&f, 3)[i] = 4000 + i; /* the group's */
    }
    it_ok(strata_worker_run(f.w, held_orch, NULL, &t));
    for (uint32_t i = 0; i < 16; i++) {
        assert_int_equal(it_fx_w(&f, 2)[i], 3000 + i);
        assert_int_equal(it_fx_w(&f, 4)[i], 4000 + i);
    }
    it_fx_end(&f);
}

/* A copy_to whose source is written by a task that fails (after 100 ms,
 * so the copy is posted while the writer still runs): the copy depends on
 * it, so it is poisoned like any dependent task: refused at once when the
 * writer fails, never run on bytes that were not written, never hung. */
struct failsrc {
    struct it_fx *f;
    strata_err copy;
    double took;
    char msg[STRATA_ERRMSG_MAX];
};

static strata_err failsrc_orch(strata_orch *o, const strata_args *args,
                               void *user)
{
    (void)args;
    struct failsrc *s = user;
    strata_domain *d;
    double t0;

    it_try(alloc_stage(o, &d));
    {
        strata_args *a = NULL;
        strata_err e;
        it_try(it_args1(s->f->b[0], 0, 16, STRATA_OUT, &a));
        e = strata_args_add_scalar(a, 100000);
        if (e == STRATA_OK)
            e = strata_orch_submit_next_level(o, k_slow_fail, a, 0);
        strata_args_destroy(a);
        it_try(e);
    }
    t0 = testutil_now();
    s->copy = strata_orch_copy_to(o, d, 1, "data", 0, s->f->b[0], 0, 64);
    s->took = testutil_now() - t0;
    snprintf(s->msg, sizeof(s->msg), "%s", strata_errmsg());
    return STRATA_OK;
}

static void test_domain_copy_after_failed_writer_returns(void **state)
{
    (void)state;
    struct it_fx f;
    struct failsrc s = {.f = &f, .copy = STRATA_OK};
    it_fx_start(&f, 64);
    it_expect(STRATA_ETASK, strata_worker_run(f.w, failsrc_orch, NULL, &s));
    print_message("copy_to after a failed writer: %s in %.3f s (%s)\n",
                  strata_errname(s.copy), s.took, s.msg);
    /* The source bytes are poisoned: the copy is refused, promptly. */
    assert_int_not_equal(s.copy, STRATA_OK);
    assert_true(s.took < 5.0);
    it_fx_end(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(
            test_domain_copy_round_trip_lands_at_buffer_offset, it_teardown),
        cmocka_unit_test_teardown(
            test_domain_copy_bad_ranges_and_targets_refused, it_teardown),
        cmocka_unit_test_teardown(
            test_domain_copy_ordered_after_tasks_on_host_bytes, it_teardown),
        cmocka_unit_test_teardown(test_domain_copy_after_failed_writer_returns,
                                  it_teardown),
        cmocka_unit_test_teardown(test_domain_copy_after_held_tasks_of_its_chip,
                                  it_teardown),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
