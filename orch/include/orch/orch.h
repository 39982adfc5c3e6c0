/* The orchestrator and scheduler of one worker, as seen by worker/. */
#ifndef ORCH_ORCH_H
#define ORCH_ORCH_H

#include "wire/mailbox.h"

#include <sys/types.h>

enum orch_ep_kind {
    ORCH_EP_CHIP = 1, /* an L2 chip of an L3 worker */
    ORCH_EP_SUB = 2,  /* a sub worker */
    ORCH_EP_NODE = 3, /* an L3 node of an L4 worker */
};

/* "chip", "sub worker" or "node". */
const char *orch_ep_kind_name(int kind);

/* A child process the scheduler sends frames to. worker/ fills the first
 * block after fork; the scheduler owns the rest. */
struct orch_endpoint {
    int kind; /* enum orch_ep_kind */
    int id;   /* chip id, or sub index */
    pid_t pid;
    int pidfd;     /* -1 where pidfd_open is unavailable; for a remote node,
                      an eventfd its connection thread writes when it is lost */
    int notify_fd; /* remote node: eventfd written after each post */
    /* Remote node: sends what was posted, in the calling thread (which
     * holds no scheduler lock), instead of the eventfd's wake-up of the
     * connection thread (orch_kicks_begin). NULL: the eventfd only. */
    void (*kick)(void *arg);
    void *kick_arg;
    const char *lost; /* remote node: why it was lost, set before pidfd */
    struct mbx *mbx;
    /* Scheduler state (under the scheduler lock). */
    bool dead;
    bool reaped;
    int status; /* waitpid status once reaped */
    /* Gone, but its status went to another wait: the program ignores
     * SIGCHLD (the kernel reaps) or waits for any child itself. */
    bool reaped_elsewhere;
    uint32_t harvested;
    uint32_t ring_slot[MBX_RING];
    uint32_t fifo_head;
    uint32_t fifo_tail;
    /* Tasks submitted to it and not posted yet, in submission order
     * (waiting on dependencies, or held in a group): an ordered control
     * frame (a window copy) goes after all that came before it. */
    uint32_t unposted_head;
    uint32_t unposted_tail;
    uint32_t ordered_queued; /* ordered control frames in the FIFO */
    struct orch_group *reserved;
    bool comm_ready; /* COMM_INIT done (domains) */
    /* Remote nodes complete frames out of order: those already finished
     * ahead of the ring's tail. */
    bool early[MBX_RING];
    /* Frames were posted without waking the child (orch_ctl.quiet). */
    bool quiet;
};

struct chip_backend_ops;

/* What a worker with LRU spill needs to hear from its scheduler (worker/
 * membudget.c): the buffers of a task (or of a group's n tasks, at once)
 * are held resident from before its
 * dependencies are planned (hold, which may restore spilled buffers and
 * block meanwhile) until the task has pinned them (unhold); a run's
 * arguments likewise while its orch fn runs (run true); and a buffer
 * that no unfinished task names any more can be spilled again (idle,
 * called with the scheduler's lock held: it must not block). */
struct orch_mem_hooks {
    strata_err (*hold)(void *ctx, const strata_args *const *a, size_t n,
                       bool run);
    void (*unhold)(void *ctx, const strata_args *const *a, size_t n, bool run);
    void (*idle)(void *ctx, strata_buffer *b);
    void *ctx;
};

struct orch_sched_cfg {
    strata_worker *worker;
    struct orch_endpoint *eps; /* chips first, then subs */
    size_t num_chips;
    size_t num_subs;
    struct mbx_shared *shared;
    int doorbell_fd;
    uint32_t registry_count; /* callables the children inherited */
    uint32_t directed_kind;  /* callables the directed endpoints run */
    /* The chips' backend, and the address range reserved before the
     * fork for windows every member maps at one address (0: none). */
    const struct chip_backend_ops *ops;
    uint64_t va_base, va_size;
    struct orch_mem_hooks mem; /* all NULL: none */
};

struct orch_sched;

strata_err orch_sched_create(const struct orch_sched_cfg *cfg,
                             struct orch_sched **out);
/* Starts the scheduler thread (after every fork). */
strata_err orch_sched_start(struct orch_sched *s);
/* Stops and joins the thread. Idempotent. */
void orch_sched_stop(struct orch_sched *s);
/* Takes finished frames and dispatches what they release, on the calling
 * thread: a remote node's connection thread that has just published a
 * completion saves waking the scheduler thread. */
void orch_harvest_now(struct orch_sched *s);
void orch_sched_destroy(struct orch_sched *s);
/* Whether this thread is inside an orch fn of a run of s, where draining
 * s can never end. */
bool orch_in_fn_of(const struct orch_sched *s);

/* Runs fn on the calling thread as a new run; *out tracks its fence. */
strata_err orch_run_start(struct orch_sched *s, strata_orch_fn fn,
                          const strata_args *args, void *user,
                          strata_run **out);
/* Waits until no task of any run is unfinished. */
void orch_drain(struct orch_sched *s);
/* Reaps a child the scheduler has not reaped; returns its status. */
void orch_endpoint_reap(struct orch_endpoint *ep, bool block);

/* STRATA_ESTATE while an unfinished task names b; otherwise forgets b's
 * dependency records and asks every child to unmap it. */
strata_err orch_buffer_release(struct orch_sched *s, strata_buffer *b);

/* Frees b's dependency records (no task may name it any more). */
void orch_deps_forget(strata_buffer *b);

#endif
