/*
 * strata-node's limits as a parent sees them (issue 14, defects 2 and 5):
 * a node full of sessions answers with a refusal the parent reads
 * (STRATA_EBUSY, "is full"), not an authentication failure; a connection
 * dropped before its handshake (the unauthenticated limits) is reported as
 * STRATA_EBUSY too, not as a wrong key; and every limit option is checked
 * with a message naming it.
 */
#define _GNU_SOURCE
#include "limits_kit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static void expect_ebusy(const strata_remote_spec *s, const char *needle1,
                         const char *needle2)
{
    strata_worker *w = NULL;
    strata_err e = rk_l4_start(0, s, 1, &w);
    char msg[STRATA_ERRMSG_MAX];

    snprintf(msg, sizeof(msg), "%s", strata_errmsg());
    print_message("  refused: %s: %s\n", strata_errname(e), msg);
    if (e == STRATA_OK)
        rk_destroy(w, STRATA_OK);
    assert_int_equal(e, STRATA_EBUSY);
    rk_assert_contains(msg, needle1);
    rk_assert_contains(msg, needle2);
}

/* With --max-sessions 1: a second parent is told the node is full, and
 * gets in once the first has left. */
static void full_node(enum rk_auth auth)
{
    static const char *const extra[] = {"--max-sessions", "1", NULL};
    testutil_snapshot before;
    struct rk_node n;
    strata_remote_spec s;
    strata_worker *w = NULL;
    static const int node0[1] = {0};

    testutil_snapshot_take(&before);
    assert_int_equal(lk_node_start(&n, auth, extra), 0);
    rk_spec(&s, &n, 1);
    it_ok(rk_l4_start(0, &s, 1, &w));
    expect_ebusy(&s, "is full: 1 sessions", n.endpoint);
    /* The first goes on undisturbed. */
    it_ok(rk_add_run(w, node0, 1, 100, 3));
    rk_destroy(w, STRATA_OK);
    assert_true(rk_node_wait_sessions(&n, 0, RK_WAIT_S));
    rk_assert_serves(&n);
    assert_true(rk_node_log_has(&n, "is full", RK_WAIT_S));
    assert_true(rk_node_alive(&n));
    assert_int_equal(rk_node_stop(&n), 0);
    testutil_assert_clean(&before);
}

/* With --max-procs-total 3: a parent holding 2 chips leaves room for one
 * more process, not two; a HELLO past the total is refused with
 * STRATA_EBUSY naming the option, the first parent goes on, and once it
 * has left (or was killed) its processes count no more. */
static void test_limits_procs_total_refused_ebusy(void **state)
{
    static const char *const extra[] = {"--max-procs-total", "3", NULL};
    static const int node0[1] = {0};
    testutil_snapshot before;
    struct rk_node n;
    strata_remote_spec s2, s1;
    strata_worker *w = NULL, *w1 = NULL;
    pid_t session = 0;

    (void)state;
    testutil_snapshot_take(&before);
    assert_int_equal(lk_node_start(&n, RK_PSK, extra), 0);
    rk_spec(&s2, &n, 2);
    rk_spec(&s1, &n, 1);
    it_ok(rk_l4_start(0, &s2, 1, &w));
    expect_ebusy(&s2, "--max-procs-total", "already runs 2 of the 3");
    /* One more fits; then nothing does. */
    it_ok(rk_l4_start(0, &s1, 1, &w1));
    expect_ebusy(&s1, "--max-procs-total", "already runs 3 of the 3");
    it_ok(rk_add_run(w, node0, 1, 100, 3));
    rk_destroy(w, STRATA_OK);
    /* A session killed outright gives its processes back too. */
    assert_true(rk_node_wait_sessions(&n, 1, RK_WAIT_S));
    assert_int_equal(rk_node_sessions(&n, &session, 1), 1);
    assert_int_equal(kill(session, SIGKILL), 0);
    rk_destroy(w1, STRATA_EPEER);
    assert_true(rk_node_wait_sessions(&n, 0, RK_WAIT_S));
    it_ok(rk_l4_start(0, &s2, 1, &w));
    rk_destroy(w, STRATA_OK);
    assert_true(rk_node_wait_sessions(&n, 0, RK_WAIT_S));
    assert_true(rk_node_log_has(&n, "--max-procs-total", RK_WAIT_S));
    assert_int_equal(rk_node_stop(&n), 0);
    testutil_assert_clean(&before);
}

