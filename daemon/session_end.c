/* Why a session ends on SIGTERM. strata-node's sessions end on SIGTERM
 * when the daemon stops; a strata-rank's when mpirun ends the MPI job,
 * or when the rank itself gives up on a collective past its deadline
 * (worker_session_fail). The GOODBYE says which, so that the L4 reports
 * the cause rather than a lost connection. */
#include "session_end.h"

#include "base/log.h"
#include "worker/reclaim.h"
#include "worker/session.h"

#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>

#define REASON_MAX 480

static char term_msg[REASON_MAX] = "strata-node is shutting down";
static char fail_msg[REASON_MAX];
static int fail_status; /* set (release) once fail_msg is written */
static int failing;     /* the first worker_session_fail claims it */

void worker_session_set_term_reason(const char *msg)
{
    snprintf(term_msg, sizeof(term_msg), "%s", msg);
}

static bool reclaim_early;

void worker_session_set_reclaim_early(void)
{
    reclaim_early = true;
}

void session_end_reclaim(void)
{
    pid_t me = getpid();

    if (reclaim_early && worker_reclaim_names(&me, 1) > 0)
        LOG_INFO("removed this process's /dev/shm names before the teardown");
}

void worker_session_fail(int status, const char *fmt, ...)
{
    va_list ap;

    if (__atomic_exchange_n(&failing, 1, __ATOMIC_ACQ_REL))
        return;
    va_start(ap, fmt);
    vsnprintf(fail_msg, sizeof(fail_msg), fmt, ap);
    va_end(ap);
    __atomic_store_n(&fail_status, status > 0 ? status : 1, __ATOMIC_RELEASE);
    /* The session reads SIGTERM on its signalfd (every thread blocks it):
     * the loop's thread ends the session as for any SIGTERM. */
    kill(getpid(), SIGTERM);
}

const char *session_end_reason(int *status)
{
    int st = __atomic_load_n(&fail_status, __ATOMIC_ACQUIRE);

    *status = st;
    return st ? fail_msg : term_msg;
}
