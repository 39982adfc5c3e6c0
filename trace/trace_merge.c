/* The merge: every buffer of a session read back from /dev/shm, written
 * as one JSON file, then removed. */
#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "trace_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MERGE_MAX_BUFS 8192

/* Maps the buffer /dev/shm/name read-only into *b; false (with a warning)
 * for one that is not a whole buffer of ours. */
static bool map_buf(const char *name, struct trace_buf *b)
{
    char path[300];
    struct stat st;
    struct trace_hdr *h;
    uint64_t n;
    int fd;

    snprintf(path, sizeof(path), "/%s", name);
    fd = shm_open(path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return false;
    if (fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(*h)) {
        close(fd);
        return false;
    }
    h = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (h == MAP_FAILED)
        return false;
    if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != TRACE_MAGIC ||
        h->version != TRACE_VERSION ||
        h->rec_size != sizeof(struct trace_rec) ||
        sizeof(*h) + (size_t)h->cap * sizeof(struct trace_rec) >
            (size_t)st.st_size) {
        LOG_WARN("trace: %s is not a trace buffer of this version", name);
        munmap(h, (size_t)st.st_size);
        return false;
    }
    n = __atomic_load_n(&h->head, __ATOMIC_ACQUIRE);
    b->h = h;
    b->map_len = (size_t)st.st_size;
    b->n = n < h->cap ? (uint32_t)n : h->cap;
    return true;
}

/* The root first, then by pid: parents before the children they fork. */
static int by_pid(const void *x, const void *y)
{
    const struct trace_buf *a = x, *b = y;

    return (a->h->pid > b->h->pid) - (a->h->pid < b->h->pid);
}

static strata_err write_file(const char *path, const struct trace_buf *bufs,
                             size_t n)
{
    size_t len = strlen(path) + 8;
    char *tmp = base_malloc(len);
    strata_err err;
    FILE *f;

    if (!tmp)
        return base_fail(STRATA_ENOMEM, "trace: path");
    snprintf(tmp, len, "%s.tmp", path);
    f = fopen(tmp, "we");
    if (!f) {
        err = base_fail_errno(errno, "trace: cannot write %s", tmp);
        base_free(tmp);
        return err;
    }
    err = trace_json_write(f, bufs, n);
    if (fclose(f) != 0 && !err)
        err = base_fail_errno(errno, "trace: writing %s", tmp);
    if (!err && rename(tmp, path) != 0)
        err = base_fail_errno(errno, "trace: rename %s to %s", tmp, path);
    if (err)
        unlink(tmp);
    base_free(tmp);
    return err;
}

strata_err trace_merge_session(const char *path, pid_t root)
{
    char prefix[300], name[300];
    struct trace_buf *bufs = base_calloc(MERGE_MAX_BUFS, sizeof(*bufs));
    size_t n = 0;
    strata_err err = STRATA_OK;
    struct dirent *e;
    DIR *d;

    /* prefix without the leading slash: what readdir shows. */
    trace_shm_name(name, sizeof(name), root, 0);
    snprintf(prefix, sizeof(prefix), "%s", name + 1);
    prefix[strlen(prefix) - 1] = '\0'; /* drop the "0" */
    d = opendir("/dev/shm");
    if (!d) {
        base_free(bufs);
        return base_fail_errno(errno, "trace: opendir /dev/shm");
    }
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        snprintf(name, sizeof(name), "/%s", e->d_name);
        if (bufs && n < MERGE_MAX_BUFS && map_buf(e->d_name, &bufs[n]))
            n++;
        shm_unlink(name);
    }
    closedir(d);
    if (!bufs)
        return base_fail(STRATA_ENOMEM, "trace: buffer list");
    qsort(bufs, n, sizeof(*bufs), by_pid);
    err = write_file(path, bufs, n);
    for (size_t i = 0; i < n; i++)
        munmap(bufs[i].h, bufs[i].map_len);
    base_free(bufs);
    return err;
}
