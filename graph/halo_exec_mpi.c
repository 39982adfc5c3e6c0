/* The halo mpi transport (docs/halo.md, "Transports"): a global handle
 * whose members are ranks of one Open MPI group moves the rows between
 * nodes as MPI messages between the ranks' node processes, not through
 * shared windows.
 *
 * Each call, the L4 submits "strata.halo.mpinode" to every member node as
 * one group. On its node, the task keeps a mailbox, a host buffer of the
 * node that its chips map, holding one window per rank of the whole world
 * in the layout of a domain window (flags, stamps, data): the real ones of
 * its own members and a mirror of every other rank's. The chips run the
 * unchanged kernels over the mailbox (halo_mpi_kernel_windows); a chip
 * handing rows to a rank of another node bumps a flag in that rank's
 * mirror, and the node process, which holds MPI, sends the rows as soon
 * as the flag says they are there, receives its members' ghost rows into
 * the senders' mirrors and bumps the flags the chips wait on
 * (halo_mpi_exchange, run by strata-rank on its MPI thread). Chips of
 * one node read each other's windows in place; interior rows are computed
 * while the messages are in flight, exactly as over windows.
 *
 * A node task's arguments: t0 the plan; per member k its stats slot and,
 * when it owns rows, its input and output rows (as halo_exec_global.c);
 * s0 the window stride, s1 1 for the VJP, s2 the data offset, s3 the
 * member count n, s4.. one per member: chip << 32 | rank, then the MPI
 * rank of every halo rank, two to a scalar (low half first).
 */
#include "base/alloc.h"
#include "base/err.h"
#include "base/fault.h"
#include "base/log.h"
#include "graph/halo_mpi.h"
#include "halo_kernel.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static strata_callable mpinode_callable;
static strata_err mpinode_err = STRATA_ESTATE;

__attribute__((constructor)) static void register_mpinode(void)
{
    mpinode_err = strata_register_orch(HALO_MPI_CALLABLE, halo_mpi_node_orch,
                                       &mpinode_callable);
}

/* ---- the hooks the layers above install (graph/halo_mpi.h) ---- */

static halo_exchange_fn xchg_fn;
static void *xchg_user;
static pthread_mutex_t xchg_mu = PTHREAD_MUTEX_INITIALIZER;
static const struct halo_node_queries *queries;

static bool abandoned;

void halo_mpi_abandon(void)
{
    __atomic_store_n(&abandoned, true, __ATOMIC_RELEASE);
}

bool halo_mpi_abandoned(void)
{
    return __atomic_load_n(&abandoned, __ATOMIC_ACQUIRE);
}

static uint64_t deaths;
/* Dead chips by id, for ids below DEAD_BITS; an id past them counts as
 * dead once any chip past them died (the rare large id: no false
 * "alive"). */
#define DEAD_BITS 1024
static uint64_t dead_bits[DEAD_BITS / 64];
static bool dead_past;

void halo_mpi_child_died(int chip)
{
    if (chip >= DEAD_BITS)
        __atomic_store_n(&dead_past, true, __ATOMIC_RELEASE);
    else if (chip >= 0)
        __atomic_fetch_or(&dead_bits[chip / 64], 1ull << (chip % 64),
                          __ATOMIC_RELEASE);
    __atomic_fetch_add(&deaths, 1, __ATOMIC_RELEASE);
}

bool halo_mpi_chip_dead(int chip)
{
    if (chip < 0)
        return false;
    if (chip >= DEAD_BITS)
        return __atomic_load_n(&dead_past, __ATOMIC_ACQUIRE);
    return __atomic_load_n(&dead_bits[chip / 64], __ATOMIC_ACQUIRE) &
           (1ull << (chip % 64));
}

uint64_t halo_mpi_deaths(void)
{
    return __atomic_load_n(&deaths, __ATOMIC_ACQUIRE);
}

void halo_mpi_set_exchange(halo_exchange_fn fn, void *user)
{
    pthread_mutex_lock(&xchg_mu);
    xchg_fn = fn;
    xchg_user = user;
    pthread_mutex_unlock(&xchg_mu);
}

