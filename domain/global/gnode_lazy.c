/* Global domains whose members map lazily, node side (gnode.c has the
 * rest).
 *
 * Where the chips' backend has host windows (sim) and the node has some
 * of its reserved address range left, the node answers every phase
 * without waking its chips, as local domains do (domain/adopt.c): at
 * PREPARE_EXPORT it names its members' windows after the cluster id (the
 * L4's pid and random token, from COMM_INIT) and exports those names; at
 * IMPORT it checks that every rank's name is the one it would have given
 * it, picks one address per rank in the upper half of its range
 * (orch/control.h) and posts each member a quiet ADOPT frame, which maps
 * every rank's window there (creating, zeroed, any no member of any node
 * has created yet) before the member's next task. Looking the view up
 * (strata_orch_get_global_domain) waits for the local members' ADOPTs,
 * so a member that could not map is an error there. The names stay until
 * the domain goes (any node's member may still have to open them): at
 * ABORT a node withdraws the ADOPTs its members have not begun, releases
 * the others, and then drops every rank's name if one of its members may
 * have created any. A domain no kernel touched thus costs no chip a
 * wake-up and no system call. */
#include "base/alloc.h"
#include "base/err.h"
#include "base/fault.h"
#include "chip/peer.h"
#include "domain/exchange.h"
#include "gview.h"
#include "orch/control.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

static struct chip_window_req lazy_req(const struct strata_global_view *v,
                                       uint32_t r)
{
    return gwin_req(v->cluster_id, v->domain_id, r, v->n, v->window_size);
}

/* Whether some member of lazy view v may have created a window: it began
 * (or ran) its ADOPT. Under the scheduler lock, or once it is gone. */
bool gnode_lazy_touched(const struct strata_global_view *v)
{
    if (!v->adopts_posted)
        return false;
    for (uint32_t i = 0; i < v->nlocal; i++)
        if (!v->adopt_ctls[i].withdrawn)
            return true;
    return false;
}

void gwin_unlink_all(const struct chip_backend_ops *ops, uint64_t cluster_id,
                     uint64_t domain_id, uint32_t n, size_t window_size)
{
    struct chip_window_req req =
        gwin_req(cluster_id, domain_id, 0, n, window_size);
    char name[CHIP_WINDOW_HANDLE_MAX];

    for (uint32_t r = 0; r < n; r++) {
        req.rank = r;
        ops->host_window_unlink(&req);
    }
    if (chip_domain_ctl_name(ops, &req, name, sizeof(name)))
        shm_unlink(name);
}

strata_err gwin_watch(struct orch_sched *s, const struct chip_backend_ops *ops,
                      uint64_t cluster_id, uint64_t domain_id, uint32_t n,
                      const char *name, int ep, uint32_t rank)
{
    struct chip_window_req req = gwin_req(cluster_id, domain_id, 0, n, 0);
    char page[CHIP_WINDOW_HANDLE_MAX], label[64];

    if (!chip_domain_ctl_name(ops, &req, page, sizeof(page)))
        return STRATA_OK;
    snprintf(label, sizeof(label), "global domain '%.40s'", name);
    /* Never made here: gone, the domain is (gwin_make). */
    return orch_mark_on_death(s, ep, page, false, label, rank,
                              GLOBAL_ALLOC_TAG | domain_id);
}

strata_err gwin_make(const struct chip_backend_ops *ops, uint64_t cluster_id,
                     uint64_t domain_id, uint32_t n, bool *made)
{
    struct chip_window_req req = gwin_req(cluster_id, domain_id, 0, n, 0);
    char page[CHIP_WINDOW_HANDLE_MAX];

    *made = false;
    if (!chip_domain_ctl_name(ops, &req, page, sizeof(page)))
        return STRATA_OK;
    return chip_domain_ctl_make(page, made);
}

/* Drops the control page's name only (this node made it, and no member
 * of it began to map, so it made no rank's window). */
static void unlink_page(const strata_worker *w,
                        const struct strata_global_view *v)
{
    struct chip_window_req req =
        gwin_req(v->cluster_id, v->domain_id, 0, v->n, 0);
    char page[CHIP_WINDOW_HANDLE_MAX];

    if (chip_domain_ctl_name(gdhost_ops(w), &req, page, sizeof(page)))
        shm_unlink(page);
}

/* Drops every rank's name and the control page's: a member of this node
 * opens (and may create) all of them, and a member's death may make the
 * page. */
void gnode_lazy_unlink(const strata_worker *w,
                       const struct strata_global_view *v)
{
    gwin_unlink_all(gdhost_ops(w), v->cluster_id, v->domain_id, v->n,
                    v->window_size);
}

/* Makes v lazy when it can be: the backend has host windows, the exchange
 * is not forced, the ADOPT frame can say it all, and the range has room. */
