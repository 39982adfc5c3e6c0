/*
 * Runs on an L4 worker with forked L3 nodes: dependent work across nodes,
 * buffers by identity, unmapping a released buffer in the nodes, task
 * failure and poison, bad submits, submit + wait, back-to-back runs.
 */
#include "l4_kit.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define N 64

/* The /dev/shm name ("strata-...") of the one segment this process created
 * since before, into out. */
static void new_segment(const testutil_snapshot *before, char *out, size_t cap)
{
    static testutil_snapshot now;
    char prefix[64];
    size_t found = 0;
    snprintf(prefix, sizeof(prefix), "strata-%u-%d-b", (unsigned)getuid(),
             (int)getpid());
    testutil_snapshot_take(&now);
    for (size_t i = 0; i < now.num_shm; i++) {
        bool had = false;
        for (size_t j = 0; j < before->num_shm; j++)
            had |= strcmp(before->shm[j], now.shm[i]) == 0;
        if (had || strncmp(now.shm[i], prefix, strlen(prefix)) != 0)
            continue;
        snprintf(out, cap, "/%s", now.shm[i]);
        found++;
    }
    assert_int_equal(found, 1);
}

static bool shm_exists(const char *segment)
{
    char path[300];
    struct stat st;
    snprintf(path, sizeof(path), "/dev/shm%s", segment);
    return stat(path, &st) == 0;
}

/* ---- dependent work across nodes */

struct dep_ctx {
    strata_buffer *a, *b, *c;
};

/* node 0 fills a[0, N/2) slowly; node 1 reads it into b (depends on node
 * 0); node 0 reads b into c[N/2, N) (depends on node 1); node 1 fills
 * a[N/2, N) meanwhile (independent of everything before). */
static strata_err dep_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)args;
    struct dep_ctx *d = user;
    it_try(l4_fill(o, 0, d->a, 0, N / 2, 1000, 20000));
    it_try(l4_scale(o, 1, d->a, 0, d->b, 0, N / 2, 3, 1));
    it_try(l4_scale(o, 0, d->b, 0, d->c, N / 2, N / 2, 2, 0));
    return l4_fill(o, 1, d->a, N / 2, N / 2, 5000, 0);
}

static void test_l4_runs_dependent_across_nodes_values(void **state)
{
    (void)state;
    testutil_snapshot before;
    struct dep_ctx d;
    strata_worker *w = NULL;
    testutil_snapshot_take(&before);
    it_ok(l4_start(2, 2, &w));
    it_ok(strata_worker_create_buffer(w, N * 4, &d.a));
    it_ok(strata_worker_create_buffer(w, N * 4, &d.b));
    it_ok(strata_worker_create_buffer(w, N * 4, &d.c));
    for (int round = 0; round < 3; round++) {
        memset(strata_buffer_data(d.a), 0, N * 4);
        memset(strata_buffer_data(d.b), 0, N * 4);
        memset(strata_buffer_data(d.c), 0, N * 4);
        it_ok(strata_worker_run(w, dep_orch, NULL, &d));
        for (uint32_t i = 0; i < N / 2; i++) {
            assert_int_equal(it_u32(d.a)[i], 1000 + i);
            assert_int_equal(it_u32(d.a)[N / 2 + i], 5000 + i);
            assert_int_equal(it_u32(d.b)[i], (1000 + i) * 3 + 1);
            assert_int_equal(it_u32(d.b)[N / 2 + i], 0);
            assert_int_equal(it_u32(d.c)[i], 0);
            assert_int_equal(it_u32(d.c)[N / 2 + i], ((1000 + i) * 3 + 1) * 2);
        }
    }
    it_ok(it_worker_destroy(w));
    testutil_assert_clean(&before);
}

/* ---- buffers flow by identity */

struct id_ctx {
    strata_buffer *flags, *big, *small;
};

