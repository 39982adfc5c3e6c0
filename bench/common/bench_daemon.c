/* A strata-node daemon for a benchmark (see bench_daemon.h). */
#define _GNU_SOURCE
#include "bench_daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
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

#define START_DEADLINE_MS 10000

static int write_secret(const char *path)
{
    unsigned char raw[32];
    char hex[65];
    int fd;
    bool ok;

    if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
        return -1;
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(hex + 2 * i, 3, "%02x", raw[i]);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    ok = write(fd, hex, 64) == 64;
    return close(fd) == 0 && ok ? 0 : -1;
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

static long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The port once the daemon has renamed its port file into place, or 0. */
static int wait_port(struct bench_daemon *d, int ino)
{
    long deadline = now_ms() + START_DEADLINE_MS;
    char events[4096];

    for (;;) {
        struct pollfd p[2] = {{ino, POLLIN, 0}, {d->pidfd, POLLIN, 0}};
        int port = read_port(d->port_file);
        long left = deadline - now_ms();

        if (port > 0 || left <= 0)
            return port;
        if (poll(p, 2, (int)left) < 0 && errno != EINTR)
            return 0;
        if (p[1].revents & POLLIN)
            return 0; /* it died */
        while (read(ino, events, sizeof(events)) > 0)
            ;
    }
}

int bench_daemon_start(struct bench_daemon *d,
                       const struct bench_daemon_opts *o)
{
    const char *argv[12];
    pid_t parent = getpid();
    size_t k = 0;
    int ino, port;

    memset(d, 0, sizeof(*d));
    d->pidfd = -1;
    snprintf(d->dir, sizeof(d->dir), "/tmp/%.40s-XXXXXX", o->name);
    if (!mkdtemp(d->dir)) {
        d->dir[0] = '\0';
        fprintf(stderr, "%s: mkdtemp: %s\n", o->name, strerror(errno));
        return -1;
    }
    snprintf(d->secret, sizeof(d->secret), "%s/secret", d->dir);
    snprintf(d->port_file, sizeof(d->port_file), "%s/port", d->dir);
    argv[k++] = o->node_bin;
    argv[k++] = "--listen";
    argv[k++] = "127.0.0.1:0";
    argv[k++] = "--port-file";
    argv[k++] = d->port_file;
    if (o->module) {
        argv[k++] = "--module";
        argv[k++] = o->module;
    }
    if (o->insecure) {
        argv[k++] = "--insecure";
    } else {
        argv[k++] = "--secret-file";
        argv[k++] = d->secret;
    }
    argv[k] = NULL;
    ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if ((!o->insecure && write_secret(d->secret) != 0) || ino < 0 ||
        inotify_add_watch(ino, d->dir, IN_MOVED_TO) < 0) {
        fprintf(stderr, "%s: secret/inotify: %s\n", o->name, strerror(errno));
        if (ino >= 0)
            close(ino);
        bench_daemon_stop(d);
        return -1;
    }
    fflush(NULL);
    d->pid = fork();
    if (d->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(127);
        execv(o->node_bin, (char *const *)(uintptr_t)argv);
        fprintf(stderr, "%s: cannot run %s: %s\n", o->name, o->node_bin,
                strerror(errno));
        _exit(127);
    }
    if (d->pid > 0)
        d->pidfd = (int)syscall(SYS_pidfd_open, d->pid, 0);
    port = d->pid > 0 && d->pidfd >= 0 ? wait_port(d, ino) : 0;
    close(ino);
    if (port <= 0) {
        fprintf(stderr, "%s: strata-node (%s) did not start\n", o->name,
                o->node_bin);
        if (d->pid < 0)
            d->pid = 0;
        bench_daemon_stop(d);
        return -1;
    }
    snprintf(d->endpoint, sizeof(d->endpoint), "127.0.0.1:%d", port);
    return 0;
}

void bench_daemon_forget_files(struct bench_daemon *d)
{
    char tmp[128];

    if (!d->dir[0])
        return;
    unlink(d->secret);
    unlink(d->port_file);
    snprintf(tmp, sizeof(tmp), "%s.tmp", d->port_file);
    unlink(tmp);
    rmdir(d->dir);
    d->dir[0] = '\0';
}

int bench_daemon_stop(struct bench_daemon *d)
{
    struct pollfd p = {d->pidfd, POLLIN, 0};
    int status = 0, rc = 0;

    if (d->pid > 0) {
        kill(d->pid, SIGTERM);
        if (d->pidfd >= 0 && poll(&p, 1, 10000) == 0) {
            kill(d->pid, SIGKILL);
            rc = -1;
        }
        if (waitpid(d->pid, &status, 0) == d->pid &&
            (!WIFEXITED(status) || WEXITSTATUS(status) != 0))
            rc = -1;
        d->pid = 0;
    }
    if (d->pidfd >= 0)
        close(d->pidfd);
    d->pidfd = -1;
    bench_daemon_forget_files(d);
    return rc;
}
