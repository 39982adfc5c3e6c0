/*
 * Open MPI groups (strata_worker_add_mpirun_worker_group): a real mpirun
 * --oversubscribe on this host starts real strata-rank processes that dial
 * back to the L4 in this test process over TLS 1.3. Groups of 2 and 4
 * ranks run checked vector adds; a SIGKILLed rank fails its work with
 * STRATA_EPEER naming it; a rank that never reports ready (fault point
 * mpirank.dial.<r>:stop) and a rank with another key (mpirank.key.<r>)
 * fail init within the deadline; every test ends with no mpirun, no rank,
 * no /dev/shm name of a rank and no key folder left.
 */
#include "base/fault.h"
#include "mt_env.h"
#include "mt_procs.h"
#include "remote_kit.h"
#include "worker/mpidomain_stats.h"
#include "worker/reclaim.h"

#include <strata/domain.h>

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_RANKS MT_MAX_RANKS

static const int chips2[2] = {0, 1};

/* Nothing of a group is left: no rank of ours, none of the ranks' names
 * in /dev/shm (pids as seen while they ran), no key folder, and nothing
 * testutil tracks. */
static void assert_no_group_left(const testutil_snapshot *before,
                                 const pid_t seen[MAX_RANKS])
{
    assert_int_equal(mt_launch_procs(getpid()), 0);
    for (size_t i = 0; i < MAX_RANKS; i++) {
        if (seen[i] > 0) {
            if (mt_running(seen[i]))
                fail_msg("rank %zu (pid %d) still runs", i, (int)seen[i]);
            if (mt_shm_of(seen[i]))
                fail_msg("a /dev/shm name of rank %zu (pid %d) is left", i,
                         (int)seen[i]);
        }
    }
    assert_false(mt_key_dir_left());
    assert_false(mt_ompi_dir_of(getpid()));
    testutil_assert_clean(before);
}

/* ---- groups ----------------------------------------------------------- */

static void group_spec(strata_mpi_group_spec *s, size_t ranks, size_t nchips,
                       const char **args, size_t nargs)
{
    static const char *modules[1] = {RT_MODULE_PATH};

    memset(s, 0, sizeof(*s));
    s->ranks = ranks;
    s->chip_ids = chips2;
    s->num_chips = nchips;
    s->mpirun_path = MT_MPIRUN;
    s->mpirun_args = args;
    s->num_mpirun_args = nargs;
    s->rank_program = MT_RANK_PATH;
    s->modules = modules;
    s->num_modules = 1;
}

static strata_err l4_with_group(const strata_mpi_group_spec *s,
                                double startup_s, int *ids, strata_worker **out)
{
    strata_worker_config c4;
    strata_worker *w = NULL;
    strata_err err;

    strata_worker_config_init(&c4, 4);
    c4.startup_timeout_s = startup_s;
    err = strata_worker_create(&c4, &w);
    if (!err)
        err = strata_worker_add_mpirun_worker_group(w, s, ids, MAX_RANKS);
    if (!err)
        err = strata_worker_init(w);
    if (err && w) {
        char msg[STRATA_ERRMSG_MAX];

        snprintf(msg, sizeof(msg), "%s", strata_errmsg());
        if (strata_worker_destroy(w) != STRATA_OK)
            print_error("destroy: %s\n", strata_errmsg());
        strata_errmsg_set("%s", msg);
        w = NULL;
    }
    *out = w;
    return err;
}

static const char *over[1] = {"--oversubscribe"};

static void run_group(size_t ranks, size_t nchips)
{
    testutil_snapshot before;
    strata_mpi_group_spec s;
    strata_worker *w = NULL;
    int ids[MAX_RANKS];
    pid_t pids[MAX_RANKS];

    testutil_snapshot_take(&before);
    group_spec(&s, ranks, nchips, over, 1);
    it_ok(l4_with_group(&s, 60, ids, &w));
    assert_int_equal(strata_worker_num_nodes(w), ranks);
    for (size_t i = 0; i < ranks; i++)
        assert_int_equal(ids[i], (int)i);
    assert_int_equal(mt_rank_pids(pids), ranks);
    /* Each rank runs on this host: its node pid is the rank's process. */
    for (size_t i = 0; i < ranks; i++)
        assert_int_equal(strata_worker_node_pid(w, ids[i]), pids[i]);
    /* The key has done its work once every rank is in. */
    assert_false(mt_key_dir_left());
    for (uint32_t r = 0; r < 3; r++)
        it_ok(rk_add_run(w, ids, ranks, 1024 + r, 10 * r));
    /* One rank alone, and a run bigger than one DATA_CHUNK per rank. */
    it_ok(rk_add_run(w, &ids[ranks - 1], 1, 7, 3));
    it_ok(rk_add_run(w, ids, ranks, (1u << 20) / 4 + 3, 5));
    rk_destroy(w, STRATA_OK);
    assert_no_group_left(&before, pids);
}

