/*
 * Authentication against real strata-node daemons on 127.0.0.1: a PSK
 * daemon, a certificate daemon (cluster CA, node and client certificates
 * made with the openssl CLI, plus a rogue CA) and an insecure one. Every
 * wrong client is refused with a clear error at strata_worker_init, and the
 * daemon keeps serving good clients afterwards. Also the secret-file rules
 * and the daemon's own refusals (--insecure off loopback, a world-readable
 * secret).
 */
#define _GNU_SOURCE
#include "remote_kit.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static struct rk_certs certs;
static struct rk_node psk, cert, plain;
static char scratch[RK_DIR_MAX]; /* other secrets */

static int group_setup(void **state)
{
    (void)state;
    snprintf(scratch, sizeof(scratch), "/tmp/strata-rt-auth-XXXXXX");
    if (rk_register() != 0 || !mkdtemp(scratch))
        return -1;
    double t0 = testutil_now();
    if (rk_certs_make(&certs) != 0)
        return -1;
    print_message("cluster CA, node and client certificates made in %.3f s\n",
                  testutil_now() - t0);
    if (rk_node_start(&psk, RK_PSK, NULL) != 0 ||
        rk_node_start(&cert, RK_CERT, &certs) != 0 ||
        rk_node_start(&plain, RK_INSECURE, NULL) != 0)
        return -1;
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    int rc = rk_node_stop(&psk);
    rc |= rk_node_stop(&cert);
    rc |= rk_node_stop(&plain);
    rk_certs_remove(&certs);
    if (scratch[0] && rmdir(scratch) != 0)
        rc = -1; /* a test left a file behind */
    return rc;
}

static void scratch_path(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", scratch, name);
}

/* Starts an L4 with one remote node per spec s, expecting init to fail
 * within 5 s with want (or any error when want is STRATA_OK); the message
 * goes to msg. */
static strata_err init_fails(const strata_remote_spec *s, strata_err want,
                             char *msg, size_t cap)
{
    strata_worker *w = NULL;
    double t0 = testutil_now();
    strata_err e = rk_l4_start(0, s, 1, &w);
    double took = testutil_now() - t0;

    snprintf(msg, cap, "%s", strata_errmsg());
    print_message("  -> %s after %.3f s: %s\n", strata_errname(e), took, msg);
    if (e == STRATA_OK) {
        rk_destroy(w, STRATA_OK);
        fail_msg("strata_worker_init succeeded; it must be refused");
    }
    if (want != STRATA_OK && e != want)
        fail_msg("init: %s, want %s (%s)", strata_errname(e),
                 strata_errname(want), msg);
    if (took > 5.0)
        fail_msg("the refusal took %.3f s", took);
    assert_true(msg[0] != '\0');
    return e;
}

/* The daemon is alive, every session it forked for a refused client is
 * gone, a good client works, and nothing of ours leaked. */
static void still_serves(struct rk_node *n, const testutil_snapshot *before)
{
    assert_true(rk_node_alive(n));
    assert_true(rk_node_wait_sessions(n, 0, RK_WAIT_S));
    rk_assert_serves(n);
    assert_true(rk_node_wait_sessions(n, 0, RK_WAIT_S));
    testutil_assert_clean(before);
}

static void test_remote_auth_wrong_psk_eauth(void **state)
{
    (void)state;
    testutil_snapshot before;
    strata_remote_spec s;
    char other[RK_PATH_MAX], msg[STRATA_ERRMSG_MAX];
    testutil_snapshot_take(&before);
    scratch_path(other, sizeof(other), "other-secret");
    assert_int_equal(rk_write_secret(other), 0);
    rk_spec(&s, &psk, 2);
    s.secret_file = other;
    init_fails(&s, STRATA_EAUTH, msg, sizeof(msg));
    rk_assert_contains(msg, "TLS");
    rk_assert_contains(msg, psk.endpoint);
    assert_int_equal(unlink(other), 0);
    /* The session saw a failed handshake, nothing else. */
    assert_true(rk_node_log_has(&psk, "TLS error", RK_WAIT_S));
    still_serves(&psk, &before);
}

