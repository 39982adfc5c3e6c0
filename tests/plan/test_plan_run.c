/* Bundle plans on a real worker (two forked sim chips, sub workers): a
 * plan's invocations run as tasks, each after its dependencies (joins
 * included) and with the results the DAG implies; partitioned writes go
 * to their bound slices; the reserved operations run by default or
 * through callbacks; submission errors name the invocation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <strata/plan.h>

#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IDS 16

/* The shared log every task stamps: a counter, a flag, and per task id
 * the counter's value at its start and at its end. */
struct plan_log {
    uint32_t counter;
    uint32_t flag;
    uint32_t start[MAX_IDS];
    uint32_t end[MAX_IDS];
};

static strata_callable k_scale, k_slow, s_fill, s_sum, s_late, s_double,
    s_copy_cb, s_noop, s_bump, s_snap;

static struct plan_log *log_of(const strata_args *a, size_t i)
{
    return strata_args_tensor_data(a, i);
}

static uint32_t stamp(struct plan_log *l)
{
    return __atomic_add_fetch(&l->counter, 1, __ATOMIC_ACQ_REL);
}

static void begin(struct plan_log *l, uint64_t id)
{
    l->start[id % MAX_IDS] = stamp(l);
}

static void end(struct plan_log *l, uint64_t id)
{
    l->end[id % MAX_IDS] = stamp(l);
}

/* x[i] = i. t0 x, t1 log; s0 id. */
static strata_err fill(const strata_args *a)
{
    uint32_t *x = strata_args_tensor_data(a, 0);
    size_t n = strata_args_tensor_nbytes(a, 0) / 4;

    begin(log_of(a, 1), strata_args_scalar(a, 0));
    for (size_t i = 0; i < n; i++)
        x[i] = (uint32_t)i;
    end(log_of(a, 1), strata_args_scalar(a, 0));
    return STRATA_OK;
}

/* y[k] = 2 * x[base + k] over y's slice. t0 x, t1 y, t2 log; s0 id,
 * s1 base. */
static strata_err scale(strata_chip *chip, const strata_args *a)
{
    const uint32_t *x = strata_args_tensor_data(a, 0);
    uint32_t *y = strata_args_tensor_data(a, 1);
    size_t n = strata_args_tensor_nbytes(a, 1) / 4;
    uint64_t base = strata_args_scalar(a, 1);

    (void)chip;
    begin(log_of(a, 2), strata_args_scalar(a, 0));
    for (size_t k = 0; k < n; k++)
        y[k] = 2 * x[base + k];
    end(log_of(a, 2), strata_args_scalar(a, 0));
    return STRATA_OK;
}

/* z = sum of y (u64). t0 y, t1 z, t2 log; s0 id. */
static strata_err sum(const strata_args *a)
{
    const uint32_t *y = strata_args_tensor_data(a, 0);
    size_t n = strata_args_tensor_nbytes(a, 0) / 4;
    uint64_t total = 0;

    begin(log_of(a, 2), strata_args_scalar(a, 0));
    for (size_t i = 0; i < n; i++)
        total += y[i];
    memcpy(strata_args_tensor_data(a, 1), &total, sizeof(total));
    end(log_of(a, 2), strata_args_scalar(a, 0));
    return STRATA_OK;
}

/* Waits (bounded) for late's flag: if the plan's edge slow -> late were
 * lost, late would run meanwhile and stamp its start before slow's end.
 * t0 log; s0 id. */
static strata_err slow(strata_chip *chip, const strata_args *a)
{
    struct plan_log *l = log_of(a, 0);

    (void)chip;
    begin(l, strata_args_scalar(a, 0));
    (void)testutil_wait_u32(&l->flag, 1, 0.5);
    end(l, strata_args_scalar(a, 0));
    return STRATA_OK;
}

static strata_err late(const strata_args *a)
{
    struct plan_log *l = log_of(a, 0);

    begin(l, strata_args_scalar(a, 0));
    testutil_store_u32(&l->flag, 1);
    end(l, strata_args_scalar(a, 0));
    return STRATA_OK;
}

