/* A worker's memory budgets: owned host buffers count against the "ram"
 * budget; a buffer that would make live bytes exceed it is refused with
 * STRATA_EBUDGET (reaching it exactly is allowed), unless eviction is LRU:
 * then idle buffers spill to spill_dir, least recently used first, and come
 * back when a task (or the host) names them.
 *
 * A buffer is idle when no unfinished task names it (its pins, kept by the
 * scheduler), no submission is restoring or planning it (sub_holds) and no
 * running orch fn has it among its arguments (run_holds). Spills and
 * restores happen under mu, one at a time: a thread that needs room and
 * finds nothing idle waits on changed until a task naming a buffer ends
 * (worker_mem_idle) or a submission lets go of one. Only one thread at a
 * time restores a task's buffers (the restore token): two submissions each
 * holding half of what both need cannot wait for each other. The token
 * holder first claims every buffer of its task (or group): a claimed
 * buffer is neither spilled nor waited for, since only this thread would
 * let it go. Buffers held by running orch fns are never waited for
 * either: the thread that waits may be the one running that fn. */
#include "membudget.h"

#include "base/alloc.h"
#include "base/err.h"
#include "spill.h"
#include "tier/budgets.h"
#include "tier/sweep.h"
#include "worker_int.h"

#include <string.h>
#include <unistd.h>

strata_err worker_mem_check(const strata_worker_config *cfg)
{
    uint64_t b[STRATA_TIER_COUNT];
    strata_err err = tier_parse_budgets(cfg->budgets, b);

    if (err) {
        base_errmsg_prefix("worker config");
        return err;
    }
    if (cfg->spill_dir && (err = tier_dir_check("spill_dir", cfg->spill_dir)))
        return err;
    if (cfg->eviction != STRATA_EVICT_NONE && cfg->eviction != STRATA_EVICT_LRU)
        return base_fail(STRATA_EINVAL,
                         "eviction is %d: use STRATA_EVICT_NONE or "
                         "STRATA_EVICT_LRU",
                         cfg->eviction);
    if (cfg->eviction == STRATA_EVICT_LRU && !cfg->spill_dir)
        return base_fail(STRATA_EINVAL,
                         "eviction STRATA_EVICT_LRU needs spill_dir: the "
                         "directory idle buffers spill to");
    return STRATA_OK;
}

strata_err worker_mem_init(struct worker_mem *m,
                           const strata_worker_config *cfg)
{
    memset(m, 0, sizeof(*m));
    if (tier_parse_budgets(cfg->budgets, m->budget))
        return STRATA_EINVAL; /* checked before: cannot happen */
    if (cfg->spill_dir && !(m->spill_dir = base_strdup(cfg->spill_dir)))
        return base_fail(STRATA_ENOMEM, "out of memory creating a worker");
    m->eviction = cfg->eviction;
    if (m->eviction == STRATA_EVICT_LRU &&
        !tier_owner_tag(m->owner_tag, sizeof(m->owner_tag))) {
        base_free(m->spill_dir);
        return base_fail(STRATA_ESYS, "worker: /proc/self/stat does not give "
                                      "this process's start time");
    }
    /* A killed worker's spilled buffers: nobody can restore them now. */
    if (m->spill_dir)
        tier_sweep_dead(m->spill_dir, WORKER_SPILL_PREFIX, WORKER_SPILL_SUFFIX);
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->changed, NULL);
    return STRATA_OK;
}

void worker_mem_fini(struct worker_mem *m)
{
    for (size_t i = 0; i < m->num; i++) {
        if (m->tab[i]->spill_path)
            unlink(m->tab[i]->spill_path);
        base_free(m->tab[i]->spill_path);
        base_free(m->tab[i]);
    }
    base_free(m->tab);
    m->tab = NULL;
    m->num = m->cap = 0;
    pthread_cond_destroy(&m->changed);
    pthread_mutex_destroy(&m->mu);
    base_free(m->spill_dir);
    m->spill_dir = NULL;
}

