/* strata_worker_init: fork every child before any thread, wait for all to
 * report ready under one deadline, roll everything back on failure. */
#include "base/alloc.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/fault.h"
#include "base/log.h"
#include "chip/chip.h"
#include "chip/registry.h"
#include "graph/halo_mpi.h"
#include "orch/control.h"
#include "remote.h"
#include "worker/reclaim.h"
#include "worker_int.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static int open_pidfd(pid_t pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    return -1;
#endif
}

static const char *who(const struct orch_endpoint *ep)
{
    return orch_ep_kind_name(ep->kind);
}

static strata_err make_endpoints(strata_worker *w)
{
    size_t n = worker_num_directed(w) + w->num_subs;
    strata_err err;

    w->eps = base_calloc(n ? n : 1, sizeof(*w->eps));
    if (!w->eps)
        return base_fail(STRATA_ENOMEM, "out of memory for children");
    for (size_t i = 0; i < n; i++) {
        struct orch_endpoint *ep = &w->eps[i];

        size_t nd = worker_num_directed(w);

        if (i >= nd)
            ep->kind = ORCH_EP_SUB;
        else
            ep->kind = w->level == 3 ? ORCH_EP_CHIP : ORCH_EP_NODE;
        ep->id = i >= nd         ? (int)(i - nd)
                 : w->level == 3 ? w->chip_ids[i]
                                 : (int)i;
        ep->pidfd = -1;
        ep->notify_fd = -1;
    }
    for (size_t i = 0; i < n; i++) {
        err = mbx_create(&w->eps[i].mbx);
        if (!err && w->eps[i].kind == ORCH_EP_NODE && w->nodes[i].remote)
            err = remote_endpoint_init(w, i);
        if (err)
            return err;
    }
    err = mbx_shared_create(&w->shared);
    if (err)
        return err;
    w->doorbell_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->doorbell_fd < 0)
        return base_fail_errno(errno, "eventfd for the scheduler doorbell");
    return STRATA_OK;
}

/* In the new child: drop what belongs to siblings, then serve. */
_Noreturn static void become_child(strata_worker *w, size_t i)
{
    size_t n = worker_num_directed(w) + w->num_subs;
    struct chip_child_cfg cfg = {
        .is_sub = w->eps[i].kind == ORCH_EP_SUB,
        .id = w->eps[i].id,
        .ops = w->ops,
        .mbx = w->eps[i].mbx,
        .shared = w->shared,
        .doorbell_fd = w->doorbell_fd,
        .parent = w->creator,
        .va_base = (uint64_t)(uintptr_t)w->va_base,
        .va_size = w->va_size,
        .index = (unsigned)i,
        .count = (unsigned)worker_num_directed(w),
        .device_ordinal =
            w->level == 3 && i < w->num_chips && w->device_ordinals
                ? w->device_ordinals[i]
                : -1,
    };

    for (size_t j = 0; j < n; j++) {
        if (j == i)
            continue;
        if (w->eps[j].pidfd >= 0)
            close(w->eps[j].pidfd);
        if (w->eps[j].notify_fd >= 0)
            close(w->eps[j].notify_fd);
        mbx_destroy(w->eps[j].mbx);
    }
    worker_buffers_forget_inherited(w);
    chip_child_main(&cfg);
}

static strata_err fork_child(strata_worker *w, size_t i, uint64_t deadline)
{
    struct orch_endpoint *ep = &w->eps[i];
    pid_t pid;

    if (BASE_FAULT("worker.fork"))
        return base_fail(STRATA_ESYS, "fault point worker.fork");
    pid = fork();
    if (pid < 0)
        return base_fail_errno(errno, "fork of %s %d", who(ep), ep->id);
    if (pid == 0) {
        sigset_t none;

        /* A caller (a strata-node session) may block signals it reads
         * from a signalfd; a child starts with none blocked. */
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
    }
    if (pid == 0 && w->eps[i].kind == ORCH_EP_NODE)
        worker_node_main(w, i, deadline);
    if (pid == 0)
        become_child(w, i);
    /* Both sides set the group, so it holds whichever runs first. */
    setpgid(pid, pid);
    ep->pid = pid;
    ep->pidfd = open_pidfd(pid);
    /* Without pidfds (a kernel before 5.3) deaths are seen by waitpid in
     * steps; a process out of descriptors is refused, naming its limit,
     * rather than left to poll more of them than it may (EINVAL). The
     * child is already ours: the caller's rollback ends it. */
    if (ep->pidfd < 0 && (errno == EMFILE || errno == ENFILE)) {
        struct rlimit lim;
        int e = errno;

        if (getrlimit(RLIMIT_NOFILE, &lim) != 0)
            lim.rlim_cur = RLIM_INFINITY;
        if (lim.rlim_cur == RLIM_INFINITY)
            return base_fail_errno(e, "pidfd of %s %d", who(ep), ep->id);
        return base_fail(STRATA_ESYS,
                         "pidfd of %s %d: %s (the process may open %llu "
                         "files: ulimit -n; a worker holds one per child "
                         "and a few more)",
                         who(ep), ep->id, strerror(e),
                         (unsigned long long)lim.rlim_cur);
    }
    return STRATA_OK;
}

