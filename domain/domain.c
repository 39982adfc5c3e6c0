/* Allocating a local domain: COMM_INIT once per worker, then every member
 * prepares (create, zero, export) in parallel, the worker checks the
 * descriptor table and fans it out, every member imports every peer in
 * parallel, and the segment names are unlinked once all have mapped. A
 * domain is freed at its run's fence. */
#include "base/alloc.h"
#include "base/env.h"
#include "base/err.h"
#include "base/log.h"
#include "domain/exchange.h"
#include "domain_int.h"
#include "sim/sim.h"
#include "trace/trace.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static uint64_t next_alloc_id;

/* Freed domains whose control frames and tables the next allocation on
 * their scheduler gives back: a handle is valid until the worker is
 * destroyed, and one allocated every step would otherwise keep ~4 KiB a
 * step. Lock order: the scheduler's lock, then shrink_mu. */
static pthread_mutex_t shrink_mu = PTHREAD_MUTEX_INITIALIZER;
static struct strata_domain *shrink_head;

static void shrink_push(struct strata_domain *d)
{
    pthread_mutex_lock(&shrink_mu);
    if (!d->on_shrink) {
        d->shrink_next = shrink_head;
        shrink_head = d;
        d->on_shrink = true;
    }
    pthread_mutex_unlock(&shrink_mu);
}

static void shrink_unlink(struct strata_domain *d)
{
    pthread_mutex_lock(&shrink_mu);
    for (struct strata_domain **pp = &shrink_head; d->on_shrink && *pp;
         pp = &(*pp)->shrink_next) {
        if (*pp == d) {
            *pp = d->shrink_next;
            d->on_shrink = false;
            break;
        }
    }
    pthread_mutex_unlock(&shrink_mu);
}

/* Whether every ADOPT frame of d has left its chip's ring: a withdrawn
 * one is still there until the chip passes it, and its completion reads
 * the frame's control (scheduler lock held). Frames never posted (the
 * exchange was used, or posting stopped at an error) wait for nothing. */
static bool adopts_passed(const struct strata_domain *d)
{
    for (uint32_t r = 0; d->adopt_ctls && r < d->adopt_posted; r++)
        if (!d->adopt_ctls[r].done)
            return false;
    return true;
}

/* Gives back the working memory of the freed domains of scheduler s; one
 * whose ADOPTs are still in a ring waits for a later allocation. */
static void shrink_freed(struct orch_sched *s)
{
    struct strata_domain *mine = NULL;

    pthread_mutex_lock(&shrink_mu);
    for (struct strata_domain **pp = &shrink_head; *pp;) {
        struct strata_domain *d = *pp;

        if (d->sched != s) {
            pp = &d->shrink_next;
            continue;
        }
        *pp = d->shrink_next;
        d->on_shrink = false;
        d->shrink_next = mine;
        mine = d;
    }
    pthread_mutex_unlock(&shrink_mu);
    while (mine) {
        struct strata_domain *d = mine;

        mine = d->shrink_next;
        orch_lock(s);
        base_free(d->ctls);
        base_free(d->ctl_ptrs);
        base_free(d->device_ctx);
        base_free(d->local_base);
        d->ctls = NULL;
        d->ctl_ptrs = NULL;
        d->device_ctx = NULL;
        d->local_base = NULL;
        if (adopts_passed(d)) {
            base_free(d->adopt_ctls);
            d->adopt_ctls = NULL;
        } else {
            shrink_push(d);
        }
        orch_unlock(s);
    }
}

static void domain_free(void *obj)
{
    struct strata_domain *d = obj;

    shrink_unlink(d);
    domain_live_remove(d);
    domain_ctl_drop(d);
    base_free(d->chips);
    base_free(d->eps);
    base_free(d->device_ctx);
    base_free(d->local_base);
    base_free(d->buffers);
    base_free(d->buffer_names);
    base_free(d->ctls);
    base_free(d->adopt_ctls);
    base_free(d->ctl_ptrs);
    base_free(d);
}

static strata_err create(struct orch_sched *s, strata_run *run,
                         const strata_domain_spec *spec,
                         struct strata_domain **out)
{
    struct strata_domain *d = base_calloc(1, sizeof(*d));
    size_t n = spec->num_workers;
    size_t off = 0;

