/* The dial-back of an MPI group's ranks, on the connection thread's loop:
 * each accepted connection runs its TLS 1.3 handshake (the group's one-time
 * key; a peer with another key fails it) and then says which rank it is;
 * a rank in range that has not joined yet gets its node's connection
 * (remote_attach), which sends HELLO like any remote node. Also watched
 * here: mpirun's exit (every rank still up is lost) and the start-up
 * deadline (every rank not ready is named in one message). */
#define _GNU_SOURCE /* accept4 */
#include "base/alloc.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "base/proc.h"
#include "mpigroup.h"

#include <errno.h>
#include <netdb.h>
#include <openssl/err.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

struct mpi_pending {
    struct mpi_group *g;
    int fd;
    SSL *ssl;
    struct event *ev;
    bool handshaken;
    char ident[MPI_IDENT_LEN];
    size_t got;
    char peer[80];
    char addr[256]; /* the peer's address, numeric */
    struct mpi_pending *next;
};

static void pending_free(struct mpi_pending *p, bool close_conn)
{
    struct mpi_pending **pp = &p->g->pending;

    while (*pp && *pp != p)
        pp = &(*pp)->next;
    if (*pp)
        *pp = p->next;
    if (p->ev)
        event_free(p->ev);
    if (close_conn) {
        SSL_free(p->ssl);
        close(p->fd);
    }
    base_free(p);
}

static void refuse(struct mpi_pending *p, const char *why)
{
    struct mpi_group *g = p->g;

    snprintf(g->refused, sizeof(g->refused), "refused %s: %s", p->peer, why);
    LOG_WARN("MPI group: %s", g->refused);
    pending_free(p, true);
}

static void step(evutil_socket_t fd, short what, void *arg);

/* Waits for fd to be ready for `what`, until the start-up deadline. */
static void arm(struct mpi_pending *p, short what)
{
    uint64_t now = base_now_ns();
    uint64_t left = p->g->deadline > now ? p->g->deadline - now : 0;
    struct timeval tv = {(time_t)(left / 1000000000u),
                         (suseconds_t)(left % 1000000000u / 1000)};

    if (p->ev)
        event_free(p->ev);
    p->ev = event_new(p->g->base, p->fd, what, step, p);
    if (!p->ev || event_add(p->ev, &tv) != 0)
        refuse(p, "cannot watch the connection");
}

/* 1: done, 0: waiting (armed), -1: refused. */
static int want(struct mpi_pending *p, int rc, const char *what)
{
    char buf[160];

    switch (SSL_get_error(p->ssl, rc)) {
    case SSL_ERROR_WANT_READ:
        arm(p, EV_READ);
        return 0;
    case SSL_ERROR_WANT_WRITE:
        arm(p, EV_WRITE);
        return 0;
    default:
        snprintf(buf, sizeof(buf), "%s (a wrong key?) %s", what,
                 wire_tls_error((char[120]){0}, 120));
        refuse(p, buf);
        return -1;
    }
}

static struct remote_node *claim(struct mpi_pending *p, struct mpi_ident *id)
{
    struct mpi_group *g = p->g;
    struct remote_node *r;

    if (mpi_ident_parse(p->ident, id) != STRATA_OK) {
        refuse(p, strata_errmsg());
        return NULL;
    }
    if (id->size != g->n) {
        refuse(p, "a rank of another launch");
        return NULL;
    }
    r = mpigroup_node(g, id->rank);
    if (r->conn || r->lost) {
        refuse(p, "a rank that has joined already");
        return NULL;
    }
    return r;
}

