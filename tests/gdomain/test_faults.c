/*
 * Global domain allocation under faults, at each phase and on each node:
 * a node process killed (-9) before the allocation, a chip killed before
 * it, a failure or a death inside PREPARE_EXPORT or IMPORT, on a forked
 * node and on a remote one, and a remote node's session killed. In every
 * case the allocation fails with the error that happened (STRATA_EPEER
 * for a death, the failing point's error otherwise), ABORT has released
 * every prepared window everywhere (no process below the test maps a
 * window, no window segment is left in /dev/shm, including segments named
 * for a node that died), no node ever sees the failed domain, and the
 * worker allocates and uses the next domain on the processes that are
 * left.
 *
 * The binary runs twice (CMakeLists.txt). By default the nodes answer
 * the phases themselves and members map lazily (domain/global/gnode.c): the
 * points are in the node process (window.prepare where it names windows,
 * gnode.import, gnode.release), armed by a node task there, and a member
 * that cannot map (window.import in its ADOPT) fails the node's view
 * lookup instead; a domain nobody uses is allocated and freed while a
 * member chip is stopped. As gdomain_faults_exchange, with
 * STRATA_DOMAIN_EXCHANGE=1, the members exchange descriptors inside the
 * phases: the points (window.prepare, window.import, window.release) are
 * armed inside one chip's own process by a kernel submitted through a
 * node task, so the other chips stay healthy.
 *
 * The warm cases do it after a domain on every node, so that without the
 * exchange the L4 sends PREPARE_EXPORT, IMPORT and COMMIT at once
 * (domain/global/gdomain_batch.c): the same failures inside that one
 * round trip must leave the same nothing behind.
 *
 * Remote processes are armed from the daemon's environment (STRATA_FAULT),
 * which its sessions and every chip of theirs inherit: each fails (or
 * dies) at its first hit.
 */
#define _GNU_SOURCE
#include "gd_kit.h"

#include "base/env.h"
#include "base/fault.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define COUNT 128
#define WINDOW 4096

static strata_callable k_arm, o_arm;

/* Members exchange descriptors (STRATA_DOMAIN_EXCHANGE=1), or not. */
static bool exchange;

/* By phase: PREPARE_EXPORT, IMPORT, ABORT; the members' own points. */
static const char *const chip_points[3] = {"window.prepare", "window.import",
                                           "window.release"};
static const char *const node_points[3] = {"window.prepare", "gnode.import",
                                           "gnode.release"};

/* The point a phase fails at in this run's mode. */
static const char *point(int phase)
{
    return (exchange ? chip_points : node_points)[phase % 3];
}

/* s0 point index, s1 action, s2 nth: arms it in this chip only. */
static strata_err arm_kernel(strata_chip *chip, const strata_args *a)
{
    (void)chip;
    base_fault_arm(chip_points[strata_args_scalar(a, 0) % 3],
                   (long)strata_args_scalar(a, 2),
                   (int)strata_args_scalar(a, 1));
    return STRATA_OK;
}

/* Node side: s0 chip, s1 point, s2 action, s3 nth, s4 1: in the chip
 * even where the phases do not reach it (its ADOPT). */
static strata_err arm_orch(strata_orch *o, const strata_args *args, void *user)
{
    strata_args *a = NULL;
    strata_err e;

    (void)user;
    if (strata_args_scalar(args, 4) == 2) {
        /* In the node process, in either mode: it dies inside IMPORT,
         * after its members made their windows. */
        base_fault_arm("gnode.import_any", (long)strata_args_scalar(args, 3),
                       (int)strata_args_scalar(args, 2));
        return STRATA_OK;
    }
    if (!exchange && strata_args_scalar(args, 4) == 0) {
        /* Here, in the node process, which answers the phases. */
        base_fault_arm(node_points[strata_args_scalar(args, 1) % 3],
                       (long)strata_args_scalar(args, 3),
                       (int)strata_args_scalar(args, 2));
        return STRATA_OK;
    }
    gd_try(strata_args_create(&a));
    e = STRATA_OK;
    for (size_t i = 1; i < 4 && e == STRATA_OK; i++)
        e = strata_args_add_scalar(a, strata_args_scalar(args, i));
    if (e == STRATA_OK)
        e = strata_orch_submit_next_level(o, k_arm, a,
                                          (int)strata_args_scalar(args, 0));
    strata_args_destroy(a);
    return e;
}

static int setup(void **state)
{
    if (gd_setup(state) != 0)
        return -1;
    if (strata_register_kernel("gd.t.arm", arm_kernel, &k_arm) != STRATA_OK ||
        strata_register_orch("gd.t.arm", arm_orch, &o_arm) != STRATA_OK)
        return -1;
    /* Orphaned chips of a killed node become ours, so the test can see
     * them die and reap them. */
    return prctl(PR_SET_CHILD_SUBREAPER, 1) == 0 ? 0 : -1;
}

/* ---- one faulty allocation, then the next one ------------------------- */

enum how {
    KILL_NODE,    /* kill -9 the victim node's process first */
    KILL_CHIP,    /* kill -9 the victim chip first */
    KILL_SESSION, /* kill -9 the remote node's session process first */
    ARM,          /* arm points[point] with action in the victim chip */
    FROM_ENV,     /* the remote chips were armed by the daemon's env */
};

