/* Host buffers in POSIX shared memory, and reclaiming segments a crashed
 * process left behind. */
#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "base/proc.h"
#include "base/shm.h"
#include "chip/chip.h"
#include "worker_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static uint64_t next_buf_id;

uint64_t worker_buffer_next_id(void)
{
    /* Process-wide: two workers of one process share the shm namespace
     * of its pid. */
    return __atomic_add_fetch(&next_buf_id, 1, __ATOMIC_RELAXED);
}

strata_err worker_buffer_track(strata_worker *w, strata_buffer *b)
{
    strata_err err = STRATA_OK;

    pthread_mutex_lock(&w->buf_mu);
    if (w->num_bufs == w->cap_bufs) {
        size_t cap = w->cap_bufs ? 2 * w->cap_bufs : 16;
        void *p = base_realloc(w->bufs, cap * sizeof(*w->bufs));

        if (p) {
            w->bufs = p;
            w->cap_bufs = cap;
        } else {
            err = base_fail(STRATA_ENOMEM, "out of memory tracking buffer");
        }
    }
    if (!err)
        w->bufs[w->num_bufs++] = b;
    pthread_mutex_unlock(&w->buf_mu);
    return err;
}

static void untrack(strata_worker *w, strata_buffer *b)
{
    pthread_mutex_lock(&w->buf_mu);
    for (size_t i = 0; i < w->num_bufs; i++) {
        if (w->bufs[i] == b) {
            w->bufs[i] = w->bufs[--w->num_bufs];
            break;
        }
    }
    pthread_mutex_unlock(&w->buf_mu);
}

static void unmap_free(strata_buffer *b)
{
    if (!b->remote && !b->device) {
        /* Before the mapping goes: a spill of b in progress on another
         * thread finishes first, and none starts after. */
        if (!b->foreign)
            worker_mem_forget(&b->owner->mem, b);
        munmap(b->data, b->size);
        if (!b->foreign)
            shm_unlink(b->name);
    }
    orch_deps_forget(b);
    base_free(b);
}

