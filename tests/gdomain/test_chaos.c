/*
 * Chaos: the mixed global allreduce (examples/global_allreduce_mixed_l3,
 * plus a task on each node's sub worker) run over and over while one
 * process of the tree is SIGKILLed at a random moment: a chip, a sub, the
 * forked node, the remote node's session, or (rarely) the strata-node
 * daemon, before init completes, during the allocation, during the run,
 * during the read back and release, or during destroy (chaos.h).
 *
 * Every iteration must end within CHAOS_ITER_S in success (the sums and
 * the subs' output checked) or a documented error (docs/errors.md): init
 * STRATA_EPEER / STRATA_ETIMEDOUT, runs STRATA_EPEER / STRATA_ETASK /
 * STRATA_ETIMEDOUT (and STRATA_ESTATE for a worker poisoned by a failed
 * ABORT); an error where nothing was killed yet is a failure, and destroy
 * must return STRATA_OK. After destroy, within CHAOS_SETTLE_S, nothing of
 * the iteration may be left: no process below the test but the daemon
 * (killed processes' orphans come to the test, a child subreaper) and no
 * session in the daemon; CHAOS_SHM_GRACE_S after the last of them ended,
 * no /dev/shm name of a process of the iteration.
 * At the end none of the /tmp/strata-chaos-* directories its daemons had
 * (others may be another run's), no child, fd or shm name.
 *
 * Environment (all optional):
 *   CHAOS_SEED=n        the seed (printed at start; default: the clock)
 *   CHAOS_SECONDS=s     start no iteration after s seconds (default 45)
 *   CHAOS_ITERATIONS=n  at most n iterations (default 1000)
 *   CHAOS_ONLY=i        only iteration i of the seed (to reproduce one)
 *   CHAOS_KINDS=a,b     kill only these kinds (none,chip,sub,node,session,
 *                       daemon)
 *   CHAOS_PHASES=a,b    kill only in these phases (init,alloc,run,release,
 *                       destroy)
 *   CHAOS_KERNEL_WAIT_S bound of the kernels' wait for their peers
 *                       (default -1: forever; a dead peer must wake the
 *                       survivors, issue 14 defect 6)
 *   CHAOS_HANG_S=s      an iteration running s seconds is a hang
 *                       (default 90): the tree is printed and killed
 *   CHAOS_KNOWN_BUGS=1  fail on the known bugs the test tolerates, and
 *                       plan the kills it skips (chaos_plan.c)
 * Each iteration prints its plan and what happened, and how to repeat it.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <setjmp.h>

#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "chaos.h"
#include "chaos_module.h"
#include "testutil.h"

#ifndef CHAOS_NODE_PATH
#error "CHAOS_NODE_PATH (the strata-node binary) must be defined"
#endif
#ifndef CHAOS_MODULE_PATH
#error "CHAOS_MODULE_PATH (the chaos module) must be defined"
#endif

#define CHAOS_ITER_S 30.0     /* an iteration's bound, on a busy machine */
#define CHAOS_SETTLE_S 15.0   /* for what an iteration leaves to go */
#define CHAOS_FREE_S 10.0     /* for a released domain to be freed */
#define CHAOS_SLOW_S 10.0     /* past this the watchdog prints the tree */
#define CHAOS_SHM_GRACE_S 2.0 /* names after the last process went */
#define NODES 2
#define CHIPS 2
#define RANKS (NODES * CHIPS)

static const int chip_ids[CHIPS] = {0, 1};

/* One iteration's job: what the orch fns share with the test. */
struct job {
    struct chaos_killer *k;
    const struct chaos_plan *plan;
    uint64_t wait_ms;
    strata_callable compute, read;
    strata_global_domain *domain;
    uint64_t id;
    strata_buffer *sums; /* u32[RANKS][CHAOS_N], rank order */
    strata_buffer *subs; /* u32[NODES][CHAOS_SUB_N] */
    strata_err release_err;
    double alloc_ms; /* how long the allocation took */
};

static struct chaos_daemon daemon_;
static struct chaos_names made; /* the daemon directories this run made */
static strata_callable o_compute, o_read;
static unsigned failures;
static char first_failure[512];
static unsigned outcome[CHAOS_KINDS][3]; /* ok, documented error, no kill */

