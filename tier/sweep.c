/* Dead owners' files and the directories they live in: see
 * tier/sweep.h. */
#define _GNU_SOURCE /* mkostemp */
#include "tier/sweep.h"

#include "base/err.h"
#include "base/log.h"
#include "base/proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

strata_err tier_dir_check(const char *field, const char *dir)
{
    char path[PATH_MAX];
    struct stat st;
    int fd;

    if (!dir[0])
        return base_fail(STRATA_EINVAL, "%s is empty", field);
    if (stat(dir, &st) != 0)
        return base_fail(STRATA_EINVAL, "%s '%s': %s", field, dir,
                         strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return base_fail(STRATA_EINVAL, "%s '%s' is not a directory", field,
                         dir);
    if (access(dir, W_OK | X_OK) != 0)
        return base_fail(STRATA_EINVAL, "%s '%s' is not writable: %s", field,
                         dir, strerror(errno));
    if (snprintf(path, sizeof(path), "%s/.strata-probe-XXXXXX", dir) >=
        (int)sizeof(path))
        return base_fail(STRATA_EINVAL, "%s '%s': path too long", field, dir);
    fd = mkostemp(path, O_CLOEXEC);
    if (fd < 0)
        return base_fail(STRATA_EINVAL, "%s '%s' takes no files: %s", field,
                         dir, strerror(errno));
    close(fd);
    unlink(path);
    return STRATA_OK;
}

bool tier_owner_tag(char *buf, size_t cap)
{
    pid_t pid = base_pid();
    unsigned long long start;
    int n;

    if (!base_proc_start_time(pid, &start))
        return false;
    n = snprintf(buf, cap, "%ld-%llu", (long)pid, start);
    return n > 0 && (size_t)n < cap;
}

/* Reads a decimal number at *p (advancing it); false when there is none. */
static bool number(const char **p, unsigned long long *out)
{
    char *end;

    if (**p < '0' || **p > '9')
        return false;
    errno = 0;
    *out = strtoull(*p, &end, 10);
    if (errno)
        return false;
    *p = end;
    return true;
}

/* Whether name (prefix already matched, suffix cut off at stop) belongs
 * to a process that is gone. */
static bool owner_gone(const char *p, const char *stop)
{
    unsigned long long pid, start, now;
    bool tagged;

    if (!number(&p, &pid) || *p++ != '-' || !number(&p, &start) || pid == 0 ||
        pid > 0x7fffffffULL)
        return false;
    if (p == stop) /* "<pid>-<n>": no start time, the pid alone says */
        tagged = false;
    else if (*p == '-')
        tagged = true;
    else
        return false;
    if (!base_proc_start_time((pid_t)pid, &now))
        return true;
    return tagged && now != start;
}

unsigned tier_sweep_dead(const char *dir, const char *prefix,
                         const char *suffix)
{
    size_t plen = strlen(prefix), slen = strlen(suffix);
    unsigned removed = 0;
    struct dirent *e;
    int dfd;
    DIR *d;

    dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return 0;
    d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return 0;
    }
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);

        if (len <= plen + slen || strncmp(e->d_name, prefix, plen) != 0 ||
            strcmp(e->d_name + len - slen, suffix) != 0)
            continue;
        if (!owner_gone(e->d_name + plen, e->d_name + len - slen))
            continue;
        if (unlinkat(dfd, e->d_name, 0) == 0) {
            removed++;
            LOG_INFO("removed %s/%s: its process is gone", dir, e->d_name);
        }
    }
    closedir(d);
    return removed;
}
