/* The launch of an MPI group and its end: a one-time key in a mode-700
 * folder (the ranks get its path, never the key), a listener the ranks
 * dial back to, and mpirun in a process group of its own. At the end the
 * ranks have their GOODBYE; mpirun is given time to see them leave, then
 * SIGTERM (it ends its ranks itself, stopped ones included), then SIGKILL
 * of its process group; it is always reaped. */
#define _GNU_SOURCE /* posix_spawn_file_actions_addclosefrom_np */

#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "base/proc.h"
#include "mpigroup.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__GLIBC__) &&                                                      \
    (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
#define MPI_CLOSEFROM 1
#endif

#define KEY_BYTES 32
#define LEAVE_GRACE_S 10.0 /* ranks tear their chips down, then finalize */
#define ABORT_GRACE_S 3.0  /* mpirun ends a job that lost a rank itself */
#define TERM_GRACE_S 5.0

static strata_err write_key(struct mpi_group *g)
{
    const char *dir = g->key_dir ? g->key_dir : getenv("TMPDIR");
    unsigned char raw[KEY_BYTES];
    char hex[2 * KEY_BYTES + 2];
    int fd;
    ssize_t wr;

    if (!dir || !dir[0])
        dir = "/tmp";
    if (snprintf(g->dir_path, sizeof(g->dir_path), "%s/strata-mpi-%d-XXXXXX",
                 dir, (int)getpid()) >= (int)sizeof(g->dir_path) ||
        !mkdtemp(g->dir_path)) {
        g->dir_path[0] = '\0';
        return base_fail_errno(
            errno, "MPI group: cannot make a key folder in %s", dir);
    }
    snprintf(g->key_path, sizeof(g->key_path), "%s/key", g->dir_path);
    snprintf(g->tag, sizeof(g->tag), "%s", g->dir_path);
    if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
        return base_fail_errno(errno, "MPI group: cannot draw a key");
    for (size_t i = 0; i < KEY_BYTES; i++)
        snprintf(hex + 2 * i, 3, "%02x", raw[i]);
    hex[2 * KEY_BYTES] = '\n';
    fd = open(g->key_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return base_fail_errno(errno, "MPI group: cannot create %s",
                               g->key_path);
    wr = write(fd, hex, 2 * KEY_BYTES + 1);
    close(fd);
    explicit_bzero(raw, sizeof(raw));
    explicit_bzero(hex, sizeof(hex));
    if (wr != 2 * KEY_BYTES + 1)
        return base_fail_errno(errno, "MPI group: cannot write %s",
                               g->key_path);
    return STRATA_OK;
}

void mpilaunch_forget_key(struct mpi_group *g)
{
    if (!g->dir_path[0])
        return;
    if (unlink(g->key_path) != 0 && errno != ENOENT)
        LOG_WARN("MPI group: cannot remove %s: %s", g->key_path,
                 strerror(errno));
    if (rmdir(g->dir_path) != 0 && errno != ENOENT)
        LOG_WARN("MPI group: cannot remove %s: %s", g->dir_path,
                 strerror(errno));
    g->dir_path[0] = '\0';
}

static strata_err dial_text(struct mpi_group *g, const struct sockaddr *sa,
                            socklen_t len)
{
    char host[NI_MAXHOST], port[NI_MAXSERV];
    int rc = getnameinfo(sa, len, host, sizeof(host), port, sizeof(port),
                         NI_NUMERICHOST | NI_NUMERICSERV);

    if (rc != 0)
        return base_fail(STRATA_ESYS, "MPI group: listener address: %s",
                         gai_strerror(rc));
    snprintf(g->dial, sizeof(g->dial),
             sa->sa_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host, port);
    return STRATA_OK;
}

static strata_err bind_listener(struct mpi_group *g)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE};
    struct addrinfo *res = NULL;
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    char port[16];
    int one = 1, rc;

    snprintf(port, sizeof(port), "%d", g->callback_port);
    rc = getaddrinfo(g->callback_host, port, &hints, &res);
    if (rc != 0 || !res)
        return base_fail(STRATA_EINVAL,
                         "MPI group: cannot resolve callback host %s: %s",
                         g->callback_host, rc ? gai_strerror(rc) : "none");
    g->lfd =
        socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (g->lfd >= 0)
        setsockopt(g->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (g->lfd < 0 || bind(g->lfd, res->ai_addr, res->ai_addrlen) != 0 ||
        listen(g->lfd, 128) != 0 ||
        getsockname(g->lfd, (struct sockaddr *)&ss, &len) != 0) {
        int e = errno;

        freeaddrinfo(res);
        return base_fail_errno(e, "MPI group: cannot listen on %s:%d",
                               g->callback_host, g->callback_port);
    }
    freeaddrinfo(res);
    return dial_text(g, (struct sockaddr *)&ss, len);
}

/* mpirun [args] -np N [--hostfile F | --host H] prog --connect A
 * --key-file K --ranks N [--module M]... */
static char **build_argv(struct mpi_group *g, char *np)
{
    static char o_np[] = "-np", o_hostfile[] = "--hostfile",
                o_host[] = "--host", o_connect[] = "--connect",
                o_key[] = "--key-file", o_ranks[] = "--ranks",
                o_module[] = "--module";
    char **argv =
        calloc(g->num_mpirun_args + 2 * g->num_modules + 16, sizeof(char *));
    size_t k = 0;

    if (!argv)
        return NULL;
    argv[k++] = g->mpirun_path;
    for (size_t i = 0; i < g->num_mpirun_args; i++)
        argv[k++] = g->mpirun_args[i];
    argv[k++] = o_np;
    argv[k++] = np;
    if (g->hostfile) {
        argv[k++] = o_hostfile;
        argv[k++] = g->hostfile;
    } else if (g->hosts) {
        argv[k++] = o_host;
        argv[k++] = g->hosts;
    }
    argv[k++] = g->rank_program;
    argv[k++] = o_connect;
    argv[k++] = g->dial;
    argv[k++] = o_key;
    argv[k++] = g->key_path;
    argv[k++] = o_ranks;
    argv[k++] = np;
    for (size_t i = 0; i < g->num_modules; i++) {
        argv[k++] = o_module;
        argv[k++] = g->modules[i];
    }
    return argv;
}

static strata_err spawn_mpirun(struct mpi_group *g)
{
    posix_spawnattr_t attr;
    posix_spawn_file_actions_t fa;
    sigset_t none, dfl;
    char np[24];
    char **argv, **env;
    size_t added = 0;
    int rc;

    snprintf(np, sizeof(np), "%zu", g->n);
    argv = build_argv(g, np);
    if (!argv)
        return base_fail(STRATA_ENOMEM, "out of memory for mpirun's arguments");
    sigemptyset(&none);
    sigemptyset(&dfl);
    sigaddset(&dfl, SIGPIPE);
    sigaddset(&dfl, SIGTERM);
    sigaddset(&dfl, SIGINT);
    posix_spawnattr_init(&attr);
    /* A group of its own: the caller's terminal signals do not reach it,
     * and the teardown can end it as a whole. */
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &dfl);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP |
                                        POSIX_SPAWN_SETSIGMASK |
                                        POSIX_SPAWN_SETSIGDEF);
    posix_spawn_file_actions_init(&fa);
    /* mpirun forwards its stdin to rank 0: give it nothing to forward. */
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
#ifdef MPI_CLOSEFROM
    /* mpirun and its ranks outlive no pipe or socket of the caller's. */
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
#endif
    fflush(NULL);
    env = mpitmp_env(g, &added);
    rc = env ? posix_spawnp(&g->mpirun, g->mpirun_path, &fa, &attr, argv, env)
             : ENOMEM;
    mpitmp_env_free(env, added);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    free(argv);
    if (rc != 0) {
        g->mpirun = 0;
        return base_fail_errno(rc, "MPI group: cannot start %s",
                               g->mpirun_path);
    }