struct fault {
    enum how how;
    int node, chip;    /* the victim */
    int point;         /* 0 prepare, 1 import (ARM) */
    bool session_dies; /* FROM_ENV: the remote session process dies */
    bool in_node;      /* ARM: in the node process, whatever the mode */
    bool warm;         /* every node of doomed made a domain before: the
                          L4 sends it the whole transaction at once */
    int action;        /* BASE_FAULT_FAIL or BASE_FAULT_KILL (ARM) */
    pid_t victim;      /* the process to kill (KILL_*) */
    struct gd_spec doomed, next;
    strata_err alloc;
    char msg[STRATA_ERRMSG_MAX];
    double took;
    size_t maps_after, shm_after;
    strata_global_domain *g, *before_g, *next_g;
    uint64_t before_id;
    strata_buffer *out, *q;
    pid_t node_pids[GD_MAX_NODES + 4];
    size_t num_node_pids;
    /* The processes that die with the victim: its own descendants, orphans
     * of ours once it dies, then the victim. */
    testutil_pids dead;
};

/* Whether pid has exited, as its parent's pidfd will say: every thread
 * of it gone. A zombie leader is not enough: under ThreadSanitizer a
 * process has a second thread, and until that one ends the parent's
 * pidfd is not readable and the death not seen (a race this test lost
 * now and then under load). */
static bool victim_dead(void *arg)
{
    pid_t pid = *(pid_t *)arg;
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    bool dead;

    if (fd < 0)
        return errno == ESRCH;
    dead = poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP));
    close(fd);
    return dead;
}

/* Whether every process that dies with the victim has exited (a zombie
 * maps nothing): an orphaned chip of a dead node goes on mapping its
 * windows until it sees its parent gone, which on a busy machine can be
 * after the allocation returns. */
static bool dead_exited(void *arg)
{
    struct fault *f = arg;

    for (size_t i = 0; i < f->dead.n; i++)
        if (!victim_dead(&f->dead.pid[i]))
            return false;
    return true;
}

static strata_err fault_orch(strata_orch *o, const strata_args *args,
                             void *user)
{
    struct fault *f = user;
    struct gd_spec tiny;
    double t0;

    (void)args;
    /* An allocation that works: its id bounds the failed one's. */
    gd_spec_init(&tiny, "before", 64);
    gd_spec_member(&tiny, 0, 0);
    for (size_t i = 0; f->warm && i < f->doomed.spec.num_members; i++) {
        int node = f->doomed.spec.members[i].node_worker_id;
        bool seen = false;

        for (size_t k = 0; k < tiny.spec.num_members; k++)
            seen |= tiny.spec.members[k].node_worker_id == node;
        if (!seen)
            gd_spec_member(&tiny, node, 0);
    }
    gd_try(strata_orch_allocate_global_domain(o, &tiny.spec, &f->before_g));
    f->before_id = strata_global_domain_id(f->before_g);
    gd_try(strata_global_domain_release(f->before_g));
    if (f->how == ARM) {
        uint64_t sc[5] = {(uint64_t)f->chip, (uint64_t)f->point,
                          (uint64_t)f->action, 1, f->in_node ? 2 : 0};

        gd_try(strata_orch_scope_begin(o));
        gd_try(gd_node_task(o, f->node, o_arm, NULL, 0, 0, STRATA_IN, sc, 5));
        gd_try(strata_orch_scope_end(o));
    } else if (f->how != FROM_ENV) {
        if (kill(f->victim, SIGKILL) != 0)
            return STRATA_ESYS;
        if (!testutil_wait_until(victim_dead, &f->victim, 5.0))
            return STRATA_ETIMEDOUT;
    }
    t0 = testutil_now();
    f->alloc = strata_orch_allocate_global_domain(o, &f->doomed.spec, &f->g);
    f->took = testutil_now() - t0;
    snprintf(f->msg, sizeof(f->msg), "%s", strata_errmsg());
    /* A death's orphans are not the allocation's to wait for: the count
     * below is of what the survivors map, once the dead are gone. */
    if (f->alloc == STRATA_EPEER && f->dead.n &&
        !testutil_wait_until(dead_exited, f, 10.0)) {
        strata_errmsg_set("the victim's processes still run 10 s on");
        return STRATA_ETIMEDOUT;
    }
    /* ABORT is over when the allocation returns: nothing may be left. */
    f->maps_after = gd_window_maps_below() - gd_domain_maps_below(f->before_id);
    /* A member's death marks the control page of the domain before it,
     * released but freed only at the fence: that one goes there. */
    f->shm_after =
        gd_shm_windows(f->node_pids, f->num_node_pids) -
        gd_shm_domain_windows(f->node_pids, f->num_node_pids, f->before_id);
    return STRATA_OK;
}

/* The next domain on what is left: it works, and no node saw the failed
 * one (every id between the last good one and this one is unknown). */
