/*
 * Timeline traces of a forked tree (docs/tracing.md): an L4 with two L3
 * nodes of two chips each runs dependent work with a trace file set; the
 * file must parse (jansson) and hold a process per L4, node and chip,
 * task slices on the nodes and chips, the L4's dispatch slices with their
 * queue wait, and flow arrows along the L4's dependencies. A tiny buffer
 * drops records and counts them, never blocking. No trace buffer stays in
 * /dev/shm.
 */
#include "l4_kit.h"

#include <jansson.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define N 64

static char trace_path[256];

static void path_init(void)
{
    snprintf(trace_path, sizeof(trace_path), "/tmp/strata-trace-test-%d.json",
             (int)getpid());
    unlink(trace_path);
}

/* An L4 of nodes x (2 chips + 1 sub worker), not started, tracing into path
 * (NULL: the environment decides). */
static strata_worker *create_l4(size_t nodes, const char *path)
{
    static const int chips[] = {0, 1};
    strata_worker_config cfg;
    strata_worker *w = NULL, *n = NULL;
    int id;

    strata_worker_config_init(&cfg, 4);
    cfg.startup_timeout_s = 60;
    cfg.trace_path = path;
    it_ok(it_worker_create(&cfg, &w));
    for (size_t i = 0; i < nodes; i++) {
        strata_worker_config_init(&cfg, 3);
        cfg.chip_ids = chips;
        cfg.num_chips = 2;
        cfg.num_sub_workers = 1;
        it_ok(strata_worker_create(&cfg, &n));
        it_ok(strata_worker_add_worker(w, n, &id));
    }
    return w;
}

struct dep_ctx {
    strata_buffer *a, *b, *c;
};

/* fill on node 0, then scale of its output on node 1, then scale of that
 * on node 0: two dependency edges between the nodes. */
static strata_err dep_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)args;
    struct dep_ctx *d = user;
    it_try(l4_fill(o, 0, d->a, 0, N, 1000, 2000));
    it_try(l4_scale(o, 1, d->a, 0, d->b, 0, N, 3, 1));
    return l4_scale(o, 0, d->b, 0, d->c, 0, N, 2, 0);
}

static json_t *load_trace(void)
{
    json_error_t err;
    json_t *root = json_load_file(trace_path, 0, &err);

    if (!root)
        fail_msg("%s does not parse: line %d: %s", trace_path, err.line,
                 err.text);
    assert_true(json_is_array(json_object_get(root, "traceEvents")));
    return root;
}

static const char *str(const json_t *e, const char *key)
{
    const char *s = json_string_value(json_object_get(e, key));
    return s ? s : "";
}

static json_int_t pid_of_process(const json_t *events, const char *name)
{
    size_t i;
    const json_t *e;

    json_array_foreach(events, i, e)
    {
        if (strcmp(str(e, "ph"), "M") == 0 &&
            strcmp(str(e, "name"), "process_name") == 0 &&
            strcmp(str(json_object_get(e, "args"), "name"), name) == 0)
            return json_integer_value(json_object_get(e, "pid"));
    }
    fail_msg("no process named '%s' in the trace", name);
    return -1;
}

/* Events of phase ph (and category cat, name name unless NULL) in pid
 * (any when < 0). */
static size_t count(const json_t *events, const char *ph, const char *cat,
                    const char *name, json_int_t pid)
{
    size_t i, n = 0;
    const json_t *e;

    json_array_foreach(events, i, e)
    {
        if (strcmp(str(e, "ph"), ph) != 0 ||
            (cat && strcmp(str(e, "cat"), cat) != 0) ||
            (name && strcmp(str(e, "name"), name) != 0) ||
            (pid >= 0 && json_integer_value(json_object_get(e, "pid")) != pid))
            continue;
        n++;
    }
    return n;
}

/* Every flow end has a start with its id, no earlier than it. */
static size_t check_flows(const json_t *events)
{
    size_t i, j, ends = 0;
    const json_t *e, *s;

    json_array_foreach(events, i, e)
    {
        bool found = false;
        if (strcmp(str(e, "ph"), "f") != 0)
            continue;
        ends++;
        json_array_foreach(events, j, s)
        {
            if (strcmp(str(s, "ph"), "s") != 0 ||
                !json_equal(json_object_get(s, "id"), json_object_get(e, "id")))
                continue;
            found = true;
            assert_true(json_number_value(json_object_get(s, "ts")) <=
                        json_number_value(json_object_get(e, "ts")));
        }
        assert_true(found);
    }
    return ends;
}