static void test_remote_auth_secret_file_rules_eauth(void **state)
{
    (void)state;
    testutil_snapshot before;
    strata_remote_spec s;
    strata_worker_config c4;
    strata_worker *w = NULL;
    char path[RK_PATH_MAX];
    int id, fd;
    testutil_snapshot_take(&before);
    strata_worker_config_init(&c4, 4);
    it_ok(strata_worker_create(&c4, &w));
    rk_spec(&s, &psk, 2);
    /* World-readable. */
    scratch_path(path, sizeof(path), "open-secret");
    assert_int_equal(rk_write_secret(path), 0);
    assert_int_equal(chmod(path, 0644), 0);
    s.secret_file = path;
    it_expect(STRATA_EAUTH, strata_worker_add_remote_worker(w, &s, &id));
    rk_assert_contains(strata_errmsg(), "chmod 600");
    assert_int_equal(unlink(path), 0);
    /* Too short. */
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "short", 5), 5);
    close(fd);
    it_expect(STRATA_EAUTH, strata_worker_add_remote_worker(w, &s, &id));
    rk_assert_contains(strata_errmsg(), "at least 16");
    assert_int_equal(unlink(path), 0);
    /* Missing. */
    it_expect(STRATA_EAUTH, strata_worker_add_remote_worker(w, &s, &id));
    rk_assert_contains(strata_errmsg(), path);
    rk_destroy(w, STRATA_OK);
    testutil_assert_clean(&before);
}

static void test_remote_auth_plaintext_to_tls_port_refused(void **state)
{
    (void)state;
    testutil_snapshot before;
    strata_remote_spec s;
    char msg[STRATA_ERRMSG_MAX];
    testutil_snapshot_take(&before);
    rk_spec(&s, &psk, 2);
    s.secret_file = NULL;
    s.insecure = true;
    init_fails(&s, STRATA_OK, msg, sizeof(msg));
    rk_assert_contains(msg, psk.endpoint);
    still_serves(&psk, &before);
    /* And to the certificate daemon. */
    rk_spec(&s, &cert, 2);
    s.cert_file = s.key_file = s.ca_file = NULL;
    s.insecure = true;
    testutil_snapshot_take(&before);
    init_fails(&s, STRATA_OK, msg, sizeof(msg));
    still_serves(&cert, &before);
}

static void test_remote_auth_tls_to_plaintext_port_refused(void **state)
{
    (void)state;
    testutil_snapshot before;
    strata_remote_spec s;
    char msg[STRATA_ERRMSG_MAX];
    testutil_snapshot_take(&before);
    rk_spec(&s, &psk, 2);
    s.endpoint = plain.endpoint; /* a PSK client to the insecure daemon */
    init_fails(&s, STRATA_OK, msg, sizeof(msg));
    rk_assert_contains(msg, plain.endpoint);
    still_serves(&plain, &before);
}

static void test_remote_auth_psk_and_cert_do_not_mix(void **state)
{
    (void)state;
    testutil_snapshot before;
    strata_remote_spec s;
    char msg[STRATA_ERRMSG_MAX];
    testutil_snapshot_take(&before);
    /* A certificate client to the PSK daemon. */
    rk_spec(&s, &cert, 2);
    s.endpoint = psk.endpoint;
    init_fails(&s, STRATA_EAUTH, msg, sizeof(msg));
    still_serves(&psk, &before);
    /* A PSK client to the certificate daemon. */
    testutil_snapshot_take(&before);
    rk_spec(&s, &psk, 2);
    s.endpoint = cert.endpoint;
    init_fails(&s, STRATA_EAUTH, msg, sizeof(msg));
    still_serves(&cert, &before);
}

static void test_remote_auth_certificates_ok(void **state)
{
    (void)state;
    testutil_snapshot before;
    strata_remote_spec s;
    strata_worker *w = NULL;
    static const int nodes[2] = {0, 1};
    testutil_snapshot_take(&before);
    rk_spec(&s, &cert, 2);
    it_ok(rk_l4_start(1, &s, 1, &w));
    it_ok(rk_add_run(w, nodes, 2, 10000, 21));
    rk_destroy(w, STRATA_OK);
    assert_true(rk_node_wait_sessions(&cert, 0, RK_WAIT_S));
    testutil_assert_clean(&before);
}

