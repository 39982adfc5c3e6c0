/* Global domains, the L4 side: validation, COMM_INIT once per node, then
 * PREPARE_EXPORT, IMPORT and COMMIT fanned out to the member nodes in
 * parallel as msgpack commands (a forked node gets them through its
 * mailbox, a remote one over its connection), ABORT on any failure before
 * COMMIT, and the release after the run fence. */
#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "base/token.h"
#include "chip/chip.h"
#include "chip/peer.h"
#include "gdomain_int.h"
#include "gview.h"
#include "orch/control.h"
#include "wire/msg.h"

#include <stdio.h>
#include <strata/domain.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void unlink_after_death(struct strata_global_domain *g);
static void page_drop(struct strata_global_domain *g);

/* ---- the domain object ---------------------------------------------- */

/* What only the transaction and the release use: once g is freed, the
 * handle needs none of it (its copies are refused, its release is a
 * no-op), and a worker that allocates a domain a step would otherwise
 * keep ~35 KiB (two nodes) per step until it is destroyed. */
static void gd_shrink(struct strata_global_domain *g)
{
    for (uint32_t i = 0; g->cmds && i < g->num_nodes; i++)
        wire_buf_fini(&g->cmds[i]);
    base_free(g->cmds);
    base_free(g->replies);
    base_free(g->table);
    base_free(g->handles);
    base_free(g->rows);
    base_free(g->entries);
    base_free(g->prepared);
    base_free(g->ctls);
    base_free(g->ptrs);
    base_free(g->release_req);
    g->cmds = NULL;
    g->replies = NULL;
    g->table = NULL;
    g->handles = NULL;
    g->rows = NULL;
    g->entries = NULL;
    g->prepared = NULL;
    g->ctls = NULL;
    g->ptrs = NULL;
    g->release_req = NULL;
}

/* g was just freed (its last ABORT answered; scheduler lock held): its
 * working memory goes at the next allocation, on a thread that is in
 * none of the calls that used it. */
static void shrink_later_locked(struct strata_global_domain *g)
{
    g->shrink_next = gdhost_state(g->w)->shrink;
    gdhost_state(g->w)->shrink = g;
}

static void shrink_later(struct strata_global_domain *g)
{
    orch_lock(gdhost_sched(g->w));
    shrink_later_locked(g);
    orch_unlock(gdhost_sched(g->w));
}

static void shrink_freed(strata_worker *w)
{
    struct strata_global_domain *g;

    orch_lock(gdhost_sched(w));
    g = gdhost_state(w)->shrink;
    gdhost_state(w)->shrink = NULL;
    orch_unlock(gdhost_sched(w));
    while (g) {
        struct strata_global_domain *next = g->shrink_next;

        gd_shrink(g);
        g = next;
    }
}

static void gd_free(struct strata_global_domain *g)
{
    if (!g)
        return;
    gd_shrink(g);
    base_free(g->members);
    base_free(g->buffers);
    base_free(g->names);
    base_free(g->nodes);
    chip_domain_ctl_unmap(g->page);
    base_free(g);
}

void gdomain_free_all(strata_worker *w)
{
    gdhost_state(w)->shrink = NULL; /* every one is freed below */
    while (gdhost_state(w)->gdomains) {
        struct strata_global_domain *g = gdhost_state(w)->gdomains;

        gdhost_state(w)->gdomains = g->next;
        /* Never released (retained past close): the nodes are gone, and
         * the L4 may have made the control page at a node's death. */
        if (g->committed && !g->freed)
            unlink_after_death(g);
        page_drop(g);
        gd_free(g);
    }
}

static int node_slot(const struct strata_global_domain *g, uint32_t node)
{
    for (uint32_t i = 0; i < g->num_nodes; i++)
        if ((uint32_t)g->nodes[i] == node)
            return (int)i;
    return -1;
}

/* Every entry of every member node's row: the spec's, or by default a host
 * direct map of its own members and an explicit host-consumer record with
 * no adapter for the others. */
static void fill_attachments(struct strata_global_domain *g,
                             const strata_global_domain_spec *s)
{
    for (uint32_t r = 0; r < g->num_nodes; r++) {
        g->rows[r].node_worker_id = (uint32_t)g->nodes[r];
        g->rows[r].entries = &g->entries[(size_t)r * g->n];
        for (uint32_t m = 0; m < g->n; m++) {
            struct wire_attach_entry *e = &g->entries[(size_t)r * g->n + m];
            bool own = g->members[m].node_worker_id == (uint32_t)g->nodes[r];

            e->address_space = WIRE_SPACE_HOST;
            e->role = own ? WIRE_ROLE_PROVIDER : WIRE_ROLE_CONSUMER;
            e->adapter = own ? WIRE_ADAPTER_DIRECT_MAP : WIRE_ADAPTER_NONE;
            e->adapter_profile = own ? "sim" : "";
        }
    }
    for (size_t i = 0; i < s->num_attachments; i++) {
        const strata_attachment *a = &s->attachments[i];
        int r = node_slot(g, (uint32_t)a->receiving_node);
        struct wire_attach_entry *e =
            &g->entries[(size_t)r * g->n + a->member_rank];

        e->address_space = (uint8_t)a->address_space;
        e->role = (uint8_t)a->role;
        e->adapter = (uint8_t)a->adapter;
        e->adapter_profile = a->adapter_profile ? a->adapter_profile : "";
    }
    g->num_rows = g->num_nodes;
}

