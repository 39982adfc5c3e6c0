/* What the halo mpi transport asks of an L4's nodes (graph/halo_mpi.h):
 * which MPI rank of which group a node is, and whether it is on another
 * host. Installed into graph when an MPI group is added (graph sits
 * below the worker and never includes its headers). */
#include "base/hostid.h"
#include "graph/halo_mpi.h"
#include "mpigroup.h"

static const struct remote_node *remote_of(const strata_worker *w, int id)
{
    if (!w || id < 0 || (size_t)id >= w->num_nodes)
        return NULL;
    return w->nodes[id].remote;
}

static const void *node_group(const strata_worker *w, int id, int *rank_out)
{
    const struct remote_node *r = remote_of(w, id);

    if (!r || !r->group)
        return NULL;
    *rank_out = (int)((size_t)id - r->group->first);
    return r->group;
}

static bool node_elsewhere(const strata_worker *w, int id)
{
    const struct remote_node *r = remote_of(w, id);
    struct base_host_id me;

    if (!r || !r->host_id.boot[0])
        return false;
    base_host_id(&me);
    return !base_host_id_same(&r->host_id, &me);
}

void mpihalo_install(void)
{
    static const struct halo_node_queries q = {node_group, node_elsewhere};

    halo_mpi_set_queries(&q);
}