/* t0 *= 2 (u32). */
static strata_err twice(const strata_args *a)
{
    uint32_t *x = strata_args_tensor_data(a, 0);

    for (size_t i = 0; i < strata_args_tensor_nbytes(a, 0) / 4; i++)
        x[i] *= 2;
    return STRATA_OK;
}

/* t1 = t0 + 1 per byte: a transfer callback's own copy, recognizable. */
static strata_err copy_plus_one(const strata_args *a)
{
    const uint8_t *s = strata_args_tensor_data(a, 0);
    uint8_t *d = strata_args_tensor_data(a, 1);

    for (size_t i = 0; i < strata_args_tensor_nbytes(a, 0); i++)
        d[i] = (uint8_t)(s[i] + 1);
    return STRATA_OK;
}

/* ++t0.counter; snap: t0.flag = t0.counter. */
static strata_err bump(const strata_args *a)
{
    (void)stamp(log_of(a, 0));
    return STRATA_OK;
}

static strata_err snap(const strata_args *a)
{
    struct plan_log *l = log_of(a, 0);

    testutil_store_u32(&l->flag,
                       __atomic_load_n(&l->counter, __ATOMIC_ACQUIRE));
    return STRATA_OK;
}

static strata_err noop(const strata_args *a)
{
    (void)a;
    return STRATA_OK;
}

static int group_setup(void **state)
{
    (void)state;
    if (strata_register_kernel("plan_test.scale", scale, &k_scale) ||
        strata_register_kernel("plan_test.slow", slow, &k_slow) ||
        strata_register_sub("plan_test.fill", fill, &s_fill) ||
        strata_register_sub("plan_test.sum", sum, &s_sum) ||
        strata_register_sub("plan_test.late", late, &s_late) ||
        strata_register_sub("plan_test.double", twice, &s_double) ||
        strata_register_sub("plan_test.copy_cb", copy_plus_one, &s_copy_cb) ||
        strata_register_sub("plan_test.noop", noop, &s_noop) ||
        strata_register_sub("plan_test.bump", bump, &s_bump) ||
        strata_register_sub("plan_test.snap", snap, &s_snap))
        return -1;
    return 0;
}

static strata_worker *start_worker(size_t subs)
{
    static const int ids[] = {0, 1};
    strata_worker_config cfg;
    strata_worker *w = NULL;

    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = ids;
    cfg.num_chips = 2;
    cfg.num_sub_workers = subs;
    assert_int_equal(strata_worker_create(&cfg, &w), STRATA_OK);
    if (strata_worker_init(w) != STRATA_OK)
        fail_msg("init: %s", strata_errmsg());
    return w;
}

static strata_buffer *buffer(strata_worker *w, size_t n)
{
    strata_buffer *b = NULL;

    assert_int_equal(strata_worker_create_buffer(w, n, &b), STRATA_OK);
    return b;
}

struct job {
    const strata_plan *p;
    const strata_plan_bindings *b;
};

static strata_err run_plan(strata_orch *o, const strata_args *args, void *user)
{
    struct job *j = user;

    (void)args;
    return strata_orch_submit_plan(o, j->p, j->b);
}

/* ---- the pipeline ---- */

#define WORDS 4096
#define HALF 1000 /* bucket 0's rows: [0, HALF) */

enum { ID_FILL, ID_B0, ID_B1, ID_SUM, ID_SLOW, ID_LATE };

static const strata_plan_argument fill_args[] = {{"x", "x"}, {"log", "log"}};
static const strata_plan_access fill_acc[] = {
    {"x", STRATA_PLAN_WRITE, 1, NULL, NULL}};
static const strata_plan_argument scale_args[] = {
    {"x", "x"}, {"y", "y"}, {"log", "log"}};
static const strata_plan_access b0_acc[] = {
    {"x", STRATA_PLAN_READ, 1, NULL, NULL},
    {"y", STRATA_PLAN_WRITE, 1, "rows", "0"}};
static const strata_plan_access b1_acc[] = {
    {"x", STRATA_PLAN_READ, 1, NULL, NULL},
    {"y", STRATA_PLAN_WRITE, 1, "rows", "1"}};
