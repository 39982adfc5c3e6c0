/* Bytes in and out of nvme instances: one file each in the runtime's
 * directory, opened with O_DIRECT where the file system allows it, read
 * and written with pread/pwrite in chunks of at most TIER_CHUNK. */
#define _GNU_SOURCE /* O_DIRECT */
#include "base/alloc.h"
#include "base/err.h"
#include "base/fault.h"
#include "tier/device.h"
#include "tier_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t file_size(const strata_instance *inst)
{
    return (inst->capacity + TIER_ALIGN - 1) & ~(uint64_t)(TIER_ALIGN - 1);
}

strata_err tier_nvme_open(strata_tier_runtime *rt, strata_instance *inst)
{
    static uint64_t counter;
    uint64_t n = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    int len =
        snprintf(NULL, 0, "%s/" TIER_NVME_PREFIX "%s-%llu" TIER_NVME_SUFFIX,
                 rt->nvme_dir, rt->owner_tag, (unsigned long long)n);
    int fd;

    inst->path = base_malloc((size_t)len + 1);
    if (!inst->path)
        return base_fail(STRATA_ENOMEM, "nvme instance: out of memory");
    snprintf(inst->path, (size_t)len + 1,
             "%s/" TIER_NVME_PREFIX "%s-%llu" TIER_NVME_SUFFIX, rt->nvme_dir,
             rt->owner_tag, (unsigned long long)n);
    if (BASE_FAULT("tier.open")) {
        errno = EIO;
        fd = -1;
    } else {
        fd = open(inst->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_DIRECT,
                  0600);
        inst->direct = fd >= 0;
        if (fd < 0 && errno == EINVAL) /* no O_DIRECT here (tmpfs) */
            fd = open(inst->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    }
    if (fd < 0)
        return base_fail_errno(errno, "nvme instance '%s': open %s", inst->name,
                               inst->path);
    if (ftruncate(fd, (off_t)file_size(inst)) != 0) {
        strata_err err = base_fail_errno(errno,
                                         "nvme instance '%s': "
                                         "ftruncate %s",
                                         inst->name, inst->path);

        close(fd);
        unlink(inst->path);
        return err;
    }
    inst->fd = fd;
    return STRATA_OK;
}

void tier_nvme_close(strata_instance *inst)
{
    if (inst->fd < 0)
        return;
    close(inst->fd);
    inst->fd = -1;
    unlink(inst->path);
}

void tier_nvme_discard(strata_instance *inst)
{
    if (inst->fd < 0)
        return;
    /* Shrinking frees the blocks; growing back keeps the size, sparse. */
    if (ftruncate(inst->fd, 0) != 0 ||
        ftruncate(inst->fd, (off_t)file_size(inst)) != 0)
        return; /* the blocks stay until close: nothing else to do */
}

/* pread/pwrite of all n bytes at off, retrying short counts and EINTR.
 * Returns 0 or an errno value. */
static int full_io(int fd, void *buf, size_t n, uint64_t off, bool write)
{
    size_t done = 0;

    if (BASE_FAULT(write ? "tier.pwrite" : "tier.pread"))
        return write ? ENOSPC : EIO;
    while (done < n) {
        ssize_t r =
            write
                ? pwrite(fd, (char *)buf + done, n - done, (off_t)(off + done))
                : pread(fd, (char *)buf + done, n - done, (off_t)(off + done));

        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return errno;
        if (r == 0)
            return write ? ENOSPC : EIO; /* past the end: cannot happen */
        done += (size_t)r;
    }
    return 0;
}

/* The length to move for a chunk of len bytes at off: whole blocks for an
 * O_DIRECT file (the tail of the last block is inside both the file and
 * the page-rounded mapping). */
static size_t io_len(const strata_instance *inst, uint64_t off, uint64_t len)
{
    if (!inst->direct)
        return (size_t)len;
    return (
        size_t)(((off + len + TIER_ALIGN - 1) & ~(uint64_t)(TIER_ALIGN - 1)) -
                off);
}

static strata_err io_fail(int e, char *msg, size_t cap, const char *what,
                          const strata_instance *inst, uint64_t off)
{
    snprintf(msg, cap, "%s of chunk %llu (offset %llu) of %s: %s", what,
             (unsigned long long)(off / TIER_CHUNK), (unsigned long long)off,
             inst->path, strerror(e));
    return STRATA_EIO;
}

/* A chunk from or to a device instance: one copy between it and host
 * memory (ram, host-pinned) or device memory; through the thread's
 * staging buffer for an nvme file. */
static strata_err dev_chunk(strata_instance *src, strata_instance *dst,
                            uint64_t off, uint64_t len, void *staging,
                            char *msg, size_t msg_cap)
{
    char *s = src->dev ? src->dev : src->data;
    char *d = dst->dev ? dst->dev : dst->data;
    int e;

    if (s && d)
        return tier_cuda_copy(d + off, s + off, (size_t)len, msg, msg_cap);
    if (d) { /* nvme -> device */
        e = full_io(src->fd, staging, io_len(src, off, len), off, false);
        if (e)
            return io_fail(e, msg, msg_cap, "read", src, off);
        return tier_cuda_copy(d + off, staging, (size_t)len, msg, msg_cap);
    }
    /* device -> nvme: the tail past len of the last block is written
     * from the staging buffer as it is (beyond the capacity). */
    if (tier_cuda_copy(staging, s + off, (size_t)len, msg, msg_cap))
        return STRATA_EIO; /* the message is in msg */
    e = full_io(dst->fd, staging, io_len(dst, off, len), off, true);
    return e ? io_fail(e, msg, msg_cap, "write", dst, off) : STRATA_OK;
}

strata_err tier_io_chunk(strata_instance *src, strata_instance *dst,
                         uint64_t off, uint64_t len, void *staging, char *msg,
                         size_t msg_cap)
{
    int e;

    if (src->dev || dst->dev)
        return dev_chunk(src, dst, off, len, staging, msg, msg_cap);
    if (src->data && dst->data) {
        memcpy((char *)dst->data + off, (char *)src->data + off, len);
        return STRATA_OK;
    }
    if (src->data) { /* ram -> nvme */
        e = full_io(dst->fd, (char *)src->data + off, io_len(dst, off, len),
                    off, true);
        return e ? io_fail(e, msg, msg_cap, "write", dst, off) : STRATA_OK;
    }
    if (dst->data) { /* nvme -> ram */
        e = full_io(src->fd, (char *)dst->data + off, io_len(src, off, len),
                    off, false);
        return e ? io_fail(e, msg, msg_cap, "read", src, off) : STRATA_OK;
    }
    /* nvme -> nvme through the thread's aligned staging buffer. */
    e = full_io(src->fd, staging, io_len(src, off, len), off, false);
    if (e)
        return io_fail(e, msg, msg_cap, "read", src, off);
    e = full_io(dst->fd, staging, io_len(dst, off, len), off, true);
    return e ? io_fail(e, msg, msg_cap, "write", dst, off) : STRATA_OK;
}

strata_err tier_file_rw(strata_instance *inst, uint64_t off, void *buf,
                        size_t n, bool write)
{
    void *staging = NULL;
    strata_err err = STRATA_OK;

    if (n == 0)
        return STRATA_OK;
    /* O_DIRECT wants aligned buffers, offsets and lengths: go through an
     * aligned block-sized window, one chunk at a time. */
    if (posix_memalign(&staging, TIER_ALIGN, TIER_CHUNK) != 0)
        return base_fail(STRATA_ENOMEM, "instance '%s': out of memory",
                         inst->name);
    while (n > 0 && !err) {
        uint64_t base = off & ~(uint64_t)(TIER_ALIGN - 1);
        size_t skip = (size_t)(off - base);
        size_t take = TIER_CHUNK - skip < n ? TIER_CHUNK - skip : n;
        size_t span =
            (skip + take + TIER_ALIGN - 1) & ~(size_t)(TIER_ALIGN - 1);
        int e = full_io(inst->fd, staging, span, base, false);

        if (!e && write) {
            memcpy((char *)staging + skip, buf, take);
            e = full_io(inst->fd, staging, span, base, true);
        } else if (!e) {
            memcpy(buf, (char *)staging + skip, take);
        }
        if (e)
            err = base_fail(STRATA_EIO, "instance '%s': %s of %s at %llu: %s",
                            inst->name, write ? "write" : "read", inst->path,
                            (unsigned long long)base, strerror(e));
        buf = (char *)buf + take;
        off += take;
        n -= take;
    }
    free(staging);
    return err;
}
