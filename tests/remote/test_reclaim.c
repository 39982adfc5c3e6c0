/*
 * A process killed outright leaves no /dev/shm names behind (issue 14,
 * defect 7): strata-node removes those of a session it reaps (SIGKILL
 * mid-task, shadow buffers live), and of the session's chips, at once,
 * not at the next worker's sweep; an L4 removes those of a forked node
 * that died under it.
 */
#define _GNU_SOURCE
#include "limits_kit.h"
#include "node_launch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static struct rk_node psk;
static char scratch[RK_DIR_MAX];

/* rc.hold, a node orch fn for forked nodes (registered here, before they
 * fork): makes a buffer in the node's own worker (a /dev/shm name of the
 * node's pid), creates hold_marker, and waits up to 30 s to be killed. */
static strata_callable rc_hold;
static char hold_marker[RK_PATH_MAX];

static strata_err hold_fn(strata_orch *o, const strata_args *args, void *user)
{
    strata_buffer *b = NULL;
    double end = testutil_now() + 30.0;
    int fd;

    (void)args;
    (void)user;
    it_try(strata_worker_create_buffer(strata_orch_worker(o), 4096, &b));
    fd = open(hold_marker, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0)
        close(fd);
    while (testutil_now() < end)
        poll(NULL, 0, 100); /* a task that waits to be killed */
    return strata_buffer_release(b);
}

static strata_err hold_orch(strata_orch *o, const strata_args *args, void *user)
{
    strata_args *a = NULL;
    strata_err err;

    (void)args;
    (void)user;
    it_try(strata_args_create(&a));
    err = strata_orch_submit_next_level(o, rc_hold, a, 0);
    strata_args_destroy(a);
    return err;
}

static int group_setup(void **state)
{
    (void)state;
    snprintf(scratch, sizeof(scratch), "/tmp/strata-rt-reclaim-XXXXXX");
    if (rk_register() != 0 || !mkdtemp(scratch) ||
        strata_register_orch("rc.hold", hold_fn, &rc_hold) != STRATA_OK)
        return -1;
    snprintf(hold_marker, sizeof(hold_marker), "%s/node-holds", scratch);
    return rk_node_start(&psk, RK_PSK, NULL);
}

static int group_teardown(void **state)
{
    (void)state;
    int rc = rk_node_stop(&psk);

    if (scratch[0] && rmdir(scratch) != 0)
        rc = -1;
    return rc;
}

struct tree {
    pid_t pid[16];
    size_t n;
};

static size_t tree_names(const struct tree *t)
{
    size_t n = 0;

    for (size_t i = 0; i < t->n; i++)
        n += lk_shm_of(t->pid[i]);
    return n;
}

static bool tree_clean(void *arg)
{
    return tree_names(arg) == 0;
}

/* Starts a 30 s task on node `node` of a new L4 (forked nodes first);
 * returns once it runs. */
static void start_blocked(size_t forked, const strata_remote_spec *s,
                          size_t nremote, struct rk_block *c, char *marker,
                          strata_worker **w, strata_run **run)
{
    it_ok(rk_l4_start(forked, s, nremote, w));
    it_ok(strata_worker_create_buffer(*w, sizeof(struct rt_span), &c->span));
    it_ok(strata_worker_create_buffer(*w, strlen(marker) + 1, &c->path));
    memcpy(strata_buffer_data(c->path), marker, strlen(marker) + 1);
    it_ok(strata_worker_submit(*w, rk_block_orch, NULL, c, run));
    assert_true(testutil_wait_until(rk_file_exists, marker, RK_WAIT_S));
}

/* A /dev/shm name of a dead process outside any session (a child that
 * exited at once): a host-wide sweep removes it, the daemon's does not. */
static pid_t canary_make(void)
{
    char name[64];
    pid_t pid = fork();
    int fd;

    if (pid == 0)
        _exit(0);
    assert_true(pid > 0);
    assert_true(testutil_wait_child(pid, RK_WAIT_S, NULL));
    snprintf(name, sizeof(name), "/strata-%u-%d-b1", (unsigned)getuid(),
             (int)pid);
    fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    close(fd);
    return pid;
}

static void canary_remove(pid_t pid)
{
    char name[64];

    snprintf(name, sizeof(name), "/strata-%u-%d-b1", (unsigned)getuid(),
             (int)pid);
    shm_unlink(name);
}