static const strata_plan_argument sum_args[] = {
    {"y", "y"}, {"z", "z"}, {"log", "log"}};
static const strata_plan_access sum_acc[] = {
    {"y", STRATA_PLAN_READ, 1, NULL, NULL},
    {"z", STRATA_PLAN_WRITE, 1, NULL, NULL}};
static const strata_plan_argument xfer_args[] = {{"source", "z"},
                                                 {"destination", "w"}};
static const strata_plan_access xfer_acc[] = {
    {"z", STRATA_PLAN_READ, 1, NULL, NULL},
    {"w", STRATA_PLAN_WRITE, 1, NULL, NULL}};
static const strata_plan_argument log_args[] = {{"log", "log"}};
static const strata_plan_argument rel_args[] = {{"instance", "w"}};
static const strata_plan_access rel_acc[] = {
    {"w", STRATA_PLAN_WRITE, 1, NULL, NULL}};
static const char *const on_fill[] = {"fill"};
static const char *const on_buckets[] = {"bucket:0", "bucket:1"};
static const char *const on_join[] = {"join"};
static const char *const on_sum[] = {"sum"};
static const char *const on_slow[] = {"slow"};
static const char *const on_gate[] = {"gate"};
static const char *const on_move[] = {"move"};
static const uint64_t sc_fill[] = {ID_FILL}, sc_b0[] = {ID_B0, 0},
                      sc_b1[] = {ID_B1, HALF}, sc_sum[] = {ID_SUM},
                      sc_slow[] = {ID_SLOW}, sc_late[] = {ID_LATE};

#define INVOKE(name, callable, deps, nd, args, na, acc, nacc, sc, nsc)         \
    {                                                                          \
        name, callable, NULL, NULL, deps, nd, args, na, acc, nacc, 1, sc, nsc, \
            NULL                                                               \
    }

/* Listed out of order on purpose: submission follows the DAG. */
static const strata_plan_invocation pipeline[] = {
    INVOKE("sum", "plan_test.sum", on_join, 1, sum_args, 3, sum_acc, 2, sc_sum,
           1),
    INVOKE("late", "plan_test.late", on_gate, 1, log_args, 1, NULL, 0, sc_late,
           1),
    INVOKE("gate", STRATA_PLAN_JOIN, on_slow, 1, NULL, 0, NULL, 0, NULL, 0),
    INVOKE("bucket:1", "plan_test.scale", on_fill, 1, scale_args, 3, b1_acc, 2,
           sc_b1, 2),
    INVOKE("join", STRATA_PLAN_JOIN, on_buckets, 2, NULL, 0, NULL, 0, NULL, 0),
    INVOKE("fill", "plan_test.fill", NULL, 0, fill_args, 2, fill_acc, 1,
           sc_fill, 1),
    INVOKE("move", STRATA_PLAN_TRANSFER, on_sum, 1, xfer_args, 2, xfer_acc, 2,
           NULL, 0),
    INVOKE("bucket:0", "plan_test.scale", on_fill, 1, scale_args, 3, b0_acc, 2,
           sc_b0, 2),
    INVOKE("slow", "plan_test.slow", NULL, 0, log_args, 1, NULL, 0, sc_slow, 1),
    INVOKE("drop", STRATA_PLAN_RELEASE, on_move, 1, rel_args, 1, rel_acc, 1,
           NULL, 0),
};

struct pipe_fx {
    testutil_snapshot before;
    strata_worker *w;
    strata_plan *p;
    strata_plan_bindings *b;
    strata_buffer *x, *y, *z, *wb, *log;
};