static strata_err identity_orch(strata_orch *o, const strata_args *args,
                                void *user)
{
    (void)args;
    struct id_ctx *c = user;
    strata_args *a = NULL;
    it_try(strata_args_create(&a));
    /* The node checks it sees the L4's buffers with their sizes and the
     * offsets given here. */
    strata_err e = it_add_u32(a, c->big, 24, 8, STRATA_IN);
    if (e == STRATA_OK)
        e = it_add_u32(a, c->small, 0, 4, STRATA_NO_DEP);
    uint64_t s[4] = {4096 * 4, 24 * 4, 4 * 4, 0};
    for (size_t i = 0; e == STRATA_OK && i < 4; i++)
        e = strata_args_add_scalar(a, s[i]);
    if (e == STRATA_OK)
        e = strata_orch_submit_next_level(o, l4_o_check, a, 0);
    strata_args_destroy(a);
    it_try(e);
    struct l4_t t = {c->flags, 0, 4, STRATA_NO_DEP};
    return l4_forward(o, 1, L4_K_HANDSHAKE, 1, &t, 1, NULL, 0);
}

static void test_l4_runs_buffers_by_identity(void **state)
{
    (void)state;
    static testutil_snapshot before, pre_buf;
    struct id_ctx c;
    strata_worker *w = NULL;
    strata_run *run = NULL;
    char seg[128];
    pid_t chips[8];
    testutil_snapshot_take(&before);
    it_ok(l4_start(2, 2, &w));
    it_ok(strata_worker_create_buffer(w, 4096 * 4, &c.big));
    it_ok(strata_worker_create_buffer(w, 4 * 4, &c.small));
    testutil_snapshot_take(&pre_buf);
    it_ok(strata_worker_create_buffer(w, 4 * 4, &c.flags));
    new_segment(&pre_buf, seg, sizeof(seg));
    uint32_t *f = it_u32(c.flags);
    it_ok(strata_worker_submit(w, identity_orch, NULL, &c, &run));
    /* The kernel on node 1's chip 1 writes into the L4's buffer while the
     * run goes on, and reads what the L4 writes: one memory, no copies. */
    assert_true(testutil_wait_u32(&f[0], 1, IT_WAIT_S));
    it_expect(STRATA_ETIMEDOUT, strata_run_wait(run, 0.0));
    pid_t node = strata_worker_node_pid(w, 1);
    assert_true(l4_maps_has(node, seg));
    size_t nc = l4_children_of(node, chips, 8);
    assert_int_equal(nc, 2);
    bool some_chip_maps = false;
    for (size_t i = 0; i < nc; i++)
        some_chip_maps |= l4_maps_has(chips[i], seg);
    assert_true(some_chip_maps);
    /* node 0 never saw the flags buffer */
    assert_false(l4_maps_has(strata_worker_node_pid(w, 0), seg));
    testutil_store_u32(&f[2], 20);
    testutil_store_u32(&f[1], 1);
    it_ok(strata_run_wait(run, 10.0));
    strata_run_free(run);
    assert_int_equal(f[3], 41);
    it_ok(it_worker_destroy(w));
    testutil_assert_clean(&before);
}

/* ---- a released buffer is unmapped in the nodes and their chips */

struct fill_ctx {
    strata_buffer *b;
    size_t nodes;
};

/* Fills b across every node (and so every chip of each). */
static strata_err fill_all_orch(strata_orch *o, const strata_args *args,
                                void *user)
{
    (void)args;
    struct fill_ctx *c = user;
    size_t n = strata_buffer_size(c->b) / 4, per = n / c->nodes;
    for (size_t i = 0; i < c->nodes; i++)
        it_try(l4_fill(o, (int)i, c->b, i * per, per, (uint32_t)(i * per), 0));
    return STRATA_OK;
}

/* Creates buffer "gone" before or after init, runs on it across every node,
 * releases it, runs again: no node or chip still maps it. */
