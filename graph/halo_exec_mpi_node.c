/* The node side of the halo mpi transport (layout and design at the top
 * of halo_exec_mpi.c): on an MPI rank, the mailbox of every rank's
 * window, the kernels of its members over it, and the messages to and
 * from the ranks of other nodes. */
#include "base/alloc.h"
#include "base/err.h"
#include "base/fault.h"
#include "base/log.h"
#include "graph/halo_mpi.h"
#include "halo_exec_int.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* The mailbox, kept between calls so that its pages are faulted once. */
static struct {
    pthread_mutex_t mu;
    strata_worker *w;
    strata_buffer *b;
} box = {.mu = PTHREAD_MUTEX_INITIALIZER};

static strata_err mailbox(strata_worker *w, size_t bytes, strata_buffer **out)
{
    strata_err err = STRATA_OK;

    pthread_mutex_lock(&box.mu);
    if (box.b && (box.w != w || strata_buffer_size(box.b) < bytes)) {
        /* A buffer still named by a run stays the worker's until its end. */
        if (box.w == w && strata_buffer_release(box.b) != STRATA_OK)
            base_errmsg_clear();
        box.b = NULL;
    }
    if (!box.b) {
        err = strata_worker_create_buffer(w, bytes, &box.b);
        box.w = err ? NULL : w;
    }
    *out = box.b;
    pthread_mutex_unlock(&box.mu);
    return err;
}

struct node_call {
    const struct halo_plan_hdr *hdr;
    const char *plan;
    uint32_t world;
    size_t stride, data_off, rb;
    bool vjp;
    char *win;
    bool *local; /* world: a member of this node */
    int *mpi;    /* world: the MPI rank of its node */
    struct halo_p2p *ops;
    size_t num_ops, cap_ops;
};

static const struct halo_rank_plan *rank_plan(const struct node_call *c,
                                              uint32_t r)
{
    return halo_plan_rank(c->plan, r);
}

static char *data(const struct node_call *c, uint64_t r, uint64_t row)
{
    return c->win + r * c->stride + c->data_off + row * c->rb;
}

static volatile uint32_t *flag(const struct node_call *c, uint64_t owner,
                               uint64_t sender)
{
    return (volatile uint32_t *)(c->win + owner * c->stride) + sender;
}

static strata_err add_op(struct node_call *c, bool send, uint64_t peer,
                         uint64_t me, char *buf, uint64_t rows, uint32_t need)
{
    struct halo_p2p *op;

    if (rows * c->rb > INT_MAX)
        return base_fail(STRATA_EINVAL,
                         "halo mpi: a message of %llu rows is over 2 GiB "
                         "(lower chunk_bytes)",
                         (unsigned long long)rows);
    if (c->num_ops == c->cap_ops) {
        size_t cap = c->cap_ops ? 2 * c->cap_ops : 64;
        struct halo_p2p *n = base_realloc(c->ops, cap * sizeof(*n));

        if (!n)
            return base_fail(STRATA_ENOMEM, "halo mpi: out of memory");
        c->ops = n;
        c->cap_ops = cap;
    }
    op = &c->ops[c->num_ops++];
    memset(op, 0, sizeof(*op));
    op->peer = c->mpi[peer];
    op->send = send;
    op->tag = (int)(send ? me * c->world + peer : peer * c->world + me);
    op->buf = buf;
    op->len = rows * c->rb;
    /* A send waits for me's count in peer's mirror; a receive bumps
     * peer's count in me's window, with its stamp. */
    op->flag = send ? flag(c, peer, me) : flag(c, me, peer);
    op->need = need;
    if (!send)
        op->stamp =
            (int64_t *)(c->win + me * c->stride + halo_stamp_offset(c->world)) +
            peer;
    return STRATA_OK;
}

/* Forward: each block to or from another node, chunk by chunk. VJP: each
 * ghost block back to its owner, and the cotangents of each peer. */
static strata_err rank_ops(struct node_call *c, uint32_t r)
{
    const struct halo_rank_plan *rp = rank_plan(c, r);
    const struct halo_peer *s = (const void *)(c->plan + rp->send_off);
    const struct halo_peer *v = (const void *)(c->plan + rp->recv_off);
    uint64_t cr = c->hdr->chunk_rows;
    strata_err err = STRATA_OK;

    for (uint64_t i = 0; i < rp->num_send && !err; i++) {
        if (c->local[s[i].peer])
            continue;
        if (c->vjp) {
            err = add_op(c, false, s[i].peer, r,
                         data(c, s[i].peer, s[i].remote_start), s[i].count, 1);
            continue;
        }
        for (uint64_t t = 0; t * cr < s[i].count && !err; t++)
            err = add_op(c, true, s[i].peer, r,
                         data(c, r, s[i].local_start + t * cr),
                         s[i].count - t * cr < cr ? s[i].count - t * cr : cr,
                         (uint32_t)(t + 1));
    }
    for (uint64_t i = 0; i < rp->num_recv && !err; i++) {
        if (c->local[v[i].peer])
            continue;
        if (c->vjp) {
            err = add_op(c, true, v[i].peer, r, data(c, r, v[i].local_start),
                         v[i].count, 1);
            continue;
        }
        for (uint64_t t = 0; t * cr < v[i].count && !err; t++)
            err =
                add_op(c, false, v[i].peer, r,
                       data(c, v[i].peer, v[i].remote_start + t * cr),
                       v[i].count - t * cr < cr ? v[i].count - t * cr : cr, 0);
    }
    return err;
}

