/* strata-node: the remote node daemon. It loads callable modules, listens,
 * authenticates each connection itself (the gate, gate.c: TLS handshakes
 * under limits, no process per unauthenticated connection) and forks one
 * session process per authenticated one, which continues on the
 * established TLS connection; nothing a client sends after the handshake
 * is parsed by this process, so one bad parent cannot disturb it. It
 * reaps sessions, and whatever they leave behind: it is the subreaper of
 * their process trees, and removes the /dev/shm names of every process of
 * theirs that it reaps. */
#define _GNU_SOURCE
#include "base/alloc.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/fault.h"
#include "base/log.h"
#include "daemon.h"
#include "wire/endpoint.h"
#include "worker/reclaim.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define RECENT 64     /* dead processes whose names are swept again */
#define RECENT_S 10.0 /* for this long after their death */

struct daemon {
    const struct daemon_options *o;
    int lfd, sfd;
    pid_t self;
    struct gate *gate;
    pid_t *sessions; /* o->lim.max_sessions */
    uint32_t num_sessions;
    /* Slot i of the process count (worker_proc_cap) is session
     * slot_pid[i]'s (0: free); the count is shared with the sessions. */
    pid_t *slot_pid;
    uint32_t *proc_slots;
    struct {
        pid_t pid;
        uint64_t at_ns;
    } recent[RECENT];
    size_t next_recent;
    uint64_t start_ns; /* listening since */
};

static int open_listener(const struct daemon_options *o)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE};
    struct addrinfo *res = NULL;
    char host[256], port[8];
    int fd = -1, one = 1, num = 0;
    int rc;

    if (wire_endpoint_split("--listen", o->listen, host, sizeof(host), 0,
                            &num) != STRATA_OK) {
        LOG_ERROR("%s", strata_errmsg());
        return -1;
    }
    snprintf(port, sizeof(port), "%d", num);
    if (o->tls.insecure && !wire_addr_is_loopback(host)) {
        LOG_ERROR("--insecure is refused on %s: plaintext only on loopback",
                  host);
        return -1;
    }
    rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0) {
        LOG_ERROR("--listen %s: %s", o->listen, gai_strerror(rc));
        return -1;
    }
    fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                0);
    if (fd < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(fd, res->ai_addr, res->ai_addrlen) != 0 ||
        listen(fd, SOMAXCONN) != 0) {
        LOG_ERROR("cannot listen on %s: %s", o->listen, strerror(errno));
        if (fd >= 0)
            close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    return fd;
}

static int write_port(int fd, const char *path)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    char tmp[4096];
    int port;
    FILE *f;

    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
        LOG_ERROR("getsockname: %s", strerror(errno));
        return -1;
    }
    port = ss.ss_family == AF_INET6
               ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
               : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    LOG_INFO("listening on port %d", port);
    if (!path)
        return 0;
    /* Written then renamed: a reader never sees half a number. */
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    f = fopen(tmp, "w");
    if (!f || fprintf(f, "%d\n", port) < 0 || fclose(f) != 0) {
        LOG_ERROR("cannot write the port file %s: %s", tmp, strerror(errno));
        return -1;
    }
    if (rename(tmp, path) != 0) {
        LOG_ERROR("cannot rename %s to %s: %s", tmp, path, strerror(errno));
        return -1;
    }
    return 0;
}

/* A dead session's processes leave the daemon's count. */
static void free_slot(struct daemon *d, pid_t pid)
{
    for (uint32_t i = 0; i < d->o->lim.max_sessions; i++) {
        if (d->slot_pid[i] == pid) {
            __atomic_store_n(&d->proc_slots[i], 0, __ATOMIC_SEQ_CST);
            d->slot_pid[i] = 0;
            return;
        }
    }
}

static bool is_session(struct daemon *d, pid_t pid)
{
    for (uint32_t i = 0; i < d->num_sessions; i++) {
        if (d->sessions[i] == pid) {
            d->sessions[i] = d->sessions[--d->num_sessions];
            free_slot(d, pid);
            return true;
        }
    }
    return false;
}

/* Removes the names of pid and of the processes that died shortly before
 * it: a session's chips die of its death (PR_SET_PDEATHSIG) and may
 * create a window named for it up to their own end. A pid alive again
 * has been reused: it is no longer ours. */
static void sweep(struct daemon *d, pid_t pid)
{
    pid_t pids[RECENT];
    size_t n = 0, removed;
    uint64_t now = base_now_ns();

    d->recent[d->next_recent].pid = pid;
    d->recent[d->next_recent].at_ns = now;
    d->next_recent = (d->next_recent + 1) % RECENT;
    for (size_t i = 0; i < RECENT; i++) {
        pid_t p = d->recent[i].pid;

        if (p <= 0 || (double)(now - d->recent[i].at_ns) / 1e9 > RECENT_S ||
            (p != pid && (kill(p, 0) == 0 || errno != ESRCH))) {
            d->recent[i].pid = 0;
            continue;
        }
        pids[n++] = p;
    }
    removed = worker_reclaim_names(pids, n);
    if (removed)
        LOG_INFO("removed %zu /dev/shm names of dead process %d and its "
                 "session",
                 removed, (int)pid);
}

