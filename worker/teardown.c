/* Shutting a worker's children down under one deadline: the sticky
 * SHUTDOWN word first, then SIGTERM, then SIGKILL of each child's process
 * group; every child is reaped before this returns, and the /dev/shm names
 * of those that died without removing them go too. */
#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "graph/halo_mpi.h"
#include "worker/reclaim.h"
#include "worker_int.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* rest: "d<id>-<rank or ctl>", then "-<token>" or nothing. */
static bool has_token(const char *rest)
{
    const char *dash = strchr(rest, '-');

    return dash && strchr(dash + 1, '-');
}

static bool named_for(const char *name, const pid_t *pids, size_t n)
{
    unsigned uid;
    int pid, used = 0;
    unsigned long long alloc;

    if (sscanf(name, "strata-%u-%d-%n", &uid, &pid, &used) != 2 || !used ||
        uid != (unsigned)getuid())
        return false;
    /* A global domain's lazily made windows carry their L4's pid, any
     * host's, and its token ("-r<rank>-<token>", "-ctl-<token>"); those
     * a member made on the exchange of descriptors carry its node's pid
     * and no token, as local ones do. */
    if (sscanf(name + used, "d%llu", &alloc) == 1 &&
        (alloc & GLOBAL_ALLOC_TAG) && has_token(name + used))
        return false;
    for (size_t i = 0; i < n; i++)
        if (pids[i] == pid)
            return true;
    return false;
}

size_t worker_reclaim_names(const pid_t *pids, size_t n)
{
    DIR *d = n ? opendir("/dev/shm") : NULL;
    struct dirent *e;
    char path[300];
    size_t removed = 0;

    if (!d)
        return 0;
    /* Before the journals go with the other names. */
    for (size_t i = 0; i < n; i++)
        removed += gjournal_reclaim(pids[i]);
    while ((e = readdir(d)) != NULL) {
        if (!named_for(e->d_name, pids, n))
            continue;
        snprintf(path, sizeof(path), "/%s", e->d_name);
        if (shm_unlink(path) == 0) {
            LOG_DEBUG("removed %s of a dead process", path);
            removed++;
        }
    }
    closedir(d);
    return removed;
}

/* A forked child that is dead and reaped (a remote node's pid is on
 * another host, or none). */
static bool reaped_here(const strata_worker *w, size_t i)
{
    const struct orch_endpoint *ep = &w->eps[i];

    return ep->pid > 0 && __atomic_load_n(&ep->reaped, __ATOMIC_ACQUIRE) &&
           !(ep->kind == ORCH_EP_NODE && w->nodes && w->nodes[i].remote);
}

/* Once every child is reaped: what a killed one left, and what its own
 * children (a node's chips, dying with it) made after its death. */
static void reclaim_all(strata_worker *w, size_t n)
{
    pid_t *pids = base_calloc(n ? n : 1, sizeof(*pids));
    size_t k = 0;

    for (size_t i = 0; pids && i < n; i++)
        if (reaped_here(w, i))
            pids[k++] = w->eps[i].pid;
    if (k)
        worker_reclaim_names(pids, k);
    base_free(pids);
}

#define SHUTDOWN_GRACE_S 2.0
#define TERM_GRACE_S 1.0

static size_t live_children(strata_worker *w)
{
    size_t live = 0;

    for (size_t i = 0; i < worker_num_directed(w) + w->num_subs; i++) {
        struct orch_endpoint *ep = &w->eps[i];

        orch_endpoint_reap(ep, false);
        live += ep->pid > 0 && !ep->reaped;
    }
    return live;
}

/* Waits until every child has exited or deadline passes. */
static size_t wait_exit(strata_worker *w, uint64_t deadline)
{
    size_t n = worker_num_directed(w) + w->num_subs;
    struct pollfd *pfd = base_calloc(n ? n : 1, sizeof(*pfd));
    size_t live;

    while ((live = live_children(w)) > 0) {
        int ms = base_deadline_poll_ms(deadline);
        size_t k = 0;
        bool all_pidfd = true;

        if (ms == 0)
            break;
        for (size_t i = 0; pfd && i < n; i++) {
            struct orch_endpoint *ep = &w->eps[i];

            if (ep->pid <= 0 || ep->reaped)
                continue;
            all_pidfd &= ep->pidfd >= 0;
            pfd[k].fd = ep->pidfd;
            pfd[k].events = POLLIN;
            k++;
        }
        /* Without pidfds (or memory for the set) exits are seen by
         * waitpid only: look again in short steps. */
        if (!pfd || !all_pidfd)
            ms = ms < 0 || ms > 10 ? 10 : ms;
        if (poll(pfd, pfd ? k : 0, ms) < 0 && errno != EINTR)
            break;
    }
    base_free(pfd);
    return live;
}

static void signal_all(strata_worker *w, int sig)
{
    for (size_t i = 0; i < worker_num_directed(w) + w->num_subs; i++) {
        struct orch_endpoint *ep = &w->eps[i];

        if (ep->pid > 0 && !ep->reaped) {
            kill(-ep->pid, sig); /* the child's group: its own children */
            kill(ep->pid, sig);
        }
    }
}

static void stop_children(strata_worker *w)
{
    size_t n = worker_num_directed(w) + w->num_subs;

    for (size_t i = 0; i < n; i++)
        if (w->eps[i].mbx && w->eps[i].pid > 0 && !w->eps[i].reaped)
            mbx_shutdown(w->eps[i].mbx);
    if (wait_exit(w, base_deadline_after(SHUTDOWN_GRACE_S)) == 0)
        return;
    LOG_WARN("children still running after SHUTDOWN: sending SIGTERM");
    signal_all(w, SIGTERM);
    if (wait_exit(w, base_deadline_after(TERM_GRACE_S)) == 0)
        return;
    LOG_WARN("children still running after SIGTERM: sending SIGKILL");
    signal_all(w, SIGKILL);
    for (size_t i = 0; i < n; i++)
        orch_endpoint_reap(&w->eps[i], true);
}

void worker_teardown_children(strata_worker *w)
{
    size_t n = worker_num_directed(w) + w->num_subs;

    if (w->eps) {
        stop_children(w);
        reclaim_all(w, n);
        for (size_t i = 0; i < n; i++) {
            if (w->eps[i].pidfd >= 0)
                close(w->eps[i].pidfd);
            if (w->eps[i].notify_fd >= 0)
                close(w->eps[i].notify_fd);
            mbx_destroy(w->eps[i].mbx);
        }
        base_free(w->eps);
        w->eps = NULL;
    }
    mbx_shared_destroy(w->shared);
    w->shared = NULL;
    if (w->doorbell_fd >= 0)
        close(w->doorbell_fd);
    w->doorbell_fd = -1;
}

void worker_kill_children(strata_worker *w)
{
    /* An MPI rank's halo exchange waits on these chips' flags. */
    halo_mpi_abandon();
    for (size_t i = 0; w && w->eps && i < w->num_chips + w->num_subs; i++) {
        /* A reaped pid may belong to someone else by now. */
        if (w->eps[i].pid > 0 &&
            !__atomic_load_n(&w->eps[i].reaped, __ATOMIC_ACQUIRE)) {
            kill(-w->eps[i].pid, SIGKILL);
            kill(w->eps[i].pid, SIGKILL);
        }
    }
}
