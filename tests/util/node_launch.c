/* Starting a strata-node from a test (see node_launch.h). */
#define _GNU_SOURCE
#include "node_launch.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <setjmp.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

extern char **environ;

/* Our environment without STRATA_LOG and STRATA_FAULT, then the launch's
 * values of both. Built before fork (the test may have threads). */
static char **daemon_env(const struct testutil_node_launch *l, char *log_kv,
                         char *fault_kv, size_t cap)
{
    size_t n = 0, k = 0;
    char **env;

    for (char **e = environ; *e; e++)
        n++;
    env = calloc(n + 3, sizeof(*env));
    if (!env)
        return NULL;
    for (char **e = environ; *e; e++)
        if (strncmp(*e, "STRATA_LOG=", 11) != 0 &&
            strncmp(*e, "STRATA_FAULT=", 13) != 0)
            env[k++] = *e;
    snprintf(log_kv, cap, "STRATA_LOG=%s", l->log_level);
    env[k++] = log_kv;
    if (l->fault) {
        snprintf(fault_kv, cap, "STRATA_FAULT=%s", l->fault);
        env[k++] = fault_kv;
    }
    env[k] = NULL;
    return env;
}

/* True once pid has ended (not reaped: the caller reaps it). */
static bool ended(pid_t pid)
{
    siginfo_t si = {0};

    return waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
           si.si_pid == pid;
}

int testutil_node_launch(const struct testutil_node_launch *l, pid_t *pid)
{
    char log_kv[64], fault_kv[160];
    char **env = daemon_env(l, log_kv, fault_kv, sizeof(fault_kv));
    pid_t parent = getpid();
    int logfd = -1, ino = -1, port = -1;

    *pid = 0;
    if (!env)
        goto fail;
    ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    logfd = open(l->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (ino < 0 || logfd < 0 ||
        inotify_add_watch(ino, l->dir, IN_MOVED_TO | IN_CLOSE_WRITE) < 0)
        goto fail;
    *pid = fork();
    if (*pid == 0) {
        /* Async-signal-safe calls only: the test may have threads. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(127);
        if (dup2(logfd, STDOUT_FILENO) < 0 || dup2(logfd, STDERR_FILENO) < 0)
            _exit(127);
        syscall(SYS_close_range, 3u, ~0u, 0u);
        execve(l->argv[0], (char *const *)(uintptr_t)l->argv, env);
        _exit(127);
    }
    if (*pid < 0) {
        *pid = 0;
        goto fail;
    }
    port = devkit_wait_port(l->port_file, ino, *pid, l->wait_s);
    if (port <= 0 && ended(*pid))
        print_error("%s ended before reporting its port\n", l->argv[0]);
    else if (port <= 0)
        print_error("%s reported no port within %.0f s\n", l->argv[0],
                    l->wait_s);
    goto out;
fail:
    print_error("starting strata-node: %s\n", strerror(errno));
out:
    if (ino >= 0)
        close(ino);
    if (logfd >= 0)
        close(logfd);
    free(env);
    return port > 0 ? port : -1;
}

void testutil_children_of(pid_t pid, pid_t *out, size_t *n, size_t cap)
{
    char path[64];
    struct dirent *e;
    DIR *dir;

    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    dir = opendir(path);
    if (!dir)
        return;
    while ((e = readdir(dir)) != NULL) {
        char file[300];
        FILE *f;
        int child;

        if (e->d_name[0] == '.')
            continue;
        snprintf(file, sizeof(file), "/proc/%d/task/%s/children", (int)pid,
                 e->d_name);
        f = fopen(file, "re");
        if (!f)
            continue;
        while (*n < cap && fscanf(f, "%d", &child) == 1)
            out[(*n)++] = (pid_t)child;
        fclose(f);
    }
    closedir(dir);
}

void testutil_print_file(const char *path, const char *title)
{
    char line[1024];
    FILE *f = fopen(path, "re");

    if (!f)
        return;
    print_error("---- %s ----\n", title);
    while (fgets(line, sizeof(line), f))
        print_error("%s", line);
    print_error("---- end of %s ----\n", title);
    fclose(f);
}