/* With --max-buffer-bytes 64KiB: a task whose tensors' shadow buffers
 * need more fails with STRATA_ENOMEM naming the option, as the limits
 * table says: nothing of the parent's ran, so it is no STRATA_ETASK.
 * The session goes on: a task that fits runs after it. */
static void test_limits_buffer_cap_task_enomem(void **state)
{
    static const char *const extra[] = {"--max-buffer-bytes", "64KiB", NULL};
    static const int node0[1] = {0};
    testutil_snapshot before;
    struct rk_node n;
    strata_remote_spec s;
    strata_worker *w = NULL;
    strata_err err;

    (void)state;
    testutil_snapshot_take(&before);
    assert_int_equal(lk_node_start(&n, RK_PSK, extra), 0);
    rk_spec(&s, &n, 2);
    it_ok(rk_l4_start(0, &s, 1, &w));
    /* x, y and z of 32768 words each: 384 KiB of shadows. */
    err = rk_add_run(w, node0, 1, 32768, 3);
    print_message("  %s: %s\n", strata_errname(err), strata_errmsg());
    assert_int_equal(err, STRATA_ENOMEM);
    rk_assert_contains(strata_errmsg(), "--max-buffer-bytes");
    rk_assert_contains(strata_errmsg(), "could not start");
    it_ok(rk_add_run(w, node0, 1, 100, 3));
    rk_destroy(w, STRATA_OK);
    assert_true(rk_node_wait_sessions(&n, 0, RK_WAIT_S));
    assert_int_equal(rk_node_stop(&n), 0);
    testutil_assert_clean(&before);
}

/* Buffers are counted in whole pages: with --max-buffer-bytes 64KiB,
 * 1-byte buffers stop at as many as there are pages in it, and a
 * released one makes room for one more. */
static void test_limits_buffer_cap_counts_pages(void **state)
{
    static const char *const extra[] = {"--max-buffer-bytes", "64KiB", NULL};
    size_t pages = (64u << 10) / (size_t)sysconf(_SC_PAGESIZE);
    strata_buffer *b[64 + 1] = {0};
    testutil_snapshot before;
    struct rk_node n;
    strata_remote_spec s;
    strata_worker *w = NULL;
    strata_buffer *extra_b = NULL;

    (void)state;
    assert_true(pages <= 64);
    testutil_snapshot_take(&before);
    assert_int_equal(lk_node_start(&n, RK_PSK, extra), 0);
    rk_spec(&s, &n, 1);
    it_ok(rk_l4_start(0, &s, 1, &w));
    for (size_t i = 0; i < pages; i++)
        it_ok(strata_worker_create_remote_buffer(w, 0, 1, &b[i]));
    assert_int_equal(strata_worker_create_remote_buffer(w, 0, 1, &extra_b),
                     STRATA_ENOMEM);
    print_message("  past the pages: %s\n", strata_errmsg());
    rk_assert_contains(strata_errmsg(), "--max-buffer-bytes");
    rk_assert_contains(strata_errmsg(), "in whole pages");
    it_ok(strata_buffer_release(b[0]));
    it_ok(strata_worker_create_remote_buffer(w, 0, 1, &b[0]));
    for (size_t i = 0; i < pages; i++)
        it_ok(strata_buffer_release(b[i]));
    rk_destroy(w, STRATA_OK);
    assert_true(rk_node_wait_sessions(&n, 0, RK_WAIT_S));
    assert_int_equal(rk_node_stop(&n), 0);
    testutil_assert_clean(&before);
}

/* Four 2 s node tasks at once on 2 chips' worth of spans. */
static strata_err four_spans_orch(strata_orch *o, const strata_args *args,
                                  void *user)
{
    (void)args;
    return rk_submit_spans(o, user, 4, 2000, 0);
}

/* With --max-tasks 2: a parent that sends more ends its session, and the
 * parent is told why (a GOODBYE naming the option), not that a chip
 * died; it learns it at once, not when the running tasks end. */
