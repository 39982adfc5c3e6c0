/* Device windows of the cuda-ipc profile. A member allocates its window
 * with cuMemCreate and a POSIX-fd shareable handle, maps it, zeroes it on
 * the device and only then exports it: its descriptor
 * (window_desc.h) names its pid and the fd. Each peer takes the fd out of
 * the exporter with pidfd_getfd (no socket to set up; the exporter allows
 * it with PR_SET_PTRACER for Yama), imports the handle, reserves address
 * space and maps it with cuMemMap + cuMemSetAccess for its own device.
 * Imports are kept per (domain, peer) in the domain's entry and released
 * exactly once, in reverse order, by window_release (unknown ids: no-op).
 * Built, not yet run on a GPU. */
#define _GNU_SOURCE
#include "cuda_chip.h"
#include "window_desc.h"

#include <errno.h>
#include <stdlib.h>
#include <strata/domain.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

struct cuda_map {
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    bool held, reserved, mapped;
};

struct cuda_win {
    uint64_t alloc_id;
    uint32_t rank, n;
    uint64_t size;         /* each rank's allocation, granularity rounded */
    uint64_t window_size;  /* as asked */
    int fd;                /* our exported handle, or -1 */
    struct cuda_map *maps; /* n entries; maps[rank] is our own */
    bool imported;
    strata_comm_context *ctx; /* host copy: every rank's device address */
    struct cuda_win *next;
};

static struct cuda_win *find(struct cuda_chip *c, uint64_t alloc_id)
{
    for (struct cuda_win *w = c->wins; w; w = w->next)
        if (w->alloc_id == alloc_id)
            return w;
    return NULL;
}

static void unmap_one(struct cuda_chip *c, struct cuda_win *w,
                      struct cuda_map *m)
{
    if (m->mapped)
        c->d->cuMemUnmap(m->va, w->size);
    if (m->reserved)
        c->d->cuMemAddressFree(m->va, w->size);
    if (m->held)
        c->d->cuMemRelease(m->h);
    memset(m, 0, sizeof(*m));
}

/* Reserves, maps and opens m (holding handle h) to this chip's device. */
static strata_err map_one(struct cuda_chip *c, struct cuda_win *w,
                          struct cuda_map *m, uint64_t granularity)
{
    CUmemAccessDesc access = {
        .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = c->ordinal},
        .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
    };
    CUresult r;

    r = c->d->cuMemAddressReserve(&m->va, w->size, granularity, 0, 0);
    if (r != CUDA_SUCCESS)
        return cuda_chip_fail(c, r, "cuMemAddressReserve");
    m->reserved = true;
    r = c->d->cuMemMap(m->va, w->size, 0, m->h, 0);
    if (r != CUDA_SUCCESS)
        return cuda_chip_fail(c, r, "cuMemMap");
    m->mapped = true;
    r = c->d->cuMemSetAccess(m->va, w->size, &access, 1);
    return r == CUDA_SUCCESS ? STRATA_OK
                             : cuda_chip_fail(c, r, "cuMemSetAccess");
}

static void free_win(struct cuda_chip *c, struct cuda_win *w)
{
    /* LIFO: the peers (highest rank first), our own window last. */
    for (uint32_t i = w->n; i-- > 0;)
        if (i != w->rank)
            unmap_one(c, w, &w->maps[i]);
    unmap_one(c, w, &w->maps[w->rank]);
    if (w->fd >= 0)
        close(w->fd);
    free(w->ctx);
    free(w->maps);
    free(w);
}