static strata_err next_orch(strata_orch *o, const strata_args *args, void *user)
{
    struct fault *f = user;
    uint64_t id;

    (void)args;
    gd_try(strata_orch_allocate_global_domain(o, &f->next.spec, &f->next_g));
    id = strata_global_domain_id(f->next_g);
    gd_try(strata_orch_scope_begin(o));
    gd_try(gd_submit_allreduce(o, &f->next, id, f->out, COUNT, 31, 1));
    gd_try(strata_orch_scope_end(o));
    for (uint64_t k = f->before_id + 1; k < id; k++) {
        const struct gd_query *r = strata_buffer_data(f->q);

        gd_try(strata_orch_scope_begin(o));
        gd_try(gd_submit_query(o, &f->next, k, f->q));
        gd_try(strata_orch_scope_end(o));
        for (size_t i = 0; i < f->next.spec.num_members; i++)
            if (r[i].get_err != STRATA_ENOENT) {
                strata_errmsg_set("slot %zu sees the failed domain %llu: %s", i,
                                  (unsigned long long)k,
                                  strata_errname((strata_err)r[i].get_err));
                return STRATA_EIO;
            }
    }
    return STRATA_OK;
}

static void record_nodes(struct fault *f, strata_worker *w, size_t forked,
                         const struct gd_daemon *d)
{
    f->num_node_pids = 0;
    for (size_t i = 0; i < forked; i++)
        f->node_pids[f->num_node_pids++] = strata_worker_node_pid(w, (int)i);
    if (d)
        f->num_node_pids +=
            gd_daemon_sessions(d, f->node_pids + f->num_node_pids, 4);
    /* Lazily mapped windows are named after the L4, this process. */
    f->node_pids[f->num_node_pids++] = getpid();
}

/* Runs f on an L4 of `forked` forked nodes (chips each) and the remote
 * node of d (if any, 2 chips), then the next allocation. */
static void fault_case(struct fault *f, size_t forked, size_t chips,
                       const struct gd_daemon *d, strata_err want,
                       const char *needle)
{
    testutil_snapshot before;
    const struct gd_daemon *ds[1] = {d};
    strata_worker *w = NULL;
    char leak[256] = "";
    size_t n;

    testutil_snapshot_take(&before);
    gd_ok(gd_l4_start(forked, chips, ds, d ? 1 : 0, 2, &w));
    record_nodes(f, w, forked, d);
    n = f->next.spec.num_members;
    gd_ok(strata_worker_create_buffer(w, n * COUNT * 4, &f->out));
    gd_ok(strata_worker_create_buffer(w, n * sizeof(struct gd_query), &f->q));
    if (f->how == KILL_NODE || (f->how == ARM && f->action == BASE_FAULT_KILL &&
                                (!exchange || f->in_node))) {
        f->victim = strata_worker_node_pid(w, f->node);
        f->dead.n = gd_descendants(f->victim, f->dead.pid, 63);
        f->dead.pid[f->dead.n++] = f->victim;
    } else if (f->how == KILL_CHIP) {
        pid_t kids[32];

        assert_true(gd_descendants(strata_worker_node_pid(w, f->node), kids,
                                   32) >= (size_t)f->chip + 1);
        /* Chips are forked in id order, before sub workers. */
        f->victim = kids[f->chip];
    } else if (f->how == KILL_SESSION || f->session_dies) {
        assert_int_equal(gd_daemon_sessions(d, &f->victim, 1), 1);
        /* Its chips are orphans of ours once it dies. */
        f->dead.n = gd_descendants(f->victim, f->dead.pid, 63);
        f->dead.pid[f->dead.n++] = f->victim;
    }
    gd_ok(strata_worker_run(w, fault_orch, NULL, f));
    print_message("%s: %s after %.3f s: %s\n", f->doomed.spec.name,
                  strata_errname(f->alloc), f->took, f->msg);
    if (f->alloc != want)
        fail_msg("allocation: %s, want %s (%s)", strata_errname(f->alloc),
                 strata_errname(want), f->msg);
    gd_assert_contains(f->msg, needle);
    if (f->took > 3.0)
        fail_msg("the failed allocation took %.3f s", f->took);
    /* A leak is reported at the end: the rest still has to work. */
    if (f->maps_after || f->shm_after)
        snprintf(leak, sizeof(leak),
                 "after the failed allocation's ABORT: %zu window mappings "
                 "and %zu window segments left",
                 f->maps_after, f->shm_after);
    if (f->dead.n)
        assert_true(testutil_wait_until(testutil_pids_gone, &f->dead, 10.0));
    gd_ok(strata_worker_run(w, next_orch, NULL, f));
    assert_int_equal(gd_check_allreduce(f->out, n, COUNT, 31), 0);
    assert_true(strata_global_domain_freed(f->next_g));
    assert_int_equal(gd_window_maps_below(), 0);
    if (!leak[0]) /* a leaked segment stays until its node is gone */
        assert_int_equal(gd_shm_windows(f->node_pids, f->num_node_pids), 0);
    gd_destroy(w, f->how == ARM && f->action == BASE_FAULT_FAIL ? STRATA_OK
                                                                : STRATA_EPEER);
    if (d)
        assert_true(gd_daemon_idle(d, 10.0));
    testutil_assert_clean_within(&before, 5.0);
    if (leak[0])
        fail_msg("%s", leak);
}

/* ---- deaths before the allocation ------------------------------------ */

static void test_gd_faults_kill_node_before_alloc_epeer(void **state)
{
    (void)state;
    static struct fault f;

    memset(&f, 0, sizeof(f));
    f.how = KILL_NODE;
    f.node = 1;
    gd_spec_init(&f.doomed, "node-killed", WINDOW);
    gd_spec_grid(&f.doomed, 0, 3, 2);
    gd_spec_init(&f.next, "survivors", WINDOW);
    gd_spec_grid(&f.next, 0, 1, 2);
    gd_spec_grid(&f.next, 2, 1, 2);
    fault_case(&f, 3, 2, NULL, STRATA_EPEER, "node 1");
}

