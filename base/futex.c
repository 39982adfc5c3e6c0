/* futex(2) wrappers. The words live in MAP_SHARED memory, so the shared
 * (non-private) futex operations are used. */
#include "base/futex.h"
#include "base/clock.h"

#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int base_futex_wait(uint32_t *word, uint32_t expected, uint64_t deadline)
{
    struct timespec ts;
    struct timespec *tsp = NULL;

    if (deadline != BASE_NEVER) {
        uint64_t now = base_now_ns();
        uint64_t left = deadline > now ? deadline - now : 0;

        if (left == 0)
            return ETIMEDOUT;
        ts.tv_sec = (time_t)(left / 1000000000u);
        ts.tv_nsec = (long)(left % 1000000000u);
        tsp = &ts;
    }
    if (syscall(SYS_futex, word, FUTEX_WAIT, expected, tsp, NULL, 0) == 0)
        return 0;
    if (errno == EAGAIN)
        return 0;
    return errno;
}

void base_futex_wake(uint32_t *word)
{
    syscall(SYS_futex, word, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0);
}

void base_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

bool base_spin_until(bool (*ready)(void *), void *arg, unsigned spins)
{
    uint64_t until;

    for (unsigned i = 0; i < spins && i < BASE_SPIN_PAUSES; i++) {
        if (ready(arg))
            return true;
        base_cpu_relax();
    }
    if (spins <= BASE_SPIN_PAUSES)
        return false;
    until = base_now_ns() + (uint64_t)spins * BASE_SPIN_NS_PER_SPIN;
    do {
        if (ready(arg))
            return true;
        sched_yield();
    } while (base_now_ns() < until);
    return false;
}

unsigned base_spin_budget(void)
{
    static int budget = -1;
    int b = __atomic_load_n(&budget, __ATOMIC_RELAXED);

    if (b < 0) {
        const char *env = getenv("STRATA_SPIN");

        b = env ? atoi(env) : 2000;
        if (b < 0)
            b = 0;
        __atomic_store_n(&budget, b, __ATOMIC_RELAXED);
    }
    return (unsigned)b;
}
