/* The Worker object: configuration, children, buffers, lifecycle. */
#ifndef WORKER_INT_H
#define WORKER_INT_H

#include "domain/global.h"
#include "membudget.h"
#include "orch/orch.h"
#include "wire/chip_backend.h"
#include "wire/frame.h"

#include <pthread.h>

enum worker_state {
    WORKER_CREATED = 0,
    WORKER_READY = 1,
};

struct remote_node;
struct net;

struct worker_node {
    strata_worker *local;       /* forked at init */
    struct remote_node *remote; /* or connected at init */
    bool comm_inited;           /* COMM_INIT answered (global domains) */
    bool lazy_names; /* named its last domain's windows lazily (atomic) */
};

struct strata_worker {
    int level;
    char platform[32];
    char comm_profile[32];
    int *chip_ids;
    int *device_ordinals; /* cuda: num_chips entries, or NULL */
    size_t num_chips;
    size_t num_subs;
    double startup_timeout_s;
    int state;
    pid_t creator;
    const struct chip_backend_ops *ops;
    /* children (after init) */
    struct orch_endpoint *eps; /* chips, then subs */
    struct mbx_shared *shared;
    int doorbell_fd;
    struct orch_sched *sched;
    /* level >= 4: the L(level-1) nodes below, owned: forked (local) or
     * reached over TCP (remote) */
    struct worker_node *nodes;
    size_t num_nodes;
    size_t cap_nodes;
    bool owned;      /* added to a parent, which destroys it */
    struct net *net; /* the connection thread of remote nodes */
    /* global domains, node and L4 sides (domain/global/) */
    struct gdomain_state gd;
    bool poisoned; /* a failed COMMIT or ABORT: runs are refused */
    /* node side: runs of tasks with deadlines (deadline.c) */
    uint32_t bounded_running; /* futex word */
    bool bounded_late;        /* one passed its deadline */
    /* address range reserved before the fork for adopted windows */
    void *va_base;
    size_t va_size;
    /* memory budgets (membudget.c) */
    struct worker_mem mem;
    /* buffers */
    pthread_mutex_t buf_mu;
    strata_buffer **bufs;
    size_t num_bufs;
    size_t cap_bufs;
    /* timeline trace: the JSON file (config or STRATA_TRACE), or NULL;
     * traced once strata_worker_init started the session */
    char *trace_path;
    bool traced;
};

/* Children the scheduler targets directly: chips (L3) or nodes (L4+). */
static inline size_t worker_num_directed(const strata_worker *w)
{
    return w->level == 3 ? w->num_chips : w->num_nodes;
}

/* spawn.c: fork the tree under an absolute deadline. */
strata_err worker_spawn(strata_worker *w, uint64_t deadline);
/* node.c: the forked L3 node process; never returns. */
_Noreturn void worker_node_main(strata_worker *parent, size_t index,
                                uint64_t deadline);
/* STRATA_ESTATE naming fn unless this is the process that created w (a
 * user's fork has only a copy of it). */
strata_err worker_check_process(const strata_worker *w, const char *fn);
/* Frees a worker that never started (a node's object in its parent). */
void worker_free(strata_worker *w);
/* Grows w->nodes by one slot; *slot_out is zeroed. */
strata_err worker_node_slot(strata_worker *w, struct worker_node **slot_out);

/* deadline.c: runs fn as a run of w. deadline_ms 0: strata_worker_run.
 * Otherwise fn runs on a thread of its own; past the deadline this returns
 * STRATA_ETIMEDOUT and the run goes on in the background, owning *args
 * (set to NULL); in time, *args is left as it was. Errors as
 * strata_worker_run. */
strata_err worker_run_bounded(strata_worker *w, strata_orch_fn fn,
                              strata_args **args, uint64_t deadline_ms);
/* Before destroying w: when a run passed its deadline and still goes on,
 * kills w's chips and subs and waits up to grace_s for such runs to end.
 * False when one is still running (w must not be destroyed then). */
bool worker_bounded_settle(strata_worker *w, double grace_s);
/* True while a run that passed its deadline may still be going: its
 * buffers must not be freed under it. */
bool worker_bounded_late_running(strata_worker *w);
/* Runs with a deadline still going, in time or past it: each holds a
 * thread of its own. */
uint32_t worker_bounded_count(strata_worker *w);

/* remote.c: remote nodes of an L4. */
void remote_node_free(struct remote_node *r);
/* Fills the endpoint of remote node index (eventfds, private mailbox). */
strata_err remote_endpoint_init(strata_worker *w, size_t index);
/* Starts the connection thread and every remote node's connection; the
 * nodes report ready through their mailboxes like forked children. */
strata_err remote_start(strata_worker *w, uint64_t deadline);
/* Says GOODBYE to every remote node and stops the thread. Idempotent. */
void remote_stop(strata_worker *w);
/* mpigroup.c: frees w's MPI groups (at worker free), mpirun ended. */
void mpigroup_free_all(strata_worker *w);
/* teardown.c: stops and reaps every child by deadline; frees mailboxes. */
void worker_teardown_children(strata_worker *w);
/* SIGKILLs every chip and sub of w (and their groups), so work running on
 * them fails at once; they are reaped at teardown. NULL is a no-op. */
void worker_kill_children(strata_worker *w);
/* buffer.c */
void worker_buffers_free_all(strata_worker *w);
/* In a new child: drops the mappings of w's buffers it inherited through
 * fork, so a release (which unmaps what the child mapped by id) leaves
 * nothing mapped. */
void worker_buffers_forget_inherited(strata_worker *w);
/* The buffer (creator, id) as mapped here: a proxy of a buffer created
 * above, mapped by name on first use, never unlinked here. */
strata_err worker_buffer_import(strata_worker *w, int creator, uint64_t id,
                                size_t size, strata_buffer **out);
strata_buffer *worker_buffer_find(strata_worker *w, int creator, uint64_t id);
uint64_t worker_buffer_next_id(void);
strata_err worker_buffer_track(strata_worker *w, strata_buffer *b);
/* dbuffer.c: frees a device buffer's memory on its chip (a dead chip's
 * went with it); and strata_buffer_write/_read of one, staged through the
 * chip's mailbox (range and pins checked by the caller). */
void worker_device_buffer_free(strata_buffer *b);
strata_err worker_device_buffer_copy(strata_buffer *b, size_t offset,
                                     void *data, size_t n, bool write);

/* rbuffer.c: a request id for a message the L4 builds itself. */
uint64_t worker_request_id(void);
/* The first of n consecutive request ids no other command has. */
uint64_t worker_request_ids(uint32_t n);
struct wire_control;
struct wire_msg;
/* Sends c (its request id is filled in) to remote node `node` through
 * the scheduler, after the node's earlier work, and waits. The reply
 * lands in reply (cap bytes) and is decoded into *out, which the caller
 * frees with wire_msg_free on STRATA_OK. A reply with an error is that
 * error, named after the node. o may be NULL (outside runs). */
strata_err worker_remote_control(strata_worker *w, strata_orch *o, int node,
                                 struct wire_control *c, void *reply,
                                 size_t cap, struct wire_msg *out);
/* n bytes between data and remote node `node` as CONTROLs built from tmpl
 * (op, and every operand but offset, nbytes and data; the offset counts
 * from tmpl's), in pieces that fit the staging area, one after another. */
strata_err worker_remote_copy(strata_worker *w, strata_orch *o, int node,
                              const struct wire_control *tmpl, void *data,
                              size_t n, bool write);
void worker_reclaim_stale_segments(void);

#endif
