/* The address range every process of the tree reserved before the fork
 * (worker/spawn.c): the worker hands out pieces of it for windows that
 * every member maps at the same address, local domains' from the lower
 * half and global domains' from the upper one (orch/control.h). First fit
 * over a sorted list of free extents per half, coalesced on free; under
 * the scheduler lock. */
#include "base/alloc.h"
#include "base/err.h"
#include "chip/chip.h"
#include "orch_int.h"

#include <string.h>

static strata_err pool_init(struct va_pool *p, uint64_t base, uint64_t size)
{
    p->base = base;
    p->size = size;
    p->num = 0;
    if (!size)
        return STRATA_OK;
    p->free = base_calloc(8, sizeof(*p->free));
    if (!p->free)
        return base_fail(STRATA_ENOMEM, "out of memory for the window range");
    p->cap = 8;
    p->free[0].start = base;
    p->free[0].len = size;
    p->num = 1;
    return STRATA_OK;
}

strata_err orch_va_init(struct orch_sched *s, uint64_t base, uint64_t size)
{
    uint64_t low = chip_va_local_size(size); /* chips bind this part */
    strata_err err = pool_init(&s->va[ORCH_VA_LOCAL], base, low);

    if (!err)
        err = pool_init(&s->va[ORCH_VA_GLOBAL], base + low, size - low);
    if (err)
        orch_va_fini(s);
    return err;
}

void orch_va_fini(struct orch_sched *s)
{
    for (int k = ORCH_VA_LOCAL; k <= ORCH_VA_GLOBAL; k++) {
        base_free(s->va[k].free);
        s->va[k].free = NULL;
        s->va[k].num = 0;
    }
}

bool orch_va_alloc_locked(struct orch_sched *s, enum orch_va_kind kind,
                          uint64_t len, uint64_t *out)
{
    struct va_pool *p = &s->va[kind];

    for (uint32_t i = 0; i < p->num; i++) {
        struct va_extent *e = &p->free[i];

        if (e->len < len)
            continue;
        *out = e->start;
        e->start += len;
        e->len -= len;
        if (e->len == 0) {
            memmove(e, e + 1, (p->num - i - 1) * sizeof(*e));
            p->num--;
        }
        return true;
    }
    return false;
}

void orch_va_free_locked(struct orch_sched *s, uint64_t start, uint64_t len)
{
    struct va_pool *p = &s->va[ORCH_VA_GLOBAL];
    uint32_t i = 0;

    if (start - s->va[ORCH_VA_LOCAL].base < s->va[ORCH_VA_LOCAL].size)
        p = &s->va[ORCH_VA_LOCAL];

    while (i < p->num && p->free[i].start < start)
        i++;
    /* Merge with the extent before and/or after. */
    if (i > 0 && p->free[i - 1].start + p->free[i - 1].len == start) {
        p->free[i - 1].len += len;
        if (i < p->num &&
            p->free[i - 1].start + p->free[i - 1].len == p->free[i].start) {
            p->free[i - 1].len += p->free[i].len;
            memmove(&p->free[i], &p->free[i + 1],
                    (p->num - i - 1) * sizeof(*p->free));
            p->num--;
        }
        return;
    }
    if (i < p->num && start + len == p->free[i].start) {
        p->free[i].start = start;
        p->free[i].len += len;
        return;
    }
    if (p->num == p->cap) {
        void *bigger = base_realloc(p->free, 2 * p->cap * sizeof(*p->free));

        if (!bigger)
            return; /* the piece is lost to later windows, nothing else */
        p->free = bigger;
        p->cap *= 2;
    }
    memmove(&p->free[i + 1], &p->free[i], (p->num - i) * sizeof(*p->free));
    p->free[i].start = start;
    p->free[i].len = len;
    p->num++;
}
