/*
 * A member of a global domain lost while its peers wait (issue 14,
 * defect 6): four members, two chips of a forked node (ranks 0, 1) and two
 * of a remote node in a real strata-node (ranks 2, 3), wait with
 * timeout_s = -1 on a flag word of the domain that nobody adds to. Once
 * the others sleep in strata_signal_wait, one process is SIGKILLed: a
 * member chip of the remote node, one of the forked node, or the remote
 * node's whole session. Every survivor must wake with STRATA_EPEER naming
 * the domain and the lost rank, on its own node and on the other (the
 * node of a dead chip marks the domain's control page, the L4 does for a
 * dead node), the run must end with STRATA_EPEER, strata_worker_destroy
 * must return, and no window, control page or session may be left.
 * Without the fix the survivors sleep forever: the run's bounded wait
 * fails. Also (defect 7): the daemon that reaps a killed session removes
 * the windows of the global domains its members made.
 */
#define _GNU_SOURCE
#include "gd_kit.h"

#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LOST_BOUND_S 30.0 /* a loaded machine; the fix takes milliseconds */
#define LOST_N 4

static struct gd_daemon daemon_;
static uint64_t next_tag;

static int group_setup(void **state)
{
    if (gd_setup(state) != 0)
        return -1;
    return gd_daemon_start(&daemon_, NULL, NULL);
}

static int group_teardown(void **state)
{
    (void)state;
    return gd_daemon_stop(&daemon_);
}

struct lost {
    struct gd_spec s;
    strata_global_domain *g;
    uint64_t tag;
};

static strata_err lost_orch(strata_orch *o, const strata_args *args, void *user)
{
    struct lost *l = user;

    (void)args;
    gd_spec_init(&l->s, "lost", 4096);
    gd_spec_grid(&l->s, 0, 2, 2);
    gd_try(strata_orch_allocate_global_domain(o, &l->s.spec, &l->g));
    return gd_submit_wait(o, &l->s, strata_global_domain_id(l->g), 0, l->tag);
}

/* The pid rank r's kernel wrote, or 0 before it did. */
static pid_t member_pid(uint64_t tag, uint32_t r)
{
    char path[GD_LOST_PATH_MAX];
    FILE *f;
    int pid = 0;

    gd_lost_path(path, sizeof(path), tag, r, "pid");
    f = fopen(path, "r");
    if (!f)
        return 0;
    if (fscanf(f, "%d", &pid) != 1)
        pid = 0;
    fclose(f);
    return (pid_t)pid;
}

/* Process pid's state letter (S sleeping, T stopped, ...) from
 * /proc/<pid>/stat, or '?' when it is gone. */
static char proc_state(pid_t pid)
{
    char path[64], buf[512];
    FILE *fp;
    const char *p;
    char st = '?';

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    fp = fopen(path, "r");
    if (!fp)
        return st;
    if (fgets(buf, sizeof(buf), fp) && (p = strrchr(buf, ')')) != NULL &&
        p[1] == ' ')
        st = p[2];
    fclose(fp);
    return st;
}

static bool sleeping(pid_t pid)
{
    return proc_state(pid) == 'S';
}

struct parked {
    uint64_t tag;
    pid_t pid[LOST_N];
};

/* Every member has begun its wait (its pid is written) and sleeps. */
static bool all_parked(void *arg)
{
    struct parked *p = arg;

    for (uint32_t r = 0; r < LOST_N; r++) {
        if (!p->pid[r])
            p->pid[r] = member_pid(p->tag, r);
        if (!p->pid[r] || !sleeping(p->pid[r]))
            return false;
    }
    return true;
}

/* What rank r's wait returned ("<code> <message>"); -1 if nothing. */
static int member_result(uint64_t tag, uint32_t r, char *msg, size_t cap)
{
    char path[GD_LOST_PATH_MAX];
    FILE *f;
    int code = -1;

    msg[0] = '\0';
    gd_lost_path(path, sizeof(path), tag, r, "out");
    f = fopen(path, "r");
    if (!f)
        return -1;
    if (fscanf(f, "%d ", &code) != 1)
        code = -1;
    if (!fgets(msg, (int)cap, f))
        msg[0] = '\0';
    fclose(f);
    return code;
}