static void test_mpi_group_two_ranks_add_ok(void **state)
{
    (void)state;
    run_group(2, 2);
}

static void test_mpi_group_four_ranks_add_ok(void **state)
{
    (void)state;
    run_group(4, 1);
}

/* A group task over the whole MPI group: one request (TASK frame) per
 * rank, whatever the group's size, and every member runs. */
struct whole_ctx {
    const int *ids;
    size_t n;
};

static strata_err whole_orch(strata_orch *o, const strata_args *args,
                             void *user)
{
    const struct whole_ctx *c = user;
    const strata_args *a[MAX_RANKS] = {NULL};

    (void)args;
    return strata_orch_submit_next_level_group(o, rk_o_noop, a, c->ids, c->n);
}

static void test_mpi_group_group_task_one_request_per_rank(void **state)
{
    testutil_snapshot before;
    strata_mpi_group_spec s;
    strata_worker *w = NULL;
    int ids[MAX_RANKS];
    pid_t pids[MAX_RANKS];
    uint64_t sent[MAX_RANKS];
    struct whole_ctx c = {.ids = ids, .n = 4};

    (void)state;
    testutil_snapshot_take(&before);
    group_spec(&s, 4, 2, over, 1);
    it_ok(l4_with_group(&s, 60, ids, &w));
    assert_int_equal(mt_rank_pids(pids), 4);
    for (uint32_t round = 1; round <= 3; round++) {
        for (size_t r = 0; r < 4; r++)
            sent[r] = worker_node_tasks_sent(w, ids[r]);
        it_ok(strata_worker_run(w, whole_orch, NULL, &c));
        for (size_t r = 0; r < 4; r++)
            assert_int_equal(worker_node_tasks_sent(w, ids[r]) - sent[r], 1);
    }
    rk_destroy(w, STRATA_OK);
    assert_no_group_left(&before, pids);
}

/* ---- a rank killed mid-task ------------------------------------------- */

static void test_mpi_group_killed_rank_epeer(void **state)
{
    testutil_snapshot before;
    strata_mpi_group_spec s;
    strata_worker *w = NULL;
    int ids[MAX_RANKS];
    pid_t pids[MAX_RANKS];
    struct rk_block c = {.ms = 60000};
    char dir[] = "/tmp/strata-mpitest-XXXXXX", mark[64];
    strata_run *run = NULL;
    strata_err err;
    double t0;

    (void)state;
    testutil_snapshot_take(&before);
    assert_non_null(mkdtemp(dir));
    snprintf(mark, sizeof(mark), "%s/started", dir);
    group_spec(&s, 2, 1, over, 1);
    it_ok(l4_with_group(&s, 60, ids, &w));
    assert_int_equal(mt_rank_pids(pids), 2);
    it_ok(strata_worker_create_buffer(w, sizeof(struct rt_span), &c.span));
    it_ok(strata_worker_create_buffer(w, strlen(mark) + 1, &c.path));
    memcpy(strata_buffer_data(c.path), mark, strlen(mark) + 1);
    c.node = ids[1];
    it_ok(strata_worker_submit(w, rk_block_orch, NULL, &c, &run));
    assert_true(testutil_wait_until(rk_file_exists, mark, 30.0));
    t0 = testutil_now();
    assert_int_equal(kill(pids[1], SIGKILL), 0);
    err = strata_run_wait(run, 60.0);
    assert_int_equal(err, STRATA_EPEER);
    rk_assert_contains(strata_errmsg(), "MPI rank 1 on ");
    /* The heartbeat bound (10 s), with room for a busy machine. */
    assert_true(testutil_now() - t0 < 20.0);
    strata_run_free(run);
    /* mpirun aborts the job: the other rank is lost soon after, and its
     * runs fail rather than hang. */
    t0 = testutil_now();
    while (rk_add_run(w, ids, 1, 4, 1) == STRATA_OK) {
        assert_true(testutil_now() - t0 < 30.0);
        testutil_sleep(0.05);
    }
    rk_assert_contains(strata_errmsg(), "MPI rank 0");
    it_ok(strata_buffer_release(c.span));
    it_ok(strata_buffer_release(c.path));
    rk_destroy(w, STRATA_EPEER);
    unlink(mark);
    rmdir(dir);
    assert_no_group_left(&before, pids);
}

