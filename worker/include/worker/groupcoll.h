/* The collective an MPI group's rank offers its node (docs/mpi.md): the
 * rank program (strata-rank, which links MPI) installs it; the library
 * (worker/mpidomain.c) calls it to gather a global domain's window
 * descriptors among the group's ranks without going through the L4. */
#ifndef WORKER_GROUPCOLL_H
#define WORKER_GROUPCOLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <strata/strata.h>

/* Every rank of the group contributes len bytes of send; recv receives
 * size x len bytes in rank order (MPI_Allgather). Runs under the
 * installer's deadline: on expiry it does not return STRATA_OK (the rank
 * program ends the MPI job). Called by one thread at a time. */
typedef strata_err (*worker_allgather_fn)(const void *send, size_t len,
                                          void *recv, void *user);

/* Installs fn for this process's node; size: the group's rank count, rank:
 * this one. NULL fn: none (not an MPI rank). */
void worker_group_set_allgather(worker_allgather_fn fn, int rank, int size,
                                void *user);

/* ---- point-to-point exchanges (the halo mpi transport) ---- */

/* One message between this rank and another rank of the group. A send is
 * posted once *flag >= need (a chip of this node counts what it handed
 * over there); a receive lands len bytes at buf, then stores the time in
 * *stamp (CLOCK_MONOTONIC ns, when not NULL) and strata_signal_add(flag,
 * 1) wakes the chip waiting for it. Messages between one pair of ranks
 * with one tag arrive in the order posted (MPI's non-overtaking rule). */
struct worker_p2p {
    int peer; /* MPI rank */
    int tag;
    bool send;
    void *buf;
    size_t len; /* <= INT_MAX */
    volatile uint32_t *flag;
    uint32_t need;
    int64_t *stamp;
};

/* Runs every op to completion, progressing sends as their flags allow,
 * within timeout_s seconds; on expiry it does not return STRATA_OK (the
 * rank program ends the MPI job). Called by one thread at a time. */
typedef strata_err (*worker_exchange_fn)(struct worker_p2p *ops, size_t n,
                                         double timeout_s, void *user);

/* Installs fn for this process's node (NULL: none). */
void worker_group_set_exchange(worker_exchange_fn fn, void *user);
/* Runs ops through the installed exchange: STRATA_ENOTSUP when this
 * process is not a rank of an MPI group. One exchange at a time per
 * process (a lock). */
strata_err worker_group_exchange(struct worker_p2p *ops, size_t n,
                                 double timeout_s);

/* The L4: when node id of w is a rank of an MPI group, its rank in the
 * group (*rank_out) and a token naming the group (the same for every rank
 * of one group); NULL for any other node or a bad id. */
const void *worker_node_mpi_group(const strata_worker *w, int id,
                                  int *rank_out);
/* The L4: whether node id of w reported a host (boot id and name) other
 * than this process's; false for forked nodes and nodes that reported
 * none. */
bool worker_node_elsewhere(const strata_worker *w, int id);

#endif