static void pipe_start(struct pipe_fx *f, size_t subs)
{
    strata_plan_spec spec = {
        NULL, 0, pipeline, sizeof(pipeline) / sizeof(pipeline[0]), NULL, 0};

    testutil_snapshot_take(&f->before);
    if (strata_plan_create(&spec, &f->p) != STRATA_OK)
        fail_msg("plan: %s", strata_errmsg());
    f->w = start_worker(subs);
    f->x = buffer(f->w, WORDS * 4);
    f->y = buffer(f->w, WORDS * 4);
    f->z = buffer(f->w, 8);
    f->wb = buffer(f->w, 8);
    f->log = buffer(f->w, sizeof(struct plan_log));
    assert_int_equal(strata_plan_bindings_create(f->p, f->w, &f->b), STRATA_OK);
    assert_int_equal(strata_plan_bind_buffer(f->b, "x", f->x, 0, 0), 0);
    assert_int_equal(strata_plan_bind_buffer(f->b, "y", f->y, 0, 0), 0);
    assert_int_equal(strata_plan_bind_buffer(f->b, "z", f->z, 0, 0), 0);
    assert_int_equal(strata_plan_bind_buffer(f->b, "w", f->wb, 0, 0), 0);
    assert_int_equal(strata_plan_bind_buffer(f->b, "log", f->log, 0, 0), 0);
    assert_int_equal(
        strata_plan_bind_partition(f->b, "y", "rows", "0", 0, HALF * 4), 0);
    assert_int_equal(strata_plan_bind_partition(f->b, "y", "rows", "1",
                                                HALF * 4, (WORDS - HALF) * 4),
                     0);
    assert_int_equal(strata_plan_bind_target(f->b, "bucket:0", 0), 0);
    assert_int_equal(strata_plan_bind_target(f->b, "bucket:1", 1), 0);
    assert_int_equal(strata_plan_bind_target(f->b, "slow", 0), 0);
}

static void pipe_end(struct pipe_fx *f)
{
    assert_int_equal(strata_plan_bindings_destroy(f->b), STRATA_OK);
    strata_plan_destroy(f->p);
    assert_int_equal(strata_worker_destroy(f->w), STRATA_OK);
    testutil_assert_clean(&f->before);
}

/* end of a before start of b. */
static void before(const struct plan_log *l, int a, int b)
{
    if (!(l->end[a] && l->start[b] && l->end[a] < l->start[b]))
        fail_msg("task %d (end %u) does not precede task %d (start %u)", a,
                 l->end[a], b, l->start[b]);
}

static void check_pipeline(struct pipe_fx *f)
{
    const uint32_t *y = strata_buffer_data(f->y);
    const struct plan_log *l = strata_buffer_data(f->log);
    uint64_t z, w, want = 0;

    for (uint32_t i = 0; i < WORDS; i++) {
        want += 2ull * i;
        if (y[i] != 2 * i)
            fail_msg("y[%u] = %u, not %u", i, y[i], 2 * i);
    }
    memcpy(&z, strata_buffer_data(f->z), 8);
    memcpy(&w, strata_buffer_data(f->wb), 8);
    assert_int_equal(z, want);
    assert_int_equal(w, want); /* the transfer ran after sum */
    before(l, ID_FILL, ID_B0);
    before(l, ID_FILL, ID_B1);
    before(l, ID_B0, ID_SUM); /* through the join */
    before(l, ID_B1, ID_SUM);
    before(l, ID_SLOW, ID_LATE); /* through a join; no data behind it */
}

static void test_plan_run_pipeline_in_dependency_order(void **state)
{
    struct pipe_fx f;
    struct job j;

    (void)state;
    pipe_start(&f, 2);
    j = (struct job){f.p, f.b};
    if (strata_worker_run(f.w, run_plan, NULL, &j) != STRATA_OK)
        fail_msg("run: %s", strata_errmsg());
    check_pipeline(&f);
    /* Again, with the same bindings: the log restarts, order holds. */
    memset(strata_buffer_data(f.log), 0, sizeof(struct plan_log));
    memset(strata_buffer_data(f.y), 0, WORDS * 4);
    memset(strata_buffer_data(f.wb), 0, 8);
    if (strata_worker_run(f.w, run_plan, NULL, &j) != STRATA_OK)
        fail_msg("run 2: %s", strata_errmsg());
    check_pipeline(&f);
    pipe_end(&f);
}

/* ---- reserved operations through callbacks ---- */

struct cb_seen {
    int transfers, releases;
    char last_resource[32];
};

