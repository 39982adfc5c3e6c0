/* strata-rank: one rank of an Open MPI group (docs/mpi.md). mpirun starts
 * it as
 *   strata-rank --connect HOST:PORT --key-file PATH --ranks N
 *               [--module PATH]...
 * It joins MPI, dials back to the L4 that launched the group, proves it
 * holds the launch's one-time key (TLS 1.3, PSK), says which rank it is,
 * and then serves the connection as a strata-node session does: an L3
 * worker with the chips the L4's HELLO asks for. It leaves when the L4
 * says GOODBYE (MPI_Finalize) or is lost (MPI_Abort: the whole job ends). */
#include "base/err.h"
#include "base/fault.h"
#include "base/log.h"
#include "rank_coll.h"
#include "rank_halo.h"
#include "wire/endpoint.h"
#include "wire/tls.h"
#include "worker/mpiident.h"
#include "worker/session.h"

#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define DIAL_TIMEOUT_S 30
#define MAX_MODULES 32

struct opts {
    const char *connect;
    const char *key_file;
    long ranks;
    const char *modules[MAX_MODULES];
    int num_modules;
};

/* LeakSanitizer, when the build has it. */
extern void __lsan_do_leak_check(void) __attribute__((weak));
const char *__lsan_default_suppressions(void);
const char *__asan_default_options(void);

/* What Open MPI allocates and never frees (its libraries and components),
 * and full stacks so that such allocations can be told apart. */
const char *__lsan_default_suppressions(void)
{
    return "leak:libmpi.so\n"
           "leak:libopen-pal.so\n"
           "leak:libopen-rte.so\n"
           "leak:libpmix.so\n"
           "leak:libhwloc.so\n"
           "leak:/openmpi/\n";
}

const char *__asan_default_options(void)
{
    return "fast_unwind_on_malloc=0";
}

/* Under LeakSanitizer: check for leaks now, while MPI is still up. Open MPI
 * unloads its components in MPI_Finalize and leaves what they allocated
 * unreachable, which the check at exit would report (from modules it can
 * no longer name, so no suppression can match them); checked here, every
 * report is one of ours, and the check at exit is skipped. */
static void check_leaks_before_mpi_ends(void)
{
    if (__lsan_do_leak_check)
        __lsan_do_leak_check();
}

/* Prints the usage to f, after "strata-rank: <fmt ...>" when fmt is not
 * NULL; returns the exit status (2 for an error, 0 without). */
static int usage(FILE *f, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int usage(FILE *f, const char *fmt, ...)
{
    va_list ap;

    if (fmt) {
        va_start(ap, fmt);
        fputs("strata-rank: ", f);
        vfprintf(f, fmt, ap);
        fputc('\n', f);
        va_end(ap);
    }
    fprintf(f, "usage: strata-rank --connect HOST:PORT --key-file PATH "
               "--ranks N [--module PATH]...\n"
               "(started by mpirun for strata_worker_add_mpirun_worker_group; "
               "see docs/mpi.md)\n");
    return fmt ? 2 : 0;
}

/* 0: go on; -1 after --help (exit 0); 2 for a usage error. */
static int parse(int argc, char **argv, struct opts *o)
{
    for (int i = 1; i < argc; i += 2) {
        const char *opt = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end;

        if (strcmp(opt, "--help") == 0 || strcmp(opt, "-h") == 0)
            return usage(stdout, NULL) - 1; /* -1: exit 0 */
        if (strcmp(opt, "--connect") != 0 && strcmp(opt, "--key-file") != 0 &&
            strcmp(opt, "--ranks") != 0 && strcmp(opt, "--module") != 0)
            return usage(stderr, "unknown option '%s'", opt);
        if (!v)
            return usage(stderr, "%s lacks its value", opt);
        if (strcmp(opt, "--connect") == 0) {
            o->connect = v;
        } else if (strcmp(opt, "--key-file") == 0) {
            o->key_file = v;
        } else if (strcmp(opt, "--ranks") == 0) {
            errno = 0;
            o->ranks = strtol(v, &end, 10);
            if (errno || end == v || *end || o->ranks < 1 ||
                o->ranks > INT32_MAX)
                return usage(stderr,
                             "--ranks '%s' is not a rank count (1 or more)", v);
        } else if (o->num_modules == MAX_MODULES) {
            return usage(stderr, "more than 32 --module options (at '%s')", v);
        } else {
            o->modules[o->num_modules++] = v;
        }
    }
    if (!o->connect)
        return usage(stderr, "%s is needed", "--connect");
    if (!o->key_file)
        return usage(stderr, "%s is needed", "--key-file");
    if (o->ranks < 1)
        return usage(stderr, "%s is needed", "--ranks");
    return 0;
}

/* A blocking connect, bounded so that an unreachable L4 ends the rank. */
static int dial(const char *endpoint)
{
    char host[256], port[16];
    int p = 0, fd = -1;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    struct timeval tv = {DIAL_TIMEOUT_S, 0};

    if (wire_endpoint_split("--connect", endpoint, host, sizeof(host), 1, &p) !=
        STRATA_OK) {
        fprintf(stderr, "strata-rank: %s\n", strata_errmsg());
        return -1;
    }
    snprintf(port, sizeof(port), "%d", p);
    if (getaddrinfo(host, port, &hints, &res) != 0 || !res) {
        fprintf(stderr, "strata-rank: cannot resolve %s\n", host);
        return -1;
    }
    fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    }
    if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
        fprintf(stderr, "strata-rank: cannot reach %s: %s\n", endpoint,
                strerror(errno));
        if (fd >= 0)
            close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    return fd;
}