static struct worker_mem_buf *entry_of(struct worker_mem *m,
                                       const strata_buffer *b)
{
    for (size_t i = 0; i < m->num; i++)
        if (m->tab[i]->b == b)
            return m->tab[i];
    return NULL;
}

static uint32_t pins_of(const strata_buffer *b)
{
    return __atomic_load_n(&b->pins, __ATOMIC_ACQUIRE);
}

/* The least recently used idle resident buffer of at most max bytes (mu
 * held), or NULL. */
static struct worker_mem_buf *lru_victim(struct worker_mem *m, uint64_t max)
{
    struct worker_mem_buf *best = NULL;

    for (size_t i = 0; i < m->num; i++) {
        struct worker_mem_buf *e = m->tab[i];

        if (e->spill_path || e->claims || e->sub_holds || e->run_holds ||
            pins_of(e->b) || e->b->size > max)
            continue;
        if (!best || e->last_use < best->last_use)
            best = e;
    }
    return best;
}

/* Whether some resident buffer will become idle without this thread's
 * help: named by tasks, by a submission about to pin it or a copy under
 * way (sub_holds), or being made by another thread. */
static bool something_will_idle(struct worker_mem *m)
{
    if (m->creating)
        return true;
    for (size_t i = 0; i < m->num; i++) {
        const struct worker_mem_buf *e = m->tab[i];

        if (!e->spill_path && !e->claims && !e->run_holds &&
            (e->sub_holds || pins_of(e->b)))
            return true;
    }
    return false;
}

static void wait_changed(struct worker_mem *m)
{
    __atomic_add_fetch(&m->waiters, 1, __ATOMIC_SEQ_CST);
    pthread_cond_wait(&m->changed, &m->mu);
    __atomic_sub_fetch(&m->waiters, 1, __ATOMIC_SEQ_CST);
}

static void wake(struct worker_mem *m)
{
    if (__atomic_load_n(&m->waiters, __ATOMIC_SEQ_CST))
        pthread_cond_broadcast(&m->changed);
}

/* Spills e (mu held). */
static strata_err spill(struct worker_mem *m, struct worker_mem_buf *e)
{
    strata_buffer *b = e->b;
    strata_err err =
        worker_spill_out(m->spill_dir, m->owner_tag, b, &e->spill_path);

    if (err)
        return err;
    m->live -= b->size;
    m->buffers--;
    m->spilled_live += b->size;
    m->spilled_buffers++;
    if (m->spilled_live > m->spilled_peak)
        m->spilled_peak = m->spilled_live;
    m->spills++;
    m->bytes_out += b->size;
    return STRATA_OK;
}

static bool fits(const struct worker_mem *m, uint64_t nbytes)
{
    uint64_t budget = m->budget[STRATA_TIER_RAM];

    return budget == TIER_NO_BUDGET ||
           (m->live <= budget && nbytes <= budget - m->live);
}

static strata_err over_budget(const struct worker_mem *m, uint64_t nbytes,
                              const char *why)
{
    return base_fail(STRATA_EBUDGET,
                     "tier 'ram': a buffer of %llu bytes would exceed the "
                     "worker's budget of %llu bytes (%llu bytes live)%s",
                     (unsigned long long)nbytes,
                     (unsigned long long)m->budget[STRATA_TIER_RAM],
                     (unsigned long long)m->live, why);
}

/* Bytes the nvme budget has left for spills (mu held), counting the
 * leaving bytes of a restore as gone already. */
static uint64_t spill_room(const struct worker_mem *m, uint64_t leaving)
{
    uint64_t budget = m->budget[STRATA_TIER_NVME];
    uint64_t after = m->spilled_live - leaving;

    if (budget == TIER_NO_BUDGET)
        return UINT64_MAX;
    return after < budget ? budget - after : 0;
}