static void test_limits_max_tasks_parent_told(void **state)
{
    static const char *const extra[] = {"--max-tasks", "2", NULL};
    testutil_snapshot before;
    struct rk_node n;
    strata_remote_spec s;
    strata_worker *w = NULL;
    strata_buffer *spans = NULL;
    strata_err err;

    (void)state;
    testutil_snapshot_take(&before);
    assert_int_equal(lk_node_start(&n, RK_PSK, extra), 0);
    rk_spec(&s, &n, 2);
    it_ok(rk_l4_start(0, &s, 1, &w));
    it_ok(strata_worker_create_buffer(w, 4 * sizeof(struct rt_span), &spans));
    err = strata_worker_run(w, four_spans_orch, NULL, spans);
    print_message("  %s: %s\n", strata_errname(err), strata_errmsg());
    assert_int_equal(err, STRATA_EPEER);
    rk_assert_contains(strata_errmsg(), "--max-tasks");
    it_ok(strata_buffer_release(spans));
    rk_destroy(w, STRATA_EPEER);
    assert_true(rk_node_wait_sessions(&n, 0, RK_WAIT_S));
    assert_int_equal(rk_node_stop(&n), 0);
    testutil_assert_clean(&before);
}

struct late {
    strata_buffer *spans;
    uint64_t ms;
    double deadline_s;
};

/* One rt.span of ms on chip 0 under a deadline. */
static strata_err late_orch(strata_orch *o, const strata_args *args, void *user)
{
    struct late *l = user;

    (void)args;
    it_try(strata_orch_set_deadline(o, l->deadline_s));
    return rk_submit_spans(o, l->spans, 1, l->ms, 0);
}

/* With --max-tasks 2: tasks past their deadline go on in the background,
 * no longer in flight; two of them still running make a third task with
 * a deadline refused (STRATA_EBUSY naming the option: each holds a thread,
 * and before, 3000 such tasks held 3000), and once they end the node
 * takes one again. The session lives on throughout. */
static void test_limits_late_tasks_bounded(void **state)
{
    static const char *const extra[] = {"--max-tasks", "2", NULL};
    testutil_snapshot before;
    struct rk_node n;
    strata_remote_spec s;
    strata_worker *w = NULL;
    struct late l = {.ms = 1500, .deadline_s = 0.2};
    strata_err err;
    double t0;

    (void)state;
    testutil_snapshot_take(&before);
    assert_int_equal(lk_node_start(&n, RK_PSK, extra), 0);
    rk_spec(&s, &n, 1);
    it_ok(rk_l4_start(0, &s, 1, &w));
    it_ok(strata_worker_create_buffer(w, sizeof(struct rt_span), &l.spans));
    for (int i = 0; i < 2; i++)
        assert_int_equal(strata_worker_run(w, late_orch, NULL, &l),
                         STRATA_ETIMEDOUT);
    err = strata_worker_run(w, late_orch, NULL, &l);
    print_message("  a third: %s: %s\n", strata_errname(err), strata_errmsg());
    assert_int_equal(err, STRATA_EBUSY);
    rk_assert_contains(strata_errmsg(), "--max-tasks 2");
    /* Taken again once one has ended (they run one after the other on
     * chip 0: the first after 1.5 s); it runs after the second. */
    l.ms = 10;
    l.deadline_s = 30;
    t0 = testutil_now();
    do
        err = strata_worker_run(w, late_orch, NULL, &l);
    while (err == STRATA_EBUSY && testutil_now() - t0 < RK_WAIT_S);
    print_message("  then after %.1f s: %s: %s\n", testutil_now() - t0,
                  strata_errname(err), err ? strata_errmsg() : "");
    assert_int_equal(err, STRATA_OK);
    it_ok(strata_buffer_release(l.spans));
    rk_destroy(w, STRATA_OK);
    assert_true(rk_node_wait_sessions(&n, 0, RK_WAIT_S));
    assert_int_equal(rk_node_stop(&n), 0);
    testutil_assert_clean(&before);
}

static void test_limits_full_node_psk_ebusy(void **state)
{
    (void)state;
    full_node(RK_PSK);
}

static void test_limits_full_node_plaintext_ebusy(void **state)
{
    (void)state;
    full_node(RK_INSECURE);
}

static int raw_connect(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    return fd;
}

struct held {
    const struct rk_node *n;
    const char *needle;
    size_t want;
};

static bool log_count_is(void *arg)
{
    struct held *h = arg;

    return lk_log_count(h->n, h->needle, false) >= h->want;
}

/* One unauthenticated connection may be open at a time: a parent that
 * comes while a silent client holds it is dropped before its handshake
 * and told so (STRATA_EBUSY), not "authentication failed". */