void gnode_lazy_begin(strata_worker *w, struct strata_global_view *v)
{
    int64_t l4 = (int64_t)(v->cluster_id >> 32);
    uint64_t map, base = 0;
    bool have;

    /* The ADOPT frame names the L4's pid as the windows' creator. */
    /* gnode.lazy: as if the range were full (tests). */
    if (domain_exchange_forced() || BASE_FAULT("gnode.lazy") ||
        (uint32_t)v->cluster_id == 0 || l4 <= 0 ||
        l4 >= (int64_t)1 << (64 - MBX_ADOPT_CREATOR_SHIFT))
        return;
    map = domain_adopt_mapping(gdhost_ops(w), v->window_size, v->n);
    if (map == 0)
        return;
    v->adopt_ctls = base_calloc(v->nlocal + 1, sizeof(*v->adopt_ctls));
    if (!v->adopt_ctls)
        return; /* the exchange needs less */
    orch_lock(gdhost_sched(w));
    have = orch_va_alloc_locked(gdhost_sched(w), ORCH_VA_GLOBAL, map * v->n,
                                &base);
    orch_unlock(gdhost_sched(w));
    if (!have)
        return;
    v->lazy = true;
    v->va_start = base;
    v->va_len = map * v->n;
    v->mapping_size = map;
}

/* PREPARE_EXPORT of a lazy view: names, no chip. A member that died
 * already fails it, as it would fail the exchange. */
strata_err gnode_lazy_prepare(strata_worker *w, struct strata_global_view *v,
                              char (*handles)[CHIP_WINDOW_HANDLE_MAX])
{
    strata_err err = STRATA_OK;

    for (uint32_t i = 0; i < v->nlocal && !err; i++) {
        struct chip_window_req req = lazy_req(v, v->ranks[i]);

        err = orch_chip_check(gdhost_sched(w), v->eps[i]);
        if (!err)
            err = gdhost_ops(w)->host_window_create(&req, &v->device_ctx[i]);
        if (err)
            break;
        gdhost_ops(w)->host_window_name(&req, handles[i], sizeof(handles[i]));
        v->local_base[i] =
            v->va_start + (uint64_t)v->ranks[i] * v->mapping_size;
    }
    return err;
}

/* IMPORT of a lazy view: every rank's window must be named as this node
 * would name it; then each member gets its quiet ADOPT. */
strata_err gnode_lazy_import(strata_worker *w, struct strata_global_view *v,
                             const struct wire_domain_cmd *c)
{
    char want[CHIP_WINDOW_HANDLE_MAX];
    strata_err err = STRATA_OK;

    if (BASE_FAULT("gnode.import"))
        return base_fail(STRATA_EIO, "fault point gnode.import");
    for (uint32_t r = 0; r < v->n; r++) {
        const struct wire_descriptor *d = &c->descriptors[r];
        struct chip_window_req req = lazy_req(v, r);

        gdhost_ops(w)->host_window_name(&req, want, sizeof(want));
        if (d->mapping_size != v->mapping_size || strcmp(d->handle, want) != 0)
            return base_fail(
                STRATA_EPROTO,
                "rank %u's window is '%s' (%llu bytes), not '%s' (%llu): "
                "every node of a domain must make its windows the same way "
                "(STRATA_DOMAIN_EXCHANGE alike everywhere)",
                r, d->handle, (unsigned long long)d->mapping_size, want,
                (unsigned long long)v->mapping_size);
    }
    /* Before any member maps: the death of one marks the control page
     * the others watch (the L4 marks it for a whole node's). The L4 made
     * it before PREPARE_EXPORT where it shares this host; where not, the
     * first node to get here makes it. */
    v->watched = true;
    err = gwin_make(gdhost_ops(w), v->cluster_id, v->domain_id, v->n,
                    &v->made_page);
    for (uint32_t i = 0; i < v->nlocal && !err; i++)
        err = gwin_watch(gdhost_sched(w), gdhost_ops(w), v->cluster_id,
                         v->domain_id, v->n, v->name, v->eps[i], v->ranks[i]);
    if (err)
        return err;
    gjournal_add(w, v);
    /* Until it is posted, a member's ADOPT counts as withdrawn: that
     * member never maps, so ABORT has nothing to wait for or release. */
    for (uint32_t i = 0; i < v->nlocal; i++)
        v->adopt_ctls[i].withdrawn = v->adopt_ctls[i].done = true;
    v->adopts_posted = true;
    for (uint32_t i = 0; i < v->nlocal && !err; i++) {
        struct orch_ctl *a = &v->adopt_ctls[i];

        memset(a, 0, sizeof(*a));
        a->op = MBX_CTL_WINDOW_ADOPT;
        a->arg[0] = GLOBAL_ALLOC_TAG | v->domain_id;
        a->arg[1] = mbx_adopt_arg1(v->ranks[i], v->n, (uint32_t)v->cluster_id);
        a->arg[2] = mbx_adopt_arg2(v->mapping_size, v->cluster_id >> 32);
        a->arg[3] = v->va_start;
        /* Nothing waits for it but the member's next task (same FIFO). */
        a->quiet = true;
        err = orch_control_post(gdhost_sched(w), NULL, v->eps[i], a, NULL);
        if (err)
            a->withdrawn = a->done = true;
    }
    return err;
}

