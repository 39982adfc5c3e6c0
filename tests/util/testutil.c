/*
 * Resource snapshots, deadlines and fork helpers for strata's tests.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>

#include <cmocka.h>

/* The TSan runtime starts a background thread of its own at some point
 * during the first test; thread counts mean nothing there. */
#if defined(__SANITIZE_THREAD__)
#define SANITIZER_THREADS 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SANITIZER_THREADS 1
#endif
#endif
#ifndef SANITIZER_THREADS
#define SANITIZER_THREADS 0
#endif

static void die(const char *what)
{
    fprintf(stderr, "testutil: %s: %s\n", what, strerror(errno));
    abort();
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a;
    int y = *(const int *)b;
    return (x > y) - (x < y);
}

static void snap_fds(testutil_snapshot *snap)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        die("opendir /proc/self/fd");
    int self = dirfd(d);
    struct dirent *e;
    snap->num_fds = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        int fd = atoi(e->d_name);
        if (fd == self || snap->num_fds == TESTUTIL_MAX_FDS)
            continue;
        snap->fds[snap->num_fds++] = fd;
    }
    closedir(d);
    qsort(snap->fds, snap->num_fds, sizeof(int), cmp_int);
    for (size_t i = 0; i < snap->num_fds; i++) {
        char path[64];
        char *t = snap->fd_targets[i];
        snprintf(path, sizeof(path), "/proc/self/fd/%d", snap->fds[i]);
        ssize_t n = readlink(path, t, TESTUTIL_NAME_MAX - 1);
        struct stat st;

        if (n < 0)
            n = 0; /* closed meanwhile; keep the number */
        t[n] = '\0';
        if (fstat(snap->fds[i], &st) != 0)
            st.st_dev = 0, st.st_ino = 0;
        snap->fd_dev[i] = st.st_dev;
        snap->fd_ino[i] = st.st_ino;
    }
}

static void add_child(testutil_snapshot *snap, pid_t pid)
{
    for (size_t i = 0; i < snap->num_children; i++)
        if (snap->children[i] == pid)
            return;
    if (snap->num_children < TESTUTIL_MAX_PIDS)
        snap->children[snap->num_children++] = pid;
}

static void snap_task_children(testutil_snapshot *snap, const char *tid)
{
    char path[320];
    snprintf(path, sizeof(path), "/proc/self/task/%s/children", tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return; /* the thread exited meanwhile */
    long pid;
    while (fscanf(f, "%ld", &pid) == 1)
        add_child(snap, (pid_t)pid);
    fclose(f);
}

static void snap_tasks(testutil_snapshot *snap)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        die("opendir /proc/self/task");
    struct dirent *e;
    snap->num_threads = 0;
    snap->num_children = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snap->num_threads++;
        snap_task_children(snap, e->d_name);
    }
    closedir(d);
}

static void snap_shm(testutil_snapshot *snap)
{
    snap->num_shm = 0;
    DIR *d = opendir("/dev/shm");
    if (!d)
        return; /* no /dev/shm: nothing can leak there */
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strstr(e->d_name, "strata") || snap->num_shm == TESTUTIL_MAX_SHM)
            continue;
        snprintf(snap->shm[snap->num_shm++], TESTUTIL_NAME_MAX, "%s",
                 e->d_name);
    }
    closedir(d);
}

void testutil_snapshot_take(testutil_snapshot *snap)
{
    snap_fds(snap);
    snap_tasks(snap);
    snap_shm(snap);
}

/* Whether fd was open on the same file at s (by identity: the readlink
 * text of a file unlinked meanwhile, say ctest's LastTest.log.tmp that a
 * test inherits, gains " (deleted)"). */
static bool had_fd(const testutil_snapshot *s, const testutil_snapshot *now,
                   size_t k)
{
    for (size_t i = 0; i < s->num_fds; i++) {
        if (s->fds[i] != now->fds[k])
            continue;
        if (s->fd_ino[i] && now->fd_ino[k])
            return s->fd_dev[i] == now->fd_dev[k] &&
                   s->fd_ino[i] == now->fd_ino[k];
        return strcmp(s->fd_targets[i], now->fd_targets[k]) == 0;
    }
    return false;
}

