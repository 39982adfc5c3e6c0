/* A strata-node daemon for a benchmark (see bench_daemon.h). */
#define _GNU_SOURCE
#include "bench_daemon.h"
#include "node_port.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define START_WAIT_S 10.0

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
    if ((!o->insecure && devkit_write_secret(d->secret) != 0) || ino < 0 ||
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
    port = d->pid > 0 && d->pidfd >= 0
               ? devkit_wait_port(d->port_file, ino, d->pid, START_WAIT_S)
               : -1;
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
