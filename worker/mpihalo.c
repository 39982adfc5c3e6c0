/* The point-to-point exchange an MPI group's rank offers its node (the
 * halo mpi transport, graph/halo_exec_mpi.c), and which MPI rank an L4's
 * node is (worker/groupcoll.h). */
#include "base/err.h"
#include "base/hostid.h"
#include "mpigroup.h"
#include "worker/groupcoll.h"

#include <pthread.h>

static worker_exchange_fn xchg_fn;
static void *xchg_user;
static pthread_mutex_t xchg_mu = PTHREAD_MUTEX_INITIALIZER;

void worker_group_set_exchange(worker_exchange_fn fn, void *user)
{
    pthread_mutex_lock(&xchg_mu);
    xchg_fn = fn;
    xchg_user = user;
    pthread_mutex_unlock(&xchg_mu);
}

strata_err worker_group_exchange(struct worker_p2p *ops, size_t n,
                                 double timeout_s)
{
    strata_err err;

    pthread_mutex_lock(&xchg_mu);
    if (!xchg_fn)
        err = base_fail(STRATA_ENOTSUP,
                        "this node is not a rank of an MPI group (or its MPI "
                        "gives no thread support): no mpi exchange");
    else
        err = xchg_fn(ops, n, timeout_s, xchg_user);
    pthread_mutex_unlock(&xchg_mu);
    return err;
}

const void *worker_node_mpi_group(const strata_worker *w, int id, int *rank_out)
{
    const struct remote_node *r;

    if (!w || id < 0 || (size_t)id >= w->num_nodes)
        return NULL;
    r = w->nodes[id].remote;
    if (!r || !r->group)
        return NULL;
    *rank_out = (int)((size_t)id - r->group->first);
    return r->group;
}

bool worker_node_elsewhere(const strata_worker *w, int id)
{
    const struct remote_node *r;
    struct base_host_id me;

    if (!w || id < 0 || (size_t)id >= w->num_nodes)
        return false;
    r = w->nodes[id].remote;
    if (!r || !r->host_id.boot[0])
        return false;
    base_host_id(&me);
    return !base_host_id_same(&r->host_id, &me);
}
