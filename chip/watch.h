/* The control pages of the domains this chip maps, looked up by window
 * address in strata_signal_wait (chip/signal.c). Only the chip's main
 * thread changes the list, between tasks (control frames). */
#ifndef CHIP_WATCH_H
#define CHIP_WATCH_H

#include "chip/peer.h"

/* From now on a wait on a word in one of the n ranges [bases[i], +size)
 * also watches ctl, which the list owns from here on (even on failure:
 * STRATA_ENOMEM, ctl unmapped). */
strata_err chip_watch_add(uint64_t alloc_id, struct chip_domain_ctl *ctl,
                          const uintptr_t *bases, uint32_t n, uintptr_t size);
/* Forgets alloc_id's ranges and unmaps its control page (none: no-op). */
void chip_watch_remove(uint64_t alloc_id);
void chip_watch_remove_all(void);

#endif
