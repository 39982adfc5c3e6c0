/*
 * The chaos test's killer thread (see chaos.h). It never calls strata:
 * it reads /proc and sends one SIGKILL while the main thread is inside
 * the library. It also notes every pid it sees below the test, so that
 * /dev/shm names of processes that died are known to be ours.
 */
#define _GNU_SOURCE
#include "chaos.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#define TICK_S 0.001 /* how often it looks while it waits to kill */
#define SCAN_S 0.005 /* how often it notes the pids below the test */

const char *const chaos_kind_name[CHAOS_KINDS] = {"none", "chip",    "sub",
                                                  "node", "session", "daemon"};
const char *const chaos_phase_name[CHAOS_PHASES] = {
    "idle", "init", "alloc", "run", "release", "destroy", "done"};

/* The forked L3 node: the test's one child that is not the daemon. */
static pid_t forked_node(pid_t daemon)
{
    pid_t kids[16];
    size_t n = chaos_children(getpid(), kids, 16);

    for (size_t i = 0; i < n; i++)
        if (kids[i] != daemon)
            return kids[i];
    return 0;
}

static pid_t session(pid_t daemon)
{
    pid_t kids[16];

    if (daemon <= 0)
        return 0;
    return chaos_children(daemon, kids, 16) > 0 ? kids[0] : 0;
}

/* The plan's victim now, or 0 while it does not exist (yet). A node's
 * children are its chips in id order, then its sub. */
static pid_t victim(const struct chaos_plan *p, pid_t daemon, char *what,
                    size_t cap)
{
    const char *side = p->side == 0 ? "forked node" : "remote node";
    pid_t kids[16], parent;
    size_t n, at;

    switch (p->kind) {
    case CHAOS_KILL_DAEMON:
        snprintf(what, cap, "the strata-node daemon");
        return daemon;
    case CHAOS_KILL_NODE:
        snprintf(what, cap, "the forked node");
        return forked_node(daemon);
    case CHAOS_KILL_SESSION:
        snprintf(what, cap, "the session (remote node)");
        return session(daemon);
    case CHAOS_KILL_CHIP:
    case CHAOS_KILL_SUB:
        parent = p->side == 0 ? forked_node(daemon) : session(daemon);
        if (parent <= 0)
            return 0;
        /* Its forked children only: an ASan build's session that has
         * reaped its chips and runs LeakSanitizer at exit() has the
         * tracer as its child, which is not ours to kill. */
        n = 0;
        for (size_t x = 0, all = chaos_children(parent, kids, 16); x < all; x++)
            if (chaos_forked(kids[x]))
                kids[n++] = kids[x];
        at = p->kind == CHAOS_KILL_CHIP ? (size_t)p->chip : 2;
        if (p->kind == CHAOS_KILL_CHIP)
            snprintf(what, cap, "chip %d of the %s", p->chip, side);
        else
            snprintf(what, cap, "sub 0 of the %s", side);
        return n > at ? kids[at] : 0;
    default:
        return 0;
    }
}

static void wait_until(struct chaos_killer *k, double until)
{
    struct timespec ts;
    double t = until;

    ts.tv_sec = (time_t)t;
    ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&k->cv, &k->mu, &ts);
}

static void note_pids(struct chaos_killer *k)
{
    pid_t p[CHAOS_MAX_PIDS];
    size_t n = chaos_descendants(getpid(), p, CHAOS_MAX_PIDS);

    pthread_mutex_lock(&k->mu);
    for (size_t i = 0; i < n; i++)
        chaos_pids_add(&k->seen, p[i]);
    pthread_mutex_unlock(&k->mu);
}

/* Kills the victim if it exists now; true once done. It is recorded
 * first: the main thread may see the death before kill() returns here. */
