/* A forked L3 node of an L4 worker: it starts its own chips and subs under
 * the tree's one deadline, then runs each orch task it is sent as a run of
 * its own, with the L4's buffers mapped by identity (no copies). */
#include "base/err.h"
#include "base/fault.h"
#include "base/log.h"
#include "chip/registry.h"
#include "trace/trace.h"
#include "worker_int.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static strata_args node_args; /* the running task's arguments */

static void ring(int fd)
{
    uint64_t one = 1;

    if (write(fd, &one, sizeof(one)) < 0)
        return; /* a full counter already means "wake up" */
}

static strata_err resolve(strata_worker *w, const struct mbx_frame *f,
                          strata_args *a)
{
    strata_err err = wire_args_decode(f->args, f->args_len, a);

    for (uint32_t i = 0; !err && i < a->num_tensors; i++) {
        const struct wire_tensor *t = &a->tensors[i];
        strata_buffer *b;

        err = worker_buffer_import(w, t->creator, t->buffer_id, t->buffer_size,
                                   &b);
        if (!err) {
            a->buffers[i] = b;
            a->data[i] = (char *)b->data + t->offset;
        }
    }
    return err;
}

static strata_err run_orch(strata_worker *w, const struct mbx_frame *f)
{
    const struct chip_callable *c = chip_registry_find(f->digest);
    strata_orch_fn fn;
    strata_err err;

    if (!c || c->kind != STRATA_CALLABLE_ORCH)
        return base_fail(STRATA_ENOENT,
                         "node has no orch callable with this digest "
                         "(register callables before strata_worker_init)");
    if (BASE_FAULT("node.task"))
        return base_fail(STRATA_EIO, "fault point node.task");
    memcpy(&fn, &c->fn, sizeof(fn));
    if (f->arg[0] == 0) {
        err = resolve(w, f, &node_args);
        return err ? err : strata_worker_run(w, fn, &node_args, NULL);
    }
    /* A deadline: the arguments may outlive this frame. */
    {
        strata_args *a = NULL;

        err = strata_args_create(&a);
        if (!err)
            err = resolve(w, f, a);
        if (!err)
            err = worker_run_bounded(w, fn, &a, f->arg[0]);
        strata_args_destroy(a);
        return err;
    }
}

/* run_orch, recorded as a task span of this node. */
static strata_err run_traced(strata_worker *w, struct mbx_frame *f)
{
    const struct chip_callable *c = chip_registry_find(f->digest);
    uint64_t bytes = 0, t0 = trace_now();
    strata_err err = run_orch(w, f);
    strata_args a;

    if (wire_args_decode(f->args, f->args_len, &a) == STRATA_OK)
        for (uint32_t i = 0; i < a.num_tensors; i++)
            bytes += a.tensors[i].nbytes;
    mbx_trace_ran(f, t0, bytes, c ? c->name : NULL, err);
    return err;
}

/* How long a node whose parent died may take to end in order: its task,
 * then again its teardown. */
#define ORPHAN_GRACE_S 10
/* How long it waits to tell a thread of its parent ending from the whole
 * parent process ending (which hands children from thread to thread). */
#define SETTLE_STEPS 200
#define SETTLE_STEP_NS 250000L

static struct mbx *node_mbx; /* this node's mailbox from its parent */
static pid_t node_parent;    /* the process that forked this node */
static pid_t node_self;      /* this node (its chips inherit on_term) */
static volatile sig_atomic_t node_ending; /* orphaned: ending in order */

static void die_now(void)
{
    /* SIGKILL to itself, which no sanitizer defers. */
    kill(getpid(), SIGKILL);
}

/* The parent process, after up to 50 ms for a dying one to finish. */
static pid_t settled_parent(void)
{
    struct timespec step = {0, SETTLE_STEP_NS};
    pid_t pp = getppid();

    for (int i = 0; i < SETTLE_STEPS && pp == node_parent; i++) {
        nanosleep(&step, NULL);
        pp = getppid();
    }
    return pp;
}

/* SIGTERM, which is also the parent-death signal (sent when the thread
 * that forked this node ends; with a killed parent, each of its threads
 * in turn hands the node to the next and signals again).
 * - The node is ending in order already: nothing more.
 * - After the SHUTDOWN word (the parent's teardown escalation), from
 *   anyone but the parent, or when the parent lives on (a thread of it
 *   ended: strata_worker_init's rule), or in a chip forked from here
 *   before it set its own disposition: the node ends at once.
 * - The parent process is gone: the node ends in order, as if its parent
 *   had shut it down. Its chips stop, and the names of the global
 *   domains its members made leave /dev/shm, which nobody else would
 *   remove (the L4 that knew them is gone). A task that never ends must
 *   not keep an orphan alive: SIGALRM's default action ends it (and its
 *   chips with it) once the grace is over. */
static void on_term(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    pid_t pp;

    (void)sig;
    (void)uc;
    if (getpid() != node_self)
        die_now();
    if (node_ending) {
        errno = saved;
        return;
    }
    if (__atomic_load_n(&node_mbx->h.shutdown, __ATOMIC_SEQ_CST) ||
        si->si_pid != node_parent)
        die_now();
    pp = settled_parent();
    if (pp == node_parent)
        die_now();
    node_ending = 1;
    mbx_shutdown(node_mbx);
    signal(SIGALRM, SIG_DFL);
    alarm(ORPHAN_GRACE_S);
    errno = saved;
}

