/*
 * The strata command-line tool as a user runs it: a real process per
 * command, its exit status and output checked. gfg commands run on stores
 * the graph module writes (strata_gfg_save) and their results are read
 * back with strata_gfg_open; node ping talks TLS to a real strata-node on
 * 127.0.0.1; the man pages are checked against --help; trace validate and
 * summary read small trace files, sound and not.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <setjmp.h>

#include <cmocka.h>

#include <ctype.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <strata/strata.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "node_launch.h"
#include "testutil.h"

#define OUT_MAX (64 * 1024)

static char dir[64];
static char out[OUT_MAX], err[OUT_MAX];

static void path_in(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", dir, name);
}

static void slurp(const char *path, char *buf)
{
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, OUT_MAX - 1, f) : 0;

    buf[n] = '\0';
    if (f)
        fclose(f);
}

/* Runs argv (NULL-ended) with stdout and stderr in files (not a
 * terminal); returns its exit status, out and err hold what it wrote. */
static int run(const char *const *argv)
{
    char o[128], e[128];
    int status = -1;
    pid_t pid;

    path_in(o, sizeof(o), "stdout");
    path_in(e, sizeof(e), "stderr");
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fo = open(o, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int fe = open(e, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        char *av[32];
        size_t n = 0;

        if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0)
            _exit(127);
        for (; argv[n] && n < 31; n++)
            av[n] = strdup(argv[n]);
        av[n] = NULL;
        execv(av[0], av);
        _exit(127);
    }
    assert_true(testutil_wait_child(pid, 60, &status));
    slurp(o, out);
    slurp(e, err);
    unlink(o);
    unlink(e);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

#define RUN(...) run((const char *const[]){CLI_PATH, __VA_ARGS__, NULL})

static void rm_store(const char *path)
{
    char p[256];

    snprintf(p, sizeof(p), "%s/manifest.json", path);
    unlink(p);
    snprintf(p, sizeof(p), "%s/row_ptr.bin", path);
    unlink(p);
    snprintf(p, sizeof(p), "%s/col_idx.bin", path);
    unlink(p);
    rmdir(path);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/strata-tools-test.XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return rmdir(dir);
}

/* The worked example of docs/graph.md. */
static const int64_t ex_rp[] = {0, 3, 5, 7, 9, 11, 13};
static const int64_t ex_col[] = {0, 2, 5, 1, 3, 2, 4, 0, 3, 1, 4, 2, 5};

static void save_example(const char *path, strata_dtype t)
{
    strata_csr_view v = {6, 6, ex_rp, ex_col};

    assert_int_equal(strata_gfg_save(path, &v, t), STRATA_OK);
}

/* Every row of the store at path equals (rp, col) of rows rows. */
static void expect_store(const char *path, strata_dtype t, uint64_t rows,
                         const int64_t *rp, const int64_t *col)
{
    strata_gfg *g;
    int64_t got_rp[16], got_col[64];

    assert_int_equal(strata_gfg_open(path, &g), STRATA_OK);
    assert_int_equal(strata_gfg_index_dtype(g), t);
    assert_int_equal(strata_gfg_num_rows(g), rows);
    assert_int_equal(strata_gfg_num_edges(g), (uint64_t)rp[rows]);
    assert_int_equal(strata_gfg_read_rows(g, 0, rows, got_rp, got_col, 64),
                     STRATA_OK);
    assert_memory_equal(got_rp, rp, (rows + 1) * sizeof(int64_t));
    assert_memory_equal(got_col, col, (size_t)rp[rows] * sizeof(int64_t));
    strata_gfg_close(g);
}

static void test_cli_gfg_info_check_ok(void **state)
{
    char store[128];

    (void)state;
    path_in(store, sizeof(store), "ex.gfg");
    save_example(store, STRATA_I32);
    assert_int_equal(RUN("gfg", "info", store), 0);
    assert_non_null(strstr(out, "\"format\": \"tiga.gfg.csr.v1\""));
    assert_non_null(strstr(out, "edges                13"));
    assert_non_null(strstr(out, "in-degree            min 2, mean 2.17, "
                                "max 3"));
    assert_non_null(strstr(out, "index dtype          int32"));
    assert_int_equal(RUN("gfg", "check", store), 0);
    assert_non_null(strstr(out, "ok: 6 rows, 13 edges, int32 indices"));
    /* Not a terminal: plain progress lines, the last one with the time. */
    assert_non_null(strstr(out, "checking: 80 B in "));
    rm_store(store);
}

static void test_cli_gfg_check_corrupt_fails(void **state)
{
    char store[128], col[160];
    int32_t bad = 6; /* num_src is 6: out of range */
    int fd;

    (void)state;
    path_in(store, sizeof(store), "bad.gfg");
    save_example(store, STRATA_I32);
    snprintf(col, sizeof(col), "%s/col_idx.bin", store);
    fd = open(col, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, &bad, sizeof(bad), 11 * sizeof(bad)),
                     sizeof(bad));
    close(fd);
    assert_int_equal(RUN("gfg", "check", store), 1);
    assert_non_null(strstr(err, "corrupt store"));
    assert_non_null(strstr(err, "col_idx[11] = 6"));
    assert_non_null(strstr(err, "bad.gfg: reading rows")); /* which store */
    assert_int_equal(RUN("gfg", "check", dir), 1);         /* no manifest */
    assert_non_null(strstr(err, "STRATA_ENOENT"));
    rm_store(store);
}

