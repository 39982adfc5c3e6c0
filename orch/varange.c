/* The address range every process of the tree reserved before the fork
 * (worker/spawn.c): the worker hands out pieces of it for windows that
 * every member maps at the same address. First fit over a sorted list of
 * free extents, coalesced on free; under the scheduler lock. */
#include "base/alloc.h"
#include "base/err.h"
#include "orch_int.h"

#include <string.h>

strata_err orch_va_init(struct orch_sched *s, uint64_t base, uint64_t size)
{
    s->va_base = base;
    s->va_size = size;
    s->va_num = 0;
    if (!size)
        return STRATA_OK;
    s->va_free = base_calloc(8, sizeof(*s->va_free));
    if (!s->va_free)
        return base_fail(STRATA_ENOMEM, "out of memory for the window range");
    s->va_cap = 8;
    s->va_free[0].start = base;
    s->va_free[0].len = size;
    s->va_num = 1;
    return STRATA_OK;
}

bool orch_va_alloc_locked(struct orch_sched *s, uint64_t len, uint64_t *out)
{
    for (uint32_t i = 0; i < s->va_num; i++) {
        struct va_extent *e = &s->va_free[i];

        if (e->len < len)
            continue;
        *out = e->start;
        e->start += len;
        e->len -= len;
        if (e->len == 0) {
            memmove(e, e + 1, (s->va_num - i - 1) * sizeof(*e));
            s->va_num--;
        }
        return true;
    }
    return false;
}

void orch_va_free_locked(struct orch_sched *s, uint64_t start, uint64_t len)
{
    uint32_t i = 0;

    while (i < s->va_num && s->va_free[i].start < start)
        i++;
    /* Merge with the extent before and/or after. */
    if (i > 0 && s->va_free[i - 1].start + s->va_free[i - 1].len == start) {
        s->va_free[i - 1].len += len;
        if (i < s->va_num && s->va_free[i - 1].start + s->va_free[i - 1].len ==
                                 s->va_free[i].start) {
            s->va_free[i - 1].len += s->va_free[i].len;
            memmove(&s->va_free[i], &s->va_free[i + 1],
                    (s->va_num - i - 1) * sizeof(*s->va_free));
            s->va_num--;
        }
        return;
    }
    if (i < s->va_num && start + len == s->va_free[i].start) {
        s->va_free[i].start = start;
        s->va_free[i].len += len;
        return;
    }
    if (s->va_num == s->va_cap) {
        void *p = base_realloc(s->va_free, 2 * s->va_cap * sizeof(*s->va_free));

        if (!p)
            return; /* the piece is lost to later windows, nothing else */
        s->va_free = p;
        s->va_cap *= 2;
    }
    memmove(&s->va_free[i + 1], &s->va_free[i],
            (s->va_num - i) * sizeof(*s->va_free));
    s->va_free[i].start = start;
    s->va_free[i].len = len;
    s->va_num++;
}