/* Room for nbytes more on ram (mu held): spills idle buffers, least
 * recently used first, within the nvme budget, and waits for busy ones to
 * become idle. leaving: the bytes of the spilled buffer this room is for
 * (0 for a new one); they leave nvme once it is restored, so a restore
 * may swap even with nvme at its budget (for a moment both files are
 * there). */
static strata_err make_room(struct worker_mem *m, uint64_t nbytes,
                            uint64_t leaving)
{
    while (!fits(m, nbytes)) {
        struct worker_mem_buf *victim;
        uint64_t room;
        strata_err err;

        if (m->eviction != STRATA_EVICT_LRU)
            return over_budget(m, nbytes, "");
        if (nbytes > m->budget[STRATA_TIER_RAM])
            return over_budget(m, nbytes, ": larger than the whole budget");
        room = spill_room(m, leaving);
        victim = lru_victim(m, room);
        if (victim) {
            err = spill(m, victim);
            if (err)
                return err;
            continue;
        }
        /* Pins drop without mu: a buffer idle now may have become so
         * since the look above, and is spilled on the next pass. Idle
         * buffers none of which fits on nvme are another matter: waiting
         * would not make room there (only a release or a restore does). */
        if (lru_victim(m, UINT64_MAX)) {
            if (room == UINT64_MAX || lru_victim(m, room))
                continue;
            return base_fail(STRATA_EBUDGET,
                             "tier 'nvme': no idle buffer can be spilled "
                             "within the worker's budget of %llu bytes "
                             "(%llu bytes spilled) to make room for a "
                             "buffer of %llu bytes on 'ram' (budget %llu "
                             "bytes, %llu bytes live)",
                             (unsigned long long)m->budget[STRATA_TIER_NVME],
                             (unsigned long long)m->spilled_live,
                             (unsigned long long)nbytes,
                             (unsigned long long)m->budget[STRATA_TIER_RAM],
                             (unsigned long long)m->live);
        }
        if (!something_will_idle(m))
            return over_budget(m, nbytes,
                               ": nothing can be spilled (every resident "
                               "buffer is named by a running orch fn's "
                               "arguments or by the same task)");
        wait_changed(m);
    }
    return STRATA_OK;
}

strata_err worker_mem_reserve(struct worker_mem *m, uint64_t nbytes)
{
    strata_err err;

    pthread_mutex_lock(&m->mu);
    err = make_room(m, nbytes, 0);
    if (!err) {
        m->live += nbytes;
        m->buffers++;
        if (m->live > m->peak)
            m->peak = m->live;
        if (m->eviction == STRATA_EVICT_LRU)
            m->creating++;
    }
    pthread_mutex_unlock(&m->mu);
    return err;
}

void worker_mem_unreserve(struct worker_mem *m, uint64_t nbytes)
{
    pthread_mutex_lock(&m->mu);
    m->live -= nbytes;
    m->buffers--;
    if (m->eviction == STRATA_EVICT_LRU)
        m->creating--;
    wake(m);
    pthread_mutex_unlock(&m->mu);
}

strata_err worker_mem_add(struct worker_mem *m, strata_buffer *b)
{
    struct worker_mem_buf *e = NULL;
    strata_err err = STRATA_OK;

    if (m->eviction != STRATA_EVICT_LRU)
        return STRATA_OK;
    pthread_mutex_lock(&m->mu);
    if (m->num == m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 16;
        void *p = base_realloc(m->tab, cap * sizeof(*m->tab));

        if (p) {
            m->tab = p;
            m->cap = cap;
        } else {
            err = base_fail(STRATA_ENOMEM, "out of memory tracking a buffer");
        }
    }
    if (!err && !(e = base_calloc(1, sizeof(*e))))
        err = base_fail(STRATA_ENOMEM, "out of memory tracking a buffer");
    if (!err) {
        e->b = b;
        e->last_use = ++m->clock;
        m->tab[m->num++] = e;
        /* Made: it can be spilled now, by a thread that waits for it. */
        m->creating--;
        wake(m);
    }
    pthread_mutex_unlock(&m->mu);
    return err;
}

