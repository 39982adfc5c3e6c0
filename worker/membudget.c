/* A worker's memory budgets: owned host buffers count against the "ram"
 * budget; a buffer that would make live bytes exceed it is refused with
 * STRATA_EBUDGET (reaching it exactly is allowed). */
#include "membudget.h"

#include "base/alloc.h"
#include "base/err.h"
#include "tier/budgets.h"
#include "worker_int.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static strata_err check_spill_dir(const char *dir)
{
    struct stat st;

    if (!dir[0])
        return base_fail(STRATA_EINVAL, "spill_dir is empty");
    if (stat(dir, &st) != 0)
        return base_fail(STRATA_EINVAL, "spill_dir '%s': %s", dir,
                         strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return base_fail(STRATA_EINVAL, "spill_dir '%s' is not a directory",
                         dir);
    if (access(dir, W_OK | X_OK) != 0)
        return base_fail(STRATA_EINVAL, "spill_dir '%s' is not writable: %s",
                         dir, strerror(errno));
    return STRATA_OK;
}

strata_err worker_mem_check(const strata_worker_config *cfg)
{
    uint64_t b[STRATA_TIER_COUNT];
    strata_err err = tier_parse_budgets(cfg->budgets, b);

    if (err) {
        base_errmsg_prefix("worker config");
        return err;
    }
    if (cfg->spill_dir && (err = check_spill_dir(cfg->spill_dir)))
        return err;
    if (cfg->eviction != STRATA_EVICT_NONE && cfg->eviction != STRATA_EVICT_LRU)
        return base_fail(STRATA_EINVAL,
                         "eviction is %d: use STRATA_EVICT_NONE or "
                         "STRATA_EVICT_LRU",
                         cfg->eviction);
    if (cfg->eviction == STRATA_EVICT_LRU)
        return base_fail(STRATA_ENOTSUP,
                         "eviction STRATA_EVICT_LRU: spilling buffers is not "
                         "built yet");
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
    pthread_mutex_init(&m->mu, NULL);
    return STRATA_OK;
}

void worker_mem_fini(struct worker_mem *m)
{
    pthread_mutex_destroy(&m->mu);
    base_free(m->spill_dir);
    m->spill_dir = NULL;
}

strata_err worker_mem_reserve(struct worker_mem *m, uint64_t nbytes)
{
    uint64_t budget;
    strata_err err = STRATA_OK;

    pthread_mutex_lock(&m->mu);
    budget = m->budget[STRATA_TIER_RAM];
    if (budget != TIER_NO_BUDGET &&
        (m->live > budget || nbytes > budget - m->live)) {
        err = base_fail(STRATA_EBUDGET,
                        "tier 'ram': a buffer of %llu bytes would exceed the "
                        "worker's budget of %llu bytes (%llu bytes live)",
                        (unsigned long long)nbytes, (unsigned long long)budget,
                        (unsigned long long)m->live);
    } else {
        m->live += nbytes;
        m->buffers++;
        if (m->live > m->peak)
            m->peak = m->live;
    }
    pthread_mutex_unlock(&m->mu);
    return err;
}

void worker_mem_unreserve(struct worker_mem *m, uint64_t nbytes)
{
    pthread_mutex_lock(&m->mu);
    m->live -= nbytes;
    m->buffers--;
    pthread_mutex_unlock(&m->mu);
}

strata_err strata_worker_memory_report(strata_worker *w,
                                       strata_tier_report *out)
{
    strata_tier_report r;

    if (!w)
        return base_fail_null("strata_worker_memory_report", "w");
    if (!out)
        return base_fail_null("strata_worker_memory_report", "out");
    memset(&r, 0, sizeof(r));
    pthread_mutex_lock(&w->mem.mu);
    for (int i = 0; i < STRATA_TIER_COUNT; i++)
        r.tiers[i].budget = w->mem.budget[i];
    r.tiers[STRATA_TIER_RAM].live = w->mem.live;
    r.tiers[STRATA_TIER_RAM].peak = w->mem.peak;
    r.tiers[STRATA_TIER_RAM].instances = w->mem.buffers;
    pthread_mutex_unlock(&w->mem.mu);
    *out = r;
    return STRATA_OK;
}