static void test_remote_auth_rogue_client_certificate_eauth(void **state)
{
    (void)state;
    testutil_snapshot before;
    strata_remote_spec s;
    char msg[STRATA_ERRMSG_MAX];
    testutil_snapshot_take(&before);
    /* Signed by a CA the daemon does not trust. */
    rk_spec(&s, &cert, 2);
    s.cert_file = certs.rogue_cert;
    s.key_file = certs.rogue_key;
    init_fails(&s, STRATA_EAUTH, msg, sizeof(msg));
    rk_assert_contains(msg, "TLS");
    assert_true(rk_node_log_has(&cert, "certificate", RK_WAIT_S));
    still_serves(&cert, &before);
}

static void test_remote_auth_untrusted_node_certificate_eauth(void **state)
{
    (void)state;
    testutil_snapshot before;
    strata_remote_spec s;
    char msg[STRATA_ERRMSG_MAX];
    testutil_snapshot_take(&before);
    /* The client trusts only the rogue CA: the node's certificate fails
     * the client's check. */
    rk_spec(&s, &cert, 2);
    s.cert_file = certs.rogue_cert;
    s.key_file = certs.rogue_key;
    s.ca_file = certs.rogue_ca;
    init_fails(&s, STRATA_EAUTH, msg, sizeof(msg));
    rk_assert_contains(msg, "certificate");
    still_serves(&cert, &before);
}

/* An impostor: `openssl s_server` with a certificate of its own and no
 * key, asking nothing of the client, as any TLS 1.3 server would. It
 * prints what it receives; *port is where it listens. */