#ifdef STRATA_TESTING
/* Test hook (fault point mpirank.key.<rank>): a key of the rank's own,
 * which the L4 must refuse. The file is gone before the handshake. */
static SSL_CTX *wrong_key_ctx(void)
{
    char path[] = "/tmp/strata-rank-wrongkey-XXXXXX";
    struct wire_tls_cfg cfg = {.secret_file = path};
    SSL_CTX *ctx = NULL;
    int fd = mkstemp(path);

    if (fd < 0)
        return NULL;
    if (write(fd, "not-the-launch-key-0123456789\n", 30) == 30 &&
        wire_tls_ctx_create(&cfg, false, &ctx) != STRATA_OK)
        ctx = NULL;
    close(fd);
    unlink(path);
    return ctx;
}
#endif

static SSL_CTX *make_ctx(const char *key_file, int rank)
{
    struct wire_tls_cfg cfg = {.secret_file = key_file};
    SSL_CTX *ctx = NULL;
    char point[48];

    snprintf(point, sizeof(point), "mpirank.key.%d", rank);
#ifdef STRATA_TESTING
    if (BASE_FAULT(point))
        return wrong_key_ctx();
#endif
    if (wire_tls_ctx_create(&cfg, false, &ctx) != STRATA_OK) {
        fprintf(stderr, "strata-rank %d: %s\n", rank, strata_errmsg());
        return NULL;
    }
    return ctx;
}

/* Dials, authenticates and says who this is; the TLS connection or NULL. */
static SSL *join(const struct opts *o, int rank, int size, int *fd_out)
{
    char ident[MPI_IDENT_LEN], tls[160];
    struct mpi_ident id = {.rank = (uint32_t)rank,
                           .size = (uint32_t)size,
                           .pid = (uint32_t)getpid()};
    SSL_CTX *ctx = make_ctx(o->key_file, rank);
    SSL *ssl = NULL;
    int fd = ctx ? dial(o->connect) : -1;
    struct timeval none = {0, 0};

    base_host_id(&id.host);
    if (fd >= 0 && mpi_ident_format(&id, ident) != STRATA_OK) {
        fprintf(stderr, "strata-rank %d: %s\n", rank, strata_errmsg());
        close(fd);
        fd = -1;
    }
    if (fd >= 0 && (ssl = SSL_new(ctx)) && SSL_set_fd(ssl, fd) == 1 &&
        SSL_connect(ssl) == 1 &&
        SSL_write(ssl, ident, (int)sizeof(ident)) == (int)sizeof(ident)) {
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof(none));
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        wire_tls_ctx_free(ctx); /* the connection holds its own reference */
        *fd_out = fd;
        return ssl;
    }
    if (fd >= 0)
        fprintf(stderr, "strata-rank %d: refused by %s: %s\n", rank, o->connect,
                wire_tls_error(tls, sizeof(tls)));
    SSL_free(ssl);
    if (fd >= 0)
        close(fd);
    wire_tls_ctx_free(ctx);
    return NULL;
}

