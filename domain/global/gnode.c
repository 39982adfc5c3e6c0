/* The node side of global domains: each command from the L4 is answered
 * here, and the committed result becomes a view the node's orch fns can
 * look up by domain id. Where the chips' backend has host windows the
 * node answers the phases itself and members map lazily (gnode_lazy.c);
 * otherwise (STRATA_DOMAIN_EXCHANGE=1, or no address range left) each
 * phase drives the member chips in parallel with the control frames of a
 * descriptor exchange: they create and export (PREPARE_EXPORT) and map
 * every peer (IMPORT) before the node answers. The two ways name windows
 * differently, so every node of one domain must take the same one: IMPORT
 * fails, naming the rank, otherwise. */
#include "base/alloc.h"
#include "base/err.h"
#include "base/fault.h"
#include "base/log.h"
#include "base/shm.h"
#include "gview.h"
#include "orch/control.h"
#include "trace/trace.h"

#include <stdio.h>
#include <strata/domain.h>
#include <string.h>
#include <sys/mman.h>

static void view_free(struct strata_global_view *v)
{
    if (!v)
        return;
    base_free(v->chips);
    base_free(v->ranks);
    base_free(v->eps);
    base_free(v->device_ctx);
    base_free(v->local_base);
    base_free(v->buffers);
    base_free(v->names);
    base_free(v->attach);
    base_free(v->handles);
    base_free(v->ctls);
    base_free(v->ptrs);
    base_free(v->adopt_ctls);
    base_free(v);
}

/* The most global domains a node keeps prepared or committed at once: a
 * parent that prepares and never commits or aborts (or retains without
 * end) is refused past it, instead of growing the node's memory and every
 * lookup's walk without bound. */
#define GNODE_MAX_DOMAINS 4096

/* Views of w prepared or committed (not gone). */
static size_t live_views(strata_worker *w)
{
    size_t n = 0;

    for (struct strata_global_view *v = gdhost_state(w)->gviews; v; v = v->next)
        n += v->state != VIEW_GONE;
    return n;
}

static struct strata_global_view *find(strata_worker *w, uint64_t id)
{
    for (struct strata_global_view *v = gdhost_state(w)->gviews; v; v = v->next)
        if (v->domain_id == id)
            return v;
    return NULL;
}

/* Frees the gone views that no lookup holds and whose withdrawn ADOPTs
 * the chips have passed (under gv_mu). */
static void sweep_gone(strata_worker *w)
{
    struct strata_global_view **pp = &gdhost_state(w)->gviews;

    orch_lock(gdhost_sched(w));
    while (*pp) {
        struct strata_global_view *v = *pp;
        bool passed = v->state == VIEW_GONE &&
                      __atomic_load_n(&v->users, __ATOMIC_ACQUIRE) == 0;

        for (uint32_t i = 0; passed && v->adopts_posted && i < v->nlocal; i++)
            passed = v->adopt_ctls[i].done;
        if (passed) {
            *pp = v->next;
            view_free(v);
        } else {
            pp = &v->next;
        }
    }
    orch_unlock(gdhost_sched(w));
}

void gdomain_state_init(struct gdomain_state *s)
{
    memset(s, 0, sizeof(*s));
    pthread_mutex_init(&s->gv_mu, NULL);
    s->node_id = -1;
    s->gjournal_fd = -1;
}

void gnode_set_window_cap(strata_worker *w, uint64_t bytes)
{
    pthread_mutex_lock(&gdhost_state(w)->gv_mu);
    gdhost_state(w)->window_cap = bytes;
    pthread_mutex_unlock(&gdhost_state(w)->gv_mu);
}

/* What v's windows may take on this host: the members of a view that
 * may map lazily create any rank's window they map, an exchanging one's
 * only their own. Past the cap, refused; else counted until the view is
 * aborted. Under gv_mu. */
static strata_err charge(strata_worker *w, struct strata_global_view *v,
                         bool may_be_lazy)
{
    struct gdomain_state *st = gdhost_state(w);
    const struct chip_backend_ops *ops = gdhost_ops(w);
    uint64_t map = ops->window_mapping_size
                       ? ops->window_mapping_size(v->window_size)
                       : v->window_size;
    uint32_t k = may_be_lazy ? v->n : v->nlocal;
    uint64_t cost = map > UINT64_MAX / (k ? k : 1) ? UINT64_MAX : map * k;

    if (!st->window_cap)
        return STRATA_OK;
    if (cost > st->window_cap - st->window_bytes)
        return base_fail(STRATA_ENOMEM,
                         "domain %llu's windows take %llu bytes here, and "
                         "this session holds %llu of the %llu its "
                         "--max-window-bytes allows",
                         (unsigned long long)v->domain_id,
                         (unsigned long long)cost,
                         (unsigned long long)st->window_bytes,
                         (unsigned long long)st->window_cap);
    st->window_bytes += cost;
    v->charged = cost;
    return STRATA_OK;
}