/* A forked node and two groups (two mpiruns) under one L4: the groups'
 * ids follow the forked node's, and one run spans all of them. */
static void test_mpi_group_two_groups_beside_forked_node_ok(void **state)
{
    testutil_snapshot before;
    strata_mpi_group_spec s;
    strata_worker *w = NULL;
    int g1[MAX_RANKS], g2[MAX_RANKS], all[4];
    pid_t pids[MAX_RANKS];

    (void)state;
    testutil_snapshot_take(&before);
    it_ok(rk_l4_create(1, NULL, 0, &w));
    group_spec(&s, 2, 2, over, 1);
    it_ok(strata_worker_add_mpirun_worker_group(w, &s, g1, MAX_RANKS));
    group_spec(&s, 1, 2, over, 1);
    it_ok(strata_worker_add_mpirun_worker_group(w, &s, g2, MAX_RANKS));
    assert_int_equal(g1[0], 1);
    assert_int_equal(g1[1], 2);
    assert_int_equal(g2[0], 3);
    it_ok(strata_worker_init(w));
    /* Three ranks: pids keeps one per rank number, the leftover check
     * looks for every process of the launches. */
    assert_int_equal(mt_rank_pids(pids), 3);
    /* Each mpirun has a session folder of its own (Open MPI's shared one
     * races when two start at once). */
    assert_int_equal(mt_ompi_dirs_in_use(getpid()), 2);
    all[0] = 0;
    all[1] = g1[0];
    all[2] = g1[1];
    all[3] = g2[0];
    it_ok(rk_add_run(w, all, 4, 3000, 9));
    it_ok(rk_add_run(w, &g2[0], 1, 17, 2));
    rk_destroy(w, STRATA_OK);
    assert_no_group_left(&before, pids);
}

/* ---- a global domain over a group ------------------------------------- */

#define GD_COUNT 256

struct gd_ctx {
    const int *ids;
    bool part; /* over rank 1's chips only: part of the group */
    uint32_t pattern[GD_COUNT], back[GD_COUNT], back0[GD_COUNT];
};

/* Over both chips of both ranks, the whole group: the ranks gather the
 * descriptors with MPI_Allgather (ranks on this host, so the sim
 * profile's windows are shared); or (part) over rank 1's two chips, the
 * L4 path. A pattern into domain rank 3 (or 1) and rank 0, read back from
 * each. */
static strata_err gd_orch(strata_orch *o, const strata_args *args, void *user)
{
    struct gd_ctx *c = user;
    const strata_global_member all[4] = {
        {c->ids[0], 0}, {c->ids[0], 1}, {c->ids[1], 0}, {c->ids[1], 1}};
    const strata_global_member *members = c->part ? all + 2 : all;
    uint32_t last = c->part ? 1 : 3;
    const strata_comm_buffer_spec buf = {"vec", STRATA_U32, GD_COUNT,
                                         GD_COUNT * 4};
    const strata_global_domain_spec spec = {.name = "mpi_gd",
                                            .members = members,
                                            .num_members = c->part ? 2 : 4,
                                            .window_size = 4096,
                                            .buffers = &buf,
                                            .num_buffers = 1};
    strata_global_domain *g = NULL;

    (void)args;
    it_try(strata_orch_allocate_global_domain(o, &spec, &g));
    it_try(strata_orch_copy_to_global_domain(o, g, last, "vec", 0, c->pattern,
                                             sizeof(c->pattern)));
    it_try(strata_orch_copy_from_global_domain(o, g, last, "vec", 0, c->back,
                                               sizeof(c->back)));
    it_try(strata_orch_copy_to_global_domain(o, g, 0, "vec", 0, c->back,
                                             sizeof(c->back)));
    return strata_orch_copy_from_global_domain(o, g, 0, "vec", 0, c->back0,
                                               sizeof(c->back0));
}