static strata_err on_transfer(strata_orch *o, const strata_plan_op *op,
                              void *ctx)
{
    struct cb_seen *seen = ctx;

    seen->transfers++;
    if (op->num_operands != 2 || strcmp(op->operands[0].parameter, "source") ||
        strcmp(op->operands[1].resource, "hot") || !op->operands[0].buffer)
        return STRATA_EINVAL;
    return strata_orch_submit_sub(o, s_copy_cb, op->args);
}

static strata_err on_release(strata_orch *o, const strata_plan_op *op,
                             void *ctx)
{
    struct cb_seen *seen = ctx;

    seen->releases++;
    snprintf(seen->last_resource, sizeof(seen->last_resource), "%s",
             op->operands[0].resource);
    return strata_orch_submit_sub(o, s_noop, op->args);
}

static char *slurp_data(const char *name, size_t *len);

static void test_plan_run_reserved_callbacks(void **state)
{
    testutil_snapshot snap;
    strata_plan_reserved_ops ops = {on_transfer, on_release};
    struct cb_seen seen = {0};
    strata_plan *p = NULL;
    strata_plan_bindings *b = NULL;
    strata_worker *w;
    strata_buffer *cold, *hot;
    uint32_t *c, *h;
    struct job j;
    size_t len;
    char *text = slurp_data("prefetch_release.json", &len);

    (void)state;
    testutil_snapshot_take(&snap);
    assert_int_equal(strata_plan_from_json(text, len, &p), STRATA_OK);
    free(text);
    w = start_worker(1);
    cold = buffer(w, 64);
    hot = buffer(w, 64);
    c = strata_buffer_data(cold);
    for (uint32_t i = 0; i < 16; i++)
        c[i] = 0x01010101u * i;
    assert_int_equal(strata_plan_bindings_create(p, w, &b), STRATA_OK);
    assert_int_equal(strata_plan_bind_buffer(b, "cold", cold, 0, 0), 0);
    assert_int_equal(strata_plan_bind_buffer(b, "hot", hot, 0, 0), 0);
    assert_int_equal(strata_plan_bind_callable(b, "scale", s_double, -1), 0);
    assert_int_equal(strata_plan_bind_reserved(b, &ops, &seen), 0);
    j = (struct job){p, b};
    if (strata_worker_run(w, run_plan, NULL, &j) != STRATA_OK)
        fail_msg("run: %s", strata_errmsg());
    assert_int_equal(seen.transfers, 1);
    assert_int_equal(seen.releases, 1);
    assert_string_equal(seen.last_resource, "hot");
    /* hot = 2 * (cold + 1 per byte): the callback's copy, then scale. */
    h = strata_buffer_data(hot);
    for (uint32_t i = 0; i < 16; i++)
        assert_int_equal(h[i], 2 * (0x01010101u * i + 0x01010101u));
    /* The default transfer: a plain copy. */
    assert_int_equal(strata_plan_bind_reserved(b, NULL, NULL), 0);
    if (strata_worker_run(w, run_plan, NULL, &j) != STRATA_OK)
        fail_msg("run 2: %s", strata_errmsg());
    for (uint32_t i = 0; i < 16; i++)
        assert_int_equal(h[i], 2 * (0x01010101u * i));
    assert_int_equal(strata_plan_bindings_destroy(b), STRATA_OK);
    strata_plan_destroy(p);
    assert_int_equal(strata_worker_destroy(w), STRATA_OK);
    testutil_assert_clean(&snap);
}

/* ---- more predecessors than a task has tensors ---- */

#define FAN 600 /* every other one, 300, feeds the join */

