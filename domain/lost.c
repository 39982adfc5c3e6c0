/* A member lost while its domain lives: the worker marks the domain's
 * control page (chip/peer.h), which every member maps with the windows,
 * so that survivors parked in strata_signal_wait wake with STRATA_EPEER
 * instead of waiting forever for a word the dead member will never
 * write. The worker maps the page itself before the windows' names go
 * (the page's name goes with rank 0's), and drops it when the domain is
 * freed. */
#include "base/err.h"
#include "base/log.h"
#include "chip/peer.h"
#include "domain_int.h"

#include <stdio.h>
#include <sys/mman.h>

/* The control page's name for d; false when the backend has none. */
static bool ctl_name(const struct strata_domain *d, char *out, size_t cap)
{
    struct chip_window_req req = {.alloc_id = d->alloc_id,
                                  .rank_count = d->n,
                                  .creator_pid = d->creator,
                                  .name_token = d->name_token};

    return chip_domain_ctl_name(orch_backend_ops(d->sched), &req, out, cap);
}

strata_err domain_ctl_keep(struct strata_domain *d)
{
    char name[CHIP_WINDOW_HANDLE_MAX];

    if (d->ctl || !ctl_name(d, name, sizeof(name)))
        return STRATA_OK;
    return chip_domain_ctl_map(name, true, &d->ctl);
}

void domain_ctl_unlink(const struct strata_domain *d)
{
    char name[CHIP_WINDOW_HANDLE_MAX];

    if (ctl_name(d, name, sizeof(name)))
        shm_unlink(name);
}

void domain_ctl_drop(struct strata_domain *d)
{
    chip_domain_ctl_unmap(d->ctl);
    d->ctl = NULL;
}

/* Under the scheduler lock. */
static void mark(struct strata_domain *d, uint32_t r, const char *why)
{
    char msg[CHIP_PEER_WHY_MAX];

    if (__atomic_load_n(&d->freed, __ATOMIC_ACQUIRE))
        return;
    /* Members may still map the windows (and create the page): make it
     * now, so that they find it marked. Its name goes with the others'. */
    if (!d->ctl && d->adopted && d->adopt_pending > 0 &&
        domain_ctl_keep(d) != STRATA_OK)
        LOG_WARN("domain '%s': cannot tell the members that chip %d is "
                 "lost: %s",
                 d->name, d->chips[r], strata_errmsg());
    if (!d->ctl)
        return; /* no member maps the windows: nobody can wait on them */
    snprintf(msg, sizeof(msg), "domain '%s': %.160s", d->name, why);
    chip_domain_ctl_mark(d->ctl, r, msg);
}

struct death {
    struct orch_sched *s;
    int ep;
    const char *why;
};

static void on_live(struct strata_domain *d, void *arg)
{
    const struct death *x = arg;

    if (d->sched != x->s)
        return;
    for (uint32_t r = 0; r < d->n; r++)
        if (d->eps[r] == x->ep)
            mark(d, r, x->why);
}

/* Under the scheduler lock (orch_on_death). */
static void on_death(struct orch_sched *s, int ep, const char *why, void *arg)
{
    struct death x = {s, ep, why};

    (void)arg;
    domain_live_each(on_live, &x);
}

strata_err domain_watch_deaths(struct strata_domain *d)
{
    char why[STRATA_ERRMSG_MAX];
    strata_err err = orch_on_death(d->sched, on_death, NULL);

    if (err)
        return err;
    /* A member that died before the domain was live was not marked. */
    orch_lock(d->sched);
    for (uint32_t r = 0; r < d->n; r++)
        if (orch_child_dead_locked(d->sched, d->eps[r], why, sizeof(why)))
            mark(d, r, why);
    orch_unlock(d->sched);
    return STRATA_OK;
}