static bool had_child(const testutil_snapshot *s, pid_t pid)
{
    for (size_t i = 0; i < s->num_children; i++)
        if (s->children[i] == pid)
            return true;
    return false;
}

static bool had_shm(const testutil_snapshot *s, const char *name)
{
    for (size_t i = 0; i < s->num_shm; i++)
        if (strcmp(s->shm[i], name) == 0)
            return true;
    return false;
}

/* Appends to a bounded message buffer. */
static void note(char *msg, size_t size, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void note(char *msg, size_t size, size_t *used, const char *fmt, ...)
{
    if (!msg || *used + 1 >= size)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg + *used, size - *used, fmt, ap);
    va_end(ap);
    if (n > 0)
        *used += (size_t)n < size - *used ? (size_t)n : size - *used - 1;
}

static void child_name(pid_t pid, char *out, size_t size)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char buf[256];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *open = strchr(buf, '(');
    char *close = strrchr(buf, ')');
    if (open && close && close > open && close[1] && close[2])
        snprintf(out, size, "%.*s state %c", (int)(close - open + 1), open,
                 close[2]);
}

/* Parent pid of pid from /proc, or -1. */
static pid_t parent_of(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    int ppid;
    if (!p || sscanf(p + 2, "%*c %d", &ppid) != 1)
        return -1;
    return (pid_t)ppid;
}

/* When pid started, in seconds of CLOCK_REALTIME, from /proc/<pid>/stat's
 * starttime (clock ticks since boot, boot time counting suspend); -1 when
 * pid is gone. */
static double proc_start_s(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1.0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    unsigned long long ticks;
    /* After the name: state, then fields 4..21, then starttime (22). */
    if (!p || sscanf(p + 2,
                     "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u "
                     "%*d %*d %*d %*d %*d %*d %llu",
                     &ticks) != 1)
        return -1.0;
    struct timespec real, boot;
    clock_gettime(CLOCK_REALTIME, &real);
    clock_gettime(CLOCK_BOOTTIME, &boot);
    double booted = (double)(real.tv_sec - boot.tv_sec) +
                    (double)(real.tv_nsec - boot.tv_nsec) / 1e9;
    return booted + (double)ticks / (double)sysconf(_SC_CLK_TCK);
}

/* Whether the process now called pid started after /dev/shm/name was last
 * changed, so cannot have made it: its maker died and the pid was
 * recycled. The name's own times are no older than its creation; a slack
 * covers the tick of the start time and the file system's clock. */
