/* The Worker object: configuration, children, buffers, lifecycle. */
#ifndef WORKER_INT_H
#define WORKER_INT_H

#include "orch/orch.h"
#include "wire/chip_backend.h"

#include <pthread.h>

enum worker_state {
    WORKER_CREATED = 0,
    WORKER_READY = 1,
};

struct strata_worker {
    int level;
    char platform[32];
    char comm_profile[32];
    int *chip_ids;
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
    /* buffers */
    pthread_mutex_t buf_mu;
    strata_buffer **bufs;
    size_t num_bufs;
    size_t cap_bufs;
};

/* spawn.c */
strata_err worker_spawn(strata_worker *w);
/* teardown.c: stops and reaps every child by deadline; frees mailboxes. */
void worker_teardown_children(strata_worker *w);
/* buffer.c */
void worker_buffers_free_all(strata_worker *w);
void worker_reclaim_stale_segments(void);

#endif