/* CLOCK_MONOTONIC in the trace's microseconds. */
static double mono_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Every timed event of pid (any when < 0) lies in [lo, hi] (CLOCK_MONOTONIC
 * us read around the run): the record clock's conversion (TSC ticks) and a
 * remote node's offset put them on this host's clock. Returns how many. */
static size_t check_times(const json_t *events, json_int_t pid, double lo,
                          double hi)
{
    size_t i, n = 0;
    const json_t *e;

    json_array_foreach(events, i, e)
    {
        const json_t *ts = json_object_get(e, "ts");
        double t, dur;

        if (!ts ||
            (pid >= 0 && json_integer_value(json_object_get(e, "pid")) != pid))
            continue;
        t = json_number_value(ts);
        dur = json_number_value(json_object_get(e, "dur"));
        if (t < lo || t + dur > hi)
            fail_msg("event %s '%s' at %.3f+%.3f us is outside the run "
                     "[%.3f, %.3f]",
                     str(e, "ph"), str(e, "name"), t, dur, lo, hi);
        n++;
    }
    return n;
}

static void test_trace_forked_tree_spans_lanes_flows(void **state)
{
    (void)state;
    testutil_snapshot before;
    struct dep_ctx d;
    strata_worker *w;
    json_t *root, *ev;
    json_int_t l4, node[2], chip[2][2];
    char name[64];
    double lo, hi;

    path_init();
    testutil_snapshot_take(&before);
    lo = mono_us();
    w = create_l4(2, trace_path);
    it_ok(strata_worker_init(w));
    it_ok(strata_worker_create_buffer(w, N * 4, &d.a));
    it_ok(strata_worker_create_buffer(w, N * 4, &d.b));
    it_ok(strata_worker_create_buffer(w, N * 4, &d.c));
    for (int round = 0; round < 2; round++)
        it_ok(strata_worker_run(w, dep_orch, NULL, &d));
    assert_int_equal(it_u32(d.c)[5], ((1000 + 5) * 3 + 1) * 2);
    it_ok(it_worker_destroy(w));
    hi = mono_us();
    testutil_assert_clean(&before); /* no trace buffer left in /dev/shm */

    root = load_trace();
    ev = json_object_get(root, "traceEvents");
    assert_true(check_times(ev, -1, lo, hi) > 20);
    l4 = pid_of_process(ev, "L4");
    for (int n = 0; n < 2; n++) {
        snprintf(name, sizeof(name), "node %d (L3)", n);
        node[n] = pid_of_process(ev, name);
        for (int c = 0; c < 2; c++) {
            snprintf(name, sizeof(name), "node %d (L3) / chip %d", n, c);
            chip[n][c] = pid_of_process(ev, name);
        }
    }
    /* Sub workers are processes of their own too. */
    assert_true(pid_of_process(ev, "node 1 (L3) / sub 0") > 0);
    /* Each node ran its orch tasks; each chip its kernels. */
    assert_int_equal(count(ev, "X", "task", "l4.fill", node[0]), 2);
    assert_int_equal(count(ev, "X", "task", "l4.scale", node[1]), 2);
    assert_int_equal(count(ev, "X", "task", "l4.scale", node[0]), 2);
    for (int c = 0; c < 2; c++) {
        assert_true(count(ev, "X", "task", "it.fill", chip[0][c]) >= 1);
        assert_true(count(ev, "X", "task", "it.scale", chip[1][c]) >= 1);
    }
    /* The L4 saw six tasks through (async begin and end). */
    assert_int_equal(count(ev, "b", "dispatch", NULL, l4), 6);
    assert_int_equal(count(ev, "e", "dispatch", NULL, l4), 6);
    /* Each node saw its kernels through. */
    assert_true(count(ev, "b", "dispatch", "it.fill", node[0]) >= 2);
    /* Two runs at the L4, each from its orch fn to its fence; two on each
     * node per round (one per node task). */
    assert_int_equal(count(ev, "b", "run", "run", l4), 2);
    assert_int_equal(count(ev, "e", "run", "run", l4), 2);
    assert_int_equal(count(ev, "b", "run", "run", node[1]), 2);
    /* Lanes are named. */
    assert_true(count(ev, "M", NULL, "thread_name", chip[0][0]) >= 2);
    /* fill -> scale -> scale per round at the L4 (and none lost). */
    assert_true(check_flows(ev) >= 4);
    assert_int_equal(count(ev, "s", "dep", NULL, node[0]), 2);
    assert_int_equal(count(ev, "f", "dep", NULL, node[1]), 2);
    assert_int_equal(json_integer_value(json_object_get(
                         json_object_get(root, "otherData"), "edges_unlinked")),
                     0);
    json_decref(root);
    assert_int_equal(unlink(trace_path), 0);
}

