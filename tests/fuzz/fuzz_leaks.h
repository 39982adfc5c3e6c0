/* What a handler fuzz target's input must leave behind: nothing. Counts of
 * this process's open fds and child processes, and its names in /dev/shm
 * (strata-<uid>-<pid>-*), for the handler targets that start processes
 * (fuzz_session, fuzz_l4_link). */
#ifndef FUZZ_LEAKS_H
#define FUZZ_LEAKS_H

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Open fds, not counting pipes: the sanitizers' symbolizer talks over
 * pipes it opens when libFuzzer first prints a function. -1 when
 * /proc/self/fd cannot be listed. */
static inline int fuzz_count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;

    if (!d)
        return -1;
    while ((e = readdir(d))) {
        char path[300], to[300];
        ssize_t len;

        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        len = readlink(path, to, sizeof(to) - 1);
        to[len > 0 ? len : 0] = '\0';
        if (strncmp(to, "pipe:", 5) != 0)
            n++;
    }
    closedir(d);
    return n;
}

/* Names of this process in /dev/shm: removed, and each one reported with
 * who on stderr. */
static inline int fuzz_shm_leftovers(const char *who)
{
    char prefix[64];
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    int n = 0;

    if (!d)
        return 0;
    snprintf(prefix, sizeof(prefix), "strata-%u-%d-", (unsigned)getuid(),
             (int)getpid());
    while ((e = readdir(d))) {
        char path[300];

        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        fprintf(stderr, "%s: left in /dev/shm: %s\n", who, e->d_name);
        snprintf(path, sizeof(path), "/dev/shm/%s", e->d_name);
        unlink(path);
        n++;
    }
    closedir(d);
    return n;
}

/* Child processes of this one, not counting the sanitizers' symbolizer
 * (started when libFuzzer prints a new function, and kept). */
static inline int fuzz_children(void)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    int n = 0;

    while (d && (e = readdir(d))) {
        char path[300], buf[512];
        const char *close;
        FILE *f;
        int ppid = 0;

        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
        f = fopen(path, "r");
        if (!f)
            continue;
        buf[0] = '\0';
        if (!fgets(buf, sizeof(buf), f))
            buf[0] = '\0';
        fclose(f);
        /* pid (comm) state ppid ...; comm may hold spaces and parens */
        close = strrchr(buf, ')');
        if (!close || sscanf(close + 1, " %*c %d", &ppid) != 1 ||
            ppid != (int)getpid())
            continue;
        if (!strstr(buf, "symbolizer"))
            n++;
    }
    if (d)
        closedir(d);
    return n;
}

#endif
