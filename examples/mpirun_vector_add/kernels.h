/* What kernels.c (the example's callables) and main.c share. */
#ifndef MPIRUN_VECTOR_ADD_KERNELS_H
#define MPIRUN_VECTOR_ADD_KERNELS_H

#include <stdint.h>

#include <strata/strata.h>

#define VADD_KERNEL "vadd.add"
#define VADD_NODE_ORCH "vadd.node"

/* Written by each vadd.add task: which process did the work. The record
 * is passed STRATA_NO_DEP, so it creates no dependencies; on a remote node
 * it travels there and back with the task. */
struct vadd_who {
    int64_t pid;
    int64_t chip;
    int64_t elements;
    int64_t ns; /* time in the kernel */
};

/* Registers vadd.add and vadd.node. The module's entry point; the example
 * calls it too, before its worker forks the local node. */
STRATA_API strata_err strata_module_init(void);

#endif