static void released_unmapped(bool before_init)
{
    static testutil_snapshot before, pre_buf;
    strata_worker *w = NULL;
    strata_buffer *gone = NULL, *keep = NULL;
    char seg[128];
    pid_t pids[2 + 2 * 2];
    size_t np = 0;
    testutil_snapshot_take(&before);
    if (before_init)
        it_ok(l4_create(2, 2, 30.0, &w));
    else
        it_ok(l4_start(2, 2, &w));
    it_ok(strata_worker_create_buffer(w, 16 * 4, &keep));
    testutil_snapshot_take(&pre_buf);
    it_ok(strata_worker_create_buffer(w, 16 * 4, &gone));
    new_segment(&pre_buf, seg, sizeof(seg));
    if (before_init)
        it_ok(strata_worker_init(w));
    for (int i = 0; i < 2; i++) {
        pid_t node = strata_worker_node_pid(w, i);
        pids[np++] = node;
        size_t nc = l4_children_of(node, &pids[np], 2);
        assert_int_equal(nc, 2);
        np += nc;
    }
    struct fill_ctx c = {gone, 2};
    it_ok(strata_worker_run(w, fill_all_orch, NULL, &c));
    for (uint32_t i = 0; i < 16; i++)
        assert_int_equal(it_u32(gone)[i], i);
    for (size_t i = 0; i < np; i++)
        if (!l4_maps_has(pids[i], seg))
            fail_msg("pid %d (%s %zu) does not map %s", (int)pids[i],
                     i % 3 ? "chip of node" : "node", i / 3, seg);
    it_ok(strata_buffer_release(gone));
    assert_false(shm_exists(seg));
    c.b = keep;
    it_ok(strata_worker_run(w, fill_all_orch, NULL, &c));
    char still[256] = "";
    for (size_t i = 0; i < np; i++)
        if (l4_maps_has(pids[i], seg))
            snprintf(still + strlen(still), sizeof(still) - strlen(still),
                     " pid %d (%s %zu);", (int)pids[i],
                     i % 3 ? "chip of node" : "node", i / 3);
    if (still[0])
        fail_msg("%s still mapped after release and the next run by%s", seg,
                 still);
    assert_false(shm_exists(seg));
    assert_int_equal(it_u32(keep)[15], 15);
    it_ok(it_worker_destroy(w));
    testutil_assert_clean(&before);
}

static void test_l4_runs_released_buffer_unmapped_in_nodes(void **state)
{
    (void)state;
    released_unmapped(false);
}

/* A buffer created before strata_worker_init is mapped in the L4 when the
 * nodes fork (and in each node when it forks its chips): released, it must
 * not stay mapped through that inherited mapping either. */
static void
test_l4_runs_released_prestart_buffer_unmapped_in_nodes(void **state)
{
    (void)state;
    released_unmapped(true);
}

/* ---- failure chain */

struct fail_ctx {
    strata_buffer *a, *b, *c, *d, *e;
    bool fail;
};

/* T1 on node 1 fails (kernel boom on its chip 1); T2 (node 0) reads T1's
 * output and T4 (node 1) reads T2's: both poisoned. T3 is independent. */
static strata_err fail_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)args;
    struct fail_ctx *c = user;
    struct l4_t t[2] = {{c->a, 0, 4, STRATA_OUT}, {c->e, 0, 2, STRATA_NO_DEP}};
    if (c->fail)
        it_try(l4_forward(o, 1, L4_K_BOOM, 1, t, 2, NULL, 0));
    else
        it_try(l4_fill(o, 1, c->a, 0, 4, 7, 0));
    it_try(l4_scale(o, 0, c->a, 0, c->b, 0, 4, 1, 100));
    it_try(l4_fill(o, 0, c->c, 0, 4, 60, 0));
    it_try(l4_scale(o, 1, c->b, 0, c->d, 0, 4, 1, 1000));
    /* T1 fails only now, with every dependent submitted, so they are
     * poisoned through their edges (test_l4_runs_late_dependent_of_failure_
     * poisoned covers a dependent submitted after the failure). */
    testutil_store_u32(it_u32(c->e), 1);
    return STRATA_OK;
}