static void join(struct mpi_pending *p)
{
    struct mpi_group *g = p->g;
    struct mpi_ident id;
    struct base_host_id me;
    struct remote_node *r = claim(p, &id);

    if (!r)
        return;
    snprintf(r->endpoint, 384, "MPI rank %u on %s (pid %u)", (unsigned)r->rank,
             id.host.name, id.pid);
    snprintf(r->host, sizeof(r->host), "%s", p->addr);
    /* Where the rank is, as global domains and the teardown judge it: its
     * boot id and host name, not the address it dialed from. */
    r->host_id = id.host;
    base_host_id(&me);
    if (base_host_id_same(&id.host, &me)) {
        g->local_pids[r->rank] = (pid_t)id.pid;
        if (!base_proc_start_time((pid_t)id.pid, &g->local_starts[r->rank]))
            g->local_starts[r->rank] = 0;
        /* The rank is the node's process, as a session is a strata-node's:
         * strata_worker_node_pid reports it, and a dead rank's exchange
         * windows (named after it) are found by it. */
        r->session_pid = id.pid;
    }
    if (p->ev)
        event_free(p->ev);
    p->ev = NULL;
    if (remote_attach(r, g->base, p->ssl, p->fd, p->peer) != STRATA_OK) {
        remote_lose(r, STRATA_EPEER, strata_errmsg());
        pending_free(p, true);
        return;
    }
    LOG_INFO("MPI group: %s joined from %s", r->endpoint, p->peer);
    pending_free(p, false);
    /* The key has done its work: no one else may use it. */
    if (++g->joined == g->n) {
        mpiaccept_close_listener(g);
        mpilaunch_forget_key(g);
    }
}

static void step(evutil_socket_t fd, short what, void *arg)
{
    struct mpi_pending *p = arg;
    int rc;

    (void)fd;
    if (what & EV_TIMEOUT) {
        refuse(p, "no handshake within the start-up deadline");
        return;
    }
    if (!p->handshaken) {
        ERR_clear_error();
        rc = SSL_do_handshake(p->ssl);
        if (rc != 1) {
            want(p, rc, "TLS handshake failed");
            return;
        }
        p->handshaken = true;
    }
    while (p->got < MPI_IDENT_LEN) {
        ERR_clear_error();
        rc = SSL_read(p->ssl, p->ident + p->got, (int)(MPI_IDENT_LEN - p->got));
        if (rc <= 0) {
            want(p, rc, "no rank identity");
            return;
        }
        p->got += (size_t)rc;
    }
    join(p);
}

static void take(struct mpi_group *g, int fd, const struct sockaddr *sa,
                 socklen_t len)
{
    struct mpi_pending *p = base_calloc(1, sizeof(*p));
    char host[NI_MAXHOST] = "?", port[NI_MAXSERV] = "?";

    if (!p || !(p->ssl = SSL_new(g->ctx)) || SSL_set_fd(p->ssl, fd) != 1) {
        LOG_WARN("MPI group: out of memory for a connection");
        if (p)
            SSL_free(p->ssl);
        base_free(p);
        close(fd);
        return;
    }
    getnameinfo(sa, len, host, sizeof(host), port, sizeof(port),
                NI_NUMERICHOST | NI_NUMERICSERV);
    snprintf(p->peer, sizeof(p->peer), "%s:%s", host, port);
    snprintf(p->addr, sizeof(p->addr), "%s", host);
    p->g = g;
    p->fd = fd;
    SSL_set_accept_state(p->ssl);
    p->next = g->pending;
    g->pending = p;
    step(fd, EV_READ, p);
}

static void on_accept(evutil_socket_t lfd, short what, void *arg)
{
    struct mpi_group *g = arg;

    (void)lfd;
    (void)what;
    /* The last rank's join closes the listener. */
    while (g->lfd >= 0) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        int fd = accept4(g->lfd, (struct sockaddr *)&ss, &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);

        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                LOG_WARN("MPI group: accept: %s", strerror(errno));
            return;
        }
        take(g, fd, (struct sockaddr *)&ss, len);
    }
}

/* Appends to why (len bytes used) the ranks not ready yet, as "; ranks 0,
 * 1 of 2 never reported ready"; how many there were. */
static size_t list_unready(struct mpi_group *g, char *why, size_t cap,
                           size_t len)
{
    size_t late = 0;

    for (size_t i = 0; i < g->n && len < cap; i++) {
        struct remote_node *r = mpigroup_node(g, i);

        if (r->ready || r->closed)
            continue;
        len += (size_t)snprintf(why + len, cap - len, "%s%zu",
                                late++ ? ", " : "; ranks ", i);
    }
    if (late && len < cap)
        snprintf(why + len, cap - len, " of %zu never reported ready", g->n);
    return late;
}

