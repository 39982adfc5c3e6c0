/* Domains whose windows the worker makes itself (backends with host
 * windows, such as sim): no round trip to the members. The worker names
 * every rank's segment and picks one address for each inside the range
 * every process of the tree reserved before the fork; then it posts one
 * ADOPT frame per member and returns at once, having made no system call.
 * A member's ADOPT maps every window there, creating (zeroed) any no peer
 * has created yet. ADOPT frames are posted quietly (no wake-up): a member
 * runs its ADOPT before its next task (same FIFO), or when something waits
 * on it. The names are unlinked once no member will map any more. The
 * fence releases the domain like any (domain_release_locked), which also
 * gives its piece of the range back; an ADOPT no member has begun by then
 * is withdrawn instead, so a domain nobody used is freed without waking
 * anyone, and with no segment ever made. */
#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "base/token.h"
#include "domain/exchange.h"
#include "domain_int.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* This process's random name token (sim.h: sim_window_name), drawn again
 * in a forked child: a segment a dead process with the same pid left
 * behind never carries it. */
static uint32_t name_token(void)
{
    static pid_t owner;
    static uint32_t token;
    pid_t me = getpid();

    if (__atomic_load_n(&owner, __ATOMIC_ACQUIRE) != me) {
        /* Racing first callers may each store one: any will do, as long
         * as a domain keeps the one it read. */
        __atomic_store_n(&token, base_random_token(), __ATOMIC_RELAXED);
        __atomic_store_n(&owner, me, __ATOMIC_RELEASE);
    }
    return __atomic_load_n(&token, __ATOMIC_RELAXED);
}

/* What the backend is told about rank r's window. */
static struct chip_window_req window_req(const struct strata_domain *d,
                                         uint32_t r)
{
    return (struct chip_window_req){.alloc_id = d->alloc_id,
                                    .rank = r,
                                    .rank_count = d->n,
                                    .window_size = d->window_size,
                                    .creator_pid = d->creator,
                                    .name_token = d->name_token};
}

/* Drops the names of ranks 0..n-1 (made, or not: ENOENT is fine), and
 * the control page's (lost.c). */
static void unlink_ranks(struct strata_domain *d, uint32_t n)
{
    const struct chip_backend_ops *ops = orch_backend_ops(d->sched);

    for (uint32_t r = 0; r < n; r++) {
        struct chip_window_req req = window_req(d, r);

        ops->host_window_unlink(&req);
    }
    if (n)
        domain_ctl_unlink(d);
}

/* No member maps the windows from now on, and at least one has: the
 * worker keeps the control page, then the names go. Under the scheduler
 * lock. */
static void names_done(struct strata_domain *d)
{
    strata_err err = domain_ctl_keep(d);

    if (err) {
        char msg[STRATA_ERRMSG_MAX];

        /* Loud: a member's death would leave the others waiting. */
        snprintf(msg, sizeof(msg),
                 "domain '%s': cannot keep its control page, so a member's "
                 "loss would not wake the others: %.300s",
                 d->name, strata_errmsg());
        LOG_WARN("%s", msg);
        orch_run_fail_locked(d->sched, d->run_id, err, msg);
    }
    unlink_ranks(d, d->n);
}

/* Under the scheduler lock. */
static void adopt_done(struct orch_ctl *c, void *arg)
{
    struct strata_domain *d = arg;

    if (c && c->withdrawn)
        return; /* counted when it was withdrawn */
    if (c)
        d->adopt_ran++;
    if (c && c->err) {
        char msg[STRATA_ERRMSG_MAX];

        snprintf(msg, sizeof(msg),
                 "domain '%s': chip %d could not map the windows: %.400s",
                 d->name, d->chips[c - d->adopt_ctls], c->msg);
        LOG_WARN("%s", msg);
        orch_run_fail_locked(d->sched, d->run_id, c->err, msg);
    }
    if (--d->adopt_pending == 0 && d->adopt_ran)
        names_done(d);
}

