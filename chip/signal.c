/* Kernel-side helpers: the domain context and cross-rank signal words,
 * and the domains' control pages that tell a waiter a member was lost. */
#include "base/alloc.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/futex.h"
#include "base/shm.h"
#include "chip_int.h"
#include "watch.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <strata/domain.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

const strata_comm_context *strata_chip_comm_context(strata_chip *chip,
                                                    uint64_t device_ctx)
{
    const struct chip_backend_ops *ops;

    if (!chip || chip->cfg->is_sub)
        return NULL;
    ops = chip->cfg->ops;
    return ops->comm_context ? ops->comm_context(chip->state, device_ctx)
                             : NULL;
}

/* Words in the windows a worker adopts for its chips' local domains lie
 * in the lower half of the address range it reserved before forking them,
 * and only chips of that worker map those windows: one count of the
 * worker's chips parked on such words tells strata_signal_add whether a
 * FUTEX_WAKE (a system call, most of a small exchange's cost) can find
 * anyone. Words anywhere else (global domains' windows, in the upper
 * half, whose peers live on other nodes; exchanged windows; host memory)
 * always wake. Set once at chip start, before any kernel runs. */
static struct {
    uintptr_t base, size;
    uint32_t *parked;
} tree;

void chip_signal_bind(uint32_t *parked, uint64_t base, uint64_t size)
{
    tree.base = (uintptr_t)base;
    tree.size = (uintptr_t)size;
    tree.parked = size ? parked : NULL;
}

static uint32_t *parked_count(const uint32_t *w)
{
    if (tree.parked && (uintptr_t)w - tree.base < tree.size)
        return tree.parked;
    return NULL;
}

/* ---- control pages ----------------------------------------------------- */

/* The page holds one struct; a whole page keeps it apart from anything
 * else a member maps. */
static size_t ctl_size(void)
{
    return (size_t)sysconf(_SC_PAGESIZE);
}

bool chip_domain_ctl_name(const struct chip_backend_ops *ops,
                          const struct chip_window_req *req, char *out,
                          size_t cap)
{
    if (!ops || !ops->host_window_name)
        return false;
    /* As the windows' names (sim/sim_window.c), with "ctl" for the rank:
     * the stale-segment sweep treats it as theirs, and nothing counts it
     * as a window. */
    if (req->name_token)
        snprintf(out, cap, "/strata-%u-%d-d%llu-ctl-%08x", (unsigned)getuid(),
                 (int)req->creator_pid, (unsigned long long)req->alloc_id,
                 req->name_token);
    else
        snprintf(out, cap, "/strata-%u-%d-d%llu-ctl", (unsigned)getuid(),
                 (int)req->creator_pid, (unsigned long long)req->alloc_id);
    return true;
}

strata_err chip_domain_ctl_map(const char *name, bool create,
                               struct chip_domain_ctl **out)
{
    int fd = shm_open(name, O_RDWR | (create ? O_CREAT : 0), 0600);
    strata_err err = STRATA_OK;
    void *p;