static void test_l4_runs_kernel_failure_etask_poisons(void **state)
{
    (void)state;
    testutil_snapshot before;
    struct fail_ctx c = {.fail = true};
    strata_worker *w = NULL;
    char msg[STRATA_ERRMSG_MAX];
    testutil_snapshot_take(&before);
    it_ok(l4_start(2, 2, &w));
    it_ok(strata_worker_create_buffer(w, 16, &c.a));
    it_ok(strata_worker_create_buffer(w, 16, &c.b));
    it_ok(strata_worker_create_buffer(w, 16, &c.c));
    it_ok(strata_worker_create_buffer(w, 16, &c.d));
    it_ok(strata_worker_create_buffer(w, 8, &c.e));
    strata_err e = strata_worker_run(w, fail_orch, NULL, &c);
    snprintf(msg, sizeof(msg), "%s", strata_errmsg());
    print_message("failed run: %s: %s\n", strata_errname(e), msg);
    it_expect(STRATA_ETASK, e);
    l4_assert_contains(msg, "'l4.forward'"); /* the orch callable */
    l4_assert_contains(msg, "node 1");
    l4_assert_contains(msg, "'l4.boom'"); /* the kernel */
    l4_assert_contains(msg, "chip 1");
    l4_assert_contains(msg, "boom from chip 1"); /* the kernel's message */
    for (uint32_t i = 0; i < 4; i++) {
        assert_int_equal(it_u32(c.b)[i], 0); /* poisoned */
        assert_int_equal(it_u32(c.d)[i], 0); /* poisoned transitively */
        assert_int_equal(it_u32(c.c)[i], 60 + i);
    }
    /* Usable for the next run, on both nodes. */
    c.fail = false;
    it_ok(strata_worker_run(w, fail_orch, NULL, &c));
    for (uint32_t i = 0; i < 4; i++) {
        assert_int_equal(it_u32(c.b)[i], 7 + i + 100);
        assert_int_equal(it_u32(c.d)[i], 7 + i + 1100);
    }
    it_ok(it_worker_destroy(w));
    testutil_assert_clean(&before);
}

/* T1 fails on node 1; T2 (node 0) reads its output and is poisoned. Once
 * both have finished, the orch fn submits T4, which reads what T2 should
 * have written: T4 depends on a failed (poisoned) task too, and must not
 * run on the stale data. */
static strata_err late_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)args;
    struct fail_ctx *c = user;
    struct l4_t t[2] = {{c->a, 0, 4, STRATA_OUT}, {c->e, 0, 2, STRATA_NO_DEP}};
    it_try(l4_forward(o, 1, L4_K_BOOM, 1, t, 2, NULL, 0));
    it_try(l4_scale(o, 0, c->a, 0, c->b, 0, 4, 1, 100));
    /* Let T1 fail, and give its failure and T2's poison time to be
     * harvested. */
    testutil_store_u32(it_u32(c->e), 1);
    if (!testutil_wait_u32(&it_u32(c->e)[1], 1, IT_WAIT_S))
        return STRATA_ETIMEDOUT;
    testutil_sleep(0.2);
    return l4_scale(o, 1, c->b, 0, c->d, 0, 4, 1, 1000);
}

