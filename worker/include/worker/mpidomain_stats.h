/* How often this process's L4 gathered a global domain's descriptors
 * inside an MPI group (docs/mpi.md); for tests and benchmarks. */
#ifndef WORKER_MPIDOMAIN_STATS_H
#define WORKER_MPIDOMAIN_STATS_H

#include <stdint.h>

uint64_t worker_mpi_gathers(void);

#endif
