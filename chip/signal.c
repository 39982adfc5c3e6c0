/* Kernel-side helpers: the domain context and cross-rank signal words. */
#include "base/clock.h"
#include "base/err.h"
#include "base/futex.h"
#include "chip_int.h"

#include <errno.h>
#include <sched.h>
#include <strata/domain.h>

const strata_comm_context *strata_chip_comm_context(strata_chip *chip,
                                                    uint64_t device_ctx)
{
    const struct chip_backend_ops *ops;

    if (!chip || chip->cfg->is_sub)
        return NULL;
    ops = chip->cfg->ops;
    return ops->comm_context ? ops->comm_context(chip->state, device_ctx)
                             : NULL;
}

void strata_signal_add(volatile uint32_t *word, uint32_t v)
{
    uint32_t *w = (uint32_t *)(uintptr_t)word;

    __atomic_add_fetch(w, v, __ATOMIC_SEQ_CST);
    base_futex_wake(w);
}

strata_err strata_signal_wait(const volatile uint32_t *word, uint32_t at_least,
                              double timeout_s)
{
    uint32_t *w = (uint32_t *)(uintptr_t)word;
    uint64_t deadline = base_deadline_after(timeout_s);
    unsigned spins = base_spin_budget();
    uint32_t v;

    for (;;) {
        v = __atomic_load_n(w, __ATOMIC_ACQUIRE);
        if (v >= at_least)
            return STRATA_OK;
        if (spins > 0) {
            /* With more ranks than cores the peer being waited for may
             * need this core: give it up now and then while spinning. */
            if (--spins % 256 == 0)
                sched_yield();
            else
                base_cpu_relax();
            continue;
        }
        if (base_futex_wait(w, v, deadline) == ETIMEDOUT &&
            __atomic_load_n(w, __ATOMIC_ACQUIRE) < at_least)
            return base_fail(STRATA_ETIMEDOUT,
                             "signal word still %u after %.3f s, waiting "
                             "for %u",
                             __atomic_load_n(w, __ATOMIC_ACQUIRE), timeout_s,
                             at_least);
    }
}