/* Checks the task and fills c from it; the member count in *n_out. */
static strata_err parse(const strata_args *args, struct node_call *c,
                        size_t *n_out)
{
    size_t ns = strata_args_num_scalars(args);
    size_t n = ns >= 4 ? (size_t)strata_args_scalar(args, 3) : 0;

    c->hdr = strata_args_tensor_data(args, 0);
    c->plan = (const char *)c->hdr;
    if (n == 0 || n > STRATA_HALO_NODE_MAX_MEMBERS ||
        strata_args_num_tensors(args) < 1 + n || !c->hdr ||
        strata_args_tensor_nbytes(args, 0) < sizeof(*c->hdr) ||
        c->hdr->magic != HALO_PLAN_MAGIC ||
        c->hdr->version != HALO_PLAN_VERSION ||
        strata_args_tensor_nbytes(args, 0) != c->hdr->ro_size ||
        ns != 4 + n + (c->hdr->world + 1) / 2)
        return base_fail(STRATA_EINVAL, "halo mpi node task: not a halo plan "
                                        "and its members");
    c->world = c->hdr->world;
    c->stride = (size_t)strata_args_scalar(args, 0);
    c->vjp = strata_args_scalar(args, 1) != 0;
    c->data_off = (size_t)strata_args_scalar(args, 2);
    c->rb = (size_t)c->hdr->features * strata_dtype_size(c->hdr->dtype);
    if (c->stride < c->data_off || c->stride > SIZE_MAX / c->world)
        return base_fail(STRATA_EINVAL, "halo mpi node task: bad stride");
    c->local = base_calloc(c->world, sizeof(bool));
    c->mpi = base_calloc(c->world, sizeof(int));
    if (!c->local || !c->mpi)
        return base_fail(STRATA_ENOMEM, "halo mpi: out of memory");
    for (uint32_t r = 0; r < c->world; r++)
        c->mpi[r] = (int)(uint32_t)(strata_args_scalar(args, 4 + n + r / 2) >>
                                    (r % 2 ? 32 : 0));
    for (size_t k = 0; k < n; k++) {
        uint32_t r = (uint32_t)strata_args_scalar(args, 4 + k);

        if (r >= c->world)
            return base_fail(STRATA_EINVAL,
                             "halo mpi node task: rank %u of "
                             "%u",
                             r, c->world);
        c->local[r] = true;
    }
    *n_out = n;
    return STRATA_OK;
}

/* Kernel arguments of member k (rank r) from tensor *ti on. */
static strata_err member_args(const strata_args *args, struct node_call *c,
                              strata_buffer *mb, uint32_t r, size_t *ti,
                              strata_args *a)
{
    const struct halo_rank_plan *rp = rank_plan(c, r);
    bool rows = rp->owned_end > rp->owned_begin;
    const size_t mb_shape[1] = {c->stride * c->world};
    strata_err err = STRATA_OK;

    if (*ti + (rows ? 3 : 1) > strata_args_num_tensors(args))
        return base_fail(STRATA_EINVAL,
                         "halo mpi node task: rank %u: its tensors are "
                         "missing",
                         r);
    for (size_t i = 0; i < (rows ? 4u : 2u) && !err; i++) {
        size_t t = i == 0 ? 0 : (*ti)++;
        size_t shape[8] = {0}, nd = strata_args_tensor_ndims(args, t);

        if (nd == 0 || nd > 8 || !strata_args_tensor_buffer(args, t))
            return base_fail(STRATA_EINVAL, "halo mpi node task: tensor %zu",
                             t);
        for (size_t d = 0; d < nd; d++)
            shape[d] = strata_args_tensor_dim(args, t, d);
        err =
            strata_args_add_tensor(a, strata_args_tensor_buffer(args, t),
                                   strata_args_tensor_offset(args, t),
                                   strata_args_tensor_dtype(args, t), nd, shape,
                                   i == 0 || i == 2 ? STRATA_IN : STRATA_OUT);
    }
    if (!err)
        err = strata_args_add_tensor(a, mb, 0, STRATA_U8, 1, mb_shape,
                                     STRATA_NO_DEP);
    const uint64_t sc[5] = {0, c->data_off, r, c->stride, HALO_MPI_MARK};
    for (size_t i = 0; i < 5 && !err; i++)
        err = strata_args_add_scalar(a, sc[i]);
    return err;
}

/* A fresh start: every flag and stamp 0, and the VJP's ghost slots of
 * this node's members (they accumulate). */
