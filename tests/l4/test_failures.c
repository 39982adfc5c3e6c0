/*
 * Faults against a real L4 tree (L4 process -> L3 node processes -> chip
 * processes): kill -9 of a node or of a chip inside a node mid-task,
 * SIGKILL of the L4 process, the one start-up deadline, a chip whose init
 * fails inside a node, fault points and an allocation countdown in the L4.
 * Needs base/fault.h.
 */
#define _GNU_SOURCE
#include "it_countdown.h"
#include "l4_kit.h"

#include "base/fault.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* Destroy after a process of the tree died: OK or EPEER, and nothing may
 * leak. */
static void destroy_after_death(strata_worker *w,
                                const testutil_snapshot *before)
{
    strata_err e = it_worker_destroy(w);
    if (e != STRATA_OK && e != STRATA_EPEER)
        fail_msg("destroy after a death: %s (%s)", strata_errname(e),
                 strata_errmsg());
    testutil_assert_clean(before);
}

static void assert_gone_within(testutil_pids *p, double s, const char *what)
{
    double t0 = testutil_now();
    if (!testutil_wait_until(testutil_pids_gone, p, s)) {
        for (size_t i = 0; i < p->n; i++)
            if (!p->gone[i])
                print_error("pid %d still there\n", (int)p->pid[i]);
        fail_msg("%s: processes still alive %.1f s later", what, s);
    }
    print_message("%s: all gone after %.3f s\n", what, testutil_now() - t0);
}

/* ---- kill -9 mid-task */

struct kill_ctx {
    strata_buffer *flags, *o, *p, *q;
    int node, chip;
};

/* T1 blocks on (node, chip) writing o; T2 on the other node reads o into p
 * (poisoned by T1's failure); T3 on the other node fills q (independent). */
static strata_err block_orch(strata_orch *o, const strata_args *args,
                             void *user)
{
    (void)args;
    struct kill_ctx *k = user;
    struct l4_t t[2] = {{k->flags, 0, 3, STRATA_NO_DEP},
                        {k->o, 0, 4, STRATA_OUT}};
    it_try(l4_forward(o, k->node, L4_K_BLOCK, k->chip, t, 2, NULL, 0));
    it_try(l4_scale(o, 1 - k->node, k->o, 0, k->p, 0, 4, 1, 0xdead));
    return l4_fill(o, 1 - k->node, k->q, 0, 4, 60, 0);
}

struct one_ctx {
    strata_buffer *b;
    int node, chip;
};

/* One fill task on (node, chip). */
static strata_err one_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)args;
    struct one_ctx *c = user;
    struct l4_t t = {c->b, 0, 4, STRATA_OUT};
    uint64_t s[2] = {500, 0};
    return l4_forward(o, c->node, L4_K_FILL, c->chip, &t, 1, s, 2);
}

static strata_err run_one(strata_worker *w, strata_buffer *b, int node,
                          int chip, char *msg, size_t cap)
{
    struct one_ctx c = {b, node, chip};
    memset(strata_buffer_data(b), 0, 16);
    strata_err e = strata_worker_run(w, one_orch, NULL, &c);
    snprintf(msg, cap, "%s", strata_errmsg());
    return e;
}

/* Starts block_orch on (node 1, chip 0) of a 2 x 2 L4 and waits until the
 * kernel runs. */
static strata_run *start_blocked(strata_worker **w, struct kill_ctx *k)
{
    strata_run *run = NULL;
    it_ok(l4_start(2, 2, w));
    it_ok(strata_worker_create_buffer(*w, 16, &k->flags));
    it_ok(strata_worker_create_buffer(*w, 16, &k->o));
    it_ok(strata_worker_create_buffer(*w, 16, &k->p));
    it_ok(strata_worker_create_buffer(*w, 16, &k->q));
    k->node = 1;
    k->chip = 0;
    it_ok(strata_worker_submit(*w, block_orch, NULL, k, &run));
    assert_true(testutil_wait_u32(&it_u32(k->flags)[1], 1, IT_WAIT_S));
    return run;
}