/* The watchdog: an iteration past chaos_cfg.hang_s is a hang. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* running was set */
    pthread_t thread;
    bool running, stop, active, slow; /* slow: the tree was printed */
    double start;
    long iteration;
    char plan[160];
} dog = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/* ---- failures --------------------------------------------------------------
 */

static void failure(long i, const struct chaos_plan *p, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void failure(long i, const struct chaos_plan *p, const char *fmt, ...)
{
    char msg[400];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr,
            "chaos: FAILED iteration %ld (kill %s in %s): %s\n"
            "chaos: repeat with CHAOS_SEED=%llu CHAOS_ONLY=%ld\n",
            i, chaos_kind_name[p->kind], chaos_phase_name[p->phase], msg,
            (unsigned long long)chaos_cfg.seed, i);
    if (failures++ == 0)
        snprintf(first_failure, sizeof(first_failure),
                 "iteration %ld (kill %s in %s): %s", i,
                 chaos_kind_name[p->kind], chaos_phase_name[p->phase], msg);
}

static bool documented(int e, const strata_err *ok, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (e == (int)ok[i])
            return true;
    return false;
}

/* ---- the L4 and its orch fns ------------------------------------------- */

static strata_err build(strata_worker **out)
{
    strata_worker_config c4, c3;
    strata_remote_spec rs;
    strata_worker *w = NULL, *n = NULL;
    strata_err e;
    int id;

    strata_worker_config_init(&c4, 4);
    c4.startup_timeout_s = 20.0;
    e = strata_worker_create(&c4, &w);
    if (e != STRATA_OK)
        return e;
    strata_worker_config_init(&c3, 3);
    c3.chip_ids = chip_ids;
    c3.num_chips = CHIPS;
    c3.num_sub_workers = 1;
    e = strata_worker_create(&c3, &n);
    if (e == STRATA_OK) {
        e = strata_worker_add_worker(w, n, &id);
        if (e != STRATA_OK && strata_worker_destroy(n) != STRATA_OK)
            print_error("destroying a node never added: %s\n", strata_errmsg());
    }
    if (e == STRATA_OK) {
        memset(&rs, 0, sizeof(rs));
        rs.endpoint = daemon_.endpoint;
        rs.secret_file = daemon_.secret;
        rs.chip_ids = chip_ids;
        rs.num_chips = CHIPS;
        rs.num_sub_workers = 1;
        e = strata_worker_add_remote_worker(w, &rs, &id);
    }
    if (e != STRATA_OK) {
        if (strata_worker_destroy(w) != STRATA_OK)
            print_error("destroying an L4 never started: %s\n",
                        strata_errmsg());
        return e;
    }
    *out = w;
    return STRATA_OK;
}

/* Run 1: the allocation, then the allreduce and the subs on both nodes. */
static strata_err compute_orch(strata_orch *o, const strata_args *unused,
                               void *user)
{
    static const strata_global_member members[RANKS] = {
        {0, 0}, {0, 1}, {1, 0}, {1, 1}};
    static const strata_comm_buffer_spec bufs[3] = {
        {"data", STRATA_U32, CHAOS_N, CHAOS_N * 4},
        {"sum", STRATA_U32, CHAOS_N, CHAOS_N * 4},
        {"flag", STRATA_U32, 1, 4},
    };
    const strata_global_domain_spec spec = {
        .name = "chaos",
        .members = members,
        .num_members = RANKS,
        .window_size = CHAOS_WINDOW,
        .buffers = bufs,
        .num_buffers = 3,
        .retain_after_run = true,
    };
    const size_t shape[1] = {CHAOS_SUB_N};
    struct job *j = user;
    strata_global_domain *g = NULL;
    strata_args *a = NULL;
    strata_err err;
    double t;

    (void)unused;
    t = testutil_now();
    chaos_killer_phase(j->k, CHAOS_ALLOC);
    err = strata_orch_allocate_global_domain(o, &spec, &g);
    chaos_killer_phase(j->k, CHAOS_RUN);
    j->alloc_ms = (testutil_now() - t) * 1e3;
    if (err != STRATA_OK)
        return err;
    j->domain = g;
    j->id = strata_global_domain_id(g);
    err = strata_args_create(&a);
    for (int node = 0; node < NODES && err == STRATA_OK; node++) {
        strata_args_clear(a);
        err = strata_args_add_tensor(a, j->subs, (size_t)node * CHAOS_SUB_N * 4,
                                     STRATA_U32, 1, shape, STRATA_OUT);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(a, j->id);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(a, j->plan->kernel_us);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(a, j->plan->seed);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(a, j->wait_ms);
        if (err == STRATA_OK)
            err = strata_orch_submit_next_level(o, j->compute, a, node);
    }
    strata_args_destroy(a);
    return err;
}

