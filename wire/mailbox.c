/* Mailbox creation, posting and the child's wait loop. */
#include "wire/mailbox.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/futex.h"
#include "trace/trace.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

_Static_assert(sizeof(struct mbx_frame) >= WIRE_ARGS_MAX,
               "a frame must hold the largest legal argument list");
_Static_assert(sizeof(((struct mbx_frame *)0)->args) == WIRE_ARGS_MAX,
               "frame args area is sized to the largest legal list");

static strata_err map_shared(size_t size, void **out)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    if (p == MAP_FAILED)
        return base_fail_errno(errno, "mmap of a %zu-byte mailbox", size);
    *out = p;
    return STRATA_OK;
}

strata_err mbx_create(struct mbx **out)
{
    void *p = NULL;
    strata_err err = map_shared(sizeof(struct mbx), &p);
    struct mbx *m = p;

    if (err || !m)
        return err ? err : STRATA_ENOMEM;
    /* Fresh anonymous pages are zero: no wipe needed. */
    m->h.magic = MBX_MAGIC;
    m->h.version = MBX_VERSION;
    *out = m;
    return STRATA_OK;
}

void mbx_destroy(struct mbx *m)
{
    if (m)
        munmap(m, sizeof(*m));
}

strata_err mbx_shared_create(struct mbx_shared **out)
{
    return map_shared(sizeof(struct mbx_shared), (void **)out);
}

void mbx_shared_destroy(struct mbx_shared *s)
{
    if (s)
        munmap(s, sizeof(*s));
}

static void ring_bell(struct mbx *m)
{
    __atomic_add_fetch(&m->h.bell, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&m->h.parked, __ATOMIC_SEQ_CST))
        base_futex_wake(&m->h.bell);
}

void mbx_post(struct mbx *m)
{
    __atomic_add_fetch(&m->h.head, 1, __ATOMIC_SEQ_CST);
    ring_bell(m);
}

void mbx_post_quiet(struct mbx *m)
{
    __atomic_add_fetch(&m->h.head, 1, __ATOMIC_SEQ_CST);
}

void mbx_ring(struct mbx *m)
{
    ring_bell(m);
}

void mbx_shutdown(struct mbx *m)
{
    __atomic_store_n(&m->h.shutdown, 1, __ATOMIC_SEQ_CST);
    ring_bell(m);
}

/* Something to do: a posted frame or shutdown. */
static int pending(struct mbx *m)
{
    if (__atomic_load_n(&m->h.shutdown, __ATOMIC_SEQ_CST))
        return -1;
    return __atomic_load_n(&m->h.head, __ATOMIC_SEQ_CST) !=
           __atomic_load_n(&m->h.tail, __ATOMIC_RELAXED);
}

struct mbx_frame *mbx_child_wait(struct mbx *m)
{
    return mbx_child_wait_spin(m, true);
}

static bool frame_pending(void *m)
{
    return pending(m) != 0;
}

/* Parks on the bell; while tracing, the park and its wake-up are a span. */
static void park(struct mbx *m, uint32_t seq)
{
    uint64_t t0;

    if (!trace_enabled()) {
        base_futex_wait(&m->h.bell, seq, BASE_NEVER);
        return;
    }
    t0 = trace_now();
    base_futex_wait(&m->h.bell, seq, BASE_NEVER);
    trace_record(TRACE_K_WAKE, 0, 0, t0, trace_now(), 0, 0, 0, 0, NULL);
}

struct mbx_frame *mbx_child_wait_spin(struct mbx *m, bool spin)
{
    unsigned spins = spin ? base_spin_budget() : 0;
    int p;

    for (;;) {
        if (base_spin_until(frame_pending, m, spins)) {
            p = pending(m);
            goto out;
        }
        /* Announce the park, then re-check: the parent rings the bell after
         * publishing, so one of the two sides sees the other. */
        __atomic_store_n(&m->h.parked, 1, __ATOMIC_SEQ_CST);
        uint32_t seq = __atomic_load_n(&m->h.bell, __ATOMIC_SEQ_CST);
        p = pending(m);
        if (!p)
            park(m, seq);
        __atomic_store_n(&m->h.parked, 0, __ATOMIC_SEQ_CST);
        if (p)
            goto out;
    }
out:
    if (p < 0)
        return NULL;
    return &m->ring[m->h.tail % MBX_RING];
}

bool mbx_child_complete(struct mbx *m, const struct mbx_shared *s)
{
    __atomic_add_fetch(&m->h.tail, 1, __ATOMIC_SEQ_CST);
    return __atomic_load_n(&s->sched_parked, __ATOMIC_SEQ_CST) != 0;
}

void mbx_child_init_done(struct mbx *m, strata_err err, const char *msg)
{
    m->h.init_err = (int32_t)err;
    snprintf(m->h.init_msg, sizeof(m->h.init_msg), "%s", msg ? msg : "");
    __atomic_store_n(&m->h.init_state, err ? MBX_INIT_FAILED : MBX_INIT_READY,
                     __ATOMIC_SEQ_CST);
}

void mbx_trace_ran(struct mbx_frame *f, uint64_t t0, uint64_t bytes,
                   const char *name_array, strata_err err)
{
    uint64_t key = TRACE_SLOT_KEY(f->slot, f->gen);
    uint16_t failed = err ? TRACE_TASK_FAILED : 0;
    uint64_t end = trace_now();

    f->trace_recorded = 1;
    /* Both in one record when the name fits its shorter field. */
    if (f->trace.submit &&
        (!name_array ||
         strnlen(name_array, TRACE_RUNTASK_NAME) < TRACE_RUNTASK_NAME)) {
        trace_put_runtask(f->trace.cat | failed, f->trace.lane, t0, end,
                          f->run_id, bytes, key, f->trace.submit, f->trace.post,
                          f->trace.seq, name_array);
        return;
    }
    trace_put(TRACE_K_RUN, failed, 0, t0, end, f->run_id, bytes, 0, key,
              name_array, true);
    if (f->trace.submit)
        trace_put(TRACE_K_PTASK, f->trace.cat | failed, f->trace.lane,
                  f->trace.submit, end, f->run_id, f->trace.seq, f->trace.post,
                  key, name_array, true);
}