static void test_cli_gfg_convert_dtype_roundtrip_ok(void **state)
{
    char a[128], b[128], c[128];

    (void)state;
    path_in(a, sizeof(a), "a.gfg");
    path_in(b, sizeof(b), "b.gfg");
    path_in(c, sizeof(c), "c.gfg");
    save_example(a, STRATA_I32);
    assert_int_equal(RUN("gfg", "convert", a, b, "--index", "int64"), 0);
    assert_non_null(strstr(out, "writing: 160 B in "));
    expect_store(b, STRATA_I64, 6, ex_rp, ex_col);
    assert_int_equal(RUN("gfg", "convert", b, c, "--index", "int32"), 0);
    expect_store(c, STRATA_I32, 6, ex_rp, ex_col);
    /* An existing output is kept. */
    assert_int_equal(RUN("gfg", "convert", a, c), 4);
    assert_non_null(strstr(err, "exists"));
    assert_int_equal(RUN("gfg", "convert", a, "--index", "int16", b), 2);
    rm_store(a);
    rm_store(b);
    rm_store(c);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
}

static void test_cli_gfg_convert_edges_ok(void **state)
{
    char edges[128], store[128];
    /* Rows by destination, sources in file order. */
    static const int64_t rp[] = {0, 2, 3, 4, 5, 5};
    static const int64_t col[] = {2, 3, 0, 1, 0};

    (void)state;
    path_in(edges, sizeof(edges), "edges.txt");
    path_in(store, sizeof(store), "e.gfg");
    write_text(edges, "# src dst\n0 1\n1 2\n\n2 0\t9.5\n3 0\n% c\n0 3\n");
    assert_int_equal(RUN("gfg", "convert", "--from-edges", edges, store,
                         "--nodes", "5", "--index", "int32"),
                     0);
    expect_store(store, STRATA_I32, 5, rp, col);
    rm_store(store);
    /* --nodes too small, and a bad line, name the problem. */
    assert_int_equal(
        RUN("gfg", "convert", "--from-edges", edges, store, "--nodes", "3"), 1);
    assert_non_null(strstr(err, "id 3 is not below --nodes 3"));
    write_text(edges, "0 1\n1 -2\n");
    assert_int_equal(RUN("gfg", "convert", "--from-edges", edges, store), 1);
    assert_non_null(strstr(err, "edges.txt:2: want two non-negative ids, "
                                "found '-2'\n"));
    assert_int_equal(access(store, F_OK), -1);
    /* One id: the line is quoted, without its end. */
    write_text(edges, "0 1 2\n3\n");
    assert_int_equal(RUN("gfg", "convert", "--from-edges", edges, store), 1);
    assert_non_null(strstr(err, "edges.txt:2: want two non-negative ids, "
                                "found one in '3'\n"));
    assert_int_equal(access(store, F_OK), -1);
    unlink(edges);
}