/* The most members any one node of g has. */
static uint32_t max_on_a_node(const struct strata_global_domain *g)
{
    uint32_t most = 0;

    for (uint32_t i = 0; i < g->num_nodes; i++) {
        uint32_t k = 0;

        for (uint32_t r = 0; r < g->n; r++)
            k += g->members[r].node_worker_id == (uint32_t)g->nodes[i];
        most = k > most ? k : most;
    }
    return most;
}

static strata_err create(strata_worker *w, const strata_global_domain_spec *s,
                         struct strata_global_domain **out)
{
    struct strata_global_domain *g = base_calloc(1, sizeof(*g));
    size_t n = s->num_members;

    if (!g)
        return base_fail(STRATA_ENOMEM, "out of memory for a global domain");
    g->members = base_calloc(n, sizeof(*g->members));
    g->nodes = base_calloc(n, sizeof(*g->nodes));
    g->buffers = base_calloc(s->num_buffers + 1, sizeof(*g->buffers));
    g->names = base_calloc(s->num_buffers + 1, sizeof(*g->names));
    g->table = base_calloc(n, sizeof(*g->table));
    g->handles = base_calloc(n, sizeof(*g->handles));
    if (!g->members || !g->nodes || !g->buffers || !g->names || !g->table ||
        !g->handles)
        goto nomem;
    snprintf(g->name, sizeof(g->name), "%s", s->name);
    g->w = w;
    g->n = (uint32_t)n;
    g->window_size = s->window_size;
    g->retain = s->retain_after_run;
    for (size_t i = 0; i < n; i++) {
        g->members[i].node_worker_id = (uint32_t)s->members[i].node_worker_id;
        g->members[i].local_worker_id = (uint32_t)s->members[i].local_chip;
        g->members[i].global_device_rank = (uint32_t)i;
        g->members[i].domain_rank = (uint32_t)i;
        if (node_slot(g, g->members[i].node_worker_id) < 0)
            g->nodes[g->num_nodes++] = s->members[i].node_worker_id;
    }
    g->num_buffers = s->num_buffers;
    for (size_t i = 0; i < s->num_buffers; i++) {
        snprintf(g->names[i], sizeof(g->names[i]), "%s", s->buffers[i].name);
        g->buffers[i].name = g->names[i];
        g->buffers[i].dtype = (uint8_t)s->buffers[i].dtype;
        g->buffers[i].count = s->buffers[i].count;
        g->buffers[i].nbytes = s->buffers[i].nbytes;
    }
    g->prepared = base_calloc(g->num_nodes, sizeof(*g->prepared));
    g->ctls = base_calloc(g->num_nodes, sizeof(*g->ctls));
    g->ptrs = base_calloc(g->num_nodes, sizeof(*g->ptrs));
    g->cmds = base_calloc(g->num_nodes, sizeof(*g->cmds));
    /* Room for the three replies of a transaction sent at once. */
    g->reply_cap =
        GDOMAIN_BATCH * REPLY_BASE + REPLY_PER_MEMBER * max_on_a_node(g);
    g->replies = base_malloc((size_t)g->num_nodes * g->reply_cap);
    g->release_req = base_calloc(g->num_nodes, sizeof(*g->release_req));
    g->rows = base_calloc(g->num_nodes, sizeof(*g->rows));
    g->entries = base_calloc((size_t)g->num_nodes * n, sizeof(*g->entries));
    if (!g->prepared || !g->ctls || !g->ptrs || !g->cmds || !g->replies ||
        !g->rows || !g->entries || !g->release_req)
        goto nomem;
    fill_attachments(g, s);
    g->attach = s->num_attachments > 0;
    *out = g;
    return STRATA_OK;
nomem:
    gd_free(g);
    return base_fail(STRATA_ENOMEM, "out of memory for a global domain");
}

/* ---- commands --------------------------------------------------------- */

void gdomain_cmd_init(const struct strata_global_domain *g,
                      struct wire_domain_cmd *c, uint8_t phase)
{
    memset(c, 0, sizeof(*c));
    c->request_id = gdhost_request_id();
    c->version = WIRE_DOMAIN_CMD_VERSION;
    c->phase = phase;
    c->domain_id = g->id;
    c->generation = g->generation;
    c->window_size = g->window_size;
    c->name = g->name;
    c->profile = "sim";
    c->members = g->members;
    c->num_members = g->n;
    c->buffers = g->buffers;
    c->num_buffers = g->num_buffers;
    /* Without the spec's attachments every row is the default, which a
     * node assumes for a row not sent: a matrix of nodes x members
     * entries less to pack and check on every node. */
    if (phase == WIRE_PHASE_PREPARE_EXPORT && g->attach) {
        c->attach_rows = g->rows;
        c->num_attach_rows = g->num_rows;
    }
    if (phase == WIRE_PHASE_PREPARE_EXPORT) {
        c->gather = g->gather;
        c->exchange = g->exchange;
    }
    if (phase == WIRE_PHASE_IMPORT || phase == WIRE_PHASE_COMMIT) {
        c->descriptors = g->table;
        c->num_descriptors = g->n;
    }
}