static void test_plan_run_wide_join_merges_tokens(void **state)
{
    static char names[FAN][16];
    static const char *deps[FAN / 2];
    static strata_plan_invocation v[FAN + 3];
    static const char *const on_all[] = {"all", "all2"};
    testutil_snapshot snap_before;
    strata_plan_spec spec = {NULL, 0, v, FAN + 3, NULL, 0};
    strata_plan *p = NULL;
    strata_plan_bindings *b = NULL;
    strata_worker *w;
    strata_buffer *log;
    struct job j;

    (void)state;
    testutil_snapshot_take(&snap_before);
    for (size_t i = 0; i < FAN; i++) {
        snprintf(names[i], sizeof(names[i]), "n%zu", i);
        v[i] = (strata_plan_invocation){0};
        v[i].name = names[i];
        v[i].callable = i % 2 ? "plan_test.noop" : "plan_test.bump";
        v[i].arguments = log_args;
        v[i].num_arguments = 1;
        if (i % 2 == 0)
            deps[i / 2] = names[i];
    }
    /* Two joins (a list holds 256 names at most), one task after both. */
    v[FAN].name = "all";
    v[FAN].callable = STRATA_PLAN_JOIN;
    v[FAN].depends_on = deps;
    v[FAN].num_depends_on = FAN / 4;
    v[FAN + 1].name = "all2";
    v[FAN + 1].callable = STRATA_PLAN_JOIN;
    v[FAN + 1].depends_on = deps + FAN / 4;
    v[FAN + 1].num_depends_on = FAN / 4;
    v[FAN + 2].name = "last";
    v[FAN + 2].callable = "plan_test.snap";
    v[FAN + 2].depends_on = on_all;
    v[FAN + 2].num_depends_on = 2;
    v[FAN + 2].arguments = log_args;
    v[FAN + 2].num_arguments = 1;
    if (strata_plan_create(&spec, &p) != STRATA_OK)
        fail_msg("plan: %s", strata_errmsg());
    w = start_worker(2);
    log = buffer(w, sizeof(struct plan_log));
    assert_int_equal(strata_plan_bindings_create(p, w, &b), STRATA_OK);
    assert_int_equal(strata_plan_bind_buffer(b, "log", log, 0, 0), 0);
    j = (struct job){p, b};
    if (strata_worker_run(w, run_plan, NULL, &j) != STRATA_OK)
        fail_msg("run: %s", strata_errmsg());
    /* last started after all 300 bumps. */
    assert_int_equal(((struct plan_log *)strata_buffer_data(log))->flag,
                     FAN / 2);
    assert_int_equal(strata_plan_bindings_destroy(b), STRATA_OK);
    strata_plan_destroy(p);
    assert_int_equal(strata_worker_destroy(w), STRATA_OK);
    testutil_assert_clean(&snap_before);
}

/* ---- submission errors ---- */

static void expect_run_error(strata_worker *w, struct job *j, const char *word1,
                             const char *word2)
{
    strata_err err = strata_worker_run(w, run_plan, NULL, j);

    if (err != STRATA_EINVAL || !strstr(strata_errmsg(), word1) ||
        !strstr(strata_errmsg(), word2))
        fail_msg("wanted EINVAL naming %s and %s: %s (%s)", word1, word2,
                 strata_errname(err), strata_errmsg());
}

