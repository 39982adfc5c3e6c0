/* What the halo mpi transport (graph/halo_exec_mpi*.c) needs from the
 * layers above it, installed by them: the point-to-point exchange an MPI
 * rank's program offers its node (worker/mpirank/rank_halo.c), and what
 * an L4 knows of its nodes (worker/mpihalo.c). graph never includes the
 * worker's headers; they install their functions here. */
#ifndef GRAPH_HALO_MPI_H
#define GRAPH_HALO_MPI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <strata/strata.h>

/* One message between this rank and another rank of the group. A send is
 * posted once *flag >= need (a chip of this node counts what it handed
 * over there); a receive lands len bytes at buf, then stores the time in
 * *stamp (CLOCK_MONOTONIC ns, when not NULL) and strata_signal_add(flag,
 * 1) wakes the chip waiting for it. Messages between one pair of ranks
 * with one tag arrive in the order posted (MPI's non-overtaking rule). */
struct halo_p2p {
    int peer; /* MPI rank */
    int tag;
    bool send;
    void *buf;
    size_t len; /* <= INT_MAX */
    volatile uint32_t *flag;
    uint32_t need;
    int64_t *stamp;
};

/* Runs every op to completion, posting sends as their flags allow, within
 * timeout_s seconds; on expiry it does not return STRATA_OK (the rank
 * program ends the MPI job). n 0: STRATA_OK at once. When a child of this
 * process dies after halo_mpi_deaths() read since (a chip of the node:
 * its flags will never move), it posts every send at once with what the
 * buffers hold, so that the peers finish and the call fails with the
 * chip's death rather than at timeout_s. */
typedef strata_err (*halo_exchange_fn)(struct halo_p2p *ops, size_t n,
                                       double timeout_s, uint64_t since,
                                       void *user);

/* Children of this process that died so far (the worker counts them);
 * chip is the dead child's chip id, or -1 for another kind of child. */
void halo_mpi_child_died(int chip);
uint64_t halo_mpi_deaths(void);
/* Whether chip (its id) of this process died: a call that names it
 * cannot run its kernels, and must stand in for it from the start. */
bool halo_mpi_chip_dead(int chip);

/* This process's chips are being killed (its session is abandoned, or
 * its runs passed their deadline): no flag will move again, so an
 * exchange in flight, or one begun later, cannot finish. Sticky. An
 * exchange fn polls halo_mpi_abandoned() and gives up (the rank program
 * ends the MPI job) rather than wait out its timeout. */
void halo_mpi_abandon(void);
bool halo_mpi_abandoned(void);

/* Installs fn for this process's node (NULL: none). */
void halo_mpi_set_exchange(halo_exchange_fn fn, void *user);
/* Runs ops through the installed exchange: STRATA_ENOTSUP when this
 * process is not a rank of an MPI group. One exchange at a time per
 * process (a lock). */
strata_err halo_mpi_exchange(struct halo_p2p *ops, size_t n, double timeout_s,
                             uint64_t since);

/* The L4's view of its nodes. group: when node id of w is a rank of an
 * MPI group, its rank in the group (*rank_out) and a token naming the
 * group (the same for every rank of one group), else NULL. elsewhere:
 * whether the node reported a host (boot id and name) other than this
 * process's. */
struct halo_node_queries {
    const void *(*group)(const strata_worker *w, int id, int *rank_out);
    bool (*elsewhere)(const strata_worker *w, int id);
};

/* Installs the queries (the worker module does, when the library loads). */
void halo_mpi_set_queries(const struct halo_node_queries *q);

#endif