void gdomain_ctl_for(struct orch_ctl *c, const struct wire_buf *cmd,
                     uint64_t req, void *reply, uint32_t cap)
{
    memset(c, 0, sizeof(*c));
    c->op = MBX_CTL_NODE_CMD;
    c->arg[1] = req;
    c->staged = cmd->data;
    c->staged_len = (uint32_t)cmd->len;
    c->staged_reply = reply;
    c->staged_reply_cap = cap;
}

strata_err gdomain_pack_all(struct strata_global_domain *g, const bool *mask,
                            const struct wire_domain_cmd *cs, uint32_t k)
{
    strata_err err = STRATA_OK;
    int first = -1;

    for (uint32_t i = 0; i < g->num_nodes && !err; i++) {
        if (mask && !mask[i])
            continue;
        wire_buf_reset(&g->cmds[i]);
        if (first >= 0) {
            err = wire_buf_append(&g->cmds[i], g->cmds[first].data,
                                  g->cmds[first].len);
            continue;
        }
        for (uint32_t j = 0; j < k && !err; j++)
            err = wire_domain_cmd_pack(&cs[j], &g->cmds[i]);
        first = (int)i;
    }
    return err;
}

/* Sends one command per node in mask (NULL: all) and waits for all;
 * g->ptrs[0 .. *sent) are the ones posted (sent may be NULL). */
static strata_err fan_out(struct strata_global_domain *g, strata_orch *o,
                          uint8_t phase, const bool *mask, uint32_t *sent)
{
    struct orch_sched *s = gdhost_sched(g->w);
    struct wire_domain_cmd c;
    strata_err err;
    uint32_t posted = 0;

    gdomain_cmd_init(g, &c, phase);
    err = gdomain_pack_all(g, mask, &c, 1);
    for (uint32_t i = 0; i < g->num_nodes && !err; i++) {
        if (mask && !mask[i])
            continue;
        gdomain_ctl_for(&g->ctls[i], &g->cmds[i], c.request_id,
                        g->replies + (size_t)i * g->reply_cap, g->reply_cap);
        err = orch_control_post(s, o, g->nodes[i], &g->ctls[i], NULL);
        if (!err) {
            g->ptrs[posted++] = &g->ctls[i];
            if (phase == WIRE_PHASE_PREPARE_EXPORT)
                g->prepared[i] = true;
        }
    }
    if (sent)
        *sent = posted;
    {
        strata_err werr = orch_control_wait(s, g->ptrs, posted);

        return err ? err : werr;
    }
}

/* Decodes node i's reply to phase; PREPARE replies fill the table. */
static strata_err check_reply(struct strata_global_domain *g, uint32_t i,
                              uint8_t phase)
{
    const struct orch_ctl *c = &g->ctls[i];

    if (c->err)
        return base_fail(c->err, "node %d: %s", g->nodes[i], c->msg);
    return gdomain_check_reply_at(g, i, phase,
                                  g->replies + (size_t)i * g->reply_cap,
                                  c->staged_reply_len);
}

strata_err gdomain_check_reply_at(struct strata_global_domain *g, uint32_t i,
                                  uint8_t phase, const void *frame, size_t len)
{
    struct wire_msg m;
    strata_err err;

    err = wire_frame_unpack(frame, len, &m);
    if (err)
        return base_fail(STRATA_EPROTO, "node %d's reply: %s", g->nodes[i],
                         strata_errmsg());
    if (m.type != WIRE_MSG_DOMAIN_REPLY || m.u.domain_reply.phase != phase ||
        m.u.domain_reply.domain_id != g->id ||
        m.u.domain_reply.generation != g->generation) {
        err = base_fail(STRATA_EPROTO, "node %d answered out of turn",
                        g->nodes[i]);
    } else if (m.u.domain_reply.error) {
        err = base_fail(m.u.domain_reply.error, "node %d: %s", g->nodes[i],
                        m.u.domain_reply.message);
    } else {
        for (size_t k = 0; k < m.u.domain_reply.num_descriptors; k++) {
            const struct wire_descriptor *d = &m.u.domain_reply.descriptors[k];

            if (d->domain_rank >= g->n ||
                g->members[d->domain_rank].node_worker_id !=
                    (uint32_t)g->nodes[i]) {
                err = base_fail(STRATA_EPROTO,
                                "node %d exported rank %u, not its own",
                                g->nodes[i], d->domain_rank);
                break;
            }
            g->table[d->domain_rank] = *d;
            snprintf(g->handles[d->domain_rank], sizeof(g->handles[0]), "%s",
                     d->handle);
            g->table[d->domain_rank].handle = g->handles[d->domain_rank];
            g->table[d->domain_rank].profile = "sim";
        }
    }
    wire_msg_free(&m);
    return err;
}

/* Node i was lost with no cause given: it closed its connection without
 * a GOODBYE (most often killed because of another node's failure). */
