/* CPU placement of the processes of a tree. */
#ifndef BASE_CPU_H
#define BASE_CPU_H

/* With STRATA_PIN=1 in the environment, binds the calling process to the
 * index-th CPU it may run on (modulo how many those are) and returns that
 * CPU; -1 when STRATA_PIN is unset or 0 (nothing changes), or binding
 * failed (logged). */
int base_cpu_pin(unsigned index);

#endif
