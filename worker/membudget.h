/* A worker's memory budgets: its host buffers count against "ram". */
#ifndef WORKER_MEMBUDGET_H
#define WORKER_MEMBUDGET_H

#include <pthread.h>
#include <stdint.h>
#include <strata/tier.h>

struct worker_mem {
    pthread_mutex_t mu;
    uint64_t budget[STRATA_TIER_COUNT]; /* TIER_NO_BUDGET: none */
    uint64_t live, peak;                /* ram bytes of owned buffers */
    uint64_t buffers;                   /* owned buffers counted */
    char *spill_dir;                    /* NULL: none */
    int eviction;                       /* strata_eviction */
};

/* Checks cfg's budgets, spill_dir and eviction (STRATA_EINVAL naming the
 * field; STRATA_ENOTSUP for LRU eviction). */
strata_err worker_mem_check(const strata_worker_config *cfg);
/* Fills m from a checked cfg (STRATA_ENOMEM). */
strata_err worker_mem_init(struct worker_mem *m,
                           const strata_worker_config *cfg);
void worker_mem_fini(struct worker_mem *m);
/* Counts nbytes more on ram, or STRATA_EBUDGET (nothing counted). */
strata_err worker_mem_reserve(struct worker_mem *m, uint64_t nbytes);
void worker_mem_unreserve(struct worker_mem *m, uint64_t nbytes);

#endif