bool gdomain_bare_loss(const struct strata_global_domain *g, uint32_t i)
{
    return g->ctls[i].err == STRATA_EPEER &&
           strstr(g->ctls[i].msg, WIRE_NO_GOODBYE) != NULL;
}

static strata_err phase(struct strata_global_domain *g, strata_orch *o,
                        uint8_t ph)
{
    uint32_t sent;
    strata_err err = fan_out(g, o, ph, NULL, &sent);

    if (sent < g->num_nodes)
        return err; /* not posted to every node */
    for (uint32_t i = 0; i < g->num_nodes; i++)
        if (!g->ctls[i].done)
            return err; /* the wait itself failed */
    /* Every node answered or was lost. Which failure is the cause: a
     * node lost with a reason (it died, or said why in its GOODBYE),
     * then a node's answer, then a node that only closed its connection
     * (a stopped MPI rank that mpirun killed because another rank ended
     * the job, say), each in node order. A node's answer comes after a
     * loss with a reason because it is often what the loss caused (a
     * member's windows gone with it). */
    for (uint32_t i = 0; i < g->num_nodes; i++)
        if (g->ctls[i].err && !gdomain_bare_loss(g, i))
            return base_fail(g->ctls[i].err, "%s", g->ctls[i].msg);
    for (uint32_t i = 0; i < g->num_nodes; i++)
        if (!g->ctls[i].err && (err = check_reply(g, i, ph)) != STRATA_OK)
            return err;
    for (uint32_t i = 0; i < g->num_nodes; i++)
        if (g->ctls[i].err)
            return base_fail(g->ctls[i].err, "%s", g->ctls[i].msg);
    return STRATA_OK;
}

/* The cluster id: the L4's pid and a random token, drawn once per
 * worker. Nodes name a global domain's windows after it, so a segment
 * some earlier L4 with the same pid left behind is never opened. */
uint64_t gdomain_cluster_id(strata_worker *w)
{
    uint32_t t =
        __atomic_load_n(&gdhost_state(w)->cluster_token, __ATOMIC_ACQUIRE);
    uint32_t none = 0;

    if (!t) {
        t = base_random_token();
        /* A racing run may have drawn one first: keep that. */
        if (!__atomic_compare_exchange_n(&gdhost_state(w)->cluster_token, &none,
                                         t, false, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE))
            t = none;
    }
    return (uint64_t)gdhost_creator(w) << 32 | t;
}

/* COMM_INIT once per node for the worker's life. */
static strata_err comm_init(struct strata_global_domain *g, strata_orch *o)
{
    strata_worker *w = g->w;
    struct orch_sched *s = gdhost_sched(w);
    struct wire_comm_init ci;
    uint32_t ranks[WIRE_MAX_CHIPS];
    strata_err err = STRATA_OK;
    uint32_t posted = 0;

    for (uint32_t i = 0; i < g->num_nodes && !err; i++) {
        struct gdhost_node ni;
        int id = g->nodes[i];
        uint32_t base = 0;

        if (gdhost_node_comm_inited(w, id))
            continue;
        /* Device ranks are numbered across every node of the worker. */
        for (int k = 0; k < id; k++) {
            gdhost_node_info(w, k, &ni);
            base += (uint32_t)ni.num_chips;
        }
        gdhost_node_info(w, id, &ni);
        memset(&ci, 0, sizeof(ci));
        ci.request_id = gdhost_request_id();
        ci.version = WIRE_COMM_INIT_VERSION;
        ci.cluster_id = gdomain_cluster_id(w);
        ci.node_rank = (uint32_t)id;
        ci.node_count = (uint32_t)gdhost_num_nodes(w);
        for (size_t k = 0; k < ni.num_chips && k < WIRE_MAX_CHIPS; k++)
            ranks[k] = base + (uint32_t)k;
        ci.global_device_ranks = ranks;
        ci.num_ranks = ni.num_chips;
        ci.profile = "sim";
        wire_buf_reset(&g->cmds[i]);
        err = wire_comm_init_pack(&ci, &g->cmds[i]);
        if (err)
            break;
        gdomain_ctl_for(&g->ctls[i], &g->cmds[i], ci.request_id,
                        g->replies + (size_t)i * g->reply_cap, g->reply_cap);
        err = orch_control_post(s, o, id, &g->ctls[i], NULL);
        if (!err)
            g->ptrs[posted++] = &g->ctls[i];
    }
    if (posted) { /* once per node: most allocations post none */
        strata_err werr = orch_control_wait(s, g->ptrs, posted);

        err = err ? err : werr;
    }
    for (uint32_t k = 0; k < posted && !err; k++) {
        struct orch_ctl *c = g->ptrs[k];
        uint32_t i = (uint32_t)(c - g->ctls);
        struct wire_msg m;

        err = wire_frame_unpack(g->replies + (size_t)i * g->reply_cap,
                                c->staged_reply_len, &m);
        if (err)
            break;
        if (m.type != WIRE_MSG_CONTROL_REPLY || m.u.control_reply.error)
            err = base_fail(
                m.type == WIRE_MSG_CONTROL_REPLY ? m.u.control_reply.error
                                                 : STRATA_EPROTO,
                "COMM_INIT of node %d: %s", g->nodes[i],
                m.type == WIRE_MSG_CONTROL_REPLY ? m.u.control_reply.message
                                                 : "unexpected reply");
        else
            gdhost_node_set_comm_inited(w, g->nodes[i]);
        wire_msg_free(&m);
    }
    return err;
}