/* Run 2: each node reads its members' sums into j->sums; the domain is
 * released (as the example does, right after the reads are submitted). */
static strata_err read_orch(strata_orch *o, const strata_args *unused,
                            void *user)
{
    const size_t shape[1] = {CHIPS * CHAOS_N};
    struct job *j = user;
    strata_args *a = NULL;
    strata_err err;

    (void)unused;
    err = strata_args_create(&a);
    for (int node = 0; node < NODES && err == STRATA_OK; node++) {
        strata_args_clear(a);
        err = strata_args_add_tensor(a, j->sums,
                                     (size_t)node * CHIPS * CHAOS_N * 4,
                                     STRATA_U32, 1, shape, STRATA_OUT);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(a, j->id);
        if (err == STRATA_OK)
            err = strata_orch_submit_next_level(o, j->read, a, node);
    }
    strata_args_destroy(a);
    j->release_err = strata_global_domain_release(j->domain);
    return err != STRATA_OK ? err : j->release_err;
}

/* Wrong words in the sums and the subs' output; the first printed. */
static size_t wrong_words(const struct job *j)
{
    const uint32_t *s = strata_buffer_data(j->sums);
    const uint32_t *u = strata_buffer_data(j->subs);
    size_t bad = 0;

    for (uint32_t i = 0; i < CHAOS_N; i++) {
        uint32_t want = 0;

        for (uint32_t r = 0; r < RANKS; r++)
            want += chaos_value(j->plan->seed, r, i);
        for (uint32_t r = 0; r < RANKS; r++)
            if (s[r * CHAOS_N + i] != want && bad++ == 0)
                fprintf(stderr, "chaos: rank %u sum[%u] = %u, want %u\n", r, i,
                        s[r * CHAOS_N + i], want);
    }
    for (uint32_t n = 0; n < NODES; n++)
        for (uint32_t i = 0; i < CHAOS_SUB_N; i++)
            if (u[n * CHAOS_SUB_N + i] != chaos_sub_value(j->plan->seed, i) &&
                bad++ == 0)
                fprintf(stderr, "chaos: node %u sub out[%u] = %u, want %u\n", n,
                        i, u[n * CHAOS_SUB_N + i],
                        chaos_sub_value(j->plan->seed, i));
    return bad;
}

static bool wait_freed(const struct job *j)
{
    double end = testutil_now() + CHAOS_FREE_S;

    while (!strata_global_domain_freed(j->domain)) {
        if (testutil_now() > end)
            return false;
        testutil_sleep(0.001);
    }
    return true;
}

/* ---- one iteration ---------------------------------------------------------
 */

/* A step's result; NOT_RUN when it did not happen. */
#define NOT_RUN (-1)

struct outcome {
    int init, run1, run2, release, destroy; /* strata_err or NOT_RUN */
    char first[STRATA_ERRMSG_MAX];          /* the first error's message */
    double ms[CHAOS_PHASES];                /* how long each phase took */
};

/* Checks one call's result: OK, or one of the documented errors, and
 * only once something was killed. */
static void check_err(long i, const struct chaos_plan *p,
                      struct chaos_killer *k, const char *call, int e,
                      struct outcome *out, const strata_err *ok, size_t nok)
{
    if (e == STRATA_OK || e == NOT_RUN)
        return;
    if (!out->first[0])
        snprintf(out->first, sizeof(out->first), "%s: %s", call,
                 strata_errmsg());
    if (!documented(e, ok, nok) && chaos_known_result(p->kind, call, e))
        return;
    if (!documented(e, ok, nok))
        failure(i, p, "%s returned %s, not a documented error for a kill: %s",
                call, strata_errname(e), strata_errmsg());
    else if (!chaos_killer_fired(k))
        failure(i, p, "%s returned %s and nothing was killed yet: %s", call,
                strata_errname(e), strata_errmsg());
}