static void test_l4_runs_late_dependent_of_failure_poisoned(void **state)
{
    (void)state;
    testutil_snapshot before;
    struct fail_ctx c = {.fail = true};
    strata_worker *w = NULL;
    char msg[STRATA_ERRMSG_MAX];
    testutil_snapshot_take(&before);
    it_ok(l4_start(2, 2, &w));
    it_ok(strata_worker_create_buffer(w, 16, &c.a));
    it_ok(strata_worker_create_buffer(w, 16, &c.b));
    it_ok(strata_worker_create_buffer(w, 16, &c.c));
    it_ok(strata_worker_create_buffer(w, 16, &c.d));
    it_ok(strata_worker_create_buffer(w, 8, &c.e));
    strata_err e = strata_worker_run(w, late_orch, NULL, &c);
    snprintf(msg, sizeof(msg), "%s", strata_errmsg());
    it_expect(STRATA_ETASK, e);
    l4_assert_contains(msg, "boom from chip 1");
    for (uint32_t i = 0; i < 4; i++) {
        assert_int_equal(it_u32(c.b)[i], 0); /* poisoned */
        if (it_u32(c.d)[i] != 0)
            fail_msg("d[%u] = %u: T4 ran on the output of a poisoned task", i,
                     it_u32(c.d)[i]);
    }
    it_ok(it_worker_destroy(w));
    testutil_assert_clean(&before);
}

/* ---- bad submits */

struct bad_ctx {
    strata_buffer *b;
    int which;
    strata_err got[4];
    char msg[4][STRATA_ERRMSG_MAX];
};

static strata_err bad_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)args;
    struct bad_ctx *c = user;
    strata_args *a = NULL;
    it_try(it_args1(c->b, 0, 4, STRATA_OUT, &a));
    it_try(strata_args_add_scalar(a, 1));
    it_try(strata_args_add_scalar(a, 0));
    if (c->which == 0) {
        /* A kernel to a node, an orch callable to the sub queue. */
        c->got[0] = strata_orch_submit_next_level(o, it_k_fill, a, 0);
        snprintf(c->msg[0], sizeof(c->msg[0]), "%s", strata_errmsg());
        c->got[1] = strata_orch_submit_sub(o, l4_o_fill, a);
        snprintf(c->msg[1], sizeof(c->msg[1]), "%s", strata_errmsg());
        c->got[2] = strata_orch_submit_next_level(o, it_s_scale, a, 1);
        snprintf(c->msg[2], sizeof(c->msg[2]), "%s", strata_errmsg());
    } else {
        c->got[0] = strata_orch_submit_next_level(o, l4_o_fill, a, 2);
        snprintf(c->msg[0], sizeof(c->msg[0]), "%s", strata_errmsg());
        c->got[1] = strata_orch_submit_next_level(o, l4_o_fill, a, -1);
        snprintf(c->msg[1], sizeof(c->msg[1]), "%s", strata_errmsg());
        c->got[2] = strata_orch_submit_next_level(o, l4_o_fill, a, 1000);
        snprintf(c->msg[2], sizeof(c->msg[2]), "%s", strata_errmsg());
    }
    /* Nothing was submitted; a good task still goes. */
    strata_err e = strata_orch_submit_next_level(o, l4_o_fill, a, 1);
    strata_args_destroy(a);
    it_try(e);
    return c->got[0];
}

static void bad_submit(int which, const char *const *needles)
{
    testutil_snapshot before;
    struct bad_ctx c = {.which = which};
    strata_worker *w = NULL;
    testutil_snapshot_take(&before);
    it_ok(l4_start(2, 1, &w));
    it_ok(strata_worker_create_buffer(w, 16, &c.b));
    it_expect(STRATA_EINVAL, strata_worker_run(w, bad_orch, NULL, &c));
    for (int i = 0; i < 3; i++) {
        print_message("bad submit %d: %s: %s\n", i, strata_errname(c.got[i]),
                      c.msg[i]);
        it_expect(STRATA_EINVAL, c.got[i]);
        if (needles[i])
            l4_assert_contains(c.msg[i], needles[i]);
    }
    assert_int_equal(it_u32(c.b)[3], 4); /* the good task ran */
    it_ok(it_worker_destroy(w));
    testutil_assert_clean(&before);
}