strata_err cuda_window_prepare(void *state, const struct chip_window_req *req,
                               struct chip_window_desc *desc_out)
{
    struct cuda_chip *c = state;
    CUmemAllocationProp prop = {
        .type = CU_MEM_ALLOCATION_TYPE_PINNED,
        .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
        .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = c->ordinal},
    };
    struct cuda_window_handle h = {.kind = CUDA_WINDOW_KIND_FD};
    size_t gran = 0;
    struct cuda_win *w;
    struct cuda_map *own;
    char why[192];
    strata_err err;
    CUresult r;

    if (req->rank_count == 0 || req->rank >= req->rank_count)
        return cuda_host_table->fail(STRATA_EPROTO,
                                     "window prepare: rank %u of %u", req->rank,
                                     req->rank_count);
    if (find(c, req->alloc_id))
        return cuda_host_table->fail(STRATA_EPROTO,
                                     "window %llu is prepared already",
                                     (unsigned long long)req->alloc_id);
    r = c->d->cuMemGetAllocationGranularity(&gran, &prop,
                                            CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (r != CUDA_SUCCESS)
        return cuda_chip_fail(c, r, "cuMemGetAllocationGranularity");
    w = calloc(1, sizeof(*w));
    if (w)
        w->maps = calloc(req->rank_count, sizeof(*w->maps));
    if (!w || !w->maps) {
        free(w);
        return cuda_host_table->fail(STRATA_ENOMEM,
                                     "window prepare: out of memory");
    }
    w->alloc_id = req->alloc_id;
    w->rank = req->rank;
    w->n = req->rank_count;
    w->window_size = req->window_size;
    w->size = cuda_window_round(req->window_size, gran);
    w->fd = -1;
    own = &w->maps[w->rank];
    if (!w->size) {
        err = cuda_host_table->fail(STRATA_EINVAL,
                                    "window of %llu bytes cannot be rounded "
                                    "to %zu",
                                    (unsigned long long)req->window_size, gran);
        goto fail;
    }
    r = c->d->cuMemCreate(&own->h, w->size, &prop, 0);
    if (r != CUDA_SUCCESS) {
        err = cuda_chip_fail(c, r, "cuMemCreate (POSIX fd handle)");
        goto fail;
    }
    own->held = true;
    err = map_one(c, w, own, gran);
    if (err)
        goto fail;
    /* Zero before export: a peer may signal into it once it sees it. */
    r = c->d->cuMemsetD8(own->va, 0, w->size); /* synchronous */
    if (r != CUDA_SUCCESS) {
        err = cuda_chip_fail(c, r, "cuMemsetD8 (zeroing the window)");
        goto fail;
    }
    r = c->d->cuMemExportToShareableHandle(
        &w->fd, own->h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    if (r != CUDA_SUCCESS) {
        w->fd = -1;
        err = cuda_chip_fail(c, r, "cuMemExportToShareableHandle");
        goto fail;
    }
    /* Peers are siblings, not descendants: let them take the fd. */
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    h.pid = (int32_t)getpid();
    h.fd = w->fd;
    h.ordinal = c->ordinal;
    h.granularity = gran;
    h.alloc_size = w->size;
    if (!cuda_window_desc_encode(&h, w->rank, w->n, desc_out, why,
                                 sizeof(why))) {
        err = cuda_host_table->fail(STRATA_EINVAL, "%s", why);
        goto fail;
    }
    w->next = c->wins;
    c->wins = w;
    return STRATA_OK;

fail:
    free_win(c, w);
    return err;
}

/* The fd of h in its exporter, as a new fd here. */
static strata_err take_fd(const struct cuda_window_handle *h, uint32_t rank,
                          int *fd_out)
{
    int pidfd = (int)syscall(SYS_pidfd_open, h->pid, 0);
    int fd;

    if (pidfd < 0)
        return cuda_host_table->fail(errno == ESRCH ? STRATA_EPEER
                                                    : STRATA_ESYS,
                                     "rank %u's window: pidfd_open(%d): %s",
                                     rank, (int)h->pid, strerror(errno));
    fd = (int)syscall(SYS_pidfd_getfd, pidfd, h->fd, 0);
    if (fd < 0) {
        int e = errno;

        close(pidfd);
        return cuda_host_table->fail(
            STRATA_ESYS, "rank %u's window: pidfd_getfd(pid %d, fd %d): %s%s",
            rank, (int)h->pid, (int)h->fd, strerror(e),
            e == EPERM ? " (ptrace access between chip processes is "
                         "refused: check kernel.yama.ptrace_scope)"
                       : "");
    }
    close(pidfd);
    *fd_out = fd;
    return STRATA_OK;
}

strata_err cuda_window_import(void *state, uint64_t alloc_id,
                              const struct chip_window_desc *table, uint32_t n,
                              struct chip_window_import_out *out)
{
    struct cuda_chip *c = state;
    struct cuda_win *w = find(c, alloc_id);
    struct cuda_window_handle h;
    strata_err err = STRATA_OK;
    char why[192];
    uint32_t i;

    if (!w)
        return cuda_host_table->fail(STRATA_EPROTO,
                                     "window %llu was not prepared here",
                                     (unsigned long long)alloc_id);
    if (w->imported) /* cached: peers are imported once per domain */
        goto done;
    if (n != w->n)
        return cuda_host_table->fail(STRATA_EPROTO,
                                     "window import: %u descriptors for %u "
                                     "ranks",
                                     n, w->n);
    for (i = 0; i < n && !err; i++) {
        struct cuda_map *m = &w->maps[i];
        void *osh;
        int fd = -1;
        CUresult r;

        if (!cuda_window_desc_decode(&table[i], i, n, &h, why, sizeof(why))) {
            err = cuda_host_table->fail(STRATA_EPROTO, "%s", why);
            break;
        }
        if (h.alloc_size != w->size) {
            err = cuda_host_table->fail(STRATA_EPROTO,
                                        "rank %u's window has %llu bytes, "
                                        "not %llu",
                                        i, (unsigned long long)h.alloc_size,
                                        (unsigned long long)w->size);
            break;
        }
        if (i == w->rank)
            continue;
        err = take_fd(&h, i, &fd);
        if (err)
            break;
        osh = (void *)(uintptr_t)fd;
        r = c->d->cuMemImportFromShareableHandle(
            &m->h, osh, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        close(fd);
        if (r != CUDA_SUCCESS) {
            err = cuda_chip_fail(c, r, "cuMemImportFromShareableHandle");
            break;
        }
        m->held = true;
        err = map_one(c, w, m, h.granularity);
    }
    if (err) {
        for (uint32_t k = n; k-- > 0;)
            if (k != w->rank)
                unmap_one(c, w, &w->maps[k]);
        return err;
    }
    w->ctx = calloc(1, sizeof(*w->ctx) + n * sizeof(void *));
    if (!w->ctx) {
        for (uint32_t k = n; k-- > 0;)
            if (k != w->rank)
                unmap_one(c, w, &w->maps[k]);
        return cuda_host_table->fail(STRATA_ENOMEM,
                                     "window import: out of memory");
    }
    w->ctx->version = STRATA_COMM_CONTEXT_VERSION;
    w->ctx->rank = w->rank;
    w->ctx->rank_count = n;
    w->ctx->window_size = w->window_size;
    for (i = 0; i < n; i++)
        w->ctx->window_base[i] = (void *)(uintptr_t)w->maps[i].va;
    w->imported = true;
done:
    out->device_ctx = (uint64_t)(uintptr_t)w->ctx;
    out->local_base = (uint64_t)w->maps[w->rank].va;
    return STRATA_OK;
}

strata_err cuda_window_release(void *state, uint64_t alloc_id)
{
    struct cuda_chip *c = state;

    for (struct cuda_win **p = &c->wins; *p; p = &(*p)->next) {
        if ((*p)->alloc_id == alloc_id) {
            struct cuda_win *w = *p;

            *p = w->next;
            free_win(c, w);
            break;
        }
    }
    return STRATA_OK;
}

void *cuda_window_local(void *state, uint64_t alloc_id, size_t *size_out)
{
    struct cuda_win *w = find(state, alloc_id);

    if (!w)
        return NULL;
    if (size_out)
        *size_out = (size_t)w->window_size;
    return (void *)(uintptr_t)w->maps[w->rank].va;
}

const struct strata_comm_context *cuda_comm_context(void *state,
                                                    uint64_t device_ctx)
{
    struct cuda_chip *c = state;

    for (struct cuda_win *w = c->wins; w; w = w->next)
        if (w->ctx && (uint64_t)(uintptr_t)w->ctx == device_ctx)
            return w->ctx;
    return NULL;
}

void cuda_windows_release_all(struct cuda_chip *c)
{
    while (c->wins) {
        struct cuda_win *w = c->wins;

        c->wins = w->next;
        free_win(c, w);
    }
}
