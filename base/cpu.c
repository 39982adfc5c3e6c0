/* Optional pinning of chip processes (STRATA_PIN). Chips are not pinned by
 * default: the kernel places them, and may leave two chips that wait on
 * each other sharing one core for a while. Pinning the i-th chip of a
 * worker to the i-th allowed CPU keeps them apart, at the price of never
 * moving off a core something else keeps busy. With more chips than CPUs
 * nothing is bound (as Open MPI binds by default only when the ranks
 * fit). */
#define _GNU_SOURCE
#include "base/cpu.h"
#include "base/env.h"
#include "base/log.h"

#include <errno.h>
#include <sched.h>
#include <string.h>

int base_cpu_pin(unsigned index, unsigned count)
{
    cpu_set_t allowed, one;
    int k, cpu;

    if (!base_env_flag("STRATA_PIN"))
        return -1;
    if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
        LOG_WARN("STRATA_PIN: sched_getaffinity: %s", strerror(errno));
        return -1;
    }
    if (count > (unsigned)CPU_COUNT(&allowed) || index >= count)
        return -1;
    k = (int)index;
    for (cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, &allowed) && k-- == 0)
            break;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof(one), &one) != 0) {
        LOG_WARN("STRATA_PIN: cannot bind to CPU %d: %s", cpu, strerror(errno));
        return -1;
    }
    return cpu;
}
