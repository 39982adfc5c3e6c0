/* Monotonic time. */
#include "base/clock.h"
#include "base/err.h"

#include <math.h>
#include <time.h>

uint64_t base_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t base_deadline_after(double seconds)
{
    /* NaN is no time at all: a caller that let one through times out at
     * once rather than waiting for ever (public calls refuse it). */
    if (isnan(seconds))
        return base_now_ns();
    if (seconds < 0)
        return BASE_NEVER;
    if (seconds > 1e9)
        seconds = 1e9;
    return base_now_ns() + (uint64_t)(seconds * 1e9);
}

int base_deadline_poll_ms(uint64_t deadline)
{
    uint64_t now;
    uint64_t ms;

    if (deadline == BASE_NEVER)
        return -1;
    now = base_now_ns();
    if (now >= deadline)
        return 0;
    ms = (deadline - now + 999999) / 1000000;
    return ms > 0x7fffffff ? 0x7fffffff : (int)ms;
}

strata_err base_check_timeout(double seconds, const char *fn, const char *arg)
{
    if (isnan(seconds))
        return base_fail(STRATA_EINVAL, "%s: %s is NaN", fn, arg);
    return STRATA_OK;
}
