/* The point-to-point exchange a rank offers its node for the halo mpi
 * transport (graph/halo_mpi.h, graph/halo_exec_mpi.c): it runs on the
 * helper thread that calls MPI (rank_coll.c). Every receive is posted at
 * once; a send is posted as soon as the chip that packs its rows says they
 * are there (its flag in the node's mailbox); a receive that lands bumps
 * the flag its chip waits on, in the order of the messages of its pair.
 * Nothing blocks in MPI: the loop tests the requests and yields when
 * nothing moved. Past the deadline a rank is stuck or gone: this rank
 * ends the MPI job (as a collective past its deadline does), and the L4
 * loses the group with STRATA_EPEER. When the node's chips are killed
 * (its L4 is lost) the exchange gives up at once: the session ends, and
 * the rank ends the job. */
#include "rank_halo.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/fault.h"
#include "base/log.h"
#include "graph/halo_mpi.h"
#include "rank_coll.h"

#include <mpi.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Per op: 0 waiting for its flag (sends), 1 posted, 2 done, 3 signalled. */
enum { WAITING, POSTED, DONE, SIGNALLED };

/* run's answer when the node gave the exchange up: no MPI error code
 * (those are small and positive). */
#define ABANDONED (-1)

struct xjob {
    struct halo_p2p *ops;
    size_t n;
    double timeout_s;
    uint64_t since; /* halo_mpi_deaths() before the chips started */
    bool stood_in;  /* a chip died: every send went out as it was */
    MPI_Request *req;
    int *idx;
    unsigned char *state;
    size_t left;
    int rc;
};

static int my_rank;

static int post_ready_sends(struct xjob *j, bool *moved)
{
    for (size_t i = 0; i < j->n; i++) {
        struct halo_p2p *op = &j->ops[i];
        int rc;

        if (!op->send || j->state[i] != WAITING ||
            __atomic_load_n(op->flag, __ATOMIC_ACQUIRE) < op->need)
            continue;
        rc = MPI_Isend(op->buf, (int)op->len, MPI_BYTE, op->peer, op->tag,
                       MPI_COMM_WORLD, &j->req[i]);
        if (rc != MPI_SUCCESS)
            return rc;
        j->state[i] = POSTED;
        *moved = true;
    }
    return MPI_SUCCESS;
}

/* Receives hand over in the order of their pair's messages: one waits
 * for the one before it on the same flag. */
static void signal_landed(struct xjob *j, bool *moved)
{
    for (size_t i = 0; i < j->n; i++) {
        struct halo_p2p *op = &j->ops[i];

        if (op->send || j->state[i] != DONE)
            continue;
        if (i > 0 && !j->ops[i - 1].send && j->ops[i - 1].flag == op->flag &&
            j->state[i - 1] != SIGNALLED)
            continue;
        if (op->stamp)
            __atomic_store_n(op->stamp, (int64_t)base_now_ns(),
                             __ATOMIC_RELAXED);
        strata_signal_add(op->flag, 1);
        j->state[i] = SIGNALLED;
        j->left--;
        *moved = true;
    }
}

static int test_some(struct xjob *j, bool *moved)
{
    int out = 0;
    int rc = MPI_Testsome((int)j->n, j->req, &out, j->idx, MPI_STATUSES_IGNORE);

    if (rc != MPI_SUCCESS || out == MPI_UNDEFINED)
        return rc;
    for (int k = 0; k < out; k++) {
        j->state[j->idx[k]] = DONE;
        if (j->ops[j->idx[k]].send)
            j->left--;
        *moved = true;
    }
    return MPI_SUCCESS;
}

static void past_deadline(const struct xjob *j)
{
    LOG_ERROR("rank %d: halo exchange not done within %.1f s (%zu of %zu "
              "messages left): ending the MPI job",
              my_rank, j->timeout_s, j->left, j->n);
    fprintf(stderr,
            "strata-rank %d: halo exchange not done within %.1f s: ending "
            "the MPI job\n",
            my_rank, j->timeout_s);
    MPI_Abort(MPI_COMM_WORLD, 6);
    _exit(6);
}

