/* Control frames the layers above the scheduler (domains) send to chips:
 * posted through the same FIFOs as tasks, so each runs after the chip's
 * earlier work, optionally with dependencies of their own, and waited for
 * like tasks. Also: run-fence hooks and objects freed with the worker. */
#ifndef ORCH_CONTROL_H
#define ORCH_CONTROL_H

#include "orch/orch.h"

#define ORCH_CTL_REPLY_MAX 256

struct orch_ctl {
    /* in */
    uint32_t op; /* enum mbx_control_op */
    uint64_t arg[4];
    const void *staged; /* copied to the chip's staging area */
    uint32_t staged_len;
    /* out, valid once done */
    bool done;
    strata_err err;
    uint64_t out[4];
    uint32_t reply_len;
    uint8_t reply[ORCH_CTL_REPLY_MAX];
    char msg[STRATA_ERRMSG_MAX];
    /* Optional: the child's staged reply lands here (up to reply_cap). */
    void *staged_reply;
    uint32_t staged_reply_cap;
    uint32_t staged_reply_len;
    /* Post without waking the chip: it runs the frame before its next
     * task, or when a wait needs it (only for frames nobody waits on
     * right away; at most half the ring is left quiet). */
    bool quiet;
    /* Runs after every task submitted to its target before it, even one
     * still waiting on dependencies or held in a group (window copies:
     * they see what those tasks wrote). */
    bool ordered;
    /* Set by orch_control_withdraw_locked: the chip skips the frame. */
    bool withdrawn;
    /* Called under the scheduler lock when done (may be NULL). */
    void (*on_done)(struct orch_ctl *c, void *arg);
    void *on_done_arg;
};

typedef void (*orch_fence_fn)(struct orch_sched *s, void *arg);

struct orch_sched *orch_sched_of(strata_orch *o);
strata_run *orch_run_of(strata_orch *o);
/* STRATA_EINVAL for a NULL o, STRATA_ESTATE once its orch fn returned
 * (a run started with strata_worker_submit keeps o until strata_run_free;
 * strata_worker_run frees it as it returns), each naming fn. */
strata_err orch_usable(strata_orch *o, const char *fn);
size_t orch_num_chips(const struct orch_sched *s);
/* Endpoint index of chip_id, or -1. */
int orch_chip_index(const struct orch_sched *s, int chip_id);
int orch_chip_id(const struct orch_sched *s, int index);
void orch_lock(struct orch_sched *s);
void orch_unlock(struct orch_sched *s);

/* Queues c for chip index ep as work of o's run (o may be NULL). a (may
 * be NULL) orders it like a task's arguments; the frame carries them. */
strata_err orch_control_post(struct orch_sched *s, strata_orch *o, int ep,
                             struct orch_ctl *c, const strata_args *a);
/* The same with the lock held and without arguments; r may be NULL. */
strata_err orch_control_post_locked(struct orch_sched *s, strata_run *r, int ep,
                                    struct orch_ctl *c);
/* Withdraws c, a control frame for chip index ep that the chip has not
 * begun: c->withdrawn is set and true returned. Still queued, it completes
 * at once; in the chip's ring, the chip skips it and c completes when the
 * chip passes it (on_done runs either way, c->err is 0). False when c is
 * done, or the chip has taken it. */
bool orch_control_withdraw_locked(struct orch_sched *s, int ep,
                                  struct orch_ctl *c);
/* STRATA_EPEER, saying how, when chip index ep has died (a death the
 * scheduler thread has not noticed yet included); STRATA_OK otherwise. */
strata_err orch_chip_check(struct orch_sched *s, int ep);
/* Called under the scheduler lock once child ep (an endpoint index: a
 * chip, sub worker or node) is known dead, after its tasks have failed;
 * why says how ("chip 1 (pid 4242) died: killed by signal 9"). It must
 * not take the scheduler lock, nor wait. */
typedef void (*orch_death_fn)(struct orch_sched *s, int ep, const char *why,
                              void *arg);
#define ORCH_DEATH_MAX 4
/* Calls fn(s, ep, why, arg) at every later death of a child of s (domains
 * wake the members that wait on the dead one). Registering a pair twice
 * is a no-op; STRATA_ENOMEM past ORCH_DEATH_MAX pairs. Any thread. */
strata_err orch_on_death(struct orch_sched *s, orch_death_fn fn, void *arg);
/* Under the lock: true when child ep is known dead, with how in why. */
bool orch_child_dead_locked(struct orch_sched *s, int ep, char *why,
                            size_t cap);

