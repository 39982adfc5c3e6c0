/* Kernel-side helpers: the domain context and cross-rank signal words. */
#include "base/clock.h"
#include "base/err.h"
#include "base/futex.h"
#include "chip_int.h"

#include <errno.h>
#include <stdbool.h>
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

/* Words in the windows a worker adopts for its chips' local domains lie
 * in the lower half of the address range it reserved before forking them,
 * and only chips of that worker map those windows: one count of the
 * worker's chips parked on such words tells strata_signal_add whether a
 * FUTEX_WAKE (a system call, most of a small exchange's cost) can find
 * anyone. Words anywhere else (global domains' windows, in the upper
 * half, whose peers live on other nodes; exchanged windows; host memory)
 * always wake. Set once at chip start, before any kernel runs. */
static struct {
    uintptr_t base, size;
    uint32_t *parked;
} tree;

void chip_signal_bind(uint32_t *parked, uint64_t base, uint64_t size)
{
    tree.base = (uintptr_t)base;
    tree.size = (uintptr_t)size;
    tree.parked = size ? parked : NULL;
}

static uint32_t *parked_count(const uint32_t *w)
{
    if (tree.parked && (uintptr_t)w - tree.base < tree.size)
        return tree.parked;
    return NULL;
}

void strata_signal_add(volatile uint32_t *word, uint32_t v)
{
    uint32_t *w = (uint32_t *)(uintptr_t)word;
    uint32_t *parked = parked_count(w);

    /* Both sides order their two accesses with sequentially consistent
     * atomics: either the waiter sees the new value before it parks, or
     * this sees its count. */
    __atomic_add_fetch(w, v, __ATOMIC_SEQ_CST);
    if (!parked || __atomic_load_n(parked, __ATOMIC_SEQ_CST) != 0)
        base_futex_wake(w);
}

struct reach {
    const uint32_t *w;
    uint32_t at_least;
};

static bool reached(void *arg)
{
    const struct reach *r = arg;

    return __atomic_load_n(r->w, __ATOMIC_ACQUIRE) >= r->at_least;
}

/* Parks until *w >= at_least or the deadline, counted in parked. */
static int park(uint32_t *w, uint32_t at_least, uint64_t deadline,
                uint32_t *parked)
{
    uint32_t v;
    int r = 0;

    if (parked)
        __atomic_add_fetch(parked, 1, __ATOMIC_SEQ_CST);
    v = __atomic_load_n(w, __ATOMIC_SEQ_CST);
    if (v < at_least)
        r = base_futex_wait(w, v, deadline);
    if (parked)
        __atomic_sub_fetch(parked, 1, __ATOMIC_SEQ_CST);
    return r;
}

strata_err strata_signal_wait(const volatile uint32_t *word, uint32_t at_least,
                              double timeout_s)
{
    uint32_t *w = (uint32_t *)(uintptr_t)word;
    uint64_t deadline = base_deadline_after(timeout_s);
    uint32_t *parked = parked_count(w);

    struct reach r = {w, at_least};

    /* A few pauses, then a yield per look (base_spin_until): with more
     * ranks than cores the awaited peer gets this core at once. */
    if (base_spin_until(reached, &r, base_spin_budget()))
        return STRATA_OK;
    while (__atomic_load_n(w, __ATOMIC_ACQUIRE) < at_least)
        if (park(w, at_least, deadline, parked) == ETIMEDOUT &&
            __atomic_load_n(w, __ATOMIC_ACQUIRE) < at_least)
            return base_fail(STRATA_ETIMEDOUT,
                             "signal word still %u after %.3f s, waiting "
                             "for %u",
                             __atomic_load_n(w, __ATOMIC_ACQUIRE), timeout_s,
                             at_least);
    return STRATA_OK;
}