static strata_err fill_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)args;
    struct dep_ctx *d = user;
    for (uint32_t i = 0; i < 40; i++)
        it_try(l4_fill(o, 0, d->a, 0, N, i, 0));
    return STRATA_OK;
}

static void test_trace_env_small_buffer_drops_counted(void **state)
{
    (void)state;
    testutil_snapshot before;
    struct dep_ctx d;
    strata_worker *w;
    json_t *root, *dropped, *v;
    json_int_t total = 0;
    const char *key;

    path_init();
    testutil_snapshot_take(&before);
    setenv("STRATA_TRACE", trace_path, 1);
    setenv("STRATA_TRACE_EVENTS", "16", 1);
    w = create_l4(1, NULL);
    unsetenv("STRATA_TRACE");
    it_ok(strata_worker_init(w));
    unsetenv("STRATA_TRACE_EVENTS");
    it_ok(strata_worker_create_buffer(w, N * 4, &d.a));
    it_ok(strata_worker_run(w, fill_orch, NULL, &d));
    assert_int_equal(it_u32(d.a)[3], 39 + 3);
    it_ok(it_worker_destroy(w));
    testutil_assert_clean(&before);

    root = load_trace();
    /* 40 tasks and 39 edges in the L4 alone: more than 16 records. */
    dropped = json_object_get(json_object_get(root, "otherData"), "dropped");
    json_object_foreach(dropped, key, v) total += json_integer_value(v);
    assert_true(total >= 40 + 39 - 16);
    assert_true(count(json_object_get(root, "traceEvents"), "b", "dispatch",
                      NULL, -1) <= 16 * 3);
    json_decref(root);
    assert_int_equal(unlink(trace_path), 0);
}

/* A global domain over chip 0 of both nodes, allocated and released in
 * one run: its phases are transaction spans on each node. */
static strata_err gd_orch(strata_orch *o, const strata_args *args, void *user)
{
    static const strata_global_member members[2] = {{0, 0}, {1, 0}};
    static const strata_comm_buffer_spec buf = {"x", STRATA_U32, 16, 64};
    strata_global_domain_spec spec = {.name = "trace-gd",
                                      .members = members,
                                      .num_members = 2,
                                      .window_size = 64,
                                      .buffers = &buf,
                                      .num_buffers = 1};
    strata_global_domain *g = NULL;

    (void)args;
    (void)user;
    it_try(strata_orch_allocate_global_domain(o, &spec, &g));
    return strata_global_domain_release(g);
}

static void test_trace_global_domain_phases_per_node(void **state)
{
    (void)state;
    testutil_snapshot before;
    strata_worker *w;
    json_t *root, *ev;
    char name[64];

    path_init();
    testutil_snapshot_take(&before);
    w = create_l4(2, trace_path);
    it_ok(strata_worker_init(w));
    it_ok(strata_worker_run(w, gd_orch, NULL, NULL));
    it_ok(it_worker_destroy(w));
    testutil_assert_clean(&before);

    root = load_trace();
    ev = json_object_get(root, "traceEvents");
    for (int n = 0; n < 2; n++) {
        json_int_t node;

        snprintf(name, sizeof(name), "node %d (L3)", n);
        node = pid_of_process(ev, name);
        assert_int_equal(count(ev, "X", "gdomain", "PREPARE_EXPORT", node), 1);
        assert_int_equal(count(ev, "X", "gdomain", "IMPORT", node), 1);
        assert_int_equal(count(ev, "X", "gdomain", "COMMIT", node), 1);
        assert_int_equal(count(ev, "X", "gdomain", "ABORT", node), 1);
    }
    json_decref(root);
    assert_int_equal(unlink(trace_path), 0);
}

