/* What global domains (domain/global/, domain/global.h) need of the
 * process tree: the scheduler, the nodes and what the L4 knows of them,
 * MPI groups. Thin by design: the transaction itself is in domain/. */
#include "domain/global.h"
#include "mpidomain.h"
#include "remote.h"
#include "worker_int.h"

#include <string.h>

/* Const in, not out: lookups from const paths read it, under its own
 * lock, as they did when the fields were the worker's. */
struct gdomain_state *gdhost_state(const strata_worker *w)
{
    return (struct gdomain_state *)(uintptr_t)&w->gd;
}

struct orch_sched *gdhost_sched(const strata_worker *w)
{
    return w->sched;
}

const struct chip_backend_ops *gdhost_ops(const strata_worker *w)
{
    return w->ops;
}

int gdhost_level(const strata_worker *w)
{
    return w->level;
}

pid_t gdhost_creator(const strata_worker *w)
{
    return w->creator;
}

uint64_t gdhost_request_id(void)
{
    return worker_request_id();
}

uint64_t gdhost_request_ids(uint32_t n)
{
    return worker_request_ids(n);
}

void gdhost_poison(strata_worker *w)
{
    __atomic_store_n(&w->poisoned, true, __ATOMIC_RELEASE);
}

size_t gdhost_num_nodes(const strata_worker *w)
{
    return w->num_nodes;
}

void gdhost_node_info(const strata_worker *w, int id, struct gdhost_node *ni)
{
    const struct worker_node *nd = &w->nodes[id];

    memset(ni, 0, sizeof(*ni));
    if (nd->local) {
        ni->chips = nd->local->chip_ids;
        ni->num_chips = nd->local->num_chips;
        ni->profile = nd->local->comm_profile;
    } else {
        ni->chips = (const int *)nd->remote->chip_ids;
        ni->num_chips = nd->remote->num_chips;
        ni->profile = nd->remote->comm_profile;
        ni->remote = true;
        ni->host = nd->remote->host;
        ni->host_id = &nd->remote->host_id;
    }
}

int gdhost_node_pid(const strata_worker *w, int id)
{
    const struct worker_node *nd = &w->nodes[id];

    if (nd->remote)
        return (int)nd->remote->session_pid;
    return w->eps ? (int)w->eps[id].pid : 0;
}

bool gdhost_node_comm_inited(const strata_worker *w, int id)
{
    return w->nodes[id].comm_inited;
}

void gdhost_node_set_comm_inited(strata_worker *w, int id)
{
    w->nodes[id].comm_inited = true;
}

bool gdhost_node_ordered(const strata_worker *w, int id)
{
    const struct remote_node *r = w->nodes[id].remote;

    /* A forked node takes its commands from its mailbox, in order. */
    return !r || __atomic_load_n(&r->ordered_cmds, __ATOMIC_ACQUIRE);
}

bool gdhost_node_lazy(const strata_worker *w, int id)
{
    return __atomic_load_n(&w->nodes[id].lazy_names, __ATOMIC_RELAXED);
}

void gdhost_node_set_lazy(strata_worker *w, int id, bool lazy)
{
    __atomic_store_n(&w->nodes[id].lazy_names, lazy, __ATOMIC_RELAXED);
}

strata_err gdhost_remote_copy(strata_worker *w, strata_orch *o, int node,
                              const struct wire_control *c, void *data,
                              size_t n, bool write)
{
    return worker_remote_copy(w, o, node, c, data, n, write);
}

bool gdhost_whole_group(const strata_worker *w, const int *nodes, uint32_t n)
{
    return mpidomain_whole_group(w, nodes, n);
}

void gdhost_group_lock(void)
{
    mpidomain_lock();
}

void gdhost_group_unlock(void)
{
    mpidomain_unlock();
}

strata_err gdhost_group_gather(const struct wire_domain_cmd *c,
                               strata_err prep_err,
                               const struct wire_descriptor *descs,
                               size_t ndesc, struct wire_descriptor **table)
{
    return mpidomain_gather(c, prep_err, descs, ndesc, table);
}

void gdhost_group_table_free(struct wire_descriptor *table)
{
    mpidomain_table_free(table);
}
