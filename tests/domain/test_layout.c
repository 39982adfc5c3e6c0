/*
 * What a domain looks like from the orchestrator and from a kernel: ranks
 * follow the workers order, buffers are carved in spec order, windows start
 * zeroed, contexts are found only for live domains of the chip, and the
 * signal helpers wait, wake and time out.
 */
#define _GNU_SOURCE
#include "dom_kit.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static strata_callable k_sig;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CLOCK_MONOTONIC in microseconds, the same clock in every process of
 * the host, into two words. */
static void stamp(uint32_t *out)
{
    uint64_t us = (uint64_t)(now_s() * 1e6);

    out[0] = (uint32_t)us;
    out[1] = (uint32_t)(us >> 32);
}

static uint64_t stamp_of(const uint32_t *in)
{
    return (uint64_t)in[0] | (uint64_t)in[1] << 32;
}

/* s0 device_ctx, s1 mode; t0 OUT u32[8].
 * mode 0 (alone): out = {wait(word 0, at_least 1, 0.1 s), elapsed ms,
 *   wait(at_least 0, 0 s), wait(at_least 1, 0 s), errmsg non-empty}.
 * mode 1 (pair): rank 0 waits (10 s) for its word 0 to reach 2, rank 1
 *   adds 1 twice, 50 ms apart; rank 0's out = {err, elapsed ms, final
 *   word, 2 words: when it woke}, rank 1's = {2 words: just before its
 *   second add}.
 * mode 2: the same with no deadline (timeout_s < 0). */
static strata_err sig_kernel(strata_chip *chip, const strata_args *a)
{
    const strata_comm_context *cc =
        strata_chip_comm_context(chip, strata_args_scalar(a, 0));
    uint32_t *out = it_arg_u32(a, 0);
    volatile uint32_t *w0;
    double t0;

    if (!cc)
        return STRATA_ENOENT;
    w0 = (volatile uint32_t *)cc->window_base[0];
    if (strata_args_scalar(a, 1) == 0) {
        volatile uint32_t *mine =
            (volatile uint32_t *)cc->window_base[cc->rank];
        t0 = now_s();
        out[0] = strata_signal_wait(mine, 1, 0.1);
        out[1] = (uint32_t)((now_s() - t0) * 1000);
        out[4] = strata_errmsg()[0] != '\0';
        out[2] = strata_signal_wait(mine, 0, 0);
        out[3] = strata_signal_wait(mine, 1, 0);
        return STRATA_OK;
    }
    if (cc->rank == 0) {
        t0 = now_s();
        /* mode 2: no deadline (the test's own timeout bounds it). */
        out[0] = strata_signal_wait(
            w0, 2, strata_args_scalar(a, 1) == 2 ? -1.0 : DOM_WAIT_S);
        stamp(&out[3]);
        out[1] = (uint32_t)((now_s() - t0) * 1000);
        out[2] = *w0;
        return STRATA_OK;
    }
    testutil_sleep(0.05);
    strata_signal_add(w0, 1);
    testutil_sleep(0.05);
    stamp(&out[0]);
    strata_signal_add(w0, 1);
    return STRATA_OK;
}

static int setup(void **state)
{
    if (dom_setup(state) != 0)
        return -1;
    it_register(kernel, "layout.sig", sig_kernel, &k_sig);
    return 0;
}

/* ---- ranks follow the workers order, contexts, buffer carving */

static const int ids_203[3] = {2, 0, 3};

struct ranks {
    struct it_fx *f;
    strata_domain *d;
    strata_chip_domain_ctx ctx[3];
    strata_comm_buffer_info bufs[3][4];
    char names[3][4][8];
    strata_err ctx_err[3], ctx1, ctx7, ctx_neg;
};

