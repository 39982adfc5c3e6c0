/* A worker's memory budgets: its host buffers count against "ram"; with
 * LRU eviction, idle buffers spill to files and come back when a task
 * names them (docs/tiers.md, "Worker budgets"). */
#ifndef WORKER_MEMBUDGET_H
#define WORKER_MEMBUDGET_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <strata/tier.h>

/* One owned buffer of an LRU worker. */
struct worker_mem_buf {
    strata_buffer *b;
    uint64_t last_use;  /* the worker's use clock at its last use */
    uint32_t sub_holds; /* submissions naming it, until their task pins it */
    uint32_t run_holds; /* orch fns running with it among their args */
    uint32_t claims;    /* the restore token's holder needs it resident */
    char *spill_path;   /* its file while spilled, else NULL */
};

struct worker_mem {
    pthread_mutex_t mu;
    /* Broadcast when a buffer may have become spillable (idle, unheld,
     * released) or the restore token was given back. */
    pthread_cond_t changed;
    uint32_t waiters;  /* threads in changed (read without mu: atomic) */
    bool restoring;    /* a thread holds the restore token */
    uint32_t creating; /* LRU: buffers reserved, not yet added (they will
                          be idle once made) */
    uint64_t budget[STRATA_TIER_COUNT]; /* TIER_NO_BUDGET: none */
    uint64_t live, peak;                /* ram bytes of resident buffers */
    uint64_t buffers;                   /* resident owned buffers */
    uint64_t spilled_live, spilled_peak, spilled_buffers;
    uint64_t spills, restores, bytes_out, bytes_in;
    struct worker_mem_buf **tab; /* LRU: every owned buffer */
    size_t num, cap;
    uint64_t clock;
    char *spill_dir; /* NULL: none */
    char owner_tag[48];
    int eviction; /* strata_eviction */
};

/* Checks cfg's budgets, spill_dir and eviction (STRATA_EINVAL naming the
 * field; LRU eviction needs spill_dir). */
strata_err worker_mem_check(const strata_worker_config *cfg);
/* Fills m from a checked cfg (STRATA_ENOMEM); removes the spill files of
 * dead processes from spill_dir. */
strata_err worker_mem_init(struct worker_mem *m,
                           const strata_worker_config *cfg);
/* Removes what is left (spill files of buffers not released). */
void worker_mem_fini(struct worker_mem *m);
/* Counts nbytes more on ram. With LRU eviction it spills idle buffers, or
 * waits for some to become idle, to make room; STRATA_EBUDGET (nothing
 * counted) when it cannot; STRATA_EIO when a spill fails. */
strata_err worker_mem_reserve(struct worker_mem *m, uint64_t nbytes);
void worker_mem_unreserve(struct worker_mem *m, uint64_t nbytes);
/* An LRU worker's new buffer b (reserved): tracked for spilling. */
strata_err worker_mem_add(struct worker_mem *m, strata_buffer *b);
/* b (owned, reserved) is being released: its bytes given back, its spill
 * file removed. */
void worker_mem_forget(struct worker_mem *m, strata_buffer *b);
/* The host is about to touch b (strata_buffer_data, _read, _write):
 * restored if spilled, and the most recently used. */
strata_err worker_mem_access(struct worker_mem *m, strata_buffer *b);
/* As worker_mem_access, and b stays resident (not spilled by another
 * thread) until worker_mem_let_go: for a copy in or out of its bytes. */
strata_err worker_mem_access_held(struct worker_mem *m, strata_buffer *b);
void worker_mem_let_go(struct worker_mem *m, strata_buffer *b);

/* The scheduler's hooks (struct orch_mem_hooks); ctx is the worker. */
strata_err worker_mem_hold(void *ctx, const strata_args *const *a, size_t n,
                           bool run);
void worker_mem_unhold(void *ctx, const strata_args *const *a, size_t n,
                       bool run);
void worker_mem_idle(void *ctx, strata_buffer *b);

#endif
