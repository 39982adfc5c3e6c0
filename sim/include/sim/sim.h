/* The simulated backend: chips are CPU processes, device memory is host
 * memory, kernels are plain C functions, windows are POSIX shm segments. */
#ifndef SIM_SIM_H
#define SIM_SIM_H

#include "wire/chip_backend.h"

extern const struct chip_backend_ops sim_backend_ops;

/* "/strata-<uid>-<creator>-d<alloc>-r<rank>[-<token>]": uid, the worker's
 * pid, the allocation and the rank, and for windows the worker makes (which
 * the members create, without O_EXCL, when they first map them) the
 * creating process's random token (8 hex digits; 0: none), so that a
 * segment left by a dead process that had the same pid is never taken
 * for a new one. */
void sim_window_name(char *out, size_t cap, int creator, uint64_t alloc_id,
                     uint32_t rank, uint32_t token);

#endif