#ifdef SYS_pidfd_open
    g->pidfd = (int)syscall(SYS_pidfd_open, g->mpirun, 0);
#endif
    LOG_INFO("MPI group: mpirun pid %d, %zu ranks dial %s", (int)g->mpirun,
             g->n, g->dial);
    return STRATA_OK;
}

strata_err mpilaunch_start(struct mpi_group *g, struct event_base *base,
                           uint64_t deadline)
{
    struct wire_tls_cfg tls = {.secret_file = g->key_path};
    strata_err err;

    g->base = base;
    g->deadline = deadline;
    mpitmp_sweep(g);
    err = write_key(g);
    if (!err)
        err = mpitmp_make(g);
    if (!err)
        err = wire_tls_ctx_create(&tls, true, &g->ctx);
    if (!err)
        err = bind_listener(g);
    if (!err)
        err = mpiaccept_watch(g);
    if (!err)
        err = spawn_mpirun(g);
    if (!err)
        err = mpiaccept_watch_exit(g);
    return err;
}

bool mpilaunch_reap(struct mpi_group *g)
{
    pid_t p;

    if (g->mpirun <= 0 || g->reaped)
        return true;
    do
        p = waitpid(g->mpirun, &g->status, WNOHANG);
    while (p < 0 && errno == EINTR);
    if (p == g->mpirun || (p < 0 && errno == ECHILD))
        g->reaped = true;
    return g->reaped;
}

static bool wait_mpirun(struct mpi_group *g, double seconds)
{
    uint64_t deadline = base_deadline_after(seconds);

    while (!mpilaunch_reap(g)) {
        int ms = base_deadline_poll_ms(deadline);
        struct pollfd pfd = {g->pidfd, POLLIN, 0};

        if (ms == 0)
            return false;
        if (g->pidfd < 0 || ms < 0 || ms > 20)
            ms = g->pidfd < 0 ? 20 : ms;
        if (poll(&pfd, g->pidfd >= 0, ms) < 0 && errno != EINTR)
            return false;
    }
    return true;
}