static void test_limits_unauth_full_dropped_not_eauth(void **state)
{
    (void)state;
    static const char *const extra[] = {"--max-unauth", "1", NULL};
    testutil_snapshot before;
    struct rk_node n;
    strata_remote_spec s;
    int silent;

    testutil_snapshot_take(&before);
    assert_int_equal(lk_node_start(&n, RK_PSK, extra), 0);
    silent = raw_connect(n.port);
    rk_spec(&s, &n, 1);
    expect_ebusy(&s, n.endpoint, "busy with other connections");
    close(silent);
    /* The slot is free once the daemon has seen the close. */
    rk_assert_serves(&n);
    assert_true(rk_node_alive(&n));
    assert_int_equal(rk_node_stop(&n), 0);
    testutil_assert_clean(&before);
}

/* A silent client is dropped at --handshake-timeout, counted in the
 * summary, and forks nothing. */
static void test_limits_handshake_timeout_drops_silent(void **state)
{
    (void)state;
    static const char *const extra[] = {"--handshake-timeout", "0.5", NULL};
    testutil_snapshot before;
    struct rk_node n;
    struct held h = {&n, "no HELLO in time", 1};
    pid_t kids[4];
    int silent;
    char c;

    testutil_snapshot_take(&before);
    assert_int_equal(lk_node_start(&n, RK_PSK, extra), 0);
    silent = raw_connect(n.port);
    assert_int_equal(rk_node_sessions(&n, kids, 4), 0);
    assert_true(testutil_wait_until(log_count_is, &h, RK_WAIT_S));
    /* Closed by the daemon: EOF. */
    assert_int_equal(recv(silent, &c, 1, 0), 0);
    close(silent);
    rk_assert_serves(&n);
    assert_int_equal(rk_node_stop(&n), 0);
    testutil_assert_clean(&before);
}

/* The daemon's CPU time (user + system) in seconds, from /proc. */
static double cpu_s(pid_t pid)
{
    char path[64], buf[1024];
    unsigned long long ut = 0, st = 0;
    const char *p;
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "re");
    assert_non_null(f);
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* Past the command's closing parenthesis: field 3 on. */
    p = strrchr(buf, ')');
    assert_non_null(p);
    assert_int_equal(sscanf(p + 2,
                            "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
                            "%llu %llu",
                            &ut, &st),
                     2);
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

#define IDLE_CLIENTS 48

/* Out of fds with connections still queued, the daemon neither spins on
 * its readable listener nor writes a line per failed accept: one line,
 * then it rests; once the idle clients are gone it serves again. */
static void test_limits_out_of_fds_rests(void **state)
{
    (void)state;
    static const char *const extra[] = {"--max-unauth", "200",
                                        "--max-unauth-per-source", "200", NULL};
    struct rlimit old, low;
    testutil_snapshot before;
    struct rk_node n;
    int idle[IDLE_CLIENTS];
    double t0, c0, used;

    testutil_snapshot_take(&before);
    assert_int_equal(lk_node_start(&n, RK_PSK, extra), 0);
    /* Lowering another process's soft limit needs only the same user. */
    assert_int_equal(prlimit(n.pid, RLIMIT_NOFILE, NULL, &old), 0);
    low = (struct rlimit){24, old.rlim_max};
    assert_int_equal(prlimit(n.pid, RLIMIT_NOFILE, &low, NULL), 0);
    for (int i = 0; i < IDLE_CLIENTS; i++)
        idle[i] = raw_connect(n.port);
    assert_true(rk_node_log_has(&n, "until fds are free", RK_WAIT_S));
    c0 = cpu_s(n.pid);
    t0 = testutil_now();
    testutil_sleep(1.0);
    used = cpu_s(n.pid) - c0;
    print_message("out of fds: %.2f s of CPU in %.2f s; %zu accept lines\n",
                  used, testutil_now() - t0,
                  lk_log_count(&n, "accept:", false));
    /* Spinning takes a whole CPU; resting, next to nothing. */
    assert_true(used < 0.3);
    assert_int_equal(lk_log_count(&n, "accept:", false), 1);
    for (int i = 0; i < IDLE_CLIENTS; i++)
        close(idle[i]);
    /* The sessions it forks from here on need their usual fds. */
    assert_int_equal(prlimit(n.pid, RLIMIT_NOFILE, &old, NULL), 0);
    rk_assert_serves(&n);
    assert_int_equal(rk_node_stop(&n), 0);
    testutil_assert_clean(&before);
}