static void on_mpirun_exit(evutil_socket_t fd, short what, void *arg)
{
    struct mpi_group *g = arg;
    char why[STRATA_ERRMSG_MAX / 2];
    size_t len;

    (void)fd;
    (void)what;
    if (!mpilaunch_reap(g))
        return;
    event_del(g->exit_ev);
    if (WIFEXITED(g->status))
        len = (size_t)snprintf(why, sizeof(why),
                               "mpirun (pid %d) exited with status %d",
                               (int)g->mpirun, WEXITSTATUS(g->status));
    else
        len = (size_t)snprintf(why, sizeof(why),
                               "mpirun (pid %d) ended by signal %d",
                               (int)g->mpirun, WTERMSIG(g->status));
    /* At start-up every rank fails with it: init names the first one it
     * meets, so each message names them all, and where to look. */
    if (list_unready(g, why, sizeof(why), len) > 0) {
        len = strlen(why);
        snprintf(why + len, sizeof(why) - len,
                 " (mpirun's output on stderr says why)");
    }

    for (size_t i = 0; i < g->n; i++) {
        struct remote_node *r = mpigroup_node(g, i);

        if (!r->closed)
            remote_lose(r, STRATA_EPEER, why);
    }
}

/* The start-up deadline, a moment before the tree's: every rank not ready
 * yet is named in one message, so init's error lists them all. */
static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
    struct mpi_group *g = arg;
    char why[STRATA_ERRMSG_MAX / 2];
    size_t len = 0, late = 0;

    (void)fd;
    (void)what;
    for (size_t i = 0; i < g->n; i++) {
        struct remote_node *r = mpigroup_node(g, i);

        if (r->ready || r->lost)
            continue;
        len += (size_t)snprintf(why + len,
                                len < sizeof(why) ? sizeof(why) - len : 0,
                                "%s%zu", late++ ? ", " : "", i);
        if (len >= sizeof(why))
            len = sizeof(why) - 1;
    }
    if (late == 0)
        return;
    snprintf(why + len, sizeof(why) - len,
             " of %zu not ready within the start-up deadline", g->n);
    for (size_t i = 0; i < g->n; i++) {
        struct remote_node *r = mpigroup_node(g, i);
        char msg[STRATA_ERRMSG_MAX];

        if (r->ready || r->lost)
            continue;
        snprintf(msg, sizeof(msg), "MPI ranks %.400s", why);
        remote_lose(r, STRATA_ETIMEDOUT, msg);
    }
}

strata_err mpiaccept_watch(struct mpi_group *g)
{
    uint64_t now = base_now_ns();
    uint64_t left = g->deadline > now ? g->deadline - now : 0;
    /* A quarter second, or a tenth of a short budget, before the tree's. */
    uint64_t margin = left / 10 < 250000000u ? left / 10 : 250000000u;
    struct timeval tv = {(time_t)((left - margin) / 1000000000u),
                         (suseconds_t)((left - margin) % 1000000000u / 1000)};

    g->listen_ev =
        event_new(g->base, g->lfd, EV_READ | EV_PERSIST, on_accept, g);
    g->deadline_ev = evtimer_new(g->base, on_deadline, g);
    if (!g->listen_ev || !g->deadline_ev ||
        event_add(g->listen_ev, NULL) != 0 ||
        event_add(g->deadline_ev, &tv) != 0)
        return base_fail(STRATA_ENOMEM, "MPI group: cannot watch the listener");
    return STRATA_OK;
}

strata_err mpiaccept_watch_exit(struct mpi_group *g)
{
    if (g->pidfd < 0)
        return STRATA_OK; /* the ranks' connections tell */
    g->exit_ev = event_new(g->base, g->pidfd, EV_READ, on_mpirun_exit, g);
    if (!g->exit_ev || event_add(g->exit_ev, NULL) != 0)
        return base_fail(STRATA_ENOMEM, "MPI group: cannot watch mpirun");
    return STRATA_OK;
}

void mpiaccept_close_listener(struct mpi_group *g)
{
    if (g->listen_ev)
        event_free(g->listen_ev);
    g->listen_ev = NULL;
    if (g->lfd >= 0)
        close(g->lfd);
    g->lfd = -1;
}

void mpiaccept_unwatch(struct mpi_group *g)
{
    while (g->pending)
        pending_free(g->pending, true);
    if (g->exit_ev)
        event_free(g->exit_ev);
    g->exit_ev = NULL;
    if (g->deadline_ev)
        event_free(g->deadline_ev);
    g->deadline_ev = NULL;
}

const char *mpigroup_refused(const struct mpi_group *g)
{
    return g->refused;
}
