/* Global domains (domain/global/): the transaction an L4 runs over its
 * member nodes (gdomain.c) and each node's side of it (gnode.c). They
 * know the process tree only through this header: what they offer
 * worker/ first, then the few things worker/ implements for them
 * (worker/gdhost.c, the gdhost_ functions): the scheduler that posts a
 * command to a node or chip and collects its reply, what the L4 knows
 * of each node, the MPI group a domain may span. */
#ifndef DOMAIN_GLOBAL_H
#define DOMAIN_GLOBAL_H

#include "orch/orch.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct base_host_id;
struct chip_backend_ops;
struct orch_sched;
struct strata_global_domain;
struct strata_global_view;
struct wire_buf;
struct wire_control;
struct wire_descriptor;
struct wire_domain_cmd;

/* Window ids of global domains never meet a local domain's. */
#define GLOBAL_ALLOC_TAG (1ull << 62)

/* ---- what global domains offer worker/ -------------------------------- */

/* Their state in one worker (strata_worker embeds it): set up with
 * gdomain_state_init, freed by gnode_free_all and gdomain_free_all. */
struct gdomain_state {
    /* node side: views by domain id (gv_mu) */
    pthread_mutex_t gv_mu;
    struct strata_global_view *gviews;
    int node_id; /* this node's id in its L4, from COMM_INIT; -1 before */
    /* L4 pid << 32 | its random token, from COMM_INIT: what every node
     * names a global domain's windows after (gnode.c) */
    uint64_t cluster_id;
    int gjournal_fd; /* gjournal.c: the windows this node may make; -1 */
    /* Bytes of windows the live views may make on this host, and their
     * cap (gnode_set_window_cap; 0: none); under gv_mu */
    uint64_t window_bytes;
    uint64_t window_cap;
    /* L4 side */
    struct strata_global_domain *gdomains;
    /* Freed domains whose working memory (command buffers, replies, the
     * table) the next allocation gives back; under the scheduler lock. */
    struct strata_global_domain *shrink;
    uint32_t cluster_token; /* random, nonzero once drawn (gdomain.c) */
};

void gdomain_state_init(struct gdomain_state *s);

/* gnode.c: a node's side of the global domain transaction. Decodes one
 * packed DOMAIN_CMD or COMM_INIT frame and packs the reply (errors
 * included) into reply; fails only when no reply can be built. */
strata_err gnode_handle(strata_worker *w, const void *frame, size_t len,
                        struct wire_buf *reply);
/* Caps the bytes of windows the global domains this node holds may make
 * on its host, all together (strata-node's --max-window-bytes for a
 * session); a PREPARE_EXPORT past it is STRATA_ENOMEM. 0: no cap. */
void gnode_set_window_cap(strata_worker *w, uint64_t bytes);
/* count such frames back to back (0 counts as 1), handled in order, their
 * replies packed one after the other into reply: how a forked node takes
 * a whole transaction the L4 sent at once (gdomain_batch.c). STRATA_EPROTO
 * when the bytes are not exactly count frames. */
strata_err gnode_handle_batch(strata_worker *w, const void *frames, size_t len,
                              uint32_t count, struct wire_buf *reply);
/* Frees every view (at worker destroy). */
void gnode_free_all(strata_worker *w);
/* A window copy on behalf of the L4 (staged data, at most 1 MiB). */
strata_err gnode_window_copy(strata_worker *w, uint64_t domain_id,
                             uint32_t rank, uint64_t offset, void *data,
                             size_t n, bool write);
/* gdomain.c: the L4 side; frees every domain at destroy. */
void gdomain_free_all(strata_worker *w);
/* gjournal.c: unlinks the windows of every live global domain in the
 * journal of dead node pid, not the journal; how many domains. */
size_t gjournal_reclaim(pid_t pid);

/* ---- what worker/ implements for them (worker/gdhost.c) ----------------- */

struct gdomain_state *gdhost_state(const strata_worker *w);
/* The scheduler of w's children: orch/control.h posts commands to them
 * (a node's through its mailbox or its connection, FIFO with its tasks)
 * and collects their replies. */
struct orch_sched *gdhost_sched(const strata_worker *w);
/* The chips' backend (a node), w's level, and its creator's pid. */
const struct chip_backend_ops *gdhost_ops(const strata_worker *w);
int gdhost_level(const strata_worker *w);
pid_t gdhost_creator(const strata_worker *w);
/* A request id no other command of this process has; the first of n
 * consecutive ones. */
uint64_t gdhost_request_id(void);
uint64_t gdhost_request_ids(uint32_t n);
/* A COMMIT or ABORT failed on a node: w refuses runs from now on. */
void gdhost_poison(strata_worker *w);

/* What the L4 knows of node id (0 <= id < gdhost_num_nodes). */
struct gdhost_node {
    const int *chips;
    size_t num_chips;
    const char *profile;
    bool remote;
    const char *host;
    const struct base_host_id *host_id; /* remote: what the node reported */
};

size_t gdhost_num_nodes(const strata_worker *w);
void gdhost_node_info(const strata_worker *w, int id, struct gdhost_node *ni);
/* The pid of the process that runs node id's members' windows on this
 * host: a forked node's, or a remote (loopback) node's session; 0 when
 * unknown. */
int gdhost_node_pid(const strata_worker *w, int id);
/* Whether node id answered COMM_INIT; marks that it did. */
bool gdhost_node_comm_inited(const strata_worker *w, int id);
void gdhost_node_set_comm_inited(strata_worker *w, int id);
/* Whether node id named its members' windows of the last domain it
 * prepared as every node computes them (gnode_lazy.c), so the L4 can
 * predict its descriptors and send it the whole transaction at once;
 * marks that it did (or did not). Any thread. */
bool gdhost_node_lazy(const strata_worker *w, int id);
/* Whether node id runs its domain commands in the order sent (a forked
 * node, or a remote one that granted WIRE_CAP_ORDERED_DOMAIN_CMDS). */
bool gdhost_node_ordered(const strata_worker *w, int id);
void gdhost_node_set_lazy(strata_worker *w, int id, bool lazy);
/* A window copy to or from a remote node, in CONTROL frames (c names
 * the domain, rank and offset). */
strata_err gdhost_remote_copy(strata_worker *w, strata_orch *o, int node,
                              const struct wire_control *c, void *data,
                              size_t n, bool write);

/* MPI groups (worker/mpidomain.c): whether nodes[0..n) are every rank of
 * one group, which then gathers, imports and commits among itself in the
 * PREPARE_EXPORT round; the lock serializes such rounds. */
bool gdhost_whole_group(const strata_worker *w, const int *nodes, uint32_t n);
void gdhost_group_lock(void);
void gdhost_group_unlock(void);
/* A rank's gather: prep_err is how its prepare went; *table gets every
 * rank's descriptor (free with gdhost_group_table_free). */
strata_err gdhost_group_gather(const struct wire_domain_cmd *c,
                               strata_err prep_err,
                               const struct wire_descriptor *descs,
                               size_t ndesc, struct wire_descriptor **table);
void gdhost_group_table_free(struct wire_descriptor *table);

#endif