strata_err halo_mpi_exchange(struct halo_p2p *ops, size_t n, double timeout_s,
                             uint64_t since)
{
    strata_err err;

    pthread_mutex_lock(&xchg_mu);
    if (!xchg_fn)
        err = base_fail(STRATA_ENOTSUP,
                        "this node is not a rank of an MPI group (or its MPI "
                        "gives no thread support): no mpi exchange");
    else
        err = xchg_fn(ops, n, timeout_s, since, xchg_user);
    pthread_mutex_unlock(&xchg_mu);
    return err;
}

void halo_mpi_set_queries(const struct halo_node_queries *q)
{
    __atomic_store_n(&queries, q, __ATOMIC_RELEASE);
}

static const void *node_group(const strata_worker *w, int id, int *rank_out)
{
    const struct halo_node_queries *q =
        __atomic_load_n(&queries, __ATOMIC_ACQUIRE);

    return q ? q->group(w, id, rank_out) : NULL;
}

static bool node_elsewhere(const strata_worker *w, int id)
{
    const struct halo_node_queries *q =
        __atomic_load_n(&queries, __ATOMIC_ACQUIRE);

    return q && q->elsewhere(w, id);
}

static size_t map_scalars(uint32_t world)
{
    return ((size_t)world + 1) / 2;
}

/* ---- the L4 side ---- */

strata_err halo_mpi_check(const strata_worker *w, const strata_halo_spec *s)
{
    const void *group = NULL;
    size_t most = 0;
    strata_err err;

    if (s->transport != STRATA_HALO_TRANSPORT_MPI)
        return base_fail(STRATA_EINVAL, "halo spec: unknown transport %d",
                         (int)s->transport);
    if (!s->members || s->num_members == 0)
        return base_fail(STRATA_EINVAL,
                         "halo spec: the mpi transport needs members on the "
                         "ranks of an MPI group (a global handle); the chips "
                         "of one worker share windows");
    err = halo_global_check(w, s);
    if (err)
        return err;
    for (size_t i = 0; i < s->num_members; i++) {
        int node = s->members[i].node_worker_id, rank = 0;
        const void *g = node_group(w, node, &rank);
        size_t same = 0;

        if (!g || (group && g != group))
            return base_fail(STRATA_EINVAL,
                             "halo spec: the mpi transport needs every "
                             "member on a rank of one MPI group "
                             "(strata_worker_add_mpirun_worker_group), and "
                             "node %d of members[%zu] is %s",
                             node, i,
                             g ? "a rank of another group" : "not an MPI rank");
        group = g;
        for (size_t j = 0; j < s->num_members; j++)
            same += s->members[j].node_worker_id == node;
        most = same > most ? same : most;
    }
    /* MPI tags sender * world + receiver stay under 32767, the least
     * MPI_TAG_UB a library may give. */
    if (4 + most + map_scalars((uint32_t)s->num_members) > STRATA_MAX_SCALARS ||
        s->num_members * s->num_members > 32767)
        return base_fail(STRATA_EINVAL,
                         "halo spec: the mpi transport takes at most 181 "
                         "members and %d scalars per node task (%zu members, "
                         "%zu on one node)",
                         STRATA_MAX_SCALARS, s->num_members, most);
    return STRATA_OK;
}

bool halo_mpi_auto(const strata_halo *h)
{
    strata_halo_spec s = h->spec;
    bool away = false;

    if (!h->groups || h->spec.transport != STRATA_HALO_TRANSPORT_DEFAULT)
        return false;
    for (uint32_t r = 0; r < h->world && !away; r++)
        away = node_elsewhere(h->w, h->nodes[r]);
    if (!away)
        return false;
    s.members = h->members;
    s.num_members = h->world;
    s.transport = STRATA_HALO_TRANSPORT_MPI;
    if (halo_mpi_check(h->w, &s) == STRATA_OK)
        return true;
    base_errmsg_clear(); /* the windows' own error will say why */
    return false;
}