struct chip_domain_ctl;

/* Marks the control page called name (chip/peer.h) with rank, naming the
 * death ("<label>: chip 1 (pid 4242) died: ..."), once child ep is known
 * dead: at once if it is already, else from the scheduler when it dies.
 * With create, a page nobody made by then is made (members that map the
 * windows later find it marked): the caller forgets the entries
 * (orch_mark_forget), then unlinks the name, when the domain goes.
 * Without create, a page no longer there is left alone (the domain is
 * going). key (a domain id) groups such entries. A node registers each
 * of its members of a global domain, an L4 each node with members
 * (orch_mark_page_on_death); local domains mark their own
 * (domain/lost.c). STRATA_EINVAL for a name or label too long
 * (CHIP_WINDOW_HANDLE_MAX, 64 bytes), STRATA_ENOMEM. Any thread not
 * holding the scheduler lock. */
strata_err orch_mark_on_death(struct orch_sched *s, int ep, const char *name,
                              bool create, const char *label, uint32_t rank,
                              uint64_t key);
/* The same for a page the caller holds mapped (chip_domain_ctl_map) until
 * it forgets key: the mark reaches that page even if its name was
 * unlinked (or made again) meanwhile. */
strata_err orch_mark_page_on_death(struct orch_sched *s, int ep,
                                   struct chip_domain_ctl *page,
                                   const char *label, uint32_t rank,
                                   uint64_t key);
/* Forgets every entry of key (before the page's name goes). */
void orch_mark_forget(struct orch_sched *s, uint64_t key);
/* The same under the scheduler lock. */
void orch_mark_forget_locked(struct orch_sched *s, uint64_t key);

/* Waits until every one of cs is done. Returns the first error, its
 * detail in strata_errmsg(). */
strata_err orch_control_wait(struct orch_sched *s, struct orch_ctl *const *cs,
                             size_t n);

/* One synchronous staged window copy (MBX_CTL_WINDOW_WRITE or _READ) to
 * endpoint ep with operands arg: data (n bytes, at most the staging area)
 * goes out, or comes back. Posts and waits. */
strata_err orch_control_staged_copy(struct orch_sched *s, strata_orch *o,
                                    int ep, const uint64_t arg[4], void *data,
                                    size_t n, bool write);
/* COMM_INIT, once per chip for the worker's life, to the chip endpoints in
 * eps that have not had it (rank = endpoint index among num_chips). */
strata_err orch_comm_init_chips(struct orch_sched *s, strata_orch *o,
                                const int *eps, size_t n);

/* Runs fn(s, arg) under the lock once o's run has no work left; fn may post
 * control frames (locked), which the fence then waits for. Hooks run last
 * registered first. */
strata_err orch_run_on_fence(strata_orch *o, orch_fence_fn fn, void *arg);
/* Frees obj with free_fn when the scheduler is destroyed. */
strata_err orch_sched_adopt(struct orch_sched *s, void *obj,
                            void (*free_fn)(void *));
/* The chips' backend (NULL when unknown). */
const struct chip_backend_ops *orch_backend_ops(const struct orch_sched *s);
/* The reserved range has two halves. Only chips of this worker map the
 * windows of local domains (ORCH_VA_LOCAL, the lower half, where chips
 * count their sleepers for strata_signal_add: chip/signal.c); a global
 * domain's windows (ORCH_VA_GLOBAL) have peers on other nodes. */
enum orch_va_kind { ORCH_VA_LOCAL, ORCH_VA_GLOBAL };
/* A piece of len bytes of that half of the reserved range at *out (under
 * the lock); false when none is left (or there is no range). */
bool orch_va_alloc_locked(struct orch_sched *s, enum orch_va_kind kind,
                          uint64_t len, uint64_t *out);
/* Gives a piece back (under the lock). */
void orch_va_free_locked(struct orch_sched *s, uint64_t start, uint64_t len);
/* Records err as the first error of the run with run_id, unless it has
 * one or has ended (under the lock): a failure of a control frame nobody
 * waits for. */
void orch_run_fail_locked(struct orch_sched *s, uint64_t run_id, strata_err err,
                          const char *msg);
uint64_t orch_run_id(const strata_run *r);
/* The worker-lifetime base communicator of chip index ep: true once it
 * was initialized (under the lock). */
bool orch_comm_ready(const struct orch_sched *s, int ep);

#endif
