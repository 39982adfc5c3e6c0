/*
 * The chaos test's process tree and leftovers (see chaos_tree.h).
 */
#define _GNU_SOURCE
#include "chaos_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The whole of a small /proc file into buf (NUL-ended); bytes read. */
static size_t slurp(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    size_t n = 0;
    ssize_t r;

    buf[0] = '\0';
    if (fd < 0)
        return 0;
    while (n + 1 < cap && (r = read(fd, buf + n, cap - 1 - n)) > 0)
        n += (size_t)r;
    close(fd);
    buf[n] = '\0';
    return n;
}

/* Appends the pids in one children file to out[*n..cap). */
static void read_children(pid_t pid, const char *tid, pid_t *out, size_t *n,
                          size_t cap)
{
    char file[300], buf[4096], *p, *end;

    snprintf(file, sizeof(file), "/proc/%d/task/%s/children", (int)pid, tid);
    slurp(file, buf, sizeof(buf));
    for (p = buf; *n < cap; p = end) {
        long v = strtol(p, &end, 10);

        if (end == p)
            break;
        out[(*n)++] = (pid_t)v;
    }
}

/* The thread ids are read with getdents64 into a buffer on the stack, not
 * with opendir: the killer thread must not allocate, since the main
 * thread forks meanwhile, and a child forked while another thread holds
 * an allocator's lock (ASan's is not released in the child) hangs in its
 * first malloc. */
size_t chaos_children(pid_t pid, pid_t *out, size_t cap)
{
    char path[64];
    char ents[4096] __attribute__((aligned(8)));
    size_t n = 0;
    long got;
    int fd;

    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    while (n < cap &&
           (got = syscall(SYS_getdents64, fd, ents, sizeof(ents))) > 0) {
        for (long off = 0; off < got;) {
            struct linux_dirent64 {
                uint64_t ino;
                int64_t off;
                unsigned short reclen;
                unsigned char type;
                char name[];
            } *e = (struct linux_dirent64 *)(void *)(ents + off);

            if (e->name[0] != '.')
                read_children(pid, e->name, out, &n, cap);
            off += e->reclen;
        }
    }
    close(fd);
    return n;
}

bool chaos_forked(pid_t pid)
{
    char path[64], buf[1024], *p;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if (!slurp(path, buf, sizeof(buf)) || !(p = strrchr(buf, ')')))
        return false;
    /* The comm may hold spaces: fields are counted from its ')'; p ends
     * on the space before field 38, exit_signal. */
    for (int f = 2; f < 38 && p; f++)
        p = strchr(p + 1, ' ');
    return p && strtol(p + 1, NULL, 10) == SIGCHLD;
}

size_t chaos_descendants(pid_t root, pid_t *out, size_t cap)
{
    size_t n = chaos_children(root, out, cap);

    for (size_t i = 0; i < n && n < cap; i++)
        n += chaos_children(out[i], out + n, cap - n);
    return n;
}

void chaos_pids_add(struct chaos_pids *s, pid_t pid)
{
    if (pid > 0 && !chaos_pids_has(s, pid) && s->n < CHAOS_MAX_PIDS)
        s->pid[s->n++] = pid;
}

bool chaos_pids_has(const struct chaos_pids *s, pid_t pid)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->pid[i] == pid)
            return true;
    return false;
}

void chaos_shm_list(struct chaos_names *out)
{
    DIR *d = opendir("/dev/shm");
    struct dirent *e;

    out->n = 0;
    if (!d)
        return;
    while ((e = readdir(d)) != NULL && out->n < CHAOS_MAX_NAMES)
        if (strstr(e->d_name, "strata"))
            snprintf(out->name[out->n++], CHAOS_NAME_MAX, "%s", e->d_name);
    closedir(d);
}

static bool listed(const struct chaos_names *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->name[i], name) == 0)
            return true;
    return false;
}

static void append(char *msg, size_t cap, const char *what)
{
    size_t used = strlen(msg);

    if (used + 1 < cap)
        snprintf(msg + used, cap - used, "%s", what);
}