static void test_mpi_group_global_domain_ok(void **state)
{
    testutil_snapshot before;
    strata_mpi_group_spec s;
    strata_worker *w = NULL;
    int ids[MAX_RANKS];
    pid_t pids[MAX_RANKS];
    struct gd_ctx c = {.ids = ids};

    (void)state;
    testutil_snapshot_take(&before);
    group_spec(&s, 2, 2, over, 1);
    it_ok(l4_with_group(&s, 60, ids, &w));
    assert_int_equal(mt_rank_pids(pids), 2);
    /* Two over the whole group (gathered inside it), one over part of it
     * (the L4 path), one more over the whole group. */
    for (uint32_t run = 0; run < 4; run++) {
        uint64_t gathers = worker_mpi_gathers();

        c.part = run == 2;
        for (uint32_t i = 0; i < GD_COUNT; i++)
            c.pattern[i] = 0x7e000000u + 1000 * run + i;
        memset(c.back, 0, sizeof(c.back));
        memset(c.back0, 0, sizeof(c.back0));
        it_ok(strata_worker_run(w, gd_orch, NULL, &c));
        assert_memory_equal(c.back, c.pattern, sizeof(c.pattern));
        assert_memory_equal(c.back0, c.pattern, sizeof(c.pattern));
        assert_int_equal(worker_mpi_gathers() - gathers, c.part ? 0 : 1);
    }
    rk_destroy(w, STRATA_OK);
    assert_no_group_left(&before, pids);
}

/* Rank 1 says it runs on another host (its boot id and host name, test
 * hook mpirank.otherhost.1): a sim domain over both ranks is refused at
 * PREPARE with STRATA_EINVAL naming both hosts, before any node creates
 * a window; the group itself keeps working. */
struct far_ctx {
    const int *ids;
    strata_err err;
    char msg[STRATA_ERRMSG_MAX];
};

static strata_err far_orch(strata_orch *o, const strata_args *args, void *user)
{
    struct far_ctx *c = user;
    const strata_global_member members[2] = {{c->ids[0], 0}, {c->ids[1], 0}};
    const strata_global_domain_spec spec = {.name = "mpi_far",
                                            .members = members,
                                            .num_members = 2,
                                            .window_size = 4096};
    strata_global_domain *g = NULL;

    (void)args;
    c->err = strata_orch_allocate_global_domain(o, &spec, &g);
    snprintf(c->msg, sizeof(c->msg), "%s", strata_errmsg());
    return STRATA_OK;
}

static void test_mpi_group_global_domain_other_host_einval(void **state)
{
    testutil_snapshot before;
    strata_mpi_group_spec s;
    strata_worker *w = NULL;
    int ids[MAX_RANKS];
    pid_t pids[MAX_RANKS];
    const char *args[3] = {"--oversubscribe", "-x",
                           "STRATA_FAULT=mpirank.otherhost.1:1"};
    struct far_ctx c = {.ids = ids};
    char me[256] = "";

    (void)state;
    testutil_snapshot_take(&before);
    assert_int_equal(gethostname(me, sizeof(me) - 1), 0);
    group_spec(&s, 2, 1, args, 3);
    it_ok(l4_with_group(&s, 60, ids, &w));
    assert_int_equal(mt_rank_pids(pids), 2);
    it_ok(strata_worker_run(w, far_orch, NULL, &c));
    print_message("allocate: %s\n", c.msg);
    assert_int_equal(c.err, STRATA_EINVAL);
    rk_assert_contains(c.msg, "one host");
    rk_assert_contains(c.msg, "strata-other-host-1");
    rk_assert_contains(c.msg, me);
    for (size_t i = 0; i < 2; i++)
        assert_false(mt_shm_of(pids[i]));
    /* Refused before anything went out: the ranks still serve work. */
    it_ok(rk_add_run(w, ids, 2, 1024, 1));
    rk_destroy(w, STRATA_OK);
    assert_no_group_left(&before, pids);
}

/* Rank 1 stops instead of taking part in the descriptor gather (fault
 * point mpirank.gather.1:stop): rank 0's collective deadline (2 s here)
 * ends the MPI job, the allocation fails with STRATA_EPEER, so does any
 * later work on the group's ids, and nothing of the job is left. */
