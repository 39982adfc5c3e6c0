/* Global domains, the L4 side: what gdomain.c and gdomain_check.c
 * share. */
#ifndef DOMAIN_GDOMAIN_INT_H
#define DOMAIN_GDOMAIN_INT_H

#include "base/hostid.h"
#include "domain/global.h"
#include "orch/control.h"
#include "wire/msg.h"

#include <strata/domain.h>

/* Every check of spec before a message: members, nodes, chips, buffers,
 * attachments, profiles (STRATA_EINVAL naming what is wrong). */
strata_err gdomain_validate(const strata_worker *w,
                            const strata_global_domain_spec *s);

/* A node's reply: its members' descriptors (a handle is at most
 * WIRE_NAME_MAX bytes, a descriptor packs in under 384) or an error
 * message (at most WIRE_MESSAGE_MAX). */
#define REPLY_BASE (WIRE_MESSAGE_MAX + 1024u)
#define REPLY_PER_MEMBER 384u

struct strata_global_domain {
    uint64_t id;
    uint64_t generation;
    char name[STRATA_DOMAIN_NAME_MAX];
    strata_worker *w;
    strata_run *run; /* the allocating run */
    uint32_t n;
    struct wire_domain_member *members;
    size_t window_size;
    size_t num_buffers;
    struct wire_domain_buffer *buffers;
    char (*names)[STRATA_DOMAIN_NAME_MAX];
    struct wire_attach_row *rows;
    struct wire_attach_entry *entries;
    size_t num_rows;
    bool retain;
    uint32_t num_nodes; /* distinct member nodes */
    int *nodes;
    bool *prepared;
    struct orch_ctl *ctls;
    struct orch_ctl **ptrs;
    struct wire_buf *cmds;
    uint8_t *replies; /* num_nodes x reply_cap */
    uint32_t reply_cap;
    struct wire_descriptor *table;
    char (*handles)[WIRE_NAME_MAX + 1];
    uint64_t *release_req;
    /* request ids of the packed ABORTs */ /* pre-packed: the fence never
                                              allocates */
    bool committed;
    bool fence_passed; /* retained past its run's fence */
    bool released;
    bool freed;
    bool node_died; /* seen by the release's ABORTs */
    bool gather;    /* every rank of one MPI group (mpidomain.c) */
    bool attach;    /* the spec has attachments: PREPARE carries the rows */
    bool exchange;  /* every node's members exchange descriptors */
    /* The control page, made and mapped before PREPARE_EXPORT, unlinked
     * when the domain is freed: the L4 marks a node's death through this
     * mapping, which reaches every member that mapped it however its
     * name fares meanwhile (a node torn down unlinks it). */
    struct chip_domain_ctl *page;
    uint32_t pending;
    struct strata_global_domain *next;
    struct strata_global_domain *shrink_next; /* gdomain_state.shrink */
};

/* Frames of a transaction sent at once: PREPARE_EXPORT, IMPORT, COMMIT. */
#define GDOMAIN_BATCH 3u

/* gdomain.c, for gdomain_batch.c */
void gdomain_cmd_init(const struct strata_global_domain *g,
                      struct wire_domain_cmd *c, uint8_t phase);
void gdomain_ctl_for(struct orch_ctl *c, const struct wire_buf *cmd,
                     uint64_t req, void *reply, uint32_t cap);
/* Packs cs[0..k) back to back into the command buffer of every node in
 * mask (NULL: all): once, then copied. Every node gets the same bytes and
 * request ids (a node's replies are matched on its own link). */
strata_err gdomain_pack_all(struct strata_global_domain *g, const bool *mask,
                            const struct wire_domain_cmd *cs, uint32_t k);
/* Decodes node i's reply frame to phase (PREPARE replies fill the
 * table): the node's error, STRATA_EPROTO for a reply out of turn. */
strata_err gdomain_check_reply_at(struct strata_global_domain *g, uint32_t i,
                                  uint8_t phase, const void *frame, size_t len);
/* Makes (or maps, where a node made it first) the domain's control page
 * and keeps it mapped until the domain is freed. */
strata_err gdomain_page_open(struct strata_global_domain *g);
/* Node i was lost without saying why (closed without GOODBYE). */
bool gdomain_bare_loss(const struct strata_global_domain *g, uint32_t i);
uint64_t gdomain_cluster_id(strata_worker *w);

/* gdomain_batch.c: the whole transaction in one round trip. */
/* After a PREPARE_EXPORT phase: notes, per node, whether it named its
 * windows as predicted (gdhost_node_set_lazy); true when some did and
 * some did not (the domain cannot be imported so). */
bool gdomain_learn_lazy(struct strata_global_domain *g);
/* Whether the batch applies: every node named its last domain's windows
 * as predicted and runs its commands in order, and this is not an MPI
 * group's gathered round. */
bool gdomain_batch_ready(struct strata_global_domain *g);
/* PREPARE_EXPORT, IMPORT with the predicted table and COMMIT, sent to
 * every node at once, and one wait. *again: a node named its windows
 * otherwise than predicted: abort, and make the domain phase by phase. */
strata_err gdomain_batch(struct strata_global_domain *g, strata_orch *o,
                         bool *again);

#endif