/* A member node died with the domain: the windows its members may have
 * created (a lazily mapping member makes every rank's it opens first,
 * gnode_lazy.c) have no node left to unlink them, and the sweep of stale
 * segments leaves global windows alone. sim nodes share the L4's host,
 * so the L4 drops every rank's name itself (nothing maps them any more:
 * the domain is going). From release_done this runs under the scheduler
 * lock: n system calls, only after a node died. */
static void unlink_after_death(struct strata_global_domain *g)
{
    const struct chip_backend_ops *ops = chip_backend_find("sim");

    if (ops && ops->host_window_unlink)
        gwin_unlink_all(ops, gdomain_cluster_id(g->w), g->id, g->n,
                        g->window_size);
}

/* Members that exchanged descriptors (STRATA_DOMAIN_EXCHANGE=1) made
 * their own windows, named after their node's process, and unlink them
 * at COMMIT or ABORT; those of a node that died before either stay. Only
 * before COMMIT, and only the dead node's ranks, right after its death
 * was seen: the names carry no token, so a pid reused much later must
 * not lose a segment to this. */
static void unlink_dead_exchange(struct strata_global_domain *g, uint32_t node)
{
    const struct chip_backend_ops *ops = chip_backend_find("sim");
    int pid = gdhost_node_pid(g->w, (int)node);

    if (!ops || !ops->host_window_unlink || pid <= 0)
        return;
    for (uint32_t r = 0; r < g->n; r++) {
        struct chip_window_req req =
            gwin_req(gdomain_cluster_id(g->w), g->id, r, g->n, g->window_size);

        if (g->members[r].node_worker_id != node)
            continue;
        req.creator_pid = pid;
        req.name_token = 0;
        ops->host_window_unlink(&req);
    }
}

/* After the ABORTs in g->ptrs[0 .. sent) were waited for: a dead node's
 * windows died with its chips (not a failed ABORT), and their names go
 * here. The first failed ABORT's error, or STRATA_OK. */
static strata_err aborts_settled(struct strata_global_domain *g, uint32_t sent)
{
    strata_err err = STRATA_OK;

    for (uint32_t k = 0; k < sent; k++) {
        bool died = g->ptrs[k]->err == STRATA_EPEER;

        g->node_died |= died;
        if (died && !g->committed)
            unlink_dead_exchange(g, (uint32_t)g->nodes[g->ptrs[k] - g->ctls]);
    }
    if (g->node_died)
        unlink_after_death(g);
    for (uint32_t k = 0; k < sent && !err; k++)
        if (g->ptrs[k]->err != STRATA_EPEER)
            err = check_reply(g, (uint32_t)(g->ptrs[k] - g->ctls),
                              WIRE_PHASE_ABORT);
    memset(g->prepared, 0, g->num_nodes * sizeof(*g->prepared));
    page_drop(g);
    __atomic_store_n(&g->freed, true, __ATOMIC_RELEASE);
    return err == STRATA_EPEER ? STRATA_OK : err;
}

/* ABORT to every node that prepared; a failed ABORT poisons the worker
 * (and is returned). */
static strata_err abort_all(struct strata_global_domain *g, strata_orch *o)
{
    uint32_t sent;
    strata_err err = fan_out(g, o, WIRE_PHASE_ABORT, g->prepared, &sent);
    strata_err serr = aborts_settled(g, sent);

    if (err == STRATA_EPEER)
        err = STRATA_OK;
    if (!err)
        err = serr;
    if (err) {
        LOG_ERROR("global domain '%s': ABORT failed, the worker is "
                  "poisoned: %s",
                  g->name, strata_errmsg());
        gdhost_poison(g->w);
    }
    return err;
}

/* ---- lifetime --------------------------------------------------------- */

/* The control page's name, or false without a host-window backend. */
static bool page_name(struct strata_global_domain *g, char *out, size_t cap)
{
    const struct chip_backend_ops *ops = chip_backend_find("sim");
    struct chip_window_req req =
        gwin_req(gdomain_cluster_id(g->w), g->id, 0, g->n, g->window_size);

    return ops && chip_domain_ctl_name(ops, &req, out, cap);
}

/* Before PREPARE_EXPORT, or while the nodes work on a transaction sent
 * at once (each makes the page at IMPORT if it is not there yet, before
 * its members may map): members never make it (chip/control.c), and
 * this mapping is the one the L4 marks a node's death through. */
strata_err gdomain_page_open(struct strata_global_domain *g)
{
    char name[CHIP_WINDOW_HANDLE_MAX];

    if (!page_name(g, name, sizeof(name)))
        return STRATA_OK;
    return chip_domain_ctl_map(name, true, &g->page);
}

/* Once no mark can come (the entries are forgotten) and no member will
 * map: the name goes, then the mapping. Under the scheduler lock from
 * release_done. */