static void uncharge(strata_worker *w, struct strata_global_view *v)
{
    gdhost_state(w)->window_bytes -= v->charged;
    v->charged = 0;
}

void gnode_free_all(strata_worker *w)
{
    /* A test stops a torn-down session here (":stop"), with its names
     * still there, while the L4 learns of its loss; failing it means
     * nothing. */
    if (gdhost_state(w)->gviews && BASE_FAULT("gnode.teardown"))
        LOG_DEBUG("fault point gnode.teardown: no effect");
    /* The chips are gone: nothing of theirs will map a name again. */
    while (gdhost_state(w)->gviews) {
        struct strata_global_view *v = gdhost_state(w)->gviews;

        gdhost_state(w)->gviews = v->next;
        if (v->lazy && v->state != VIEW_GONE &&
            (gnode_lazy_touched(v) || v->watched))
            gnode_lazy_unlink(w, v);
        view_free(v);
    }
    gjournal_close(w);
}

/* Posts one frame per local member (op, arg[1] = the member's rank) and
 * waits for all; staged may be NULL. */
static strata_err fan_out(strata_worker *w, struct strata_global_view *v,
                          uint32_t op, const void *staged, uint32_t len)
{
    strata_err err = STRATA_OK;
    uint32_t posted = 0;

    for (uint32_t i = 0; i < v->nlocal && !err; i++) {
        struct orch_ctl *c = &v->ctls[i];

        memset(c, 0, sizeof(*c));
        c->op = op;
        c->arg[0] = GLOBAL_ALLOC_TAG | v->domain_id;
        c->arg[1] = v->ranks[i];
        c->arg[2] = v->n;
        c->arg[3] = v->window_size;
        c->staged = staged;
        c->staged_len = len;
        err = orch_control_post(gdhost_sched(w), NULL, v->eps[i], c, NULL);
        if (!err)
            v->ptrs[posted++] = c;
    }
    {
        strata_err werr = orch_control_wait(gdhost_sched(w), v->ptrs, posted);

        return err ? err : werr;
    }
}

static strata_err comm_init(strata_worker *w, const struct wire_comm_init *c)
{
    size_t n = orch_num_chips(gdhost_sched(w)), live = 0, held;
    int *eps;
    strata_err err;

    if (strcmp(c->profile, "sim") != 0)
        return base_fail(STRATA_ENOTSUP,
                         "comm profile '%s' is not supported by this node",
                         c->profile);
    if (c->num_ranks != n)
        return base_fail(STRATA_EINVAL,
                         "COMM_INIT names %zu global device ranks for a node "
                         "of %zu chips (one per chip)",
                         (size_t)c->num_ranks, n);
    eps = base_calloc(n ? n : 1, sizeof(*eps));
    if (!eps)
        return base_fail(STRATA_ENOMEM, "out of memory for COMM_INIT");
    /* A dead chip can be no member: it must not fail every domain of the
     * node (its own PREPARE says it died, if it is named). */
    for (size_t i = 0; i < n; i++)
        if (orch_chip_check(gdhost_sched(w), (int)i) == STRATA_OK)
            eps[live++] = (int)i;
    base_errmsg_clear();
    /* Domains are named after the cluster id: it cannot change under
     * them (the same COMM_INIT again is harmless). */
    pthread_mutex_lock(&gdhost_state(w)->gv_mu);
    held = live_views(w);
    if (held > 0 && (c->cluster_id != gdhost_state(w)->cluster_id ||
                     (int)c->node_rank != gdhost_state(w)->node_id)) {
        pthread_mutex_unlock(&gdhost_state(w)->gv_mu);
        base_free(eps);
        return base_fail(STRATA_ESTATE,
                         "COMM_INIT with another cluster id or node rank "
                         "while this node holds %zu global domains",
                         held);
    }
    gdhost_state(w)->node_id = (int)c->node_rank;
    gdhost_state(w)->cluster_id = c->cluster_id;
    pthread_mutex_unlock(&gdhost_state(w)->gv_mu);
    err = orch_comm_init_chips(gdhost_sched(w), NULL, eps, live);
    base_free(eps);
    return err;
}