static bool pid_recycled_since(pid_t pid, const char *name)
{
    char path[TESTUTIL_NAME_MAX + 16];
    struct stat st;
    snprintf(path, sizeof(path), "/dev/shm/%s", name);
    if (stat(path, &st) != 0)
        return false;
    double changed = (double)st.st_ctim.tv_sec + st.st_ctim.tv_nsec / 1e9;
    double modified = (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec / 1e9;
    double made_by = modified < changed ? modified : changed;
    double started = proc_start_s(pid);
    return started > 0 && started > made_by + 0.1;
}

/* Whether a /dev/shm entry may be this process's doing. strata names its
 * segments strata-<uid>-<pid>-...; tests run in parallel (ctest -j), so an
 * entry of a live process outside our subtree, or of a dead process, is
 * another test's business (the suite-end check catches real leftovers).
 * The pid alone does not say which process: one that started after the
 * entry was made has a recycled pid (a chip of ours may get the pid of
 * another test's dead process), so the entry is a dead process's. Names
 * that do not parse count as ours. */
static bool shm_is_ours(const char *name)
{
    unsigned uid;
    int pid;
    if (sscanf(name, "strata-%u-%d-", &uid, &pid) != 2 || pid <= 0)
        return true;
    if (pid_recycled_since((pid_t)pid, name))
        return false;
    for (int hops = 0; pid > 1 && hops < 64; hops++) {
        if (pid == (int)getpid())
            return true;
        pid = (int)parent_of((pid_t)pid);
    }
    return false;
}

static size_t count_procs(const testutil_snapshot *before,
                          const testutil_snapshot *now, char *msg, size_t size,
                          size_t *used)
{
    size_t leaks = 0;
    for (size_t i = 0; i < now->num_children; i++) {
        if (had_child(before, now->children[i]))
            continue;
        char name[128];
        child_name(now->children[i], name, sizeof(name));
        note(msg, size, used, " child pid %d %s;", (int)now->children[i], name);
        leaks++;
    }
    for (size_t i = 0; i < now->num_shm; i++) {
        if (had_shm(before, now->shm[i]) || !shm_is_ours(now->shm[i]))
            continue;
        note(msg, size, used, " shm /dev/shm/%s;", now->shm[i]);
        leaks++;
    }
    return leaks;
}

static size_t count_fds_threads(const testutil_snapshot *before,
                                const testutil_snapshot *now, char *msg,
                                size_t size, size_t *used)
{
    size_t leaks = 0;
    for (size_t i = 0; i < now->num_fds; i++) {
        if (had_fd(before, now, i))
            continue;
        note(msg, size, used, " fd %d -> %s;", now->fds[i], now->fd_targets[i]);
        leaks++;
    }
    if (!SANITIZER_THREADS && now->num_threads > before->num_threads) {
        note(msg, size, used, " %zu thread(s) (had %zu, now %zu);",
             now->num_threads - before->num_threads, before->num_threads,
             now->num_threads);
        leaks++;
    }
    return leaks;
}

/* Counts what is new since before: children and shm polled up to
 * timeout_s, fds and threads up to max(timeout_s, 1 s). */
static size_t collect(const testutil_snapshot *before, double timeout_s,
                      char *msg, size_t size)
{
    static testutil_snapshot now; /* large: keep it off the stack */
    size_t used = 0, leaks;
    double start = testutil_now();
    double thread_wait = timeout_s > 1.0 ? timeout_s : 1.0;

    for (;;) {
        used = 0;
        msg[0] = '\0';
        testutil_snapshot_take(&now);
        leaks = count_procs(before, &now, msg, size, &used);
        if (leaks == 0 || testutil_now() - start >= timeout_s)
            break;
        testutil_sleep(0.002);
    }
    for (;;) {
        size_t u2 = used;
        testutil_snapshot_take(&now);
        size_t more = count_fds_threads(before, &now, msg, size, &u2);
        if (more == 0 || testutil_now() - start >= thread_wait)
            return leaks + more;
        msg[used] = '\0';
        testutil_sleep(0.005);
    }
}

size_t testutil_count_leaks(const testutil_snapshot *before, char *msg,
                            size_t msg_size)
{
    char local[16];
    if (!msg || msg_size == 0) {
        msg = local;
        msg_size = sizeof(local);
    }
    return collect(before, 0.0, msg, msg_size);
}

void testutil_assert_clean_at(const testutil_snapshot *before, double timeout_s,
                              const char *file, int line)
{
    char msg[4096];
    size_t leaks = collect(before, timeout_s, msg, sizeof(msg));
    if (leaks == 0)
        return;
    print_error("LEAK: %zu resource(s) left behind:%s\n", leaks, msg);
    _fail(file, line);
}

size_t testutil_new_children(const testutil_snapshot *before)
{
    static testutil_snapshot now;
    size_t n = 0;
    testutil_snapshot_take(&now);
    for (size_t i = 0; i < now.num_children; i++)
        n += !had_child(before, now.children[i]);
    return n;
}

double testutil_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void testutil_sleep(double seconds)
{
    if (seconds <= 0)
        return;
    struct timespec ts;
    ts.tv_sec = (time_t)seconds;
    ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

bool testutil_wait_until(bool (*cond)(void *arg), void *arg, double timeout_s)
{
    double deadline = testutil_now() + timeout_s;
    for (;;) {
        if (cond(arg))
            return true;
        if (testutil_now() >= deadline)
            return cond(arg);
        testutil_sleep(0.0002);
    }
}

void testutil_store_u32(uint32_t *p, uint32_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

uint32_t testutil_load_u32(const uint32_t *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

uint32_t testutil_add_u32(uint32_t *p, uint32_t v)
{
    return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL);
}

static bool wait_word(const uint32_t *p, uint32_t want, bool ge,
                      double timeout_s)
{
    double start = testutil_now();
    for (unsigned spins = 0;; spins++) {
        uint32_t v = __atomic_load_n(p, __ATOMIC_ACQUIRE);
        if (ge ? v >= want : v == want)
            return true;
        if ((spins & 63) != 63)
            continue;
        double t = testutil_now() - start;
        if (t >= timeout_s)
            return false;
        if (t > 0.001) {
            sched_yield();
            testutil_sleep(0.00005);
        }
    }
}

bool testutil_wait_u32(const uint32_t *p, uint32_t want, double timeout_s)
{
    return wait_word(p, want, false, timeout_s);
}

bool testutil_wait_u32_ge(const uint32_t *p, uint32_t want, double timeout_s)
{
    return wait_word(p, want, true, timeout_s);
}

void testutil_busy(double seconds)
{
    double end = testutil_now() + seconds;
    while (testutil_now() < end)
        ;
}

pid_t testutil_spawn(int (*fn)(void *arg, int write_fd), void *arg,
                     int *read_fd_out)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (pid == 0) {
        close(p[0]);
        int rc = fn(arg, p[1]);
        _exit(rc & 0xff);
    }
    close(p[1]);
    *read_fd_out = p[0];
    return pid;
}

bool testutil_wait_child(pid_t pid, double timeout_s, int *status_out)
{
    double deadline = testutil_now() + timeout_s;
    for (;;) {
        int st;
        pid_t r = waitpid(pid, &st, timeout_s < 0 ? 0 : WNOHANG);
        if (r == pid) {
            if (status_out)
                *status_out = st;
            return true;
        }
        if (r < 0 && errno != EINTR)
            return false;
        if (timeout_s >= 0 && testutil_now() >= deadline)
            return false;
        if (r == 0)
            testutil_sleep(0.0005);
    }
}

struct run_child {
    int (*fn)(void *arg);
    void *arg;
};

static int run_child_main(void *arg, int write_fd)
{
    struct run_child *rc = arg;
    close(write_fd);
    return rc->fn(rc->arg);
}

int testutil_run_in_child(int (*fn)(void *arg), void *arg)
{
    struct run_child rc = {fn, arg};
    int rfd;
    pid_t pid = testutil_spawn(run_child_main, &rc, &rfd);
    if (pid < 0)
        return -1;
    close(rfd);
    int st;
    if (!testutil_wait_child(pid, -1, &st))
        return -1;
    return st;
}

bool testutil_read_full(int fd, void *buf, size_t n, double timeout_s)
{
    double deadline = testutil_now() + timeout_s;
    char *p = buf;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0)
        return false;
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r > 0) {
            p += r;
            n -= (size_t)r;
            continue;
        }
        if (r == 0 || (errno != EAGAIN && errno != EINTR))
            break;
        if (testutil_now() >= deadline)
            break;
        testutil_sleep(0.0005);
    }
    (void)fcntl(fd, F_SETFL, fl);
    return n == 0;
}

bool testutil_write_full(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

bool testutil_pid_exists(pid_t pid)
{
    return kill(pid, 0) == 0 || errno != ESRCH;
}

bool testutil_pid_gone_reap(pid_t pid)
{
    int st;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid)
        return true;
    return !testutil_pid_exists(pid);
}

bool testutil_pids_gone(void *pids)
{
    testutil_pids *p = pids;
    bool all = true;

    for (size_t i = 0; i < p->n; i++) {
        if (!p->gone[i])
            p->gone[i] = testutil_pid_gone_reap(p->pid[i]);
        all = all && p->gone[i];
    }
    return all;
}

long testutil_proc_cpu_ticks(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p)
        return -1;
    /* After "(comm)": state is field 3; utime and stime are 14 and 15. */
    unsigned long utime, stime;
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
               &utime, &stime) != 2)
        return -1;
    return (long)(utime + stime);
}
