/*
 * Faults against real strata-node daemons on 127.0.0.1 (one PSK daemon and
 * one insecure daemon for the group): kill -9 of a session process
 * mid-task, a parent killed mid-task, and hostile clients: garbage before
 * and after the TLS handshake, truncated, oversized and malformed frames,
 * a message before HELLO, a silent connection, a burst of connections.
 * Each must cost only its own session; the daemon keeps serving.
 * Needs wire/ headers (frames, TLS contexts) for the raw clients.
 */
#define _GNU_SOURCE
#include "remote_kit.h"

#include "wire/frame.h"
#include "wire/msg.h"
#include "wire/tls.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static struct rk_node psk, plain;
static char scratch[RK_DIR_MAX];

static int group_setup(void **state)
{
    (void)state;
    snprintf(scratch, sizeof(scratch), "/tmp/strata-rt-faults-XXXXXX");
    if (rk_register() != 0 || !mkdtemp(scratch))
        return -1;
    if (rk_node_start(&psk, RK_PSK, NULL) != 0 ||
        rk_node_start(&plain, RK_INSECURE, NULL) != 0)
        return -1;
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    int rc = rk_node_stop(&psk);
    rc |= rk_node_stop(&plain);
    if (scratch[0] && rmdir(scratch) != 0)
        rc = -1;
    return rc;
}

/* ---- raw clients -------------------------------------------------------- */

static int raw_connect(const struct rk_node *n)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)n->port)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        fail_msg("connect to %s: %s", n->endpoint, strerror(errno));
    return fd;
}

/* True once the peer closed fd (EOF or reset) within timeout_s. */
static bool peer_closes(int fd, double timeout_s)
{
    double deadline = testutil_now() + timeout_s;
    char buf[4096];

    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        double left = deadline - testutil_now();
        ssize_t r;

        if (left <= 0)
            return false;
        if (poll(&p, 1, (int)(left * 1000) + 1) <= 0)
            continue;
        r = read(fd, buf, sizeof(buf));
        if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN))
            return true;
    }
}

static void header(uint8_t out[12], uint8_t type, uint32_t body_len)
{
    struct wire_frame_header h = {WIRE_FRAME_VERSION, type, 0, body_len};

    wire_frame_header_pack(&h, out);
}

/* The daemon lives, its sessions drain, a good client works, no leaks. */
static void still_serves(struct rk_node *n, const testutil_snapshot *before)
{
    assert_true(rk_node_alive(n));
    if (!rk_node_wait_sessions(n, 0, RK_WAIT_S))
        fail_msg("sessions of %s still running %.0f s later", n->endpoint,
                 RK_WAIT_S);
    rk_assert_serves(n);
    assert_true(rk_node_wait_sessions(n, 0, RK_WAIT_S));
    testutil_assert_clean(before);
}

/* Sends bytes on a fresh connection; expects the session to hang up on
 * us (promptly) unless we close first, and its log to say why. */
static void hostile(struct rk_node *n, const void *bytes, size_t len,
                    bool we_close, const char *log_reason)
{
    int fd = raw_connect(n);
    double t0 = testutil_now();

    assert_true(testutil_write_full(fd, bytes, len));
    if (!we_close) {
        if (!peer_closes(fd, 5.0))
            fail_msg("%s kept a hostile connection open for 5 s (%zu bytes "
                     "sent)",
                     n->endpoint, len);
        print_message("  %s hung up after %.3f s\n", n->endpoint,
                      testutil_now() - t0);
    }
    close(fd);
    if (log_reason && !rk_node_log_has(n, log_reason, RK_WAIT_S)) {
        rk_node_print_log(n);
        fail_msg("no \"%s\" in the log of %s", log_reason, n->endpoint);
    }
    assert_true(rk_node_wait_sessions(n, 0, RK_WAIT_S));
}