static strata_err ranks_orch(strata_orch *o, const strata_args *args,
                             void *user)
{
    (void)args;
    struct ranks *r = user;
    struct dom_spec s;
    strata_chip_domain_ctx c;

    dom_spec_init(&s, "ranks", ids_203, 3, 1000);
    dom_spec_buf(&s, "a", STRATA_U8, 3);
    dom_spec_buf(&s, "b", STRATA_F64, 5);
    dom_spec_buf(&s, "c", STRATA_U16, 7);
    dom_spec_buf(&s, "d", STRATA_I32, 100);
    it_try(strata_orch_allocate_domain(o, &s.spec, &r->d));
    for (size_t i = 0; i < 3; i++) {
        r->ctx_err[i] = strata_domain_context(r->d, ids_203[i], &r->ctx[i]);
        if (r->ctx_err[i] != STRATA_OK)
            continue;
        /* Copy what the pointers show now; checked after the run. */
        for (size_t b = 0; b < r->ctx[i].num_buffers && b < 4; b++) {
            r->bufs[i][b] = r->ctx[i].buffers[b];
            snprintf(r->names[i][b], sizeof(r->names[i][b]), "%s",
                     r->ctx[i].buffers[b].name);
        }
    }
    r->ctx1 = strata_domain_context(r->d, 1, &c);
    r->ctx7 = strata_domain_context(r->d, 7, &c);
    r->ctx_neg = strata_domain_context(r->d, -1, &c);
    return dom_submit_probe(o, r->d, ids_203, 3, r->f->b[0]);
}

static void test_domain_layout_ranks_follow_workers_order(void **state)
{
    (void)state;
    struct it_fx f;
    struct ranks r = {.f = &f};
    static const size_t off[4] = {0, 3, 43, 57};
    static const size_t nbytes[4] = {3, 40, 14, 400};
    static const char *names[4] = {"a", "b", "c", "d"};
    it_fx_start(&f, 1024);
    it_ok(strata_worker_run(f.w, ranks_orch, NULL, &r));
    it_expect(STRATA_ENOENT, r.ctx1);
    it_expect(STRATA_ENOENT, r.ctx7);
    it_expect(STRATA_ENOENT, r.ctx_neg);
    const struct dom_probe *p = strata_buffer_data(f.b[0]);
    for (uint32_t i = 0; i < 3; i++) {
        const strata_chip_domain_ctx *c = &r.ctx[i];
        it_ok(r.ctx_err[i]);
        assert_string_equal(c->name, "ranks");
        assert_int_equal(c->domain_rank, i);
        assert_int_equal(c->domain_size, 3);
        assert_true(c->actual_window_size >= 1000);
        assert_true(c->device_ctx != 0);
        assert_true(c->local_window_base != 0);
        assert_int_equal(c->num_buffers, 4);
        for (size_t b = 0; b < 4; b++) {
            assert_string_equal(r.names[i][b], names[b]);
            assert_int_equal(r.bufs[i][b].offset, off[b]);
            assert_int_equal(r.bufs[i][b].nbytes, nbytes[b]);
            assert_int_equal(r.bufs[i][b].count,
                             nbytes[b] / strata_dtype_size(r.bufs[i][b].dtype));
        }
        assert_int_equal(r.bufs[i][1].dtype, STRATA_F64);
        /* The kernel on chip ids_203[i] sees the same thing. */
        assert_int_equal(p[i].chip, ids_203[i]);
        assert_int_equal(p[i].found, 1);
        assert_int_equal(p[i].version, STRATA_COMM_CONTEXT_VERSION);
        assert_int_equal(p[i].rank, i);
        assert_int_equal(p[i].rank_count, 3);
        assert_int_equal(p[i].window_size, c->actual_window_size);
        assert_int_equal(p[i].own_base, c->local_window_base);
        assert_int_equal(p[i].bases_seen, 3);
        assert_int_equal(p[i].bogus_null, DOM_PROBE_BOGUS);
    }
    assert_true(strata_domain_freed(r.d));
    it_fx_end(&f);
}

/* ---- contexts only for live domains of the chip */

struct stale {
    struct it_fx *f;
    uint64_t old_ctx[2];
    strata_domain *d;
};