size_t chaos_shm_new(const struct chaos_names *before,
                     const struct chaos_names *now,
                     const struct chaos_pids *seen, char *msg, size_t cap)
{
    size_t k = 0;

    for (size_t i = 0; i < now->n; i++) {
        unsigned uid;
        int pid;
        char line[CHAOS_NAME_MAX + 32];

        if (listed(before, now->name[i]))
            continue;
        /* A name that does not parse is ours to explain too. */
        if (sscanf(now->name[i], "strata-%u-%d-", &uid, &pid) == 2 &&
            !chaos_pids_has(seen, (pid_t)pid))
            continue;
        snprintf(line, sizeof(line), " /dev/shm/%s", now->name[i]);
        append(msg, cap, line);
        k++;
    }
    return k;
}

size_t chaos_shm_remove_new(const struct chaos_names *before,
                            const struct chaos_pids *seen)
{
    static struct chaos_names now; /* the main thread's only */
    size_t k = 0;

    chaos_shm_list(&now);
    for (size_t i = 0; i < now.n; i++) {
        char path[CHAOS_NAME_MAX + 16];
        unsigned uid;
        int pid;

        if (listed(before, now.name[i]) ||
            (sscanf(now.name[i], "strata-%u-%d-", &uid, &pid) == 2 &&
             !chaos_pids_has(seen, (pid_t)pid)))
            continue;
        snprintf(path, sizeof(path), "/dev/shm/%s", now.name[i]);
        k += unlink(path) == 0;
    }
    return k;
}

size_t chaos_paths_left(const struct chaos_names *list, char *msg, size_t cap)
{
    size_t k = 0;

    for (size_t i = 0; i < list->n; i++) {
        char line[CHAOS_NAME_MAX + 2];

        if (access(list->name[i], F_OK) != 0)
            continue;
        snprintf(line, sizeof(line), " %s", list->name[i]);
        append(msg, cap, line);
        k++;
    }
    return k;
}

/* Where each thread of pid sleeps (its wchan), on stderr. */
static void print_threads(pid_t pid)
{
    char dir[64], path[340], wchan[64];
    struct dirent *e;
    DIR *d;

    snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
    d = opendir(dir);
    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s/wchan", dir, e->d_name);
        slurp(path, wchan, sizeof(wchan));
        fprintf(stderr, " %s(%s)", e->d_name, wchan);
    }
    closedir(d);
}

void chaos_print_tree(pid_t root)
{
    pid_t p[CHAOS_MAX_PIDS];
    size_t n = chaos_descendants(root, p, CHAOS_MAX_PIDS);

    fprintf(stderr, "chaos: %zu processes below pid %d:\n", n, (int)root);
    for (size_t i = 0; i < n; i++) {
        char path[64], stat[512];
        const char *rp;
        int ppid = 0;
        char state = '?';

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)p[i]);
        slurp(path, stat, sizeof(stat));
        rp = strrchr(stat, ')');
        if (rp)
            sscanf(rp + 2, "%c %d", &state, &ppid);
        fprintf(stderr, "  pid %d ppid %d state %c, threads:", (int)p[i], ppid,
                state);
        print_threads(p[i]);
        fprintf(stderr, "\n");
    }
}

void chaos_print_stacks(pid_t root)
{
    pid_t p[CHAOS_MAX_PIDS];
    size_t n = chaos_descendants(root, p, CHAOS_MAX_PIDS);

    if (system("command -v gdb >/dev/null 2>&1") != 0) {
        fprintf(stderr, "chaos: no gdb here: no stacks\n");
        return;
    }
    /* The tree first, then the test process (the L4) itself. */
    for (size_t i = 0; i <= n; i++) {
        pid_t pid = i < n ? p[i] : root;
        char cmd[200];

        fprintf(stderr, "---- stacks of pid %d ----\n", (int)pid);
        snprintf(cmd, sizeof(cmd),
                 "timeout -k 2 10 gdb -q -nx -batch -p %d "
                 "-ex 'thread apply all bt 20' 1>&2 2>/dev/null",
                 (int)pid);
        if (system(cmd) != 0)
            fprintf(stderr, "(gdb gave no stacks)\n");
    }
}