/* msg names why a rank went: its own words, or mpirun's exit. */
static void said_why(const char *msg)
{
    if (!strstr(msg, "ending the MPI job") && !strstr(msg, "mpirun (pid "))
        fail_msg("no cause in \"%s\"", msg);
    assert_null(strstr(msg, "without GOODBYE"));
}

static void test_mpi_group_gather_deadline_epeer(void **state)
{
    testutil_snapshot before;
    strata_mpi_group_spec s;
    strata_worker *w = NULL;
    int ids[MAX_RANKS];
    pid_t pids[MAX_RANKS];
    const char *args[5] = {"--oversubscribe", "-x",
                           "STRATA_FAULT=mpirank.gather.1:1:stop", "-x",
                           "STRATA_MPI_COLLECTIVE_TIMEOUT_S=2"};
    struct gd_ctx c = {.ids = ids};
    uint64_t gathers;

    (void)state;
    testutil_snapshot_take(&before);
    group_spec(&s, 2, 2, args, 5);
    it_ok(l4_with_group(&s, 60, ids, &w));
    assert_int_equal(mt_rank_pids(pids), 2);
    gathers = worker_mpi_gathers();
    assert_int_equal(strata_worker_run(w, gd_orch, NULL, &c), STRATA_EPEER);
    print_message("allocate: %s\n", strata_errmsg());
    /* The ranks said why they went (rank 0: its deadline; rank 1:
     * mpirun ending the job), or mpirun's exit came first; never a bare
     * lost connection. */
    said_why(strata_errmsg());
    assert_int_equal(worker_mpi_gathers() - gathers, 1);
    assert_int_equal(rk_add_run(w, ids, 2, 64, 1), STRATA_EPEER);
    print_message("later run: %s\n", strata_errmsg());
    said_why(strata_errmsg());
    rk_destroy(w, STRATA_EPEER);
    assert_no_group_left(&before, pids);
}

/* ---- per-rank lanes ---------------------------------------------------- */

/* A long task on rank 0 holds up no work on rank 1: rank 1 serves several
 * runs while rank 0's task is still going. */
static void test_mpi_group_lanes_independent(void **state)
{
    testutil_snapshot before;
    strata_mpi_group_spec s;
    strata_worker *w = NULL;
    int ids[MAX_RANKS];
    pid_t pids[MAX_RANKS];
    struct rk_block c = {.ms = 60000};
    char dir[] = "/tmp/strata-mpitest-XXXXXX", mark[64];
    strata_run *run = NULL;

    (void)state;
    testutil_snapshot_take(&before);
    assert_non_null(mkdtemp(dir));
    snprintf(mark, sizeof(mark), "%s/started", dir);
    group_spec(&s, 2, 1, over, 1);
    it_ok(l4_with_group(&s, 60, ids, &w));
    assert_int_equal(mt_rank_pids(pids), 2);
    it_ok(strata_worker_create_buffer(w, sizeof(struct rt_span), &c.span));
    it_ok(strata_worker_create_buffer(w, strlen(mark) + 1, &c.path));
    memcpy(strata_buffer_data(c.path), mark, strlen(mark) + 1);
    c.node = ids[0];
    c.ms = 8000;
    it_ok(strata_worker_submit(w, rk_block_orch, NULL, &c, &run));
    assert_true(testutil_wait_until(rk_file_exists, mark, 30.0));
    for (uint32_t r = 0; r < 5; r++)
        it_ok(rk_add_run(w, &ids[1], 1, 4096, r));
    /* Rank 0's task is still mt_running: rank 1 did not wait for it. */
    assert_int_equal(strata_run_wait(run, 0.0), STRATA_ETIMEDOUT);
    it_ok(strata_run_wait(run, 60.0));
    strata_run_free(run);
    it_ok(strata_buffer_release(c.span));
    it_ok(strata_buffer_release(c.path));
    rk_destroy(w, STRATA_OK);
    unlink(mark);
    rmdir(dir);
    assert_no_group_left(&before, pids);
}

/* A rank that hangs (SIGSTOP) mid-task goes silent: its task fails with
 * STRATA_EPEER within the heartbeat bound, and destroy ends the job at
 * once rather than waiting for a rank that will never leave. */
