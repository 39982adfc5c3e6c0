/* The tier runtime: budgets, instances, latest(), the memory report. */
#include "base/alloc.h"
#include "base/err.h"
#include "base/fault.h"
#include "base/proc.h"
#include "tier/device.h"
#include "tier/sweep.h"
#include "tier_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void strata_tier_config_init(strata_tier_config *cfg)
{
    if (!cfg)
        return;
    memset(cfg, 0, sizeof(*cfg));
    cfg->io_threads = 2;
}

static strata_err check_config(const strata_tier_config *cfg,
                               uint64_t budgets[STRATA_TIER_COUNT])
{
    strata_err err;

    if (cfg->io_threads > 64)
        return base_fail(STRATA_EINVAL, "io_threads %u is over 64",
                         cfg->io_threads);
    if (cfg->nvme_dir) {
        err = tier_dir_check("nvme_dir", cfg->nvme_dir);
        if (err)
            return err;
    }
    return tier_parse_budgets(cfg->budgets, budgets);
}

static strata_err init_sync(strata_tier_runtime *rt)
{
    pthread_condattr_t ca;

    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&rt->lock, NULL);
    pthread_cond_init(&rt->idle, &ca);
    pthread_cond_init(&rt->work, &ca);
    pthread_condattr_destroy(&ca);
    return STRATA_OK;
}

static void fini_sync(strata_tier_runtime *rt)
{
    pthread_cond_destroy(&rt->work);
    pthread_cond_destroy(&rt->idle);
    pthread_mutex_destroy(&rt->lock);
}

strata_err tier_check_process(pid_t pid, const char *fn)
{
    /* No system call (base_pid). */
    if (pid != base_pid())
        return base_fail(STRATA_ESTATE,
                         "%s: the tier runtime belongs to process %d; a "
                         "process forked from it has only a copy, which it "
                         "cannot use or destroy (its I/O threads did not "
                         "follow the fork)",
                         fn, (int)pid);
    return STRATA_OK;
}

strata_err strata_tier_runtime_create(const strata_tier_config *cfg,
                                      strata_tier_runtime **out)
{
    uint64_t budgets[STRATA_TIER_COUNT];
    strata_tier_runtime *rt;
    strata_err err;

    if (!cfg)
        return base_fail_null("strata_tier_runtime_create", "cfg");
    if (!out)
        return base_fail_null("strata_tier_runtime_create", "out");
    err = check_config(cfg, budgets);
    if (err)
        return err;
    rt = base_calloc(1, sizeof(*rt));
    if (!rt)
        return base_fail(STRATA_ENOMEM, "tier runtime: out of memory");
    rt->pid = base_pid();
    if (cfg->nvme_dir && !(rt->nvme_dir = base_strdup(cfg->nvme_dir))) {
        base_free(rt);
        return base_fail(STRATA_ENOMEM, "tier runtime: out of memory");
    }
    if (!tier_owner_tag(rt->owner_tag, sizeof(rt->owner_tag))) {
        base_free(rt->nvme_dir);
        base_free(rt);
        return base_fail(STRATA_ESYS, "tier runtime: /proc/self/stat does not "
                                      "give this process's start time");
    }
    /* A killed process's instances are files nobody will remove: gone
     * before this runtime makes its own. */
    if (rt->nvme_dir)
        tier_sweep_dead(rt->nvme_dir, TIER_NVME_PREFIX, TIER_NVME_SUFFIX);
    for (int i = 0; i < STRATA_TIER_COUNT; i++)
        rt->acct[i].budget = budgets[i];
    init_sync(rt);
    err = tier_pool_start(rt, cfg->io_threads ? cfg->io_threads : 2);
    if (err) {
        fini_sync(rt);
        base_free(rt->nvme_dir);
        base_free(rt);
        return err;
    }
    *out = rt;
    return STRATA_OK;
}

/* Releases inst's storage and accounting (rt->lock held; no transfer
 * names it any more). */
static void release_storage(strata_instance *inst)
{
    struct tier_account *a = &inst->rt->acct[inst->tier];

    if (inst->tier == STRATA_TIER_DEVICE ||
        inst->tier == STRATA_TIER_HOST_PINNED)
        tier_cuda_free(inst);
    else if (inst->data)
        munmap(inst->data, inst->map_len);
    inst->data = NULL;
    tier_nvme_close(inst);
    a->live -= inst->capacity;
    a->instances--;
    inst->closed = true;
    base_free(inst->readers);
    inst->readers = NULL;
    inst->cap_readers = 0;
}

