/* base/proc.h. */
#include "base/proc.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static pid_t cached;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void forget(void)
{
    __atomic_store_n(&cached, 0, __ATOMIC_RELAXED);
}

static void install(void)
{
    pthread_atfork(NULL, NULL, forget);
}

pid_t base_pid(void)
{
    pid_t p;

    pthread_once(&once, install);
    p = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (p == 0) {
        p = getpid();
        __atomic_store_n(&cached, p, __ATOMIC_RELAXED);
    }
    return p;
}

/* The state letter and start time of pid from /proc/<pid>/stat; false
 * when there is no such process (or /proc hides it). */
static bool read_stat(pid_t pid, char *state, unsigned long long *start)
{
    char path[48], buf[1024];
    const char *p;
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
    f = fopen(path, "re");
    if (!f)
        return false;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* "pid (comm) state ...": comm may hold spaces and parentheses, so
     * the fields start after the last ')'. */
    p = strrchr(buf, ')');
    return p && sscanf(p + 1,
                       " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u "
                       "%*d %*d %*d %*d %*d %*d %llu",
                       state, start) == 2;
}

bool base_proc_start_time(pid_t pid, unsigned long long *out)
{
    unsigned long long start;
    char state;

    if (!read_stat(pid, &state, &start) || state == 'Z' || state == 'X')
        return false;
    *out = start;
    return true;
}

bool base_proc_zombie(pid_t pid)
{
    unsigned long long start;
    char state;

    return read_stat(pid, &state, &start) && (state == 'Z' || state == 'X');
}

bool base_proc_gone(pid_t pid)
{
    return (kill(pid, 0) != 0 && errno == ESRCH) || base_proc_zombie(pid);
}