static void test_gd_faults_kill_chip_before_alloc_epeer(void **state)
{
    (void)state;
    static struct fault f;

    memset(&f, 0, sizeof(f));
    f.how = KILL_CHIP;
    f.node = 0;
    f.chip = 1;
    gd_spec_init(&f.doomed, "chip-killed", WINDOW);
    gd_spec_grid(&f.doomed, 0, 2, 2);
    gd_spec_init(&f.next, "survivors", WINDOW);
    gd_spec_member(&f.next, 0, 0);
    gd_spec_grid(&f.next, 1, 1, 2);
    fault_case(&f, 2, 2, NULL, STRATA_EPEER, "node 0");
}

/* A chip that died before its node's first global domain, and is no
 * member, blocks nothing: COMM_INIT leaves it out. */
struct bystander {
    struct gd_spec s;
    strata_global_domain *g;
    strata_buffer *out;
};

static strata_err bystander_orch(strata_orch *o, const strata_args *args,
                                 void *user)
{
    struct bystander *b = user;

    (void)args;
    gd_try(strata_orch_allocate_global_domain(o, &b->s.spec, &b->g));
    gd_try(strata_orch_scope_begin(o));
    gd_try(gd_submit_allreduce(o, &b->s, strata_global_domain_id(b->g), b->out,
                               COUNT, 17, 1));
    return strata_orch_scope_end(o);
}

static void test_gd_faults_dead_non_member_chip_blocks_nothing(void **state)
{
    static struct bystander b;
    testutil_snapshot before;
    strata_worker *w = NULL;
    pid_t kids[32];

    (void)state;
    testutil_snapshot_take(&before);
    memset(&b, 0, sizeof(b));
    gd_ok(gd_l4_start(2, 2, NULL, 0, 0, &w));
    assert_true(gd_descendants(strata_worker_node_pid(w, 1), kids, 32) >= 2);
    assert_int_equal(kill(kids[1], SIGKILL), 0); /* chip 1 of node 1 */
    assert_true(testutil_wait_until(victim_dead, &kids[1], 5.0));
    gd_spec_init(&b.s, "bystander", WINDOW);
    gd_spec_grid(&b.s, 0, 1, 2);
    gd_spec_member(&b.s, 1, 0);
    gd_ok(strata_worker_create_buffer(w, 3 * COUNT * 4, &b.out));
    for (int i = 0; i < 2; i++) { /* and again, COMM_INIT done */
        gd_ok(strata_worker_run(w, bystander_orch, NULL, &b));
        assert_int_equal(gd_check_allreduce(b.out, 3, COUNT, 17), 0);
    }
    gd_destroy(w, STRATA_EPEER);
    testutil_assert_clean_within(&before, 5.0);
}

/* ---- a chip killed or failing inside a phase, on either node ------------ */

static void arm_case_at(int node, int point_, int action, bool warm)
{
    static struct fault f;
    char name[48];

    memset(&f, 0, sizeof(f));
    f.warm = warm;
    f.how = ARM;
    f.node = node;
    f.chip = 1;
    f.point = point_;
    f.action = action;
    snprintf(name, sizeof(name), "%s-%s-node%d", point(point_),
             action == BASE_FAULT_KILL ? "kill" : "fail", node);
    gd_spec_init(&f.doomed, name, WINDOW);
    gd_spec_grid(&f.doomed, 0, 2, 2);
    gd_spec_init(&f.next, "next", WINDOW);
    if (action == BASE_FAULT_KILL && !exchange) {
        /* The node process died: only the other node is left. */
        gd_spec_grid(&f.next, 1 - node, 1, 2);
    } else if (action == BASE_FAULT_KILL) {
        /* Without the dead chip. */
        for (int n = 0; n < 2; n++)
            for (int c = 0; c < 2; c++)
                if (n != node || c != 1)
                    gd_spec_member(&f.next, n, c);
    } else {
        gd_spec_grid(&f.next, 0, 2, 2); /* the same members again */
    }
    fault_case(&f, 2, 2, NULL,
               action == BASE_FAULT_KILL ? STRATA_EPEER : STRATA_EIO,
               action == BASE_FAULT_KILL ? "node" : point(point_));
}

static void arm_case(int node, int point_, int action)
{
    arm_case_at(node, point_, action, false);
}

/* The same, where each node made a domain before: without the exchange
 * the L4 then sends PREPARE_EXPORT, IMPORT and COMMIT at once
 * (domain/global/gdomain_batch.c), and a failure in any of them must
 * leave what a failure between waited-for phases leaves. */
static void test_gd_faults_warm_prepare_fail_node1_eio(void **state)
{
    (void)state;
    arm_case_at(1, 0, BASE_FAULT_FAIL, true);
}

static void test_gd_faults_warm_import_fail_node0_eio(void **state)
{
    (void)state;
    arm_case_at(0, 1, BASE_FAULT_FAIL, true);
}

static void test_gd_faults_warm_import_fail_node1_eio(void **state)
{
    (void)state;
    arm_case_at(1, 1, BASE_FAULT_FAIL, true);
}