/* FNV-1a over what makes a domain what it is: its name, profile, window
 * size, member table and buffers. Every phase carries them; a later
 * phase that names another domain under a prepared id is refused. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;

    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t fnv_str(uint64_t h, const char *s)
{
    return fnv(h, s ? s : "", (s ? strlen(s) : 0) + 1);
}

static uint64_t identity_of(const struct wire_domain_cmd *c)
{
    uint64_t h = fnv_str(0xcbf29ce484222325ull, c->name);

    h = fnv_str(h, c->profile);
    h = fnv(h, &c->window_size, sizeof(c->window_size));
    h = fnv(h, &c->num_members, sizeof(c->num_members));
    for (size_t i = 0; i < c->num_members; i++)
        h = fnv(h, &c->members[i], sizeof(c->members[i]));
    h = fnv(h, &c->num_buffers, sizeof(c->num_buffers));
    for (size_t i = 0; i < c->num_buffers; i++) {
        h = fnv_str(h, c->buffers[i].name);
        h = fnv(h, &c->buffers[i].dtype, sizeof(c->buffers[i].dtype));
        h = fnv(h, &c->buffers[i].count, sizeof(c->buffers[i].count));
        h = fnv(h, &c->buffers[i].nbytes, sizeof(c->buffers[i].nbytes));
    }
    return h;
}

/* A new view for cmd's members on this node (PREPARE_EXPORT). */
static strata_err view_create(strata_worker *w, const struct wire_domain_cmd *c,
                              struct strata_global_view **out)
{
    struct strata_global_view *v = base_calloc(1, sizeof(*v));
    uint32_t k = 0;
    size_t off = 0;

    if (!v)
        return base_fail(STRATA_ENOMEM, "out of memory for a view");
    for (size_t i = 0; i < c->num_members; i++)
        k += c->members[i].node_worker_id == (uint32_t)gdhost_state(w)->node_id;
    /* The L4 sends PREPARE only to nodes with members; a reply must name
     * at least one descriptor, so a PREPARE for none cannot be answered
     * with OK. */
    if (k == 0) {
        base_free(v);
        return base_fail(STRATA_EINVAL,
                         "PREPARE_EXPORT of domain %llu names no member on "
                         "node %d",
                         (unsigned long long)c->domain_id,
                         gdhost_state(w)->node_id);
    }
    v->chips = base_calloc(k + 1, sizeof(*v->chips));
    v->ranks = base_calloc(k + 1, sizeof(*v->ranks));
    v->eps = base_calloc(k + 1, sizeof(*v->eps));
    v->device_ctx = base_calloc(k + 1, sizeof(*v->device_ctx));
    v->local_base = base_calloc(k + 1, sizeof(*v->local_base));
    v->ctls = base_calloc(k + 1, sizeof(*v->ctls));
    v->ptrs = base_calloc(k + 1, sizeof(*v->ptrs));
    v->handles = base_calloc(k + 1, sizeof(*v->handles));
    v->buffers = base_calloc(c->num_buffers + 1, sizeof(*v->buffers));
    v->names = base_calloc(c->num_buffers + 1, sizeof(*v->names));
    if (!v->chips || !v->ranks || !v->eps || !v->device_ctx || !v->local_base ||
        !v->ctls || !v->ptrs || !v->buffers || !v->names || !v->handles) {
        view_free(v);
        return base_fail(STRATA_ENOMEM, "out of memory for a view");
    }
    v->jslot = -1;
    v->domain_id = c->domain_id;
    v->cluster_id = gdhost_state(w)->cluster_id;
    v->generation = c->generation;
    v->identity = identity_of(c);
    snprintf(v->name, sizeof(v->name), "%s", c->name);
    v->n = (uint32_t)c->num_members;
    v->window_size = c->window_size;
    for (size_t i = 0; i < c->num_members; i++) {
        const struct wire_domain_member *m = &c->members[i];

        if (m->node_worker_id != (uint32_t)gdhost_state(w)->node_id)
            continue;
        v->eps[v->nlocal] =
            orch_chip_index(gdhost_sched(w), (int)m->local_worker_id);
        if (v->eps[v->nlocal] < 0) {
            view_free(v);
            return base_fail(STRATA_EINVAL, "node %d has no chip %u",
                             gdhost_state(w)->node_id, m->local_worker_id);
        }
        v->chips[v->nlocal] = (int)m->local_worker_id;
        v->ranks[v->nlocal++] = m->domain_rank;
    }
    v->num_buffers = c->num_buffers;
    for (size_t i = 0; i < c->num_buffers; i++) {
        snprintf(v->names[i], sizeof(v->names[i]), "%s", c->buffers[i].name);
        v->buffers[i].name = v->names[i];
        v->buffers[i].offset = off;
        v->buffers[i].nbytes = c->buffers[i].nbytes;
        v->buffers[i].dtype = (strata_dtype)c->buffers[i].dtype;
        v->buffers[i].count = c->buffers[i].count;
        off += c->buffers[i].nbytes;
    }
    /* Keep this node's row of the attachment matrix. */
    for (size_t r = 0; r < c->num_attach_rows; r++) {
        if (c->attach_rows[r].node_worker_id !=
            (uint32_t)gdhost_state(w)->node_id)
            continue;
        v->attach = base_calloc(c->num_members, sizeof(*v->attach));
        if (!v->attach) {
            view_free(v);
            return base_fail(STRATA_ENOMEM, "out of memory for attachments");
        }
        for (size_t i = 0; i < c->num_members; i++) {
            v->attach[i] = c->attach_rows[r].entries[i];
            v->attach[i].adapter_profile = NULL; /* not kept: not owned */
        }
    }
    *out = v;
    return STRATA_OK;
}

