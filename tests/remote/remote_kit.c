/*
 * Helpers shared by the remote tests (see remote_kit.h).
 */
#define _GNU_SOURCE
#include "remote_kit.h"
#include "node_launch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef RT_NODE_PATH
#error "RT_NODE_PATH (the strata-node binary) must be defined"
#endif
#ifndef RT_MODULE_PATH
#error "RT_MODULE_PATH (the test module) must be defined"
#endif

extern char **environ;

strata_callable rk_o_add, rk_o_span, rk_o_noop;

static const int rk_chip_ids[8] = {0, 1, 2, 3, 4, 5, 6, 7};

int rk_register(void)
{
    if (strata_module_init() != STRATA_OK ||
        strata_callable_by_name(STRATA_CALLABLE_ORCH, RT_O_ADD, &rk_o_add) ||
        strata_callable_by_name(STRATA_CALLABLE_ORCH, RT_O_SPAN, &rk_o_span) ||
        strata_callable_by_name(STRATA_CALLABLE_ORCH, RT_O_NOOP, &rk_o_noop)) {
        print_error("registering the remote test callables: %s\n",
                    strata_errmsg());
        return -1;
    }
    return 0;
}

/* ---- certificates ---------------------------------------------------- */

static void path_in(char *out, const char *dir, const char *name)
{
    snprintf(out, RK_PATH_MAX, "%s/%s", dir, name);
}

int rk_certs_make(struct rk_certs *c)
{
    /* Leaf certificates may serve and connect; the daemon and the client
     * both check only that the peer's chain ends at their CA. */
    static const char script[] =
        "set -e; cd '%s'\n"
        "printf 'basicConstraints=CA:FALSE\\n"
        "keyUsage=critical,digitalSignature\\n"
        "extendedKeyUsage=serverAuth,clientAuth\\n"
        "subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > leaf.ext\n"
        "ca() { openssl req -x509 -newkey ec -pkeyopt "
        "ec_paramgen_curve:prime256v1 -nodes -days 2 -keyout $1.key "
        "-out $1.pem -subj /CN=$1 -addext "
        "basicConstraints=critical,CA:TRUE -addext "
        "keyUsage=critical,keyCertSign,cRLSign; }\n"
        "leaf() { openssl req -new -newkey ec -pkeyopt "
        "ec_paramgen_curve:prime256v1 -nodes -keyout $1.key -out $1.csr "
        "-subj /CN=$1; openssl x509 -req -in $1.csr -CA $2.pem -CAkey "
        "$2.key -set_serial $3 -days 2 -extfile leaf.ext -out $1.pem; }\n"
        "ca cluster-ca; ca rogue-ca\n"
        "leaf node cluster-ca 2; leaf client cluster-ca 3\n"
        "leaf rogue-client rogue-ca 4\n"
        "chmod 600 *.key\n";
    char cmd[4096];
    int rc;

    memset(c, 0, sizeof(*c));
    snprintf(c->dir, sizeof(c->dir), "/tmp/strata-rt-certs-XXXXXX");
    if (!mkdtemp(c->dir)) {
        print_error("mkdtemp: %s\n", strerror(errno));
        c->dir[0] = '\0';
        return -1;
    }
    path_in(c->ca, c->dir, "cluster-ca.pem");
    path_in(c->node_cert, c->dir, "node.pem");
    path_in(c->node_key, c->dir, "node.key");
    path_in(c->client_cert, c->dir, "client.pem");
    path_in(c->client_key, c->dir, "client.key");
    path_in(c->rogue_ca, c->dir, "rogue-ca.pem");
    path_in(c->rogue_cert, c->dir, "rogue-client.pem");
    path_in(c->rogue_key, c->dir, "rogue-client.key");
    snprintf(cmd, sizeof(cmd), script, c->dir);
    {
        char full[4400];

        snprintf(full, sizeof(full), "( %s ) > '%s/openssl.log' 2>&1", cmd,
                 c->dir);
        rc = system(full);
    }
    if (rc != 0) {
        char log[RK_DIR_MAX + 32];

        print_error("making certificates with the openssl CLI failed "
                    "(status %d); its output:\n",
                    rc);
        snprintf(log, sizeof(log), "cat '%s/openssl.log' >&2", c->dir);
        if (system(log) != 0)
            print_error("(no log)\n");
        return -1;
    }
    return 0;
}