static void test_remote_faults_garbage_before_tls_dropped(void **state)
{
    (void)state;
    testutil_snapshot before;
    static const char http[] = "GET / HTTP/1.0\r\nHost: x\r\n\r\n";
    uint8_t frame[64];
    struct wire_msg m = {.type = WIRE_MSG_HEARTBEAT};
    struct wire_buf b;
    testutil_snapshot_take(&before);
    hostile(&psk, http, sizeof(http) - 1, false, "TLS error");
    /* A well-formed strata frame is still not TLS: never parsed. */
    wire_buf_init(&b);
    m.u.heartbeat.seq = 1;
    it_ok(wire_msg_pack(&m, &b));
    hostile(&psk, b.data, b.len, false, NULL);
    wire_buf_fini(&b);
    memset(frame, 0x16, sizeof(frame)); /* looks like a TLS record type */
    hostile(&psk, frame, sizeof(frame), true, NULL);
    /* Nothing at all. */
    hostile(&psk, "", 0, true, NULL);
    still_serves(&psk, &before);
}

static void test_remote_faults_bad_frames_dropped(void **state)
{
    (void)state;
    testutil_snapshot before;
    uint8_t buf[256];
    struct wire_msg m = {.type = WIRE_MSG_HEARTBEAT};
    struct wire_buf b;
    testutil_snapshot_take(&before);
    memset(buf, 0, sizeof(buf));
    /* The insecure daemon parses frames right away. */
    print_message("bad magic\n");
    hostile(&plain, "GET / HTTP/1.0\r\n\r\n", 18, false, "bad frame");
    print_message("oversized: body_len 0xfffffff0\n");
    header(buf, WIRE_MSG_DATA_CHUNK, 0xfffffff0u);
    hostile(&plain, buf, 12, false, NULL);
    print_message("unknown type, non-zero flags\n");
    header(buf, 200, 8);
    hostile(&plain, buf, 20, false, NULL);
    header(buf, WIRE_MSG_HELLO, 8);
    buf[6] = 0x80;
    hostile(&plain, buf, 20, false, NULL);
    print_message("malformed body\n");
    header(buf, WIRE_MSG_HELLO, 16);
    memset(buf + 12, 0xc1, 16); /* a byte msgpack never uses */
    hostile(&plain, buf, 28, false, "malformed message");
    print_message("truncated: header of 200, 50 body bytes, close\n");
    header(buf, WIRE_MSG_HELLO, 200);
    memset(buf + 12, 0x80, 50);
    hostile(&plain, buf, 62, true, "without GOODBYE");
    print_message("half a header, close\n");
    hostile(&plain, "STRA\x01", 5, true, NULL);
    print_message("a valid frame before HELLO\n");
    wire_buf_init(&b);
    m.u.heartbeat.seq = 1;
    it_ok(wire_msg_pack(&m, &b));
    hostile(&plain, b.data, b.len, false, "before HELLO");
    wire_buf_fini(&b);
    still_serves(&plain, &before);
}

/* A PSK client that authenticates properly, then misbehaves. */
static void tls_hostile(const void *bytes, size_t len)
{
    struct wire_tls_cfg cfg = {.secret_file = psk.secret};
    SSL_CTX *ctx = NULL;
    SSL *ssl;
    int fd = raw_connect(&psk);
    char c;

    it_ok(wire_tls_ctx_create(&cfg, false, &ctx));
    ssl = SSL_new(ctx);
    assert_non_null(ssl);
    assert_int_equal(SSL_set_fd(ssl, fd), 1);
    if (SSL_connect(ssl) != 1)
        fail_msg("the TLS handshake with the right PSK failed");
    assert_true(SSL_write(ssl, bytes, (int)len) == (int)len);
    /* The session hangs up (or sends GOODBYE, then hangs up). */
    double t0 = testutil_now();
    struct timeval tv = {5, 0};
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)),
                     0);
    while (SSL_read(ssl, &c, 1) > 0)
        ;
    if (testutil_now() - t0 > 4.5)
        fail_msg("an authenticated bad client was kept for 5 s");
    SSL_free(ssl);
    close(fd);
    wire_tls_ctx_free(ctx);
}

