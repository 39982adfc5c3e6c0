/* Private state of the orchestrator and scheduler. One mutex (mu) guards
 * every field here; the scheduler thread and the orch thread take turns. */
#ifndef ORCH_INT_H
#define ORCH_INT_H

#include "orch/control.h"
#include "orch/orch.h"
#include "wire/chip_backend.h"

#include <poll.h>
#include <pthread.h>

#define ORCH_NONE UINT32_MAX
#define ORCH_MAX_SCOPES 16
#define ORCH_SUB_DEPTH 2 /* frames queued per sub worker: keeps balance */

enum task_state {
    TASK_FREE = 0,
    TASK_PENDING, /* waiting for dependencies */
    TASK_READY,   /* queued for a target */
    TASK_RUNNING, /* posted to a mailbox */
};

struct edge {
    uint32_t slot;
    uint32_t gen;
};

struct orch_task {
    uint32_t slot;
    uint32_t gen; /* bumped when the slot is freed */
    uint8_t state;
    uint8_t kind; /* enum mbx_kind */
    bool poisoned;
    bool not_run; /* the target could not begin it (MBX_RESULT_NOT_RUN) */
    uint8_t scope_depth;
    strata_err poison_err;
    struct strata_run *run; /* NULL for control frames */
    strata_callable callable;
    int ep; /* endpoint index; -1 = the sub queue */
    struct orch_group *group;
    uint32_t fanin;
    struct edge *fanout;
    uint32_t num_fanout;
    uint32_t cap_fanout;
    uint32_t pending_fanout; /* edges planned, not yet committed */
    uint64_t pred_mark;      /* orch_deps_commit: a predecessor of the
                                task being committed when it equals the
                                sched's dep_mark (deps.c) */
    strata_buffer **bufs;    /* distinct buffers pinned by this task */
    uint32_t num_bufs;
    uint32_t cap_bufs;
    void *blob; /* encoded args */
    uint32_t blob_len;
    uint32_t blob_cap;
    uint32_t op;     /* control op */
    uint64_t op_arg; /* control operands */
    uint64_t op_arg2;
    struct orch_ctl *ctl; /* control request with replies, or NULL */
    uint32_t next;        /* queue link */
    /* Its endpoint's unposted list (directed tasks until posted). */
    uint32_t ep_prev, ep_next;
    bool ep_listed;
    uint64_t seq; /* submission order (slot allocation) */
    /* Timeline trace, set only while tracing: record-clock times
     * (trace_now) of the submission and the post, the endpoint it was
     * posted to, and its callable's name (NULL: looked up at the end).
     * trace_by_target: its chip or node recorded the task for us
     * (mbx_trace_ran set the frame's trace_recorded); else the completion
     * records it with its own clock reading. */
    uint64_t trace_submit;
    uint64_t trace_post;
    bool trace_by_target;
    int trace_ep;
    const char *trace_name;
};

struct orch_group {
    uint32_t n;
    uint32_t resolved; /* members whose dependencies are settled */
    uint32_t finished; /* members completed; the last one frees g */
    bool poisoned;
    strata_err poison_err;
    bool reserved;
    struct orch_group *next; /* ready-group queue */
    struct edge members[];
};

struct orch_scope {
    uint32_t active;
    strata_err err;
    char msg[STRATA_ERRMSG_MAX];
};

struct fence_hook {
    orch_fence_fn fn;
    void *arg;
};

struct adopted {
    void *obj;
    void (*free_fn)(void *);
};

struct strata_orch {
    struct orch_sched *sched;
    struct strata_run *run;
    uint64_t deadline_ms; /* strata_orch_set_deadline; 0 = none */
};

