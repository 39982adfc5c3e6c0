/*
 * Runs on remote L3 nodes: a real strata-node on 127.0.0.1 with a fresh
 * PSK (one daemon for the group), L4 workers in this process with forked
 * and remote nodes. Mixed runs with checked values, chained across the
 * two kinds of node, bytes past one DATA_CHUNK, several tasks in flight to
 * one node, a short task next to a long one, two parents at once, an
 * unknown callable, and the spec checks made at add time.
 */
#define _GNU_SOURCE
#include "remote_kit.h"
#include "worker/mpidomain_stats.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* ---- mixed local + remote --------------------------------------------- */

struct chain_ctx {
    strata_buffer *x, *y, *z, *u;
    size_t n;
};

/* Node 1 (remote): z = x + y; then node 0 (forked): u = z + x, which must
 * wait for the remote task's output bytes. */
static strata_err chain_orch(strata_orch *o, const strata_args *args,
                             void *user)
{
    struct chain_ctx *c = user;
    strata_args *a = NULL;
    strata_err err;

    (void)args;
    it_try(strata_args_create(&a));
    err = it_add_u32(a, c->x, 0, c->n, STRATA_IN);
    if (!err)
        err = it_add_u32(a, c->y, 0, c->n, STRATA_IN);
    if (!err)
        err = it_add_u32(a, c->z, 0, c->n, STRATA_OUT);
    if (!err)
        err = strata_orch_submit_next_level(o, rk_o_add, a, 1);
    strata_args_clear(a);
    if (!err)
        err = it_add_u32(a, c->z, 0, c->n, STRATA_IN);
    if (!err)
        err = it_add_u32(a, c->x, 0, c->n, STRATA_IN);
    if (!err)
        err = it_add_u32(a, c->u, 0, c->n, STRATA_OUT);
    if (!err)
        err = strata_orch_submit_next_level(o, rk_o_add, a, 0);
    strata_args_destroy(a);
    return err;
}

static void test_remote_runs_mixed_local_and_remote_ok(void **state)
{
    (void)state;
    testutil_snapshot before;
    strata_remote_spec s;
    strata_worker *w = NULL;
    static const int both[2] = {0, 1}, remote_only[1] = {1};
    /* 3 MiB + 4 bytes per node: more than one DATA_CHUNK each way. */
    const size_t big = (3u << 20) / 4 + 1;
    struct chain_ctx c = {.n = big};
    testutil_snapshot_take(&before);
    rk_spec(&s, &node, 2);
    it_ok(rk_l4_start(1, &s, 1, &w));
    assert_int_equal(strata_worker_num_nodes(w), 2);
    /* Repeated runs reuse the node's shadow buffers. */
    for (uint32_t r = 0; r < 3; r++)
        it_ok(rk_add_run(w, both, 2, 4096 + r, 100 * r));
    it_ok(rk_add_run(w, remote_only, 1, 1, 5));
    it_ok(rk_add_run(w, both, 2, big, 11));
    /* Output of the remote node feeds the forked one. */
    it_ok(strata_worker_create_buffer(w, big * 4, &c.x));
    it_ok(strata_worker_create_buffer(w, big * 4, &c.y));
    it_ok(strata_worker_create_buffer(w, big * 4, &c.z));
    it_ok(strata_worker_create_buffer(w, big * 4, &c.u));
    for (size_t i = 0; i < big; i++) {
        it_u32(c.x)[i] = (uint32_t)i;
        it_u32(c.y)[i] = 7;
    }
    it_ok(strata_worker_run(w, chain_orch, NULL, &c));
    for (size_t i = 0; i < big; i++) {
        if (it_u32(c.u)[i] != 2 * (uint32_t)i + 7)
            fail_msg("u[%zu] = %u, want %u", i, it_u32(c.u)[i],
                     2 * (uint32_t)i + 7);
    }
    rk_destroy(w, STRATA_OK);
    finish(&before);
}

/* ---- several tasks in flight to one node ------------------------------ */

#define SPANS 8

struct span_ctx {
    strata_buffer *spans; /* struct rt_span[SPANS], NO_DEP */
    int node;
    size_t n;
    uint64_t ms[SPANS];
    int chip[SPANS];
    bool scoped_last; /* the last task alone in a scope: time its return */
    double scope_done;
};