static void export_desc(const struct strata_global_view *v, uint32_t i,
                        uint64_t mapping_size, const char *handle,
                        struct wire_descriptor *d)
{
    d->version = WIRE_DESCRIPTOR_VERSION;
    d->profile = "sim";
    d->domain_rank = v->ranks[i];
    d->rank_count = v->n;
    d->mapping_size = mapping_size;
    d->handle = handle;
}

/* PREPARE_EXPORT by the members: each creates and exports its window. */
/* Host windows (sim) are made by every local member at once, each
 * checking the free space for its own: checked here together first, so
 * that members racing for the same space cannot together take more than
 * there is (or, where /dev/shm's limit is more than memory, set off the
 * OOM killer). */
static strata_err exchange_room(strata_worker *w,
                                const struct strata_global_view *v)
{
    const struct chip_backend_ops *ops = gdhost_ops(w);
    uint64_t map;
    char what[96];

    if (!ops->host_window_create || !ops->window_mapping_size)
        return STRATA_OK;
    map = ops->window_mapping_size(v->window_size);
    snprintf(what, sizeof(what), "%u domain windows (%llu bytes each)",
             v->nlocal, (unsigned long long)map);
    if (map > SIZE_MAX / (v->nlocal ? v->nlocal : 1))
        return base_fail(STRATA_ENOMEM, "%s: more than memory holds", what);
    return base_shm_check((size_t)(map * v->nlocal), what);
}

static strata_err exchange_prepare(strata_worker *w,
                                   struct strata_global_view *v,
                                   struct wire_descriptor *descs,
                                   char (*handles)[CHIP_WINDOW_HANDLE_MAX])
{
    strata_err err = exchange_room(w, v);

    if (err)
        return err;
    err = fan_out(w, v, MBX_CTL_WINDOW_PREPARE, NULL, 0);

    /* Members that did prepare keep their names even when a sibling
     * failed: ABORT unlinks them. */
    for (uint32_t i = 0; i < v->nlocal; i++) {
        struct chip_window_desc d;

        if (!v->ctls[i].done || v->ctls[i].err ||
            v->ctls[i].reply_len != sizeof(d))
            continue;
        memcpy(&d, v->ctls[i].reply, sizeof(d));
        memcpy(v->handles[i], d.handle, sizeof(v->handles[i]));
        v->handles[i][sizeof(v->handles[i]) - 1] = '\0';
        memcpy(handles[i], v->handles[i], sizeof(handles[i]));
        v->mapping_size = d.mapping_size;
        export_desc(v, i, d.mapping_size, handles[i], &descs[i]);
    }
    return err;
}

static strata_err prepare(strata_worker *w, const struct wire_domain_cmd *c,
                          struct wire_descriptor *descs,
                          char (*handles)[CHIP_WINDOW_HANDLE_MAX],
                          size_t *ndesc)
{
    struct strata_global_view *v = NULL;
    strata_err err;

    if (gdhost_state(w)->node_id < 0)
        return base_fail(STRATA_ESTATE, "PREPARE_EXPORT before COMM_INIT");
    if (find(w, c->domain_id))
        return base_fail(STRATA_EEXIST, "domain %llu is already here",
                         (unsigned long long)c->domain_id);
    if (live_views(w) >= GNODE_MAX_DOMAINS)
        return base_fail(STRATA_EBUSY,
                         "already holds %d global domains, the most a node "
                         "keeps: release some",
                         GNODE_MAX_DOMAINS); /* the L4 names the node */
    err = view_create(w, c, &v);
    if (err)
        return err;
    err = charge(w, v, !c->exchange);
    if (err) {
        view_free(v); /* nothing made yet */
        return err;
    }
    if (!c->exchange) /* asked when the nodes would not agree */
        gnode_lazy_begin(w, v);
    if (v->lazy) {
        err = gnode_lazy_prepare(w, v, handles);
        for (uint32_t i = 0; !err && i < v->nlocal; i++)
            export_desc(v, i, v->mapping_size, handles[i], &descs[i]);
    } else {
        err = exchange_prepare(w, v, descs, handles);
    }
    /* Kept even when a member failed: ABORT releases what was made. Its
     * room is given back now: a refused domain does not hold the cap
     * until an ABORT that a hostile parent need not send. */
    if (err)
        uncharge(w, v);
    v->state = VIEW_PREPARED;
    v->next = gdhost_state(w)->gviews;
    gdhost_state(w)->gviews = v;
    *ndesc = err ? 0 : v->nlocal;
    return err;
}