static void test_gd_faults_warm_prepare_kill_node0_epeer(void **state)
{
    (void)state;
    arm_case_at(0, 0, BASE_FAULT_KILL, true);
}

static void test_gd_faults_warm_import_kill_node1_epeer(void **state)
{
    (void)state;
    arm_case_at(1, 1, BASE_FAULT_KILL, true);
}

/* The node process itself dies inside IMPORT, after its members made
 * their windows: with the exchange those are named after the node, and
 * the L4 must drop them (no node is left to). */
static void test_gd_faults_import_node_process_killed_epeer(void **state)
{
    static struct fault f;

    (void)state;
    memset(&f, 0, sizeof(f));
    f.how = ARM;
    f.in_node = true;
    f.node = 1;
    f.point = 1;
    f.action = BASE_FAULT_KILL;
    gd_spec_init(&f.doomed, "node-dies-in-import", WINDOW);
    gd_spec_grid(&f.doomed, 0, 2, 2);
    gd_spec_init(&f.next, "next", WINDOW);
    gd_spec_grid(&f.next, 0, 1, 2);
    fault_case(&f, 2, 2, NULL, STRATA_EPEER, "node");
}

/* ---- a failed ABORT poisons the worker ---------------------------------- */

static strata_err poison_orch(strata_orch *o, const strata_args *args,
                              void *user)
{
    struct gd_spec *s = user;
    strata_global_domain *g = NULL;
    /* Node 0 (its chip 1) cannot release; node 1 (its chip 0) fails the
     * import, so the ABORT that follows fails on node 0. */
    uint64_t rel[5] = {1, 2, BASE_FAULT_FAIL, 1, 0};
    uint64_t imp[5] = {0, 1, BASE_FAULT_FAIL, 1, 0};

    (void)args;
    gd_try(strata_orch_scope_begin(o));
    gd_try(gd_node_task(o, 0, o_arm, NULL, 0, 0, STRATA_IN, rel, 5));
    gd_try(gd_node_task(o, 1, o_arm, NULL, 0, 0, STRATA_IN, imp, 5));
    gd_try(strata_orch_scope_end(o));
    return strata_orch_allocate_global_domain(o, &s->spec, &g);
}

static strata_err nothing_orch(strata_orch *o, const strata_args *args,
                               void *user)
{
    (void)o;
    (void)args;
    (void)user;
    return STRATA_OK;
}

/* A domain over s's members, made and freed: every node is warm. */
static strata_err warm_orch(strata_orch *o, const strata_args *args, void *user)
{
    struct gd_spec *s = user;
    strata_global_domain *g = NULL;

    (void)args;
    gd_try(strata_orch_allocate_global_domain(o, &s->spec, &g));
    return strata_global_domain_release(g);
}

static void test_gd_faults_failed_abort_poisons_worker(void **state)
{
    testutil_snapshot before;
    strata_worker *w = NULL;
    static struct gd_spec s;

    (void)state;
    testutil_snapshot_take(&before);
    gd_ok(gd_l4_start(2, 2, NULL, 0, 0, &w));
    gd_spec_init(&s, "poison", WINDOW);
    gd_spec_grid(&s, 0, 2, 2);
    assert_int_equal(strata_worker_run(w, poison_orch, NULL, &s), STRATA_EIO);
    gd_assert_contains(strata_errmsg(), point(1));
    /* The worker refuses new runs, and still closes cleanly. */
    assert_int_equal(strata_worker_run(w, nothing_orch, NULL, NULL),
                     STRATA_ESTATE);
    gd_assert_contains(strata_errmsg(), "poisoned");
    gd_destroy(w, STRATA_OK);
    testutil_assert_clean(&before);
}

/* The same after a domain on both nodes: the failed ABORT follows a
 * transaction sent at once, in which node 0 committed. */
static void test_gd_faults_warm_failed_abort_poisons_worker(void **state)
{
    testutil_snapshot before;
    strata_worker *w = NULL;
    static struct gd_spec s;

    (void)state;
    testutil_snapshot_take(&before);
    gd_ok(gd_l4_start(2, 2, NULL, 0, 0, &w));
    gd_spec_init(&s, "poison", WINDOW);
    gd_spec_grid(&s, 0, 2, 2);
    gd_ok(strata_worker_run(w, warm_orch, NULL, &s));
    assert_int_equal(strata_worker_run(w, poison_orch, NULL, &s), STRATA_EIO);
    gd_assert_contains(strata_errmsg(), point(1));
    assert_int_equal(strata_worker_run(w, nothing_orch, NULL, NULL),
                     STRATA_ESTATE);
    gd_assert_contains(strata_errmsg(), "poisoned");
    gd_destroy(w, STRATA_OK);
    testutil_assert_clean(&before);
}

/* Node 0 cannot release; the domain is left to the run's fence. */
static strata_err fence_release_fails_orch(strata_orch *o,
                                           const strata_args *args, void *user)
{
    struct gd_spec *s = user;
    strata_global_domain *g = NULL;
    uint64_t rel[5] = {1, 2, BASE_FAULT_FAIL, 1, 0};

    (void)args;
    gd_try(strata_orch_scope_begin(o));
    gd_try(gd_node_task(o, 0, o_arm, NULL, 0, 0, STRATA_IN, rel, 5));
    gd_try(strata_orch_scope_end(o));
    return strata_orch_allocate_global_domain(o, &s->spec, &g);
}