static void check_poison(const struct kill_ctx *k)
{
    for (uint32_t i = 0; i < 4; i++) {
        assert_int_equal(it_u32(k->q)[i], 60 + i); /* independent: ran */
        assert_int_equal(it_u32(k->p)[i], 0);      /* dependent: poisoned */
    }
}

static void test_l4_failures_kill_node_mid_task_epeer(void **state)
{
    (void)state;
    testutil_snapshot before;
    struct kill_ctx k;
    strata_worker *w = NULL;
    testutil_pids p = {.n = 0};
    char msg[STRATA_ERRMSG_MAX];
    testutil_snapshot_take(&before);
    /* Orphaned chips become ours, so we can see them die and reap them. */
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    strata_run *run = start_blocked(&w, &k);
    pid_t node = strata_worker_node_pid(w, 1);
    assert_true(node > 0);
    p.n = l4_children_of(node, p.pid, 8);
    assert_int_equal(p.n, 2); /* its two chips */
    double t0 = testutil_now();
    assert_int_equal(kill(node, SIGKILL), 0);
    strata_err e = strata_run_wait(run, 5.0);
    double took = testutil_now() - t0;
    snprintf(msg, sizeof(msg), "%s", strata_errmsg());
    strata_run_free(run);
    print_message("kill -9 node 1: %s after %.3f s: %s\n", strata_errname(e),
                  took, msg);
    if (e != STRATA_EPEER)
        fail_msg("run after kill -9 of node 1: %s (%s)", strata_errname(e),
                 msg);
    if (took >= 2.0)
        fail_msg("EPEER took %.3f s after the kill", took);
    l4_assert_contains(msg, "node 1");
    check_poison(&k);
    /* Its chips die with it. */
    assert_gone_within(&p, 2.0, "chips of the killed node");
    /* The other node still works; the dead one fails at once. */
    it_ok(run_one(w, k.q, 0, 1, msg, sizeof(msg)));
    assert_int_equal(it_u32(k.q)[3], 503);
    t0 = testutil_now();
    it_expect(STRATA_EPEER, run_one(w, k.q, 1, 1, msg, sizeof(msg)));
    assert_true(testutil_now() - t0 < 1.0);
    l4_assert_contains(msg, "node 1");
    destroy_after_death(w, &before);
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 0), 0);
}

static void test_l4_failures_kill_chip_in_node_mid_task_epeer(void **state)
{
    (void)state;
    testutil_snapshot before;
    struct kill_ctx k;
    strata_worker *w = NULL;
    char msg[STRATA_ERRMSG_MAX];
    pid_t kids[8];
    testutil_snapshot_take(&before);
    strata_run *run = start_blocked(&w, &k);
    pid_t node = strata_worker_node_pid(w, 1);
    pid_t chip = (pid_t)it_u32(k.flags)[2]; /* the blocked kernel's pid */
    size_t nk = l4_children_of(node, kids, 8);
    bool is_kid = false;
    for (size_t i = 0; i < nk; i++)
        is_kid |= kids[i] == chip;
    assert_true(is_kid);
    double t0 = testutil_now();
    assert_int_equal(kill(chip, SIGKILL), 0);
    strata_err e = strata_run_wait(run, 5.0);
    double took = testutil_now() - t0;
    snprintf(msg, sizeof(msg), "%s", strata_errmsg());
    strata_run_free(run);
    print_message("kill -9 chip 0 of node 1: %s after %.3f s: %s\n",
                  strata_errname(e), took, msg);
    if (e != STRATA_EPEER)
        fail_msg("run after kill -9 of a node's chip: %s (%s)",
                 strata_errname(e), msg);
    if (took >= 2.0)
        fail_msg("EPEER took %.3f s after the kill", took);
    l4_assert_contains(msg, "node 1");
    l4_assert_contains(msg, "chip 0");
    check_poison(&k);
    /* The node lives on: its other chip works, the dead one fails. */
    assert_true(testutil_pid_exists(node));
    it_ok(run_one(w, k.q, 1, 1, msg, sizeof(msg)));
    assert_int_equal(it_u32(k.q)[0], 500);
    it_expect(STRATA_EPEER, run_one(w, k.q, 1, 0, msg, sizeof(msg)));
    l4_assert_contains(msg, "chip 0");
    it_ok(run_one(w, k.q, 0, 0, msg, sizeof(msg)));
    destroy_after_death(w, &before);
}