static strata_err submit_span(strata_orch *o, struct span_ctx *c, size_t i)
{
    strata_args *a = NULL;
    size_t shape[1] = {sizeof(struct rt_span)};
    strata_err err;

    it_try(strata_args_create(&a));
    err = strata_args_add_tensor(a, c->spans, i * sizeof(struct rt_span),
                                 STRATA_U8, 1, shape, STRATA_NO_DEP);
    if (!err)
        err = strata_args_add_scalar(a, c->ms[i]);
    if (!err)
        err = strata_args_add_scalar(a, (uint64_t)c->chip[i]);
    if (!err)
        err = strata_orch_submit_next_level(o, rk_o_span, a, c->node);
    strata_args_destroy(a);
    return err;
}

static strata_err span_orch(strata_orch *o, const strata_args *args, void *user)
{
    struct span_ctx *c = user;

    (void)args;
    for (size_t i = 0; i + (c->scoped_last ? 1 : 0) < c->n; i++)
        it_try(submit_span(o, c, i));
    if (c->scoped_last) {
        it_try(strata_orch_scope_begin(o));
        it_try(submit_span(o, c, c->n - 1));
        it_try(strata_orch_scope_end(o));
        c->scope_done = testutil_now();
    }
    return STRATA_OK;
}

/* Most spans running at one instant. */
static size_t max_overlap(const struct rt_span *s, size_t n)
{
    size_t best = 0;

    for (size_t i = 0; i < n; i++) {
        size_t k = 0;

        for (size_t j = 0; j < n; j++)
            k += s[j].start_ns <= s[i].start_ns && s[i].start_ns < s[j].end_ns;
        best = k > best ? k : best;
    }
    return best;
}

/* Every socket the L4 holds is close-on-exec: a program's child (a
 * system() call, a daemon it starts) must not keep a node's connection
 * open once the L4 is gone, or the node would see no EOF. */
static void test_remote_runs_sockets_close_on_exec(void **state)
{
    (void)state;
    testutil_snapshot before;
    strata_remote_spec s;
    strata_worker *w = NULL;
    static const int remote_only[1] = {1};
    DIR *d;
    struct dirent *e;
    int sockets = 0;

    testutil_snapshot_take(&before);
    rk_spec(&s, &node, 2);
    it_ok(rk_l4_start(1, &s, 1, &w));
    it_ok(rk_add_run(w, remote_only, 1, 1, 5));
    d = opendir("/proc/self/fd");
    assert_non_null(d);
    while ((e = readdir(d)) != NULL) {
        char path[64], target[64];
        int fd = atoi(e->d_name);
        ssize_t n;

        if (e->d_name[0] == '.' || fd == dirfd(d))
            continue;
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        n = readlink(path, target, sizeof(target) - 1);
        if (n <= 0)
            continue;
        target[n] = '\0';
        if (strncmp(target, "socket:", 7) != 0)
            continue;
        sockets++;
        if (!(fcntl(fd, F_GETFD) & FD_CLOEXEC))
            fail_msg("fd %d (%s) is not close-on-exec", fd, target);
    }
    closedir(d);
    assert_true(sockets > 0);
    rk_destroy(w, STRATA_OK);
    finish(&before);
}

static void test_remote_runs_eight_in_flight_overlap(void **state)
{
    (void)state;
    testutil_snapshot before;
    strata_remote_spec s;
    strata_worker *w = NULL;
    struct span_ctx c = {.node = 0, .n = SPANS};
    testutil_snapshot_take(&before);
    rk_spec(&s, &node, 4);
    it_ok(rk_l4_start(0, &s, 1, &w));
    it_ok(strata_worker_create_buffer(w, sizeof(struct rt_span) * SPANS,
                                      &c.spans));
    for (size_t i = 0; i < SPANS; i++) {
        c.ms[i] = 300;
        c.chip[i] = (int)(i % 4);
    }
    double t0 = testutil_now();
    it_ok(strata_worker_run(w, span_orch, NULL, &c));
    double took = testutil_now() - t0;
    const struct rt_span *sp = strata_buffer_data(c.spans);
    for (size_t i = 0; i < SPANS; i++) {
        assert_true(sp[i].end_ns >= sp[i].start_ns + 300 * 1000000ull);
        assert_int_equal(sp[i].chip, i % 4);
    }
    size_t overlap = max_overlap(sp, SPANS);
    print_message("8 tasks x 300 ms on 4 remote chips: %.3f s, at most %zu "
                  "at once\n",
                  took, overlap);
    if (overlap < 2)
        fail_msg("the 8 tasks to one remote node never overlapped");
    assert_true(took < 8 * 0.3);
    rk_destroy(w, STRATA_OK);
    finish(&before);
}