static void mailbox_clear(const struct node_call *c)
{
    for (uint32_t r = 0; r < c->world; r++) {
        memset(c->win + (size_t)r * c->stride, 0, c->data_off);
        if (c->vjp && c->local[r])
            memset(data(c, r, 0), 0, rank_plan(c, r)->num_ghosts * c->rb);
    }
}

/* This node's chips will not run (err says why), but its peers on other
 * nodes are already waiting for its rows and sending theirs: it still
 * takes part in the exchange, sending what its mailbox holds, so that
 * they finish at once (their call fails with this node's error) rather
 * than wait out timeout_s and end the MPI job. */
static void stand_in(struct node_call *c)
{
    for (size_t i = 0; i < c->num_ops; i++)
        if (c->ops[i].send)
            __atomic_store_n(c->ops[i].flag, UINT32_MAX, __ATOMIC_RELEASE);
    if (halo_mpi_exchange(c->ops, c->num_ops, c->hdr->timeout_s, 0) !=
        STRATA_OK)
        LOG_WARN("halo mpi node task: %s", strata_errmsg());
}

static strata_err node_run(strata_orch *o, const strata_args *args,
                           struct node_call *c, size_t n, strata_args **a,
                           int *chips)
{
    char why[STRATA_ERRMSG_MAX];
    strata_buffer *mb = NULL;
    size_t ti = 1;
    uint64_t since;
    bool scope;
    strata_err err, end;

    err = halo_mpi_exchange(NULL, 0, 0, 0);
    if (!err)
        err = mailbox(strata_orch_worker(o), c->stride * c->world, &mb);
    if (err)
        return err;
    c->win = strata_buffer_data(mb);
    mailbox_clear(c);
    /* Every member's messages first: the exchange needs them even when a
     * member cannot run. */
    for (size_t k = 0; k < n && !err; k++)
        err = rank_ops(c, (uint32_t)strata_args_scalar(args, 4 + k));
    if (err)
        return err;
    for (size_t k = 0; k < n && !err; k++) {
        uint64_t pair = strata_args_scalar(args, 4 + k);

        chips[k] = (int)(uint32_t)(pair >> 32);
        err = halo_member_chip_check(o, (uint32_t)pair, chips[k]);
        if (!err)
            err = strata_args_create(&a[k]);
        if (!err)
            err = member_args(args, c, mb, (uint32_t)pair, &ti, a[k]);
    }
    if (!err && ti != strata_args_num_tensors(args))
        err = base_fail(STRATA_EINVAL, "halo mpi node task: tensors left over");
    /* A member that died before the call: its group would fail at once,
     * and no flag of its would move; stand in for the node from the
     * start, so that the peers finish and the call fails now. */
    for (size_t k = 0; k < n && !err; k++)
        if (halo_mpi_chip_dead(chips[k]))
            err = base_fail(STRATA_EPEER,
                            "chip %d is dead (it died before this halo call)",
                            chips[k]);
    if (!err && BASE_FAULT("halo.mpinode"))
        err = base_fail(STRATA_EIO, "halo mpi node task: injected failure");
    if (!err)
        err = strata_orch_scope_begin(o);
    scope = !err;
    /* The chips run while this thread moves their rows; one that dies
     * from here on is noticed by the exchange. A group goes in whole or
     * not at all: when it does not, no chip of this node runs. */
    since = halo_mpi_deaths();
    if (!err)
        err = strata_orch_submit_next_level_group(
            o, halo_kernel(c->vjp), (const strata_args *const *)a, chips, n);
    if (err) {
        snprintf(why, sizeof(why), "%s", strata_errmsg());
        stand_in(c);
    } else {
        err = halo_mpi_exchange(c->ops, c->num_ops, c->hdr->timeout_s, since);
        snprintf(why, sizeof(why), "%s", err ? strata_errmsg() : "");
    }
    /* The scope's end waits for the chips; its error must not hide err. */
    end = scope ? strata_orch_scope_end(o) : STRATA_OK;
    if (!err)
        return end;
    if (end)
        LOG_WARN("halo mpi node task: %s", strata_errmsg());
    return base_fail(err, "%s", why);
}

strata_err halo_mpi_node_orch(strata_orch *o, const strata_args *args,
                              void *user)
{
    struct node_call c = {0};
    strata_args **a = NULL;
    int *chips = NULL;
    size_t n = 0;
    strata_err err;

    (void)user;
    err = parse(args, &c, &n);
    if (!err) {
        a = base_calloc(n, sizeof(*a));
        chips = base_calloc(n, sizeof(*chips));
        if (!a || !chips)
            err = base_fail(STRATA_ENOMEM, "halo mpi: out of memory");
    }
    if (!err)
        err = node_run(o, args, &c, n, a, chips);
    for (size_t k = 0; a && k < n; k++)
        strata_args_destroy(a[k]);
    base_free(a);
    base_free(chips);
    base_free(c.local);
    base_free(c.mpi);
    base_free(c.ops);
    return err;
}