int main(int argc, char **argv)
{
    struct opts o = {0};
    int provided = 0, rank = 0, size = 0, fd = -1, status;
    pid_t launcher;
    char point[48];
    SSL *ssl;

    status = parse(argc, argv, &o);
    if (status != 0)
        return status < 0 ? 0 : status;
    /* A write to an L4 that is gone fails with EPIPE and ends the session
     * through its teardown, rather than killing the rank on the spot. */
    signal(SIGPIPE, SIG_IGN);
    /* Blocked before MPI starts its threads, so that every thread has it
     * blocked and SIGTERM (mpirun ending the job) reaches the session's
     * signalfd: the rank then tears its chips down instead of dying. */
    {
        sigset_t term;

        sigemptyset(&term);
        sigaddset(&term, SIGTERM);
        sigprocmask(SIG_BLOCK, &term, NULL);
    }
    for (int i = 0; i < o.num_modules; i++)
        if (strata_load_module(o.modules[i]) != STRATA_OK) {
            fprintf(stderr, "strata-rank: %s\n", strata_errmsg());
            return 2;
        }
    /* One thread at a time calls MPI: this one at start and end, the
     * collectives' helper in between (rank_coll.c). */
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != o.ranks) {
        fprintf(stderr, "strata-rank: %d ranks, the L4 launched %ld\n", size,
                o.ranks);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    /* Test hook: a rank that never reports ready (STRATA_FAULT with
     * :stop), or fails before it dials. */
    snprintf(point, sizeof(point), "mpirank.dial.%d", rank);
    if (BASE_FAULT(point))
        MPI_Abort(MPI_COMM_WORLD, 3);
#ifdef STRATA_TESTING
    /* Test hook: this rank says it runs on another host (a sim global
     * domain over it must be refused at PREPARE). */
    snprintf(point, sizeof(point), "mpirank.otherhost.%d", rank);
    if (BASE_FAULT(point)) {
        char other[80];

        snprintf(other, sizeof(other),
                 "strata-other-host-%d/00000000-0000-4000-8000-%012d", rank,
                 rank);
        setenv("STRATA_TEST_HOST_ID", other, 1);
    }
#endif
    ssl = join(&o, rank, size, &fd);
    if (!ssl)
        MPI_Abort(MPI_COMM_WORLD, 1);
    rank_coll_start(rank, size, provided);
    rank_halo_start(rank);
    launcher = getppid();
    {
        char why[160];

        /* mpirun's SIGTERM: the job ends (another rank failed, or the
         * job was aborted). */
        snprintf(why, sizeof(why),
                 "MPI rank %d: mpirun is ending the MPI job (another rank "
                 "failed or the job was aborted; mpirun's output says why)",
                 rank);
        worker_session_set_term_reason(why);
        /* Nobody reclaims a rank's names if mpirun kills it mid-teardown. */
        worker_session_set_reclaim_early();
    }
    status = worker_session_main(fd, ssl, o.connect, NULL);
    /* mpirun (or its daemon) gone: MPI_Finalize would wait for it. */
    if (getppid() != launcher)
        _exit(status ? status : 1);
    if (status != 0) {
        /* The L4 is gone: take the whole job down with it. */
        LOG_WARN("rank %d: the L4 is lost: ending the MPI job", rank);
        MPI_Abort(MPI_COMM_WORLD, status);
    }
    rank_halo_stop();
    rank_coll_stop();
    check_leaks_before_mpi_ends();
    MPI_Finalize();
    return 0;
}
