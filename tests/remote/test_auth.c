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

#include <fcntl.h>
#include <stdlib.h>
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
        cmocka_unit_test(test_remote_auth_bad_certificate_files_eauth),
        cmocka_unit_test(test_remote_auth_daemon_refuses_bad_setups),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