/* ---- SIGKILL of the L4 process */

/* In a forked child: start an L4 of 2 nodes x 1 chip, run once, report
 * {node 0, node 1, chip of node 0, chip of node 1}, wait to be killed. */
static int doomed_l4(void *arg, int wfd)
{
    (void)arg;
    int pids[4] = {-1, -1, -1, -1};
    strata_worker *w = NULL;
    strata_buffer *b = NULL;
    struct one_ctx c = {NULL, 0, 0};
    if (l4_start(2, 1, &w) == STRATA_OK &&
        strata_worker_create_buffer(w, 16, &b) == STRATA_OK) {
        c.b = b;
        for (int i = 0; i < 2; i++) {
            pid_t chip = -1;
            c.node = i;
            if (strata_worker_run(w, one_orch, NULL, &c) != STRATA_OK)
                break;
            pids[i] = strata_worker_node_pid(w, i);
            if (l4_children_of(pids[i], &chip, 1) == 1)
                pids[2 + i] = (int)chip;
        }
    }
    if (!testutil_write_full(wfd, pids, sizeof(pids)))
        return 2;
    for (;;)
        pause();
}

/* Fails if /dev/shm still holds a strata segment named for pid. */
static void assert_no_segment_of(pid_t pid)
{
    static testutil_snapshot now;
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "strata-%u-%d-", (unsigned)getuid(),
             (int)pid);
    testutil_snapshot_take(&now);
    for (size_t i = 0; i < now.num_shm; i++)
        if (strncmp(now.shm[i], prefix, strlen(prefix)) == 0)
            fail_msg("segment /dev/shm/%s of dead process %d not reclaimed",
                     now.shm[i], (int)pid);
}

static void test_l4_failures_l4_sigkill_tree_gone(void **state)
{
    (void)state;
    testutil_snapshot before;
    testutil_pids p = {.n = 4};
    int pids[4], rfd, st;
    strata_worker *w = NULL;
    testutil_snapshot_take(&before);
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    pid_t child = testutil_spawn(doomed_l4, NULL, &rfd);
    assert_true(child > 0);
    bool got = testutil_read_full(rfd, pids, sizeof(pids), 30.0);
    close(rfd);
    assert_int_equal(kill(child, SIGKILL), 0);
    assert_true(testutil_wait_child(child, 5.0, &st));
    assert_true(got);
    for (size_t i = 0; i < 4; i++) {
        assert_true(pids[i] > 0);
        p.pid[i] = pids[i];
    }
    assert_gone_within(&p, 2.0, "nodes and chips of a SIGKILLed L4");
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 0), 0);
    /* The dead L4's buffer is reclaimed by the next worker's init. */
    it_ok(l4_start(1, 1, &w));
    it_ok(it_worker_destroy(w));
    assert_no_segment_of(child);
    testutil_assert_clean(&before);
}

/* ---- the one start-up deadline */

static void test_l4_failures_tiny_startup_deadline_etimedout(void **state)
{
    (void)state;
    testutil_snapshot before;
    strata_worker *w = NULL;
    testutil_snapshot_take(&before);
    it_ok(l4_create(2, 2, 1e-6, &w));
    double t0 = testutil_now();
    strata_err e = strata_worker_init(w);
    double took = testutil_now() - t0;
    print_message("init with a 1 us deadline: %s after %.3f s: %s\n",
                  strata_errname(e), took, strata_errmsg());
    it_expect(STRATA_ETIMEDOUT, e);
    /* Who was late, by name (not "children"). */
    assert_non_null(strstr(strata_errmsg(), "node 0 (pid "));
    assert_true(took < 5.0);
    assert_int_equal(testutil_new_children(&before), 0); /* rolled back */
    it_expect(STRATA_ESTATE, strata_worker_run(w, one_orch, NULL, NULL));
    it_ok(it_worker_destroy(w));
    testutil_assert_clean(&before);
}

/* The L4's deadline is the tree's: a node's own startup_timeout_s does not
 * start a fresh budget (nor cut the tree's short). */
