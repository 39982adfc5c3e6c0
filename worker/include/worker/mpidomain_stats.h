/* How often this process's L4 gathered a global domain's descriptors
 * inside an MPI group (docs/mpi.md); for tests and benchmarks. */
#ifndef WORKER_MPIDOMAIN_STATS_H
#define WORKER_MPIDOMAIN_STATS_H

#include <stdint.h>
#include <strata/strata.h>

uint64_t worker_mpi_gathers(void);

/* TASK frames sent to remote node id of w so far (0 for other nodes). */
uint64_t worker_node_tasks_sent(const strata_worker *w, int id);
/* Frames to remote node id that the thread posting them sent itself
 * (orch/kick.c), not the connection thread. */
uint64_t worker_node_frames_kicked(const strata_worker *w, int id);

#endif