static void test_reclaim_killed_session_names_removed(void **state)
{
    (void)state;
    testutil_snapshot before;
    strata_remote_spec s;
    strata_worker *w = NULL;
    strata_run *run = NULL;
    struct rk_block c = {.node = 0, .ms = 30000};
    struct tree t = {.n = 0};
    char marker[RK_PATH_MAX], marker2[96];
    pid_t canary;
    size_t left;
    double t0;

    testutil_snapshot_take(&before);
    canary = canary_make();
    snprintf(marker, sizeof(marker), "%s/session-started", scratch);
    rk_spec(&s, &psk, 2);
    start_blocked(0, &s, 1, &c, marker, &w, &run);
    assert_int_equal(rk_node_sessions(&psk, t.pid, 1), 1);
    {
        struct rk_node fake = {.pid = t.pid[0]};

        t.n = 1 + rk_node_sessions(&fake, t.pid + 1, 15);
    }
    left = tree_names(&t);
    print_message("session %d and %zu children: %zu names\n", (int)t.pid[0],
                  t.n - 1, left);
    assert_true(lk_shm_of(t.pid[0]) > 0); /* its shadow buffers */
    t0 = testutil_now();
    assert_int_equal(kill(t.pid[0], SIGKILL), 0);
    /* Before any other worker starts here (whose start-up sweep would
     * remove them too): the daemon that reaped it did. */
    if (!testutil_wait_until(tree_clean, &t, 5.0))
        fail_msg("%zu names of killed session %d still in /dev/shm 5 s "
                 "later",
                 tree_names(&t), (int)t.pid[0]);
    print_message("its names went within %.3f s\n", testutil_now() - t0);
    assert_true(rk_node_log_has(&psk, "killed by signal 9", RK_WAIT_S));
    /* By the daemon, not by a worker starting elsewhere on the host,
     * whose start-up sweep removes every dead process's names: then the
     * canary, a name of another dead process, has gone too. */
    snprintf(marker2, sizeof(marker2), "names of dead process %d",
             (int)t.pid[0]);
    if (!rk_node_log_has(&psk, marker2, 1.0)) {
        if (lk_shm_of(canary) > 0)
            fail_msg("the names of session %d went, but not by the daemon",
                     (int)t.pid[0]);
        print_message("another worker's sweep removed them first\n");
    }
    canary_remove(canary);
    it_expect(STRATA_EPEER, strata_run_wait(run, RK_WAIT_S));
    strata_run_free(run);
    rk_destroy(w, STRATA_EPEER);
    assert_int_equal(unlink(marker), 0);
    rk_assert_serves(&psk);
    rk_assert_idle(&psk, &before);
}

/* A forked L3 node killed under its L4: the L4 removes the names it had
 * made once it has reaped it, without waiting for the worker's end. */
static void test_reclaim_killed_forked_node_names_removed(void **state)
{
    (void)state;
    testutil_snapshot before;
    strata_worker *w = NULL;
    strata_run *run = NULL;
    struct tree t = {.n = 0};
    pid_t kids[16];
    size_t nkids = 0;
    double t0;

    testutil_snapshot_take(&before);
    it_ok(rk_l4_start(1, NULL, 0, &w));
    it_ok(strata_worker_submit(w, hold_orch, NULL, NULL, &run));
    assert_true(testutil_wait_until(rk_file_exists, hold_marker, RK_WAIT_S));
    testutil_children_of(getpid(), kids, &nkids, 16);
    for (size_t i = 0; i < nkids; i++)
        if (kids[i] != psk.pid)
            t.pid[t.n++] = kids[i];
    assert_int_equal(t.n, 1);
    print_message("node %d: %zu names\n", (int)t.pid[0], tree_names(&t));
    assert_true(lk_shm_of(t.pid[0]) > 0);
    t0 = testutil_now();
    assert_int_equal(kill(t.pid[0], SIGKILL), 0);
    it_expect(STRATA_EPEER, strata_run_wait(run, RK_WAIT_S));
    strata_run_free(run);
    /* The worker lives on: its teardown would sweep them anyway. */
    if (!testutil_wait_until(tree_clean, &t, 5.0))
        fail_msg("%zu names of killed node %d still in /dev/shm 5 s later",
                 tree_names(&t), (int)t.pid[0]);
    print_message("its names went within %.3f s\n", testutil_now() - t0);
    rk_destroy(w, STRATA_EPEER);
    assert_int_equal(unlink(hold_marker), 0);
    testutil_assert_clean(&before);
}

int main(void)
{
    rk_filter_from_env();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reclaim_killed_session_names_removed),
        cmocka_unit_test(test_reclaim_killed_forked_node_names_removed),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