static void test_remote_faults_bad_frames_after_tls_dropped(void **state)
{
    (void)state;
    testutil_snapshot before;
    uint8_t buf[64];
    testutil_snapshot_take(&before);
    memset(buf, 'x', sizeof(buf));
    tls_hostile(buf, sizeof(buf));
    assert_true(rk_node_log_has(&psk, "bad frame", RK_WAIT_S));
    header(buf, WIRE_MSG_TASK, 0xffffff00u);
    tls_hostile(buf, 12);
    header(buf, WIRE_MSG_HELLO, 16);
    memset(buf + 12, 0xc1, 16);
    tls_hostile(buf, 28);
    assert_true(rk_node_log_has(&psk, "malformed message", RK_WAIT_S));
    still_serves(&psk, &before);
}

struct log_count {
    const struct rk_node *n;
    const char *needle;
    size_t above;
};

static bool log_count_above(void *arg)
{
    const struct log_count *l = arg;

    return rk_node_log_count(l->n, l->needle) > l->above;
}

/* A parent that completes the PSK handshake and hangs up before HELLO:
 * the session says its parent closed, not that "the node went away" (the
 * client's wording, about a node). */
static void test_remote_faults_psk_close_before_hello_logged(void **state)
{
    (void)state;
    struct wire_tls_cfg cfg = {.secret_file = psk.secret};
    struct log_count l = {&psk, "without GOODBYE", 0};
    testutil_snapshot before;
    SSL_CTX *ctx = NULL;
    SSL *ssl;
    int fd;

    testutil_snapshot_take(&before);
    l.above = rk_node_log_count(&psk, l.needle);
    it_ok(wire_tls_ctx_create(&cfg, false, &ctx));
    fd = raw_connect(&psk);
    ssl = SSL_new(ctx);
    assert_non_null(ssl);
    assert_int_equal(SSL_set_fd(ssl, fd), 1);
    if (SSL_connect(ssl) != 1)
        fail_msg("the TLS handshake with the right PSK failed");
    SSL_free(ssl);
    close(fd);
    wire_tls_ctx_free(ctx);
    assert_true(testutil_wait_until(log_count_above, &l, RK_WAIT_S));
    assert_int_equal(rk_node_log_count(&psk, "accepted our key"), 0);
    still_serves(&psk, &before);
}

static void test_remote_faults_silent_and_burst_clients_harmless(void **state)
{
    (void)state;
    testutil_snapshot before;
    int silent[2];
    testutil_snapshot_take(&before);
    /* Connections that say nothing do not hold the daemon up. */
    silent[0] = raw_connect(&psk);
    silent[1] = raw_connect(&plain);
    rk_assert_serves(&psk);
    rk_assert_serves(&plain);
    /* And their sessions end at the HELLO deadline (10 s), TLS or not:
     * a handshake that never comes does not hold a session either, nor
     * does a HELLO trickled in a byte a second (the deadline runs from
     * the accept, not from the last byte). */
    {
        int drip = raw_connect(&plain);
        uint8_t hdr[12];
        double t0 = testutil_now();
        bool closed = false;

        header(hdr, WIRE_MSG_HELLO, 4000);
        for (int i = 0; i < 12 && !closed; i++) {
            if (send(drip, &hdr[i], 1, MSG_NOSIGNAL) != 1)
                closed = true;
            else
                closed = peer_closes(drip, 1.0);
        }
        while (!closed && testutil_now() - t0 < 15.0)
            closed =
                peer_closes(drip, 1.0) || send(drip, "x", 1, MSG_NOSIGNAL) != 1;
        assert_true(closed);
        assert_true(testutil_now() - t0 < 15.0);
        close(drip);
    }
    assert_true(peer_closes(silent[0], 15.0));
    assert_true(peer_closes(silent[1], 15.0));
    assert_true(rk_node_log_has(&psk, "no HELLO in time", RK_WAIT_S));
    assert_true(rk_node_log_has(&plain, "no HELLO in time", RK_WAIT_S));
    close(silent[0]);
    close(silent[1]);
    /* A burst of connect-and-close. */
    for (int i = 0; i < 32; i++) {
        close(raw_connect(&psk));
        close(raw_connect(&plain));
    }
    still_serves(&psk, &before);
    testutil_snapshot_take(&before);
    still_serves(&plain, &before);
}

