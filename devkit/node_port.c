/* See node_port.h. */
#define _GNU_SOURCE
#include "node_port.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int devkit_write_secret(const char *path)
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
    int port = -1;

    if (!f)
        return -1;
    if (fscanf(f, "%d", &port) != 1)
        port = -1;
    fclose(f);
    return port;
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* True once pid has ended (not reaped: the caller reaps it). */
static bool ended(pid_t pid)
{
    siginfo_t si = {0};

    return waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
           si.si_pid == pid;
}

int devkit_wait_port(const char *port_file, int ino, pid_t pid, double wait_s)
{
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    double deadline = now_s() + wait_s;
    int port;

    for (;;) {
        struct pollfd p[2] = {{ino, POLLIN, 0}, {pidfd, POLLIN, 0}};
        double left = deadline - now_s();
        char buf[4096];

        port = read_port(port_file);
        if (port > 0 || left <= 0 || ended(pid))
            break;
        if (poll(p, pidfd >= 0 ? 2 : 1,
                 pidfd >= 0 ? (int)(left * 1000) + 1 : 100) < 0 &&
            errno != EINTR)
            break;
        while (read(ino, buf, sizeof(buf)) > 0)
            ;
    }
    if (pidfd >= 0)
        close(pidfd);
    return port > 0 ? port : -1;
}