/* boom (fails) on node 0 writing a, then a scale of a on node 1, which
 * never runs (its predecessor failed). */
static strata_err fail_orch(strata_orch *o, const strata_args *args, void *user)
{
    struct dep_ctx *d = user;
    strata_args *a = NULL;
    strata_err e;

    (void)args;
    it_try(strata_args_create(&a));
    e = it_add_u32(a, d->a, 0, N, STRATA_OUT);
    if (!e)
        e = strata_args_add_scalar(a, L4_K_BOOM);
    if (!e)
        e = strata_args_add_scalar(a, 0);
    if (!e)
        e = strata_orch_submit_next_level(o, l4_o_forward, a, 0);
    strata_args_destroy(a);
    if (e)
        return e;
    return l4_scale(o, 1, d->a, 0, d->b, 0, N, 3, 1);
}

/* The dispatch slice of pid's task to target whose args have key set
 * to true (key NULL: any). */
static bool task_marked(const json_t *events, json_int_t pid,
                        const char *target, const char *key)
{
    size_t i;
    const json_t *e;

    json_array_foreach(events, i, e)
    {
        const json_t *args = json_object_get(e, "args");

        if (strcmp(str(e, "ph"), "b") == 0 &&
            strcmp(str(e, "cat"), "dispatch") == 0 &&
            json_integer_value(json_object_get(e, "pid")) == pid &&
            strcmp(str(args, "target"), target) == 0)
            return !key || json_is_true(json_object_get(args, key));
    }
    return false;
}

/* A failed task and one that never ran are marked so, in the lane of the
 * target they were for: "failed" on both (and on the first's run slice on
 * the node), "ran": false and no run time on the second. */
static void test_trace_failed_and_unrun_tasks_marked(void **state)
{
    (void)state;
    testutil_snapshot before;
    struct dep_ctx d;
    strata_worker *w;
    json_t *root, *ev;
    json_int_t l4;
    size_t i;
    const json_t *e;
    bool run_failed = false;

    path_init();
    testutil_snapshot_take(&before);
    w = create_l4(2, trace_path);
    it_ok(strata_worker_init(w));
    it_ok(strata_worker_create_buffer(w, N * 4, &d.a));
    it_ok(strata_worker_create_buffer(w, N * 4, &d.b));
    assert_int_not_equal(strata_worker_run(w, fail_orch, NULL, &d), STRATA_OK);
    it_ok(it_worker_destroy(w));
    testutil_assert_clean(&before);

    root = load_trace();
    ev = json_object_get(root, "traceEvents");
    l4 = pid_of_process(ev, "L4");
    assert_true(task_marked(ev, l4, "node 0", "failed"));
    assert_false(task_marked(ev, l4, "node 0", "ran") ||
                 !task_marked(ev, l4, "node 0", NULL));
    /* Failed too: with its predecessor's error. */
    assert_true(task_marked(ev, l4, "node 1", "failed"));
    json_array_foreach(ev, i, e)
    {
        const json_t *args = json_object_get(e, "args");

        if (strcmp(str(e, "ph"), "b") == 0 &&
            json_integer_value(json_object_get(e, "pid")) == l4 &&
            strcmp(str(args, "target"), "node 1") == 0) {
            assert_true(json_is_false(json_object_get(args, "ran")));
            assert_true(json_number_value(json_object_get(args, "run_us")) ==
                        0.0);
        }
        if (strcmp(str(e, "ph"), "X") == 0 &&
            strcmp(str(e, "cat"), "task") == 0 &&
            json_is_true(json_object_get(args, "failed")))
            run_failed = true;
    }
    assert_true(run_failed);
    json_decref(root);
    assert_int_equal(unlink(trace_path), 0);
}

static strata_err noop_kernel(strata_chip *chip, const strata_args *a)
{
    (void)chip;
    (void)a;
    return STRATA_OK;
}

/* 40 characters: past a one-record task's name field (31), within a
 * record's name (47). */
#define LONG_NAME "trace.a_kernel_name_of_forty_characters_"