static void test_l4_failures_node_timeout_ignored_tree_deadline_ok(void **state)
{
    (void)state;
    testutil_snapshot before;
    static const int ids[2] = {0, 1};
    strata_worker_config cfg;
    strata_worker *w = NULL, *n = NULL;
    strata_buffer *b = NULL;
    char msg[STRATA_ERRMSG_MAX];
    int id;
    testutil_snapshot_take(&before);
    strata_worker_config_init(&cfg, 4);
    cfg.startup_timeout_s = 30;
    it_ok(it_worker_create(&cfg, &w));
    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = ids;
    cfg.num_chips = 2;
    cfg.startup_timeout_s = 1e-6;
    it_ok(strata_worker_create(&cfg, &n));
    it_ok(strata_worker_add_worker(w, n, &id));
    it_ok(strata_worker_init(w));
    it_ok(strata_worker_create_buffer(w, 16, &b));
    it_ok(run_one(w, b, 0, 1, msg, sizeof(msg)));
    assert_int_equal(it_u32(b)[3], 503);
    it_ok(it_worker_destroy(w));
    testutil_assert_clean(&before);
}

/* ---- a node's chip fails its init */

static void test_l4_failures_chip_init_env_fails_l4_init(void **state)
{
    (void)state;
    testutil_snapshot before;
    strata_worker *w = NULL;
    strata_buffer *b = NULL;
    char msg[STRATA_ERRMSG_MAX];
    testutil_snapshot_take(&before);
    it_ok(l4_create(2, 2, 30.0, &w));
    it_ok(strata_worker_create_buffer(w, 4096, &b));
    base_fault_disarm_all(); /* rereads STRATA_FAULT at the next point */
    assert_int_equal(setenv("STRATA_FAULT", "chip.init:1", 1), 0);
    strata_err e = strata_worker_init(w);
    snprintf(msg, sizeof(msg), "%s", strata_errmsg());
    assert_int_equal(unsetenv("STRATA_FAULT"), 0);
    base_fault_disarm_all();
    print_message("init with STRATA_FAULT=chip.init:1: %s: %s\n",
                  strata_errname(e), msg);
    if (e == STRATA_OK)
        fail_msg("L4 init succeeded with failing chips");
    it_expect(STRATA_EIO, e); /* the chip's own error comes up */
    l4_assert_contains(msg, "node ");
    l4_assert_contains(msg, "chip ");
    l4_assert_contains(msg, "fault point chip.init");
    assert_int_equal(testutil_new_children(&before), 0);
    it_ok(it_worker_destroy(w)); /* and destroy frees the buffer */
    testutil_assert_clean(&before);
}

/* ---- fault points in the L4 and its nodes */

static void test_l4_failures_second_node_fork_fails_init(void **state)
{
    (void)state;
    testutil_snapshot before;
    strata_worker *w = NULL;
    testutil_snapshot_take(&before);
    it_ok(l4_create(2, 2, 30.0, &w));
    base_fault_arm("worker.fork", 2, BASE_FAULT_FAIL);
    strata_err e = strata_worker_init(w);
    base_fault_disarm_all();
    print_message("init with fork #2 failing: %s: %s\n", strata_errname(e),
                  strata_errmsg());
    it_expect(STRATA_ESYS, e);
    assert_int_equal(testutil_new_children(&before), 0);
    it_ok(it_worker_destroy(w));
    testutil_assert_clean(&before);
}

static void test_l4_failures_node_task_fault_etask(void **state)
{
    (void)state;
    testutil_snapshot before;
    strata_worker *w = NULL;
    strata_buffer *b = NULL;
    char msg[STRATA_ERRMSG_MAX];
    testutil_snapshot_take(&before);
    /* Armed before the fork: each node's first task fails. */
    base_fault_arm("node.task", 1, BASE_FAULT_FAIL);
    strata_err e = l4_start(2, 1, &w);
    base_fault_disarm_all();
    it_ok(e);
    it_ok(strata_worker_create_buffer(w, 16, &b));
    it_expect(STRATA_ETASK, run_one(w, b, 1, 0, msg, sizeof(msg)));
    l4_assert_contains(msg, "node 1");
    l4_assert_contains(msg, "fault point node.task");
    it_ok(run_one(w, b, 1, 0, msg, sizeof(msg)));
    assert_int_equal(it_u32(b)[2], 502);
    it_ok(it_worker_destroy(w));
    testutil_assert_clean(&before);
}