static void test_l4_runs_wrong_callable_kind_einval(void **state)
{
    (void)state;
    static const char *const needles[3] = {"'it.fill'", "sub",
                                           "'it.scale_sub'"};
    bad_submit(0, needles);
}

/* An L4's targets are nodes: the message says so. */
static void test_l4_runs_unknown_node_einval(void **state)
{
    (void)state;
    static const char *const needles[3] = {"node 2", "node -1", "node 1000"};
    bad_submit(1, needles);
}

/* ---- submit + wait with a timeout */

struct flag_ctx {
    strata_buffer *flag, *out;
};

static strata_err flag_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)args;
    struct flag_ctx *c = user;
    struct l4_t t[2] = {{c->flag, 0, 1, STRATA_NO_DEP},
                        {c->out, 0, 1, STRATA_OUT}};
    return l4_forward(o, 0, L4_K_WAIT_FLAG, 1, t, 2, NULL, 0);
}

static void test_l4_runs_submit_wait_timeout_then_ok(void **state)
{
    (void)state;
    testutil_snapshot before;
    struct flag_ctx c;
    strata_worker *w = NULL;
    strata_run *run = NULL;
    testutil_snapshot_take(&before);
    it_ok(l4_start(2, 2, &w));
    it_ok(strata_worker_create_buffer(w, 4, &c.flag));
    it_ok(strata_worker_create_buffer(w, 4, &c.out));
    it_ok(strata_worker_submit(w, flag_orch, NULL, &c, &run));
    double t0 = testutil_now();
    it_expect(STRATA_ETIMEDOUT, strata_run_wait(run, 0.2));
    double took = testutil_now() - t0;
    assert_true(took >= 0.15 && took < 2.0);
    it_expect(STRATA_ETIMEDOUT, strata_run_wait(run, 0.0));
    assert_int_equal(it_u32(c.out)[0], 0);
    /* A buffer a running task names cannot be released. */
    it_expect(STRATA_ESTATE, strata_buffer_release(c.out));
    testutil_store_u32(it_u32(c.flag), 1); /* through the buffer */
    it_ok(strata_run_wait(run, 10.0));
    it_ok(strata_run_wait(run, 0.0)); /* the same result again */
    strata_run_free(run);
    assert_int_equal(it_u32(c.out)[0], 77);
    it_ok(strata_buffer_release(c.out));
    it_ok(it_worker_destroy(w));
    testutil_assert_clean(&before);
}

/* ---- a group across nodes */

/* One group of l4.forward tasks: node 0's chip 1 waits for a flag that
 * node 1's chip 0 sets, so both must be running at once. */
static strata_err group_orch(strata_orch *o, const strata_args *args,
                             void *user)
{
    (void)args;
    struct flag_ctx *c = user;
    strata_args *a[2] = {NULL, NULL};
    static const int nodes[2] = {0, 1};
    strata_err e = strata_args_create(&a[0]);
    if (e == STRATA_OK)
        e = strata_args_create(&a[1]);
    /* node 0: wait_flag(flag NO_DEP, out OUT) on chip 1 */
    if (e == STRATA_OK)
        e = it_add_u32(a[0], c->flag, 0, 1, STRATA_NO_DEP);
    if (e == STRATA_OK)
        e = it_add_u32(a[0], c->out, 0, 1, STRATA_OUT);
    if (e == STRATA_OK)
        e = strata_args_add_scalar(a[0], L4_K_WAIT_FLAG);
    if (e == STRATA_OK)
        e = strata_args_add_scalar(a[0], 1);
    /* node 1: fill(flag[0] = 1) on chip 0, after 20 ms */
    if (e == STRATA_OK)
        e = it_add_u32(a[1], c->flag, 0, 1, STRATA_NO_DEP);
    uint64_t s[4] = {L4_K_FILL, 0, 1, 20000};
    for (size_t i = 0; e == STRATA_OK && i < 4; i++)
        e = strata_args_add_scalar(a[1], s[i]);
    if (e == STRATA_OK)
        e = strata_orch_submit_next_level_group(
            o, l4_o_forward, (const strata_args *const *)a, nodes, 2);
    strata_args_destroy(a[0]);
    strata_args_destroy(a[1]);
    return e;
}