static strata_err names_orch(strata_orch *o, const strata_args *args,
                             void *user)
{
    const strata_callable *k = user;
    strata_args *a = NULL;
    strata_err e;

    (void)args;
    it_try(strata_args_create(&a));
    e = strata_orch_submit_next_level(o, k[0], a, 0);
    if (!e)
        e = strata_orch_submit_next_level(o, k[1], a, 0);
    strata_args_destroy(a);
    return e;
}

/* Runs "trace.short" and a kernel named name on a one-chip L3 with a
 * trace file; the file's events, with the L3's and the chip's pids. */
static json_t *run_two_names(const char *name, json_int_t *l3, json_int_t *chip)
{
    static const int chip0[1] = {0};
    strata_callable k[2];
    strata_worker_config cfg;
    strata_worker *w = NULL;
    json_t *root;

    it_ok(strata_register_kernel("trace.short", noop_kernel, &k[0]));
    it_ok(strata_register_kernel(name, noop_kernel, &k[1]));
    path_init();
    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = chip0;
    cfg.num_chips = 1;
    cfg.trace_path = trace_path;
    it_ok(it_worker_create(&cfg, &w));
    it_ok(strata_worker_init(w));
    it_ok(strata_worker_run(w, names_orch, NULL, k));
    it_ok(it_worker_destroy(w));
    root = load_trace();
    *l3 = pid_of_process(json_object_get(root, "traceEvents"), "L3");
    *chip = pid_of_process(json_object_get(root, "traceEvents"), "chip 0");
    assert_true(*l3 >= 0 && *chip >= 0);
    return root;
}

/* A chip records a task it ran and its orchestrator's view of it in one
 * record when the callable's name is short, in two when it is long: the
 * file says the same either way. */
static void test_trace_short_and_long_names_same_slices(void **state)
{
    (void)state;
    json_int_t l3, chip;
    json_t *root = run_two_names(LONG_NAME, &l3, &chip);
    json_t *ev = json_object_get(root, "traceEvents");

    assert_int_equal(count(ev, "X", "task", "trace.short", chip), 1);
    assert_int_equal(count(ev, "X", "task", LONG_NAME, chip), 1);
    assert_true(task_marked(ev, l3, "chip 0", NULL));
    assert_int_equal(count(ev, "b", "dispatch", "trace.short", l3), 1);
    assert_int_equal(count(ev, "b", "dispatch", LONG_NAME, l3), 1);
    assert_int_equal(count(ev, "e", "dispatch", NULL, l3), 2);
    json_decref(root);
    assert_int_equal(unlink(trace_path), 0);
}

/* "trace." and 25 two-byte characters: 56 bytes, cut at 47 inside the
 * 21st; the file keeps the 20 whole ones, as UTF-8 (jansson refuses a
 * file that is not). */
#define E_ACUTE "\xc3\xa9"
#define E5 E_ACUTE E_ACUTE E_ACUTE E_ACUTE E_ACUTE
#define UTF8_NAME "trace." E5 E5 E5 E5 E5
#define UTF8_KEPT "trace." E5 E5 E5 E5

static void test_trace_utf8_names_stay_utf8(void **state)
{
    (void)state;
    json_int_t l3, chip;
    json_t *root = run_two_names(UTF8_NAME, &l3, &chip);
    json_t *ev = json_object_get(root, "traceEvents");

    assert_int_equal(count(ev, "X", "task", UTF8_KEPT, chip), 1);
    assert_int_equal(count(ev, "b", "dispatch", UTF8_KEPT, l3), 1);
    json_decref(root);
    assert_int_equal(unlink(trace_path), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_trace_forked_tree_spans_lanes_flows,
                                  it_teardown),
        cmocka_unit_test_teardown(test_trace_env_small_buffer_drops_counted,
                                  it_teardown),
        cmocka_unit_test_teardown(test_trace_global_domain_phases_per_node,
                                  it_teardown),
        cmocka_unit_test_teardown(test_trace_failed_and_unrun_tasks_marked,
                                  it_teardown),
        cmocka_unit_test_teardown(test_trace_short_and_long_names_same_slices,
                                  it_teardown),
        cmocka_unit_test_teardown(test_trace_utf8_names_stay_utf8, it_teardown),
    };
    return cmocka_run_group_tests(tests, l4_setup, NULL);
}