static bool all_joined(struct mpi_group *g)
{
    for (size_t i = 0; i < g->n; i++)
        if (!mpigroup_node(g, i)->ready)
            return false;
    return true;
}

/* True when pid runs a program whose command line names this launch's
 * key folder (a rank, or one of its chips), and is no zombie. */
static bool of_launch(const struct mpi_group *g, pid_t pid)
{
    char path[64], buf[4096];
    ssize_t n;
    int fd;

    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return false; /* a zombie's command line is empty */
    buf[n] = '\0';
    for (ssize_t i = 0; i < n; i += (ssize_t)strlen(buf + i) + 1)
        if (strstr(buf + i, g->tag))
            return true;
    return false;
}

/* Rank i's process has not ended yet: it runs, or it is exiting, which
 * takes a while for a process with a large address space (a sanitizer's
 * shadow memory) and shows an empty command line meanwhile, so the start
 * time recorded at join names it rather than the command line. */
static bool still_ends(const struct mpi_group *g, size_t i)
{
    unsigned long long start;

    if (g->local_starts[i] == 0)
        return of_launch(g, g->local_pids[i]);
    return base_proc_start_time(g->local_pids[i], &start) &&
           start == g->local_starts[i];
}

/* mpirun is gone: a rank on this host that outlived it (mpirun died
 * before it could end it) would wait in MPI forever. */
static void kill_orphans(struct mpi_group *g)
{
    uint64_t deadline = base_deadline_after(TERM_GRACE_S);
    size_t left;

    for (size_t i = 0; g->tag[0] && i < g->n; i++) {
        pid_t pid = g->local_pids[i];

        if (pid > 0 && of_launch(g, pid)) {
            LOG_WARN("MPI group: rank %zu (pid %d) outlived mpirun: SIGKILL", i,
                     (int)pid);
            kill(pid, SIGKILL);
        } else if (pid > 0 && !still_ends(g, i)) {
            g->local_pids[i] = 0;
        }
    }
    /* Their names can be reclaimed once they are gone or zombies (init
     * reaps them, or never does). */
    do {
        left = 0;
        for (size_t i = 0; i < g->n; i++)
            left += g->local_pids[i] > 0 && still_ends(g, i);
    } while (left > 0 && base_deadline_poll_ms(deadline) != 0 &&
             usleep(10000) == 0);
}

/* Every rank came up and none was lost: each has its GOODBYE now. */
static bool all_leaving(struct mpi_group *g)
{
    for (size_t i = 0; i < g->n; i++) {
        const struct remote_node *r = mpigroup_node(g, i);

        if (!r->ready || r->lost)
            return false;
    }
    return true;
}

static bool grace_ok(const struct mpi_group *g)
{
    return WIFEXITED(g->status) && WEXITSTATUS(g->status) == 0;
}

void mpilaunch_stop(struct mpi_group *g)
{
    mpiaccept_unwatch(g);
    mpiaccept_close_listener(g);
    if (g->mpirun > 0 && !g->reaped) {
        /* A group that never came up all the way has ranks that will not
         * leave by themselves; one that lost a rank is being aborted by
         * mpirun (a signal now would cut its abort short), unless the rank
         * hangs. */
        double grace = all_leaving(g)  ? LEAVE_GRACE_S
                       : all_joined(g) ? ABORT_GRACE_S
                                       : 0.0;

        if (!wait_mpirun(g, grace)) {
            LOG_WARN("MPI group: ending mpirun (pid %d)", (int)g->mpirun);
            kill(g->mpirun, SIGTERM);
            if (!wait_mpirun(g, TERM_GRACE_S)) {
                LOG_WARN("MPI group: mpirun ignores SIGTERM: SIGKILL");
                kill(-g->mpirun, SIGKILL);
                kill(g->mpirun, SIGKILL);
                while (waitpid(g->mpirun, &g->status, 0) < 0 && errno == EINTR)
                    ;
                g->reaped = true;
            }
        }
    }
    if (g->mpirun > 0 && g->reaped && grace_ok(g))
        LOG_INFO("MPI group: mpirun (pid %d) ended", (int)g->mpirun);
    else if (g->mpirun > 0 && g->reaped)
        LOG_WARN("MPI group: mpirun (pid %d) ended with wait status %#x "
                 "(its output says why)",
                 (int)g->mpirun, (unsigned)g->status);
    if (g->pidfd >= 0)
        close(g->pidfd);
    g->pidfd = -1;
    mpilaunch_forget_key(g);
    if (g->mpirun > 0 && g->reaped)
        kill_orphans(g);
    /* mpirun removed what it made there, unless it was killed. */
    if (g->mpirun <= 0 || g->reaped)
        mpitmp_remove(g);
    /* mpirun has reaped its ranks here: the /dev/shm names of one that
     * was killed (its buffers, its chips') have no owner left. */
    if (g->mpirun > 0 && g->reaped)
        worker_reclaim_stale_segments();
    g->mpirun = 0;
}
