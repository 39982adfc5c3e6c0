/* strata-node: the remote node daemon. It loads callable modules, listens,
 * and forks one session process per accepted connection; the session does
 * the TLS handshake and everything after it, so nothing a client sends is
 * ever parsed by this process and one bad client cannot disturb it. */
#define _GNU_SOURCE /* accept4 */
#include "base/err.h"
#include "base/log.h"
#include "wire/endpoint.h"
#include "wire/tls.h"
#include "worker/session.h"

#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_MODULES 32
#define MAX_SESSIONS 256

struct options {
    const char *listen;
    const char *port_file;
    struct wire_tls_cfg tls;
    const char *modules[MAX_MODULES];
    int num_modules;
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: strata-node --listen ADDR:PORT [--module LIB.so ...]\n"
            "                   (--secret-file FILE | --cert C --key K --ca "
            "A | --insecure)\n"
            "                   [--port-file FILE]\n"
            "\n"
            "Runs strata L3 sessions for authenticated parents. Each "
            "connection gets\n"
            "a fresh process hosting the chips and sub workers its parent "
            "asks for.\n"
            "Only callables registered by the --module libraries (and "
            "strata's own)\ncan run.\n"
            "\n"
            "  --listen ADDR:PORT  IPv4, [IPv6] or host name; port 0..65535, "
            "0 picks one\n"
            "  --secret-file FILE  cluster pre-shared key (TLS 1.3 PSK); mode "
            "600\n"
            "  --cert/--key/--ca   mutual TLS with a cluster CA\n"
            "  --insecure          plaintext, refused unless ADDR is "
            "loopback\n"
            "  --port-file FILE    write the bound port to FILE once "
            "listening\n"
            "  --module LIB.so     load callables (strata_module_init)\n"
            "Logs go to stderr (STRATA_LOG=error|warn|info|debug). SIGTERM "
            "stops it.\n");
}