static strata_err import(strata_worker *w, const struct wire_domain_cmd *c)
{
    struct strata_global_view *v = find(w, c->domain_id);
    struct chip_window_desc *t;
    strata_err err;

    if (!v || v->state != VIEW_PREPARED || c->num_descriptors != v->n)
        return base_fail(STRATA_ESTATE, "IMPORT of domain %llu out of order",
                         (unsigned long long)c->domain_id);
    /* In the node itself, either way the members map (tests). */
    if (BASE_FAULT("gnode.import_any"))
        return base_fail(STRATA_EIO, "fault point gnode.import_any");
    if (v->lazy) {
        err = gnode_lazy_import(w, v, c);
        if (!err)
            v->state = VIEW_IMPORTED;
        return err;
    }
    /* Before any member maps: a table that misnames this node's own
     * windows (one the L4 predicted for a node that named them lazily
     * before, gdomain_batch.c) is refused whole. */
    for (uint32_t i = 0; i < v->nlocal; i++) {
        const struct wire_descriptor *d = &c->descriptors[v->ranks[i]];

        if (!d->handle || strcmp(d->handle, v->handles[i]) != 0)
            return base_fail(STRATA_EPROTO,
                             "IMPORT of domain %llu names rank %u's window "
                             "'%s', not '%s' as exported here",
                             (unsigned long long)c->domain_id, v->ranks[i],
                             d->handle ? d->handle : "", v->handles[i]);
    }
    t = base_calloc(v->n, sizeof(*t));
    if (!t)
        return base_fail(STRATA_ENOMEM, "out of memory for %u descriptors",
                         v->n);
    for (uint32_t r = 0; r < v->n; r++) {
        const struct wire_descriptor *d = &c->descriptors[r];

        t[r].version = CHIP_WINDOW_DESC_VERSION;
        t[r].rank = d->domain_rank;
        t[r].rank_count = d->rank_count;
        t[r].mapping_size = d->mapping_size;
        snprintf(t[r].profile, sizeof(t[r].profile), "%s", d->profile);
        snprintf(t[r].handle, sizeof(t[r].handle), "%s", d->handle);
    }
    err =
        fan_out(w, v, MBX_CTL_WINDOW_IMPORT, t, (uint32_t)(v->n * sizeof(*t)));
    base_free(t);
    for (uint32_t i = 0; !err && i < v->nlocal; i++) {
        v->device_ctx[i] = v->ctls[i].out[0];
        v->local_base[i] = v->ctls[i].out[1];
        v->mapping_size = c->descriptors[v->ranks[i]].mapping_size;
    }
    if (!err)
        v->state = VIEW_IMPORTED;
    return err;
}

/* Once every member has mapped (COMMIT) or given up (ABORT), the names
 * are not needed: unlinking them leaves nothing a crash could leak. */
static void unlink_names(const struct strata_global_view *v)
{
    for (uint32_t i = 0; i < v->nlocal; i++)
        if (v->handles[i][0])
            shm_unlink(v->handles[i]);
}

static strata_err abort_view(strata_worker *w, uint64_t id)
{
    struct strata_global_view *v = find(w, id);
    strata_err err;

    if (!v || v->state == VIEW_GONE)
        return STRATA_OK; /* never prepared here, or already gone */
    uncharge(w, v);
    if (v->lazy) {
        err = gnode_lazy_abort(w, v);
    } else {
        unlink_names(v);
        err = fan_out(w, v, MBX_CTL_WINDOW_RELEASE, NULL, 0);
    }
    /* Freed now, or once the chips pass its withdrawn frames and no
     * lookup holds it. */
    v->state = VIEW_GONE;
    sweep_gone(w);
    return err;
}

/* unlink: drop the window names now (every member of every node has
 * mapped); false keeps them until ABORT (a gathered domain, whose other
 * ranks may still be importing). */
static strata_err commit(strata_worker *w, uint64_t id, bool unlink)
{
    struct strata_global_view *v = find(w, id);

    if (!v || v->state == VIEW_GONE)
        return base_fail(STRATA_ESTATE,
                         "COMMIT of domain %llu, which this node does not "
                         "hold (never prepared, or aborted)",
                         (unsigned long long)id);
    if (v->state == VIEW_COMMITTED)
        return base_fail(STRATA_ESTATE,
                         "COMMIT of domain %llu, which is committed already",
                         (unsigned long long)id);
    if (v->state != VIEW_IMPORTED)
        return base_fail(STRATA_ESTATE, "COMMIT of domain %llu before IMPORT",
                         (unsigned long long)id);
    v->state = VIEW_COMMITTED;
    if (!v->lazy && unlink) /* every member has mapped */
        unlink_names(v);
    return STRATA_OK;
}

/* PREPARE_EXPORT with gather (every rank of an MPI group, mpidomain.c):
 * the ranks exchange the table among themselves, import it and commit;
 * prep_err is how the prepare went. A rank whose import failed says so,
 * and the L4 ABORTs the domain everywhere, committed or not. */