static const strata_err init_errs[] = {STRATA_EPEER, STRATA_ETIMEDOUT};
static const strata_err run_errs[] = {STRATA_EPEER, STRATA_ETASK,
                                      STRATA_ETIMEDOUT};
/* After a failed ABORT the worker is poisoned (STRATA_ESTATE). */
static const strata_err late_errs[] = {STRATA_EPEER, STRATA_ETASK,
                                       STRATA_ETIMEDOUT, STRATA_ESTATE};

#define ERRS(a) (a), sizeof(a) / sizeof((a)[0])

/* Enters phase ph; *t = when. */
static void phase(struct chaos_killer *k, enum chaos_phase ph, double *t)
{
    *t = testutil_now();
    chaos_killer_phase(k, ph);
}

/* Runs the runs of one started L4 under the killer. */
static void work(long i, struct job *j, strata_worker *w, struct outcome *out)
{
    const struct chaos_plan *p = j->plan;
    double t = testutil_now();
    strata_err e;

    e = strata_worker_create_buffer(w, RANKS * CHAOS_N * 4, &j->sums);
    if (e == STRATA_OK)
        e = strata_worker_create_buffer(w, NODES * CHAOS_SUB_N * 4, &j->subs);
    if (e != STRATA_OK) {
        failure(i, p, "create_buffer: %s: %s", strata_errname(e),
                strata_errmsg());
        return;
    }
    out->run1 = strata_worker_run(w, compute_orch, NULL, j);
    out->ms[CHAOS_RUN] = (testutil_now() - t) * 1e3;
    out->ms[CHAOS_ALLOC] = j->alloc_ms;
    check_err(i, p, j->k, "run 1", out->run1, out, ERRS(run_errs));
    phase(j->k, CHAOS_RELEASE, &t);
    if (!j->domain)
        return;
    out->run2 = strata_worker_run(w, read_orch, NULL, j);
    check_err(i, p, j->k, "run 2", out->run2, out, ERRS(late_errs));
    /* A run 2 that failed before its release: release it here. */
    out->release = j->release_err = strata_global_domain_release(j->domain);
    check_err(i, p, j->k, "release", out->release, out, ERRS(late_errs));
    if (out->run1 == STRATA_OK && out->run2 == STRATA_OK && wrong_words(j))
        failure(i, p, "both runs succeeded with wrong results");
    if (out->release == STRATA_OK && !wait_freed(j))
        failure(i, p, "the domain was released but not freed within %.0f s",
                CHAOS_FREE_S);
    out->ms[CHAOS_RELEASE] = (testutil_now() - t) * 1e3;
}

/* Reaps what came to the test; notes the daemon's end. */
static void reap(long i, const struct chaos_plan *p, struct chaos_killer *k)
{
    int status;
    pid_t pid;

    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        if (pid != daemon_.pid)
            continue;
        if (k->killed != pid)
            failure(i, p, "strata-node (pid %d) died unasked: status 0x%x",
                    (int)pid, status);
        daemon_.pid = 0;
        chaos_daemon_files_remove(&daemon_);
    }
}

/* The processes the iteration left now, described in msg. */
static size_t procs_left(char *msg, size_t cap)
{
    pid_t kids[64];
    size_t n, left = 0;
    char line[96];

    msg[0] = '\0';
    n = chaos_descendants(getpid(), kids, 64);
    for (size_t x = 0; x < n; x++) {
        if (kids[x] == daemon_.pid)
            continue;
        snprintf(line, sizeof(line), " pid %d", (int)kids[x]);
        if (strlen(msg) + strlen(line) < cap)
            strcat(msg, line);
        left++;
    }
    return left;
}

/* Its /dev/shm names now, described in msg. */
static size_t shm_left(struct chaos_killer *k, const struct chaos_names *shm0,
                       char *msg, size_t cap)
{
    static struct chaos_names now;

    msg[0] = '\0';
    chaos_shm_list(&now);
    return chaos_shm_new(shm0, &now, &k->seen, msg, cap);
}

static void kill_leftovers(void)
{
    pid_t kids[64];
    size_t n = chaos_descendants(getpid(), kids, 64);

    for (size_t x = 0; x < n; x++)
        if (kids[x] != daemon_.pid)
            kill(kids[x], SIGKILL);
}