void worker_mem_forget(struct worker_mem *m, strata_buffer *b)
{
    struct worker_mem_buf *e;

    pthread_mutex_lock(&m->mu);
    e = m->eviction == STRATA_EVICT_LRU ? entry_of(m, b) : NULL;
    if (e && e->spill_path) {
        unlink(e->spill_path);
        base_free(e->spill_path);
        m->spilled_live -= b->size;
        m->spilled_buffers--;
    } else {
        m->live -= b->size;
        m->buffers--;
    }
    if (e) {
        for (size_t i = 0; i < m->num; i++) {
            if (m->tab[i] == e) {
                m->tab[i] = m->tab[--m->num];
                break;
            }
        }
        base_free(e);
    }
    wake(m);
    pthread_mutex_unlock(&m->mu);
}

/* The restore token (mu held): one thread at a time restores. */
static void take_token(struct worker_mem *m)
{
    while (m->restoring)
        wait_changed(m);
    m->restoring = true;
}

static void give_token(struct worker_mem *m)
{
    m->restoring = false;
    wake(m);
}

/* Makes e resident (mu held): room first, then its bytes back. */
static strata_err restore(struct worker_mem *m, struct worker_mem_buf *e)
{
    strata_buffer *b = e->b;
    strata_err err;

    /* e is spilled, hence not a victim of its own room-making. */
    err = make_room(m, b->size, b->size);
    if (err)
        return err;
    err = worker_spill_in(e->spill_path, b);
    if (err)
        return err;
    base_free(e->spill_path);
    e->spill_path = NULL;
    m->spilled_live -= b->size;
    m->spilled_buffers--;
    m->live += b->size;
    m->buffers++;
    if (m->live > m->peak)
        m->peak = m->live;
    m->restores++;
    m->bytes_in += b->size;
    return STRATA_OK;
}

static strata_err access_buf(struct worker_mem *m, strata_buffer *b, bool hold)
{
    struct worker_mem_buf *e;
    strata_err err = STRATA_OK;

    if (m->eviction != STRATA_EVICT_LRU || b->foreign || b->remote || b->device)
        return STRATA_OK;
    pthread_mutex_lock(&m->mu);
    take_token(m);
    e = entry_of(m, b);
    if (e) {
        e->claims++;
        if (e->spill_path)
            err = restore(m, e);
        e->claims--;
        e->last_use = ++m->clock;
        /* Held as a submission holds its buffers: not a victim, and a
         * thread that needs room waits for it (it will let go). */
        if (!err && hold)
            e->sub_holds++;
    }
    give_token(m);
    pthread_mutex_unlock(&m->mu);
    return err;
}

strata_err worker_mem_access(struct worker_mem *m, strata_buffer *b)
{
    return access_buf(m, b, false);
}

strata_err worker_mem_access_held(struct worker_mem *m, strata_buffer *b)
{
    return access_buf(m, b, true);
}

void worker_mem_let_go(struct worker_mem *m, strata_buffer *b)
{
    struct worker_mem_buf *e;

    if (m->eviction != STRATA_EVICT_LRU || b->foreign || b->remote || b->device)
        return;
    pthread_mutex_lock(&m->mu);
    e = entry_of(m, b);
    if (e && e->sub_holds > 0)
        e->sub_holds--;
    wake(m);
    pthread_mutex_unlock(&m->mu);
}

/* Adds claims to the claims of every owned buffer the n lists name, and
 * holds to their run_holds (run) or sub_holds (mu held). */
static void add_to_all(struct worker_mem *m, const strata_args *const *a,
                       size_t n, int claims, int holds, bool run)
{
    for (size_t k = 0; k < n; k++) {
        for (uint32_t i = 0; a[k] && i < a[k]->num_tensors; i++) {
            struct worker_mem_buf *e = entry_of(m, a[k]->buffers[i]);

            if (!e)
                continue; /* not an owned host buffer of this worker */
            e->claims += (uint32_t)claims;
            if (run)
                e->run_holds += (uint32_t)holds;
            else
                e->sub_holds += (uint32_t)holds;
        }
    }
}