static strata_err gather_commit(strata_worker *w,
                                const struct wire_domain_cmd *c,
                                strata_err prep_err,
                                const struct wire_descriptor *descs,
                                size_t ndesc)
{
    struct wire_domain_cmd ic = *c;
    struct wire_descriptor *table = NULL;
    strata_err err = gdhost_group_gather(c, prep_err, descs, ndesc, &table);

    if (!err) {
        ic.phase = WIRE_PHASE_IMPORT;
        ic.descriptors = table;
        ic.num_descriptors = c->num_members;
        err = import(w, &ic);
    }
    if (!err)
        err = commit(w, c->domain_id, false);
    gdhost_group_table_free(table);
    return err;
}

static strata_err domain_cmd(strata_worker *w, const struct wire_domain_cmd *c,
                             struct wire_domain_reply *r,
                             struct wire_descriptor *descs,
                             char (*handles)[CHIP_WINDOW_HANDLE_MAX])
{
    struct strata_global_view *v;
    strata_err err = STRATA_OK;

    /* Windows are named and keyed after GLOBAL_ALLOC_TAG | id: an id with
     * those bits would name another domain's windows (an L4 counts its
     * ids up from 1). */
    if (c->domain_id >= GLOBAL_ALLOC_TAG)
        return base_fail(
            STRATA_EINVAL, "%s of domain %llu: domain ids are below 2^62",
            wire_phase_name(c->phase), (unsigned long long)c->domain_id);
    pthread_mutex_lock(&gdhost_state(w)->gv_mu);
    sweep_gone(w);
    v = c->phase == WIRE_PHASE_PREPARE_EXPORT ? NULL : find(w, c->domain_id);
    if (v && v->generation != c->generation) {
        err = base_fail(STRATA_EPROTO,
                        "%s of domain %llu generation %llu, which is at "
                        "generation %llu here",
                        wire_phase_name(c->phase),
                        (unsigned long long)c->domain_id,
                        (unsigned long long)c->generation,
                        (unsigned long long)v->generation);
        pthread_mutex_unlock(&gdhost_state(w)->gv_mu);
        return err;
    }
    /* ABORT only ever releases what the id names: it needs no more than
     * the id and generation, and a mismatch must not keep a domain. */
    if (v && c->phase != WIRE_PHASE_ABORT && v->identity != identity_of(c)) {
        err = base_fail(STRATA_EPROTO,
                        "%s of domain %llu names another domain (name, "
                        "window size, members or buffers) than '%s' as "
                        "prepared here",
                        wire_phase_name(c->phase),
                        (unsigned long long)c->domain_id, v->name);
        pthread_mutex_unlock(&gdhost_state(w)->gv_mu);
        return err;
    }
    switch (c->phase) {
    case WIRE_PHASE_PREPARE_EXPORT:
        err = prepare(w, c, descs, handles, &r->num_descriptors);
        r->descriptors = descs;
        if (c->gather)
            err = gather_commit(w, c, err, descs, r->num_descriptors);
        break;
    case WIRE_PHASE_IMPORT:
        err = import(w, c);
        break;
    case WIRE_PHASE_COMMIT:
        err = commit(w, c->domain_id, true);
        break;
    case WIRE_PHASE_ABORT:
        err = abort_view(w, c->domain_id);
        break;
    }
    pthread_mutex_unlock(&gdhost_state(w)->gv_mu);
    return err;
}

/* WINDOW_WRITE / WINDOW_READ from the L4; a read's bytes land in *data. */
static strata_err window_control(strata_worker *w, const struct wire_control *c,
                                 struct wire_operands *res, void **data)
{
    const struct wire_operands *o = &c->operands;
    void *p = (void *)(uintptr_t)o->data;
    strata_err err;

    if (c->op != WIRE_CTRL_WINDOW_WRITE && c->op != WIRE_CTRL_WINDOW_READ)
        return base_fail(STRATA_ENOTSUP, "a node command cannot be %s",
                         wire_ctrl_op_name(c->op));
    if (o->nbytes > MBX_STAGING_SIZE)
        return base_fail(STRATA_EINVAL,
                         "window copy of %llu bytes (at most "
                         "%u)",
                         (unsigned long long)o->nbytes, MBX_STAGING_SIZE);
    if (c->op == WIRE_CTRL_WINDOW_READ) {
        p = *data = base_malloc(o->nbytes);
        if (!p)
            return base_fail(STRATA_ENOMEM, "out of memory for a copy");
    }
    err = gnode_window_copy(w, o->domain_id, o->rank, o->offset, p, o->nbytes,
                            c->op == WIRE_CTRL_WINDOW_WRITE);
    if (!err && c->op == WIRE_CTRL_WINDOW_READ) {
        res->present = WIRE_OPND_BIT(WIRE_OPND_DATA);
        res->data = p;
        res->data_len = o->nbytes;
    }
    return err;
}

