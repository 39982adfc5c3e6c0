/* CPU placement of the processes of a tree. */
#ifndef BASE_CPU_H
#define BASE_CPU_H

/* With STRATA_PIN=1 in the environment, binds the calling process, the
 * index-th of count siblings, to the index-th CPU it may run on, and
 * returns that CPU. -1, changing nothing, when STRATA_PIN is unset or 0,
 * when the siblings outnumber the CPUs (with more processes than cores the
 * kernel shares the cores out better than a fixed binding), or when
 * binding failed (logged). */
int base_cpu_pin(unsigned index, unsigned count);

#endif