/* STRATA_OK when every child is ready, an error naming the first that
 * failed or died, STRATA_EAGAIN-like 1 when still waiting. */
static int poll_ready(strata_worker *w, strata_err *err)
{
    size_t n = worker_num_directed(w) + w->num_subs;
    int waiting = 0;

    for (size_t i = 0; i < n; i++) {
        struct orch_endpoint *ep = &w->eps[i];
        uint32_t st = __atomic_load_n(&ep->mbx->h.init_state, __ATOMIC_ACQUIRE);

        if (st != MBX_INIT_FAILED && st != MBX_INIT_READY) {
            /* A test holds here while a child fails and exits. */
            if (BASE_FAULT("worker.poll_ready"))
                LOG_DEBUG("fault point worker.poll_ready: no effect");
            orch_endpoint_reap(ep, false);
            /* A child that failed writes why, then exits: it may have
             * done both since the load above. */
            st = __atomic_load_n(&ep->mbx->h.init_state, __ATOMIC_ACQUIRE);
        }
        if (st == MBX_INIT_FAILED) {
            *err = base_fail((strata_err)ep->mbx->h.init_err,
                             "%s %d failed to start: %s", who(ep), ep->id,
                             ep->mbx->h.init_msg);
            return -1;
        }
        if (st == MBX_INIT_READY)
            continue;
        if (ep->reaped) {
            *err =
                base_fail(STRATA_EPEER, "%s %d (pid %d) died during start-up",
                          who(ep), ep->id, (int)ep->pid);
            return -1;
        }
        waiting++;
    }
    return waiting;
}

/* The children that have not answered, named (up to four): a remote
 * node by its endpoint, an MPI rank by its rank, a forked one by its pid. */
static void name_late(strata_worker *w, char *buf, size_t cap)
{
    size_t n = worker_num_directed(w) + w->num_subs, k = 0;
    int len = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < n && len >= 0 && (size_t)len < cap; i++) {
        const struct orch_endpoint *ep = &w->eps[i];
        uint32_t st = __atomic_load_n(&ep->mbx->h.init_state, __ATOMIC_ACQUIRE);
        const struct remote_node *r =
            ep->kind == ORCH_EP_NODE && w->nodes ? w->nodes[i].remote : NULL;
        const char *sep = k ? ", " : "";

        if (st == MBX_INIT_READY || st == MBX_INIT_FAILED)
            continue;
        if (k++ == 4) {
            len += snprintf(buf + len, cap - (size_t)len, ", ...");
            break;
        }
        if (r && r->group)
            len +=
                snprintf(buf + len, cap - (size_t)len, "%s%s %d (MPI rank %u)",
                         sep, who(ep), ep->id, (unsigned)r->rank);
        else if (r)
            len += snprintf(buf + len, cap - (size_t)len, "%s%s %d (remote %s)",
                            sep, who(ep), ep->id, r->endpoint);
        else
            len += snprintf(buf + len, cap - (size_t)len, "%s%s %d (pid %d)",
                            sep, who(ep), ep->id, (int)ep->pid);
    }
}