static strata_err stale_alloc_orch(strata_orch *o, const strata_args *args,
                                   void *user)
{
    (void)args;
    struct stale *s = user;
    struct dom_spec sp;
    strata_chip_domain_ctx c;
    static const int ids01[2] = {0, 1};

    dom_spec_init(&sp, "stale", ids01, 2, 64);
    it_try(strata_orch_allocate_domain(o, &sp.spec, &s->d));
    for (size_t i = 0; i < 2; i++) {
        it_try(strata_domain_context(s->d, ids01[i], &c));
        s->old_ctx[i] = c.device_ctx;
    }
    /* Chip 2 is in no domain: chip 0's value means nothing there. */
    strata_args *a = NULL;
    size_t shape[1] = {sizeof(struct dom_probe)};
    it_try(strata_args_create(&a));
    strata_err e = strata_args_add_tensor(a, s->f->b[0], 0, STRATA_U8, 1, shape,
                                          STRATA_OUT);
    if (e == STRATA_OK)
        e = strata_args_add_scalar(a, s->old_ctx[0]);
    if (e == STRATA_OK)
        e = strata_orch_submit_next_level(o, dom_k_probe, a, 2);
    strata_args_destroy(a);
    return e;
}

/* After the fence: the old values on the old members. */
static strata_err stale_probe_orch(strata_orch *o, const strata_args *args,
                                   void *user)
{
    (void)args;
    struct stale *s = user;
    size_t shape[1] = {sizeof(struct dom_probe)};
    strata_err e = STRATA_OK;

    for (size_t i = 0; i < 2 && e == STRATA_OK; i++) {
        strata_args *a = NULL;
        it_try(strata_args_create(&a));
        e = strata_args_add_tensor(a, s->f->b[1], i * sizeof(struct dom_probe),
                                   STRATA_U8, 1, shape, STRATA_OUT);
        if (e == STRATA_OK)
            e = strata_args_add_scalar(a, s->old_ctx[i]);
        if (e == STRATA_OK)
            e = strata_orch_submit_next_level(o, dom_k_probe, a, (int)i);
        strata_args_destroy(a);
    }
    return e;
}

/* After the fence, a new domain on the same chips: the old values must
 * not resolve to the new domain's context either. */
static strata_err stale_realloc_orch(strata_orch *o, const strata_args *args,
                                     void *user)
{
    struct dom_spec sp;
    strata_domain *d;
    static const int ids01[2] = {0, 1};

    dom_spec_init(&sp, "stale", ids01, 2, 64);
    it_try(strata_orch_allocate_domain(o, &sp.spec, &d));
    return stale_probe_orch(o, args, user);
}

static void test_domain_layout_foreign_and_stale_ctx_null(void **state)
{
    (void)state;
    struct it_fx f;
    struct stale s = {.f = &f};
    it_fx_start(&f, 1024);
    it_ok(strata_worker_run(f.w, stale_alloc_orch, NULL, &s));
    const struct dom_probe *p = strata_buffer_data(f.b[0]);
    assert_int_equal(p[0].chip, 2);
    assert_int_equal(p[0].found, 0);
    assert_int_equal(p[0].bogus_null, DOM_PROBE_BOGUS);
    assert_true(strata_domain_freed(s.d));
    it_ok(strata_worker_run(f.w, stale_probe_orch, NULL, &s));
    p = strata_buffer_data(f.b[1]);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(p[i].chip, i);
        assert_int_equal(p[i].found, 0);
    }
    it_fx_end(&f);
}

/* A freed domain's device_ctx, used after a newer domain was allocated on
 * the same chips, must not resolve to the newer domain's context (the
 * contract: NULL unless it is a live domain of this chip). */
