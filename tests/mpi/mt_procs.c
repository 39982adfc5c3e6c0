/* The processes and files of an MPI group as the tests see them from
 * outside (mt_procs.h): /proc and /dev/shm, nothing of strata's. */
#include "mt_procs.h"

#include "testutil.h"
#include "worker/reclaim.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* /proc/<pid>/<what> into buf, NUL-terminated: its length, -1 if none. */
static long proc_read(pid_t pid, const char *what, char *buf, size_t cap)
{
    char path[64];
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, what);
    f = fopen(path, "r");
    if (!f)
        return -1;
    n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return (long)n;
}

/* argv[0] of pid ends in strata-rank. */
static bool mt_runs_rank_program(pid_t pid)
{
    char buf[512];
    size_t n;

    if (proc_read(pid, "cmdline", buf, sizeof(buf)) < 0)
        return false;
    n = strlen(buf);
    return n >= 11 && strcmp(buf + n - 11, "strata-rank") == 0;
}

static pid_t mt_parent_of(pid_t pid)
{
    char buf[512], *p;
    int ppid = 0;

    if (proc_read(pid, "stat", buf, sizeof(buf)) < 0)
        return 0;
    p = strrchr(buf, ')');
    if (p && sscanf(p + 1, " %*c %d", &ppid) != 1)
        ppid = 0;
    return (pid_t)ppid;
}

/* True when pid's command line names the key folder of L4 l4: its
 * mpirun, ranks and their chips (forks of the ranks). */
static bool mt_of_launch(pid_t pid, pid_t l4)
{
    char buf[8192], want[64];
    long n = proc_read(pid, "cmdline", buf, sizeof(buf));

    snprintf(want, sizeof(want), "/strata-mpi-%d-", (int)l4);
    for (long i = 0; i < n; i += (long)strlen(buf + i) + 1)
        if (strstr(buf + i, want))
            return true;
    return false;
}

/* Processes of l4's launch that still run. */
size_t mt_launch_procs(pid_t l4)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    size_t found = 0;

    while (d && (e = readdir(d)) != NULL) {
        pid_t pid = (pid_t)atoi(e->d_name);

        if (pid > 0 && mt_of_launch(pid, l4) && mt_running(pid))
            found++;
    }
    if (d)
        closedir(d);
    return found;
}

/* A rank of L4 l4 (not one of its chips, which are forks of it). */
static bool mt_is_rank(pid_t pid, pid_t l4, int *rank_out)
{
    char buf[8192];
    long n;

    if (!mt_runs_rank_program(pid) || mt_runs_rank_program(mt_parent_of(pid)) ||
        !mt_of_launch(pid, l4))
        return false;
    n = proc_read(pid, "environ", buf, sizeof(buf));
    if (n < 0)
        return false;
    *rank_out = -1;
    for (long i = 0; i < n; i += (long)strlen(buf + i) + 1)
        if (strncmp(buf + i, "OMPI_COMM_WORLD_RANK=", 21) == 0)
            *rank_out = atoi(buf + i + 21);
    return true;
}

/* The pids of L4 l4's ranks now, by rank (0: none). */
size_t mt_rank_pids_of(pid_t l4, pid_t pids[MT_MAX_RANKS])
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    size_t found = 0;

    memset(pids, 0, sizeof(pid_t) * MT_MAX_RANKS);
    while (d && (e = readdir(d)) != NULL) {
        int rank;
        pid_t pid = (pid_t)atoi(e->d_name);

        if (pid > 0 && mt_is_rank(pid, l4, &rank) && rank >= 0 &&
            rank < MT_MAX_RANKS) {
            pids[rank] = pid;
            found++;
        }
    }
    if (d)
        closedir(d);
    return found;
}

size_t mt_rank_pids(pid_t pids[MT_MAX_RANKS])
{
    return mt_rank_pids_of(getpid(), pids);
}

bool mt_shm_of(pid_t pid)
{
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    char needle[32];
    bool found = false;

    snprintf(needle, sizeof(needle), "-%d-", (int)pid);
    while (d && (e = readdir(d)) != NULL)
        if (strncmp(e->d_name, "strata", 6) == 0 && strstr(e->d_name, needle))
            found = true;
    if (d)
        closedir(d);
    return found;
}