/* ---- allocation countdown in the L4 process */

struct countdown_ctx {
    strata_buffer *a, *b;
};

static strata_err countdown_orch(strata_orch *o, const strata_args *args,
                                 void *user)
{
    (void)args;
    struct countdown_ctx *c = user;
    it_try(l4_fill(o, 0, c->a, 0, 4, 3, 0));
    return l4_scale(o, 1, c->a, 0, c->b, 0, 4, 2, 0);
}

/* One create/add/buffer/init/run/destroy pass of a 2 x 1 L4. Returns the
 * step that failed with ENOMEM (0 = none); any other error fails. */
static int countdown_pass(long n)
{
    static const int ids[] = {0};
    static const char *const steps[] = {
        "create L4",  "create node 0", "add node 0", "create node 1",
        "add node 1", "buffer",        "buffer",     "init",
        "run",        "destroy"};
    strata_worker_config cfg;
    strata_worker *w = NULL, *nodes[2] = {NULL, NULL};
    struct countdown_ctx c;
    strata_err e[10] = {0};
    char msg[STRATA_ERRMSG_MAX] = "";
    int step = 0, id;
    strata_worker_config_init(&cfg, 4);
    e[0] = it_worker_create(&cfg, &w);
    for (int i = 0; i < 2 && !e[step]; i++) {
        strata_worker_config_init(&cfg, 3);
        cfg.chip_ids = ids;
        cfg.num_chips = 1;
        e[step = 1 + 2 * i] = strata_worker_create(&cfg, &nodes[i]);
        if (!e[step])
            e[step = 2 + 2 * i] = strata_worker_add_worker(w, nodes[i], &id);
        if (e[step] && nodes[i])
            it_ok(strata_worker_destroy(nodes[i])); /* still ours */
    }
    if (!e[step])
        e[step = 5] = strata_worker_create_buffer(w, 16, &c.a);
    if (!e[step])
        e[step = 6] = strata_worker_create_buffer(w, 16, &c.b);
    if (!e[step])
        e[step = 7] = strata_worker_init(w);
    if (!e[step])
        e[step = 8] = strata_worker_run(w, countdown_orch, NULL, &c);
    if (!e[step] && it_u32(c.b)[3] != 12)
        fail_msg("n=%ld: run OK but wrong values", n);
    snprintf(msg, sizeof(msg), "%s", strata_errmsg());
    if (w) {
        e[step = 9] = it_worker_destroy(w);
        if (e[9])
            snprintf(msg, sizeof(msg), "%s", strata_errmsg());
    }
    return it_countdown_verdict(n, e, steps, 10, msg);
}

static void test_l4_failures_alloc_countdown_enomem_no_leak(void **state)
{
    (void)state;
    it_alloc_countdown(countdown_pass);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_l4_failures_kill_node_mid_task_epeer,
                                  it_teardown),
        cmocka_unit_test_teardown(
            test_l4_failures_kill_chip_in_node_mid_task_epeer, it_teardown),
        cmocka_unit_test_teardown(test_l4_failures_l4_sigkill_tree_gone,
                                  it_teardown),
        cmocka_unit_test_teardown(
            test_l4_failures_tiny_startup_deadline_etimedout, it_teardown),
        cmocka_unit_test_teardown(
            test_l4_failures_node_timeout_ignored_tree_deadline_ok,
            it_teardown),
        cmocka_unit_test_teardown(test_l4_failures_chip_init_env_fails_l4_init,
                                  it_teardown),
        cmocka_unit_test_teardown(test_l4_failures_second_node_fork_fails_init,
                                  it_teardown),
        cmocka_unit_test_teardown(test_l4_failures_node_task_fault_etask,
                                  it_teardown),
        cmocka_unit_test_teardown(
            test_l4_failures_alloc_countdown_enomem_no_leak, it_teardown),
    };
    return cmocka_run_group_tests(tests, l4_setup, NULL);
}
