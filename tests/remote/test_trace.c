/*
 * Timeline traces with a remote node (docs/tracing.md): an L4 with a
 * forked and a remote L3 node (a real strata-node on 127.0.0.1, PSK)
 * runs rt.add on both with STRATA_TRACE set. The node records its session
 * and sends the records back; the file must hold the remote node and its
 * chips as processes of their own, their task slices on this host's clock
 * (inside the window the L4 saw the node's tasks in), and pass
 * `strata trace validate`. The daemon itself runs with STRATA_TRACE set:
 * no session writes that file.
 */
#define _GNU_SOURCE
#include "remote_kit.h"

#include <jansson.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static struct rk_node node;
static char dir[] = "/tmp/strata-rtrace-XXXXXX";
static char daemon_trace[RK_PATH_MAX], run_trace[RK_PATH_MAX];

static int group_setup(void **state)
{
    int rc;

    (void)state;
    if (rk_register() != 0 || !mkdtemp(dir))
        return -1;
    snprintf(daemon_trace, sizeof(daemon_trace), "%s/daemon.json", dir);
    snprintf(run_trace, sizeof(run_trace), "%s/run.json", dir);
    /* The daemon inherits it; its sessions must not write it. */
    setenv("STRATA_TRACE", daemon_trace, 1);
    rc = rk_node_start(&node, RK_PSK, NULL);
    unsetenv("STRATA_TRACE");
    return rc;
}

static int group_teardown(void **state)
{
    int rc;

    (void)state;
    rc = rk_node_stop(&node);
    unlink(run_trace);
    rmdir(dir);
    return rc;
}

static double mono_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static const char *str(const json_t *e, const char *key)
{
    const char *s = json_string_value(json_object_get(e, key));
    return s ? s : "";
}

static json_int_t pid_of(const json_t *e)
{
    return json_integer_value(json_object_get(e, "pid"));
}

static json_int_t process(const json_t *events, const char *name)
{
    size_t i;
    const json_t *e;

    json_array_foreach(events, i, e)
    {
        if (strcmp(str(e, "ph"), "M") == 0 &&
            strcmp(str(e, "name"), "process_name") == 0 &&
            strcmp(str(json_object_get(e, "args"), "name"), name) == 0)
            return pid_of(e);
    }
    fail_msg("no process named '%s' in the trace", name);
    return -1;
}

/* The window [*lo, *hi] from the first submission to the last completion
 * of the L4's tasks on target (its async dispatch slices). */
static void dispatch_window(const json_t *events, json_int_t l4,
                            const char *target, double *lo, double *hi)
{
    size_t i;
    const json_t *e;
    char id[64] = "";

    *lo = 1e300;
    *hi = 0;
    json_array_foreach(events, i, e)
    {
        const json_t *args = json_object_get(e, "args");

        if (pid_of(e) != l4 || strcmp(str(e, "cat"), "dispatch") != 0)
            continue;
        if (strcmp(str(e, "ph"), "b") == 0 &&
            strcmp(str(args, "target"), target) == 0) {
            double t = json_number_value(json_object_get(e, "ts"));
            *lo = t < *lo ? t : *lo;
            snprintf(id, sizeof(id), "%s", str(e, "id"));
        } else if (strcmp(str(e, "ph"), "e") == 0) {
            double t = json_number_value(json_object_get(e, "ts"));
            *hi = t > *hi ? t : *hi; /* any target's: a bound all the same */
        }
    }
    assert_true(id[0] != '\0');
}

/* Task slices of pid: how many, each inside [lo, hi]. */
static size_t tasks_within(const json_t *events, json_int_t pid,
                           const char *name, double lo, double hi)
{
    size_t i, n = 0;
    const json_t *e;

    json_array_foreach(events, i, e)
    {
        double t, dur;

        if (pid_of(e) != pid || strcmp(str(e, "ph"), "X") != 0 ||
            strcmp(str(e, "cat"), "task") != 0 ||
            strcmp(str(e, "name"), name) != 0)
            continue;
        t = json_number_value(json_object_get(e, "ts"));
        dur = json_number_value(json_object_get(e, "dur"));
        if (t < lo || t + dur > hi)
            fail_msg("remote task '%s' at %.3f+%.3f us is outside the L4's "
                     "window [%.3f, %.3f]",
                     name, t, dur, lo, hi);
        n++;
    }
    return n;
}