/* An ABORT that fails at the fence's release poisons the worker as one
 * that fails at allocation does (the fence's answers were not even read
 * before: a hostile-node tester's find). */
static void test_gd_faults_failed_fence_release_poisons_worker(void **state)
{
    testutil_snapshot before;
    strata_worker *w = NULL;
    static struct gd_spec s;
    strata_err err;

    (void)state;
    testutil_snapshot_take(&before);
    gd_ok(gd_l4_start(2, 2, NULL, 0, 0, &w));
    gd_spec_init(&s, "poison-at-fence", WINDOW);
    gd_spec_grid(&s, 0, 2, 2);
    err = strata_worker_run(w, fence_release_fails_orch, NULL, &s);
    print_message("  the run: %s\n", strata_errname(err));
    assert_int_equal(strata_worker_run(w, nothing_orch, NULL, NULL),
                     STRATA_ESTATE);
    gd_assert_contains(strata_errmsg(), "poisoned");
    gd_destroy(w, STRATA_OK);
    testutil_assert_clean(&before);
}

static void test_gd_faults_prepare_fail_node0_eio(void **state)
{
    (void)state;
    arm_case(0, 0, BASE_FAULT_FAIL);
}

static void test_gd_faults_prepare_fail_node1_eio(void **state)
{
    (void)state;
    arm_case(1, 0, BASE_FAULT_FAIL);
}

static void test_gd_faults_import_fail_node0_eio(void **state)
{
    (void)state;
    arm_case(0, 1, BASE_FAULT_FAIL);
}

static void test_gd_faults_import_fail_node1_eio(void **state)
{
    (void)state;
    arm_case(1, 1, BASE_FAULT_FAIL);
}

static void test_gd_faults_prepare_kill_node0_epeer(void **state)
{
    (void)state;
    arm_case(0, 0, BASE_FAULT_KILL);
}

static void test_gd_faults_prepare_kill_node1_epeer(void **state)
{
    (void)state;
    arm_case(1, 0, BASE_FAULT_KILL);
}

static void test_gd_faults_import_kill_node0_epeer(void **state)
{
    (void)state;
    arm_case(0, 1, BASE_FAULT_KILL);
}

static void test_gd_faults_import_kill_node1_epeer(void **state)
{
    (void)state;
    arm_case(1, 1, BASE_FAULT_KILL);
}

/* ---- the remote node ------------------------------------------------------
 */

/* Every remote chip fails (or dies) at its first hit of the point. */
static void remote_case(const char *fault, bool kill_action, strata_err want,
                        const char *needle)
{
    static struct fault f;
    struct gd_daemon d;

    memset(&f, 0, sizeof(f));
    f.how = FROM_ENV;
    /* Without the exchange the session answers IMPORT itself. */
    f.session_dies = kill_action && !exchange;
    assert_int_equal(gd_daemon_start(&d, NULL, fault), 0);
    gd_spec_init(&f.doomed, fault, WINDOW);
    gd_spec_grid(&f.doomed, 0, 2, 2); /* node 1 is remote */
    gd_spec_init(&f.next, "next", WINDOW);
    if (kill_action)
        gd_spec_grid(&f.next, 0, 1, 2); /* the remote chips are dead */
    else
        gd_spec_grid(&f.next, 0, 2, 2); /* second hits pass */
    fault_case(&f, 1, 2, &d, want, needle);
    assert_int_equal(gd_daemon_stop(&d), 0);
}

/* STRATA_FAULT for phase's point, nth 1, failing or killing. */
static const char *fault_env(int phase, bool kill_action)
{
    static char env[64];

    snprintf(env, sizeof(env), "%s:1%s", point(phase),
             kill_action ? ":kill" : "");
    return env;
}

static void test_gd_faults_remote_prepare_fail_eio(void **state)
{
    (void)state;
    remote_case(fault_env(0, false), false, STRATA_EIO, point(0));
}

static void test_gd_faults_remote_import_fail_eio(void **state)
{
    (void)state;
    remote_case(fault_env(1, false), false, STRATA_EIO, point(1));
}

static void test_gd_faults_remote_import_kill_epeer(void **state)
{
    (void)state;
    remote_case(fault_env(1, true), true, STRATA_EPEER, "node 1");
}

static void test_gd_faults_kill_session_before_alloc_epeer(void **state)
{
    (void)state;
    static struct fault f;
    struct gd_daemon d;

    memset(&f, 0, sizeof(f));
    f.how = KILL_SESSION;
    f.node = 1;
    assert_int_equal(gd_daemon_start(&d, NULL, NULL), 0);
    gd_spec_init(&f.doomed, "session-killed", WINDOW);
    gd_spec_grid(&f.doomed, 0, 2, 2);
    gd_spec_init(&f.next, "survivors", WINDOW);
    gd_spec_grid(&f.next, 0, 1, 2);
    fault_case(&f, 1, 2, &d, STRATA_EPEER, "node 1");
    assert_int_equal(gd_daemon_stop(&d), 0);
}

/* ---- members that map lazily (not with the exchange) --------------------- */

/* The next domain, over both nodes' two chips, works and leaves nothing
 * mapped; then w goes and the suite's leak check runs. */
