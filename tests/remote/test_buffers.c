/*
 * Remote buffers and task deadlines, against a real strata-node on
 * 127.0.0.1 (PSK) and a forked L3 node in the same L4:
 * - strata_worker_create_remote_buffer: bytes written in, used by tasks on
 *   the node without moving (a chain of two tasks), read back; pieces past
 *   one CONTROL frame; every refusal (before init, forked node, no node,
 *   nbytes 0, another target, out of range, named by a running task);
 * - strata_orch_set_deadline: a task past its deadline fails with
 *   STRATA_ETIMEDOUT on a remote and on a forked node while the node goes
 *   on serving; a generous deadline changes nothing; bad values and chip
 *   tasks are refused.
 */
#define _GNU_SOURCE
#include "remote_kit.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct rk_node node;

static int group_setup(void **state)
{
    (void)state;
    if (rk_register() != 0)
        return -1;
    return rk_node_start(&node, RK_PSK, NULL);
}

static int group_teardown(void **state)
{
    (void)state;
    return rk_node_stop(&node);
}

static void finish(const testutil_snapshot *before)
{
    rk_assert_idle(&node, before);
}

/* An L4: node 0 forked, node 1 remote (2 chips each). */
static strata_worker *start_l4(void)
{
    strata_remote_spec spec;
    strata_worker *w = NULL;

    rk_spec(&spec, &node, 2);
    it_ok(rk_l4_start(1, &spec, 1, &w));
    return w;
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- remote buffers ------------------------------------------------------ */

#define N 1000

struct rb_ctx {
    strata_buffer *x, *y, *z, *u;
    int target;
    strata_err wrong_target;
};

/* z = x + y, then u = z + x, both on node 1: z never leaves the node. */
static strata_err chain_orch(strata_orch *o, const strata_args *args,
                             void *user)
{
    struct rb_ctx *c = user;
    strata_args *a = NULL;
    strata_err err;

    (void)args;
    it_try(strata_args_create(&a));
    err = it_add_u32(a, c->x, 0, N, STRATA_IN);
    if (!err)
        err = it_add_u32(a, c->y, 0, N, STRATA_IN);
    if (!err)
        err = it_add_u32(a, c->z, 0, N, STRATA_OUT);
    if (!err)
        err = strata_orch_submit_next_level(o, rk_o_add, a, 1);
    strata_args_clear(a);
    if (!err)
        err = it_add_u32(a, c->z, 0, N, STRATA_IN);
    if (!err)
        err = it_add_u32(a, c->x, 0, N, STRATA_IN);
    if (!err)
        err = it_add_u32(a, c->u, 0, N, STRATA_OUT);
    if (!err)
        err = strata_orch_submit_next_level(o, rk_o_add, a, 1);
    strata_args_destroy(a);
    return err;
}

static void test_remote_buffer_chain(void **state)
{
    testutil_snapshot before;
    struct rb_ctx c = {0};
    uint32_t x[N], y[N], out[N];
    strata_buffer *host = NULL;
    strata_worker *w;

    (void)state;
    testutil_snapshot_take(&before);
    w = start_l4();
    it_ok(strata_worker_create_remote_buffer(w, 1, sizeof(x), &c.x));
    it_ok(strata_worker_create_remote_buffer(w, 1, sizeof(y), &c.y));
    it_ok(strata_worker_create_remote_buffer(w, 1, sizeof(out), &c.z));
    it_ok(strata_worker_create_remote_buffer(w, 1, sizeof(out), &c.u));
    it_ok(strata_worker_create_buffer(w, 64, &host));
    assert_null(strata_buffer_data(c.x));
    assert_int_equal(strata_buffer_size(c.x), sizeof(x));
    assert_int_equal(strata_buffer_node(c.x), 1);
    assert_int_equal(strata_buffer_node(host), -1);
    assert_int_equal(strata_buffer_node(NULL), -1);
    /* Fresh remote memory reads as zeros. */
    memset(out, 0xff, sizeof(out));
    it_ok(strata_buffer_read(c.z, 0, out, sizeof(out)));
    for (uint32_t i = 0; i < N; i++)
        assert_int_equal(out[i], 0);
    for (uint32_t i = 0; i < N; i++) {
        x[i] = 1000 + i;
        y[i] = 7 * i;
    }
    it_ok(strata_buffer_write(c.x, 0, x, sizeof(x)));
    it_ok(strata_buffer_write(c.y, 0, y, sizeof(y)));
    it_ok(strata_worker_run(w, chain_orch, NULL, &c));
    it_ok(strata_buffer_read(c.u, 0, out, sizeof(out)));
    for (uint32_t i = 0; i < N; i++)
        if (out[i] != 2 * x[i] + y[i])
            fail_msg("u[%u] = %u, want %u", i, out[i], 2 * x[i] + y[i]);
    /* A partial read at an offset. */
    it_ok(strata_buffer_read(c.z, 40, out, 8));
    assert_int_equal(out[0], x[10] + y[10]);
    assert_int_equal(out[1], x[11] + y[11]);
    /* The same calls work on a host buffer (memcpy). */
    it_ok(strata_buffer_write(host, 8, x, 16));
    it_ok(strata_buffer_read(host, 8, out, 16));
    assert_memory_equal(out, x, 16);
    it_ok(strata_buffer_release(c.x));
    it_ok(strata_buffer_release(host));
    rk_destroy(w, STRATA_OK);
    finish(&before);
}

static void test_remote_buffer_big(void **state)
{
    const size_t n = (3u << 20) + 123; /* four CONTROL pieces */
    testutil_snapshot before;
    uint8_t *in = malloc(n), *back = malloc(n);
    strata_buffer *b = NULL;
    strata_worker *w;

    (void)state;
    assert_non_null(in);
    assert_non_null(back);
    testutil_snapshot_take(&before);
    w = start_l4();
    for (size_t i = 0; i < n; i++)
        in[i] = (uint8_t)(i * 131 + (i >> 11));
    it_ok(strata_worker_create_remote_buffer(w, 1, n, &b));
    it_ok(strata_buffer_write(b, 0, in, n));
    it_ok(strata_buffer_read(b, 0, back, n));
    assert_memory_equal(back, in, n);
    /* Released with the worker. */
    rk_destroy(w, STRATA_OK);
    free(in);
    free(back);
    finish(&before);
}

static strata_err wrong_target_orch(strata_orch *o, const strata_args *args,
                                    void *user)
{
    struct rb_ctx *c = user;
    strata_args *a = NULL;

    (void)args;
    it_try(strata_args_create(&a));
    it_try(it_add_u32(a, c->x, 0, N, STRATA_IN));
    it_try(it_add_u32(a, c->y, 0, N, STRATA_IN));
    it_try(it_add_u32(a, c->z, 0, N, STRATA_OUT));
    c->wrong_target = strata_orch_submit_next_level(o, rk_o_add, a, c->target);
    if (c->wrong_target)
        rk_assert_contains(strata_errmsg(), "lives on remote node 1");
    strata_args_destroy(a);
    return STRATA_OK;
}

/* t0 = a struct rt_span in buffer c->x: a 400 ms kernel on node 1. */
static strata_err pin_orch(strata_orch *o, const strata_args *args, void *user)
{
    struct rb_ctx *c = user;
    size_t shape[1] = {sizeof(struct rt_span)};
    strata_args *a = NULL;
    strata_err err;

    (void)args;
    it_try(strata_args_create(&a));
    err =
        strata_args_add_tensor(a, c->x, 0, STRATA_U8, 1, shape, STRATA_NO_DEP);
    if (!err)
        err = strata_args_add_scalar(a, 400);
    if (!err)
        err = strata_args_add_scalar(a, 0);
    if (!err)
        err = strata_orch_submit_next_level(o, rk_o_span, a, 1);
    strata_args_destroy(a);
    return err;
}

static void test_remote_buffer_refusals(void **state)
{
    testutil_snapshot before;
    strata_remote_spec spec;
    struct rb_ctx c = {0};
    strata_worker *w = NULL;
    strata_buffer *b = NULL;
    strata_run *run = NULL;
    struct rt_span span;
    uint32_t word = 0;

    (void)state;
    testutil_snapshot_take(&before);
    rk_spec(&spec, &node, 2);
    it_ok(rk_l4_create(1, &spec, 1, &w));
    assert_int_equal(strata_worker_create_remote_buffer(w, 1, 64, &b),
                     STRATA_ESTATE);
    rk_assert_contains(strata_errmsg(), "after strata_worker_init");
    it_ok(strata_worker_init(w));
    assert_int_equal(strata_worker_create_remote_buffer(w, 0, 64, &b),
                     STRATA_EINVAL);
    rk_assert_contains(strata_errmsg(), "forked");
    assert_int_equal(strata_worker_create_remote_buffer(w, 2, 64, &b),
                     STRATA_EINVAL);
    assert_int_equal(strata_worker_create_remote_buffer(w, -1, 64, &b),
                     STRATA_EINVAL);
    assert_int_equal(strata_worker_create_remote_buffer(w, 1, 0, &b),
                     STRATA_EINVAL);
    /* More than a session may hold: the node says so, naming its cap. */
    assert_int_equal(
        strata_worker_create_remote_buffer(w, 1, (size_t)1 << 50, &b),
        STRATA_ENOMEM);
    rk_assert_contains(strata_errmsg(), "--max-buffer-bytes");
    assert_int_equal(strata_worker_create_remote_buffer(NULL, 1, 64, &b),
                     STRATA_EINVAL);
    assert_int_equal(strata_worker_create_remote_buffer(w, 1, 64, NULL),
                     STRATA_EINVAL);
    assert_null(b);
    it_ok(strata_worker_create_remote_buffer(w, 1, N * 4, &c.x));
    it_ok(strata_worker_create_remote_buffer(w, 1, N * 4, &c.y));
    it_ok(strata_worker_create_remote_buffer(w, 1, N * 4, &c.z));
    /* Out of range, NULL data. */
    assert_int_equal(strata_buffer_write(c.x, N * 4 - 2, &word, 4),
                     STRATA_EINVAL);
    assert_int_equal(strata_buffer_read(c.x, SIZE_MAX, &word, 4),
                     STRATA_EINVAL);
    assert_int_equal(strata_buffer_write(c.x, 0, NULL, 4), STRATA_EINVAL);
    assert_int_equal(strata_buffer_read(NULL, 0, &word, 4), STRATA_EINVAL);
    it_ok(strata_buffer_write(c.x, 0, NULL, 0));
    /* A remote buffer goes only to its own node. */
    c.target = 0;
    it_ok(strata_worker_run(w, wrong_target_orch, NULL, &c));
    assert_int_equal(c.wrong_target, STRATA_EINVAL);
    /* Named by a running task: copies are refused, nothing is copied. */
    it_ok(strata_worker_submit(w, pin_orch, NULL, &c, &run));
    assert_int_equal(strata_buffer_write(c.x, 0, &word, 4), STRATA_ESTATE);
    rk_assert_contains(strata_errmsg(), "unfinished task");
    assert_int_equal(strata_buffer_read(c.x, 0, &word, 4), STRATA_ESTATE);
    assert_int_equal(strata_buffer_release(c.x), STRATA_ESTATE);
    it_ok(strata_run_wait(run, -1));
    strata_run_free(run);
    /* The kernel wrote its record into the remote bytes. */
    it_ok(strata_buffer_read(c.x, 0, &span, sizeof(span)));
    assert_true(span.end_ns >= span.start_ns + 400000000u);
    assert_int_equal(span.chip, 0);
    rk_destroy(w, STRATA_OK);
    finish(&before);
}

/* The node's session killed: copies and new remote buffers fail with
 * STRATA_EPEER naming the node, host buffers still work, the worker is
 * destroyable and leaves nothing behind. */
static void test_remote_buffer_node_lost(void **state)
{
    testutil_snapshot before;
    strata_buffer *b = NULL, *host = NULL;
    uint32_t word = 7;
    pid_t sess[4];
    strata_worker *w;
    strata_err e;

    (void)state;
    testutil_snapshot_take(&before);
    w = start_l4();
    it_ok(strata_worker_create_remote_buffer(w, 1, 64, &b));
    it_ok(strata_buffer_write(b, 0, &word, 4));
    assert_int_equal(rk_node_sessions(&node, sess, 4), 1);
    assert_int_equal(kill(sess[0], SIGKILL), 0);
    e = strata_buffer_read(b, 0, &word, 4);
    for (int i = 0; i < 100 && e == STRATA_OK; i++) /* until the loss shows */
        e = strata_buffer_read(b, 0, &word, 4);
    assert_int_equal(e, STRATA_EPEER);
    rk_assert_contains(strata_errmsg(), "node 1");
    assert_int_equal(strata_worker_create_remote_buffer(w, 1, 64, &host),
                     STRATA_EPEER);
    it_ok(strata_worker_create_buffer(w, 64, &host));
    it_ok(strata_buffer_write(host, 0, &word, 4));
    it_ok(strata_buffer_release(b));
    rk_destroy(w, STRATA_EPEER);
    finish(&before);
}

/* ---- deadlines ----------------------------------------------------------- */

struct dl_ctx {
    strata_buffer *spans;
    int node;
    double deadline_s;
    uint64_t ms;
};

static strata_err deadline_orch(strata_orch *o, const strata_args *args,
                                void *user)
{
    struct dl_ctx *c = user;
    size_t shape[1] = {sizeof(struct rt_span)};
    strata_args *a = NULL;
    strata_err err;

    (void)args;
    it_try(strata_orch_set_deadline(o, c->deadline_s));
    it_try(strata_args_create(&a));
    err = strata_args_add_tensor(a, c->spans, 0, STRATA_U8, 1, shape,
                                 STRATA_NO_DEP);
    if (!err)
        err = strata_args_add_scalar(a, c->ms);
    if (!err)
        err = strata_args_add_scalar(a, 1);
    if (!err)
        err = strata_orch_submit_next_level(o, rk_o_span, a, c->node);
    strata_args_destroy(a);
    return err;
}

static strata_err noop_orch(strata_orch *o, const strata_args *args, void *user)
{
    int *target = user;

    (void)args;
    return strata_orch_submit_next_level(o, rk_o_noop, NULL, *target);
}

/* A 3 s task under a 0.3 s deadline fails early on node_id; the node
 * serves the next task at once, and the worker tears down promptly. */
static void check_deadline(int node_id)
{
    testutil_snapshot before;
    struct dl_ctx c = {.node = node_id, .deadline_s = 0.3, .ms = 3000};
    strata_worker *w;
    double t0, t1, t2;
    strata_err err;

    testutil_snapshot_take(&before);
    w = start_l4();
    it_ok(strata_worker_create_buffer(w, sizeof(struct rt_span), &c.spans));
    t0 = now_s();
    err = strata_worker_run(w, deadline_orch, NULL, &c);
    t1 = now_s();
    assert_int_equal(err, STRATA_ETIMEDOUT);
    rk_assert_contains(strata_errmsg(), "deadline");
    if (t1 - t0 > 2.0)
        fail_msg("the deadline fired after %.2f s, not near 0.3 s", t1 - t0);
    /* The node goes on: another task runs beside the late one. */
    it_ok(strata_worker_run(w, noop_orch, NULL, &node_id));
    t2 = now_s();
    if (t2 - t1 > 2.0)
        fail_msg("a task after the late one waited %.2f s", t2 - t1);
    rk_destroy(w, STRATA_OK);
    finish(&before);
}

static void test_deadline_remote(void **state)
{
    (void)state;
    check_deadline(1);
}

static void test_deadline_forked(void **state)
{
    (void)state;
    check_deadline(0);
}

static void test_deadline_generous(void **state)
{
    testutil_snapshot before;
    struct dl_ctx c = {.deadline_s = 30, .ms = 200};
    const struct rt_span *s;
    strata_worker *w;

    (void)state;
    testutil_snapshot_take(&before);
    w = start_l4();
    it_ok(strata_worker_create_buffer(w, sizeof(struct rt_span), &c.spans));
    for (c.node = 0; c.node < 2; c.node++) {
        it_ok(strata_worker_run(w, deadline_orch, NULL, &c));
        s = strata_buffer_data(c.spans);
        assert_true(s->end_ns >= s->start_ns + 200000000u);
    }
    rk_destroy(w, STRATA_OK);
    finish(&before);
}

struct bad_ctx {
    strata_err neg, nan, huge, zero, chip;
};

static strata_err bad_orch(strata_orch *o, const strata_args *args, void *user)
{
    struct bad_ctx *b = user;
    strata_callable k;
    strata_args *a = NULL;

    (void)args;
    b->neg = strata_orch_set_deadline(o, -1);
    b->nan = strata_orch_set_deadline(o, NAN);
    b->huge = strata_orch_set_deadline(o, 1e9);
    b->zero = strata_orch_set_deadline(NULL, 1);
    it_try(strata_orch_set_deadline(o, 1));
    it_try(strata_callable_by_name(STRATA_CALLABLE_KERNEL, RT_K_SPAN, &k));
    it_try(strata_args_create(&a));
    b->chip = strata_orch_submit_next_level(o, k, a, 0);
    if (b->chip)
        rk_assert_contains(strata_errmsg(), "cannot be stopped");
    strata_args_destroy(a);
    /* Cleared, the same submit goes through to the argument checks. */
    it_try(strata_orch_set_deadline(o, 0));
    return STRATA_OK;
}

static void test_deadline_refusals(void **state)
{
    static const int chips[1] = {0};
    testutil_snapshot before;
    strata_worker_config cfg;
    struct bad_ctx b;
    strata_worker *w = NULL;

    (void)state;
    testutil_snapshot_take(&before);
    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = chips;
    cfg.num_chips = 1;
    it_ok(strata_worker_create(&cfg, &w));
    it_ok(strata_worker_init(w));
    it_ok(strata_worker_run(w, bad_orch, NULL, &b));
    assert_int_equal(b.neg, STRATA_EINVAL);
    assert_int_equal(b.nan, STRATA_EINVAL);
    assert_int_equal(b.huge, STRATA_EINVAL);
    assert_int_equal(b.zero, STRATA_EINVAL);
    assert_int_equal(b.chip, STRATA_ENOTSUP);
    it_ok(strata_worker_destroy(w));
    testutil_assert_clean(&before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_remote_buffer_chain),
        cmocka_unit_test(test_remote_buffer_big),
        cmocka_unit_test(test_remote_buffer_refusals),
        cmocka_unit_test(test_remote_buffer_node_lost),
        cmocka_unit_test(test_deadline_remote),
        cmocka_unit_test(test_deadline_forked),
        cmocka_unit_test(test_deadline_generous),
        cmocka_unit_test(test_deadline_refusals),
    };

    rk_filter_from_env();
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
