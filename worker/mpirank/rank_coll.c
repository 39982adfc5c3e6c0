/* The collectives a rank's node asks for (worker/groupcoll.h): each runs
 * on a helper thread of its own while the asking thread waits under a
 * deadline (STRATA_MPI_COLLECTIVE_TIMEOUT_S, 30 s by default). A
 * collective that does not end by then means a rank is stuck or gone:
 * this rank ends the whole MPI job (MPI_Abort), and the L4 sees every
 * rank of the group lost (STRATA_EPEER). MPI runs at
 * MPI_THREAD_SERIALIZED: only one thread calls it at a time (the main
 * thread at start and end, the helper in between). */
#include "rank_coll.h"

#include "base/err.h"
#include "base/fault.h"
#include "base/log.h"
#include "worker/groupcoll.h"
#include "worker/session.h"

#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_TIMEOUT_S 30.0

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t th;
    bool started, quit;
    bool dead; /* a job past its deadline: the helper never returns */
    int job;   /* 0: none, 1: posted, 2: done */
    const void *send;
    size_t len;
    void *recv;
    int (*fn)(void *); /* a job of rank_coll_call, else the allgather */
    void *arg;
    int rc;
    double timeout_s;
    int rank;
} C = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* One job at a time, whichever thread asks (a gather, a halo exchange). */
static pthread_mutex_t caller_mu = PTHREAD_MUTEX_INITIALIZER;

static void *helper(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&C.mu);
    for (;;) {
        int rc;

        while (!C.quit && C.job != 1)
            pthread_cond_wait(&C.cv, &C.mu);
        if (C.quit)
            break;
        pthread_mutex_unlock(&C.mu);
        rc = C.fn ? C.fn(C.arg)
                  : MPI_Allgather(C.send, (int)C.len, MPI_BYTE, C.recv,
                                  (int)C.len, MPI_BYTE, MPI_COMM_WORLD);
        pthread_mutex_lock(&C.mu);
        C.rc = rc;
        C.job = 2;
        pthread_cond_broadcast(&C.cv);
    }
    pthread_mutex_unlock(&C.mu);
    return NULL;
}

static strata_err allgather(const void *send, size_t len, void *recv,
                            void *user)
{
    char point[48];
    struct timespec until;
    int rc;

    (void)user;
    if (len == 0 || len > INT_MAX)
        return base_fail(STRATA_EINVAL, "a gather of %zu bytes", len);
    /* Test hook: this rank stops (:stop) instead of taking part. */
    snprintf(point, sizeof(point), "mpirank.gather.%d", C.rank);
    if (BASE_FAULT(point))
        return base_fail(STRATA_EIO, "fault point %s", point);
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += (time_t)C.timeout_s;
    until.tv_nsec += (long)((C.timeout_s - (double)(time_t)C.timeout_s) * 1e9);
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&caller_mu);
    pthread_mutex_lock(&C.mu);
    if (C.dead) {
        pthread_mutex_unlock(&C.mu);
        pthread_mutex_unlock(&caller_mu);
        return base_fail(STRATA_EPEER, "MPI rank %d: the MPI job is ending",
                         C.rank);
    }
    C.fn = NULL;
    C.send = send;
    C.len = len;
    C.recv = recv;
    C.job = 1;
    pthread_cond_broadcast(&C.cv);
    while (C.job != 2)
        if (pthread_cond_timedwait(&C.cv, &C.mu, &until) == ETIMEDOUT)
            break;
    if (C.job != 2) {
        char why[200];

        /* The helper stays in MPI_Allgather: no job runs again, and the
         * session ends with the cause in its GOODBYE; the rank's main
         * thread then ends the MPI job (strata_rank.c). */
        C.dead = true;
        pthread_mutex_unlock(&C.mu);
        pthread_mutex_unlock(&caller_mu);
        LOG_ERROR("rank %d: MPI_Allgather not done within %.1f s: ending the "
                  "MPI job",
                  C.rank, C.timeout_s);
        /* The same words in the reply as in the GOODBYE: whichever
         * reaches the L4 first says why. */
        snprintf(why, sizeof(why),
                 "MPI rank %d: a descriptor gather (MPI_Allgather) was not "
                 "done within %.1f s (a rank is stuck or gone): ending the "
                 "MPI job",
                 C.rank, C.timeout_s);
        worker_session_fail(5, "%s", why);
        return base_fail(STRATA_EPEER, "%s", why);
    }
    C.job = 0;
    rc = C.rc;
    pthread_mutex_unlock(&C.mu);
    pthread_mutex_unlock(&caller_mu);
    if (rc != MPI_SUCCESS)
        return base_fail(STRATA_EPEER, "MPI_Allgather failed (MPI error %d)",
                         rc);
    return STRATA_OK;
}

int rank_coll_call(int (*fn)(void *), void *arg)
{
    int rc;

    if (!C.started)
        return MPI_ERR_OTHER;
    pthread_mutex_lock(&caller_mu);
    pthread_mutex_lock(&C.mu);
    if (C.dead) {
        pthread_mutex_unlock(&C.mu);
        pthread_mutex_unlock(&caller_mu);
        return MPI_ERR_OTHER;
    }
    C.fn = fn;
    C.arg = arg;
    C.job = 1;
    pthread_cond_broadcast(&C.cv);
    while (C.job != 2)
        pthread_cond_wait(&C.cv, &C.mu);
    C.job = 0;
    C.fn = NULL;
    rc = C.rc;
    pthread_mutex_unlock(&C.mu);
    pthread_mutex_unlock(&caller_mu);
    return rc;
}

bool rank_coll_started(void)
{
    return C.started;
}

void rank_coll_start(int rank, int size, int provided)
{
    const char *t = getenv("STRATA_MPI_COLLECTIVE_TIMEOUT_S");
    pthread_condattr_t ca;

    C.rank = rank;
    C.timeout_s = t && atof(t) > 0 ? atof(t) : DEFAULT_TIMEOUT_S;
    if (provided < MPI_THREAD_SERIALIZED) {
        LOG_WARN("rank %d: MPI gives thread level %d: no descriptor gathers "
                 "inside the group",
                 rank, provided);
        return;
    }
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&C.cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&C.th, NULL, helper, NULL) != 0) {
        LOG_WARN("rank %d: no helper thread for collectives", rank);
        return;
    }
    C.started = true;
    worker_group_set_allgather(allgather, rank, size, NULL);
}

void rank_coll_stop(void)
{
    if (!C.started)
        return;
    worker_group_set_allgather(NULL, 0, 0, NULL);
    pthread_mutex_lock(&C.mu);
    C.quit = true;
    pthread_cond_broadcast(&C.cv);
    pthread_mutex_unlock(&C.mu);
    pthread_join(C.th, NULL);
    C.started = false;
}