/* Runs strata-node with args; returns its exit status, output in out. */
static int daemon_exits(const char *const *args, char *out, size_t cap)
{
    char cmd[2048] = "'" RT_NODE_PATH "' --listen 127.0.0.1:0 --insecure";
    FILE *p;
    size_t n;
    int status;

    for (size_t i = 0; args[i]; i++) {
        strncat(cmd, " '", sizeof(cmd) - strlen(cmd) - 1);
        strncat(cmd, args[i], sizeof(cmd) - strlen(cmd) - 1);
        strncat(cmd, "'", sizeof(cmd) - strlen(cmd) - 1);
    }
    strncat(cmd, " 2>&1", sizeof(cmd) - strlen(cmd) - 1);
    p = popen(cmd, "re");
    assert_non_null(p);
    n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_limits_bad_options_refused(void **state)
{
    (void)state;
    static const char *const bad[][3] = {
        {"--max-sessions", "0", "from 1 to 65536"},
        {"--max-sessions", "12x", "whole number"},
        {"--max-unauth", "10:30:5", "START:RATE:FULL"},
        {"--max-unauth", "10:0:20", "RATE"},
        {"--max-unauth", "10:101:20", "RATE"},
        {"--max-unauth", "0", "START:RATE:FULL"},
        {"--max-unauth-per-source", "-1", "whole number"},
        {"--handshake-timeout", "0", "seconds from 0.1"},
        {"--handshake-timeout", "nan", "seconds"},
        {"--max-tasks", "99999999999", "whole number"},
        {"--max-threads", "0", "from 1 to 4096"},
        {"--max-buffer-bytes", "12XB", "KiB, MiB, GiB, TiB or PiB"},
        {"--max-buffer-bytes", "99999999TiB", "size from"},
        {"--max-window-bytes", "2PiB", "size from"},
        {"--max-window-bytes", "1", "size from 4096"},
        {"--max-procs", "", "whole number"},
        {"--max-procs-total", "0", "from 1 to 1048576"},
        {"--reply-high-water", "1KiB", "size from 65536"},
    };
    char out[4096], opt[96];

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *args[] = {bad[i][0], bad[i][1], NULL};
        int rc = daemon_exits(args, out, sizeof(out));

        print_message("  %s '%s' -> %d: %s", bad[i][0], bad[i][1], rc, out);
        assert_int_equal(rc, 2);
        snprintf(opt, sizeof(opt), "%s %s:", bad[i][0], bad[i][1]);
        rk_assert_contains(out, opt);
        rk_assert_contains(out, bad[i][2]);
    }
}

/* Every option at a legal value: the daemon starts and serves. */
static void test_limits_good_options_accepted(void **state)
{
    (void)state;
    static const char *const extra[] = {"--max-sessions",
                                        "3",
                                        "--max-unauth",
                                        "4:50:16",
                                        "--max-unauth-per-source",
                                        "2",
                                        "--handshake-timeout",
                                        "2.5",
                                        "--max-tasks",
                                        "64",
                                        "--max-threads",
                                        "8",
                                        "--max-buffer-bytes",
                                        "1GiB",
                                        "--max-window-bytes",
                                        "1PiB",
                                        "--max-procs",
                                        "16",
                                        "--max-procs-total",
                                        "100",
                                        "--reply-high-water",
                                        "8M",
                                        NULL};
    testutil_snapshot before;
    struct rk_node n;

    testutil_snapshot_take(&before);
    assert_int_equal(lk_node_start(&n, RK_PSK, extra), 0);
    rk_assert_serves(&n);
    assert_int_equal(rk_node_stop(&n), 0);
    testutil_assert_clean(&before);
}

int main(void)
{
    rk_filter_from_env();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_limits_full_node_psk_ebusy),
        cmocka_unit_test(test_limits_full_node_plaintext_ebusy),
        cmocka_unit_test(test_limits_procs_total_refused_ebusy),
        cmocka_unit_test(test_limits_buffer_cap_task_enomem),
        cmocka_unit_test(test_limits_buffer_cap_counts_pages),
        cmocka_unit_test(test_limits_max_tasks_parent_told),
        cmocka_unit_test(test_limits_late_tasks_bounded),
        cmocka_unit_test(test_limits_unauth_full_dropped_not_eauth),
        cmocka_unit_test(test_limits_handshake_timeout_drops_silent),
        cmocka_unit_test(test_limits_out_of_fds_rests),
        cmocka_unit_test(test_limits_bad_options_refused),
        cmocka_unit_test(test_limits_good_options_accepted),
    };
    if (rk_register() != 0)
        return 1;
    return cmocka_run_group_tests(tests, NULL, NULL);
}
