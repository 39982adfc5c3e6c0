/* Task slots with generations, and intrusive FIFO queues of slots. */
#include "base/alloc.h"
#include "base/err.h"
#include "orch_int.h"

#include <string.h>

strata_err orch_reserve(void **arr, uint32_t *cap, uint32_t need, size_t elem)
{
    uint32_t n;
    void *p;

    if (need <= *cap)
        return STRATA_OK;
    n = *cap ? *cap : 4;
    while (n < need)
        n *= 2;
    p = base_realloc(*arr, (size_t)n * elem);
    if (!p)
        return base_fail(STRATA_ENOMEM, "scheduler: out of memory");
    *arr = p;
    *cap = n;
    return STRATA_OK;
}

static strata_err grow(struct orch_sched *s)
{
    uint32_t n = s->num_slots ? s->num_slots * 2 : 64;
    struct orch_task **slots;
    struct orch_task *block;

    slots = base_realloc(s->slots, n * sizeof(*slots));
    if (!slots)
        return base_fail(STRATA_ENOMEM, "scheduler: out of task slots");
    s->slots = slots;
    /* The completion worklist never holds more than every slot. */
    if (orch_reserve((void **)&s->work, &s->cap_work, n, sizeof(*s->work)))
        return STRATA_ENOMEM;
    /* One block per growth step; slot pointers stay stable. */
    block = base_calloc(n - s->num_slots, sizeof(*block));
    if (!block)
        return base_fail(STRATA_ENOMEM, "scheduler: out of task slots");
    for (uint32_t i = s->num_slots; i < n; i++) {
        struct orch_task *t = &block[i - s->num_slots];

        t->slot = i;
        t->state = TASK_FREE;
        t->next = i + 1 < n ? i + 1 : s->free_head;
        slots[i] = t;
    }
    s->free_head = s->num_slots;
    s->num_slots = n;
    return STRATA_OK;
}

strata_err orch_slot_alloc(struct orch_sched *s, struct orch_task **out)
{
    struct orch_task *t;
    strata_err err;

    if (s->free_head == ORCH_NONE) {
        err = grow(s);
        if (err)
            return err;
    }
    t = s->slots[s->free_head];
    s->free_head = t->next;
    t->next = ORCH_NONE;
    t->state = TASK_PENDING;
    t->seq = ++s->task_seq;
    t->poisoned = false;
    t->not_run = false;
    t->ep_listed = false;
    t->poison_err = STRATA_OK;
    t->run = NULL;
    t->group = NULL;
    t->fanin = 0;
    t->num_fanout = 0;
    t->num_bufs = 0;
    t->blob_len = 0;
    t->scope_depth = 0;
    t->ep = -1;
    t->ctl = NULL;
    t->kind = MBX_TASK;
    t->trace_submit = 0;
    t->trace_post = 0;
    t->trace_by_target = false;
    t->trace_name = NULL;
    *out = t;
    return STRATA_OK;
}

void orch_unposted_add(struct orch_sched *s, struct orch_task *t)
{
    struct orch_endpoint *ep = &s->eps[t->ep];

    t->ep_next = ORCH_NONE;
    t->ep_prev = ep->unposted_tail;
    if (ep->unposted_tail == ORCH_NONE)
        ep->unposted_head = t->slot;
    else
        s->slots[ep->unposted_tail]->ep_next = t->slot;
    ep->unposted_tail = t->slot;
    t->ep_listed = true;
}

void orch_unposted_drop(struct orch_sched *s, struct orch_task *t)
{
    struct orch_endpoint *ep;

    if (!t->ep_listed)
        return;
    ep = &s->eps[t->ep];
    if (t->ep_prev == ORCH_NONE)
        ep->unposted_head = t->ep_next;
    else
        s->slots[t->ep_prev]->ep_next = t->ep_next;
    if (t->ep_next == ORCH_NONE)
        ep->unposted_tail = t->ep_prev;
    else
        s->slots[t->ep_next]->ep_prev = t->ep_prev;
    t->ep_listed = false;
}

void orch_slot_free(struct orch_sched *s, struct orch_task *t)
{
    orch_unposted_drop(s, t);
    t->gen++;
    t->state = TASK_FREE;
    t->run = NULL;
    t->next = s->free_head;
    s->free_head = t->slot;
}

struct orch_task *orch_slot_live(struct orch_sched *s, struct edge e)
{
    struct orch_task *t;

    if (e.slot >= s->num_slots)
        return NULL;
    t = s->slots[e.slot];
    return t->gen == e.gen && t->state != TASK_FREE ? t : NULL;
}

void orch_queue_push(struct orch_sched *s, uint32_t *head, uint32_t *tail,
                     struct orch_task *t)
{
    t->next = ORCH_NONE;
    if (*head == ORCH_NONE)
        *head = t->slot;
    else
        s->slots[*tail]->next = t->slot;
    *tail = t->slot;
}

struct orch_task *orch_queue_pop(struct orch_sched *s, uint32_t *head,
                                 uint32_t *tail)
{
    struct orch_task *t;

    if (*head == ORCH_NONE)
        return NULL;
    t = s->slots[*head];
    *head = t->next;
    if (*head == ORCH_NONE)
        *tail = ORCH_NONE;
    t->next = ORCH_NONE;
    return t;
}

bool orch_queue_remove(struct orch_sched *s, uint32_t *head, uint32_t *tail,
                       struct orch_task *t)
{
    uint32_t prev = ORCH_NONE;

    for (uint32_t i = *head; i != ORCH_NONE; prev = i, i = s->slots[i]->next) {
        if (i != t->slot)
            continue;
        if (prev == ORCH_NONE)
            *head = t->next;
        else
            s->slots[prev]->next = t->next;
        if (*tail == t->slot)
            *tail = prev;
        return true;
    }
    return false;
}