static void test_domain_layout_stale_ctx_after_realloc_null(void **state)
{
    (void)state;
    struct it_fx f;
    struct stale s = {.f = &f};
    it_fx_start(&f, 1024);
    it_ok(strata_worker_run(f.w, stale_alloc_orch, NULL, &s));
    const struct dom_probe *p = strata_buffer_data(f.b[1]);
    memset(strata_buffer_data(f.b[1]), 0xff, 2 * sizeof(struct dom_probe));
    it_ok(strata_worker_run(f.w, stale_realloc_orch, NULL, &s));
    for (int i = 0; i < 2; i++) {
        assert_int_equal(p[i].chip, i);
        if (p[i].found)
            fail_msg("chip %d: the freed domain's device_ctx %#llx resolves "
                     "to a live context (rank %u of %u) of a newer domain",
                     i, (unsigned long long)s.old_ctx[i], p[i].rank,
                     p[i].rank_count);
    }
    it_fx_end(&f);
}

/* ---- windows start zeroed */

#define ZERO_WIN (1u << 20)

struct zero {
    struct it_fx *f;
    strata_domain *d[2];
};

static strata_err zero_submit(strata_orch *o, struct zero *z, int which,
                              strata_buffer *barrier, strata_buffer *res)
{
    strata_args *a[4] = {NULL};
    strata_err e = STRATA_OK;

    for (size_t r = 0; r < 4 && e == STRATA_OK; r++) {
        strata_chip_domain_ctx c;
        e = strata_domain_context(z->d[which], it_ids4[r], &c);
        if (e == STRATA_OK)
            e = strata_args_create(&a[r]);
        if (e == STRATA_OK)
            e = it_add_u32(a[r], barrier, 0, 2, STRATA_NO_DEP);
        if (e == STRATA_OK)
            e = it_add_u32(a[r], res, 2 * r, 2, STRATA_OUT);
        if (e == STRATA_OK)
            e = strata_args_add_scalar(a[r], c.device_ctx);
        if (e == STRATA_OK)
            e = strata_args_add_scalar(a[r], 0x40 + 0x10 * (unsigned)which);
    }
    if (e == STRATA_OK)
        e = strata_orch_submit_next_level_group(
            o, dom_k_zero_check, (const strata_args *const *)a, it_ids4, 4);
    for (size_t r = 0; r < 4; r++)
        strata_args_destroy(a[r]);
    return e;
}

/* Domain 0 is checked and dirtied, released, and domain 1 of the same
 * name and size is allocated in the same run: it must be zero again. */
static strata_err zero_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)args;
    struct zero *z = user;
    struct dom_spec s;

    dom_spec_init(&s, "zero", it_ids4, 4, ZERO_WIN);
    it_try(strata_orch_allocate_domain(o, &s.spec, &z->d[0]));
    it_try(zero_submit(o, z, 0, z->f->b[0], z->f->b[1]));
    it_try(strata_domain_release(z->d[0]));
    it_try(strata_orch_allocate_domain(o, &s.spec, &z->d[1]));
    return zero_submit(o, z, 1, z->f->b[2], z->f->b[3]);
}

static void test_domain_layout_windows_start_zeroed(void **state)
{
    (void)state;
    struct it_fx f;
    struct zero z = {.f = &f};
    it_fx_start(&f, 64);
    for (int run = 0; run < 2; run++) {
        memset(it_fx_w(&f, 0), 0, 64 * 4);
        memset(it_fx_w(&f, 2), 0, 64 * 4);
        it_ok(strata_worker_run(f.w, zero_orch, NULL, &z));
        for (int which = 0; which < 2; which++) {
            const uint32_t *res = it_fx_w(&f, 1 + 2 * (size_t)which);
            for (int r = 0; r < 4; r++) {
                if (res[2 * r] || res[2 * r + 1])
                    fail_msg("run %d domain %d rank %d: %u nonzero bytes "
                             "before any write, %u wrong after",
                             run, which, r, res[2 * r], res[2 * r + 1]);
            }
            assert_true(strata_domain_freed(z.d[which]));
        }
    }
    assert_int_equal(dom_chip_window_maps(f.w, it_ids4, 4), 0);
    it_fx_end(&f);
}

/* ---- signal helpers */

struct sig {
    struct it_fx *f;
    int mode;
};