struct strata_run {
    uint64_t id;
    struct orch_sched *sched;
    uint32_t active; /* tasks submitted, not finished */
    bool closed;     /* the orch fn returned */
    bool done;       /* fence passed; result final */
    bool detached;   /* handle freed before the fence */
    strata_err err;  /* first error */
    char msg[STRATA_ERRMSG_MAX];
    uint32_t depth; /* open scopes */
    struct orch_scope scopes[ORCH_MAX_SCOPES];
    struct strata_orch orch;
    struct strata_run *next_live;
    /* Runs whose handle the caller holds (not yet strata_run_free'd):
     * the scheduler's destroy leaves them pointing at no scheduler. */
    struct strata_run *held_prev, *held_next;
    struct fence_hook *hooks; /* run once, last first, at the fence */
    uint32_t num_hooks;
    uint32_t cap_hooks;
    bool hooks_fired;
    /* Timeline trace, while tracing: when fn began and returned (ns). */
    uint64_t trace_begin;
    uint64_t trace_fn_end;
};

struct va_extent {
    uint64_t start, len;
};

/* One part of the reserved range (varange.c). */
struct va_pool {
    uint64_t base, size;
    struct va_extent *free; /* sorted, disjoint */
    uint32_t num, cap;
};

/* A control page to mark when child ep dies (orch_mark_on_death). */
struct orch_mark {
    int ep;
    uint32_t rank;
    uint64_t key;
    struct chip_domain_ctl *page; /* the caller's mapping, or NULL */
    bool create;                  /* by name: make a page not there */
    char name[CHIP_WINDOW_HANDLE_MAX];
    char label[64];
};

struct orch_sched {
    pthread_mutex_t mu;
    pid_t pid; /* the process that made it: a fork has only a copy */
    /* While tracing: a trace_now reading of this moment, taken once for
     * a submission and the post that follows it at once; 0 when none is;
     * under mu. */
    uint64_t trace_at;
    strata_worker *worker;
    struct orch_endpoint *eps;
    size_t num_chips;
    size_t num_subs;
    struct mbx_shared *shared;
    int doorbell_fd;
    uint32_t registry_count;
    uint32_t directed_kind;
    /* task slots */
    struct orch_task **slots;
    uint32_t num_slots;
    uint32_t free_head;
    uint32_t unfinished; /* tasks and control frames not yet completed */
    uint64_t task_seq;   /* last orch_task.seq handed out */
    uint64_t dep_mark;   /* last orch_task.pred_mark handed out */
    /* queues */
    uint32_t sub_head;
    uint32_t sub_tail;
    struct orch_group *groups_head;
    struct orch_group *groups_tail;
    /* runs */
    uint64_t next_run_id;
    struct strata_run *live_runs;
    struct strata_run *held_runs;
    /* waking waiters: bumped on every completion */
    uint32_t progress_seq;
    uint32_t waiters;
    /* Threads in a wait's spin, each harvesting as it looks (atomic): the
     * scheduler thread sleeps on this word meanwhile, instead of spinning
     * beside them (sched_on_lookers set), until it drops to 0. */
    uint32_t lookers;
    uint32_t sched_on_lookers;
    /* completion worklist (avoids recursion in poison cascades) */
    uint32_t *work;
    uint32_t num_work;
    uint32_t cap_work;
    /* objects freed with the scheduler */
    struct adopted *adopted;
    uint32_t num_adopted;
    uint32_t cap_adopted;
    /* called at every child's death (orch_on_death) */
    struct {
        orch_death_fn fn;
        void *arg;
    } on_death[ORCH_DEATH_MAX];
    uint32_t num_on_death;
    /* control pages to mark at a child's death (lost.c) */
    struct orch_mark *marks;
    uint32_t num_marks;
    uint32_t cap_marks;
    /* windows: the backend, and the reserved address range (varange.c) */
    const struct chip_backend_ops *ops;
    struct orch_mem_hooks mem; /* the worker's budget (LRU spill) */
    struct va_pool va[2];      /* by enum orch_va_kind */
    /* thread */
    struct pollfd *pfd; /* doorbell, then one pidfd per endpoint */
    pthread_t thread;
    bool thread_started;
    bool stopping;
};

/* dispatch.c: wakes every child holding frames posted quietly (before a
 * wait that may need them done). Under the lock. */
void orch_ring_quiet_locked(struct orch_sched *s);

/* lost.c: marks the control pages registered for child ep. */
void orch_marks_died_locked(struct orch_sched *s, int ep, const char *why);

/* varange.c */
strata_err orch_va_init(struct orch_sched *s, uint64_t base, uint64_t size);
void orch_va_fini(struct orch_sched *s);