static void remove_files(uint64_t tag)
{
    static const char *const what[] = {"pid", "out", "pid.tmp", "out.tmp"};
    char path[GD_LOST_PATH_MAX + 8];

    for (uint32_t r = 0; r < LOST_N; r++) {
        for (size_t k = 0; k < sizeof(what) / sizeof(what[0]); k++) {
            gd_lost_path(path, sizeof(path), tag, r, what[k]);
            unlink(path);
        }
    }
}

/* Kills whichever the victim is once every member sleeps in its wait:
 * rank victim's chip, or (victim < 0) the remote node's session. */
static pid_t kill_when_parked(struct parked *p, int victim)
{
    pid_t pid = 0;

    if (!testutil_wait_until(all_parked, p, LOST_BOUND_S))
        fail_msg("the members did not all begin their waits");
    if (victim >= 0)
        pid = p->pid[victim];
    else
        assert_int_equal(gd_daemon_sessions(&daemon_, &pid, 1), 1);
    assert_int_equal(kill(pid, SIGKILL), 0);
    return pid;
}

/* Every survivor's wait returned STRATA_EPEER naming the domain and the
 * lost rank. */
static void assert_survivors_told(uint64_t tag, uint32_t first, uint32_t end,
                                  uint32_t skip, const char *lost)
{
    char msg[512];

    for (uint32_t r = first; r < end; r++) {
        int code;

        if (r == skip)
            continue;
        code = member_result(tag, r, msg, sizeof(msg));
        print_message("rank %u: %s: %s", r,
                      code < 0 ? "nothing" : strata_errname(code), msg);
        assert_int_equal(code, STRATA_EPEER);
        gd_assert_contains(msg, "global domain 'lost'");
        gd_assert_contains(msg, lost);
    }
}

/* Runs the waits, kills victim (a rank, or -1: the session), and checks
 * that the run ends with STRATA_EPEER and that the survivors of ranks
 * [first, end) were told that lost was lost. */
static void lost_case(int victim, uint32_t first, uint32_t end,
                      const char *lost)
{
    const struct gd_daemon *ds[1] = {&daemon_};
    struct lost l = {.tag = (uint64_t)getpid() * 1000 + ++next_tag};
    struct parked p = {.tag = l.tag};
    strata_worker *w = NULL;
    strata_run *run = NULL;
    pid_t dead[2];
    strata_err e;

    gd_ok(gd_l4_start(1, 2, ds, 1, 2, &w));
    gd_ok(strata_worker_submit(w, lost_orch, NULL, &l, &run));
    dead[0] = kill_when_parked(&p, victim);
    e = strata_run_wait(run, LOST_BOUND_S);
    print_message("run: %s: %s\n", strata_errname(e), strata_errmsg());
    gd_expect(STRATA_EPEER, e);
    strata_run_free(run);
    assert_survivors_told(l.tag, first, end, (uint32_t)victim, lost);
    assert_true(strata_global_domain_freed(l.g));
    gd_destroy(w, STRATA_OK);
    remove_files(l.tag);
    assert_true(gd_daemon_idle(&daemon_, LOST_BOUND_S));
    dead[1] = p.pid[victim < 0 ? 2 : victim];
    assert_int_equal(gd_shm_windows_below(dead, 2), 0);
}

static void test_gdomain_lost_remote_chip_killed_waiters_epeer(void **state)
{
    (void)state;
    /* The session marks the page; the forked node's members wake too. */
    lost_case(2, 0, LOST_N, "rank 2");
}

static void test_gdomain_lost_forked_chip_killed_waiters_epeer(void **state)
{
    (void)state;
    lost_case(1, 0, LOST_N, "rank 1");
}

static void test_gdomain_lost_session_killed_waiters_epeer(void **state)
{
    (void)state;
    /* The session's chips die with it: the L4 marks the page for the
     * node, naming its first rank. */
    lost_case(-1, 0, 2, "rank 2");
}