    if (fd < 0)
        return errno == ENOENT && !create
                   ? base_fail(STRATA_ENOENT, "no control page %s", name)
                   : base_fail_errno(errno, "shm_open %s", name);
    /* New: zero. Made by a peer already: the same size, nothing changes.
     * Its pages are reserved as every other segment's are (a page already
     * there is kept as it is), so a full /dev/shm is an error here, not a
     * SIGBUS when a chip marks or waits on it. */
    if (ftruncate(fd, (off_t)ctl_size()) != 0)
        err = base_fail_errno(errno, "ftruncate %s", name);
    if (!err)
        err = base_shm_reserve(fd, ctl_size(), "a domain control page");
    if (!err) {
        p = mmap(NULL, ctl_size(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
            err = base_fail_errno(errno, "mmap %s", name);
        else
            *out = p;
    }
    close(fd);
    return err;
}

strata_err chip_domain_ctl_make(const char *name, bool *made)
{
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    strata_err err = STRATA_OK;

    if (made)
        *made = false;
    if (fd < 0)
        return errno == EEXIST ? STRATA_OK
                               : base_fail_errno(errno, "shm_open %s", name);
    if (ftruncate(fd, (off_t)ctl_size()) != 0)
        err = base_fail_errno(errno, "ftruncate %s", name);
    if (!err)
        err = base_shm_reserve(fd, ctl_size(), "a domain control page");
    close(fd);
    if (err)
        shm_unlink(name);
    else if (made)
        *made = true;
    return err;
}

void chip_domain_ctl_unmap(struct chip_domain_ctl *c)
{
    if (c)
        munmap(c, ctl_size());
}

void chip_domain_ctl_mark(struct chip_domain_ctl *c, uint32_t rank,
                          const char *why)
{
    uint32_t free_claim = 0;

    if (__atomic_compare_exchange_n(&c->claim, &free_claim, 1, false,
                                    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
        c->rank = rank;
        snprintf(c->why, sizeof(c->why), "%s", why ? why : "");
        __atomic_store_n(&c->broken, 1, __ATOMIC_SEQ_CST);
    }
    /* Another marker may still be writing; it wakes them as well. */
    base_futex_wake(&c->broken);
}

strata_err chip_domain_ctl_mark_name(const char *name, bool create,
                                     uint32_t rank, const char *why)
{
    struct chip_domain_ctl *c = NULL;
    strata_err err = chip_domain_ctl_map(name, create, &c);

    if (err)
        return err;
    chip_domain_ctl_mark(c, rank, why);
    chip_domain_ctl_unmap(c);
    return STRATA_OK;
}

/* ---- the control pages of this chip's domains, by window address ------- */

struct watch {
    uint64_t alloc_id;
    struct chip_domain_ctl *ctl;
    uint32_t n;
    uintptr_t size;
    struct watch *next;
    uintptr_t bases[];
};

static struct watch *watches;

strata_err chip_watch_add(uint64_t alloc_id, struct chip_domain_ctl *ctl,
                          const uintptr_t *bases, uint32_t n, uintptr_t size)
{
    struct watch *w = base_malloc(sizeof(*w) + n * sizeof(w->bases[0]));

    if (!w) {
        chip_domain_ctl_unmap(ctl);
        return base_fail(STRATA_ENOMEM, "out of memory watching window %llu",
                         (unsigned long long)alloc_id);
    }
    w->alloc_id = alloc_id;
    w->ctl = ctl;
    w->n = n;
    w->size = size;
    memcpy(w->bases, bases, n * sizeof(w->bases[0]));
    w->next = watches;
    watches = w;
    return STRATA_OK;
}

void chip_watch_remove(uint64_t alloc_id)
{
    for (struct watch **pp = &watches; *pp; pp = &(*pp)->next) {
        struct watch *w = *pp;

        if (w->alloc_id == alloc_id) {
            *pp = w->next;
            chip_domain_ctl_unmap(w->ctl);
            base_free(w);
            return;
        }
    }
}

void chip_watch_remove_all(void)
{
    while (watches)
        chip_watch_remove(watches->alloc_id);
}

/* The control page of the domain whose window holds w, or NULL. */
static struct chip_domain_ctl *watched(const uint32_t *w)
{
    for (const struct watch *x = watches; x; x = x->next)
        for (uint32_t i = 0; i < x->n; i++)
            if ((uintptr_t)w - x->bases[i] < x->size)
                return x->ctl;
    return NULL;
}

/* ---- signals ------------------------------------------------------------ */

void strata_signal_add(volatile uint32_t *word, uint32_t v)
{
    uint32_t *w = (uint32_t *)(uintptr_t)word;
    uint32_t *parked;

    if (!w)
        return;
    parked = parked_count(w);
    /* Both sides order their two accesses with sequentially consistent
     * atomics: either the waiter sees the new value before it parks, or
     * this sees its count. */
    __atomic_add_fetch(w, v, __ATOMIC_SEQ_CST);
    if (!parked || __atomic_load_n(parked, __ATOMIC_SEQ_CST) != 0)
        base_futex_wake(w);
}

struct reach {
    const uint32_t *w;
    uint32_t at_least;
};

static bool reached(void *arg)
{
    const struct reach *r = arg;

    return __atomic_load_n(r->w, __ATOMIC_ACQUIRE) >= r->at_least;
}

/* Without futex_waitv (Linux < 5.16): a sleep on the word alone, cut to
 * this long so that the control page is looked at again. */
#define RECHECK_NS 50000000ull

/* Sleeps while *w == v and *broken == 0, up to deadline: on both words at
 * once where the kernel can. 0, ETIMEDOUT or EINTR. */
static int sleep_on(uint32_t *w, uint32_t v, uint32_t *broken,
                    uint64_t deadline)
{
    static int no_waitv;
    struct futex_waitv fw[2] = {
        {.val = v, .uaddr = (uintptr_t)w, .flags = FUTEX_32},
        {.val = 0, .uaddr = (uintptr_t)broken, .flags = FUTEX_32},
    };
    struct timespec ts, *tsp = NULL;
    uint64_t now;
    int r;

    if (!__atomic_load_n(&no_waitv, __ATOMIC_RELAXED)) {
        if (deadline != BASE_NEVER) {
            ts.tv_sec = (time_t)(deadline / 1000000000u);
            ts.tv_nsec = (long)(deadline % 1000000000u);
            tsp = &ts;
        }
        /* Absolute, on the clock base_now_ns reads. */
        if (syscall(SYS_futex_waitv, fw, 2u, 0u, tsp, CLOCK_MONOTONIC) >= 0 ||
            errno == EAGAIN)
            return 0;
        if (errno == ETIMEDOUT || errno == EINTR)
            return errno;
        if (errno == ENOSYS)
            __atomic_store_n(&no_waitv, 1, __ATOMIC_RELAXED);
    }
    now = base_now_ns();
    if (deadline != BASE_NEVER && deadline - now <= RECHECK_NS)
        return base_futex_wait(w, v, deadline);
    r = base_futex_wait(w, v, now + RECHECK_NS);
    return r == ETIMEDOUT ? 0 : r; /* only the cut: look again */
}

/* Parks until *w >= at_least, the domain breaks or the deadline, counted
 * in parked. */
static int park(uint32_t *w, uint32_t at_least, uint64_t deadline,
                uint32_t *parked, struct chip_domain_ctl *ctl)
{
    uint32_t v;
    int r = 0;

    if (parked)
        __atomic_add_fetch(parked, 1, __ATOMIC_SEQ_CST);
    v = __atomic_load_n(w, __ATOMIC_SEQ_CST);
    if (v < at_least)
        r = ctl ? sleep_on(w, v, &ctl->broken, deadline)
                : base_futex_wait(w, v, deadline);
    if (parked)
        __atomic_sub_fetch(parked, 1, __ATOMIC_SEQ_CST);
    return r;
}

static strata_err lost(const struct chip_domain_ctl *ctl)
{
    char why[CHIP_PEER_WHY_MAX];

    memcpy(why, ctl->why, sizeof(why));
    why[sizeof(why) - 1] = '\0';
    return base_fail(STRATA_EPEER,
                     "signal wait: rank %u of the word's domain was lost: %s",
                     ctl->rank, why);
}

strata_err strata_signal_wait(const volatile uint32_t *word, uint32_t at_least,
                              double timeout_s)
{
    uint32_t *w = (uint32_t *)(uintptr_t)word;
    uint64_t deadline;
    uint32_t *parked;
    struct chip_domain_ctl *ctl;
    struct reach r = {w, at_least};

    if (!w)
        return base_fail(STRATA_EINVAL, "strata_signal_wait: word is NULL");
    if (isnan(timeout_s))
        return base_fail(STRATA_EINVAL,
                         "strata_signal_wait: timeout_s is NaN (< 0 waits "
                         "forever)");
    deadline = base_deadline_after(timeout_s);
    parked = parked_count(w);
    /* A few pauses, then a yield per look (base_spin_until): with more
     * ranks than cores the awaited peer gets this core at once. */
    if (base_spin_until(reached, &r, base_spin_budget()))
        return STRATA_OK;
    ctl = watched(w);
    while (__atomic_load_n(w, __ATOMIC_ACQUIRE) < at_least) {
        /* A word reached wins over a loss: only a wait that cannot end
         * fails. */
        if (ctl && __atomic_load_n(&ctl->broken, __ATOMIC_ACQUIRE))
            return lost(ctl);
        if (park(w, at_least, deadline, parked, ctl) == ETIMEDOUT &&
            __atomic_load_n(w, __ATOMIC_ACQUIRE) < at_least)
            return base_fail(STRATA_ETIMEDOUT,
                             "signal word still %u after %.3f s, waiting "
                             "for %u",
                             __atomic_load_n(w, __ATOMIC_ACQUIRE), timeout_s,
                             at_least);
    }
    return STRATA_OK;
}