/* ---- kill -9 ------------------------------------------------------------ */

struct pids {
    pid_t pid[16];
    size_t n;
};

static bool all_gone(void *arg)
{
    struct pids *p = arg;
    bool gone = true;

    for (size_t i = 0; i < p->n; i++)
        gone = testutil_pid_gone_reap(p->pid[i]) && gone;
    return gone;
}

static size_t children_of(pid_t pid, pid_t *out, size_t cap)
{
    struct rk_node fake = {.pid = pid};

    return rk_node_sessions(&fake, out, cap);
}

/* Number of /dev/shm entries named for creator pid. */
static size_t shm_of(pid_t pid)
{
    char prefix[64];
    size_t n = 0;
    struct dirent *e;
    DIR *d = opendir("/dev/shm");

    if (!d)
        return 0;
    snprintf(prefix, sizeof(prefix), "strata-%u-%d-", (unsigned)getuid(),
             (int)pid);
    while ((e = readdir(d)) != NULL)
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

static bool shm_gone(void *arg)
{
    return shm_of(*(pid_t *)arg) == 0;
}

static void marker_path(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", scratch, name);
}

static void test_remote_faults_kill9_session_mid_task_epeer(void **state)
{
    (void)state;
    testutil_snapshot before;
    strata_remote_spec s;
    strata_worker *w = NULL;
    strata_run *run = NULL;
    struct rk_block c = {.node = 1, .ms = 30000};
    struct pids chips = {.n = 0};
    char marker[RK_PATH_MAX], msg[STRATA_ERRMSG_MAX];
    pid_t sess[4];
    static const int node0[1] = {0};
    testutil_snapshot_take(&before);
    /* Orphaned chips of the killed session become ours to reap. */
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    marker_path(marker, sizeof(marker), "kill9-started");
    rk_spec(&s, &psk, 2);
    it_ok(rk_l4_start(1, &s, 1, &w));
    it_ok(strata_worker_create_buffer(w, sizeof(struct rt_span), &c.span));
    it_ok(strata_worker_create_buffer(w, strlen(marker) + 1, &c.path));
    memcpy(strata_buffer_data(c.path), marker, strlen(marker) + 1);
    it_ok(strata_worker_submit(w, rk_block_orch, NULL, &c, &run));
    assert_true(testutil_wait_until(rk_file_exists, marker, RK_WAIT_S));
    assert_int_equal(rk_node_sessions(&psk, sess, 4), 1);
    chips.n = children_of(sess[0], chips.pid, 16);
    assert_int_equal(chips.n, 2);
    assert_true(shm_of(sess[0]) > 0); /* its shadow buffers */
    double t0 = testutil_now();
    assert_int_equal(kill(sess[0], SIGKILL), 0);
    strata_err e = strata_run_wait(run, 5.0);
    double took = testutil_now() - t0;
    snprintf(msg, sizeof(msg), "%s", strata_errmsg());
    strata_run_free(run);
    print_message("kill -9 of session %d: %s after %.3f s: %s\n", (int)sess[0],
                  strata_errname(e), took, msg);
    if (e != STRATA_EPEER)
        fail_msg("run after kill -9 of the session: %s (%s)", strata_errname(e),
                 msg);
    if (took >= 2.0)
        fail_msg("EPEER took %.3f s after the kill", took);
    rk_assert_contains(msg, "node 1");
    rk_assert_contains(msg, psk.endpoint);
    /* The forked node works on; the lost one fails at once. */
    it_ok(rk_add_run(w, node0, 1, 1000, 1));
    t0 = testutil_now();
    it_expect(STRATA_EPEER, strata_worker_run(w, rk_block_orch, NULL, &c));
    assert_true(testutil_now() - t0 < 1.0);
    rk_destroy(w, STRATA_EPEER);
    assert_int_equal(unlink(marker), 0);
    /* The session's chips die with it, and its segments go. */
    if (!testutil_wait_until(all_gone, &chips, 2.0))
        fail_msg("chips %d, %d of the killed session still alive 2 s later",
                 (int)chips.pid[0], (int)chips.pid[1]);
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 0), 0);
    print_message("segments of the killed session left: %zu\n",
                  shm_of(sess[0]));
    still_serves(&psk, &before);
    /* Its named segments (the shadow buffers) outlive it until the next
     * worker on the host starts and reclaims those of dead creators. */
    if (!testutil_wait_until(shm_gone, &sess[0], 2.0))
        fail_msg("%zu /dev/shm/strata-%u-%d-* segments of the killed "
                 "session are left behind after the next session started",
                 shm_of(sess[0]), (unsigned)getuid(), (int)sess[0]);
}