/* ---- a short task next to a long one ---------------------------------- */

static void test_remote_runs_short_task_not_behind_long_one(void **state)
{
    (void)state;
    testutil_snapshot before;
    strata_remote_spec s;
    strata_worker *w = NULL;
    struct span_ctx c = {.node = 0, .n = 2, .scoped_last = true};
    testutil_snapshot_take(&before);
    rk_spec(&s, &node, 2);
    it_ok(rk_l4_start(0, &s, 1, &w));
    it_ok(strata_worker_create_buffer(w, sizeof(struct rt_span) * 2, &c.spans));
    c.ms[0] = 3000; /* the long task, chip 0 */
    c.chip[0] = 0;
    c.ms[1] = 0; /* the short one, chip 1, alone in a scope */
    c.chip[1] = 1;
    double t0 = testutil_now();
    strata_err e = strata_worker_run(w, span_orch, NULL, &c);
    double took = testutil_now() - t0;
    it_ok(e);
    struct rt_span sp[2];
    memcpy(sp, strata_buffer_data(c.spans), sizeof(sp));
    rk_destroy(w, STRATA_OK);
    finish(&before);
    double first = (double)(sp[0].start_ns < sp[1].start_ns ? sp[0].start_ns
                                                            : sp[1].start_ns);
    print_message("long task %.3f s; short task ended on the node at "
                  "%.3f s; its scope ended at %.3f s; run %.3f s\n",
                  (double)(sp[0].end_ns - sp[0].start_ns) / 1e9,
                  ((double)sp[1].end_ns - first) / 1e9, c.scope_done - t0,
                  took);
    assert_true(took >= 3.0);
    /* The short task ran on the node while the long one did... */
    assert_true(sp[1].end_ns < sp[0].end_ns);
    /* ...and its completion reached the L4 then too. */
    if (c.scope_done - t0 > 1.5)
        fail_msg("the short task's completion reached the L4 only after "
                 "%.3f s, behind the 3 s task (it was done on the node "
                 "%.3f s after the first task started)",
                 c.scope_done - t0, ((double)sp[1].end_ns - first) / 1e9);
}

/* ---- two parents on one daemon ---------------------------------------- */

static void test_remote_runs_two_parents_concurrently_ok(void **state)
{
    (void)state;
    testutil_snapshot before;
    strata_remote_spec s;
    strata_worker *w[2] = {NULL, NULL};
    strata_run *run[2] = {NULL, NULL};
    struct span_ctx c[2];
    static const int node0[1] = {0};
    testutil_snapshot_take(&before);
    rk_spec(&s, &node, 2);
    for (int p = 0; p < 2; p++) {
        memset(&c[p], 0, sizeof(c[p]));
        c[p].n = 2;
        c[p].ms[0] = c[p].ms[1] = 500;
        c[p].chip[1] = 1;
        it_ok(rk_l4_start(0, &s, 1, &w[p]));
        it_ok(strata_worker_create_buffer(w[p], 2 * sizeof(struct rt_span),
                                          &c[p].spans));
    }
    assert_true(rk_node_wait_sessions(&node, 2, RK_WAIT_S));
    for (int p = 0; p < 2; p++)
        it_ok(strata_worker_submit(w[p], span_orch, NULL, &c[p], &run[p]));
    for (int p = 0; p < 2; p++) {
        it_ok(strata_run_wait(run[p], RK_WAIT_S));
        strata_run_free(run[p]);
    }
    const struct rt_span *a = strata_buffer_data(c[0].spans);
    const struct rt_span *b = strata_buffer_data(c[1].spans);
    /* Different session processes' chips, running at the same time. */
    assert_true(a[0].pid != b[0].pid);
    assert_true(a[0].start_ns < b[0].end_ns && b[0].start_ns < a[0].end_ns);
    for (int p = 0; p < 2; p++)
        it_ok(rk_add_run(w[p], node0, 1, 5000, 13 + (uint32_t)p));
    rk_destroy(w[0], STRATA_OK);
    /* One parent leaving does not disturb the other. */
    it_ok(rk_add_run(w[1], node0, 1, 5000, 17));
    rk_destroy(w[1], STRATA_OK);
    finish(&before);
}

/* ---- unknown callable -------------------------------------------------- */

struct one_ctx {
    strata_callable c;
    int node;
};

static strata_err one_orch(strata_orch *o, const strata_args *args, void *user)
{
    struct one_ctx *c = user;
    strata_args *a = NULL;
    strata_err err;

    (void)args;
    it_try(strata_args_create(&a));
    err = strata_orch_submit_next_level(o, c->c, a, c->node);
    strata_args_destroy(a);
    return err;
}

