/* The simulated backend: chips are CPU processes, device memory is host
 * memory, kernels are plain C functions, windows are POSIX shm segments. */
#ifndef SIM_SIM_H
#define SIM_SIM_H

#include "wire/chip_backend.h"

extern const struct chip_backend_ops sim_backend_ops;

/* "/strata-<uid>-<creator>-d<alloc>-r<rank>": uid, the worker's pid, the
 * allocation and the rank, so a stale segment never collides. */
void sim_window_name(char *out, size_t cap, int creator, uint64_t alloc_id,
                     uint32_t rank);

#endif