static void test_l4_runs_group_across_nodes_ok(void **state)
{
    (void)state;
    testutil_snapshot before;
    struct flag_ctx c;
    strata_worker *w = NULL;
    testutil_snapshot_take(&before);
    it_ok(l4_start(2, 2, &w));
    it_ok(strata_worker_create_buffer(w, 4, &c.flag));
    it_ok(strata_worker_create_buffer(w, 4, &c.out));
    it_ok(strata_worker_run(w, group_orch, NULL, &c));
    assert_int_equal(it_u32(c.flag)[0], 1);
    assert_int_equal(it_u32(c.out)[0], 77);
    it_ok(it_worker_destroy(w));
    testutil_assert_clean(&before);
}

/* ---- back-to-back runs */

struct b2b_ctx {
    strata_buffer *a, *b;
    uint32_t i;
};

static strata_err b2b_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)args;
    struct b2b_ctx *c = user;
    it_try(l4_fill(o, 0, c->a, 0, N, c->i, 0));
    return l4_scale(o, 1, c->a, 0, c->b, 0, N, 2, c->i);
}

static void test_l4_runs_back_to_back_100(void **state)
{
    (void)state;
    testutil_snapshot before;
    struct b2b_ctx c;
    strata_worker *w = NULL;
    testutil_snapshot_take(&before);
    it_ok(l4_start(2, 2, &w));
    it_ok(strata_worker_create_buffer(w, N * 4, &c.a));
    it_ok(strata_worker_create_buffer(w, N * 4, &c.b));
    double t0 = testutil_now();
    for (c.i = 0; c.i < 100; c.i++) {
        it_ok(strata_worker_run(w, b2b_orch, NULL, &c));
        for (uint32_t j = 0; j < N; j++)
            if (it_u32(c.b)[j] != (c.i + j) * 2 + c.i)
                fail_msg("run %u: b[%u] = %u, want %u", c.i, j, it_u32(c.b)[j],
                         (c.i + j) * 2 + c.i);
    }
    print_message("100 L4 runs (2 nodes x 2 chips, 2 dependent node tasks "
                  "each): %.1f ms per run\n",
                  (testutil_now() - t0) * 10.0);
    it_ok(it_worker_destroy(w));
    testutil_assert_clean(&before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_l4_runs_dependent_across_nodes_values,
                                  it_teardown),
        cmocka_unit_test_teardown(test_l4_runs_buffers_by_identity,
                                  it_teardown),
        cmocka_unit_test_teardown(
            test_l4_runs_released_buffer_unmapped_in_nodes, it_teardown),
        cmocka_unit_test_teardown(
            test_l4_runs_released_prestart_buffer_unmapped_in_nodes,
            it_teardown),
        cmocka_unit_test_teardown(test_l4_runs_kernel_failure_etask_poisons,
                                  it_teardown),
        cmocka_unit_test_teardown(
            test_l4_runs_late_dependent_of_failure_poisoned, it_teardown),
        cmocka_unit_test_teardown(test_l4_runs_wrong_callable_kind_einval,
                                  it_teardown),
        cmocka_unit_test_teardown(test_l4_runs_unknown_node_einval,
                                  it_teardown),
        cmocka_unit_test_teardown(test_l4_runs_submit_wait_timeout_then_ok,
                                  it_teardown),
        cmocka_unit_test_teardown(test_l4_runs_group_across_nodes_ok,
                                  it_teardown),
        cmocka_unit_test_teardown(test_l4_runs_back_to_back_100, it_teardown),
    };
    return cmocka_run_group_tests(tests, l4_setup, NULL);
}