/* Rank windows of global domain id named for this L4, in /dev/shm. */
static size_t rank_windows(uint64_t id)
{
    char prefix[96];
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    size_t n = 0;

    snprintf(prefix, sizeof(prefix), "strata-%u-%d-d%llu-r", (unsigned)getuid(),
             (int)getpid(), (unsigned long long)((1ull << 62) | id));
    while (d && (e = readdir(d)) != NULL)
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    if (d)
        closedir(d);
    return n;
}

static bool windows_gone(void *arg)
{
    return rank_windows(*(const uint64_t *)arg) == 0;
}

static strata_err fill_orch(strata_orch *o, const strata_args *args, void *user)
{
    struct lost *l = user;

    (void)args;
    gd_spec_init(&l->s, "kept", 4096);
    gd_spec_grid(&l->s, 0, 2, 2);
    l->s.spec.retain_after_run = true;
    gd_try(strata_orch_allocate_global_domain(o, &l->s.spec, &l->g));
    return gd_submit_fill(o, &l->s, strata_global_domain_id(l->g), 0, 16, 5);
}

/* Issue 14, defect 7: the windows of a retained domain, named after the
 * L4, that a SIGKILLed session's members made are removed by the daemon
 * when it reaps the session, while the L4 still holds the domain (it
 * would remove them only at release). */
static void test_gdomain_lost_session_killed_windows_reclaimed(void **state)
{
    const struct gd_daemon *ds[1] = {&daemon_};
    struct lost l = {.tag = 0};
    strata_worker *w = NULL;
    pid_t session = 0;
    uint64_t id;

    (void)state;
    gd_ok(gd_l4_start(1, 2, ds, 1, 2, &w));
    gd_ok(strata_worker_run(w, fill_orch, NULL, &l));
    id = strata_global_domain_id(l.g);
    /* Every member mapped every rank's window. */
    assert_int_equal(rank_windows(id), LOST_N);
    assert_int_equal(gd_daemon_sessions(&daemon_, &session, 1), 1);
    assert_int_equal(kill(session, SIGKILL), 0);
    assert_true(gd_daemon_idle(&daemon_, LOST_BOUND_S));
    if (!testutil_wait_until(windows_gone, &id, LOST_BOUND_S))
        fail_msg("%zu windows of the killed session's domain left",
                 rank_windows(id));
    assert_false(strata_global_domain_freed(l.g));
    gd_destroy(w, STRATA_EPEER);
    assert_int_equal(gd_shm_windows_below(&session, 1), 0);
}

/* ---- a node torn down while a peer has not mapped yet ------------------ */

static strata_err keep_orch(strata_orch *o, const strata_args *args, void *user)
{
    struct lost *l = user;

    (void)args;
    gd_spec_init(&l->s, "orphan", 4096);
    gd_spec_grid(&l->s, 0, 2, 2);
    l->s.spec.retain_after_run = true;
    return strata_orch_allocate_global_domain(o, &l->s.spec, &l->g);
}

/* A copy into rank 0 (a chip of forked node 0) from the L4. */
static strata_err copy_orch(strata_orch *o, const strata_args *args, void *user)
{
    struct lost *l = user;
    uint32_t word = 7;

    (void)args;
    return strata_orch_copy_to_global_domain(o, l->g, 0, NULL, 0, &word,
                                             sizeof(word));
}

/* Node 0's members wait on the domain with no timeout. */
static strata_err wait_orch(strata_orch *o, const strata_args *args, void *user)
{
    struct lost *l = user;
    struct gd_spec s0;

    (void)args;
    gd_spec_init(&s0, "orphan", 4096);
    gd_spec_grid(&s0, 0, 1, 2);
    return gd_submit_wait(o, &s0, strata_global_domain_id(l->g), 0, l->tag);
}

/* Whether process *arg is stopped (state T). */
static bool stopped(void *arg)
{
    return proc_state(*(pid_t *)arg) == 'T';
}

/* Whether the control page of this L4's global domain *id exists and is
 * marked broken (whoever made it). */
