/* The collective an MPI group's rank offers its node (docs/mpi.md): the
 * rank program (strata-rank, which links MPI) installs it; the library
 * (worker/mpidomain.c) calls it to gather a global domain's window
 * descriptors among the group's ranks without going through the L4. */
#ifndef WORKER_GROUPCOLL_H
#define WORKER_GROUPCOLL_H

#include <stddef.h>
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

#endif