static bool try_kill(struct chaos_killer *k, enum chaos_phase ph, double pt)
{
    char what[64];
    pid_t v = victim(&k->plan, k->daemon, what, sizeof(what));

    if (v <= 0)
        return false;
    pthread_mutex_lock(&k->mu);
    k->killed = v;
    k->at = ph;
    k->after_ms = (testutil_now() - pt) * 1e3;
    snprintf(k->victim, sizeof(k->victim), "%s", what);
    pthread_mutex_unlock(&k->mu);
    kill(v, SIGKILL);
    return true;
}

static void *killer_main(void *arg)
{
    struct chaos_killer *k = arg;
    double deadline = -1.0, next_scan = 0.0;
    bool done = k->plan.kind == CHAOS_KILL_NONE;

    pthread_mutex_lock(&k->mu);
    k->running = true;
    pthread_cond_broadcast(&k->cv);
    pthread_mutex_unlock(&k->mu);
    for (;;) {
        enum chaos_phase ph;
        double pt, now = testutil_now(), wake;

        pthread_mutex_lock(&k->mu);
        ph = k->phase;
        pt = k->phase_t;
        pthread_mutex_unlock(&k->mu);
        if (ph == CHAOS_DONE)
            break;
        if (now >= next_scan) {
            note_pids(k);
            next_scan = now + SCAN_S;
        }
        if (!done && ph >= k->plan.phase && deadline < 0)
            deadline = (ph == k->plan.phase ? pt : now) + k->plan.delay_s;
        if (!done && deadline >= 0 && now >= deadline)
            done = try_kill(k, ph, pt);
        /* Sleep until the next look, the kill's moment or a new phase. */
        wake = next_scan;
        if (!done && deadline >= 0)
            wake = now >= deadline ? now + TICK_S
                                   : (deadline < wake ? deadline : wake);
        pthread_mutex_lock(&k->mu);
        if (k->phase == ph)
            wait_until(k, wake);
        pthread_mutex_unlock(&k->mu);
    }
    return NULL;
}

int chaos_killer_start(struct chaos_killer *k, const struct chaos_plan *p,
                       pid_t daemon)
{
    pthread_condattr_t ca;

    memset(k, 0, sizeof(*k));
    k->plan = *p;
    k->daemon = daemon;
    k->phase = CHAOS_IDLE;
    k->phase_t = testutil_now();
    chaos_pids_add(&k->seen, getpid());
    chaos_pids_add(&k->seen, daemon);
    if (pthread_mutex_init(&k->mu, NULL) != 0)
        return -1;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (pthread_cond_init(&k->cv, &ca) != 0) {
        pthread_condattr_destroy(&ca);
        pthread_mutex_destroy(&k->mu);
        return -1;
    }
    pthread_condattr_destroy(&ca);
    if (pthread_create(&k->thread, NULL, killer_main, k) != 0) {
        pthread_cond_destroy(&k->cv);
        pthread_mutex_destroy(&k->mu);
        return -1;
    }
    /* Not a moment before the thread runs its own code: under ASan a new
     * thread allocates as it starts (its stack bounds, with realloc), and
     * a node forked meanwhile inherits the allocator's lock held, so its
     * own first thread hangs (seen once in CI, iteration 91). */
    pthread_mutex_lock(&k->mu);
    while (!k->running)
        pthread_cond_wait(&k->cv, &k->mu);
    pthread_mutex_unlock(&k->mu);
    return 0;
}

void chaos_killer_phase(struct chaos_killer *k, enum chaos_phase phase)
{
    pthread_mutex_lock(&k->mu);
    k->phase = phase;
    k->phase_t = testutil_now();
    pthread_cond_broadcast(&k->cv);
    pthread_mutex_unlock(&k->mu);
}

bool chaos_killer_fired(struct chaos_killer *k)
{
    bool fired;

    pthread_mutex_lock(&k->mu);
    fired = k->killed != 0;
    pthread_mutex_unlock(&k->mu);
    return fired;
}

void chaos_killer_stop(struct chaos_killer *k)
{
    chaos_killer_phase(k, CHAOS_DONE);
    pthread_join(k->thread, NULL);
    note_pids(k);
    pthread_cond_destroy(&k->cv);
    pthread_mutex_destroy(&k->mu);
}