/* Restores every spilled buffer the n lists name (mu and the token held,
 * every one of them claimed: none is spilled to make room for another). */
static strata_err restore_all(struct worker_mem *m, const strata_args *const *a,
                              size_t n)
{
    for (size_t k = 0; k < n; k++) {
        for (uint32_t i = 0; a[k] && i < a[k]->num_tensors; i++) {
            struct worker_mem_buf *e = entry_of(m, a[k]->buffers[i]);
            strata_err err;

            if (!e)
                continue;
            if (e->spill_path && (err = restore(m, e)))
                return err;
            e->last_use = ++m->clock;
        }
    }
    return STRATA_OK;
}

strata_err worker_mem_hold(void *ctx, const strata_args *const *a, size_t n,
                           bool run)
{
    strata_worker *w = ctx;
    struct worker_mem *m = &w->mem;
    strata_err err;

    if (m->eviction != STRATA_EVICT_LRU)
        return STRATA_OK;
    pthread_mutex_lock(&m->mu);
    take_token(m);
    /* All of them claimed first: while one is restored, the others are
     * neither spilled nor waited for (this thread will not let them go). */
    add_to_all(m, a, n, 1, 0, run);
    err = restore_all(m, a, n);
    add_to_all(m, a, n, -1, err ? 0 : 1, run);
    give_token(m);
    pthread_mutex_unlock(&m->mu);
    if (err)
        base_errmsg_prefix("a task's buffers could not be made resident");
    return err;
}

void worker_mem_unhold(void *ctx, const strata_args *const *a, size_t n,
                       bool run)
{
    strata_worker *w = ctx;
    struct worker_mem *m = &w->mem;

    if (m->eviction != STRATA_EVICT_LRU)
        return;
    pthread_mutex_lock(&m->mu);
    add_to_all(m, a, n, 0, -1, run);
    wake(m);
    pthread_mutex_unlock(&m->mu);
}

void worker_mem_idle(void *ctx, strata_buffer *b)
{
    strata_worker *w = ctx;
    struct worker_mem *m = &w->mem;

    (void)b;
    if (m->eviction != STRATA_EVICT_LRU ||
        !__atomic_load_n(&m->waiters, __ATOMIC_SEQ_CST))
        return;
    pthread_mutex_lock(&m->mu);
    pthread_cond_broadcast(&m->changed);
    pthread_mutex_unlock(&m->mu);
}

strata_err strata_worker_memory_report(strata_worker *w,
                                       strata_tier_report *out)
{
    strata_tier_report r;
    strata_tier_usage *ram = &r.tiers[STRATA_TIER_RAM];
    strata_tier_usage *nvme = &r.tiers[STRATA_TIER_NVME];

    if (!w)
        return base_fail_null("strata_worker_memory_report", "w");
    if (!out)
        return base_fail_null("strata_worker_memory_report", "out");
    memset(&r, 0, sizeof(r));
    pthread_mutex_lock(&w->mem.mu);
    for (int i = 0; i < STRATA_TIER_COUNT; i++)
        r.tiers[i].budget = w->mem.budget[i];
    ram->live = w->mem.live;
    ram->peak = w->mem.peak;
    ram->instances = w->mem.buffers;
    nvme->live = w->mem.spilled_live;
    nvme->peak = w->mem.spilled_peak;
    nvme->instances = w->mem.spilled_buffers;
    r.moved[STRATA_TIER_RAM][STRATA_TIER_NVME] = w->mem.bytes_out;
    r.moved[STRATA_TIER_NVME][STRATA_TIER_RAM] = w->mem.bytes_in;
    r.spills = w->mem.spills;
    r.restores = w->mem.restores;
    pthread_mutex_unlock(&w->mem.mu);
    *out = r;
    return STRATA_OK;
}