static void page_drop(struct strata_global_domain *g)
{
    char name[CHIP_WINDOW_HANDLE_MAX];

    if (!g->page)
        return;
    if (page_name(g, name, sizeof(name)))
        shm_unlink(name);
    chip_domain_ctl_unmap(g->page);
    g->page = NULL;
}

/* A node that dies with the domain committed cannot mark its members'
 * control page (gnode_lazy.c marks it for one member's death): the L4
 * does, for each member node, with that node's first rank, through its
 * own mapping of the page. */
static strata_err watch_nodes(struct strata_global_domain *g)
{
    char label[64];
    strata_err err = STRATA_OK;

    snprintf(label, sizeof(label), "global domain '%.40s'", g->name);
    for (uint32_t i = 0; g->page && i < g->num_nodes && !err; i++) {
        uint32_t r = 0;

        while (g->members[r].node_worker_id != (uint32_t)g->nodes[i])
            r++;
        err = orch_mark_page_on_death(gdhost_sched(g->w), g->nodes[i], g->page,
                                      label, r, GLOBAL_ALLOC_TAG | g->id);
    }
    return err;
}

static void release_done(struct orch_ctl *c, void *arg)
{
    struct strata_global_domain *g = arg;

    g->node_died |= c && c->err == STRATA_EPEER;
    /* A node that answered its ABORT with an error may still hold the
     * windows: as for a failed ABORT at allocation, the worker is
     * poisoned (its answer was not even read before). */
    if (c && !c->err &&
        check_reply(g, (uint32_t)(c - g->ctls), WIRE_PHASE_ABORT) !=
            STRATA_OK) {
        LOG_ERROR("global domain '%s': release failed on node %d, the "
                  "worker is poisoned: %s",
                  g->name, g->nodes[c - g->ctls], strata_errmsg());
        gdhost_poison(g->w);
    }
    if (--g->pending > 0)
        return;
    if (g->node_died)
        unlink_after_death(g);
    page_drop(g);
    __atomic_store_n(&g->freed, true, __ATOMIC_RELEASE);
    shrink_later_locked(g);
}

/* Under the scheduler lock: post the pre-packed ABORTs; no waiting. */
static void release_locked(struct strata_global_domain *g)
{
    struct orch_sched *s = gdhost_sched(g->w);

    if (g->freed || g->pending || !g->committed)
        return;
    orch_mark_forget_locked(s, GLOBAL_ALLOC_TAG | g->id);
    g->pending = 1;
    for (uint32_t i = 0; i < g->num_nodes; i++) {
        struct orch_ctl *c = &g->ctls[i];

        gdomain_ctl_for(c, &g->cmds[i], g->release_req[i],
                        g->replies + (size_t)i * g->reply_cap, g->reply_cap);
        c->on_done = release_done;
        c->on_done_arg = g;
        g->pending++;
        if (orch_control_post_locked(s, g->run, g->nodes[i], c) != STRATA_OK) {
            LOG_WARN("global domain '%s': cannot release on node %d: %s",
                     g->name, g->nodes[i], strata_errmsg());
            g->pending--;
        }
    }
    release_done(NULL, g);
}

static void fence_hook(struct orch_sched *s, void *arg)
{
    struct strata_global_domain *g = arg;

    (void)s;
    if (!g->committed || g->freed)
        return;
    if (g->retain && !g->released) {
        g->fence_passed = true;
        return;
    }
    __atomic_store_n(&g->released, true, __ATOMIC_RELEASE);
    release_locked(g);
}

/* The ABORT each node will get at release, packed now. */
static strata_err pack_release(struct strata_global_domain *g)
{
    struct wire_domain_cmd c;

    gdomain_cmd_init(g, &c, WIRE_PHASE_ABORT);
    for (uint32_t i = 0; i < g->num_nodes; i++)
        g->release_req[i] = c.request_id;
    return gdomain_pack_all(g, NULL, &c, 1);
}

/* PREPARE_EXPORT, then IMPORT and COMMIT, each waited for: a node's
 * first domain, or where the L4 cannot predict the table. *mixed: some
 * nodes named their windows lazily and some had their members exchange
 * (a node's range was full, or STRATA_DOMAIN_EXCHANGE differs): abort,
 * and have every node exchange. */
static strata_err phases(struct strata_global_domain *g, strata_orch *o,
                         bool *mixed)
{
    strata_err err;

    if (g->gather)
        gdhost_group_lock();
    err = phase(g, o, WIRE_PHASE_PREPARE_EXPORT);
    if (g->gather)
        gdhost_group_unlock();
    if (!err && !g->gather && !g->exchange && gdomain_learn_lazy(g)) {
        *mixed = true;
        return base_fail(STRATA_EPROTO,
                         "the nodes made their windows in two ways");
    }
    if (!err)
        err =
            wire_descriptor_table_check(g->table, g->n, "sim", g->window_size);
    if (!err && !g->gather)
        err = phase(g, o, WIRE_PHASE_IMPORT);
    if (!err && !g->gather)
        err = phase(g, o, WIRE_PHASE_COMMIT);
    return err;
}

static uint64_t next_id;

/* The attempt so far aborted everywhere; the next under a new id, with
 * every node's members exchanging descriptors. */