static strata_err sig_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)args;
    struct sig *sg = user;
    static const int ids[2] = {3, 1};
    struct dom_spec s;
    strata_domain *d;
    strata_args *a[2] = {NULL};
    strata_err e = STRATA_OK;

    dom_spec_init(&s, "sig", ids, 2, 64);
    it_try(strata_orch_allocate_domain(o, &s.spec, &d));
    for (size_t r = 0; r < 2 && e == STRATA_OK; r++) {
        strata_chip_domain_ctx c;
        e = strata_domain_context(d, ids[r], &c);
        if (e == STRATA_OK)
            e = strata_args_create(&a[r]);
        if (e == STRATA_OK)
            e = it_add_u32(a[r], sg->f->b[0], 8 * r, 8, STRATA_OUT);
        if (e == STRATA_OK)
            e = strata_args_add_scalar(a[r], c.device_ctx);
        if (e == STRATA_OK)
            e = strata_args_add_scalar(a[r], (uint64_t)sg->mode);
    }
    if (e == STRATA_OK && sg->mode == 0)
        e = strata_orch_submit_next_level(o, k_sig, a[0], ids[0]);
    else if (e == STRATA_OK)
        e = strata_orch_submit_next_level_group(
            o, k_sig, (const strata_args *const *)a, ids, 2);
    for (size_t r = 0; r < 2; r++)
        strata_args_destroy(a[r]);
    return e;
}

static void test_domain_layout_signal_wait_timeout_etimedout(void **state)
{
    (void)state;
    struct it_fx f;
    struct sig sg = {.f = &f, .mode = 0};
    it_fx_start(&f, 16);
    it_ok(strata_worker_run(f.w, sig_orch, NULL, &sg));
    const uint32_t *o = it_fx_w(&f, 0);
    print_message("wait timed out after %u ms\n", o[1]);
    assert_int_equal(o[0], STRATA_ETIMEDOUT);
    assert_true(o[1] >= 95 && o[1] < 3000);
    assert_int_equal(o[4], 1);
    assert_int_equal(o[2], STRATA_OK);
    assert_int_equal(o[3], STRATA_ETIMEDOUT);
    it_fx_end(&f);
}

static void test_domain_layout_signal_add_wakes_waiter(void **state)
{
    (void)state;
    struct it_fx f;
    it_fx_start(&f, 16);
    for (int mode = 1; mode <= 2; mode++) {
        struct sig sg = {.f = &f, .mode = mode};
        memset(it_fx_w(&f, 0), 0, 16 * sizeof(uint32_t));
        it_ok(strata_worker_run(f.w, sig_orch, NULL, &sg));
        const uint32_t *o = it_fx_w(&f, 0);
        uint64_t woke = stamp_of(&o[3]), added = stamp_of(&o[8]);

        print_message("waiter (%s) woke after %u ms, %lld us after the "
                      "second add began\n",
                      mode == 1 ? "10 s deadline" : "no deadline", o[1],
                      (long long)(woke - added));
        assert_int_equal(o[0], STRATA_OK);
        assert_int_equal(o[2], 2);
        /* It waited for the second add, not the first: it woke after
         * that add began. How long it waited says nothing (the two
         * chips start apart on a busy machine: a waiter started late
         * waits less), so only the upper bound is on its own clock. */
        assert_true(added != 0 && woke >= added);
        assert_true(o[1] < 5000);
    }
    it_fx_end(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_domain_layout_ranks_follow_workers_order,
                                  it_teardown),
        cmocka_unit_test_teardown(test_domain_layout_foreign_and_stale_ctx_null,
                                  it_teardown),
        cmocka_unit_test_teardown(
            test_domain_layout_stale_ctx_after_realloc_null, it_teardown),
        cmocka_unit_test_teardown(test_domain_layout_windows_start_zeroed,
                                  it_teardown),
        cmocka_unit_test_teardown(
            test_domain_layout_signal_wait_timeout_etimedout, it_teardown),
        cmocka_unit_test_teardown(test_domain_layout_signal_add_wakes_waiter,
                                  it_teardown),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