static void reap(struct daemon *d)
{
    int status;
    pid_t pid;

    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        if (!is_session(d, pid))
            LOG_DEBUG("reaped %d, left behind by a session", (int)pid);
        else if (WIFSIGNALED(status))
            LOG_WARN("session %d killed by signal %d", (int)pid,
                     WTERMSIG(status));
        else
            LOG_INFO("session %d ended (status %d)", (int)pid,
                     WEXITSTATUS(status));
        sweep(d, pid);
    }
}

/* The address the client reached, for messages it reads. */
static void local_name(int fd, char *buf, size_t cap)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    char host[NI_MAXHOST], serv[NI_MAXSERV];

    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0 ||
        getnameinfo((struct sockaddr *)&ss, len, host, sizeof(host), serv,
                    sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        snprintf(buf, cap, "this address");
    else
        snprintf(buf, cap, ss.ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host,
                 serv);
}

static _Noreturn void run_session(struct daemon *d, int fd, SSL *ssl,
                                  const char *peer, uint32_t slot)
{
    struct worker_proc_cap cap = {.slots = d->proc_slots,
                                  .num_slots = d->o->lim.max_sessions,
                                  .slot = slot,
                                  .max_total = d->o->lim.max_procs_total};
    struct worker_session_limits lim = d->o->session;
    sigset_t none;

    /* A test kills a session here (":kill"): authenticated, no frame
     * read or sent yet. */
    if (BASE_FAULT("node.session"))
        _exit(1);
    /* A session does not outlive its daemon. */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != d->self)
        _exit(1);
    close(d->lfd);
    close(d->sfd);
    gate_forget_in_child(d->gate, fd);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    lim.procs = &cap;
    exit(worker_session_main(fd, ssl, peer, &lim));
}

static strata_err admit(void *arg, int fd, SSL *ssl, const char *peer,
                        char *why, size_t cap)
{
    struct daemon *d = arg;
    char where[NI_MAXHOST + NI_MAXSERV + 4];
    uint32_t slot = 0;
    pid_t pid;

    local_name(fd, where, sizeof(where));
    if (d->num_sessions >= d->o->lim.max_sessions) {
        snprintf(why, cap,
                 "strata-node at %s is full: %u sessions (its "
                 "--max-sessions); try again later",
                 where, d->num_sessions);
        return STRATA_EBUSY;
    }
    /* Fewer sessions than slots: one is free. */
    while (d->slot_pid[slot] != 0)
        slot++;
    pid = fork();
    if (pid < 0) {
        snprintf(why, cap, "strata-node at %s cannot start a session: %s",
                 where, strerror(errno));
        LOG_ERROR("fork for %s: %s", peer, strerror(errno));
        return errno == EAGAIN || errno == ENOMEM ? STRATA_EBUSY : STRATA_ESYS;
    }
    if (pid == 0)
        run_session(d, fd, ssl, peer, slot);
    d->sessions[d->num_sessions++] = pid;
    d->slot_pid[slot] = pid;
    LOG_INFO("session %d for %s", (int)pid, peer);
    return STRATA_OK;
}

/* The answer to `strata node ping`. */
static void health(void *arg, struct wire_health_reply *out)
{
    static char version[16];
    struct daemon *d = arg;

    snprintf(version, sizeof(version), "%d.%d.%d", STRATA_VERSION_MAJOR,
             STRATA_VERSION_MINOR, STRATA_VERSION_PATCH);
    out->version = version;
    out->proto_min = WIRE_PROTO_MIN;
    out->proto_max = WIRE_PROTO_MAX;
    out->sessions = d->num_sessions;
    out->max_sessions = d->o->lim.max_sessions;
    out->max_procs = d->o->session.max_procs;
    out->uptime_ms = (base_now_ns() - d->start_ns) / 1000000u;
    out->pid = (uint32_t)d->self;
}

static void shut_down(struct daemon *d)
{
    for (uint32_t i = 0; i < d->num_sessions; i++)
        kill(d->sessions[i], SIGTERM);
    for (int waited = 0; d->num_sessions > 0 && waited < 50; waited++) {
        reap(d);
        if (d->num_sessions > 0)
            poll(NULL, 0, 100); /* shutdown only, never on a dispatch path */
    }
    for (uint32_t i = 0; i < d->num_sessions; i++)
        kill(d->sessions[i], SIGKILL);
    while (d->num_sessions > 0) {
        pid_t pid = waitpid(-1, NULL, 0);

        if (pid < 0)
            break;
        is_session(d, pid);
        sweep(d, pid);
    }
    reap(d);
}

/* Signals whose default action would end the daemon without a word, and
 * that mean nothing to it: logged and ignored. SIGQUIT keeps its core
 * dump; SIGSEGV and the like stay fatal. */
static const int ignored_signals[] = {SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM,
                                      SIGPROF, SIGIO,   SIGPWR,  SIGSTKFLT};

static bool ignored(int sig)
{
    for (size_t i = 0; i < sizeof(ignored_signals) / sizeof(*ignored_signals);
         i++)
        if (ignored_signals[i] == sig)
            return true;
    return sig >= SIGRTMIN && sig <= SIGRTMAX;
}

