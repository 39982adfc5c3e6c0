/* A rank's collectives under a deadline (rank_coll.c). */
#ifndef MPIRANK_RANK_COLL_H
#define MPIRANK_RANK_COLL_H

/* After MPI_Init_thread (provided: the thread level it gave): starts the
 * helper thread and offers the node its allgather. */
void rank_coll_start(int rank, int size, int provided);
/* Before MPI_Finalize: ends the helper thread. */
void rank_coll_stop(void);

#endif
