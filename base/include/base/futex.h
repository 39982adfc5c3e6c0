/* Waiting on 32-bit words in memory shared between processes: spin
 * briefly, then park in the kernel. Never a fixed sleep. */
#ifndef BASE_FUTEX_H
#define BASE_FUTEX_H

#include <stdint.h>

/* Parks while *word == expected, up to deadline (BASE_NEVER = forever).
 * Returns 0 when woken or the word changed, ETIMEDOUT, or EINTR. */
int base_futex_wait(uint32_t *word, uint32_t expected, uint64_t deadline);
/* Wakes every process parked on word. */
void base_futex_wake(uint32_t *word);
/* One pause instruction for spin loops. */
void base_cpu_relax(void);
/* Spin iterations before parking; STRATA_SPIN overrides (0 = park at once).
 * Sized for a few tens of microseconds. */
unsigned base_spin_budget(void);

#endif