static void test_cli_node_keygen_mode_600_no_overwrite(void **state)
{
    char key[128], first[128];
    struct stat st;

    (void)state;
    path_in(key, sizeof(key), "cluster.key");
    assert_int_equal(RUN("node", "keygen", key), 0);
    assert_int_equal(stat(key, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(st.st_size, 65);
    slurp(key, first);
    for (int i = 0; i < 64; i++)
        assert_true(isxdigit((unsigned char)first[i]));
    assert_int_equal(RUN("node", "keygen", key), 4);
    assert_non_null(strstr(err, "--force"));
    slurp(key, out);
    assert_string_equal(out, first);
    assert_int_equal(RUN("node", "keygen", "--force", key), 0);
    assert_int_equal(stat(key, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    slurp(key, out);
    assert_string_not_equal(out, first);
    unlink(key);
    /* --force never replaces what is not a file (a FIFO here; as root a
     * device node went the same way). */
    assert_int_equal(mkfifo(key, 0600), 0);
    assert_int_equal(RUN("node", "keygen", "--force", key), 1);
    assert_non_null(strstr(err, "is not a regular file"));
    assert_int_equal(lstat(key, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    unlink(key);
}

static void test_cli_node_ping_ok_and_wrong_secret(void **state)
{
    char key[128], other[128], pf[128], log[128], ep[64], port_s[16];
    const char *argv[] = {NODE_PATH,
                          "--listen",
                          "127.0.0.1:0",
                          "--secret-file",
                          key,
                          "--port-file",
                          pf,
                          "--max-sessions",
                          "3",
                          NULL};
    struct testutil_node_launch l = {.argv = argv,
                                     .dir = dir,
                                     .port_file = pf,
                                     .log = log,
                                     .log_level = "info",
                                     .wait_s = 30};
    pid_t pid;
    int port, status;

    (void)state;
    path_in(key, sizeof(key), "node.key");
    path_in(other, sizeof(other), "other.key");
    path_in(pf, sizeof(pf), "port");
    path_in(log, sizeof(log), "node.log");
    assert_int_equal(RUN("node", "keygen", key), 0);
    assert_int_equal(RUN("node", "keygen", other), 0);
    port = testutil_node_launch(&l, &pid);
    assert_true(port > 0);
    snprintf(ep, sizeof(ep), "127.0.0.1:%d", port);
    snprintf(port_s, sizeof(port_s), "%d", port);

    assert_int_equal(RUN("node", "ping", ep, "--secret-file", key), 0);
    assert_non_null(strstr(out, "strata-node 0.1.0"));
    assert_non_null(strstr(out, "protocol:  1..2"));
    assert_non_null(strstr(out, "sessions:  0 of 3"));
    assert_non_null(strstr(out, "up to 512 chips + sub workers"));
    assert_non_null(strstr(out, "uptime:"));

    assert_int_equal(RUN("node", "ping", ep, "--secret-file", other), 3);
    assert_non_null(strstr(err, "authentication failed"));
    /* Our own key unusable: an authentication failure too (exit 3). */
    {
        char shortk[128];
        int fd;

        path_in(shortk, sizeof(shortk), "short.key");
        fd = open(shortk, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "abc\n", 4), 4);
        close(fd);
        assert_int_equal(RUN("node", "ping", ep, "--secret-file", shortk), 3);
        assert_non_null(strstr(err, "at least 16"));
        unlink(shortk);
    }
    assert_int_equal(RUN("node", "ping", ep), 2);
    assert_int_equal(RUN("node", "ping", "127.0.0.1", "--secret-file", key), 2);
    /* Plaintext to a TLS node: the likely cause comes first. */
    assert_int_equal(RUN("node", "ping", ep, "--insecure"), 1);
    assert_non_null(strstr(err, "it expects TLS"));

    /* The daemon still serves after both. */
    assert_int_equal(RUN("node", "ping", ep, "--secret-file", key), 0);
    kill(pid, SIGTERM);
    assert_true(testutil_wait_child(pid, 30, &status));
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    slurp(log, out);
    assert_non_null(strstr(out, "health check from 127.0.0.1"));
    /* Nothing listens there now. */
    assert_int_equal(RUN("node", "ping", ep, "--secret-file", key), 1);
    assert_non_null(strstr(err, "cannot connect"));
    unlink(key);
    unlink(other);
    unlink(pf);
    unlink(log);
}

static void test_cli_node_ping_insecure_loopback_ok(void **state)
{
    char pf[128], log[128], ep[64];
    const char *argv[] = {NODE_PATH,    "--listen",    "127.0.0.1:0",
                          "--insecure", "--port-file", pf,
                          NULL};
    struct testutil_node_launch l = {.argv = argv,
                                     .dir = dir,
                                     .port_file = pf,
                                     .log = log,
                                     .log_level = "info",
                                     .wait_s = 30};
    pid_t pid;
    int port, status;

    (void)state;
    path_in(pf, sizeof(pf), "port");
    path_in(log, sizeof(log), "node.log");
    port = testutil_node_launch(&l, &pid);
    assert_true(port > 0);
    snprintf(ep, sizeof(ep), "127.0.0.1:%d", port);
    assert_int_equal(RUN("node", "ping", ep, "--insecure"), 0);
    assert_non_null(strstr(out, "sessions:  0 of 64"));
    /* A key against a plaintext node: not an authentication failure. */
    {
        char key[128];

        path_in(key, sizeof(key), "tls.key");
        assert_int_equal(RUN("node", "keygen", key), 0);
        assert_int_equal(RUN("node", "ping", ep, "--secret-file", key), 1);
        assert_non_null(strstr(err, "it is no TLS strata-node"));
        unlink(key);
    }
    assert_int_equal(RUN("node", "ping", ep, "--insecure"), 0);
    kill(pid, SIGTERM);
    assert_true(testutil_wait_child(pid, 30, &status));
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    slurp(log, out);
    assert_non_null(strstr(out, "a TLS handshake: the client uses a key"));
    unlink(pf);
    unlink(log);
}

/* Every --option that help text names appears in the man page. */
static void expect_options_in(const char *help, const char *man_path)
{
    char man[OUT_MAX], *m = man;
    const char *p = help;

    slurp(man_path, man);
    /* Man pages write "\-"; compare with it as "-". */
    for (const char *s = man; *s; s++)
        if (!(s[0] == '\\' && s[1] == '-'))
            *m++ = *s;
    *m = '\0';
    while ((p = strstr(p, "--")) != NULL) {
        char opt[64];
        size_t n = 2;

        while (n < sizeof(opt) - 1 && (isalnum((unsigned char)p[n]) ||
                                       (p[n] == '-' && isalpha(p[n + 1]))))
            n++;
        memcpy(opt, p, n);
        opt[n] = '\0';
        p += n;
        if (n <= 2)
            continue;
        if (!strstr(man, opt))
            fail_msg("%s is in --help but not in %s", opt, man_path);
    }
}

static void test_cli_help_matches_man_pages_ok(void **state)
{
    char help[3 * OUT_MAX];

    (void)state;
    assert_int_equal(RUN("--help"), 0);
    snprintf(help, sizeof(help), "%s", out);
    assert_non_null(strstr(help, "gfg info"));
    assert_non_null(strstr(help, "node ping"));
    assert_int_equal(RUN("gfg", "--help"), 0);
    strncat(help, out, sizeof(help) - strlen(help) - 1);
    assert_int_equal(RUN("node", "--help"), 0);
    strncat(help, out, sizeof(help) - strlen(help) - 1);
    assert_int_equal(RUN("trace", "--help"), 0);
    assert_non_null(strstr(out, "trace summary"));
    strncat(help, out, sizeof(help) - strlen(help) - 1);
    expect_options_in(help, MAN_DIR "/strata.1");
    assert_int_equal(run((const char *const[]){NODE_PATH, "--help", NULL}), 0);
    expect_options_in(out, MAN_DIR "/strata-node.8");
    assert_int_equal(RUN("frobnicate"), 2);
    /* getopt's own messages name the whole command. */
    assert_int_equal(RUN("gfg", "convert", "a", "b", "--bogus"), 2);
    assert_non_null(strstr(err, "strata gfg convert: unrecognized option"));
    assert_int_equal(RUN("node", "keygen", "k", "--bogus"), 2);
    assert_non_null(strstr(err, "strata node keygen: unrecognized option"));
    assert_int_equal(run((const char *const[]){NODE_PATH, "--bogus", NULL}), 2);
    assert_true(strncmp(err, "strata-node: unrecognized option", 32) == 0);
    assert_int_equal(RUN("--version"), 0);
    assert_non_null(strstr(out, "strata 0.1.0"));
}

/* strata-rank's usage errors name the option or value at fault. */
static void test_cli_rank_usage_names_the_fault(void **state)
{
#ifdef RANK_PATH
#define RANK(...) run((const char *const[]){RANK_PATH, __VA_ARGS__, NULL})
    (void)state;
    assert_int_equal(RANK("--help"), 0);
    assert_non_null(strstr(out, "usage: strata-rank --connect"));
    assert_int_equal(RANK("--bogus"), 2);
    assert_non_null(strstr(err, "unknown option '--bogus'"));
    assert_int_equal(
        RANK("--connect", "127.0.0.1:1", "--key-file", "k", "--ranks", "abc"),
        2);
    assert_non_null(strstr(err, "--ranks 'abc' is not a rank count"));
    assert_int_equal(RANK("--connect"), 2);
    assert_non_null(strstr(err, "--connect lacks its value"));
    assert_int_equal(RANK("--connect", "127.0.0.1:1", "--ranks", "2"), 2);
    assert_non_null(strstr(err, "--key-file is needed"));
#undef RANK
#else
    (void)state;
    skip(); /* no Open MPI, no strata-rank */
#endif
}

/* Two chips' tasks a -> b (a flow), a dispatch slice with its wait. */
static const char good_trace[] =
    "{\"traceEvents\":["
    "{\"ph\":\"M\",\"pid\":1,\"tid\":0,\"name\":\"process_name\","
    "\"args\":{\"name\":\"node 0 / chip 0\"}},"
    "{\"ph\":\"M\",\"pid\":2,\"tid\":0,\"name\":\"process_name\","
    "\"args\":{\"name\":\"node 0 / chip 1\"}},"
    "{\"ph\":\"M\",\"pid\":4,\"tid\":0,\"name\":\"process_name\","
    "\"args\":{\"name\":\"node 0 / sub 0\"}},"
    "{\"ph\":\"X\",\"cat\":\"task\",\"name\":\"k.a\",\"pid\":1,"
    "\"tid\":0,\"ts\":10,\"dur\":40},"
    "{\"ph\":\"X\",\"cat\":\"halo\",\"name\":\"inner\",\"pid\":1,"
    "\"tid\":0,\"ts\":20,\"dur\":5},"
    "{\"ph\":\"X\",\"cat\":\"task\",\"name\":\"k.b\",\"pid\":2,"
    "\"tid\":0,\"ts\":60,\"dur\":40},"
    "{\"ph\":\"s\",\"cat\":\"dep\",\"name\":\"dep\",\"id\":1,"
    "\"pid\":1,\"tid\":0,\"ts\":49.999},"
    "{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"dep\",\"name\":\"dep\","
    "\"id\":1,\"pid\":2,\"tid\":0,\"ts\":60},"
    "{\"ph\":\"b\",\"cat\":\"dispatch\",\"name\":\"k.b\",\"id\":\"0x2\","
    "\"pid\":3,\"tid\":0,\"ts\":5,\"args\":{\"queue_wait_us\":55}},"
    "{\"ph\":\"e\",\"cat\":\"dispatch\",\"name\":\"k.b\",\"id\":\"0x2\","
    "\"pid\":3,\"tid\":0,\"ts\":101}"
    "]}";

/* A chain of 30 tasks on one chip with a flow from every task to every
 * later one (435 flows: what a scheduler that links each writer to every
 * earlier access emits): the critical path is the whole chain. */
static void test_cli_trace_summary_many_flows_whole_path(void **state)
{
    enum { N = 30 };
    char path[128], *text = malloc(256 * (N + N * N));
    size_t len = 0;
    unsigned id = 0;

    (void)state;
    assert_non_null(text);
    len += (size_t)sprintf(text + len, "{\"traceEvents\":[");
    for (int i = 0; i < N; i++)
        len += (size_t)sprintf(text + len,
                               "%s{\"ph\":\"X\",\"cat\":\"task\",\"name\":"
                               "\"k%d\",\"pid\":1,\"tid\":0,\"ts\":%d,"
                               "\"dur\":9}",
                               i ? "," : "", i, 10 * i);
    for (int i = 0; i < N; i++)
        for (int j = i + 1; j < N; j++, id++)
            len += (size_t)sprintf(
                text + len,
                ",{\"ph\":\"s\",\"cat\":\"dep\",\"name\":\"dep\","
                "\"id\":%u,\"pid\":1,\"tid\":0,\"ts\":%d.5},"
                "{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"dep\",\"name\":"
                "\"dep\",\"id\":%u,\"pid\":1,\"tid\":0,\"ts\":%d}",
                id + 1, 10 * i + 8, id + 1, 10 * j);
    sprintf(text + len, "]}");
    path_in(path, sizeof(path), "chain.json");
    write_text(path, text);
    free(text);
    assert_int_equal(RUN("trace", "summary", path), 0);
    assert_non_null(strstr(out, "dependency edges: 435"));
    assert_non_null(strstr(out, "over 30 tasks"));
    assert_int_equal(unlink(path), 0);
}

static void test_cli_trace_validate_summary_ok_and_refused(void **state)
{
    char good[128], bad[128];

    (void)state;
    path_in(good, sizeof(good), "good.json");
    path_in(bad, sizeof(bad), "bad.json");
    write_text(good, good_trace);
    assert_int_equal(RUN("trace", "validate", good), 0);
    assert_non_null(strstr(out, "sound (10 events)"));
    assert_int_equal(RUN("trace", "summary", good), 0);
    assert_non_null(strstr(out, "dependency edges: 1"));
    assert_non_null(strstr(out, "critical path: 0.080 ms"));
    assert_non_null(strstr(out, "ends with: k.b <- k.a"));
    assert_non_null(strstr(out, "node 0 / chip 1"));
    assert_non_null(strstr(out, "55.000")); /* k.b's median queue wait */
    /* A sub worker that ran nothing is listed, idle throughout. */
    assert_non_null(strstr(out, "node 0 / sub 0"));
    assert_non_null(strstr(out, "100.0 %  (busy 0.000 ms, 0 tasks)"));
    assert_non_null(strstr(out, "(busy 0.040 ms, 1 task)"));
    /* Wrong arguments and a directory say what is wrong. */
    assert_int_equal(RUN("trace", "validate", good, good), 2);
    assert_non_null(strstr(err, "one trace file only"));
    assert_int_equal(RUN("trace", "validate", "/"), 1);
    assert_non_null(strstr(err, "Is a directory"));
    assert_null(strstr(out, "dropped"));
    /* Two waits (0 and 40 us): the median is their mean; two processes
     * dropped 7 records between them. */
    write_text(good, "{\"traceEvents\":["
                     "{\"ph\":\"X\",\"cat\":\"task\",\"name\":\"k\","
                     "\"pid\":1,\"tid\":0,\"ts\":10,\"dur\":10},"
                     "{\"ph\":\"X\",\"cat\":\"task\",\"name\":\"k\","
                     "\"pid\":1,\"tid\":0,\"ts\":30,\"dur\":30},"
                     "{\"ph\":\"b\",\"cat\":\"dispatch\",\"name\":\"k\","
                     "\"id\":\"0x1\",\"pid\":3,\"tid\":0,\"ts\":5,"
                     "\"args\":{\"queue_wait_us\":0}},"
                     "{\"ph\":\"e\",\"cat\":\"dispatch\",\"name\":\"k\","
                     "\"id\":\"0x1\",\"pid\":3,\"tid\":0,\"ts\":21},"
                     "{\"ph\":\"b\",\"cat\":\"dispatch\",\"name\":\"k\","
                     "\"id\":\"0x2\",\"pid\":3,\"tid\":0,\"ts\":6,"
                     "\"args\":{\"queue_wait_us\":40}},"
                     "{\"ph\":\"e\",\"cat\":\"dispatch\",\"name\":\"k\","
                     "\"id\":\"0x2\",\"pid\":3,\"tid\":0,\"ts\":61}],"
                     "\"otherData\":{\"dropped\":{\"1\":5,\"3\":2}}}");
    assert_int_equal(RUN("trace", "summary", good), 0);
    assert_non_null(strstr(out, "warning: 7 records were dropped"));
    assert_non_null(strstr(out, "20.000"));    /* the median run time */
    assert_non_null(strstr(out, " 20.000\n")); /* the median wait */
    /* Slices of one thread that overlap without nesting. */
    write_text(bad, "{\"traceEvents\":["
                    "{\"ph\":\"X\",\"name\":\"a\",\"pid\":1,\"tid\":0,"
                    "\"ts\":1,\"dur\":5},"
                    "{\"ph\":\"X\",\"name\":\"b\",\"pid\":1,\"tid\":0,"
                    "\"ts\":3,\"dur\":5}]}");
    assert_int_equal(RUN("trace", "validate", bad), 1);
    assert_non_null(strstr(err, "without nesting"));
    /* A flow end without its start. */
    write_text(bad, "[{\"ph\":\"f\",\"id\":7,\"pid\":1,\"tid\":0,"
                    "\"ts\":1}]");
    assert_int_equal(RUN("trace", "summary", bad), 1);
    assert_non_null(strstr(err, "id 7"));
    /* A flow start without its end; an async begin without its end; two
     * async slices of one category open at once under one id. */
    write_text(bad, "[{\"ph\":\"s\",\"id\":8,\"pid\":1,\"tid\":0,"
                    "\"ts\":1}]");
    assert_int_equal(RUN("trace", "validate", bad), 1);
    assert_non_null(strstr(err, "id 8: a 's' has no 'f'"));
    write_text(
        bad,
        "[{\"ph\":\"b\",\"cat\":\"dispatch\",\"name\":\"k\",\"id\":\"0x3\","
        "\"pid\":1,\"tid\":0,\"ts\":1}]");
    assert_int_equal(RUN("trace", "validate", bad), 1);
    assert_non_null(strstr(err, "a 'b' has no 'e'"));
    write_text(
        bad,
        "[{\"ph\":\"b\",\"cat\":\"dispatch\",\"name\":\"k\",\"id\":\"0x4\","
        "\"pid\":1,\"tid\":0,\"ts\":1},"
        "{\"ph\":\"b\",\"cat\":\"dispatch\",\"name\":\"k\",\"id\":\"0x4\","
        "\"pid\":1,\"tid\":0,\"ts\":2},"
        "{\"ph\":\"e\",\"cat\":\"dispatch\",\"name\":\"k\",\"id\":\"0x4\","
        "\"pid\":1,\"tid\":0,\"ts\":3},"
        "{\"ph\":\"e\",\"cat\":\"dispatch\",\"name\":\"k\",\"id\":\"0x4\","
        "\"pid\":1,\"tid\":0,\"ts\":4}]");
    assert_int_equal(RUN("trace", "validate", bad), 1);
    assert_non_null(strstr(err, "two events share the id"));
    /* A flow step at its start's time sorts after it: sound. */
    write_text(bad, "[{\"ph\":\"t\",\"id\":9,\"pid\":1,\"tid\":0,\"ts\":1},"
                    "{\"ph\":\"s\",\"id\":9,\"pid\":1,\"tid\":0,\"ts\":1},"
                    "{\"ph\":\"f\",\"id\":9,\"pid\":1,\"tid\":0,\"ts\":2}]");
    assert_int_equal(RUN("trace", "validate", bad), 0);
    /* One id in two categories names two things: sound. */
    write_text(
        bad,
        "[{\"ph\":\"b\",\"cat\":\"dispatch\",\"name\":\"k\",\"id\":\"0x5\","
        "\"pid\":1,\"tid\":0,\"ts\":1},"
        "{\"ph\":\"b\",\"cat\":\"run\",\"name\":\"r\",\"id\":\"0x5\","
        "\"pid\":1,\"tid\":4,\"ts\":2},"
        "{\"ph\":\"e\",\"cat\":\"dispatch\",\"name\":\"k\",\"id\":\"0x5\","
        "\"pid\":1,\"tid\":0,\"ts\":3},"
        "{\"ph\":\"e\",\"cat\":\"run\",\"name\":\"r\",\"id\":\"0x5\","
        "\"pid\":1,\"tid\":4,\"ts\":4}]");
    assert_int_equal(RUN("trace", "validate", bad), 0);
    write_text(bad, "{\"traceEvents\": [");
    assert_int_equal(RUN("trace", "validate", bad), 1);
    assert_non_null(strstr(err, "not JSON"));
    assert_int_equal(RUN("trace", "validate", "/nonexistent/x.json"), 1);
    assert_int_equal(RUN("trace", "validate"), 2);
    assert_int_equal(RUN("trace", "frobnicate", good), 2);
    unlink(good);
    unlink(bad);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_gfg_info_check_ok),
        cmocka_unit_test(test_cli_gfg_check_corrupt_fails),
        cmocka_unit_test(test_cli_gfg_convert_dtype_roundtrip_ok),
        cmocka_unit_test(test_cli_gfg_convert_edges_ok),
        cmocka_unit_test(test_cli_node_keygen_mode_600_no_overwrite),
        cmocka_unit_test(test_cli_node_ping_ok_and_wrong_secret),
        cmocka_unit_test(test_cli_node_ping_insecure_loopback_ok),
        cmocka_unit_test(test_cli_help_matches_man_pages_ok),
        cmocka_unit_test(test_cli_rank_usage_names_the_fault),
        cmocka_unit_test(test_cli_trace_validate_summary_ok_and_refused),
        cmocka_unit_test(test_cli_trace_summary_many_flows_whole_path),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