static void next_then_end(strata_worker *w, struct fault *f, const char *name,
                          const testutil_snapshot *before)
{
    gd_spec_init(&f->next, name, WINDOW);
    gd_spec_grid(&f->next, 0, 2, 2);
    gd_ok(strata_worker_create_buffer(w, 4 * COUNT * 4, &f->out));
    if (!f->q)
        gd_ok(
            strata_worker_create_buffer(w, 4 * sizeof(struct gd_query), &f->q));
    gd_ok(strata_worker_run(w, next_orch, NULL, f));
    assert_int_equal(gd_check_allreduce(f->out, 4, COUNT, 31), 0);
    assert_int_equal(gd_window_maps_below(), 0);
    gd_destroy(w, STRATA_OK);
    testutil_assert_clean_within(before, 5.0);
}

struct unmapped {
    struct gd_spec s;
    strata_global_domain *g;
    strata_buffer *q;
};

/* Chip 1 of node 0 fails its ADOPT; the domain is allocated (no member
 * is asked before its first task) and each node's view lookup says what
 * happened there. */
static strata_err unmapped_orch(strata_orch *o, const strata_args *args,
                                void *user)
{
    struct unmapped *u = user;
    uint64_t sc[5] = {1, 1, BASE_FAULT_FAIL, 1, 1}; /* in the chip */

    (void)args;
    gd_try(strata_orch_scope_begin(o));
    gd_try(gd_node_task(o, 0, o_arm, NULL, 0, 0, STRATA_IN, sc, 5));
    gd_try(strata_orch_scope_end(o));
    gd_try(strata_orch_allocate_global_domain(o, &u->s.spec, &u->g));
    gd_try(strata_orch_scope_begin(o));
    gd_try(gd_submit_query(o, &u->s, strata_global_domain_id(u->g), u->q));
    return strata_orch_scope_end(o);
}

static void test_gd_faults_member_cannot_map_view_eio(void **state)
{
    testutil_snapshot before;
    static struct unmapped u;
    static struct fault f;
    strata_worker *w = NULL;
    const struct gd_query *r;

    (void)state;
    if (exchange)
        skip(); /* members map inside IMPORT: arm_case covers it */
    testutil_snapshot_take(&before);
    memset(&u, 0, sizeof(u));
    gd_ok(gd_l4_start(2, 2, NULL, 0, 0, &w));
    gd_spec_init(&u.s, "unmapped", WINDOW);
    gd_spec_grid(&u.s, 0, 2, 2);
    gd_ok(strata_worker_create_buffer(w, 4 * sizeof(struct gd_query), &u.q));
    gd_ok(strata_worker_run(w, unmapped_orch, NULL, &u));
    r = strata_buffer_data(u.q);
    for (size_t rank = 0; rank < 4; rank++) {
        const struct gd_query *x = &r[gd_slot_of(&u.s, rank)];
        strata_err want = rank < 2 ? STRATA_EIO : STRATA_OK;

        if (x->get_err != (uint32_t)want)
            fail_msg("rank %zu: view lookup %s, want %s", rank,
                     strata_errname((strata_err)x->get_err),
                     strata_errname(want));
    }
    /* Freed at the fence, the failed member's part too; nothing left. */
    assert_true(strata_global_domain_freed(u.g));
    assert_int_equal(gd_window_maps_below(), 0);
    assert_int_equal(gd_shm_windows_below(NULL, 0), 0);
    /* The same members again: the point fired once. */
    memset(&f, 0, sizeof(f));
    f.q = u.q;
    next_then_end(w, &f, "again", &before);
}

struct idle {
    struct gd_spec s;
    strata_global_domain *g;
    bool freed_in_fn;
};

static strata_err idle_orch(strata_orch *o, const strata_args *args, void *user)
{
    struct idle *d = user;

    (void)args;
    gd_try(strata_orch_allocate_global_domain(o, &d->s.spec, &d->g));
    d->freed_in_fn = strata_global_domain_freed(d->g);
    return strata_global_domain_release(d->g);
}

/* A domain no kernel uses needs nothing of its members: with one member
 * chip stopped (SIGSTOP), domains are still allocated and freed, none of
 * them leaves a segment, and once the chip goes on it serves the next
 * domain. With the exchange, the first PREPARE_EXPORT would wait for the
 * stopped chip for ever. */
static void test_gd_faults_unused_domain_needs_no_member_ok(void **state)
{
    testutil_snapshot before;
    static struct idle d;
    static struct fault f;
    strata_worker *w = NULL;
    pid_t kids[32];

    (void)state;
    if (exchange)
        skip();
    testutil_snapshot_take(&before);
    memset(&d, 0, sizeof(d));
    memset(&f, 0, sizeof(f));
    gd_ok(gd_l4_start(2, 2, NULL, 0, 0, &w));
    gd_spec_init(&d.s, "idle", WINDOW);
    gd_spec_grid(&d.s, 0, 2, 2);
    /* COMM_INIT (once per worker) does reach every chip. */
    gd_ok(strata_worker_run(w, idle_orch, NULL, &d));
    assert_true(gd_descendants(strata_worker_node_pid(w, 1), kids, 32) >= 2);
    assert_int_equal(kill(kids[0], SIGSTOP), 0);
    for (int i = 0; i < 3; i++) {
        double t0 = testutil_now();

        gd_ok(strata_worker_run(w, idle_orch, NULL, &d));
        assert_false(d.freed_in_fn);
        assert_true(strata_global_domain_freed(d.g));
        if (testutil_now() - t0 > 3.0)
            fail_msg("cycle %d took %.3f s", i, testutil_now() - t0);
        assert_int_equal(gd_shm_windows_below(NULL, 0), 0);
    }
    assert_int_equal(kill(kids[0], SIGCONT), 0);
    next_then_end(w, &f, "after", &before);
}

