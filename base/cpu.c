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
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

/* How often /proc/loadavg is read again (ns). */
#define LOAD_RECHECK_NS 20000000ull

/* The runnable count: the number before the '/' of "0.50 0.40 0.30
 * 3/412 9876"; -1 if it cannot be read. */
static int runnable_now(void)
{
    char buf[128];
    const char *slash;
    ssize_t n;
    int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);

    if (fd < 0)
        return -1;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    slash = strchr(buf, '/');
    if (!slash)
        return -1;
    while (slash > buf && slash[-1] >= '0' && slash[-1] <= '9')
        slash--;
    return atoi(slash);
}

bool base_cpu_oversubscribed(void)
{
    static uint64_t next_ns;
    static int busy;
    struct timespec ts;
    uint64_t now;
    int running;
    long cpus;

    /* The coarse clock is a vDSO read of the last tick: enough here. */
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    if (now < __atomic_load_n(&next_ns, __ATOMIC_RELAXED))
        return __atomic_load_n(&busy, __ATOMIC_RELAXED) != 0;
    __atomic_store_n(&next_ns, now + LOAD_RECHECK_NS, __ATOMIC_RELAXED);
    running = runnable_now();
    cpus = sysconf(_SC_NPROCESSORS_ONLN);
    __atomic_store_n(&busy, running > 0 && cpus > 0 && running > cpus,
                     __ATOMIC_RELAXED);
    return __atomic_load_n(&busy, __ATOMIC_RELAXED) != 0;
}
