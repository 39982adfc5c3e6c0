/* Waiting on 32-bit words in memory shared between processes: spin
 * briefly, then park in the kernel. Never a fixed sleep. */
#ifndef BASE_FUTEX_H
#define BASE_FUTEX_H

#include <stdbool.h>
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
/* Looks at ready(arg) until it is true (true returned) or spins looks'
 * worth of time has passed (false): BASE_SPIN_PAUSES looks with a pause
 * between, then a sched_yield between looks for up to spins x
 * BASE_SPIN_NS_PER_SPIN ns in all. A waiter on a busy machine thus gives
 * its core to whoever it waits for instead of spinning on it; on an idle
 * one a yield returns at once. spins = 0: no look at all. */
#define BASE_SPIN_PAUSES 16
#define BASE_SPIN_NS_PER_SPIN 50
bool base_spin_until(bool (*ready)(void *), void *arg, unsigned spins);

#endif