strata_err gnode_handle_batch(strata_worker *w, const void *frames, size_t len,
                              uint32_t count, struct wire_buf *reply)
{
    const uint8_t *p = frames;
    strata_err err = STRATA_OK;

    if (count == 0)
        count = 1;
    for (uint32_t k = 0; k < count && !err; k++) {
        struct wire_frame_header h;
        size_t n;

        err = wire_frame_header_unpack(p, len, &h);
        if (err)
            break;
        n = WIRE_FRAME_HEADER_SIZE + (size_t)h.body_len;
        if (n > len)
            return base_fail(STRATA_EPROTO,
                             "node command %u of %u: a %zu-byte frame in %zu "
                             "bytes",
                             k + 1, count, n, len);
        err = gnode_handle(w, p, n, reply);
        p += n;
        len -= n;
    }
    if (!err && len != 0)
        err = base_fail(STRATA_EPROTO,
                        "%zu bytes after the %u node commands announced", len,
                        count);
    return err;
}

strata_err gnode_handle(strata_worker *w, const void *frame, size_t len,
                        struct wire_buf *reply)
{
    void *data = NULL;
    struct wire_descriptor *descs = NULL;
    char(*handles)[CHIP_WINDOW_HANDLE_MAX] = NULL;
    struct wire_msg m;
    struct wire_msg out;
    strata_err err = wire_frame_unpack(frame, len, &m);

    if (err)
        return err;
    memset(&out, 0, sizeof(out));
    if (m.type == WIRE_MSG_COMM_INIT) {
        out.type = WIRE_MSG_CONTROL_REPLY;
        out.u.control_reply.request_id = m.u.comm_init.request_id;
        err = comm_init(w, &m.u.comm_init);
        out.u.control_reply.error = err;
        out.u.control_reply.message = err ? strata_errmsg() : "";
    } else if (m.type == WIRE_MSG_CONTROL) {
        out.type = WIRE_MSG_CONTROL_REPLY;
        out.u.control_reply.request_id = m.u.control.request_id;
        out.u.control_reply.op = m.u.control.op;
        err = window_control(w, &m.u.control, &out.u.control_reply.results,
                             &data);
        if (err)
            out.u.control_reply.results.present = 0;
        out.u.control_reply.error = err;
        out.u.control_reply.message = err ? strata_errmsg() : "";
    } else if (m.type == WIRE_MSG_DOMAIN_CMD) {
        const struct wire_domain_cmd *c = &m.u.domain_cmd;
        struct wire_domain_reply *r = &out.u.domain_reply;

        descs = base_calloc(c->num_members, sizeof(*descs));
        handles = base_calloc(c->num_members, sizeof(*handles));
        out.type = WIRE_MSG_DOMAIN_REPLY;
        r->request_id = c->request_id;
        r->phase = c->phase;
        r->domain_id = c->domain_id;
        r->generation = c->generation;
        uint64_t trace_t0 = trace_enabled() ? trace_now() : 0;
        err = descs && handles
                  ? domain_cmd(w, c, r, descs, handles)
                  : base_fail(STRATA_ENOMEM, "out of memory for a reply");
        if (err)
            r->num_descriptors = 0;
        r->error = err;
        trace_gdomain_phase(trace_t0, c->phase, c->domain_id, err);
        r->message = err ? strata_errmsg() : "";
    } else {
        wire_msg_free(&m);
        return base_fail(STRATA_EPROTO,
                         "a node command must be COMM_INIT, DOMAIN_CMD "
                         "or CONTROL, not %s",
                         wire_msg_name(m.type));
    }
    err = wire_msg_pack(&out, reply);
    base_free(data);
    base_free(descs);
    base_free(handles);
    wire_msg_free(&m);
    return err;
}

static strata_err locate(struct strata_global_view *v, uint32_t rank,
                         uint32_t *i_out)
{
    for (uint32_t i = 0; i < v->nlocal; i++) {
        if (v->ranks[i] == rank) {
            *i_out = i;
            return STRATA_OK;
        }
    }
    return base_fail(STRATA_ENOENT, "rank %u of domain '%s' is not here", rank,
                     v->name);
}

/* A copy found no window at member i of lazy view v: its ADOPT, ahead of
 * the copy in the chip's ring, has run; if it failed, that is the cause
 * ("the domain is gone"), not the missing window. Under gv_mu. */
static strata_err adopt_failure(strata_worker *w,
                                const struct strata_global_view *v, uint32_t i,
                                strata_err err)
{
    const struct orch_ctl *a = &v->adopt_ctls[i];
    char msg[STRATA_ERRMSG_MAX] = "";
    strata_err aerr = STRATA_OK;

    orch_lock(gdhost_sched(w));
    if (a->done && !a->withdrawn && a->err) {
        aerr = a->err;
        snprintf(msg, sizeof(msg), "%s", a->msg);
    }
    orch_unlock(gdhost_sched(w));
    if (!aerr)
        return err;
    return base_fail(aerr,
                     "chip %d could not map the windows of global domain "
                     "'%s': %.400s",
                     v->chips[i], v->name, msg);
}