static bool page_marked(void *arg)
{
    char prefix[96], path[NAME_MAX + 16];
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    bool marked = false;

    snprintf(prefix, sizeof(prefix), "strata-%u-%d-d%llu-ctl",
             (unsigned)getuid(), (int)getpid(),
             (unsigned long long)((1ull << 62) | *(const uint64_t *)arg));
    while (d && !marked && (e = readdir(d)) != NULL) {
        FILE *f;
        uint32_t broken = 0;

        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        snprintf(path, sizeof(path), "/dev/shm/%s", e->d_name);
        f = fopen(path, "r");
        if (f && fread(&broken, sizeof(broken), 1, f) == 1)
            marked = __atomic_load_n(&broken, __ATOMIC_RELAXED) != 0;
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    return marked;
}

/* The ordering gdomain_chaos once hung in: the remote session is torn
 * down (SIGTERM) and held before its teardown unlinks the domain's
 * names, the L4 marks the control page for the lost node, the teardown
 * then unlinks the names, and only then do the forked node's members
 * first map the domain. A member that made the page again would wait on
 * a page nobody marks, for ever; it must fail at once with STRATA_EPEER
 * (the page is gone with the domain), and nothing may be left. */
static void test_gdomain_lost_page_unlinked_before_mapping_epeer(void **state)
{
    const struct gd_daemon *ds[1];
    struct gd_daemon held;
    struct lost l = {.tag = (uint64_t)getpid() * 1000 + ++next_tag};
    strata_worker *w = NULL;
    strata_run *run = NULL;
    pid_t session = 0;
    uint64_t id;
    strata_err e;

    (void)state;
    assert_int_equal(gd_daemon_start(&held, NULL, "gnode.teardown:1:stop"), 0);
    ds[0] = &held;
    gd_ok(gd_l4_start(1, 2, ds, 1, 2, &w));
    gd_ok(strata_worker_run(w, keep_orch, NULL, &l));
    id = strata_global_domain_id(l.g);
    assert_int_equal(gd_daemon_sessions(&held, &session, 1), 1);
    assert_int_equal(kill(session, SIGTERM), 0);
    if (!testutil_wait_until(stopped, &session, LOST_BOUND_S))
        fail_msg("the session did not stop at gnode.teardown");
    if (!testutil_wait_until(page_marked, &id, LOST_BOUND_S))
        fail_msg("the L4 did not mark the domain's page for node 1");
    assert_int_equal(kill(session, SIGCONT), 0);
    assert_true(gd_daemon_idle(&held, LOST_BOUND_S));
    /* A copy is the member's first use too: it names why there is no
     * window (the map failed: the domain is gone), not an internal id. */
    e = strata_worker_run(w, copy_orch, NULL, &l);
    print_message("copy: %s: %s\n", strata_errname(e), strata_errmsg());
    gd_expect(STRATA_EPEER, e);
    gd_assert_contains(strata_errmsg(), "could not map the windows");
    gd_assert_contains(strata_errmsg(), "the domain is gone");
    gd_ok(strata_worker_submit(w, wait_orch, NULL, &l, &run));
    e = strata_run_wait(run, LOST_BOUND_S);
    print_message("run: %s: %s\n", strata_errname(e), strata_errmsg());
    gd_expect(STRATA_EPEER, e);
    gd_assert_contains(strata_errmsg(), "orphan");
    strata_run_free(run);
    gd_ok(strata_global_domain_release(l.g));
    gd_destroy(w, STRATA_OK);
    remove_files(l.tag);
    assert_int_equal(gd_shm_windows_below(&session, 1), 0);
    assert_false(page_marked(&id));
    assert_int_equal(gd_daemon_stop(&held), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        gd_test(test_gdomain_lost_remote_chip_killed_waiters_epeer),
        gd_test(test_gdomain_lost_forked_chip_killed_waiters_epeer),
        gd_test(test_gdomain_lost_session_killed_waiters_epeer),
        gd_test(test_gdomain_lost_session_killed_windows_reclaimed),
        gd_test(test_gdomain_lost_page_unlinked_before_mapping_epeer),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
