/* A rank's point-to-point exchange for the halo mpi transport
 * (rank_halo.c). */
#ifndef MPIRANK_RANK_HALO_H
#define MPIRANK_RANK_HALO_H

/* After rank_coll_start: offers the node the exchange (when the helper
 * thread runs). */
void rank_halo_start(int rank);
/* Before rank_coll_stop: withdraws it. */
void rank_halo_stop(void);

#endif