strata_err strata_tier_runtime_destroy(strata_tier_runtime *rt)
{
    strata_instance *inst, *next;

    if (!rt)
        return STRATA_OK;
    /* A fork's copy: the files and mappings are the parent's. */
    if (tier_check_process(rt->pid, "strata_tier_runtime_destroy"))
        return STRATA_ESTATE;
    pthread_mutex_lock(&rt->lock);
    tier_wait_all(rt);
    tier_detach_handles(rt);
    for (inst = rt->instances; inst; inst = inst->next)
        if (!inst->closed)
            release_storage(inst);
    pthread_mutex_unlock(&rt->lock);
    tier_pool_stop(rt);
    for (inst = rt->instances; inst; inst = next) {
        next = inst->next;
        base_free(inst->name);
        base_free(inst->path);
        base_free(inst);
    }
    fini_sync(rt);
    base_free(rt->nvme_dir);
    base_free(rt);
    return STRATA_OK;
}

strata_err strata_tier_set_budget(strata_tier_runtime *rt, const char *tier,
                                  const char *bytes_or_iec)
{
    strata_tier t;
    uint64_t bytes = TIER_NO_BUDGET;
    strata_err err;

    if (!rt)
        return base_fail_null("strata_tier_set_budget", "rt");
    if (tier_check_process(rt->pid, "strata_tier_set_budget"))
        return STRATA_ESTATE;
    if (!tier)
        return base_fail_null("strata_tier_set_budget", "tier");
    err = strata_tier_parse(tier, &t);
    if (!err && bytes_or_iec)
        err = strata_parse_bytes(bytes_or_iec, &bytes);
    if (err)
        return err;
    pthread_mutex_lock(&rt->lock);
    rt->acct[t].budget = bytes;
    pthread_mutex_unlock(&rt->lock);
    return STRATA_OK;
}

static strata_err check_allocate(strata_tier_runtime *rt, const char *name,
                                 const char *tier, uint64_t capacity,
                                 strata_instance **out, strata_tier *t)
{
    static const char fn[] = "strata_instance_allocate";
    size_t len;
    strata_err err;

    if (!rt)
        return base_fail_null(fn, "rt");
    if (!name)
        return base_fail_null(fn, "name");
    if (!tier)
        return base_fail_null(fn, "tier");
    if (!out)
        return base_fail_null(fn, "out");
    len = strnlen(name, TIER_NAME_MAX + 1);
    if (len == 0 || len > TIER_NAME_MAX)
        return base_fail(STRATA_EINVAL, "%s: name must be 1..%d bytes", fn,
                         TIER_NAME_MAX);
    if (capacity == 0 || capacity > (UINT64_C(1) << 62))
        return base_fail(STRATA_EINVAL,
                         "%s: capacity %llu is outside 1..2^62 bytes", fn,
                         (unsigned long long)capacity);
    err = strata_tier_parse(tier, t);
    if (err)
        return err;
    if (*t == STRATA_TIER_DEVICE || *t == STRATA_TIER_HOST_PINNED)
        return tier_cuda_ready(*t);
    if (*t == STRATA_TIER_NVME && !rt->nvme_dir)
        return base_fail(STRATA_ENOTSUP,
                         "tier 'nvme' needs a directory: the runtime was "
                         "created without nvme_dir");
    return STRATA_OK;
}

/* Reserves capacity on tier t (rt->lock held), or STRATA_EBUDGET. */
static strata_err reserve(strata_tier_runtime *rt, strata_tier t,
                          const char *name, uint64_t version, uint64_t cap)
{
    struct tier_account *a = &rt->acct[t];

    if (a->budget != TIER_NO_BUDGET &&
        (a->live > a->budget || cap > a->budget - a->live))
        return base_fail(STRATA_EBUDGET,
                         "tier '%s': %llu bytes for '%s' v%llu would exceed "
                         "its budget of %llu bytes (%llu bytes live)",
                         strata_tier_name(t), (unsigned long long)cap, name,
                         (unsigned long long)version,
                         (unsigned long long)a->budget,
                         (unsigned long long)a->live);
    a->live += cap;
    return STRATA_OK;
}