/* Names still there CHAOS_SHM_GRACE_S after the last process went:
 * those of a killed process must be removed by whoever reaps it (the
 * daemon, the node, the L4), at once. A known bug is tolerated; either
 * way they are removed here so that the next iterations start clean. */
static void shm_leaked(long i, const struct chaos_plan *p,
                       struct chaos_killer *k, const struct chaos_names *shm0,
                       const char *msg)
{
    if (!k->killed || !chaos_known_result(p->kind, "names", STRATA_OK))
        failure(i, p,
                "%.0f s after the last process of the iteration ended, "
                "/dev/shm still has:%s",
                CHAOS_SHM_GRACE_S, msg);
    else
        printf("chaos:     names left:%s\n", msg);
    chaos_shm_remove_new(shm0, &k->seen);
}

/* Waits for the iteration's processes, then its names, to go. */
static void settle(long i, const struct chaos_plan *p, struct chaos_killer *k,
                   const struct chaos_names *shm0)
{
    double t0 = testutil_now(), end = t0 + CHAOS_SETTLE_S, gone = -1.0;
    char msg[1024];

    for (;;) {
        double now;

        reap(i, p, k);
        now = testutil_now();
        if (procs_left(msg, sizeof(msg)) == 0) {
            if (gone < 0)
                gone = now;
            if (shm_left(k, shm0, msg, sizeof(msg)) == 0)
                break;
            if (now - gone > CHAOS_SHM_GRACE_S) {
                shm_leaked(i, p, k, shm0, msg);
                break;
            }
        } else if (now > end) {
            if (!k->killed ||
                !chaos_known_result(p->kind, "processes", STRATA_OK))
                failure(i, p, "%.0f s after destroy these are left:%s",
                        CHAOS_SETTLE_S, msg);
            chaos_print_tree(getpid());
            chaos_daemon_log_tail(&daemon_);
            kill_leftovers();
            testutil_sleep(0.2);
            reap(i, p, k);
            return;
        }
        testutil_sleep(0.005);
    }
    /* A daemon this iteration killed may still be dying (SIGKILL is not
     * instant): the next iteration must start a new one, not dial it. */
    if (k->killed && k->killed == daemon_.pid) {
        int status;

        if (waitpid(daemon_.pid, &status, 0) == daemon_.pid) {
            daemon_.pid = 0;
            chaos_daemon_files_remove(&daemon_);
        }
    }
    if (testutil_now() - t0 > 1.0)
        printf("chaos:     settled after %.2f s\n", testutil_now() - t0);
}

static void dog_set(bool active, long i, const char *plan)
{
    pthread_mutex_lock(&dog.mu);
    dog.active = active;
    dog.slow = false;
    dog.iteration = i;
    dog.start = testutil_now();
    snprintf(dog.plan, sizeof(dog.plan), "%s", plan);
    pthread_mutex_unlock(&dog.mu);
}

static const char *ename(int e)
{
    return e == NOT_RUN ? "-" : strata_errname((strata_err)e);
}

static void report(long i, const char *plan, const struct chaos_killer *k,
                   const struct outcome *o, double s)
{
    char what[160];

    if (k->killed)
        snprintf(what, sizeof(what), "killed %s (pid %d) in %s +%.1f ms",
                 k->victim, (int)k->killed, chaos_phase_name[k->at],
                 k->after_ms);
    else
        snprintf(what, sizeof(what), "killed nothing");
    printf("chaos: #%ld %s: %s; init %s, run1 %s, run2 %s, release %s, "
           "destroy %s; %.2f s (init %.0f, alloc %.0f, run1 %.0f, release "
           "%.0f, destroy %.0f ms)\n",
           i, plan, what, ename(o->init), ename(o->run1), ename(o->run2),
           ename(o->release), ename(o->destroy), s, o->ms[CHAOS_INIT],
           o->ms[CHAOS_ALLOC], o->ms[CHAOS_RUN], o->ms[CHAOS_RELEASE],
           o->ms[CHAOS_DESTROY]);
    if (o->first[0])
        printf("chaos:     first error: %s\n", o->first);
    fflush(stdout);
}