static void test_mpi_group_hung_rank_epeer(void **state)
{
    testutil_snapshot before;
    strata_mpi_group_spec s;
    strata_worker *w = NULL;
    int ids[MAX_RANKS];
    pid_t pids[MAX_RANKS];
    struct rk_block c = {.ms = 60000};
    char dir[] = "/tmp/strata-mpitest-XXXXXX", mark[64];
    strata_run *run = NULL;
    double t0;

    (void)state;
    testutil_snapshot_take(&before);
    assert_non_null(mkdtemp(dir));
    snprintf(mark, sizeof(mark), "%s/started", dir);
    group_spec(&s, 2, 1, over, 1);
    it_ok(l4_with_group(&s, 60, ids, &w));
    assert_int_equal(mt_rank_pids(pids), 2);
    it_ok(strata_worker_create_buffer(w, sizeof(struct rt_span), &c.span));
    it_ok(strata_worker_create_buffer(w, strlen(mark) + 1, &c.path));
    memcpy(strata_buffer_data(c.path), mark, strlen(mark) + 1);
    c.node = ids[1];
    it_ok(strata_worker_submit(w, rk_block_orch, NULL, &c, &run));
    assert_true(testutil_wait_until(rk_file_exists, mark, 30.0));
    t0 = testutil_now();
    assert_int_equal(kill(pids[1], SIGSTOP), 0);
    assert_int_equal(strata_run_wait(run, 60.0), STRATA_EPEER);
    rk_assert_contains(strata_errmsg(), "MPI rank 1 on ");
    rk_assert_contains(strata_errmsg(), "silent");
    /* Silent after 10 s, seen on the next 1 s tick; room for a busy host. */
    assert_true(testutil_now() - t0 < 30.0);
    strata_run_free(run);
    it_ok(strata_buffer_release(c.span));
    it_ok(strata_buffer_release(c.path));
    t0 = testutil_now();
    rk_destroy(w, STRATA_OK);
    /* No wait for the hung rank to leave (that grace is 10 s): SIGTERM to
     * mpirun at once. */
    assert_true(testutil_now() - t0 < 8.0);
    unlink(mark);
    rmdir(dir);
    assert_no_group_left(&before, pids);
}

/* ---- the L4 killed ----------------------------------------------------- */

/* In a forked L4: start a group of 2, say so on fd, wait to be killed. */
_Noreturn static void l4_child(int fd)
{
    strata_mpi_group_spec s;
    strata_worker *w = NULL;
    int ids[MAX_RANKS];
    char ok;

    group_spec(&s, 2, 1, over, 1);
    ok = l4_with_group(&s, 60, ids, &w) == STRATA_OK &&
                 rk_add_run(w, ids, 2, 64, 1) == STRATA_OK
             ? '1'
             : '0';
    if (ok != '1')
        fprintf(stderr, "l4 child: %s\n", strata_errmsg());
    if (write(fd, &ok, 1) != 1)
        _exit(1);
    for (;;)
        pause();
}

/* SIGKILL of the L4 takes the whole job down: the ranks see their
 * connection go, abort the MPI job, and mpirun ends. */
static void test_mpi_group_l4_killed_ends_job(void **state)
{
    testutil_snapshot before;
    pid_t l4, pids[MAX_RANKS];

    (void)state;
    testutil_snapshot_take(&before);
    l4 = mt_fork_l4(l4_child, pids);
    assert_true(mt_launch_procs(l4) >= 3); /* mpirun, the ranks, their chips */
    mt_kill_l4_expect_gone(l4, pids, -1);
    testutil_assert_clean(&before);
}

/* ---- start-up failures ------------------------------------------------ */

static void start_fails(const char *fault, double startup_s, const char *needle)
{
    testutil_snapshot before;
    strata_mpi_group_spec s;
    strata_worker *w = NULL;
    int ids[MAX_RANKS];
    pid_t none[MAX_RANKS] = {0};
    const char *args[3] = {"--oversubscribe", "-x", fault};
    strata_err err;
    double t0;

    testutil_snapshot_take(&before);
    group_spec(&s, 2, 1, args, 3);
    t0 = testutil_now();
    err = l4_with_group(&s, startup_s, ids, &w);
    assert_int_not_equal(err, STRATA_OK);
    assert_null(w);
    print_message("init: %s\n", strata_errmsg());
    rk_assert_contains(strata_errmsg(), needle);
    /* The deadline, the rollback's grace for mpirun, and slack. */
    assert_true(testutil_now() - t0 < startup_s + 15.0);
    assert_no_group_left(&before, none);
}