    if (!d)
        return base_fail(STRATA_ENOMEM, "out of memory for a domain");
    d->chips = base_calloc(n, sizeof(*d->chips));
    d->eps = base_calloc(n, sizeof(*d->eps));
    d->device_ctx = base_calloc(n, sizeof(*d->device_ctx));
    d->local_base = base_calloc(n, sizeof(*d->local_base));
    d->ctls = base_calloc(n, sizeof(*d->ctls));
    d->ctl_ptrs = base_calloc(n, sizeof(*d->ctl_ptrs));
    d->buffers = base_calloc(spec->num_buffers + 1, sizeof(*d->buffers));
    d->buffer_names =
        base_calloc(spec->num_buffers + 1, sizeof(*d->buffer_names));
    if (!d->chips || !d->eps || !d->device_ctx || !d->local_base || !d->ctls ||
        !d->ctl_ptrs || !d->buffers || !d->buffer_names) {
        domain_free(d);
        return base_fail(STRATA_ENOMEM, "out of memory for a domain");
    }
    snprintf(d->name, sizeof(d->name), "%s", spec->name);
    d->n = (uint32_t)n;
    d->window_size = spec->window_size;
    d->sched = s;
    d->run = run;
    d->run_id = orch_run_id(run);
    d->creator = (int)getpid();
    for (size_t r = 0; r < n; r++) {
        d->chips[r] = spec->workers[r];
        d->eps[r] = orch_chip_index(s, spec->workers[r]);
    }
    d->num_buffers = spec->num_buffers;
    for (size_t i = 0; i < spec->num_buffers; i++) {
        const strata_comm_buffer_spec *b = &spec->buffers[i];

        snprintf(d->buffer_names[i], sizeof(d->buffer_names[i]), "%s", b->name);
        d->buffers[i].name = d->buffer_names[i];
        d->buffers[i].offset = off;
        d->buffers[i].nbytes = b->nbytes;
        d->buffers[i].dtype = b->dtype;
        d->buffers[i].count = b->count;
        off += b->nbytes;
    }
    *out = d;
    return STRATA_OK;
}

/* Posts one control frame per member and waits for all of them. */
static strata_err phase(struct strata_domain *d, strata_orch *o, uint32_t op,
                        const void *staged, uint32_t staged_len)
{
    struct orch_ctl **ptrs = d->ctl_ptrs;
    strata_err err = STRATA_OK;
    uint32_t posted = 0;

    for (uint32_t r = 0; r < d->n; r++) {
        struct orch_ctl *c = &d->ctls[r];

        memset(c, 0, sizeof(*c));
        c->op = op;
        c->arg[0] = d->alloc_id;
        c->arg[1] = r;
        c->arg[2] = d->n;
        c->arg[3] = d->window_size;
        c->staged = staged;
        c->staged_len = staged_len;
        err = orch_control_post(d->sched, o, d->eps[r], c, NULL);
        if (err)
            break;
        ptrs[posted++] = c;
    }
    /* Wait for whatever was posted even after a failure: the frames point
     * into d. */
    {
        strata_err werr = orch_control_wait(d->sched, ptrs, posted);

        return err ? err : werr;
    }
}

/* Every rank's name, and the control page's. */
static void unlink_names(const struct strata_domain *d)
{
    char name[CHIP_WINDOW_HANDLE_MAX];

    domain_ctl_unlink(d);
    for (uint32_t r = 0; r < d->n; r++) {
        sim_window_name(name, sizeof(name), d->creator, d->alloc_id, r, 0);
        shm_unlink(name); /* ENOENT: never created, or already gone */
    }
}

/* The table is valid when complete, in rank order, one profile, and every
 * mapping is the same size and holds the window. */
static strata_err check_table(const struct strata_domain *d,
                              const struct chip_window_desc *t)
{
    for (uint32_t r = 0; r < d->n; r++) {
        if (d->ctls[r].reply_len != sizeof(*t))
            return base_fail(STRATA_EPROTO,
                             "domain '%s': chip %d sent a %u-byte "
                             "descriptor",
                             d->name, d->chips[r], d->ctls[r].reply_len);
        if (t[r].version != CHIP_WINDOW_DESC_VERSION || t[r].rank != r ||
            t[r].rank_count != d->n)
            return base_fail(STRATA_EPROTO,
                             "domain '%s': descriptor of rank %u names rank "
                             "%u of %u",
                             d->name, r, t[r].rank, t[r].rank_count);
        if (strncmp(t[r].profile, t[0].profile, sizeof(t[r].profile)) != 0)
            return base_fail(STRATA_EPROTO,
                             "domain '%s': ranks 0 and %u use different "
                             "profiles",
                             d->name, r);
        if (t[r].mapping_size != t[0].mapping_size ||
            t[r].mapping_size < d->window_size)
            return base_fail(STRATA_EPROTO,
                             "domain '%s': rank %u maps %llu bytes (rank 0: "
                             "%llu, window %zu)",
                             d->name, r, (unsigned long long)t[r].mapping_size,
                             (unsigned long long)t[0].mapping_size,
                             d->window_size);
    }
    return STRATA_OK;
}