static void iterate(long i)
{
    struct chaos_plan p;
    struct chaos_killer k;
    struct chaos_names shm0;
    struct outcome out;
    struct job j;
    strata_worker *w = NULL;
    char plan[128];
    double t0, t;
    strata_err e;

    chaos_plan_for(i, &p);
    chaos_plan_describe(&p, plan, sizeof(plan));
    memset(&out, 0, sizeof(out));
    out.init = out.run1 = out.run2 = out.release = out.destroy = NOT_RUN;
    memset(&j, 0, sizeof(j));
    j.k = &k;
    j.plan = &p;
    j.wait_ms = chaos_cfg.wait_ms;
    j.compute = o_compute;
    j.read = o_read;
    chaos_shm_list(&shm0);
    if (chaos_killer_start(&k, &p, daemon_.pid) != 0) {
        failure(i, &p, "cannot start the killer thread");
        return;
    }
    dog_set(true, i, plan);
    t0 = testutil_now();
    e = build(&w);
    if (e != STRATA_OK) {
        failure(i, &p, "building the L4: %s: %s", strata_errname(e),
                strata_errmsg());
    } else {
        phase(&k, CHAOS_INIT, &t);
        out.init = strata_worker_init(w);
        out.ms[CHAOS_INIT] = (testutil_now() - t) * 1e3;
        check_err(i, &p, &k, "init", out.init, &out, ERRS(init_errs));
        if (out.init == STRATA_OK)
            work(i, &j, w, &out);
        phase(&k, CHAOS_DESTROY, &t);
        out.destroy = strata_worker_destroy(w);
        out.ms[CHAOS_DESTROY] = (testutil_now() - t) * 1e3;
        if (out.destroy != STRATA_OK)
            failure(i, &p, "destroy returned %s: %s", ename(out.destroy),
                    strata_errmsg());
    }
    chaos_killer_stop(&k);
    t = testutil_now() - t0;
    report(i, plan, &k, &out, t);
    if (t > CHAOS_ITER_S)
        failure(i, &p, "the iteration took %.1f s (bound %.0f s)", t,
                CHAOS_ITER_S);
    settle(i, &p, &k, &shm0);
    dog_set(false, i, "");
    outcome[p.kind][!k.killed ? 2 : out.first[0] == '\0' ? 0 : 1]++;
}

/* ---- the watchdog and the test ----------------------------------------- */

/* Kills the whole tree and removes what it named in /dev/shm (a tree
 * killed outright leaves its global windows, docs/global_domains.md). */
static void hang_cleanup(void)
{
    static struct chaos_names none;
    static struct chaos_pids tree;
    pid_t p[CHAOS_MAX_PIDS];
    size_t n = chaos_descendants(getpid(), p, CHAOS_MAX_PIDS);

    chaos_pids_add(&tree, getpid());
    for (size_t i = 0; i < n; i++) {
        chaos_pids_add(&tree, p[i]);
        kill(p[i], SIGKILL);
    }
    testutil_sleep(0.5);
    chaos_shm_remove_new(&none, &tree);
    chaos_daemon_files_remove(&daemon_);
}

static void *dog_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&dog.mu);
    dog.running = true;
    pthread_cond_broadcast(&dog.cv);
    pthread_mutex_unlock(&dog.mu);
    for (;;) {
        bool hang, slow;
        long i;
        char plan[160];
        double s;

        pthread_mutex_lock(&dog.mu);
        if (dog.stop) {
            pthread_mutex_unlock(&dog.mu);
            return NULL;
        }
        s = testutil_now() - dog.start;
        hang = dog.active && s > chaos_cfg.hang_s;
        slow = dog.active && !dog.slow && s > CHAOS_SLOW_S;
        dog.slow |= slow;
        i = dog.iteration;
        snprintf(plan, sizeof(plan), "%s", dog.plan);
        pthread_mutex_unlock(&dog.mu);
        if (slow) {
            fprintf(stderr, "chaos: iteration %ld (%s) runs for %.0f s:\n", i,
                    plan, s);
            chaos_print_tree(getpid());
        }
        if (hang) {
            fprintf(stderr,
                    "chaos: HANG: iteration %ld (%s) runs for %.0f s\n"
                    "chaos: repeat with CHAOS_SEED=%llu CHAOS_ONLY=%ld\n",
                    i, plan, s, (unsigned long long)chaos_cfg.seed, i);
            chaos_print_tree(getpid());
            chaos_print_stacks(getpid());
            chaos_daemon_log_tail(&daemon_);
            hang_cleanup();
            abort();
        }
        testutil_sleep(0.25);
    }
}

