/* Global domains, the L4 side: the whole transaction in one round trip.
 *
 * A node whose members map lazily (gnode_lazy.c) names rank r's window
 * after the cluster id, the domain id and r alone, so the L4 can compute
 * the table every such node will export before asking. Once a node has
 * named a domain's windows so (gdomain_learn_lazy, after each phase-by-
 * phase PREPARE_EXPORT), its next domains go out as PREPARE_EXPORT, an
 * IMPORT with the predicted table and COMMIT, packed back to back into
 * one command: a forked node runs them in order from its mailbox
 * (gnode_handle_batch), a remote session from its connection (its domain
 * commands run one at a time, in order). The wire protocol is the same;
 * only the waits between phases go. A lazy node neither opens nor
 * unlinks anything at IMPORT or COMMIT, so no node's COMMIT can take a
 * name from another node's IMPORT.
 *
 * Errors are judged as phase by phase: every node's PREPARE_EXPORT
 * first, then IMPORT, then COMMIT, and any failure aborts the domain
 * everywhere (the caller's ABORT, unchanged). A node that named its
 * windows otherwise this time (its reserved range was full, say, and its
 * members exchanged descriptors) refuses the predicted IMPORT before any
 * member maps (gnode.c); the L4 then aborts and makes the domain again,
 * phase by phase, under a new id. */
#include "base/err.h"
#include "base/fault.h"
#include "chip/chip.h"
#include "domain/exchange.h"
#include "gdomain_int.h"
#include "gview.h"

#include <stdio.h>
#include <string.h>

/* The commands of a transaction sent at once, in order. */
static const uint8_t phases[GDOMAIN_BATCH] = {
    WIRE_PHASE_PREPARE_EXPORT, WIRE_PHASE_IMPORT, WIRE_PHASE_COMMIT};

/* The sim backend's ops and the mapping size every lazy node gives each
 * rank, or NULL where windows cannot be predicted. */
static const struct chip_backend_ops *predictor(struct strata_global_domain *g,
                                                uint64_t *map)
{
    const struct chip_backend_ops *ops = chip_backend_find("sim");

    *map = ops ? domain_adopt_mapping(ops, g->window_size, g->n) : 0;
    return *map ? ops : NULL;
}

static void predict_name(const struct chip_backend_ops *ops,
                         struct strata_global_domain *g, uint32_t r, char *out,
                         size_t cap)
{
    struct chip_window_req req =
        gwin_req(gdomain_cluster_id(g->w), g->id, r, g->n, g->window_size);

    ops->host_window_name(&req, out, cap);
}

/* Whether every rank of node i in g->table is what was predicted. */
static bool as_predicted(struct strata_global_domain *g, uint32_t i,
                         const struct chip_backend_ops *ops, uint64_t map)
{
    char want[WIRE_NAME_MAX + 1];

    for (uint32_t r = 0; r < g->n; r++) {
        if (g->members[r].node_worker_id != (uint32_t)g->nodes[i])
            continue;
        predict_name(ops, g, r, want, sizeof(want));
        if (!g->table[r].handle || strcmp(g->table[r].handle, want) != 0 ||
            g->table[r].mapping_size != map)
            return false;
    }
    return true;
}

bool gdomain_learn_lazy(struct strata_global_domain *g)
{
    uint64_t map;
    const struct chip_backend_ops *ops = predictor(g, &map);
    uint32_t lazy = 0;

    for (uint32_t i = 0; i < g->num_nodes; i++) {
        bool l = ops && as_predicted(g, i, ops, map);

        gdhost_node_set_lazy(g->w, g->nodes[i], l);
        lazy += l;
    }
    return lazy > 0 && lazy < g->num_nodes;
}

bool gdomain_batch_ready(struct strata_global_domain *g)
{
    uint64_t map;

    if (g->gather || !predictor(g, &map))
        return false;
    for (uint32_t i = 0; i < g->num_nodes; i++)
        if (!gdhost_node_lazy(g->w, g->nodes[i]) ||
            !gdhost_node_ordered(g->w, g->nodes[i]))
            return false;
    return true;
}

/* The predicted table, in g->table and g->handles. */
static void predict_table(struct strata_global_domain *g,
                          const struct chip_backend_ops *ops, uint64_t map)
{
    for (uint32_t r = 0; r < g->n; r++) {
        struct wire_descriptor *d = &g->table[r];

        predict_name(ops, g, r, g->handles[r], sizeof(g->handles[r]));
        memset(d, 0, sizeof(*d));
        d->version = WIRE_DESCRIPTOR_VERSION;
        d->profile = "sim";
        d->domain_rank = r;
        d->rank_count = g->n;
        d->mapping_size = map;
        d->handle = g->handles[r];
    }
}

/* The three commands, packed back to back for every node under
 * consecutive request ids from *first. */