static strata_err map_segment(strata_buffer *b)
{
    int fd = shm_open(b->name, O_CREAT | O_EXCL | O_RDWR, 0600);
    strata_err err = STRATA_OK;

    /* Our pid and a never-used id: an existing segment is a dead
     * process's leftover under a reused pid. */
    if (fd < 0 && errno == EEXIST && shm_unlink(b->name) == 0)
        fd = shm_open(b->name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0)
        return base_fail_errno(errno, "shm_open %s", b->name);
    /* Sized and given its pages now: sizing alone takes none, and a
     * buffer larger than what is left would kill whoever first touched its
     * far end (SIGBUS). A fresh segment reads as zeros: no wipe is needed. */
    err = base_shm_reserve(fd, b->size, "a buffer");
    if (!err) {
        b->data =
            mmap(NULL, b->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (b->data == MAP_FAILED)
            err = base_fail_errno(errno, "mmap %s", b->name);
    }
    close(fd);
    if (err)
        shm_unlink(b->name);
    return err;
}

strata_err strata_worker_create_buffer(strata_worker *w, size_t nbytes,
                                       strata_buffer **out)
{
    strata_buffer *b;
    strata_err err;

    if (!w || !out)
        return base_fail_null("strata_worker_create_buffer", !w ? "w" : "out");
    err = worker_check_process(w, "strata_worker_create_buffer");
    if (err)
        return err;
    if (nbytes == 0)
        return base_fail(STRATA_EINVAL,
                         "strata_worker_create_buffer: nbytes is 0");
    err = worker_mem_reserve(&w->mem, nbytes);
    if (err)
        return err;
    b = base_calloc(1, sizeof(*b));
    if (!b) {
        worker_mem_unreserve(&w->mem, nbytes);
        return base_fail(STRATA_ENOMEM, "out of memory creating a buffer");
    }
    b->size = nbytes;
    b->owner = w;
    b->creator = w->creator;
    b->id = worker_buffer_next_id();
    chip_buffer_name(b->name, sizeof(b->name), w->creator, b->id);
    err = map_segment(b);
    if (!err) {
        err = worker_buffer_track(w, b);
        if (!err && (err = worker_mem_add(&w->mem, b)))
            untrack(w, b);
        if (err) {
            munmap(b->data, b->size);
            shm_unlink(b->name);
        }
    }
    if (err) {
        worker_mem_unreserve(&w->mem, nbytes);
        base_free(b);
        return err;
    }
    *out = b;
    return STRATA_OK;
}

strata_buffer *worker_buffer_find(strata_worker *w, int creator, uint64_t id)
{
    strata_buffer *found = NULL;

    pthread_mutex_lock(&w->buf_mu);
    for (size_t i = 0; i < w->num_bufs && !found; i++)
        if (w->bufs[i]->id == id && w->bufs[i]->creator == creator)
            found = w->bufs[i];
    pthread_mutex_unlock(&w->buf_mu);
    return found;
}

strata_err worker_buffer_import(strata_worker *w, int creator, uint64_t id,
                                size_t size, strata_buffer **out)
{
    strata_buffer *b = worker_buffer_find(w, creator, id);
    strata_err err;
    int fd;

    if (b) {
        if (b->size != size)
            return base_fail(STRATA_EPROTO,
                             "buffer %llu of process %d: size %zu, mapped "
                             "as %zu",
                             (unsigned long long)id, creator, size, b->size);
        *out = b;
        return STRATA_OK;
    }
    b = base_calloc(1, sizeof(*b));
    if (!b)
        return base_fail(STRATA_ENOMEM, "out of memory importing a buffer");
    b->id = id;
    b->size = size;
    b->owner = w;
    b->creator = creator;
    b->foreign = true;
    chip_buffer_name(b->name, sizeof(b->name), creator, id);
    fd = shm_open(b->name, O_RDWR, 0);
    if (fd < 0) {
        err = base_fail_errno(errno, "cannot open buffer %s", b->name);
        base_free(b);
        return err;
    }
    b->data = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (b->data == MAP_FAILED) {
        err = base_fail_errno(errno, "cannot map buffer %s", b->name);
        base_free(b);
        return err;
    }
    err = worker_buffer_track(w, b);
    if (err) {
        munmap(b->data, size);
        base_free(b);
        return err;
    }
    *out = b;
    return STRATA_OK;
}

void *strata_buffer_data(strata_buffer *b)
{
    if (!b)
        return NULL;
    /* A spilled buffer comes back first (LRU eviction). */
    if (!b->foreign && worker_mem_access(&b->owner->mem, b))
        return NULL;
    return b->data;
}

size_t strata_buffer_size(const strata_buffer *b)
{
    return b ? b->size : 0;
}

strata_err strata_buffer_release(strata_buffer *b)
{
    strata_worker *w;
    strata_err err;

    if (!b)
        return STRATA_OK;
    w = b->owner;
    /* A fork's copy must not unlink or free what the worker still uses. */
    if (worker_check_process(w, "strata_buffer_release"))
        return STRATA_ESTATE;
    if (w->sched) {
        err = orch_buffer_release(w->sched, b);
        if (err)
            return err;
        if (b->device)
            worker_device_buffer_free(b);
    }
    untrack(w, b);
    unmap_free(b);
    return STRATA_OK;
}

void worker_buffers_forget_inherited(strata_worker *w)
{
    for (size_t i = 0; i < w->num_bufs; i++)
        if (!w->bufs[i]->remote && !w->bufs[i]->device)
            munmap(w->bufs[i]->data, w->bufs[i]->size);
}

void worker_buffers_free_all(strata_worker *w)
{
    for (size_t i = 0; i < w->num_bufs; i++)
        unmap_free(w->bufs[i]);
    base_free(w->bufs);
    w->bufs = NULL;
    w->num_bufs = 0;
}

/* A global domain's window: named after its L4, whose pid may belong to
 * another pid namespace (or host) than this process's. */
static bool global_window(const char *name)
{
    unsigned long long id;

    return sscanf(name, "strata-%*u-%*d-d%llu-", &id) == 1 &&
           (id & GLOBAL_ALLOC_TAG);
}

/* Segments are named strata-<uid>-<pid>-...; a dead <pid> (gone, or a
 * zombie) can never come back for them. Global domains' windows are left alone:
 * their L4 may live where kill(pid, 0) cannot see it, and a member that has not
 * mapped yet would then create a new segment beside its peers'. Their nodes
 * unlink them (ABORT, or node teardown). */
void worker_reclaim_stale_segments(void)
{
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    unsigned uid;
    int pid;
    char path[300];

    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        if (sscanf(e->d_name, "strata-%u-%d-", &uid, &pid) != 2 ||
            uid != (unsigned)getuid() || pid == (int)getpid() || pid <= 0 ||
            global_window(e->d_name))
            continue;
        /* A zombie (an orphan whose reaper never comes) maps nothing. */
        if (!base_proc_gone(pid))
            continue;
        snprintf(path, sizeof(path), "/%s", e->d_name);
        if (shm_unlink(path) == 0)
            LOG_INFO("reclaimed stale segment %s of dead process %d", path,
                     pid);
    }
    closedir(d);
}