struct died {
    struct gd_spec s, on1; /* the domain; its member on node 1 */
    strata_worker *w;
    strata_global_domain *g;
    strata_buffer *q;
    size_t shm_used;
    testutil_pids dead; /* a node and the chips it had */
};

/* Node 1's member maps the domain (creating every rank's window), then
 * node 1 is killed; the run's fence releases the domain. */
static strata_err died_orch(strata_orch *o, const strata_args *args, void *user)
{
    struct died *d = user;
    pid_t node = strata_worker_node_pid(d->w, 1);

    (void)args;
    gd_try(strata_orch_allocate_global_domain(o, &d->s.spec, &d->g));
    gd_try(strata_orch_scope_begin(o));
    gd_try(gd_submit_query(o, &d->on1, strata_global_domain_id(d->g), d->q));
    gd_try(strata_orch_scope_end(o));
    d->shm_used = gd_shm_windows_below(NULL, 0);
    d->dead.n = gd_descendants(node, d->dead.pid, 63);
    d->dead.pid[d->dead.n++] = node;
    if (kill(node, SIGKILL) != 0)
        return STRATA_ESYS;
    return testutil_wait_until(victim_dead, &node, 5.0) ? STRATA_OK
                                                        : STRATA_ETIMEDOUT;
}

/* A node that dies after its members mapped a domain leaves windows no
 * node will unlink (the other node's member never mapped): the L4 drops
 * them when the release finds the node dead. */
static void test_gd_faults_node_dies_after_use_no_segment_left(void **state)
{
    testutil_snapshot before;
    static struct died d;
    strata_err run;

    (void)state;
    testutil_snapshot_take(&before);
    memset(&d, 0, sizeof(d));
    gd_ok(gd_l4_start(2, 1, NULL, 0, 0, &d.w));
    gd_spec_init(&d.s, "died", WINDOW);
    gd_spec_grid(&d.s, 0, 2, 1);
    gd_spec_init(&d.on1, "died", WINDOW);
    gd_spec_member(&d.on1, 1, 0);
    gd_ok(strata_worker_create_buffer(d.w, sizeof(struct gd_query), &d.q));
    run = strata_worker_run(d.w, died_orch, NULL, &d);
    if (run != STRATA_OK && run != STRATA_EPEER)
        fail_msg("run: %s (%s)", strata_errname(run), strata_errmsg());
    /* The member did create them (with the exchange, COMMIT unlinked
     * the names already). */
    assert_true(exchange || d.shm_used > 0);
    assert_true(strata_global_domain_freed(d.g));
    assert_int_equal(gd_shm_windows_below(NULL, 0), 0);
    assert_true(testutil_wait_until(testutil_pids_gone, &d.dead, 5.0));
    gd_destroy(d.w, STRATA_EPEER);
    testutil_assert_clean_within(&before, 5.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        gd_test(test_gd_faults_kill_node_before_alloc_epeer),
        gd_test(test_gd_faults_kill_chip_before_alloc_epeer),
        gd_test(test_gd_faults_dead_non_member_chip_blocks_nothing),
        gd_test(test_gd_faults_failed_abort_poisons_worker),
        gd_test(test_gd_faults_prepare_fail_node0_eio),
        gd_test(test_gd_faults_prepare_fail_node1_eio),
        gd_test(test_gd_faults_import_fail_node0_eio),
        gd_test(test_gd_faults_import_fail_node1_eio),
        gd_test(test_gd_faults_prepare_kill_node0_epeer),
        gd_test(test_gd_faults_prepare_kill_node1_epeer),
        gd_test(test_gd_faults_import_kill_node0_epeer),
        gd_test(test_gd_faults_import_kill_node1_epeer),
        gd_test(test_gd_faults_warm_prepare_fail_node1_eio),
        gd_test(test_gd_faults_warm_import_fail_node0_eio),
        gd_test(test_gd_faults_warm_import_fail_node1_eio),
        gd_test(test_gd_faults_warm_prepare_kill_node0_epeer),
        gd_test(test_gd_faults_warm_import_kill_node1_epeer),
        gd_test(test_gd_faults_warm_failed_abort_poisons_worker),
        gd_test(test_gd_faults_failed_fence_release_poisons_worker),
        gd_test(test_gd_faults_import_node_process_killed_epeer),
        gd_test(test_gd_faults_remote_prepare_fail_eio),
        gd_test(test_gd_faults_remote_import_fail_eio),
        gd_test(test_gd_faults_remote_import_kill_epeer),
        gd_test(test_gd_faults_kill_session_before_alloc_epeer),
        gd_test(test_gd_faults_member_cannot_map_view_eio),
        gd_test(test_gd_faults_unused_domain_needs_no_member_ok),
        gd_test(test_gd_faults_node_dies_after_use_no_segment_left),
    };

    exchange = base_env_flag("STRATA_DOMAIN_EXCHANGE");
    return cmocka_run_group_tests(tests, setup, NULL);
}