/* In a forked child: an L4 whose remote node runs a long task; writes one
 * byte once the task runs, then waits to be killed. */
static int doomed_parent(void *arg, int fd)
{
    const char *marker = arg;
    strata_remote_spec s;
    strata_worker *w = NULL;
    strata_run *run = NULL;
    struct rk_block c = {.node = 0, .ms = 20000};

    rk_spec(&s, &psk, 2);
    if (rk_l4_start(0, &s, 1, &w) ||
        strata_worker_create_buffer(w, sizeof(struct rt_span), &c.span) ||
        strata_worker_create_buffer(w, strlen(marker) + 1, &c.path))
        return 1;
    memcpy(strata_buffer_data(c.path), marker, strlen(marker) + 1);
    if (strata_worker_submit(w, rk_block_orch, NULL, &c, &run) ||
        !testutil_wait_until(rk_file_exists, (void *)(uintptr_t)marker,
                             RK_WAIT_S) ||
        write(fd, "r", 1) != 1)
        return 2;
    for (;;)
        pause();
}

static void test_remote_faults_parent_killed_session_ends(void **state)
{
    (void)state;
    testutil_snapshot before;
    char marker[RK_PATH_MAX], c;
    struct pids chips = {.n = 0};
    pid_t sess[4];
    int rfd, status;
    testutil_snapshot_take(&before);
    marker_path(marker, sizeof(marker), "parent-started");
    pid_t child = testutil_spawn(doomed_parent, marker, &rfd);
    assert_true(child > 0);
    if (!testutil_read_full(rfd, &c, 1, RK_WAIT_S)) {
        kill(child, SIGKILL);
        waitpid(child, &status, 0);
        fail_msg("the doomed parent never got its task running");
    }
    close(rfd);
    assert_int_equal(rk_node_sessions(&psk, sess, 4), 1);
    chips.n = children_of(sess[0], chips.pid, 16);
    double t0 = testutil_now();
    assert_int_equal(kill(child, SIGKILL), 0);
    assert_true(testutil_wait_child(child, RK_WAIT_S, &status));
    assert_int_equal(unlink(marker), 0);
    /* EOF without GOODBYE: the session ends, its 20 s task with it. */
    bool ended = rk_node_wait_sessions(&psk, 0, 5.0);
    print_message("parent killed: its session %s after %.3f s\n",
                  ended ? "ended" : "still running", testutil_now() - t0);
    if (!ended)
        fail_msg("session %d outlived its killed parent by 5 s (its task "
                 "runs on)",
                 (int)sess[0]);
    assert_true(rk_node_log_has(&psk, "without GOODBYE", RK_WAIT_S));
    still_serves(&psk, &before);
}