static void end_in_order_when_orphaned(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_term;
    sa.sa_flags = SA_SIGINFO | SA_RESTART; /* user orch fns run here */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
}

/* A domain command in the staging area; its reply goes back there. */
static strata_err node_cmd(strata_worker *w, struct mbx_frame *f)
{
    struct wire_buf reply;
    strata_err err;

    if (f->staged_len > MBX_STAGING_SIZE)
        return base_fail(STRATA_EPROTO, "node command of %llu bytes",
                         (unsigned long long)f->staged_len);
    wire_buf_init(&reply);
    /* arg[2]: how many frames the L4 sent at once (gdomain_batch.c). */
    err = gnode_handle_batch(w, node_mbx->staging, f->staged_len,
                             (uint32_t)f->arg[2], &reply);
    if (!err && reply.len > MBX_STAGING_SIZE)
        err = base_fail(STRATA_EPROTO, "node reply too large");
    if (!err) {
        memcpy(node_mbx->staging, reply.data, reply.len);
        f->staged_len = reply.len;
    }
    wire_buf_fini(&reply);
    return err;
}

static strata_err control(strata_worker *w, struct mbx_frame *f)
{
    strata_buffer *b;

    switch (f->op) {
    case MBX_CTL_PING:
        return STRATA_OK;
    case MBX_CTL_UNMAP_BUFFER:
        /* A run past its deadline may still use it: it stays mapped until
         * this node ends. */
        if (worker_bounded_late_running(w))
            return STRATA_OK;
        b = worker_buffer_find(w, (int)f->arg[1], f->arg[0]);
        return b ? strata_buffer_release(b) : STRATA_OK;
    case MBX_CTL_NODE_CMD:
        return node_cmd(w, f);
    case MBX_CTL_WINDOW_WRITE:
    case MBX_CTL_WINDOW_READ:
        if (f->arg[2] > MBX_STAGING_SIZE ||
            (f->op == MBX_CTL_WINDOW_WRITE && f->staged_len != f->arg[2]))
            return base_fail(STRATA_EPROTO, "window copy of %llu bytes",
                             (unsigned long long)f->arg[2]);
        f->staged_len = f->op == MBX_CTL_WINDOW_READ ? f->arg[2] : 0;
        return gnode_window_copy(w, f->arg[0], (uint32_t)f->arg[3], f->arg[1],
                                 node_mbx->staging, f->arg[2],
                                 f->op == MBX_CTL_WINDOW_WRITE);
    }
    return base_fail(STRATA_ENOTSUP, "a node does not handle control op %u",
                     f->op);
}

static void serve(strata_worker *w, struct mbx *m,
                  const struct mbx_shared *shared, int doorbell)
{
    struct mbx_frame *f;
    strata_err err;

    while ((f = mbx_child_wait(m)) != NULL) {
        err = f->kind != MBX_TASK ? control(w, f)
              : trace_enabled()   ? run_traced(w, f)
                                  : run_orch(w, f);
        f->result = (int32_t)err;
        if (err)
            snprintf(f->msg, sizeof(f->msg), "%s", strata_errmsg());
        fflush(stdout);
        if (mbx_child_complete(m, shared))
            ring(doorbell);
    }
}

/* Drops everything of the parent this process does not need. */
static void forget_parent(strata_worker *parent, size_t index)
{
    for (size_t j = 0; j < worker_num_directed(parent) + parent->num_subs;
         j++) {
        if (j == index)
            continue;
        if (parent->eps[j].pidfd >= 0)
            close(parent->eps[j].pidfd);
        if (parent->eps[j].notify_fd >= 0)
            close(parent->eps[j].notify_fd);
        mbx_destroy(parent->eps[j].mbx);
    }
}

_Noreturn void worker_node_main(strata_worker *parent, size_t index,
                                uint64_t deadline)
{
    strata_worker *w = parent->nodes[index].local;
    struct mbx *m = parent->eps[index].mbx;

    node_mbx = m;
    struct mbx_shared *shared = parent->shared;
    int doorbell = parent->doorbell_fd;
    strata_err err;

    node_parent = parent->creator;
    node_self = getpid();
    end_in_order_when_orphaned();
    if (getppid() != parent->creator)
        _exit(70);
    setpgid(0, 0);
    signal(SIGINT, SIG_IGN);
    base_fault_after_fork();
    base_log_set_role("l%d[%zu]", w->level, index);
    trace_proc_open("node %zu (L%d)", index, w->level);
    forget_parent(parent, index);
    worker_buffers_forget_inherited(parent);
    /* This process is the node now: its buffers carry its pid. */
    w->creator = getpid();
    w->owned = false;
    /* The tree's one deadline, not a fresh budget per hop. */
    err = worker_spawn(w, deadline);
    mbx_child_init_done(m, err, err ? strata_errmsg() : "");
    ring(doorbell);
    if (err)
        _exit(71);
    serve(w, m, shared, doorbell);
    if (node_ending)
        alarm(ORPHAN_GRACE_S); /* a fresh grace for the teardown */
    if (!worker_bounded_settle(w, 5.0)) {
        LOG_WARN("a task past its deadline does not end; leaving without "
                 "teardown");
        _exit(72);
    }
    if (strata_worker_destroy(w) != STRATA_OK)
        LOG_WARN("node teardown: %s", strata_errmsg());
    fflush(NULL);
    _exit(0);
}
