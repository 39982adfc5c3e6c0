/* The examples' own strata-node: start, wait for its port, stop. */
#define _GNU_SOURCE
#include "example_node.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int fail_sys(const char *name, const char *what)
{
    fprintf(stderr, "%s: FAILED: %s: %s\n", name, what, strerror(errno));
    return 1;
}

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

const char *example_env_or(const char *var, const char *fallback)
{
    const char *v = getenv(var);

    return v && v[0] ? v : fallback;
}

/* 32 random bytes as hex, in a new file only its owner may read: the
 * cluster's pre-shared key. */
static int write_secret(const char *name, const char *path)
{
    unsigned char raw[32];
    char hex[65];
    int fd;
    int ok;

    if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
        return fail_sys(name, "getrandom");
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(hex + 2 * i, 3, "%02x", raw[i]);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return fail_sys(name, path);
    ok = write(fd, hex, 64) == 64;
    if (close(fd) != 0 || !ok)
        return fail_sys(name, path);
    return 0;
}

void example_node_forget_files(struct example_node *d, const char *name)
{
    char tmp[128];

    if (!d->dir[0])
        return;
    unlink(d->secret);
    unlink(d->port_file);
    snprintf(tmp, sizeof(tmp), "%s.tmp", d->port_file);
    unlink(tmp);
    if (rmdir(d->dir) != 0)
        fprintf(stderr, "%s: cannot remove %s: %s\n", name, d->dir,
                strerror(errno));
    d->dir[0] = '\0';
}

static int read_port(const char *path)
{
    FILE *f = fopen(path, "re");
    int port = 0;

    if (!f)
        return 0;
    if (fscanf(f, "%d", &port) != 1)
        port = 0;
    fclose(f);
    return port;
}

/* Until the daemon has renamed its port file into place (inotify) or died
 * (pidfd), under the start deadline: events, never a fixed sleep. */
static int wait_for_port(struct example_node *d, const char *name, int ino,
                         int start_deadline_s)
{
    uint64_t deadline = now_ns() + (uint64_t)start_deadline_s * 1000000000u;
    char events[4096];

    for (;;) {
        struct pollfd p[2] = {{ino, POLLIN, 0}, {d->pidfd, POLLIN, 0}};
        uint64_t now = now_ns();

        d->port = read_port(d->port_file);
        if (d->port > 0)
            return 0;
        if (now >= deadline) {
            fprintf(stderr,
                    "%s: FAILED: strata-node reported no port within %d s\n",
                    name, start_deadline_s);
            return 1;
        }
        if (poll(p, 2, (int)((deadline - now) / 1000000) + 1) < 0 &&
            errno != EINTR)
            return fail_sys(name, "poll");
        if (p[1].revents & POLLIN) {
            int status = 0;

            waitpid(d->pid, &status, 0);
            d->pid = 0;
            fprintf(stderr,
                    "%s: FAILED: strata-node exited during start-up "
                    "(status 0x%x); see its messages above\n",
                    name, status);
            return 1;
        }
        while (read(ino, events, sizeof(events)) > 0)
            ;
    }
}