/* Rank 1 stops itself before it dials: init names it at the deadline. */
static void test_mpi_group_rank_never_ready_fails_init(void **state)
{
    (void)state;
    start_fails("STRATA_FAULT=mpirank.dial.1:1:stop", 6.0,
                "MPI ranks 1 of 2 not ready within the start-up deadline");
}

/* Rank 1 presents a key of its own: the L4 refuses its handshake. */
static void test_mpi_group_wrong_key_refused(void **state)
{
    (void)state;
    start_fails("STRATA_FAULT=mpirank.key.1:1", 30.0, "refused 127.0.0.1:");
}

/* mpirun that cannot start the job ends at once: init fails then, long
 * before the start-up deadline, and says so. */
static void test_mpi_group_mpirun_exits_fails_init_early(void **state)
{
    testutil_snapshot before;
    strata_mpi_group_spec s;
    strata_worker *w = NULL;
    int ids[MAX_RANKS];
    pid_t none[MAX_RANKS] = {0};
    const char *args[2] = {"--oversubscribe", "--no-such-mpirun-option"};
    double t0;

    (void)state;
    testutil_snapshot_take(&before);
    group_spec(&s, 2, 1, args, 2);
    t0 = testutil_now();
    assert_int_equal(l4_with_group(&s, 120, ids, &w), STRATA_EPEER);
    print_message("init: %s\n", strata_errmsg());
    rk_assert_contains(strata_errmsg(), "mpirun (pid ");
    rk_assert_contains(strata_errmsg(), "exited with status");
    /* Every rank, not only the one init met first. */
    rk_assert_contains(strata_errmsg(), "ranks 0, 1 of 2 never reported ready");
    assert_true(testutil_now() - t0 < 60.0);
    assert_no_group_left(&before, none);
}

/* Every allocation of the add failing in turn: STRATA_ENOMEM, nothing
 * added, nothing leaked (ASan), and the worker still takes the group. */
static void test_mpi_group_add_enomem_adds_nothing(void **state)
{
    testutil_snapshot before;
    strata_worker_config c;
    strata_worker *w = NULL;
    strata_mpi_group_spec s;
    int ids[MAX_RANKS];
    strata_err err = STRATA_ENOMEM;
    long failed = 0;

    (void)state;
    testutil_snapshot_take(&before);
    strata_worker_config_init(&c, 4);
    it_ok(strata_worker_create(&c, &w));
    group_spec(&s, 3, 2, over, 1);
    for (long n = 1; err == STRATA_ENOMEM && n < 1000; n++) {
        base_alloc_fail_after(n);
        err = strata_worker_add_mpirun_worker_group(w, &s, ids, MAX_RANKS);
        base_alloc_fail_after(0);
        if (err == STRATA_ENOMEM) {
            assert_int_equal(strata_worker_num_nodes(w), 0);
            failed++;
        }
    }
    it_ok(err);
    assert_true(failed > 10); /* the spec's copies and every rank's node */
    assert_int_equal(strata_worker_num_nodes(w), 3);
    it_ok(strata_worker_destroy(w));
    testutil_assert_clean(&before);
}

/* ---- the spec --------------------------------------------------------- */

static void refused(strata_worker *w, const strata_mpi_group_spec *s, size_t n,
                    const char *needle)
{
    int ids[MAX_RANKS];

    assert_int_equal(strata_worker_add_mpirun_worker_group(w, s, ids, n),
                     STRATA_EINVAL);
    rk_assert_contains(strata_errmsg(), needle);
    assert_int_equal(strata_worker_num_nodes(w), 0);
}