static void test_remote_runs_unknown_callable_enoent_names_digest(void **state)
{
    (void)state;
    testutil_snapshot before;
    strata_remote_spec s;
    strata_worker *w = NULL;
    struct one_ctx c = {.node = 1};
    char hex[65], msg[STRATA_ERRMSG_MAX];
    static const int both[2] = {0, 1};
    testutil_snapshot_take(&before);
    it_ok(strata_callable_by_name(STRATA_CALLABLE_ORCH, "rt.no_such_callable",
                                  &c.c));
    strata_callable_digest_hex(c.c, hex);
    rk_spec(&s, &node, 2);
    it_ok(rk_l4_start(1, &s, 1, &w));
    strata_err e = strata_worker_run(w, one_orch, NULL, &c);
    snprintf(msg, sizeof(msg), "%s", strata_errmsg());
    print_message("unknown callable on the remote node: %s: %s\n",
                  strata_errname(e), msg);
    /* The node never began it: its own code, as a lost node keeps
     * STRATA_EPEER, naming the callable, the digest and the node. */
    assert_int_equal(e, STRATA_ENOENT);
    rk_assert_contains(msg, hex);
    rk_assert_contains(msg, "node 1");
    rk_assert_contains(msg, "orch 'rt.no_such_callable' on node 1 could not "
                            "start");
    /* A known one still runs, and so does the worker. */
    c.c = rk_o_noop;
    it_ok(strata_worker_run(w, one_orch, NULL, &c));
    it_ok(rk_add_run(w, both, 2, 100, 3));
    rk_destroy(w, STRATA_OK);
    finish(&before);
}

/* ---- specs checked at add time ---------------------------------------- */

static strata_err add_one(const strata_remote_spec *s)
{
    strata_worker_config c4;
    strata_worker *w = NULL;
    strata_err err;
    int id;

    strata_worker_config_init(&c4, 4);
    it_try(strata_worker_create(&c4, &w));
    err = strata_worker_add_remote_worker(w, s, &id);
    if (err) {
        char msg[STRATA_ERRMSG_MAX];

        snprintf(msg, sizeof(msg), "%s", strata_errmsg());
        rk_destroy(w, STRATA_OK);
        strata_errmsg_set("%s", msg);
        return err;
    }
    rk_destroy(w, STRATA_OK);
    return STRATA_OK;
}

static void test_remote_runs_bad_specs_einval(void **state)
{
    (void)state;
    testutil_snapshot before;
    strata_remote_spec s;
    static const char *const off_loopback[] = {
        "192.0.2.1:7000", "10.1.2.3:7000", "[::]:7000", "[2001:db8::1]:7000",
        "example.com:7000"};
    testutil_snapshot_take(&before);
    rk_spec(&s, &node, 2);
    s.secret_file = NULL;
    s.insecure = true;
    for (size_t i = 0; i < sizeof(off_loopback) / sizeof(*off_loopback); i++) {
        s.endpoint = off_loopback[i];
        it_expect(STRATA_EINVAL, add_one(&s));
        rk_assert_contains(strata_errmsg(), "loopback");
    }
    /* Loopback in every spelling is fine (nothing connects before init). */
    s.endpoint = "127.0.0.1:7000";
    it_ok(add_one(&s));
    s.endpoint = "[::1]:7000";
    it_ok(add_one(&s));
    s.endpoint = "localhost:7000";
    it_ok(add_one(&s));
    /* Bad endpoints. */
    s.endpoint = "127.0.0.1";
    it_expect(STRATA_EINVAL, add_one(&s));
    s.endpoint = ":7000";
    it_expect(STRATA_EINVAL, add_one(&s));
    s.endpoint = NULL;
    it_expect(STRATA_EINVAL, add_one(&s));
    /* Ports: a number of 1..65535, never wrapped around. */
    {
        static const char *const bad_ports[][2] = {
            {"127.0.0.1:99999", "port 99999 is outside 1..65535"},
            {"127.0.0.1:65536", "port 65536 is outside"},
            {"127.0.0.1:0", "port 0 is outside"},
            {"127.0.0.1:-1", "not a number"},
            {"127.0.0.1:http", "not a number"},
        };

        for (size_t i = 0; i < sizeof(bad_ports) / sizeof(*bad_ports); i++) {
            s.endpoint = bad_ports[i][0];
            it_expect(STRATA_EINVAL, add_one(&s));
            rk_assert_contains(strata_errmsg(), bad_ports[i][1]);
        }
    }
    s.endpoint = "127.0.0.1:65535";
    it_ok(add_one(&s));
    /* Chips: each once, at most 1024. */
    rk_spec(&s, &node, 2);
    {
        static int twice[2] = {3, 3};
        static int many[1024 + 1];

        s.chip_ids = twice;
        it_expect(STRATA_EINVAL, add_one(&s));
        rk_assert_contains(strata_errmsg(), "chip_ids[1] repeats chip 3");
        for (int i = 0; i <= 1024; i++)
            many[i] = i;
        s.chip_ids = many;
        s.num_chips = 1024 + 1; /* a node has at most 1024 */
        it_expect(STRATA_EINVAL, add_one(&s));
        rk_assert_contains(strata_errmsg(), "num_chips is 1025");
    }
    /* No authentication, or two kinds of it. */
    rk_spec(&s, &node, 2);
    s.secret_file = NULL;
    it_expect(STRATA_EINVAL, add_one(&s));
    rk_spec(&s, &node, 2);
    s.insecure = true;
    it_expect(STRATA_EINVAL, add_one(&s));
    rk_spec(&s, &node, 2);
    s.cert_file = "/nonexistent.pem";
    it_expect(STRATA_EINVAL, add_one(&s));
    testutil_assert_clean(&before);
}