/* ---- the daemon stops ---------------------------------------------------- */

static void test_remote_faults_daemon_sigterm_idle_node_lost(void **state)
{
    (void)state;
    testutil_snapshot before;
    struct rk_node own;
    strata_remote_spec s;
    strata_worker *w = NULL;
    char msg[STRATA_ERRMSG_MAX];
    static const int nodes[2] = {0, 1}, node0[1] = {0};
    testutil_snapshot_take(&before);
    assert_int_equal(rk_node_start(&own, RK_PSK, NULL), 0);
    rk_spec(&s, &own, 2);
    it_ok(rk_l4_start(1, &s, 1, &w));
    it_ok(rk_add_run(w, nodes, 2, 1000, 3));
    double t0 = testutil_now();
    assert_int_equal(rk_node_stop(&own), 0); /* SIGTERM, exit status 0 */
    double stop_s = testutil_now() - t0;
    strata_err e = rk_add_run(w, nodes + 1, 1, 1000, 4);
    snprintf(msg, sizeof(msg), "%s", strata_errmsg());
    print_message("daemon stopped in %.3f s; then a run on its node: %s: "
                  "%s\n",
                  stop_s, strata_errname(e), msg);
    assert_true(stop_s < 2.0);
    assert_int_equal(e, STRATA_EPEER);
    rk_assert_contains(msg, "node 1");
    /* The forked node is unaffected. */
    it_ok(rk_add_run(w, node0, 1, 1000, 5));
    rk_destroy(w, STRATA_EPEER);
    testutil_assert_clean(&before);
}

/* A session that dies after the TLS handshake took the key, before its
 * first frame (fault point node.session): the node went away, which is
 * STRATA_EPEER, not an authentication failure (the key was accepted). */
static void test_remote_faults_session_dies_before_hello_epeer(void **state)
{
    (void)state;
    testutil_snapshot before;
    struct rk_node own;
    strata_remote_spec s;
    strata_worker *w = NULL;
    strata_err e;
    char msg[STRATA_ERRMSG_MAX];

    testutil_snapshot_take(&before);
    assert_int_equal(
        rk_node_start_fault(&own, RK_PSK, NULL, "node.session:1:kill"), 0);
    rk_spec(&s, &own, 2);
    e = rk_l4_start(0, &s, 1, &w);
    snprintf(msg, sizeof(msg), "%s", strata_errmsg());
    print_message("init: %s: %s\n", strata_errname(e), msg);
    assert_int_equal(e, STRATA_EPEER);
    rk_assert_contains(msg, "went away");
    assert_null(w);
    assert_int_equal(rk_node_stop(&own), 0);
    testutil_assert_clean(&before);
}