static strata_err exchange(struct strata_domain *d, strata_orch *o)
{
    struct chip_window_desc *table = base_calloc(d->n, sizeof(*table));
    strata_err err;

    if (!table)
        return base_fail(STRATA_ENOMEM, "out of memory for %u descriptors",
                         d->n);
    for (uint32_t r = 0; r < d->n; r++)
        memcpy(&table[r], d->ctls[r].reply,
               d->ctls[r].reply_len < sizeof(*table) ? d->ctls[r].reply_len
                                                     : sizeof(*table));
    err = check_table(d, table);
    if (!err)
        err = phase(d, o, MBX_CTL_WINDOW_IMPORT, table,
                    (uint32_t)(d->n * sizeof(*table)));
    if (!err) {
        d->mapping_size = table[0].mapping_size;
        for (uint32_t r = 0; r < d->n; r++) {
            d->device_ctx[r] = d->ctls[r].out[0];
            d->local_base[r] = d->ctls[r].out[1];
        }
    }
    base_free(table);
    return err;
}

bool domain_exchange_forced(void)
{
    static int forced = -1;
    int f = __atomic_load_n(&forced, __ATOMIC_RELAXED);

    if (f < 0) {
        f = base_env_flag("STRATA_DOMAIN_EXCHANGE");
        __atomic_store_n(&forced, f, __ATOMIC_RELAXED);
    }
    return f;
}

/* Prepare and import; on failure every member releases what it made. */
static strata_err build(struct strata_domain *d, strata_orch *o)
{
    char msg[STRATA_ERRMSG_MAX];
    strata_err err;
    bool used = false;

    err = domain_exchange_forced() ? STRATA_OK : domain_adopt_build(d, &used);
    if (used)
        return err;
    err = phase(d, o, MBX_CTL_WINDOW_PREPARE, NULL, 0);
    /* Before IMPORT: members map the control page with the windows. */
    if (!err)
        err = domain_ctl_keep(d);
    if (!err)
        err = exchange(d, o);
    /* Every peer has mapped (or given up): the names are not needed. */
    unlink_names(d);
    if (!err)
        return STRATA_OK;
    snprintf(msg, sizeof(msg), "%s", strata_errmsg());
    domain_ctl_drop(d);
    if (phase(d, o, MBX_CTL_WINDOW_RELEASE, NULL, 0) != STRATA_OK)
        LOG_DEBUG("domain '%s': cleanup after a failed allocation: %s", d->name,
                  strata_errmsg());
    return base_fail(err, "domain '%s': %s", d->name, msg);
}

/* Under the scheduler lock. */
static void release_done(struct orch_ctl *c, void *arg)
{
    struct strata_domain *d = arg;

    if (c && c->err) {
        /* The member may still map the addresses of a worker-made window:
         * never hand them out again. */
        LOG_WARN("domain '%s': a member's release failed: %s", d->name, c->msg);
        d->va_len = 0;
    }
    if (--d->release_pending == 0) {
        if (d->va_len)
            orch_va_free_locked(d->sched, d->va_start, d->va_len);
        domain_ctl_drop(d);
        __atomic_store_n(&d->freed, true, __ATOMIC_RELEASE);
        domain_live_remove(d);
        shrink_push(d);
    }
}

void domain_release_locked(struct strata_domain *d, strata_run *run, uint32_t n)
{
    d->release_pending = n + 1; /* +1 until every frame is posted */
    for (uint32_t r = 0; r < n; r++) {
        struct orch_ctl *c = &d->ctls[r];

        if (domain_adopt_withdraw_locked(d, r)) {
            d->release_pending--; /* it never maps: nothing to release */
            continue;
        }
        memset(c, 0, sizeof(*c));
        c->op = MBX_CTL_WINDOW_RELEASE;
        c->arg[0] = d->alloc_id;
        c->on_done = release_done;
        c->on_done_arg = d;
        if (orch_control_post_locked(d->sched, run, d->eps[r], c) !=
            STRATA_OK) {
            /* The chip keeps its mapping until it exits (no name leaks);
             * a worker-made window's addresses are never handed out
             * again. */
            LOG_WARN("domain '%s': cannot post release to chip %d: %s", d->name,
                     d->chips[r], strata_errmsg());
            d->va_len = 0;
            d->release_pending--;
        }
    }
    release_done(NULL, d);
}

/* At the run fence, under the scheduler lock: free what is still held. */
static void fence_hook(struct orch_sched *s, void *arg)
{
    struct strata_domain *d = arg;

    (void)s;
    if (!d->allocated || d->freed || d->release_pending)
        return;
    __atomic_store_n(&d->released, true, __ATOMIC_RELEASE);
    domain_release_locked(d, d->run, d->n);
}