static strata_err make_storage(strata_instance *inst)
{
    if (inst->tier == STRATA_TIER_NVME)
        return tier_nvme_open(inst->rt, inst);
    if (inst->tier == STRATA_TIER_DEVICE ||
        inst->tier == STRATA_TIER_HOST_PINNED)
        return tier_cuda_alloc(inst);
    if (BASE_FAULT("tier.alloc"))
        return base_fail(STRATA_ENOMEM, "fault point tier.alloc");
    inst->map_len =
        (inst->capacity + TIER_ALIGN - 1) & ~(size_t)(TIER_ALIGN - 1);
    inst->data = mmap(NULL, inst->map_len, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (inst->data == MAP_FAILED) {
        inst->data = NULL;
        return base_fail(STRATA_ENOMEM, "ram instance '%s' of %llu bytes: %s",
                         inst->name, (unsigned long long)inst->capacity,
                         strerror(errno));
    }
    return STRATA_OK;
}

static void free_instance(strata_instance *inst)
{
    base_free(inst->name);
    base_free(inst->path);
    base_free(inst);
}

strata_err strata_instance_allocate(strata_tier_runtime *rt, const char *name,
                                    uint64_t version, const char *tier,
                                    uint64_t capacity, strata_instance **out)
{
    strata_instance *inst;
    strata_tier t;
    strata_err err = check_allocate(rt, name, tier, capacity, out, &t);

    if (!err)
        err = tier_check_process(rt->pid, "strata_instance_allocate");
    if (err)
        return err;
    inst = base_calloc(1, sizeof(*inst));
    if (!inst || !(inst->name = base_strdup(name))) {
        base_free(inst);
        return base_fail(STRATA_ENOMEM, "instance '%s': out of memory", name);
    }
    inst->rt = rt;
    inst->version = version;
    inst->capacity = capacity;
    inst->tier = t;
    inst->fd = -1;
    pthread_mutex_lock(&rt->lock);
    err = reserve(rt, t, name, version, capacity);
    pthread_mutex_unlock(&rt->lock);
    if (err) {
        free_instance(inst);
        return err;
    }
    err = make_storage(inst);
    pthread_mutex_lock(&rt->lock);
    if (err) {
        rt->acct[t].live -= capacity;
    } else {
        struct tier_account *a = &rt->acct[t];

        if (a->live > a->peak)
            a->peak = a->live;
        a->instances++;
        inst->seq = ++rt->next_seq;
        inst->next = rt->instances;
        rt->instances = inst;
    }
    pthread_mutex_unlock(&rt->lock);
    if (err) {
        free_instance(inst);
        return err;
    }
    *out = inst;
    return STRATA_OK;
}

strata_err strata_instance_close(strata_instance *inst)
{
    strata_tier_runtime *rt;

    if (!inst)
        return STRATA_OK;
    rt = inst->rt;
    if (tier_check_process(rt->pid, "strata_instance_close"))
        return STRATA_ESTATE;
    pthread_mutex_lock(&rt->lock);
    if (inst->closed) {
        pthread_mutex_unlock(&rt->lock);
        return base_fail(STRATA_ESTATE, "instance '%s' v%llu is closed",
                         inst->name, (unsigned long long)inst->version);
    }
    /* Readers and writers go first; a transfer queued meanwhile sees
     * closed only after this, so it is refused. */
    inst->closed = true;
    tier_wait_quiet(inst, false);
    release_storage(inst);
    pthread_mutex_unlock(&rt->lock);
    return STRATA_OK;
}

strata_err strata_tier_latest(strata_tier_runtime *rt, const char *name,
                              const char *tier, strata_instance **out)
{
    strata_instance *best = NULL;
    strata_tier t = STRATA_TIER_RAM;
    strata_err err;

    if (!rt)
        return base_fail_null("strata_tier_latest", "rt");
    if (tier_check_process(rt->pid, "strata_tier_latest"))
        return STRATA_ESTATE;
    if (!name)
        return base_fail_null("strata_tier_latest", "name");
    if (!out)
        return base_fail_null("strata_tier_latest", "out");
    if (tier && (err = strata_tier_parse(tier, &t)))
        return err;
    pthread_mutex_lock(&rt->lock);
    for (strata_instance *i = rt->instances; i; i = i->next) {
        if (i->closed || strcmp(i->name, name) != 0 || (tier && i->tier != t))
            continue;
        /* The list is newest first: a tie keeps the newer. */
        if (!best || i->version > best->version)
            best = i;
    }
    pthread_mutex_unlock(&rt->lock);
    if (!best)
        return base_fail(STRATA_ENOENT, "no live instance of '%.128s'%s%s",
                         name, tier ? " on tier " : "",
                         tier ? strata_tier_name(t) : "");
    *out = best;
    return STRATA_OK;
}

const char *strata_instance_name(const strata_instance *inst)
{
    return inst ? inst->name : NULL;
}

uint64_t strata_instance_version(const strata_instance *inst)
{
    return inst ? inst->version : 0;
}

uint64_t strata_instance_capacity(const strata_instance *inst)
{
    return inst ? inst->capacity : 0;
}

int strata_instance_tier(const strata_instance *inst)
{
    return inst ? (int)inst->tier : -1;
}

bool strata_instance_closed(const strata_instance *inst)
{
    bool closed;

    if (!inst)
        return false;
    pthread_mutex_lock(&inst->rt->lock);
    closed = inst->closed;
    pthread_mutex_unlock(&inst->rt->lock);
    return closed;
}

void *strata_instance_data(strata_instance *inst)
{
    void *p;

    if (!inst || tier_check_process(inst->rt->pid, "strata_instance_data") != 0)
        return NULL;
    pthread_mutex_lock(&inst->rt->lock);
    p = inst->closed ? NULL : inst->data;
    pthread_mutex_unlock(&inst->rt->lock);
    return p;
}

static strata_err host_rw(strata_instance *inst, uint64_t off, void *buf,
                          size_t n, bool write, const char *fn)
{
    strata_tier_runtime *rt;
    strata_err err = STRATA_OK;

    if (!inst)
        return base_fail_null(fn, "inst");
    if (!buf && n)
        return base_fail_null(fn, write ? "src" : "dst");
    if (tier_check_process(inst->rt->pid, fn))
        return STRATA_ESTATE;
    if (off > inst->capacity || n > inst->capacity - off)
        return base_fail(STRATA_EINVAL,
                         "%s: bytes [%llu, +%zu) are outside the %llu-byte "
                         "instance",
                         fn, (unsigned long long)off, n,
                         (unsigned long long)inst->capacity);
    rt = inst->rt;
    pthread_mutex_lock(&rt->lock);
    if (inst->closed) {
        pthread_mutex_unlock(&rt->lock);
        return base_fail(STRATA_ESTATE, "%s: instance '%s' v%llu is closed", fn,
                         inst->name, (unsigned long long)inst->version);
    }
    tier_wait_quiet(inst, !write);
    if (!write && inst->invalid) {
        pthread_mutex_unlock(&rt->lock);
        return base_fail(STRATA_EIO,
                         "%s: instance '%s' v%llu holds no valid data: the "
                         "last transfer into it failed",
                         fn, inst->name, (unsigned long long)inst->version);
    }
    if (write)
        inst->invalid = false;
    /* The bytes move under the lock: no transfer may start on inst
     * meanwhile. Host copies are short next to transfers. */
    if (inst->data) {
        if (write)
            memcpy((char *)inst->data + off, buf, n);
        else
            memcpy(buf, (char *)inst->data + off, n);
    } else if (inst->dev) {
        err = write ? tier_cuda_copy((char *)inst->dev + off, buf, n, NULL, 0)
                    : tier_cuda_copy(buf, (char *)inst->dev + off, n, NULL, 0);
    } else {
        err = tier_file_rw(inst, off, buf, n, write);
    }
    pthread_mutex_unlock(&rt->lock);
    return err;
}

strata_err strata_instance_write(strata_instance *inst, uint64_t offset,
                                 const void *src, size_t n)
{
    return host_rw(inst, offset, (void *)(uintptr_t)src, n, true,
                   "strata_instance_write");
}

strata_err strata_instance_read(strata_instance *inst, uint64_t offset,
                                void *dst, size_t n)
{
    return host_rw(inst, offset, dst, n, false, "strata_instance_read");
}

strata_err strata_tier_report_get(strata_tier_runtime *rt,
                                  strata_tier_report *out)
{
    strata_tier_report r;

    if (!rt)
        return base_fail_null("strata_tier_report_get", "rt");
    if (tier_check_process(rt->pid, "strata_tier_report_get"))
        return STRATA_ESTATE;
    if (!out)
        return base_fail_null("strata_tier_report_get", "out");
    memset(&r, 0, sizeof(r));
    pthread_mutex_lock(&rt->lock);
    for (int i = 0; i < STRATA_TIER_COUNT; i++) {
        r.tiers[i].live = rt->acct[i].live;
        r.tiers[i].peak = rt->acct[i].peak;
        r.tiers[i].budget = rt->acct[i].budget;
        r.tiers[i].instances = rt->acct[i].instances;
    }
    memcpy(r.moved, rt->moved, sizeof(r.moved));
    r.transfers_done = rt->xfers_done;
    r.transfers_failed = rt->xfers_failed;
    pthread_mutex_unlock(&rt->lock);
    *out = r;
    return STRATA_OK;
}
