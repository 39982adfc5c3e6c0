/* A forked child's parent-death signal (base/pdeath.h). */
#include "base/pdeath.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

/* How long a child waits to tell a thread's end from its parent's. */
#define SETTLE_STEPS 200
#define SETTLE_STEP_NS 250000L

static pid_t armed_in;  /* the process that armed it: not its children */
static pid_t parent_of; /* that process's parent */
static const uint32_t *shutdown_word;
static void (*when_orphaned)(void);

static void on_term(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;

    (void)uc;
    if (getpid() == armed_in &&
        !__atomic_load_n(shutdown_word, __ATOMIC_SEQ_CST)) {
        pid_t pp = getppid();

        if (pp == parent_of && si->si_pid == parent_of) {
            /* A thread of the parent ended. Either the parent lives on,
             * or it is dying and handed this child to a thread that ends
             * next: look for the latter a moment, before this child
             * takes another frame from a parent that is gone. */
            struct timespec step = {0, SETTLE_STEP_NS};

            for (int i = 0; i < SETTLE_STEPS && pp == parent_of; i++) {
                nanosleep(&step, NULL);
                pp = getppid();
            }
            if (pp == parent_of) {
                errno = saved;
                return;
            }
        }
        if (pp != parent_of && when_orphaned) {
            when_orphaned();
            errno = saved;
            return;
        }
    }
    signal(sig, SIG_DFL);
    raise(sig);
    errno = saved;
}

bool base_pdeath_arm(pid_t parent, const uint32_t *shutdown,
                     void (*orphaned)(void))
{
    struct sigaction sa;

    armed_in = getpid();
    parent_of = parent;
    shutdown_word = shutdown;
    when_orphaned = orphaned;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_term;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGTERM);
    sigprocmask(SIG_UNBLOCK, &sa.sa_mask, NULL);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    /* It may have died before the prctl: then no signal ever comes. */
    return getppid() == parent;
}