void rk_certs_remove(struct rk_certs *c)
{
    DIR *d;
    struct dirent *e;

    if (!c->dir[0])
        return;
    d = opendir(c->dir);
    if (d) {
        while ((e = readdir(d)) != NULL) {
            char p[RK_PATH_MAX + 260];

            if (e->d_name[0] == '.')
                continue;
            snprintf(p, sizeof(p), "%s/%s", c->dir, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(c->dir);
    c->dir[0] = '\0';
}

/* ---- the daemon -------------------------------------------------------- */

int rk_write_secret(const char *path)
{
    return devkit_write_secret(path);
}

void rk_node_print_log(const struct rk_node *n)
{
    testutil_print_file(n->log, "strata-node log");
}

/* The daemon's arguments for n->auth. */
static void node_argv(const struct rk_node *n, const char **argv,
                      const char *port_file)
{
    size_t k = 0;

    argv[k++] = RT_NODE_PATH;
    argv[k++] = "--listen";
    argv[k++] = "127.0.0.1:0";
    argv[k++] = "--module";
    argv[k++] = RT_MODULE_PATH;
    argv[k++] = "--port-file";
    argv[k++] = port_file;
    if (n->auth == RK_PSK) {
        argv[k++] = "--secret-file";
        argv[k++] = n->secret;
    } else if (n->auth == RK_CERT) {
        argv[k++] = "--cert";
        argv[k++] = n->certs->node_cert;
        argv[k++] = "--key";
        argv[k++] = n->certs->node_key;
        argv[k++] = "--ca";
        argv[k++] = n->certs->ca;
    } else {
        argv[k++] = "--insecure";
    }
    argv[k] = NULL;
}

int rk_node_start(struct rk_node *n, enum rk_auth auth,
                  const struct rk_certs *certs)
{
    return rk_node_start_fault(n, auth, certs, NULL);
}

int rk_node_start_fault(struct rk_node *n, enum rk_auth auth,
                        const struct rk_certs *certs, const char *fault)
{
    char port_file[RK_PATH_MAX];
    const char *argv[16];
    struct testutil_node_launch l = {.argv = argv,
                                     .port_file = port_file,
                                     .log_level = "info",
                                     .fault = fault,
                                     .wait_s = RK_WAIT_S};

    memset(n, 0, sizeof(*n));
    n->auth = auth;
    n->certs = certs;
    snprintf(n->dir, sizeof(n->dir), "/tmp/strata-rt-node-XXXXXX");
    if (!mkdtemp(n->dir)) {
        print_error("mkdtemp: %s\n", strerror(errno));
        n->dir[0] = '\0';
        return -1;
    }
    path_in(n->secret, n->dir, "secret");
    path_in(n->log, n->dir, "node.log");
    path_in(port_file, n->dir, "port");
    if (auth == RK_PSK && devkit_write_secret(n->secret) != 0) {
        print_error("cannot write %s\n", n->secret);
        rk_node_stop(n);
        return -1;
    }
    node_argv(n, argv, port_file);
    l.dir = n->dir;
    l.log = n->log;
    n->port = testutil_node_launch(&l, &n->pid);
    if (n->port <= 0) {
        if (rk_node_alive(n)) /* a death prints the log itself */
            rk_node_print_log(n);
        rk_node_stop(n);
        return -1;
    }
    snprintf(n->endpoint, sizeof(n->endpoint), "127.0.0.1:%d", n->port);
    return 0;
}

void rk_node_term(struct rk_node *n)
{
    if (n->pid > 0 && !n->exited) {
        n->term_sent = true;
        kill(n->pid, SIGTERM);
    }
}

static bool clean_exit(const struct rk_node *n)
{
    return n->exited && n->term_sent && WIFEXITED(n->status) &&
           WEXITSTATUS(n->status) == 0;
}

bool rk_node_alive(struct rk_node *n)
{
    int status;

    if (n->pid <= 0 || n->exited)
        return false;
    if (waitpid(n->pid, &status, WNOHANG) != n->pid)
        return true;
    n->exited = true;
    n->status = status;
    if (clean_exit(n))
        return false;
    print_error("strata-node (pid %d) died: %s %d\n", (int)n->pid,
                WIFSIGNALED(status) ? "signal" : "exit status",
                WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    rk_node_print_log(n);
    return false;
}

int rk_node_stop(struct rk_node *n)
{
    int rc = 0;
    int status = 0;

    if (n->pid > 0 && !n->exited) {
        if (!rk_node_alive(n)) {
            rc = clean_exit(n) ? 0 : -1;
        } else {
            kill(n->pid, SIGTERM);
            if (!testutil_wait_child(n->pid, RK_WAIT_S, &status)) {
                print_error("strata-node ignored SIGTERM for %.0f s\n",
                            RK_WAIT_S);
                kill(n->pid, SIGKILL);
                waitpid(n->pid, &status, 0);
                rc = -1;
            } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                print_error("strata-node exited with status 0x%x after "
                            "SIGTERM\n",
                            status);
                rc = -1;
            }
            if (rc != 0)
                rk_node_print_log(n);
        }
    } else if (n->exited && !clean_exit(n)) {
        rc = -1;
    }
    n->pid = 0;
    /* Sanitizer builds: the daemon's and its sessions' reports land here. */
    if (n->dir[0] && (rk_node_log_has(n, "Sanitizer", 0) ||
                      rk_node_log_has(n, "runtime error:", 0))) {
        print_error("strata-node or a session reported a sanitizer error\n");
        rk_node_print_log(n);
        rc = -1;
    }
    if (n->dir[0]) {
        char p[RK_PATH_MAX + 8];

        unlink(n->secret);
        unlink(n->log);
        path_in(p, n->dir, "port");
        unlink(p);
        path_in(p, n->dir, "port.tmp");
        unlink(p);
        rmdir(n->dir);
        n->dir[0] = '\0';
    }
    return rc;
}

size_t rk_node_sessions(const struct rk_node *n, pid_t *out, size_t cap)
{
    size_t k = 0;

    if (n->pid > 0)
        testutil_children_of(n->pid, out, &k, cap);
    return k;
}

struct sessions_want {
    const struct rk_node *n;
    size_t want;
};

static bool sessions_are(void *arg)
{
    struct sessions_want *s = arg;
    pid_t pids[64];

    return rk_node_sessions(s->n, pids, 64) == s->want;
}

bool rk_node_wait_sessions(const struct rk_node *n, size_t want,
                           double timeout_s)
{
    struct sessions_want s = {n, want};

    return testutil_wait_until(sessions_are, &s, timeout_s);
}

struct log_want {
    const struct rk_node *n;
    const char *needle;
};

size_t rk_node_log_count(const struct rk_node *n, const char *needle)
{
    char line[2048];
    size_t count = 0;
    FILE *f = fopen(n->log, "re");

    if (!f)
        return 0;
    while (fgets(line, sizeof(line), f))
        count += strstr(line, needle) != NULL;
    fclose(f);
    return count;
}

static bool log_has(void *arg)
{
    struct log_want *w = arg;

    return rk_node_log_count(w->n, w->needle) > 0;
}

bool rk_node_log_has(const struct rk_node *n, const char *needle,
                     double timeout_s)
{
    struct log_want w = {n, needle};

    return testutil_wait_until(log_has, &w, timeout_s);
}

/* ---- L4 workers -------------------------------------------------------- */

void rk_spec(strata_remote_spec *s, const struct rk_node *n, size_t nchips)
{
    memset(s, 0, sizeof(*s));
    s->endpoint = n->endpoint;
    if (n->auth == RK_PSK) {
        s->secret_file = n->secret;
    } else if (n->auth == RK_CERT) {
        s->cert_file = n->certs->client_cert;
        s->key_file = n->certs->client_key;
        s->ca_file = n->certs->ca;
    } else {
        s->insecure = true;
    }
    s->chip_ids = rk_chip_ids;
    s->num_chips = nchips;
}

strata_err rk_l4_create(size_t forked, const strata_remote_spec *remotes,
                        size_t nremote, strata_worker **out)
{
    strata_worker_config c4, c3;
    strata_worker *w = NULL;
    strata_err err;
    int id;

    strata_worker_config_init(&c4, 4);
    c4.startup_timeout_s = 30;
    err = strata_worker_create(&c4, &w);
    for (size_t i = 0; i < forked && !err; i++) {
        strata_worker *n = NULL;

        strata_worker_config_init(&c3, 3);
        c3.chip_ids = rk_chip_ids;
        c3.num_chips = 2;
        err = strata_worker_create(&c3, &n);
        if (!err)
            err = strata_worker_add_worker(w, n, &id);
        if (err) {
            if (n && strata_worker_destroy(n) != STRATA_OK)
                print_error("destroy: %s\n", strata_errmsg());
        } else if (id != (int)i) {
            err = STRATA_ESTATE;
        }
    }
    for (size_t i = 0; i < nremote && !err; i++) {
        err = strata_worker_add_remote_worker(w, &remotes[i], &id);
        if (!err && id != (int)(forked + i))
            err = STRATA_ESTATE;
    }
    if (err) {
        char msg[STRATA_ERRMSG_MAX];

        snprintf(msg, sizeof(msg), "%s", strata_errmsg());
        if (w && strata_worker_destroy(w) != STRATA_OK)
            print_error("destroy: %s\n", strata_errmsg());
        strata_errmsg_set("%s", msg);
        return err;
    }
    *out = w;
    return STRATA_OK;
}

strata_err rk_l4_start(size_t forked, const strata_remote_spec *remotes,
                       size_t nremote, strata_worker **out)
{
    strata_worker *w = NULL;
    strata_err err = rk_l4_create(forked, remotes, nremote, &w);

    if (err)
        return err;
    err = strata_worker_init(w);
    if (err) {
        char msg[STRATA_ERRMSG_MAX];

        snprintf(msg, sizeof(msg), "%s", strata_errmsg());
        if (strata_worker_destroy(w) != STRATA_OK)
            print_error("destroy after a failed init: %s\n", strata_errmsg());
        strata_errmsg_set("%s", msg);
        return err;
    }
    *out = w;
    return STRATA_OK;
}

void rk_destroy(strata_worker *w, strata_err ok_too)
{
    strata_err e = strata_worker_destroy(w);

    if (e != STRATA_OK && e != ok_too)
        fail_msg("strata_worker_destroy: %s (%s)", strata_errname(e),
                 strata_errmsg());
}

struct add_ctx {
    const int *nodes;
    size_t nn, per;
    strata_buffer *x, *y, *z;
};

static strata_err add_orch(strata_orch *o, const strata_args *args, void *user)
{
    struct add_ctx *c = user;
    strata_err err = STRATA_OK;

    (void)args;
    for (size_t k = 0; k < c->nn && !err; k++) {
        strata_args *a = NULL;

        err = strata_args_create(&a);
        if (!err)
            err = it_add_u32(a, c->x, k * c->per, c->per, STRATA_IN);
        if (!err)
            err = it_add_u32(a, c->y, k * c->per, c->per, STRATA_IN);
        if (!err)
            err = it_add_u32(a, c->z, k * c->per, c->per, STRATA_OUT);
        if (!err)
            err = strata_orch_submit_next_level(o, rk_o_add, a, c->nodes[k]);
        strata_args_destroy(a);
    }
    return err;
}

strata_err rk_add_run(strata_worker *w, const int *nodes, size_t nn, size_t per,
                      uint32_t seed)
{
    struct add_ctx c = {nodes, nn, per, NULL, NULL, NULL};
    size_t bytes = nn * per * sizeof(uint32_t);
    strata_err err = strata_worker_create_buffer(w, bytes, &c.x);

    if (!err)
        err = strata_worker_create_buffer(w, bytes, &c.y);
    if (!err)
        err = strata_worker_create_buffer(w, bytes, &c.z);
    if (!err) {
        for (size_t i = 0; i < nn * per; i++) {
            it_u32(c.x)[i] = seed + (uint32_t)i;
            it_u32(c.y)[i] = 3 * (uint32_t)i + 1;
            it_u32(c.z)[i] = 0xdeadbeef;
        }
        err = strata_worker_run(w, add_orch, NULL, &c);
    }
    for (size_t i = 0; !err && i < nn * per; i++) {
        uint32_t want = seed + (uint32_t)i + 3 * (uint32_t)i + 1;

        if (it_u32(c.z)[i] != want) {
            strata_errmsg_set("z[%zu] = %u, want %u (node %d)", i,
                              it_u32(c.z)[i], want, nodes[i / per]);
            err = STRATA_EIO;
        }
    }
    if (err) {
        char msg[STRATA_ERRMSG_MAX];

        snprintf(msg, sizeof(msg), "%s", strata_errmsg());
        /* Best effort: the worker frees them at destroy anyway. */
        if (strata_buffer_release(c.x) || strata_buffer_release(c.y) ||
            strata_buffer_release(c.z))
            print_error("release after a failed run: %s\n", strata_errmsg());
        strata_errmsg_set("%s", msg);
        return err;
    }
    err = strata_buffer_release(c.x);
    if (!err)
        err = strata_buffer_release(c.y);
    if (!err)
        err = strata_buffer_release(c.z);
    return err;
}

void rk_assert_serves(const struct rk_node *n)
{
    strata_remote_spec s;
    strata_worker *w = NULL;
    static const int node0[1] = {0};

    rk_spec(&s, n, 2);
    it_ok(rk_l4_start(0, &s, 1, &w));
    it_ok(rk_add_run(w, node0, 1, 1000, 7));
    rk_destroy(w, STRATA_OK);
}

void rk_filter_from_env(void)
{
    const char *f = getenv("RT_FILTER");

    if (f && f[0])
        cmocka_set_test_filter(f);
}

void rk_assert_contains(const char *hay, const char *needle)
{
    if (!strstr(hay, needle))
        fail_msg("expected \"%s\" in \"%s\"", needle, hay);
}

void rk_assert_idle(struct rk_node *n, const testutil_snapshot *before)
{
    assert_true(rk_node_alive(n));
    if (!rk_node_wait_sessions(n, 0, RK_WAIT_S))
        fail_msg("strata-node still has sessions %.0f s after the parents "
                 "said goodbye",
                 RK_WAIT_S);
    testutil_assert_clean(before);
}

strata_err rk_block_orch(strata_orch *o, const strata_args *args, void *user)
{
    struct rk_block *c = user;
    strata_args *a = NULL;
    size_t sh_span[1] = {sizeof(struct rt_span)};
    size_t sh_path[1] = {strata_buffer_size(c->path)};
    strata_err err;

    (void)args;
    it_try(strata_args_create(&a));
    err = strata_args_add_tensor(a, c->span, 0, STRATA_U8, 1, sh_span,
                                 STRATA_NO_DEP);
    if (!err)
        err = strata_args_add_tensor(a, c->path, 0, STRATA_U8, 1, sh_path,
                                     STRATA_IN);
    if (!err)
        err = strata_args_add_scalar(a, c->ms);
    if (!err)
        err = strata_args_add_scalar(a, 0);
    if (!err)
        err = strata_orch_submit_next_level(o, rk_o_span, a, c->node);
    strata_args_destroy(a);
    return err;
}

strata_err rk_submit_spans(strata_orch *o, strata_buffer *spans, size_t n,
                           uint64_t ms, int node)
{
    size_t shape[1] = {sizeof(struct rt_span)};

    for (size_t i = 0; i < n; i++) {
        strata_args *a = NULL;
        strata_err err;

        it_try(strata_args_create(&a));
        err = strata_args_add_tensor(a, spans, i * sizeof(struct rt_span),
                                     STRATA_U8, 1, shape, STRATA_NO_DEP);
        if (!err)
            err = strata_args_add_scalar(a, ms);
        if (!err)
            err = strata_args_add_scalar(a, i % 2);
        if (!err)
            err = strata_orch_submit_next_level(o, rk_o_span, a, node);
        strata_args_destroy(a);
        it_try(err);
    }
    return STRATA_OK;
}

bool rk_file_exists(void *arg)
{
    struct stat st;

    return stat((const char *)arg, &st) == 0;
}
