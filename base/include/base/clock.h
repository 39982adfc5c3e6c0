/* Monotonic time and absolute deadlines. */
#ifndef BASE_CLOCK_H
#define BASE_CLOCK_H

#include <stdint.h>
#include <strata/strata.h>

#define BASE_NEVER UINT64_MAX

uint64_t base_now_ns(void);
/* now + seconds; BASE_NEVER when seconds < 0; now for NaN (never a wait
 * for ever by mistake); at most 1e9 s from now. */
uint64_t base_deadline_after(double seconds);
/* STRATA_EINVAL "fn: arg is NaN" for a NaN timeout; STRATA_OK otherwise
 * (negative: for ever, and +inf: as long as a deadline goes, are valid). */
strata_err base_check_timeout(double seconds, const char *fn, const char *arg);
/* Milliseconds left until deadline, for poll(): -1 for BASE_NEVER, 0 when
 * passed, rounded up otherwise. */
int base_deadline_poll_ms(uint64_t deadline);

#endif