static void test_chaos_kills_end_in_success_or_documented_errors(void **state)
{
    testutil_snapshot before;
    char msg[512] = "";
    double t0;
    long n = 0;

    (void)state;
    chaos_config_read();
    printf("chaos: seed %llu (CHAOS_SEED=%llu repeats it), %.0f s, kernel "
           "wait %s\n",
           (unsigned long long)chaos_cfg.seed,
           (unsigned long long)chaos_cfg.seed, chaos_cfg.seconds,
           chaos_cfg.wait_ms == CHAOS_WAIT_FOREVER ? "forever" : "bounded");
    fflush(stdout);
    testutil_snapshot_take(&before);
    dog.stop = false;
    dog.running = false;
    assert_int_equal(pthread_create(&dog.thread, NULL, dog_main, NULL), 0);
    /* The first fork waits for the thread to be running: see
     * chaos_killer_start. */
    pthread_mutex_lock(&dog.mu);
    while (!dog.running)
        pthread_cond_wait(&dog.cv, &dog.mu);
    pthread_mutex_unlock(&dog.mu);
    t0 = testutil_now();
    for (long i = chaos_cfg.only >= 0 ? chaos_cfg.only : 0;; i++) {
        if (chaos_cfg.only >= 0 ? i > chaos_cfg.only
                                : n >= chaos_cfg.iterations ||
                                      testutil_now() - t0 >= chaos_cfg.seconds)
            break;
        if (daemon_.pid == 0 && chaos_daemon_start(&daemon_) == 0 &&
            made.n < CHAOS_MAX_NAMES)
            snprintf(made.name[made.n++], CHAOS_NAME_MAX, "%s", daemon_.dir);
        if (daemon_.pid == 0) {
            failures++;
            snprintf(first_failure, sizeof(first_failure),
                     "iteration %ld: strata-node did not start", i);
            break;
        }
        iterate(i);
        n++;
    }
    pthread_mutex_lock(&dog.mu);
    dog.stop = true;
    pthread_mutex_unlock(&dog.mu);
    pthread_join(dog.thread, NULL);
    if (chaos_daemon_stop(&daemon_) != 0 && failures++ == 0)
        snprintf(first_failure, sizeof(first_failure),
                 "strata-node did not stop cleanly at the end");
    printf("chaos: %ld iterations in %.1f s; by kind: ok / documented error "
           "/ nothing killed:",
           n, testutil_now() - t0);
    for (int kd = 0; kd < CHAOS_KINDS; kd++)
        printf(" %s %u/%u/%u", chaos_kind_name[kd], outcome[kd][0],
               outcome[kd][1], outcome[kd][2]);
    printf("; known bugs tolerated: %u\n", chaos_known_hits);
    fflush(stdout);
    if (chaos_paths_left(&made, msg, sizeof(msg)) && failures++ == 0)
        snprintf(first_failure, sizeof(first_failure), "left in /tmp:%s", msg);
    testutil_assert_clean_within(&before, 5.0);
    if (failures)
        fail_msg("chaos: %u failures in %ld iterations (seed %llu); the first: "
                 "%s",
                 failures, n, (unsigned long long)chaos_cfg.seed,
                 first_failure);
}

static int setup(void **state)
{
    (void)state;
    if (strata_module_init() != STRATA_OK ||
        strata_callable_by_name(STRATA_CALLABLE_ORCH, CHAOS_O_COMPUTE,
                                &o_compute) != STRATA_OK ||
        strata_callable_by_name(STRATA_CALLABLE_ORCH, CHAOS_O_READ, &o_read) !=
            STRATA_OK) {
        print_error("registering the chaos callables: %s\n", strata_errmsg());
        return -1;
    }
    /* Orphans of killed processes come here, to be seen and reaped. */
    return prctl(PR_SET_CHILD_SUBREAPER, 1) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return prctl(PR_SET_CHILD_SUBREAPER, 0) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chaos_kills_end_in_success_or_documented_errors),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
