/* Kicks: a thread that posts frames to remote nodes under the scheduler
 * lock sends them itself once it has let the lock go, instead of waking
 * each node's connection thread through its eventfd (orch_endpoint.kick).
 * On a busy machine that wake-up was one of four hand-offs between
 * threads in a remote round trip (bench/remote_dispatch --busy).
 *
 * The kick cannot run under the scheduler lock: the connection thread
 * takes that lock (finishing a task) while it holds the connection's, the
 * lock a kick takes to send. So posts inside a scope only note their
 * endpoint here, in this thread, and the scope's end kicks them. Scopes:
 * submits, control posts and the end of an orch fn (its fence). A post
 * outside any (the scheduler thread, a connection thread finishing a
 * task that releases others) rings the eventfd. */
#include "orch_int.h"

#define KICKS_MAX 8 /* endpoints one scope kicks; past that, eventfds */

static __thread struct {
    const struct orch_sched *s;
    unsigned depth;
    unsigned n;
    struct orch_endpoint *ep[KICKS_MAX];
} kicks;

void orch_kicks_begin(const struct orch_sched *s)
{
    if (kicks.depth++ == 0) {
        kicks.s = s;
        kicks.n = 0;
    }
}

bool orch_kick_later(const struct orch_sched *s, struct orch_endpoint *ep)
{
    if (!ep->kick || kicks.depth == 0 || kicks.s != s)
        return false;
    for (unsigned i = 0; i < kicks.n; i++)
        if (kicks.ep[i] == ep)
            return true;
    if (kicks.n == KICKS_MAX)
        return false;
    kicks.ep[kicks.n++] = ep;
    return true;
}

void orch_kicks_end(const struct orch_sched *s)
{
    (void)s;
    if (--kicks.depth != 0)
        return;
    /* A kick may run a loss's bookkeeping, never user code: no scope
     * opens inside one. */
    for (unsigned i = 0; i < kicks.n; i++)
        kicks.ep[i]->kick(kicks.ep[i]->kick_arg);
    kicks.n = 0;
    kicks.s = NULL;
}