/* Waits until every member of committed view v has run its ADOPT (the
 * first kernel that uses the view would run after it anyway), so that a
 * member that could not map is an error here, not a fault in a kernel.
 * Without gv_mu: the caller pins v (users). */
strata_err gnode_lazy_mapped(strata_worker *w, struct strata_global_view *v)
{
    struct orch_ctl **ptrs;
    uint32_t k = 0;
    strata_err err;

    if (!v->lazy || __atomic_load_n(&v->mapped, __ATOMIC_ACQUIRE))
        return STRATA_OK;
    ptrs = base_calloc(v->nlocal + 1, sizeof(*ptrs));
    if (!ptrs)
        return base_fail(STRATA_ENOMEM, "out of memory looking up '%s'",
                         v->name);
    orch_lock(gdhost_sched(w)); /* ABORT may withdraw meanwhile */
    for (uint32_t i = 0; i < v->nlocal; i++)
        if (!v->adopt_ctls[i].withdrawn)
            ptrs[k++] = &v->adopt_ctls[i];
    orch_unlock(gdhost_sched(w));
    err = orch_control_wait(gdhost_sched(w), ptrs, k);
    /* Done frames are settled: their err and msg no longer change. */
    for (uint32_t j = 0; err && j < k; j++) {
        if (ptrs[j]->err && !ptrs[j]->withdrawn) {
            err = base_fail(ptrs[j]->err,
                            "chip %d could not map the windows of global "
                            "domain '%s': %.400s",
                            v->chips[ptrs[j] - v->adopt_ctls], v->name,
                            ptrs[j]->msg);
            break;
        }
    }
    base_free(ptrs);
    if (!err) /* the next lookup (every node task of a halo call) is free */
        __atomic_store_n(&v->mapped, true, __ATOMIC_RELEASE);
    return err;
}

/* ABORT of a lazy view: ADOPTs no member has
 * begun are withdrawn, the others released; then the names go if a
 * member may have made one, and the range piece is given back unless a
 * member could not release. A withdrawn ADOPT may still sit in a chip's
 * ring: the caller keeps v until it is passed (sweep_gone). */
strata_err gnode_lazy_abort(strata_worker *w, struct strata_global_view *v)
{
    uint32_t posted = 0, sent;
    strata_err err = STRATA_OK, perr = STRATA_OK;
    bool touched;

    if (BASE_FAULT("gnode.release"))
        err = base_fail(STRATA_EIO, "fault point gnode.release");
    orch_lock(gdhost_sched(w));
    /* No death may make the control page again once its name goes. */
    orch_mark_forget_locked(gdhost_sched(w), GLOBAL_ALLOC_TAG | v->domain_id);
    for (uint32_t i = 0; v->adopts_posted && i < v->nlocal; i++) {
        struct orch_ctl *a = &v->adopt_ctls[i];

        if (a->withdrawn || (!a->done && orch_control_withdraw_locked(
                                             gdhost_sched(w), v->eps[i], a)))
            continue;
        memset(&v->ctls[i], 0, sizeof(v->ctls[i]));
        v->ctls[i].op = MBX_CTL_WINDOW_RELEASE;
        v->ctls[i].arg[0] = GLOBAL_ALLOC_TAG | v->domain_id;
        v->ptrs[posted++] = &v->ctls[i];
    }
    orch_unlock(gdhost_sched(w));
    for (sent = 0; sent < posted && !perr; sent++) {
        struct orch_ctl *c = v->ptrs[sent];

        perr = orch_control_post(gdhost_sched(w), NULL, v->eps[c - v->ctls], c,
                                 NULL);
    }
    sent -= perr != STRATA_OK; /* the one that failed is not posted */
    {
        strata_err werr = orch_control_wait(gdhost_sched(w), v->ptrs, sent);

        if (!err)
            err = perr ? perr : werr;
    }
    orch_lock(gdhost_sched(w));
    touched = gnode_lazy_touched(v);
    if (!err && v->va_len)
        orch_va_free_locked(gdhost_sched(w), v->va_start, v->va_len);
    orch_unlock(gdhost_sched(w));
    /* A member that could not release may still map the addresses: the
     * piece is never handed out again. Where no member of this node
     * began to map, it made no rank's window (a node whose member did
     * drops them all, or the L4 where that node died), and the control
     * page is whoever made it to drop: the L4 on its own host, else the
     * node that made it here. */
    if (touched)
        gnode_lazy_unlink(w, v);
    else if (v->made_page)
        unlink_page(w, v);
    gjournal_remove(w, v);
    return err;
}