static int parse(int argc, char **argv, struct options *o)
{
    static const struct option longs[] = {
        {"listen", required_argument, NULL, 'l'},
        {"secret-file", required_argument, NULL, 's'},
        {"cert", required_argument, NULL, 'c'},
        {"key", required_argument, NULL, 'k'},
        {"ca", required_argument, NULL, 'a'},
        {"module", required_argument, NULL, 'm'},
        {"port-file", required_argument, NULL, 'p'},
        {"insecure", no_argument, NULL, 'i'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch;

    while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (ch) {
        case 'l':
            o->listen = optarg;
            break;
        case 's':
            o->tls.secret_file = optarg;
            break;
        case 'c':
            o->tls.cert_file = optarg;
            break;
        case 'k':
            o->tls.key_file = optarg;
            break;
        case 'a':
            o->tls.ca_file = optarg;
            break;
        case 'p':
            o->port_file = optarg;
            break;
        case 'i':
            o->tls.insecure = true;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        case 'm':
            if (o->num_modules == MAX_MODULES) {
                fprintf(stderr, "strata-node: too many --module\n");
                return 2;
            }
            o->modules[o->num_modules++] = optarg;
            break;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (!o->listen || optind != argc) {
        usage(stderr);
        return 2;
    }
    return 0;
}

static int open_listener(const struct options *o)
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
    fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 64) != 0) {
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

static pid_t sessions[MAX_SESSIONS];
static int num_sessions;

static void reap(void)
{
    int status;
    pid_t pid;

    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (int i = 0; i < num_sessions; i++) {
            if (sessions[i] == pid) {
                sessions[i] = sessions[--num_sessions];
                break;
            }
        }
        LOG_INFO("session %d ended (status %d)", (int)pid,
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
}

static void describe_peer(const struct sockaddr_storage *ss, socklen_t len,
                          char *buf, size_t cap)
{
    char host[NI_MAXHOST];
    char serv[NI_MAXSERV];

    if (getnameinfo((const struct sockaddr *)ss, len, host, sizeof(host), serv,
                    sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        snprintf(buf, cap, "unknown peer");
    else
        snprintf(buf, cap, "%s:%s", host, serv);
}

static void start_session(int lfd, int sfd, SSL_CTX *ctx)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    char peer[NI_MAXHOST + NI_MAXSERV + 2];
    pid_t pid;
    int fd = accept4(lfd, (struct sockaddr *)&ss, &len, SOCK_CLOEXEC);
    sigset_t none;

    if (fd < 0)
        return; /* the client went away first: nothing to do */
    if (num_sessions == MAX_SESSIONS) {
        LOG_WARN("refusing a connection: %d sessions running", MAX_SESSIONS);
        close(fd);
        return;
    }
    describe_peer(&ss, len, peer, sizeof(peer));
    pid = fork();
    if (pid < 0) {
        LOG_ERROR("fork for %s: %s", peer, strerror(errno));
        close(fd);
        return;
    }
    if (pid == 0) {
        close(lfd);
        close(sfd);
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        /* A session does not outlive its daemon. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        exit(worker_session_main(fd, ctx, peer, NULL));
    }
    close(fd);
    sessions[num_sessions++] = pid;
    LOG_INFO("session %d for %s", (int)pid, peer);
}

static void shut_down(void)
{
    for (int i = 0; i < num_sessions; i++)
        kill(sessions[i], SIGTERM);
    for (int waited = 0; num_sessions > 0 && waited < 50; waited++) {
        reap();
        if (num_sessions > 0)
            poll(NULL, 0, 100); /* shutdown only, never on a dispatch path */
    }
    for (int i = 0; i < num_sessions; i++)
        kill(sessions[i], SIGKILL);
    while (num_sessions > 0 && waitpid(-1, NULL, 0) > 0)
        reap();
}

static int serve(int lfd, SSL_CTX *ctx)
{
    struct signalfd_siginfo si;
    struct pollfd pfd[2];
    sigset_t set;
    int sfd;

    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, NULL);
    sfd = signalfd(-1, &set, SFD_CLOEXEC);
    if (sfd < 0)
        return 1;
    pfd[0].fd = lfd;
    pfd[0].events = POLLIN;
    pfd[1].fd = sfd;
    pfd[1].events = POLLIN;
    for (;;) {
        if (poll(pfd, 2, -1) < 0 && errno != EINTR)
            break;
        if (pfd[1].revents & POLLIN) {
            if (read(sfd, &si, sizeof(si)) != sizeof(si))
                continue;
            if (si.ssi_signo == SIGCHLD) {
                reap();
                continue;
            }
            LOG_INFO("signal %u: shutting down", si.ssi_signo);
            break;
        }
        if (pfd[0].revents & POLLIN)
            start_session(lfd, sfd, ctx);
    }
    shut_down();
    close(sfd);
    return 0;
}

int main(int argc, char **argv)
{
    struct options o;
    SSL_CTX *ctx = NULL;
    int rc = parse(argc, argv, (memset(&o, 0, sizeof(o)), &o));
    int lfd;

    if (rc)
        return rc;
    base_log_set_role("strata-node");
    signal(SIGPIPE, SIG_IGN);
    for (int i = 0; i < o.num_modules; i++) {
        if (strata_load_module(o.modules[i]) != STRATA_OK) {
            LOG_ERROR("%s", strata_errmsg());
            return 1;
        }
    }
    if (wire_tls_ctx_create(&o.tls, true, &ctx) != STRATA_OK) {
        LOG_ERROR("%s", strata_errmsg());
        return 1;
    }
    lfd = open_listener(&o);
    if (lfd < 0 || write_port(lfd, o.port_file) != 0) {
        wire_tls_ctx_free(ctx);
        return 1;
    }
    rc = serve(lfd, ctx);
    close(lfd);
    wire_tls_ctx_free(ctx);
    return rc;
}