/* A task submitted from an orch fn goes out from the submitting thread
 * itself (a kick), without waking the connection thread. A no-op with no
 * arguments has nothing to wait for, so it is posted inside the submit;
 * of 20 such runs at most a few may be sent by the connection thread
 * first (it may send, for a post of its own, in between). */
static strata_err noop_orch(strata_orch *o, const strata_args *a, void *user)
{
    (void)a;
    (void)user;
    return strata_orch_submit_next_level(o, rk_o_noop, NULL, 0);
}

static void test_remote_runs_submitting_thread_sends_its_task(void **state)
{
    strata_remote_spec s;
    strata_worker *w = NULL;
    uint64_t kicked, sent;

    (void)state;
    rk_spec(&s, &node, 2);
    it_ok(rk_l4_start(0, &s, 1, &w));
    kicked = worker_node_frames_kicked(w, 0);
    sent = worker_node_tasks_sent(w, 0);
    for (uint32_t r = 0; r < 20; r++)
        it_ok(strata_worker_run(w, noop_orch, NULL, NULL));
    sent = worker_node_tasks_sent(w, 0) - sent;
    kicked = worker_node_frames_kicked(w, 0) - kicked;
    print_message("20 runs: %llu TASK frames, %llu frames sent by kicks\n",
                  (unsigned long long)sent, (unsigned long long)kicked);
    rk_destroy(w, STRATA_OK);
    assert_int_equal(sent, 20);
    assert_true(kicked >= 10);
}

/* Each of a destroyed L4's two sessions reads its GOODBYE and ends
 * because of it, not because the connection went away. */
static void test_remote_runs_destroy_every_session_reads_goodbye(void **state)
{
    static const char bye[] = "session ends: the parent said goodbye";
    static const int nodes[] = {0, 1};
    strata_remote_spec s[2];
    strata_worker *w = NULL;
    size_t before = rk_node_log_count(&node, bye);

    (void)state;
    rk_spec(&s[0], &node, 1);
    rk_spec(&s[1], &node, 1);
    it_ok(rk_l4_start(0, s, 2, &w));
    it_ok(rk_add_run(w, nodes, 2, 64, 3));
    rk_destroy(w, STRATA_OK);
    assert_true(rk_node_wait_sessions(&node, 0, RK_WAIT_S));
    assert_int_equal(rk_node_log_count(&node, bye) - before, 2);
}

int main(void)
{
    rk_filter_from_env();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_remote_runs_mixed_local_and_remote_ok),
        cmocka_unit_test(test_remote_runs_eight_in_flight_overlap),
        cmocka_unit_test(test_remote_runs_sockets_close_on_exec),
        cmocka_unit_test(test_remote_runs_short_task_not_behind_long_one),
        cmocka_unit_test(test_remote_runs_two_parents_concurrently_ok),
        cmocka_unit_test(test_remote_runs_unknown_callable_enoent_names_digest),
        cmocka_unit_test(test_remote_runs_bad_specs_einval),
        cmocka_unit_test(test_remote_runs_submitting_thread_sends_its_task),
        cmocka_unit_test(test_remote_runs_destroy_every_session_reads_goodbye),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
