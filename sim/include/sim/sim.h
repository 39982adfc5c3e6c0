/* The simulated backend: chips are CPU processes, device memory is host
 * memory, kernels are plain C functions. */
#ifndef SIM_SIM_H
#define SIM_SIM_H

#include "wire/chip_backend.h"

extern const struct chip_backend_ops sim_backend_ops;

#endif