static void test_plan_run_submit_errors_name_the_invocation(void **state)
{
    struct pipe_fx f;
    strata_plan_bindings *other = NULL;
    struct job j;

    (void)state;
    pipe_start(&f, 2);
    assert_int_equal(strata_plan_bindings_create(f.p, f.w, &other), 0);
    j = (struct job){f.p, other};
    /* Nothing bound: the first invocation in order names its resource. */
    expect_run_error(f.w, &j, "'fill'", "'x'");
    assert_int_equal(strata_plan_bind_buffer(other, "x", f.x, 0, 0), 0);
    assert_int_equal(strata_plan_bind_buffer(other, "log", f.log, 0, 0), 0);
    /* fill goes (and stays submitted); slow, a kernel, has no chip. */
    expect_run_error(f.w, &j, "'slow'", "strata_plan_bind_target");
    assert_int_equal(strata_plan_bindings_destroy(other), STRATA_OK);
    /* A callable nobody registered. */
    {
        strata_plan_invocation g = {0};
        strata_plan_spec spec = {NULL, 0, &g, 1, NULL, 0};
        strata_plan *gp = NULL;

        g.name = "ghost";
        g.callable = "plan_test.nothing";
        assert_int_equal(strata_plan_create(&spec, &gp), STRATA_OK);
        assert_int_equal(strata_plan_bindings_create(gp, f.w, &other), 0);
        j = (struct job){gp, other};
        expect_run_error(f.w, &j, "'ghost'", "not registered");
        /* Bindings made for another plan. */
        j = (struct job){f.p, other};
        expect_run_error(f.w, &j, "strata_orch_submit_plan", "another plan");
        assert_int_equal(strata_plan_bindings_destroy(other), STRATA_OK);
        strata_plan_destroy(gp);
    }
    /* No bindings. */
    j = (struct job){f.p, NULL};
    expect_run_error(f.w, &j, "strata_orch_submit_plan", "b is NULL");
    /* Binding edges. */
    assert_int_equal(strata_plan_bind_buffer(f.b, "nope", f.x, 0, 0),
                     STRATA_EINVAL);
    assert_non_null(strstr(strata_errmsg(), "'nope'"));
    assert_int_equal(strata_plan_bind_buffer(f.b, "x", f.x, WORDS * 4, 0),
                     STRATA_EINVAL);
    /* A buffer of another worker (not initialised: buffers come first). */
    {
        strata_worker_config cfg;
        strata_worker *w2 = NULL;
        strata_buffer *b2 = NULL;

        strata_worker_config_init(&cfg, 3);
        assert_int_equal(strata_worker_create(&cfg, &w2), STRATA_OK);
        assert_int_equal(strata_worker_create_buffer(w2, 64, &b2), STRATA_OK);
        assert_int_equal(strata_plan_bind_buffer(f.b, "x", b2, 0, 0),
                         STRATA_EINVAL);
        assert_non_null(strstr(strata_errmsg(), "another worker"));
        assert_int_equal(strata_buffer_release(b2), STRATA_OK);
        assert_int_equal(strata_worker_destroy(w2), STRATA_OK);
    }
    assert_int_equal(strata_plan_bind_target(f.b, "nobody", 0), STRATA_EINVAL);
    assert_int_equal(strata_plan_bind_target(f.b, "slow", -1), STRATA_EINVAL);
    assert_int_equal(
        strata_plan_bind_callable(f.b, STRATA_PLAN_JOIN, k_slow, 0),
        STRATA_EINVAL);
    assert_int_equal(strata_plan_bind_partition(f.b, "y", "rows", "", 0, 4),
                     STRATA_EINVAL);
    assert_int_equal(
        strata_plan_bind_partition(f.b, "y", "rows", "1", SIZE_MAX, 1),
        STRATA_EINVAL);
    assert_non_null(strstr(strata_errmsg(), "overflows"));
    /* Binding a partition again replaces it: out of range is then refused
     * at submission (the first binding does not win), and binding it back
     * makes the plan run again. */
    assert_int_equal(
        strata_plan_bind_partition(f.b, "y", "rows", "1", WORDS * 4, 4), 0);
    j = (struct job){f.p, f.b};
    expect_run_error(f.w, &j, "partition '1'", "outside resource 'y'");
    assert_int_equal(strata_plan_bind_partition(f.b, "y", "rows", "1", HALF * 4,
                                                (WORDS - HALF) * 4),
                     0);
    assert_int_equal(strata_worker_run(f.w, run_plan, NULL, &j), STRATA_OK);
    assert_int_equal(strata_plan_bindings_destroy(NULL), STRATA_OK);
    pipe_end(&f);
}

#ifndef PLAN_DATA_DIR
#define PLAN_DATA_DIR "."
#endif

static char *slurp_data(const char *name, size_t *len)
{
    char path[512];
    FILE *f;
    char *buf;
    long n;

    snprintf(path, sizeof(path), "%s/%s", PLAN_DATA_DIR, name);
    f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    n = ftell(f);
    rewind(f);
    buf = malloc((size_t)n);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_run_pipeline_in_dependency_order),
        cmocka_unit_test(test_plan_run_reserved_callbacks),
        cmocka_unit_test(test_plan_run_wide_join_merges_tokens),
        cmocka_unit_test(test_plan_run_submit_errors_name_the_invocation),
    };

    return cmocka_run_group_tests(tests, group_setup, NULL);
}