static strata_err again_exchanging(struct strata_global_domain *g,
                                   strata_orch *o)
{
    strata_err err;

    orch_mark_forget(gdhost_sched(g->w), GLOBAL_ALLOC_TAG | g->id);
    err = abort_all(g, o);
    if (err)
        return err;
    g->freed = false;
    g->node_died = false;
    g->exchange = true;
    g->id = __atomic_add_fetch(&next_id, 1, __ATOMIC_RELAXED);
    return gdomain_page_open(g);
}

/* The transaction: at once where every node's descriptors can be
 * predicted, else phase by phase. Where the nodes turn out not to make
 * windows the same way (a prediction a node proved wrong, or a mixed
 * table), that attempt is aborted and the domain made again, phase by
 * phase and with every node exchanging descriptors, under a new id. */
static strata_err transact(struct strata_global_domain *g, strata_orch *o)
{
    bool again = false;
    strata_err err;

    if (gdomain_batch_ready(g)) {
        err = gdomain_batch(g, o, &again);
        if (!err || !again)
            return err;
    } else {
        err = gdomain_page_open(g);
        if (!err)
            err = phases(g, o, &again);
        if (!err || !again)
            return err;
    }
    err = again_exchanging(g, o);
    return err ? err : phases(g, o, &again);
}

strata_err
strata_orch_allocate_global_domain(strata_orch *o,
                                   const strata_global_domain_spec *spec,
                                   strata_global_domain **out)
{
    strata_worker *w = o ? strata_orch_worker(o) : NULL;
    struct strata_global_domain *g = NULL;
    strata_err err;

    if (!w || !spec || !out)
        return base_fail(STRATA_EINVAL,
                         "strata_orch_allocate_global_domain: %s is NULL",
                         !w      ? "orch"
                         : !spec ? "spec"
                                 : "out");
    err = orch_usable(o, "strata_orch_allocate_global_domain");
    if (err)
        return err;
    if (gdhost_level(w) < 4)
        return base_fail(STRATA_EINVAL,
                         "global domains span nodes: allocate them from a "
                         "level-4 worker's orch fn");
    shrink_freed(w);
    err = gdomain_validate(w, spec);
    if (!err)
        err = create(w, spec, &g);
    if (err || !g)
        return err ? err : STRATA_ENOMEM;
    g->id = __atomic_add_fetch(&next_id, 1, __ATOMIC_RELAXED);
    g->generation = 1;
    g->run = orch_run_of(o);
    err = orch_run_on_fence(o, fence_hook, g);
    if (err) {
        gd_free(g);
        return err;
    }
    /* The hook holds g now: it lives until the worker is destroyed. */
    g->next = gdhost_state(w)->gdomains;
    gdhost_state(w)->gdomains = g;
    err = comm_init(g, o);
    /* Over a whole MPI group the ranks gather, import and commit among
     * themselves in the one PREPARE_EXPORT round (mpidomain.c). */
    g->gather = gdhost_whole_group(w, g->nodes, g->num_nodes);
    if (!err)
        err = transact(g, o);
    if (!err)
        err = pack_release(g);
    if (!err)
        err = watch_nodes(g);
    if (err) {
        char msg[STRATA_ERRMSG_MAX];

        snprintf(msg, sizeof(msg), "%s", strata_errmsg());
        orch_mark_forget(gdhost_sched(w), GLOBAL_ALLOC_TAG | g->id);
        (void)abort_all(g, o); /* a failure poisons the worker */
        g->released = true;
        shrink_later(g);
        return base_fail(err, "global domain '%s': %s", g->name, msg);
    }
    orch_lock(gdhost_sched(w));
    g->committed = true;
    orch_unlock(gdhost_sched(w));
    *out = g;
    return STRATA_OK;
}

/* Past its run's fence: ABORT on every node now, and wait for them. */
static strata_err release_now(struct strata_global_domain *g)
{
    struct orch_sched *s = gdhost_sched(g->w);
    strata_err err = STRATA_OK;
    uint32_t posted = 0;

    orch_mark_forget(s, GLOBAL_ALLOC_TAG | g->id);
    for (uint32_t i = 0; i < g->num_nodes && !err; i++) {
        gdomain_ctl_for(&g->ctls[i], &g->cmds[i], g->release_req[i],
                        g->replies + (size_t)i * g->reply_cap, g->reply_cap);
        err = orch_control_post(s, NULL, g->nodes[i], &g->ctls[i], NULL);
        if (!err)
            g->ptrs[posted++] = &g->ctls[i];
    }
    {
        strata_err werr = orch_control_wait(s, g->ptrs, posted);
        strata_err serr = aborts_settled(g, posted);

        shrink_later(g); /* freed for good: nothing of this call uses it */
        if (!err && werr != STRATA_EPEER)
            err = werr;
        return err ? err : serr;
    }
}