static int run(void *arg)
{
    struct xjob *j = arg;
    uint64_t deadline = base_now_ns() + (uint64_t)(j->timeout_s * 1e9);
    char point[48];
    int rc = MPI_SUCCESS;

    for (size_t i = 0; i < j->n && rc == MPI_SUCCESS; i++) {
        struct halo_p2p *op = &j->ops[i];

        j->req[i] = MPI_REQUEST_NULL;
        if (op->send)
            continue;
        rc = MPI_Irecv(op->buf, (int)op->len, MPI_BYTE, op->peer, op->tag,
                       MPI_COMM_WORLD, &j->req[i]);
        j->state[i] = POSTED;
    }
    /* Test hook: this rank dies in the middle of an exchange. */
    snprintf(point, sizeof(point), "mpirank.halo.%d", my_rank);
    if (BASE_FAULT(point))
        raise(SIGKILL);
    while (rc == MPI_SUCCESS && j->left > 0) {
        bool moved = false;

        rc = post_ready_sends(j, &moved);
        if (rc == MPI_SUCCESS)
            rc = test_some(j, &moved);
        signal_landed(j, &moved);
        if (moved)
            continue;
        if (base_now_ns() >= deadline)
            past_deadline(j);
        /* A chip of this node died: its flags never move. Send what
         * the buffers hold, so that the peers finish (the call fails
         * with the chip's death, at the node's scope end). */
        if (!j->stood_in && halo_mpi_deaths() != j->since) {
            LOG_WARN("rank %d: a chip died during the halo exchange: "
                     "sending its rows as they are",
                     my_rank);
            for (size_t i = 0; i < j->n; i++)
                if (j->ops[i].send)
                    __atomic_store_n(j->ops[i].flag, UINT32_MAX,
                                     __ATOMIC_RELEASE);
            j->stood_in = true;
            continue;
        }
        /* The node's chips are being killed (its L4 is gone, most
         * likely): no flag moves again. Return, so that the session
         * tears the node down (its names in /dev/shm go) before the
         * rank ends the MPI job for its lost L4. */
        if (halo_mpi_abandoned())
            return ABANDONED;
        sched_yield();
    }
    return rc;
}

static strata_err exchange(struct halo_p2p *ops, size_t n, double timeout_s,
                           uint64_t since, void *user)
{
    struct xjob j = {.ops = ops, .n = n, .left = n, .since = since};
    strata_err err = STRATA_OK;
    int rc;

    (void)user;
    if (n == 0)
        return STRATA_OK;
    if (n > (size_t)1 << 30)
        return base_fail(STRATA_EINVAL, "halo exchange of %zu messages", n);
    j.timeout_s = timeout_s > 0 ? timeout_s : 60.0;
    j.req = calloc(n, sizeof(*j.req));
    j.idx = calloc(n, sizeof(*j.idx));
    j.state = calloc(n, 1);
    if (!j.req || !j.idx || !j.state)
        err = base_fail(STRATA_ENOMEM, "halo exchange: out of memory");
    if (!err && (rc = rank_coll_call(run, &j)) == ABANDONED)
        err = base_fail(STRATA_EPEER,
                        "rank %d: halo exchange abandoned (%zu of %zu "
                        "messages left): the node is ending",
                        my_rank, j.left, j.n);
    else if (!err && rc != MPI_SUCCESS)
        err = base_fail(STRATA_EPEER,
                        "rank %d: halo exchange failed (MPI "
                        "error %d)",
                        my_rank, rc);
    free(j.req);
    free(j.idx);
    free(j.state);
    return err;
}

void rank_halo_start(int rank)
{
    my_rank = rank;
    if (rank_coll_started())
        halo_mpi_set_exchange(exchange, NULL);
}

void rank_halo_stop(void)
{
    halo_mpi_set_exchange(NULL, NULL);
}
