/* A node's journal of the global domains whose windows its members may
 * create (a lazily mapping member makes every rank's window it opens
 * first, named after the L4: gnode_lazy.c). Those names carry the L4's
 * pid, not the node's, so the sweep of a dead process's names would not
 * find them: a node killed outright (a session SIGKILLed under
 * strata-node) would leave them behind. The journal is a /dev/shm file
 * named like the node's own segments, "/strata-<uid>-<pid>-gdoms", of
 * fixed records written in place (one pwrite each); whoever reaps the
 * node reads it before it removes the node's names
 * (worker_reclaim_names) and drops the windows of every live record. */
#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "chip/chip.h"
#include "gview.h"
#include "sim/sim.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct gj_rec {
    uint64_t cluster_id;
    uint64_t domain_id;
    uint32_t n;    /* ranks */
    uint32_t live; /* 1 while the node may make names of it */
};

static void journal_name(pid_t pid, char *out, size_t cap)
{
    snprintf(out, cap, "/strata-%u-%d-gdoms", (unsigned)getuid(), (int)pid);
}

/* The lowest record no live view of w holds: one walk of the views (a
 * node keeps up to 4096, gnode.c), or -1 without memory. */
static int free_slot(const strata_worker *w)
{
    const struct strata_global_view *v;
    size_t n = 0;
    bool *used;
    int k = 0;

    for (v = gdhost_state(w)->gviews; v; v = v->next)
        n++;
    used = base_calloc(n + 1, sizeof(*used));
    if (!used)
        return -1;
    for (v = gdhost_state(w)->gviews; v; v = v->next)
        if (v->jslot >= 0 && (size_t)v->jslot <= n)
            used[v->jslot] = true;
    while (used[k])
        k++;
    base_free(used);
    return k;
}

static void put(strata_worker *w, int slot, const struct gj_rec *r)
{
    if (pwrite(gdhost_state(w)->gjournal_fd, r, sizeof(*r),
               (off_t)slot * (off_t)sizeof(*r)) != (ssize_t)sizeof(*r))
        LOG_WARN("global domain journal: write: %s", strerror(errno));
}

void gjournal_add(strata_worker *w, struct strata_global_view *v)
{
    struct gj_rec r = {v->cluster_id, v->domain_id, v->n, 1};
    char name[64];

    if (gdhost_state(w)->gjournal_fd < 0) {
        journal_name(getpid(), name, sizeof(name));
        gdhost_state(w)->gjournal_fd =
            shm_open(name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (gdhost_state(w)->gjournal_fd < 0) {
            LOG_WARN("global domain journal %s: %s", name, strerror(errno));
            return;
        }
    }
    v->jslot = free_slot(w);
    if (v->jslot < 0)
        LOG_WARN("global domain journal: out of memory");
    else
        put(w, v->jslot, &r);
}

void gjournal_remove(strata_worker *w, struct strata_global_view *v)
{
    struct gj_rec r;

    if (v->jslot < 0 || gdhost_state(w)->gjournal_fd < 0)
        return;
    memset(&r, 0, sizeof(r));
    put(w, v->jslot, &r);
    v->jslot = -1;
}

void gjournal_close(strata_worker *w)
{
    char name[64];

    if (gdhost_state(w)->gjournal_fd < 0)
        return;
    close(gdhost_state(w)->gjournal_fd);
    gdhost_state(w)->gjournal_fd = -1;
    journal_name(getpid(), name, sizeof(name));
    shm_unlink(name);
}

size_t gjournal_reclaim(pid_t pid)
{
    /* Lazily made windows are host windows: sim's. The reaper (the
     * daemon) may have registered no backend. */
    const struct chip_backend_ops *ops = &sim_backend_ops;
    struct gj_rec r;
    size_t found = 0;
    char name[64];
    int fd;

    journal_name(pid, name, sizeof(name));
    fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    for (off_t at = 0; pread(fd, &r, sizeof(r), at) == (ssize_t)sizeof(r);
         at += (off_t)sizeof(r)) {
        struct chip_window_req req;

        if (!r.live || r.n == 0 || r.n > 65536)
            continue;
        /* The windows only: the control page goes with the domain's
         * other nodes or its L4, who mark it; a member mapping later
         * must find it marked, not make a new one. */
        for (uint32_t k = 0; k < r.n; k++) {
            req = gwin_req(r.cluster_id, r.domain_id, k, r.n, 0);
            ops->host_window_unlink(&req);
        }
        found++;
    }
    close(fd);
    return found;
}