static pid_t impostor_start(int *out_fd, int *in_fd, int *port)
{
    int fds[2], in[2];
    char line[256];
    size_t len = 0;
    pid_t pid;

    if (pipe2(fds, O_CLOEXEC) != 0)
        return -1;
    if (pipe2(in, O_CLOEXEC) != 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    pid = fork();
    if (pid == 0) {
        /* Its stdin stays open (s_server ends a connection at EOF). */
        dup2(in[0], 0);
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        execlp("openssl", "openssl", "s_server", "-accept", "127.0.0.1:0",
               "-tls1_3", "-cert", certs.rogue_cert, "-key", certs.rogue_key,
               "-naccept", "1", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    close(in[0]);
    *in_fd = in[1];
    *out_fd = fds[0];
    *port = 0;
    /* "ACCEPT 127.0.0.1:<port>" once it listens. */
    while (pid > 0 && *port == 0 && len + 1 < sizeof(line)) {
        ssize_t n = read(fds[0], line + len, 1);
        char *at;

        if (n <= 0)
            break;
        if (line[len++] != '\n')
            continue;
        line[len] = '\0';
        at = strstr(line, "ACCEPT 127.0.0.1:");
        if (at)
            *port = atoi(at + strlen("ACCEPT 127.0.0.1:"));
        len = 0;
    }
    return pid;
}

static void test_remote_auth_psk_client_refuses_certificate_server(void **state)
{
    (void)state;
    testutil_snapshot before;
    strata_remote_spec s;
    char msg[STRATA_ERRMSG_MAX], endpoint[64], seen[8192];
    size_t got = 0;
    int fd = -1, in = -1, port = 0, status = 0;
    pid_t pid;

    testutil_snapshot_take(&before);
    pid = impostor_start(&fd, &in, &port);
    assert_true(pid > 0);
    if (port <= 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        close(in);
        close(fd);
        fail_msg("openssl s_server did not say where it listens");
    }
    snprintf(endpoint, sizeof(endpoint), "127.0.0.1:%d", port);
    rk_spec(&s, &psk, 2);
    s.endpoint = endpoint;
    init_fails(&s, STRATA_EAUTH, msg, sizeof(msg));
    rk_assert_contains(msg, "certificate");
    /* Its one connection is over: whatever reached it is in the pipe. */
    kill(pid, SIGTERM);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    close(in);
    for (ssize_t n; got + 1 < sizeof(seen) &&
                    (n = read(fd, seen + got, sizeof(seen) - 1 - got)) > 0;)
        got += (size_t)n;
    seen[got] = '\0';
    close(fd);
    /* No HELLO (frames start "STRA") ever went to it. */
    if (memmem(seen, got, "STRA", 4))
        fail_msg("the impostor received a strata frame:\n%s", seen);
    testutil_assert_clean(&before);
}

/* A port of 127.0.0.1 nobody listens on (bound, then closed). */
static int closed_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int port = -1;

    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* Nothing listening is a peer that is not there (EPEER), not a refusal
 * of the credentials, in every mode. */
static void test_remote_auth_nothing_listening_epeer(void **state)
{
    (void)state;
    const struct rk_node *modes[3] = {&psk, &cert, &plain};
    testutil_snapshot before;
    strata_remote_spec s;
    char msg[STRATA_ERRMSG_MAX], endpoint[64];
    int port = closed_port();

    assert_true(port > 0);
    snprintf(endpoint, sizeof(endpoint), "127.0.0.1:%d", port);
    for (int i = 0; i < 3; i++) {
        testutil_snapshot_take(&before);
        rk_spec(&s, modes[i], 2);
        s.endpoint = endpoint;
        init_fails(&s, STRATA_EPEER, msg, sizeof(msg));
        rk_assert_contains(msg, "cannot connect to 127.0.0.1");
        rk_assert_contains(msg, "refused");
        testutil_assert_clean(&before);
    }
}

/* A port that takes the connection (the kernel's backlog) and never
 * answers: init ends at the start-up deadline, naming the node and its
 * endpoint, whichever of the L4's threads sees the deadline first. */
static void test_remote_auth_silent_port_deadline_names_node(void **state)
{
    (void)state;
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    testutil_snapshot before;
    strata_worker_config c4;
    strata_remote_spec s;
    strata_worker *w = NULL;
    char endpoint[64], msg[STRATA_ERRMSG_MAX];
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), id;
    strata_err e;

    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 4), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    snprintf(endpoint, sizeof(endpoint), "127.0.0.1:%d", ntohs(a.sin_port));
    testutil_snapshot_take(&before);
    rk_spec(&s, &psk, 2);
    s.endpoint = endpoint;
    strata_worker_config_init(&c4, 4);
    c4.startup_timeout_s = 1.0;
    it_ok(strata_worker_create(&c4, &w));
    it_ok(strata_worker_add_remote_worker(w, &s, &id));
    e = strata_worker_init(w);
    snprintf(msg, sizeof(msg), "%s", strata_errmsg());
    print_message("  -> %s: %s\n", strata_errname(e), msg);
    it_expect(STRATA_ETIMEDOUT, e);
    rk_assert_contains(msg, "node 0");
    rk_assert_contains(msg, endpoint);
    it_ok(strata_worker_destroy(w));
    close(fd);
    testutil_assert_clean(&before);
}

/* A node that refuses the HELLO says why, and the parent hears it (the
 * refusal and GOODBYE are flushed before the session closes). */
static void test_remote_auth_refused_hello_reason_reaches_parent(void **state)
{
    (void)state;
    testutil_snapshot before;
    strata_remote_spec s;
    char msg[STRATA_ERRMSG_MAX];
    struct rk_node *nodes[2] = {&psk, &plain};

    for (int i = 0; i < 2; i++) {
        testutil_snapshot_take(&before);
        rk_spec(&s, nodes[i], 2);
        s.platform = "tpu"; /* no such backend on the node */
        init_fails(&s, STRATA_EINVAL, msg, sizeof(msg));
        rk_assert_contains(msg, "platform 'tpu' has no backend");
        still_serves(nodes[i], &before);
    }
}

static void test_remote_auth_bad_certificate_files_eauth(void **state)
{
    (void)state;
    testutil_snapshot before;
    strata_remote_spec s;
    strata_worker_config c4;
    strata_worker *w = NULL;
    int id;
    testutil_snapshot_take(&before);
    strata_worker_config_init(&c4, 4);
    it_ok(strata_worker_create(&c4, &w));
    rk_spec(&s, &cert, 2);
    s.key_file = certs.rogue_key; /* not the certificate's key */
    it_expect(STRATA_EAUTH, strata_worker_add_remote_worker(w, &s, &id));
    rk_assert_contains(strata_errmsg(), certs.rogue_key);
    rk_spec(&s, &cert, 2);
    s.ca_file = "/nonexistent/ca.pem";
    it_expect(STRATA_EAUTH, strata_worker_add_remote_worker(w, &s, &id));
    rk_assert_contains(strata_errmsg(), "/nonexistent/ca.pem");
    rk_destroy(w, STRATA_OK);
    testutil_assert_clean(&before);
}

/* Runs strata-node with args to its end (it must refuse to start). */
static int daemon_refuses(const char *const *args, char *out, size_t cap)
{
    char cmd[2048] = "'" RT_NODE_PATH "'";
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
    print_message("  strata-node %s... -> status %d: %s", args[0],
                  WIFEXITED(status) ? WEXITSTATUS(status) : -1, out);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_remote_auth_daemon_refuses_bad_setups(void **state)
{
    (void)state;
    testutil_snapshot before;
    char out[4096], path[RK_PATH_MAX];
    testutil_snapshot_take(&before);
    const char *insecure_wide[] = {"--listen", "0.0.0.0:0",    "--insecure",
                                   "--module", RT_MODULE_PATH, NULL};
    assert_true(daemon_refuses(insecure_wide, out, sizeof(out)) != 0);
    rk_assert_contains(out, "loopback");
    scratch_path(path, sizeof(path), "daemon-secret");
    assert_int_equal(rk_write_secret(path), 0);
    assert_int_equal(chmod(path, 0640), 0);
    const char *open_secret[] = {"--listen", "127.0.0.1:0", "--secret-file",
                                 path,       "--module",    RT_MODULE_PATH,
                                 NULL};
    assert_true(daemon_refuses(open_secret, out, sizeof(out)) != 0);
    rk_assert_contains(out, "chmod 600");
    assert_int_equal(unlink(path), 0);
    const char *no_auth[] = {"--listen", "127.0.0.1:0", "--module",
                             RT_MODULE_PATH, NULL};
    assert_true(daemon_refuses(no_auth, out, sizeof(out)) != 0);
    const char *bad_module[] = {"--listen", "127.0.0.1:0",         "--insecure",
                                "--module", "/nonexistent/lib.so", NULL};
    assert_true(daemon_refuses(bad_module, out, sizeof(out)) != 0);
    rk_assert_contains(out, "/nonexistent/lib.so");
    const char *wide_port[] = {"--listen", "127.0.0.1:99999", "--insecure",
                               "--module", RT_MODULE_PATH,    NULL};
    assert_true(daemon_refuses(wide_port, out, sizeof(out)) != 0);
    rk_assert_contains(out, "port 99999 is outside 0..65535");
    const char *name_port[] = {"--listen", "127.0.0.1:http", "--insecure",
                               "--module", RT_MODULE_PATH,   NULL};
    assert_true(daemon_refuses(name_port, out, sizeof(out)) != 0);
    rk_assert_contains(out, "not a number");
    const char *lost_port_file[] = {"--listen",
                                    "127.0.0.1:0",
                                    "--insecure",
                                    "--module",
                                    RT_MODULE_PATH,
                                    "--port-file",
                                    "/nonexistent/dir/port",
                                    NULL};
    assert_true(daemon_refuses(lost_port_file, out, sizeof(out)) != 0);
    rk_assert_contains(out, "/nonexistent/dir/port.tmp: No such file");
    testutil_assert_clean(&before);
}

int main(void)
{
    rk_filter_from_env();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_remote_auth_wrong_psk_eauth),
        cmocka_unit_test(test_remote_auth_secret_file_rules_eauth),
        cmocka_unit_test(test_remote_auth_plaintext_to_tls_port_refused),
        cmocka_unit_test(test_remote_auth_tls_to_plaintext_port_refused),
        cmocka_unit_test(test_remote_auth_psk_and_cert_do_not_mix),
        cmocka_unit_test(test_remote_auth_certificates_ok),
        cmocka_unit_test(test_remote_auth_rogue_client_certificate_eauth),
        cmocka_unit_test(test_remote_auth_untrusted_node_certificate_eauth),
        cmocka_unit_test(
            test_remote_auth_psk_client_refuses_certificate_server),
        cmocka_unit_test(test_remote_auth_nothing_listening_epeer),
        cmocka_unit_test(test_remote_auth_silent_port_deadline_names_node),
        cmocka_unit_test(test_remote_auth_refused_hello_reason_reaches_parent),
        cmocka_unit_test(test_remote_auth_bad_certificate_files_eauth),
        cmocka_unit_test(test_remote_auth_daemon_refuses_bad_setups),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