strata_err gnode_window_copy(strata_worker *w, uint64_t domain_id,
                             uint32_t rank, uint64_t offset, void *data,
                             size_t n, bool write)
{
    struct strata_global_view *v;
    strata_err err;
    uint32_t i = 0;

    pthread_mutex_lock(&gdhost_state(w)->gv_mu);
    v = find(w, domain_id);
    err = v && v->state == VIEW_COMMITTED
              ? locate(v, rank, &i)
              : base_fail(STRATA_ENOENT, "no committed domain %llu here",
                          (unsigned long long)domain_id);
    /* The window, not the page-rounded mapping behind it. */
    if (!err && (offset > v->window_size || n > v->window_size - offset))
        err = base_fail(STRATA_EINVAL,
                        "bytes [%llu, +%zu) are outside domain '%s''s "
                        "%zu-byte window",
                        (unsigned long long)offset, n, v->name,
                        (size_t)v->window_size);
    if (!err) {
        uint64_t arg[4] = {GLOBAL_ALLOC_TAG | domain_id, offset, n, 0};

        err = orch_control_staged_copy(gdhost_sched(w), NULL, v->eps[i], arg,
                                       data, n, write);
    }
    if (err == STRATA_ENOENT && v && v->lazy && v->adopts_posted)
        err = adopt_failure(w, v, i, err);
    pthread_mutex_unlock(&gdhost_state(w)->gv_mu);
    return err;
}

/* A lookup's pin ends (a fence hook: under the scheduler lock, so only
 * the atomic count, never gv_mu). */
static void unpin(struct orch_sched *s, void *arg)
{
    struct strata_global_view *v = arg;

    (void)s;
    __atomic_sub_fetch(&v->users, 1, __ATOMIC_RELEASE);
}

strata_err strata_orch_get_global_domain(strata_orch *o, uint64_t domain_id,
                                         strata_global_view **out)
{
    strata_worker *w = strata_orch_worker(o);
    struct strata_global_view *v;
    strata_err err;

    if (!w || !out)
        return base_fail(STRATA_EINVAL,
                         "strata_orch_get_global_domain: %s is NULL",
                         !w ? "orch" : "out");
    err = orch_usable(o, "strata_orch_get_global_domain");
    if (err)
        return err;
    if (gdhost_level(w) != 3)
        return base_fail(STRATA_EINVAL,
                         "strata_orch_get_global_domain: views live on the "
                         "nodes; call it from a level-3 worker's orch fn (the "
                         "level-%d worker holds the strata_global_domain)",
                         gdhost_level(w));
    pthread_mutex_lock(&gdhost_state(w)->gv_mu);
    v = find(w, domain_id);
    if (v && v->state != VIEW_COMMITTED)
        v = NULL;
    if (v)
        __atomic_add_fetch(&v->users, 1, __ATOMIC_ACQ_REL);
    pthread_mutex_unlock(&gdhost_state(w)->gv_mu);
    if (!v)
        return base_fail(STRATA_ENOENT,
                         "no committed global domain %llu on this node",
                         (unsigned long long)domain_id);
    /* Without gv_mu: an ADOPT may queue behind a long kernel, and the
     * node's other domain commands need not wait for it. */
    err = gnode_lazy_mapped(w, v);
    pthread_mutex_lock(&gdhost_state(w)->gv_mu);
    if (v->state != VIEW_COMMITTED) /* aborted meanwhile: that first */
        err = base_fail(STRATA_ENOENT,
                        "global domain %llu was released on this node",
                        (unsigned long long)domain_id);
    pthread_mutex_unlock(&gdhost_state(w)->gv_mu);
    /* The caller uses v until its run ends: pinned until that fence. */
    if (!err)
        err = orch_run_on_fence(o, unpin, v);
    if (err) {
        unpin(NULL, v);
        return err;
    }
    *out = v;
    return STRATA_OK;
}

strata_err strata_global_view_context(const strata_global_view *v,
                                      int local_chip,
                                      strata_chip_domain_ctx *out)
{
    if (!v || !out)
        return base_fail(STRATA_EINVAL,
                         "strata_global_view_context: %s is NULL",
                         !v ? "v" : "out");
    for (uint32_t i = 0; i < v->nlocal; i++) {
        if (v->chips[i] != local_chip)
            continue;
        out->name = v->name;
        out->domain_rank = v->ranks[i];
        out->domain_size = v->n;
        out->device_ctx = v->device_ctx[i];
        out->local_window_base = v->local_base[i];
        out->actual_window_size = v->mapping_size;
        out->num_buffers = v->num_buffers;
        out->buffers = v->buffers;
        return STRATA_OK;
    }
    return base_fail(STRATA_ENOENT,
                     "chip %d is not a member of global domain '%s' here",
                     local_chip, v->name);
}
