/* Spill files of host buffers: see spill.h. The bytes move with
 * pread/pwrite in 1 MiB pieces, several stripes at once for a large
 * buffer, with O_DIRECT where the file system takes it (not tmpfs), so a
 * spill measures the disk and fills no page cache. */
#define _GNU_SOURCE /* O_DIRECT, MADV_REMOVE */
#include "spill.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/fault.h"
#include "base/shm.h"
#include "wire/args.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PIECE (1u << 20)
#define PAGE 4096u
/* Buffers of STRIPE_MIN bytes or more move in STRIPES stripes at once. */
#define STRIPES 4
#define STRIPE_MIN ((size_t)16 << 20)

/* Bytes the file holds: whole pages, so that O_DIRECT may move them (the
 * mapping is page-rounded, so the tail past size is inside it). */
static size_t file_len(const strata_buffer *b)
{
    return (b->size + PAGE - 1) & ~(size_t)(PAGE - 1);
}

/* All n bytes of buf at file offset off, retrying short counts and EINTR;
 * 0 or an errno. */
static int full_io(int fd, char *buf, size_t n, size_t off, bool write)
{
    size_t done = 0;

    while (done < n) {
        size_t take = n - done < PIECE ? n - done : PIECE;
        ssize_t r = write ? pwrite(fd, buf + done, take, (off_t)(off + done))
                          : pread(fd, buf + done, take, (off_t)(off + done));

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

struct stripe {
    int fd;
    char *buf;
    size_t off, len;
    bool write;
    int err;
    pthread_t thread;
};

static void *stripe_main(void *arg)
{
    struct stripe *st = arg;

    st->err = full_io(st->fd, st->buf + st->off, st->len, st->off, st->write);
    return NULL;
}

/* Moves len bytes between buf and fd's offset 0: a large buffer in
 * STRIPES contiguous stripes at once, each on its own thread, so the disk
 * sees several requests in flight (a single sequential stream, as dd's,
 * leaves it idle between them). 0 or the first errno. */
static int striped_io(int fd, char *buf, size_t len, bool write)
{
    struct stripe st[STRIPES];
    size_t per = (len / STRIPES + PAGE - 1) & ~(size_t)(PAGE - 1);
    int n = 0, e = 0;

    if (len < STRIPE_MIN)
        return full_io(fd, buf, len, 0, write);
    for (size_t off = 0; off < len && n < STRIPES; off += per, n++) {
        st[n] = (struct stripe){.fd = fd,
                                .buf = buf,
                                .off = off,
                                .len = len - off < per ? len - off : per,
                                .write = write};
        if (pthread_create(&st[n].thread, NULL, stripe_main, &st[n]) != 0) {
            stripe_main(&st[n]); /* no thread: this one does it */
            st[n].thread = 0;
        }
    }
    for (int i = 0; i < n; i++) {
        if (st[i].thread)
            pthread_join(st[i].thread, NULL);
        if (!e)
            e = st[i].err;
    }
    return e;
}

static void *closer_main(void *arg)
{
    close((int)(intptr_t)arg);
    return NULL;
}

/* Closes fd, on a detached thread when later is true. */
static void close_later(int fd, bool later)
{
    pthread_attr_t attr;
    pthread_t t;
    bool started = false;

    if (later && pthread_attr_init(&attr) == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        started =
            pthread_create(&t, &attr, closer_main, (void *)(intptr_t)fd) == 0;
        pthread_attr_destroy(&attr);
    }
    if (!started)
        close(fd);
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
        /* An I/O failure like a write's (docs/errors.md), not ESYS: the
         * directory went, or is no file system that takes files. */
        strata_err err =
            base_fail(STRATA_EIO, "spilling buffer %llu: open %s: %s",
                      (unsigned long long)b->id, path, strerror(errno));

        base_free(path);
        return err;
    }
    e = BASE_FAULT("worker.spill.write")
            ? ENOSPC
            : striped_io(fd, b->data, file_len(b), true);
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
    if (fd < 0) /* the file went: an I/O failure like a read's */
        return base_fail(STRATA_EIO, "restoring buffer %llu: open %s: %s",
                         (unsigned long long)b->id, path, strerror(errno));
    e = BASE_FAULT("worker.spill.read")
            ? EIO
            : striped_io(fd, b->data, file_len(b), false);
    if (e) {
        close(fd);
        /* The pages taken go back; its bytes are still the file's. */
        madvise(b->data, file_len(b), MADV_REMOVE);
        return base_fail(STRATA_EIO, "restoring buffer %llu from %s: %s",
                         (unsigned long long)b->id, path, strerror(e));
    }
    /* The name goes now, while fd holds the file open; the file system
     * frees its blocks at the last close, which for a large file takes
     * long (a fifth of a second for 256 MiB on ext4): another thread does
     * it. Should the process end first, the kernel does. */
    unlink(path);
    close_later(fd, file_len(b) >= STRIPE_MIN);
    return STRATA_OK;
}