static strata_err pack(struct strata_global_domain *g, uint64_t *first)
{
    struct wire_domain_cmd c[GDOMAIN_BATCH];

    *first = gdhost_request_ids(GDOMAIN_BATCH);
    for (uint32_t k = 0; k < GDOMAIN_BATCH; k++) {
        gdomain_cmd_init(g, &c[k], phases[k]);
        c[k].request_id = *first + k;
    }
    return gdomain_pack_all(g, NULL, c, GDOMAIN_BATCH);
}

/* The k-th reply frame of node i (as many as it sent), or STRATA_EPROTO. */
static strata_err reply_frame(struct strata_global_domain *g, uint32_t i,
                              uint32_t k, const uint8_t **at, size_t *len)
{
    const uint8_t *p = g->replies + (size_t)i * g->reply_cap;
    size_t left = g->ctls[i].staged_reply_len;

    for (uint32_t j = 0;; j++) {
        struct wire_frame_header h;
        size_t n;

        if (wire_frame_header_unpack(p, left, &h) != STRATA_OK)
            return base_fail(STRATA_EPROTO, "node %d's reply %u of %u: %s",
                             g->nodes[i], k + 1, GDOMAIN_BATCH,
                             strata_errmsg());
        n = WIRE_FRAME_HEADER_SIZE + (size_t)h.body_len;
        if (n > left)
            return base_fail(STRATA_EPROTO, "node %d's reply %u is truncated",
                             g->nodes[i], j + 1);
        if (j == k) {
            *at = p;
            *len = n;
            return STRATA_OK;
        }
        p += n;
        left -= n;
    }
}

/* Every node's reply to phase k, in node order. */
static strata_err check_phase(struct strata_global_domain *g, uint32_t k)
{
    strata_err err = STRATA_OK;

    for (uint32_t i = 0; i < g->num_nodes && !err; i++) {
        const uint8_t *at = NULL;
        size_t len = 0;

        if (g->ctls[i].err)
            continue;
        err = reply_frame(g, i, k, &at, &len);
        if (!err)
            err = gdomain_check_reply_at(g, i, phases[k], at, len);
    }
    return err;
}

/* As phase by phase: a node lost with a reason, then the nodes' answers
 * phase by phase, then a node that only closed its connection. */
static strata_err judge(struct strata_global_domain *g,
                        const struct chip_backend_ops *ops, uint64_t map,
                        bool *again)
{
    strata_err err;

    for (uint32_t i = 0; i < g->num_nodes; i++)
        if (g->ctls[i].err && !gdomain_bare_loss(g, i))
            return base_fail(g->ctls[i].err, "%s", g->ctls[i].msg);
    err = check_phase(g, 0);
    if (err)
        return err;
    for (uint32_t i = 0; i < g->num_nodes; i++) {
        if (g->ctls[i].err || as_predicted(g, i, ops, map))
            continue;
        gdhost_node_set_lazy(g->w, g->nodes[i], false);
        *again = true;
        return base_fail(STRATA_EPROTO,
                         "node %d named its windows otherwise than predicted",
                         g->nodes[i]);
    }
    err = wire_descriptor_table_check(g->table, g->n, "sim", g->window_size);
    for (uint32_t k = 1; k < GDOMAIN_BATCH && !err; k++)
        err = check_phase(g, k);
    for (uint32_t i = 0; i < g->num_nodes && !err; i++)
        if (g->ctls[i].err)
            err = base_fail(g->ctls[i].err, "%s", g->ctls[i].msg);
    return err;
}

strata_err gdomain_batch(struct strata_global_domain *g, strata_orch *o,
                         bool *again)
{
    struct orch_sched *s = gdhost_sched(g->w);
    uint64_t map, first;
    const struct chip_backend_ops *ops = predictor(g, &map);
    strata_err err = STRATA_OK, werr;
    uint32_t posted = 0;

    *again = false;
    /* Before anything is sent (tests: which allocations come here). */
    if (BASE_FAULT("gdomain.batch"))
        return base_fail(STRATA_EIO, "fault point gdomain.batch");
    predict_table(g, ops, map);
    err = pack(g, &first);
    for (uint32_t i = 0; i < g->num_nodes && !err; i++) {
        gdomain_ctl_for(&g->ctls[i], &g->cmds[i], first,
                        g->replies + (size_t)i * g->reply_cap, g->reply_cap);
        g->ctls[i].arg[2] = GDOMAIN_BATCH;
        err = orch_control_post(s, o, g->nodes[i], &g->ctls[i], NULL);
        if (!err) {
            g->ptrs[posted++] = &g->ctls[i];
            g->prepared[i] = true;
        }
    }
    /* The control page, while the nodes work: a node makes it at IMPORT
     * if it is not there yet, before any member of it may map. */
    if (!err)
        err = gdomain_page_open(g);
    werr = orch_control_wait(s, g->ptrs, posted);
    if (err || posted < g->num_nodes)
        return err ? err : werr;
    for (uint32_t i = 0; i < g->num_nodes; i++)
        if (!g->ctls[i].done)
            return werr; /* the wait itself failed */
    return judge(g, ops, map, again);
}