/* The worker maps the domain's control page once its members have
 * mapped (lost.c): it is what wakes the members when one of them dies.
 * A process out of file descriptors could not, and a death would leave
 * the others waiting, so an allocation there is refused (the probe is one
 * system call; a later shortage fails the run, adopt.c). */
static strata_err fd_room(const char *name)
{
    int fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 0);

    if (fd < 0 && (errno == EMFILE || errno == ENFILE))
        return base_fail(STRATA_ESYS,
                         "domain '%s': no file descriptor free for its "
                         "control page: %s",
                         name ? name : "", strerror(errno));
    if (fd >= 0)
        close(fd);
    return STRATA_OK;
}

strata_err strata_orch_allocate_domain(strata_orch *o,
                                       const strata_domain_spec *spec,
                                       strata_domain **out)
{
    struct orch_sched *s;
    struct strata_domain *d = NULL;
    uint64_t t0 = trace_enabled() ? trace_now() : 0;
    strata_err err;

    if (!o || !spec || !out)
        return base_fail_null("strata_orch_allocate_domain", !o      ? "orch"
                                                             : !spec ? "spec"
                                                                     : "out");
    s = orch_sched_of(o);
    err = orch_usable(o, "strata_orch_allocate_domain");
    if (!err)
        shrink_freed(s);
    if (!err)
        err = domain_validate(s, orch_run_of(o), spec);
    if (!err)
        err = fd_room(spec->name);
    if (!err)
        err = create(s, orch_run_of(o), spec, &d);
    if (err)
        return err;
    err = orch_sched_adopt(s, d, domain_free);
    if (err) {
        domain_free(d);
        return err;
    }
    /* From here d lives until the worker is destroyed. */
    d->alloc_id = __atomic_add_fetch(&next_alloc_id, 1, __ATOMIC_RELAXED);
    err = orch_run_on_fence(o, fence_hook, d);
    /* A member known to be dead fails the allocation here, on every path
     * (without the exchange nothing else would ask the chip before its
     * first map, in a kernel). */
    for (uint32_t r = 0; !err && r < d->n; r++) {
        err = orch_chip_check(s, d->eps[r]);
        if (err) {
            char why[STRATA_ERRMSG_MAX];

            snprintf(why, sizeof(why), "%s", strata_errmsg());
            err = base_fail(err, "domain '%s': %s", d->name, why);
        }
    }
    if (!err)
        err = orch_comm_init_chips(s, o, d->eps, d->n);
    if (!err)
        err = build(d, o);
    if (err) {
        d->released = d->freed = true;
        return err;
    }
    orch_lock(s);
    d->allocated = true;
    orch_unlock(s);
    domain_live_add(d);
    err = domain_watch_deaths(d);
    if (err)
        return err; /* live: the run's fence frees it */
    if (t0)
        trace_record(TRACE_K_SPAN, TRACE_CAT_DOMAIN, TRACE_LANE_DOMAIN, t0,
                     trace_now(), d->alloc_id, d->n, 0, 0, "domain allocate");
    *out = d;
    return STRATA_OK;
}

strata_err strata_domain_context(const strata_domain *d, int chip,
                                 strata_chip_domain_ctx *out)
{
    if (!d || !out)
        return base_fail_null("strata_domain_context", !d ? "d" : "out");
    if (__atomic_load_n(&d->released, __ATOMIC_ACQUIRE))
        return base_fail(STRATA_ESTATE, "domain '%s' is released", d->name);
    for (uint32_t r = 0; r < d->n; r++) {
        if (d->chips[r] != chip)
            continue;
        out->name = d->name;
        out->domain_rank = r;
        out->domain_size = d->n;
        out->device_ctx = d->device_ctx[r];
        out->local_window_base = d->local_base[r];
        out->actual_window_size = d->mapping_size;
        out->num_buffers = d->num_buffers;
        out->buffers = d->buffers;
        return STRATA_OK;
    }
    return base_fail(STRATA_ENOENT, "chip %d is not a member of domain '%s'",
                     chip, d->name);
}

strata_err strata_domain_release(strata_domain *d)
{
    if (!d)
        return STRATA_OK;
    /* The windows go at the fence: tasks already submitted may use them. */
    __atomic_store_n(&d->released, true, __ATOMIC_RELEASE);
    return STRATA_OK;
}

bool strata_domain_released(const strata_domain *d)
{
    return d && __atomic_load_n(&d->released, __ATOMIC_ACQUIRE);
}

bool strata_domain_freed(const strata_domain *d)
{
    return d && __atomic_load_n(&d->freed, __ATOMIC_ACQUIRE);
}