static int spawn(struct example_node *d, const char *name, const char *node_bin,
                 const char *module)
{
    const char *argv[] = {
        node_bin,   "--listen", "127.0.0.1:0", "--secret-file", d->secret,
        "--module", module,     "--port-file", d->port_file,    NULL};
    pid_t parent = getpid();

    fflush(NULL);
    d->pid = fork();
    if (d->pid == 0) {
        /* The daemon must not outlive the example. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(127);
        execv(node_bin, (char *const *)(uintptr_t)argv);
        fprintf(stderr, "%s: cannot run %s: %s\n", name, node_bin,
                strerror(errno));
        _exit(127);
    }
    if (d->pid < 0) {
        d->pid = 0;
        return fail_sys(name, "fork");
    }
    d->pidfd = (int)syscall(SYS_pidfd_open, d->pid, 0);
    return d->pidfd < 0 ? fail_sys(name, "pidfd_open") : 0;
}

int example_node_start(struct example_node *d, const char *name,
                       const char *node_bin, const char *module,
                       int start_deadline_s)
{
    int ino;
    int rc;

    d->pid = 0;
    d->pidfd = -1;
    d->port = 0;
    snprintf(d->dir, sizeof(d->dir), "/tmp/strata-example-XXXXXX");
    if (!mkdtemp(d->dir)) {
        d->dir[0] = '\0';
        return fail_sys(name, "mkdtemp");
    }
    snprintf(d->secret, sizeof(d->secret), "%s/secret", d->dir);
    snprintf(d->port_file, sizeof(d->port_file), "%s/port", d->dir);
    if (write_secret(name, d->secret) != 0)
        return 1;
    /* Watch before starting it, so the rename cannot be missed. */
    ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (ino < 0 || inotify_add_watch(ino, d->dir, IN_MOVED_TO) < 0) {
        rc = fail_sys(name, "inotify");
        if (ino >= 0)
            close(ino);
        return rc;
    }
    rc = spawn(d, name, node_bin, module);
    if (rc == 0)
        rc = wait_for_port(d, name, ino, start_deadline_s);
    close(ino);
    if (rc == 0)
        snprintf(d->endpoint, sizeof(d->endpoint), "127.0.0.1:%d", d->port);
    return rc;
}

int example_node_stop(struct example_node *d, const char *name)
{
    struct pollfd p = {d->pidfd, POLLIN, 0};
    int status = 0;
    int rc = 0;

    if (d->pid > 0) {
        kill(d->pid, SIGTERM);
        if (d->pidfd >= 0 && poll(&p, 1, 10000) == 0) {
            fprintf(stderr, "%s: strata-node ignored SIGTERM; killing it\n",
                    name);
            kill(d->pid, SIGKILL);
            rc = 1;
        }
        if (waitpid(d->pid, &status, 0) == d->pid &&
            (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
            fprintf(stderr, "%s: strata-node ended with status 0x%x\n", name,
                    status);
            rc = 1;
        }
        if (rc == 0)
            printf("%s: strata-node (pid %d) stopped cleanly\n", name,
                   (int)d->pid);
        d->pid = 0;
    }
    if (d->pidfd >= 0)
        close(d->pidfd);
    d->pidfd = -1;
    example_node_forget_files(d, name);
    return rc;
}

static int l4_fail(const char *name, const char *what, strata_err err)
{
    fprintf(stderr, "%s: FAILED: %s: %s (%s): %s\n", name, what,
            strata_errname(err), strata_strerror(err), strata_errmsg());
    return 1;
}

int example_l4_build(struct example_node *d, const char *name, const int *chips,
                     size_t nchips, strata_worker **out)
{
    strata_worker_config c4, c3;
    strata_remote_spec spec;
    strata_worker *w = NULL, *local = NULL;
    strata_err err;
    int id;

    strata_worker_config_init(&c4, 4);
    err = strata_worker_create(&c4, &w);
    if (err != STRATA_OK)
        return l4_fail(name, "create the L4 worker", err);
    *out = w;
    /* Node 0: a forked L3. */
    strata_worker_config_init(&c3, 3);
    c3.chip_ids = chips;
    c3.num_chips = nchips;
    err = strata_worker_create(&c3, &local);
    if (err == STRATA_OK)
        err = strata_worker_add_worker(w, local, &id);
    if (err != STRATA_OK) {
        if (local != NULL && strata_worker_destroy(local) != STRATA_OK)
            fprintf(stderr, "%s: %s\n", name, strata_errmsg());
        return l4_fail(name, "add the forked node", err);
    }
    /* Node 1: the daemon's L3. */
    memset(&spec, 0, sizeof(spec));
    spec.endpoint = d->endpoint;
    spec.secret_file = d->secret;
    spec.chip_ids = chips;
    spec.num_chips = nchips;
    err = strata_worker_add_remote_worker(w, &spec, &id);
    if (err != STRATA_OK)
        return l4_fail(name, "add the remote node", err);
    /* Both sides have read the key (the daemon at start, the client just
     * now): nothing on disk needs it any more. */
    example_node_forget_files(d, name);
    return 0;
}