static void signal_name(int sig, char *out, size_t cap)
{
    const char *abbrev = sigabbrev_np(sig);

    if (abbrev)
        snprintf(out, cap, "%s", abbrev);
    else if (sig >= SIGRTMIN && sig <= SIGRTMAX)
        snprintf(out, cap, "RTMIN+%d", sig - SIGRTMIN);
    else
        snprintf(out, cap, "?");
}

/* True to go on, false on SIGTERM, SIGINT or SIGHUP (a closing terminal
 * too ends the daemon in order, its sessions told). */
static bool on_signal(struct daemon *d)
{
    struct signalfd_siginfo si;
    char name[16];

    while (read(d->sfd, &si, sizeof(si)) == sizeof(si)) {
        int sig = (int)si.ssi_signo;

        if (sig == SIGCHLD) {
            reap(d);
            continue;
        }
        signal_name(sig, name, sizeof(name));
        if (ignored(sig)) {
            LOG_WARN("signal %d (%s) from pid %u: ignored (SIGTERM stops "
                     "the daemon)",
                     sig, name, si.ssi_pid);
            continue;
        }
        LOG_INFO("signal %d (%s): shutting down", sig, name);
        return false;
    }
    return true;
}

static int serve(struct daemon *d)
{
    struct pollfd *pfd = base_calloc(2 + gate_max_fds(d->gate), sizeof(*pfd));
    sigset_t set;
    int n;

    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGCHLD);
    for (size_t i = 0; i < sizeof(ignored_signals) / sizeof(*ignored_signals);
         i++)
        sigaddset(&set, ignored_signals[i]);
    for (int sig = SIGRTMIN; sig <= SIGRTMAX; sig++)
        sigaddset(&set, sig);
    sigprocmask(SIG_BLOCK, &set, NULL);
    d->sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (d->sfd < 0 || !pfd) {
        LOG_ERROR("cannot set up the main loop: %s", strerror(errno));
        base_free(pfd);
        return 1;
    }
    for (;;) {
        /* A negative fd is skipped by poll: a resting listener. */
        pfd[0] = (struct pollfd){.fd = gate_listening(d->gate) ? d->lfd : -1,
                                 .events = POLLIN};
        pfd[1] = (struct pollfd){.fd = d->sfd, .events = POLLIN};
        n = gate_poll_fill(d->gate, pfd, 2);
        if (poll(pfd, (nfds_t)n, gate_timeout_ms(d->gate)) < 0) {
            if (errno != EINTR)
                break;
            for (int i = 0; i < n; i++)
                pfd[i].revents = 0;
        }
        if ((pfd[1].revents & POLLIN) && !on_signal(d))
            break;
        gate_run(d->gate, pfd, 2);
        if (pfd[0].revents & POLLIN)
            gate_accept(d->gate, d->lfd);
    }
    shut_down(d);
    close(d->sfd);
    base_free(pfd);
    return 0;
}

static int start(struct daemon_options *o)
{
    struct daemon d = {.o = o, .lfd = -1, .sfd = -1, .self = getpid()};
    SSL_CTX *ctx = NULL;
    int rc = 1;

    for (int i = 0; i < o->num_modules; i++) {
        if (strata_load_module(o->modules[i]) != STRATA_OK) {
            LOG_ERROR("%s", strata_errmsg());
            return 1;
        }
    }
    if (wire_tls_ctx_create(&o->tls, true, &ctx) != STRATA_OK) {
        LOG_ERROR("%s", strata_errmsg());
        return 1;
    }
    /* Orphans of a session's tree come to us: reaped, their names go. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    d.sessions = base_calloc(o->lim.max_sessions, sizeof(*d.sessions));
    d.slot_pid = base_calloc(o->lim.max_sessions, sizeof(*d.slot_pid));
    d.proc_slots =
        mmap(NULL, o->lim.max_sessions * sizeof(*d.proc_slots),
             PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (d.proc_slots == MAP_FAILED)
        d.proc_slots = NULL;
    d.gate = gate_create(ctx, &o->lim, admit, health, &d);
    if (!d.sessions || !d.slot_pid || !d.proc_slots || !d.gate)
        LOG_ERROR("out of memory for %u sessions", o->lim.max_sessions);
    else if ((d.lfd = open_listener(o)) >= 0 &&
             write_port(d.lfd, o->port_file) == 0) {
        d.start_ns = base_now_ns();
        rc = serve(&d);
    }
    if (d.lfd >= 0)
        close(d.lfd);
    gate_destroy(d.gate);
    base_free(d.sessions);
    base_free(d.slot_pid);
    if (d.proc_slots)
        munmap(d.proc_slots, o->lim.max_sessions * sizeof(*d.proc_slots));
    wire_tls_ctx_free(ctx);
    return rc;
}

int main(int argc, char **argv)
{
    struct daemon_options o;
    int rc = daemon_options_parse(argc, argv, &o);

    if (rc)
        return rc;
    base_log_set_role("strata-node");
    signal(SIGPIPE, SIG_IGN);
    return start(&o);
}
