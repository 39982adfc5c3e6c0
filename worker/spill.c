/* Spill files of host buffers: see spill.h. The bytes move with
 * pread/pwrite in 1 MiB pieces, with O_DIRECT where the file system takes
 * it (not tmpfs), so a spill measures the disk and fills no page cache. */
#define _GNU_SOURCE /* O_DIRECT, MADV_REMOVE */
#include "spill.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/fault.h"
#include "base/shm.h"
#include "wire/args.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PIECE (1u << 20)
#define PAGE 4096u

/* Bytes the file holds: whole pages, so that O_DIRECT may move them (the
 * mapping is page-rounded, so the tail past size is inside it). */
static size_t file_len(const strata_buffer *b)
{
    return (b->size + PAGE - 1) & ~(size_t)(PAGE - 1);
}

/* All n bytes at off, retrying short counts and EINTR; 0 or an errno. */
static int full_io(int fd, char *buf, size_t n, bool write)
{
    size_t done = 0;

    while (done < n) {
        size_t take = n - done < PIECE ? n - done : PIECE;
        ssize_t r = write ? pwrite(fd, buf + done, take, (off_t)done)
                          : pread(fd, buf + done, take, (off_t)done);

        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return errno;
        if (r == 0)
            return write ? ENOSPC : EIO;
        done += (size_t)r;
    }
    return 0;
}

static int open_direct(const char *path, int flags)
{
    int fd = open(path, flags | O_CLOEXEC | O_DIRECT, 0600);

    if (fd < 0 && errno == EINVAL) /* no O_DIRECT here (tmpfs) */
        fd = open(path, flags | O_CLOEXEC, 0600);
    return fd;
}

strata_err worker_spill_out(const char *dir, const char *owner_tag,
                            strata_buffer *b, char **path_out)
{
    int len = snprintf(NULL, 0,
                       "%s/" WORKER_SPILL_PREFIX "%s-%llu" WORKER_SPILL_SUFFIX,
                       dir, owner_tag, (unsigned long long)b->id);
    char *path = base_malloc((size_t)len + 1);
    int fd, e;

    if (!path)
        return base_fail(STRATA_ENOMEM, "spilling buffer %llu: out of memory",
                         (unsigned long long)b->id);
    snprintf(path, (size_t)len + 1,
             "%s/" WORKER_SPILL_PREFIX "%s-%llu" WORKER_SPILL_SUFFIX, dir,
             owner_tag, (unsigned long long)b->id);
    fd = open_direct(path, O_WRONLY | O_CREAT | O_EXCL);
    if (fd < 0) {
        strata_err err = base_fail_errno(errno, "spilling buffer %llu: open %s",
                                         (unsigned long long)b->id, path);

        base_free(path);
        return err;
    }
    e = BASE_FAULT("worker.spill.write")
            ? ENOSPC
            : full_io(fd, b->data, file_len(b), true);
    close(fd);
    if (!e && madvise(b->data, file_len(b), MADV_REMOVE) != 0)
        e = errno;
    if (e) {
        unlink(path);
        base_free(path);
        return base_fail(STRATA_EIO,
                         "spilling buffer %llu (%zu bytes) to %s: %s",
                         (unsigned long long)b->id, b->size, dir, strerror(e));
    }
    *path_out = path;
    return STRATA_OK;
}

strata_err worker_spill_in(const char *path, strata_buffer *b)
{
    int seg = shm_open(b->name, O_RDWR | O_CLOEXEC, 0);
    strata_err err;
    int fd, e;

    if (seg < 0)
        return base_fail_errno(errno, "restoring buffer %llu: shm_open %s",
                               (unsigned long long)b->id, b->name);
    err = base_shm_reserve(seg, b->size, "a restored buffer");
    close(seg);
    if (err)
        return err;
    fd = open_direct(path, O_RDONLY);
    if (fd < 0)
        return base_fail_errno(errno, "restoring buffer %llu: open %s",
                               (unsigned long long)b->id, path);
    e = BASE_FAULT("worker.spill.read")
            ? EIO
            : full_io(fd, b->data, file_len(b), false);
    close(fd);
    if (e) {
        /* The pages taken stay with the segment until it is spilled or
         * released again; its bytes are still the file's. */
        madvise(b->data, file_len(b), MADV_REMOVE);
        return base_fail(STRATA_EIO, "restoring buffer %llu from %s: %s",
                         (unsigned long long)b->id, path, strerror(e));
    }
    unlink(path);
    return STRATA_OK;
}
