/* A rank's collectives under a deadline (rank_coll.c). */
#ifndef MPIRANK_RANK_COLL_H
#define MPIRANK_RANK_COLL_H

#include <stdbool.h>

/* After MPI_Init_thread (provided: the thread level it gave): starts the
 * helper thread and offers the node its allgather. */
void rank_coll_start(int rank, int size, int provided);
/* Runs fn(arg) on the helper thread (the one that calls MPI) and returns
 * what it returned; MPI_ERR_OTHER without a helper. fn bounds its own
 * time. Not concurrently with the allgather (one caller at a time). */
int rank_coll_call(int (*fn)(void *), void *arg);
/* Whether the helper thread runs. */
bool rank_coll_started(void);
/* Before MPI_Finalize: ends the helper thread. */
void rank_coll_stop(void);

#endif
