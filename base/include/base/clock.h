/* Monotonic time and absolute deadlines. */
#ifndef BASE_CLOCK_H
#define BASE_CLOCK_H

#include <stdint.h>

#define BASE_NEVER UINT64_MAX

uint64_t base_now_ns(void);
/* now + seconds; BASE_NEVER when seconds < 0. */
uint64_t base_deadline_after(double seconds);
/* Milliseconds left until deadline, for poll(): -1 for BASE_NEVER, 0 when
 * passed, rounded up otherwise. */
int base_deadline_poll_ms(uint64_t deadline);

#endif