/* The node task of the window path, then each rank's MPI rank, two per
 * scalar. */
static strata_err node_args(const strata_halo *h,
                            const struct halo_node_group *g, size_t stride,
                            bool vjp, strata_buffer *in, strata_buffer *out,
                            strata_args *a)
{
    strata_err err = halo_node_args(h, g, stride, vjp, in, out, a);
    uint64_t pair = 0;

    for (uint32_t r = 0; r < h->world && !err; r++) {
        int mr = 0;

        if (!node_group(h->w, h->nodes[r], &mr))
            return base_fail(STRATA_EINVAL,
                             "halo: node %d is no longer an MPI rank",
                             h->nodes[r]);
        pair |= (uint64_t)(uint32_t)mr << (r % 2 ? 32 : 0);
        if (r % 2 || r + 1 == h->world) {
            err = strata_args_add_scalar(a, pair);
            pair = 0;
        }
    }
    return err;
}

strata_err halo_mpi_run(strata_orch *o, strata_halo *h, bool vjp,
                        strata_buffer *in, strata_buffer *out, size_t window)
{
    /* One call at a time per L4: every rank then sees the messages of
     * one call only, and a tag names its pair of ranks. */
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    /* The larger of the forward's and the VJP's windows, so that a node
     * keeps one mailbox for both (check_sizes bounded them). */
    uint64_t rows = h->max_pack > h->max_ghosts ? h->max_pack : h->max_ghosts;
    size_t need = halo_data_offset(h->world) + (size_t)rows * h->row_bytes;
    size_t stride = ((need > window ? need : window) + HALO_ALIGN - 1) /
                    HALO_ALIGN * HALO_ALIGN;
    strata_args **a = base_calloc(h->num_groups, sizeof(*a));
    strata_err err = a ? mpinode_err : STRATA_ENOMEM;
    strata_err end;

    if (err) {
        base_free(a);
        return base_fail(err, "halo: %s",
                         err == STRATA_ENOMEM ? "out of memory"
                                              : "the mpi node callable is not "
                                                "registered");
    }
    for (size_t k = 0; k < h->num_groups && !err; k++) {
        err = strata_args_create(&a[k]);
        if (!err)
            err = node_args(h, &h->groups[k], stride, vjp, in, out, a[k]);
    }
    pthread_mutex_lock(&mu);
    if (!err)
        err = strata_orch_scope_begin(o);
    if (!err) {
        err = strata_orch_submit_next_level_group(
            o, mpinode_callable, (const strata_args *const *)a, h->group_nodes,
            h->num_groups);
        end = strata_orch_scope_end(o);
        if (!err)
            err = end;
    }
    pthread_mutex_unlock(&mu);
    for (size_t k = 0; k < h->num_groups; k++)
        strata_args_destroy(a[k]);
    base_free(a);
    return err;
}

/* ---- the chip side ---- */

strata_err halo_mpi_kernel_windows(const strata_args *args, size_t nt,
                                   struct rank_ctx *c)
{
    size_t stride = (size_t)strata_args_scalar(args, 3);

    if (strata_args_scalar(args, 4) != HALO_MPI_MARK ||
        c->rank >= c->hdr->world || stride < c->data_off ||
        stride > SIZE_MAX / c->hdr->world ||
        strata_args_tensor_nbytes(args, nt) < stride * c->hdr->world)
        return base_fail(STRATA_EINVAL,
                         "halo kernel: rank %u: not an mpi mailbox", c->rank);
    c->win_stride = stride;
    c->win = strata_args_tensor_data(args, nt);
#ifdef STRATA_TESTING
    /* Test hook: the chip of halo rank r dies as its kernel starts
     * (STRATA_FAULT=halo.mpichip.<r>:1:kill). */
    {
        char point[40];

        snprintf(point, sizeof(point), "halo.mpichip.%u", c->rank);
        (void)BASE_FAULT(point);
    }
#endif
    return STRATA_OK;
}