static strata_err wait_ready(strata_worker *w, uint64_t deadline)
{
    size_t n = worker_num_directed(w) + w->num_subs;
    struct pollfd *pfd = base_calloc(n + 1, sizeof(*pfd));
    strata_err err = STRATA_OK;
    uint64_t v;

    if (!pfd)
        return base_fail(STRATA_ENOMEM, "out of memory waiting for children");
    pfd[0].fd = w->doorbell_fd;
    pfd[0].events = POLLIN;
    for (size_t i = 0; i < n; i++) {
        pfd[i + 1].fd = w->eps[i].pidfd;
        pfd[i + 1].events = POLLIN;
    }
    while (poll_ready(w, &err) > 0) {
        int ms = base_deadline_poll_ms(deadline);

        if (ms == 0) {
            char late[512];

            name_late(w, late, sizeof(late));
            err = base_fail(STRATA_ETIMEDOUT,
                            "not ready within the start-up deadline of "
                            "%.3f s: %s",
                            w->startup_timeout_s, late);
            break;
        }
        /* Without pidfds a death is only seen by waitpid: poll in steps. */
        if (pfd[n > 0 ? 1 : 0].fd < 0 && (ms < 0 || ms > 50))
            ms = 50;
        if (poll(pfd, n + 1, ms) < 0 && errno != EINTR) {
            err = base_fail_errno(errno, "poll while waiting for children");
            break;
        }
        if (read(w->doorbell_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
            LOG_WARN("doorbell read: %s", strerror(errno));
    }
    base_free(pfd);
    return err;
}

/* A forked child died (under the scheduler lock; it must not wait): a
 * child killed outright could not remove its /dev/shm names, so they go
 * now rather than at the next worker's sweep. Only once it is reaped (its
 * pid cannot be anyone else's); whatever its own children make as they
 * die with it goes at teardown. */
static void child_died(struct orch_sched *s, int ep, const char *why, void *arg)
{
    strata_worker *w = arg;
    const struct orch_endpoint *e = &w->eps[ep];
    pid_t pid = e->pid;

    (void)s;
    (void)why;
    /* An MPI rank's halo exchange waits on its chips' flags. */
    halo_mpi_child_died(e->kind == ORCH_EP_CHIP ? e->id : -1);
    if (pid <= 0 || !__atomic_load_n(&e->reaped, __ATOMIC_ACQUIRE) ||
        (e->kind == ORCH_EP_NODE && w->nodes && w->nodes[ep].remote))
        return;
    if (worker_reclaim_names(&pid, 1))
        LOG_INFO("removed the /dev/shm names of dead %s %d (pid %d)", who(e),
                 e->id, (int)pid);
}

static strata_err start_scheduler(strata_worker *w)
{
    struct orch_sched_cfg cfg = {
        .worker = w,
        .eps = w->eps,
        .num_chips = worker_num_directed(w),
        .num_subs = w->num_subs,
        .shared = w->shared,
        .doorbell_fd = w->doorbell_fd,
        .registry_count = chip_registry_count(),
        .directed_kind =
            w->level == 3 ? STRATA_CALLABLE_KERNEL : STRATA_CALLABLE_ORCH,
        .ops = w->ops,
        .va_base = (uint64_t)(uintptr_t)w->va_base,
        .va_size = w->va_size,
        .mem = {worker_mem_hold, worker_mem_unhold, worker_mem_idle, w},
    };
    strata_err err = orch_sched_create(&cfg, &w->sched);

    if (!err)
        err = orch_on_death(w->sched, child_died, w);
    if (!err)
        err = orch_sched_start(w->sched);
    return err;
}

/* Address space for windows every member maps at one address: reserved
 * (PROT_NONE, no memory behind it) before the chips fork, so all of them
 * and the worker hold the same range. Smaller sizes are tried where the
 * address space is tight (sanitizers); without any, domains fall back to
 * the exchange of descriptors. */
static void reserve_window_range(strata_worker *w)
{
    static const size_t sizes[] = {(size_t)64 << 30, (size_t)8 << 30,
                                   (size_t)1 << 30};

    if (w->level != 3 || w->num_chips == 0 || !w->ops ||
        !w->ops->window_adopt || !w->ops->host_window_create)
        return;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        void *p = mmap(NULL, sizes[i], PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

        if (p != MAP_FAILED) {
            w->va_base = p;
            w->va_size = sizes[i];
            return;
        }
    }
    LOG_INFO("no address range for adopted windows: %s", strerror(errno));
}

strata_err worker_spawn(strata_worker *w, uint64_t deadline)
{
    strata_err err;

    worker_reclaim_stale_segments();
    reserve_window_range(w);
    err = make_endpoints(w);
    /* Anything buffered now would be printed again by every child. */
    fflush(NULL);
    for (size_t i = 0; !err && i < worker_num_directed(w) + w->num_subs; i++)
        if (w->eps[i].kind != ORCH_EP_NODE || !w->nodes[i].remote)
            err = fork_child(w, i, deadline);
    /* Threads only after every fork. */
    if (!err)
        err = remote_start(w, deadline);
    if (!err)
        err = wait_ready(w, deadline);
    if (!err)
        err = start_scheduler(w);
    if (err) {
        char msg[STRATA_ERRMSG_MAX];

        snprintf(msg, sizeof(msg), "%s", strata_errmsg());
        remote_stop(w);
        if (w->sched) {
            orch_sched_stop(w->sched);
            orch_sched_destroy(w->sched);
            w->sched = NULL;
        }
        worker_teardown_children(w);
        return base_fail(err, "strata_worker_init: %s", msg);
    }
    w->state = WORKER_READY;
    LOG_DEBUG("L%d worker ready: %zu %s, %zu sub workers", w->level,
              worker_num_directed(w), w->level == 3 ? "chips" : "nodes",
              w->num_subs);
    return STRATA_OK;
}