/* Entries of $TMPDIR (or /tmp) that start with prefix; with inner, only
 * folders holding an entry that starts with inner. */
static size_t tmp_entries(const char *prefix, const char *inner)
{
    const char *tmp = getenv("TMPDIR");
    DIR *d = opendir(tmp && tmp[0] ? tmp : "/tmp");
    struct dirent *e;
    size_t found = 0;

    while (d && (e = readdir(d)) != NULL) {
        char path[512];
        DIR *sub;
        struct dirent *f;
        bool has = !inner;

        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", tmp && tmp[0] ? tmp : "/tmp",
                 e->d_name);
        sub = inner ? opendir(path) : NULL;
        while (sub && (f = readdir(sub)) != NULL)
            if (strncmp(f->d_name, inner, strlen(inner)) == 0)
                has = true;
        if (sub)
            closedir(sub);
        found += has;
    }
    if (d)
        closedir(d);
    return found;
}

bool mt_key_dir_of(pid_t l4)
{
    char key[48];

    snprintf(key, sizeof(key), "strata-mpi-%d-", (int)l4);
    return tmp_entries(key, NULL) > 0;
}

bool mt_ompi_dir_of(pid_t l4)
{
    char ompi[48];

    snprintf(ompi, sizeof(ompi), "strata-ompi-%d-", (int)l4);
    return tmp_entries(ompi, NULL) > 0;
}

size_t mt_ompi_dirs_in_use(pid_t l4)
{
    char ompi[48];

    snprintf(ompi, sizeof(ompi), "strata-ompi-%d-", (int)l4);
    return tmp_entries(ompi, "ompi.");
}

bool mt_key_dir_left(void)
{
    return mt_key_dir_of(getpid());
}

char mt_state(pid_t pid)
{
    char buf[512], *p, state = 0;

    if (proc_read(pid, "stat", buf, sizeof(buf)) < 0)
        return 0;
    p = strrchr(buf, ')');
    if (!p || sscanf(p + 1, " %c", &state) != 1)
        return 0;
    return state;
}

bool mt_running(pid_t pid)
{
    char state = mt_state(pid);

    return state != 0 && state != 'Z' && state != 'X';
}

void mt_die_with_parent(pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(1);
}

pid_t mt_fork_l4(void (*child)(int fd), pid_t pids[MT_MAX_RANKS])
{
    struct pollfd pfd;
    pid_t l4, parent = getpid();
    int fds[2];
    char ok = 0;

    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    l4 = fork();
    assert_true(l4 >= 0);
    if (l4 == 0) {
        mt_die_with_parent(parent);
        close(fds[0]);
        child(fds[1]);
        _exit(1);
    }
    close(fds[1]);
    pfd.fd = fds[0];
    pfd.events = POLLIN;
    assert_int_equal(poll(&pfd, 1, 90000), 1);
    assert_int_equal(read(fds[0], &ok, 1), 1);
    close(fds[0]);
    assert_int_equal(ok, '1');
    assert_int_equal(mt_rank_pids_of(l4, pids), 2);
    return l4;
}

static bool launch_gone(void *arg)
{
    return mt_launch_procs(*(pid_t *)arg) == 0;
}

void mt_kill_l4_expect_gone(pid_t l4, const pid_t pids[MT_MAX_RANKS],
                            int stopped)
{
    assert_int_equal(kill(l4, SIGKILL), 0);
    assert_int_equal(waitpid(l4, NULL, 0), l4);
    assert_true(testutil_wait_until(launch_gone, &l4, 40.0));
    if (stopped >= 0 && mt_shm_of(pids[stopped])) {
        print_message("rank %d (stopped) was killed before its teardown: "
                      "its names reclaimed here\n",
                      stopped);
        worker_reclaim_names(&pids[stopped], 1);
    }
    for (size_t i = 0; i < 2; i++)
        if (mt_shm_of(pids[i]))
            fail_msg("a /dev/shm name of rank %zu (pid %d) is left", i,
                     (int)pids[i]);
    /* The key went once both ranks were in. */
    assert_false(mt_key_dir_of(l4));
    worker_mpi_reclaim_stale_dirs(NULL);
    assert_false(mt_ompi_dir_of(l4));
}