/* slots.c */
strata_err orch_slot_alloc(struct orch_sched *s, struct orch_task **out);
void orch_slot_free(struct orch_sched *s, struct orch_task *t);
/* The endpoint's unposted list (orch_endpoint): a directed task joins at
 * commit and leaves when posted or freed (dropping twice is harmless). */
void orch_unposted_add(struct orch_sched *s, struct orch_task *t);
void orch_unposted_drop(struct orch_sched *s, struct orch_task *t);
struct orch_task *orch_slot_live(struct orch_sched *s, struct edge e);
void orch_queue_push(struct orch_sched *s, uint32_t *head, uint32_t *tail,
                     struct orch_task *t);
/* Takes t out of the queue; false when it is not there. */
bool orch_queue_remove(struct orch_sched *s, uint32_t *head, uint32_t *tail,
                       struct orch_task *t);
struct orch_task *orch_queue_pop(struct orch_sched *s, uint32_t *head,
                                 uint32_t *tail);
strata_err orch_reserve(void **arr, uint32_t *cap, uint32_t need, size_t elem);

/* submit.c: STRATA_EINVAL unless every tensor of a (NULL: none) is a
 * buffer of this worker that endpoint ep (-1: the sub queue) can name. */
strata_err orch_check_args(const struct orch_sched *s, const strata_args *a,
                           int ep);

/* deps.c */
struct dep_plan;
strata_err orch_deps_plan(struct orch_sched *s, const strata_args *a,
                          struct orch_task *t, struct dep_plan **out);
void orch_deps_commit(struct orch_sched *s, struct dep_plan *p,
                      const strata_args *a, struct orch_task *t);
void orch_deps_plan_free(struct orch_sched *s, struct dep_plan *p);
/* t failed in run run_id: its write records outlive it until that run's
 * fence, so later readers in the run are poisoned. */
void orch_deps_mark_failed(struct orch_task *t, uint64_t run_id);
/* Finishes poisoned tasks queued on the work list, then dispatches. */
void orch_settle(struct orch_sched *s);
/* Kicks (kick.c): between begin and end, this thread's posts to an
 * endpoint with a kick send nothing yet (orch_kick_later is true); end,
 * called without the scheduler lock, kicks each once. */
void orch_kicks_begin(const struct orch_sched *s);
bool orch_kick_later(const struct orch_sched *s, struct orch_endpoint *ep);
void orch_kicks_end(const struct orch_sched *s);

/* dispatch.c */
void orch_make_ready(struct orch_sched *s, struct orch_task *t);
void orch_dispatch(struct orch_sched *s);

/* complete.c */
/* enum trace_target of tasks posted to ep (NULL: the sub queue). */
uint16_t orch_trace_target(const struct orch_endpoint *ep);
void orch_complete(struct orch_sched *s, struct orch_task *t, strata_err err,
                   const char *msg);
bool orch_harvest(struct orch_sched *s);
void orch_endpoint_died(struct orch_sched *s, struct orch_endpoint *ep);
/* How a dead child ended ("killed by signal 9", "exited with status 3",
 * "how is unknown: ..."), or "" before it was reaped. */
void orch_death_cause(const struct orch_endpoint *ep, char *buf, size_t cap);
const char *orch_task_label(struct orch_sched *s, const struct orch_task *t,
                            char *buf, size_t cap);

/* run.c */
void orch_run_record_error(struct strata_run *r, strata_err err,
                           const char *fmt, ...) STRATA_PRINTF(3, 4);
void orch_run_task_done(struct orch_sched *s, struct orch_task *t,
                        strata_err err, const char *msg);
/* Spins, then parks, until done(arg) holds (checked under mu, with
 * progress made in between). STRATA_ETIMEDOUT past deadline. */
strata_err orch_wait(struct orch_sched *s, bool (*done)(void *), void *arg,
                     uint64_t deadline);

/* devcheck.c: STRATA_EINVAL, naming tensor i, when b is a device buffer
 * that a task for endpoint ep (-1: the sub queue) may not name. */
strata_err orch_device_tensor_check(const struct orch_sched *s,
                                    const strata_buffer *b, uint32_t i, int ep);

#endif