strata_err strata_global_domain_release(strata_global_domain *g)
{
    bool now = false;

    if (!g)
        return STRATA_OK;
    orch_lock(gdhost_sched(g->w));
    if (!g->released) {
        g->released = true;
        /* Past its run's fence no fence will free it: do it here. Before
         * it, the allocating run's fence does. */
        now = g->fence_passed && g->committed && !g->freed && !g->pending;
        if (now)
            g->pending = 1;
    }
    orch_unlock(gdhost_sched(g->w));
    if (!now)
        return STRATA_OK;
    {
        strata_err err = release_now(g);

        orch_lock(gdhost_sched(g->w));
        g->pending = 0;
        orch_unlock(gdhost_sched(g->w));
        if (err)
            return base_fail(err, "global domain '%s': release: %s", g->name,
                             strata_errmsg());
        /* A lost node's ABORT failed with nothing left to undo: its
         * message is no failure of this call. */
        base_errmsg_clear();
    }
    return STRATA_OK;
}

uint64_t strata_global_domain_id(const strata_global_domain *g)
{
    return g ? g->id : 0;
}

bool strata_global_domain_released(const strata_global_domain *g)
{
    return g && __atomic_load_n(&g->released, __ATOMIC_ACQUIRE);
}

bool strata_global_domain_freed(const strata_global_domain *g)
{
    return g && __atomic_load_n(&g->freed, __ATOMIC_ACQUIRE);
}

/* ---- copies ----------------------------------------------------------- */

/* A copy to a member on a remote node: CONTROL frames, in pieces, each
 * run by the node after the member's chip's earlier work. */
static strata_err remote_copy(strata_orch *o, strata_global_domain *g,
                              uint32_t rank, size_t offset, void *data,
                              size_t n, bool write)
{
    struct wire_control c = {.op = write ? WIRE_CTRL_WINDOW_WRITE
                                         : WIRE_CTRL_WINDOW_READ};

    c.operands.present =
        WIRE_OPND_BIT(WIRE_OPND_DOMAIN_ID) | WIRE_OPND_BIT(WIRE_OPND_RANK);
    c.operands.domain_id = g->id;
    c.operands.rank = rank;
    c.operands.offset = offset;
    return gdhost_remote_copy(g->w, o, (int)g->members[rank].node_worker_id, &c,
                              data, n, write);
}

static strata_err copy(strata_orch *o, strata_global_domain *g, uint32_t rank,
                       const char *buffer, size_t offset, void *data, size_t n,
                       bool write)
{
    const char *fn = write ? "strata_orch_copy_to_global_domain"
                           : "strata_orch_copy_from_global_domain";
    const struct wire_domain_member *m;
    struct gdhost_node ni;
    size_t base = 0;
    size_t limit;
    strata_err err;

    if (!o || !g || !data)
        return base_fail(STRATA_EINVAL, "%s: %s is NULL", fn,
                         !o      ? "orch"
                         : !g    ? "g"
                         : write ? "src"
                                 : "dst");
    err = orch_usable(o, fn);
    if (err)
        return err;
    if (g->released || !g->committed)
        return base_fail(STRATA_ESTATE, "global domain '%s' is released",
                         g->name);
    if (rank >= g->n)
        return base_fail(STRATA_EINVAL, "global domain '%s' has no rank %u",
                         g->name, rank);
    limit = g->window_size;
    if (buffer) {
        size_t i;

        for (i = 0; i < g->num_buffers && strcmp(g->names[i], buffer); i++)
            base += g->buffers[i].nbytes;
        if (i == g->num_buffers)
            return base_fail(STRATA_EINVAL,
                             "global domain '%s' has no buffer '%s'", g->name,
                             buffer);
        limit = g->buffers[i].nbytes;
    }
    if (n == 0 || n > MBX_STAGING_SIZE)
        return base_fail(STRATA_EINVAL,
                         "global domain '%s': a copy of %zu bytes (1 byte to "
                         "1 MiB a call)",
                         g->name, n);
    if (offset > limit || n > limit - offset)
        return base_fail(STRATA_EINVAL,
                         "global domain '%s': offset %zu + n %zu is outside "
                         "the %zu-byte %s",
                         g->name, offset, n, limit,
                         buffer ? "buffer" : "window");
    m = &g->members[rank];
    gdhost_node_info(g->w, (int)m->node_worker_id, &ni);
    if (ni.remote)
        return remote_copy(o, g, rank, base + offset, data, n, write);
    {
        uint64_t arg[4] = {g->id, base + offset, n, rank};
        char why[512];

        err = orch_control_staged_copy(
            gdhost_sched(g->w), o, (int)m->node_worker_id, arg, data, n, write);
        if (!err)
            return STRATA_OK;
        /* Name the node, as a remote node's error does. */
        snprintf(why, sizeof(why), "%s", strata_errmsg());
        return base_fail(err,
                         "global domain '%s': copy to rank %u on node %d: %s",
                         g->name, rank, m->node_worker_id, why);
    }
}

strata_err strata_orch_copy_to_global_domain(strata_orch *o,
                                             strata_global_domain *g,
                                             uint32_t rank, const char *buffer,
                                             size_t offset, const void *src,
                                             size_t n)
{
    return copy(o, g, rank, buffer, offset, (void *)(uintptr_t)src, n, true);
}

strata_err
strata_orch_copy_from_global_domain(strata_orch *o, strata_global_domain *g,
                                    uint32_t rank, const char *buffer,
                                    size_t offset, void *dst, size_t n)
{
    return copy(o, g, rank, buffer, offset, dst, n, false);
}