static void test_remote_faults_daemon_sigterm_mid_task_goodbye(void **state)
{
    (void)state;
    testutil_snapshot before;
    struct rk_node own;
    strata_remote_spec s;
    strata_worker *w = NULL;
    strata_run *run = NULL;
    struct rk_block c = {.node = 0, .ms = 10000};
    char marker[RK_PATH_MAX], msg[STRATA_ERRMSG_MAX];
    testutil_snapshot_take(&before);
    marker_path(marker, sizeof(marker), "sigterm-started");
    assert_int_equal(rk_node_start(&own, RK_PSK, NULL), 0);
    rk_spec(&s, &own, 2);
    it_ok(rk_l4_start(0, &s, 1, &w));
    it_ok(strata_worker_create_buffer(w, sizeof(struct rt_span), &c.span));
    it_ok(strata_worker_create_buffer(w, strlen(marker) + 1, &c.path));
    memcpy(strata_buffer_data(c.path), marker, strlen(marker) + 1);
    it_ok(strata_worker_submit(w, rk_block_orch, NULL, &c, &run));
    assert_true(testutil_wait_until(rk_file_exists, marker, RK_WAIT_S));
    double t0 = testutil_now();
    rk_node_term(&own);
    strata_err e = strata_run_wait(run, RK_WAIT_S);
    double took = testutil_now() - t0;
    snprintf(msg, sizeof(msg), "%s", strata_errmsg());
    strata_run_free(run);
    print_message("SIGTERM to the daemon mid-task: %s after %.3f s: %s\n",
                  strata_errname(e), took, msg);
    rk_destroy(w, STRATA_EPEER);
    int stopped = rk_node_stop(&own);
    assert_int_equal(unlink(marker), 0);
    /* A session killed by its daemon leaves its segments until a worker
     * starts on this host: start one. */
    rk_assert_serves(&psk);
    assert_true(rk_node_wait_sessions(&psk, 0, RK_WAIT_S));
    testutil_assert_clean(&before);
    assert_int_equal(stopped, 0);
    assert_int_equal(e, STRATA_EPEER);
    rk_assert_contains(msg, "node 0");
    /* The session says why (GOODBYE) and does not wait for the task. */
    rk_assert_contains(msg, "shutting down");
    assert_true(took < 2.0);
}

/* SIGUSR1, SIGUSR2, SIGALRM, SIGPROF, the real-time signals and the like
 * are logged and change nothing; SIGHUP (a closing terminal) stops the
 * daemon in order, as SIGTERM does. */
static void test_remote_faults_daemon_signals_logged_hup_stops(void **state)
{
    (void)state;
    const int ignored[] = {SIGUSR1, SIGUSR2, SIGALRM, SIGPROF, SIGRTMIN};
    testutil_snapshot before;
    struct rk_node own;
    int status = 0;

    testutil_snapshot_take(&before);
    assert_int_equal(rk_node_start(&own, RK_PSK, NULL), 0);
    for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
        assert_int_equal(kill(own.pid, ignored[i]), 0);
    assert_true(rk_node_log_has(&own, "(ALRM) from pid", RK_WAIT_S));
    assert_true(rk_node_log_has(&own, "(USR1) from pid", 0));
    assert_true(rk_node_log_has(&own, "(USR2) from pid", 0));
    assert_true(rk_node_log_has(&own, "(PROF) from pid", 0));
    assert_true(rk_node_log_has(&own, "(RTMIN+0) from pid", RK_WAIT_S));
    rk_assert_serves(&own);
    own.term_sent = true;
    assert_int_equal(kill(own.pid, SIGHUP), 0);
    assert_true(testutil_wait_child(own.pid, RK_WAIT_S, &status));
    own.exited = true;
    own.status = status;
    print_message("after SIGHUP: exit status %d\n",
                  WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    assert_true(rk_node_log_has(&own, "(HUP): shutting down", 0));
    assert_int_equal(rk_node_stop(&own), 0);
    testutil_assert_clean(&before);
}

int main(void)
{
    rk_filter_from_env();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_remote_faults_garbage_before_tls_dropped),
        cmocka_unit_test(test_remote_faults_bad_frames_dropped),
        cmocka_unit_test(test_remote_faults_bad_frames_after_tls_dropped),
        cmocka_unit_test(test_remote_faults_psk_close_before_hello_logged),
        cmocka_unit_test(test_remote_faults_silent_and_burst_clients_harmless),
        cmocka_unit_test(test_remote_faults_kill9_session_mid_task_epeer),
        cmocka_unit_test(test_remote_faults_parent_killed_session_ends),
        cmocka_unit_test(test_remote_faults_daemon_sigterm_idle_node_lost),
        cmocka_unit_test(test_remote_faults_daemon_sigterm_mid_task_goodbye),
        cmocka_unit_test(test_remote_faults_daemon_signals_logged_hup_stops),
        cmocka_unit_test(test_remote_faults_session_dies_before_hello_epeer),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