/* `strata trace validate FILE` exits 0. */
static void assert_validates(const char *path)
{
    pid_t pid = fork();
    int status = 0;

    assert_true(pid >= 0);
    if (pid == 0) {
        execl(RT_CLI_PATH, "strata", "trace", "validate", path, (char *)NULL);
        _exit(127);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_remote_trace_node_lane_aligned(void **state)
{
    static const int nodes[2] = {0, 1};
    strata_remote_spec spec;
    testutil_snapshot before;
    strata_worker *w = NULL;
    json_t *root, *ev;
    json_error_t jerr;
    json_int_t l4, rnode, rchip[2];
    double lo, hi, t0, t1;
    char name[64];

    (void)state;
    testutil_snapshot_take(&before);
    rk_spec(&spec, &node, 2);
    setenv("STRATA_TRACE", run_trace, 1);
    t0 = mono_us();
    it_ok(rk_l4_create(1, &spec, 1, &w));
    unsetenv("STRATA_TRACE");
    it_ok(strata_worker_init(w));
    for (uint32_t round = 0; round < 2; round++)
        it_ok(rk_add_run(w, nodes, 2, 64, 100 * round));
    rk_destroy(w, STRATA_OK);
    t1 = mono_us();
    rk_assert_idle(&node, &before);
    assert_true(access(daemon_trace, F_OK) != 0);

    root = json_load_file(run_trace, 0, &jerr);
    if (!root)
        fail_msg("%s does not parse: line %d: %s", run_trace, jerr.line,
                 jerr.text);
    ev = json_object_get(root, "traceEvents");
    l4 = process(ev, "L4");
    assert_true(process(ev, "node 0 (L3)") > 0);
    rnode = process(ev, "node 1 (L3)");
    assert_true(rnode != l4);
    for (int c = 0; c < 2; c++) {
        snprintf(name, sizeof(name), "node 1 (L3) / chip %d", c);
        rchip[c] = process(ev, name);
    }
    /* Inside the span the L4 saw node 1's tasks in: the node's clock is
     * this host's here, so a misaligned offset shows as a shift. */
    dispatch_window(ev, l4, "node 1", &lo, &hi);
    assert_true(t0 <= lo && hi <= t1);
    assert_int_equal(tasks_within(ev, rnode, RT_O_ADD, lo, hi), 2);
    for (int c = 0; c < 2; c++)
        assert_int_equal(tasks_within(ev, rchip[c], RT_K_ADD, lo, hi), 2);
    json_decref(root);
    assert_validates(run_trace);
    assert_int_equal(unlink(run_trace), 0);
}

/* Two 300 ms node tasks at once on the remote node. */
static strata_err two_spans_orch(strata_orch *o, const strata_args *args,
                                 void *user)
{
    (void)args;
    return rk_submit_spans(o, user, 2, 300, 1);
}

/* Node tasks that run at once on a remote node are drawn on lanes of
 * their own, so that the slices nest and the file validates (they shared
 * one, and `strata trace validate` and `summary` refused it). */
static void test_remote_trace_concurrent_tasks_nest(void **state)
{
    strata_remote_spec spec;
    testutil_snapshot before;
    strata_worker *w = NULL;
    strata_buffer *spans = NULL;
    json_t *root, *ev, *e;
    json_error_t jerr;
    json_int_t rnode, tids[2] = {-1, -1};
    size_t i, n = 0;

    (void)state;
    testutil_snapshot_take(&before);
    rk_spec(&spec, &node, 2);
    setenv("STRATA_TRACE", run_trace, 1);
    it_ok(rk_l4_create(1, &spec, 1, &w));
    unsetenv("STRATA_TRACE");
    it_ok(strata_worker_init(w));
    it_ok(strata_worker_create_buffer(w, 2 * sizeof(struct rt_span), &spans));
    it_ok(strata_worker_run(w, two_spans_orch, NULL, spans));
    it_ok(strata_buffer_release(spans));
    rk_destroy(w, STRATA_OK);
    rk_assert_idle(&node, &before);

    root = json_load_file(run_trace, 0, &jerr);
    if (!root)
        fail_msg("%s does not parse: line %d: %s", run_trace, jerr.line,
                 jerr.text);
    ev = json_object_get(root, "traceEvents");
    rnode = process(ev, "node 1 (L3)");
    json_array_foreach(ev, i, e)
    {
        if (pid_of(e) != rnode || strcmp(str(e, "ph"), "X") != 0 ||
            strcmp(str(e, "cat"), "task") != 0 ||
            strcmp(str(e, "name"), RT_O_SPAN) != 0)
            continue;
        assert_true(n < 2);
        tids[n++] = json_integer_value(json_object_get(e, "tid"));
    }
    assert_int_equal(n, 2);
    assert_true(tids[0] != tids[1]);
    json_decref(root);
    assert_validates(run_trace);
    assert_int_equal(unlink(run_trace), 0);
}

int main(void)
{
    rk_filter_from_env();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_remote_trace_node_lane_aligned),
        cmocka_unit_test(test_remote_trace_concurrent_tasks_nest),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