static void test_mpi_group_bad_spec_einval(void **state)
{
    testutil_snapshot before;
    strata_worker_config c;
    strata_worker *w = NULL, *l3 = NULL;
    strata_mpi_group_spec s;
    const char *hosts[2] = {"a", "b,c"};
    const int dup[2] = {1, 1};
    int ids[MAX_RANKS];

    (void)state;
    testutil_snapshot_take(&before);
    strata_worker_config_init(&c, 4);
    it_ok(strata_worker_create(&c, &w));
    group_spec(&s, 0, 1, over, 1);
    refused(w, &s, MAX_RANKS, "ranks is 0");
    group_spec(&s, 3, 1, over, 1);
    refused(w, &s, 2, "holds 2 ids for 3 ranks");
    s.hostfile = "/nonexistent/hostfile";
    refused(w, &s, MAX_RANKS, "cannot read hostfile");
    s.hostfile = MT_RANK_PATH;
    s.hosts = hosts;
    s.num_hosts = 1;
    refused(w, &s, MAX_RANKS, "not both");
    s.hostfile = NULL;
    s.num_hosts = 2;
    refused(w, &s, MAX_RANKS,
            "hosts[1] 'b,c' is not a host name: it holds a comma");
    s.num_hosts = 1;
    s.num_mpirun_args = 0;
    refused(w, &s, MAX_RANKS,
            "1 host with 1 slot each gives 1 slot for 3 ranks");
    group_spec(&s, 2, 2, over, 1);
    s.chip_ids = dup;
    refused(w, &s, MAX_RANKS, "repeats chip 1");
    group_spec(&s, 2, 1, over, 1);
    s.mpirun_path = "/nonexistent/mpirun";
    refused(w, &s, MAX_RANKS, "cannot run mpirun /nonexistent/mpirun");
    group_spec(&s, 2, 1, over, 1);
    s.rank_program = "/nonexistent/strata-rank";
    refused(w, &s, MAX_RANKS, "cannot run the rank program");
    /* A directory has search permission, not the right to run it. */
    group_spec(&s, 2, 1, over, 1);
    s.mpirun_path = "/tmp";
    refused(w, &s, MAX_RANKS, "cannot run mpirun /tmp (not an executable");
    group_spec(&s, 2, 1, over, 1);
    s.rank_program = "/tmp";
    refused(w, &s, MAX_RANKS, "rank program /tmp (not an executable file)");
    group_spec(&s, 2, 1, over, 1);
    s.callback_port = 70000;
    refused(w, &s, MAX_RANKS, "callback_port 70000");
    /* Only a level-4 worker takes a group, and only before init. */
    strata_worker_config_init(&c, 3);
    c.chip_ids = chips2;
    c.num_chips = 1;
    it_ok(strata_worker_create(&c, &l3));
    group_spec(&s, 2, 1, over, 1);
    assert_int_equal(strata_worker_add_mpirun_worker_group(l3, &s, ids, 4),
                     STRATA_EINVAL);
    it_ok(strata_worker_destroy(l3));
    it_ok(strata_worker_init(w));
    assert_int_equal(strata_worker_add_mpirun_worker_group(w, &s, ids, 4),
                     STRATA_ESTATE);
    it_ok(strata_worker_destroy(w));
    testutil_assert_clean(&before);
}

static int setup(void **state)
{
    (void)state;
    return mt_env_setup();
}

static int teardown(void **state)
{
    (void)state;
    mt_env_teardown();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mpi_group_bad_spec_einval),
        cmocka_unit_test(test_mpi_group_add_enomem_adds_nothing),
        cmocka_unit_test(test_mpi_group_two_ranks_add_ok),
        cmocka_unit_test(test_mpi_group_four_ranks_add_ok),
        cmocka_unit_test(test_mpi_group_group_task_one_request_per_rank),
        cmocka_unit_test(test_mpi_group_two_groups_beside_forked_node_ok),
        cmocka_unit_test(test_mpi_group_lanes_independent),
        cmocka_unit_test(test_mpi_group_global_domain_ok),
        cmocka_unit_test(test_mpi_group_global_domain_other_host_einval),
        cmocka_unit_test(test_mpi_group_gather_deadline_epeer),
        cmocka_unit_test(test_mpi_group_killed_rank_epeer),
        cmocka_unit_test(test_mpi_group_hung_rank_epeer),
        cmocka_unit_test(test_mpi_group_l4_killed_ends_job),
        cmocka_unit_test(test_mpi_group_rank_never_ready_fails_init),
        cmocka_unit_test(test_mpi_group_wrong_key_refused),
        cmocka_unit_test(test_mpi_group_mpirun_exits_fails_init_early),
    };

    rk_filter_from_env();
    return cmocka_run_group_tests(tests, setup, teardown);
}
