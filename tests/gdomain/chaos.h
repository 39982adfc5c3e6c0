/*
 * The chaos test (test_chaos.c): what its iterations, its killer thread
 * (chaos_kill.c) and its daemon share.
 *
 * One iteration builds an L4 with a forked L3 node and a remote L3 node
 * (a session of a real strata-node on 127.0.0.1, TLS 1.3 with a fresh
 * PSK), each with chips 0 and 1 and one sub worker; runs the mixed global
 * allreduce (run 1: a 4-rank global domain allocated with retain, the
 * allreduce on the four chips and a task on each node's sub; run 2: the
 * sums read back, the domain released); and destroys the L4. Meanwhile
 * the killer thread SIGKILLs one process chosen by the iteration's plan
 * at a chosen moment of a chosen phase.
 */
#ifndef STRATA_CHAOS_H
#define STRATA_CHAOS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "chaos_tree.h"

enum chaos_kind {
    CHAOS_KILL_NONE,
    CHAOS_KILL_CHIP,    /* chip 0 or 1 of the forked or the remote node */
    CHAOS_KILL_SUB,     /* sub 0 of the forked or the remote node */
    CHAOS_KILL_NODE,    /* the forked L3 node */
    CHAOS_KILL_SESSION, /* the daemon's session process (remote L3) */
    CHAOS_KILL_DAEMON,  /* strata-node itself */
    CHAOS_KINDS
};

enum chaos_phase {
    CHAOS_IDLE,
    CHAOS_INIT,    /* strata_worker_init */
    CHAOS_ALLOC,   /* strata_orch_allocate_global_domain in run 1 */
    CHAOS_RUN,     /* the rest of run 1: allreduce and subs */
    CHAOS_RELEASE, /* run 2: read back, release; the wait for freed */
    CHAOS_DESTROY, /* strata_worker_destroy */
    CHAOS_DONE,
    CHAOS_PHASES
};

extern const char *const chaos_kind_name[CHAOS_KINDS];
extern const char *const chaos_phase_name[CHAOS_PHASES];

struct chaos_plan {
    enum chaos_kind kind;
    enum chaos_phase phase;
    int side;           /* chip and sub: 0 the forked node, 1 the remote */
    int chip;           /* chip: 0 or 1 */
    double delay_s;     /* after the phase began */
    uint64_t kernel_us; /* busy time of each allreduce kernel */
    uint64_t sub_us;    /* busy time of each sub task */
    uint32_t seed;      /* the data */
};

/* The killer thread and what it did; mu guards every field. */
struct chaos_killer {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC; broadcast at each phase */
    pthread_t thread;
    bool running; /* set by the thread once it runs its own code */
    enum chaos_phase phase;
    double phase_t; /* testutil_now() when phase began */
    struct chaos_plan plan;
    pid_t daemon;           /* its pid, 0 if none */
    pid_t killed;           /* 0 until it kills */
    char victim[64];        /* "chip 1 of the remote node" */
    enum chaos_phase at;    /* the phase it killed in */
    double after_ms;        /* how long after that phase began */
    struct chaos_pids seen; /* every pid seen below the test */
};

/* Starts the killer for one iteration (phase CHAOS_IDLE). 0 or -1. */
int chaos_killer_start(struct chaos_killer *k, const struct chaos_plan *p,
                       pid_t daemon);
/* Moves to phase (wakes the killer). */
void chaos_killer_phase(struct chaos_killer *k, enum chaos_phase phase);
/* True once it has killed (the victim may still be dying). */
bool chaos_killer_fired(struct chaos_killer *k);
/* CHAOS_DONE, joins it. */
void chaos_killer_stop(struct chaos_killer *k);

#define CHAOS_TMP "strata-chaos-" /* the daemon's /tmp directories */

/* From the environment (test_chaos.c lists the variables). */
struct chaos_config {
    uint64_t seed;
    double seconds;
    long iterations, only;
    uint64_t wait_ms;       /* CHAOS_WAIT_FOREVER: -1 */
    unsigned kinds, phases; /* bit masks */
    bool known_bugs;
    double hang_s; /* the watchdog's bound */
};
extern struct chaos_config chaos_cfg;
/* Kills of a known bug tolerated so far (chaos_known_result). */
extern unsigned chaos_known_hits;

/* Fills chaos_cfg from the environment. */
void chaos_config_read(void);
/* Iteration i's plan: a function of the seed and i only (plans a known
 * bug skips are drawn again). */
void chaos_plan_for(long i, struct chaos_plan *p);
/* "kill chip 1 (remote) in run +12.0 ms" into buf. */
void chaos_plan_describe(const struct chaos_plan *p, char *buf, size_t cap);
/* True, after printing it, when error e of step ("init", "run 1", ...)
 * after a kill of kind is a known bug (unless CHAOS_KNOWN_BUGS=1). */
bool chaos_known_result(enum chaos_kind kind, const char *step, int e);

struct chaos_daemon {
    pid_t pid; /* 0 when not running */
    char dir[64], secret[128], log[128], endpoint[64];
};
/* Starts strata-node; 0, or -1 with the reason printed. */
int chaos_daemon_start(struct chaos_daemon *d);
/* SIGTERM, reaped, files removed; 0 when it exited with status 0. */
int chaos_daemon_stop(struct chaos_daemon *d);
/* Removes its directory (after it ended). */
void chaos_daemon_files_remove(struct chaos_daemon *d);
/* The end of its log, on stderr. */
void chaos_daemon_log_tail(const struct chaos_daemon *d);

#endif /* STRATA_CHAOS_H */