uint64_t domain_adopt_mapping(const struct chip_backend_ops *ops,
                              size_t window_size, uint32_t n)
{
    uint64_t map;

    if (!ops || !ops->host_window_create || !ops->host_window_unlink ||
        !ops->host_window_name || !ops->window_adopt ||
        !ops->window_mapping_size || n == 0 || n > 0xffff)
        return 0;
    map = ops->window_mapping_size(window_size);
    return map <= MBX_ADOPT_MAP_MASK && map <= UINT64_MAX / n ? map : 0;
}

bool domain_adopt_withdraw_locked(struct strata_domain *d, uint32_t r)
{
    struct orch_ctl *c;

    if (!d->adopted)
        return false;
    c = &d->adopt_ctls[r];
    if (c->done || c->withdrawn ||
        !orch_control_withdraw_locked(d->sched, d->eps[r], c))
        return false;
    /* Members create the segments: none exists if no ADOPT ran. */
    if (--d->adopt_pending == 0 && d->adopt_ran)
        names_done(d);
    return true;
}

strata_err domain_adopt_build(struct strata_domain *d, bool *used)
{
    const struct chip_backend_ops *ops = orch_backend_ops(d->sched);
    struct orch_sched *s = d->sched;
    char msg[STRATA_ERRMSG_MAX];
    uint64_t map, base = 0;
    strata_err err = STRATA_OK;
    uint32_t r;
    bool have;

    *used = false;
    map = domain_adopt_mapping(ops, d->window_size, d->n);
    if (map == 0)
        return STRATA_OK;
    /* Apart from d->ctls, which the RELEASE at the fence reuses while an
     * ADOPT may still wait in a parked chip's ring. */
    d->adopt_ctls = base_calloc(d->n, sizeof(*d->adopt_ctls));
    if (!d->adopt_ctls)
        return STRATA_OK; /* the exchange needs less */
    orch_lock(s);
    have = orch_va_alloc_locked(s, ORCH_VA_LOCAL, map * d->n, &base);
    orch_unlock(s);
    if (!have)
        return STRATA_OK; /* no range (left): exchange descriptors */
    *used = true;
    d->adopted = true;
    d->va_start = base;
    d->va_len = map * d->n;
    d->mapping_size = map;
    d->name_token = name_token();
    for (r = 0; r < d->n && !err; r++) {
        struct chip_window_req req = window_req(d, r);

        err = ops->host_window_create(&req, &d->device_ctx[r]);
        d->local_base[r] = base + (uint64_t)r * map;
    }
    if (err) {
        snprintf(msg, sizeof(msg), "%s", strata_errmsg());
        unlink_ranks(d, r);
        orch_lock(s);
        orch_va_free_locked(s, d->va_start, d->va_len);
        orch_unlock(s);
        return base_fail(err, "domain '%s': %s", d->name, msg);
    }
    d->adopt_pending = d->n + 1; /* +1 until every frame is posted */
    for (r = 0; r < d->n && !err; r++) {
        struct orch_ctl *c = &d->adopt_ctls[r];

        memset(c, 0, sizeof(*c));
        c->op = MBX_CTL_WINDOW_ADOPT;
        c->arg[0] = d->alloc_id;
        c->arg[1] = mbx_adopt_arg1(r, d->n, d->name_token);
        c->arg[2] = mbx_adopt_arg2(map, 0); /* names carry this worker's */
        c->arg[3] = base;
        c->on_done = adopt_done;
        c->on_done_arg = d;
        c->quiet = true;
        /* Not work of the run: nothing waits for it but the chip's next
         * task, and the RELEASE at the fence. */
        err = orch_control_post(s, NULL, d->eps[r], c, NULL);
        if (!err)
            d->adopt_posted = r + 1;
    }
    if (err)
        snprintf(msg, sizeof(msg), "%s", strata_errmsg());
    orch_lock(s);
    if (err) {
        /* Members that got an ADOPT release again; the rest never map. */
        uint32_t posted = r - 1;

        d->adopt_pending -= d->n - posted;
        domain_release_locked(d, NULL, posted);
    }
    adopt_done(NULL, d);
    orch_unlock(s);
    return err ? base_fail(err, "domain '%s': %s", d->name, msg) : STRATA_OK;
}
