/* Windows on the sim backend: each member creates one POSIX shm segment
 * (zero because it is freshly truncated), exports its name, and maps every
 * peer's segment on import. The context a kernel reads lists every rank's
 * window as mapped in this process. */
#include "sim_window.h"
#include "base/alloc.h"
#include "base/err.h"
#include "base/fault.h"
#include "base/shm.h"
#include "sim/sim.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <strata/domain.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* device_ctx = tag | allocation id: allocation ids are never reused, so a
 * freed domain's context answers NULL rather than a newer domain's. */
#define SIM_CTX_TAG (1ull << 63)

struct sim_window {
    uint64_t alloc_id;
    uint32_t rank;
    uint32_t rank_count;
    size_t mapping_size;
    void *own;
    void **peers;             /* rank_count mappings once imported */
    strata_comm_context *ctx; /* once imported */
    bool adopted;             /* peers mapped inside the reserved range */
    struct sim_window *next;
};

void sim_window_name(char *out, size_t cap, int creator, uint64_t alloc_id,
                     uint32_t rank, uint32_t token)
{
    if (token)
        snprintf(out, cap, "/strata-%u-%d-d%llu-r%u-%08x", (unsigned)getuid(),
                 creator, (unsigned long long)alloc_id, rank, token);
    else
        snprintf(out, cap, "/strata-%u-%d-d%llu-r%u", (unsigned)getuid(),
                 creator, (unsigned long long)alloc_id, rank);
}

static size_t page_round(size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);

    /* Past the last page: no mapping that large exists (mmap refuses). */
    if (n > SIZE_MAX - page + 1)
        return SIZE_MAX;
    return (n + page - 1) / page * page;
}

static struct sim_window *find(struct sim_state *s, uint64_t alloc_id)
{
    for (struct sim_window *w = s->windows; w; w = w->next)
        if (w->alloc_id == alloc_id)
            return w;
    return NULL;
}

static strata_err map_name(const char *name, size_t size, bool create,
                           void **out)
{
    int fd = shm_open(name, O_RDWR | (create ? O_CREAT | O_EXCL : 0), 0600);
    strata_err err = STRATA_OK;
    void *p;

    /* The name carries this live worker's pid and an allocation id it has
     * never used: an existing segment is the leftover of a dead process
     * whose pid was reused. */
    if (fd < 0 && create && errno == EEXIST && shm_unlink(name) == 0)
        fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0)
        return base_fail_errno(errno, "shm_open %s", name);
    /* A freshly sized segment reads as zeros, so the window is zero
     * before any peer can open it; no second wipe is paid for. Its pages
     * are reserved now, so a window /dev/shm cannot hold is refused here
     * rather than a SIGBUS in a kernel. */
    if (create &&
        (err = base_shm_reserve(fd, size, "a domain window")) != STRATA_OK)
        goto out;
    p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        err = base_fail_errno(errno, "mmap %s", name);
    else
        *out = p;
out:
    close(fd);
    if (err && create)
        shm_unlink(name);
    return err;
}

strata_err sim_window_prepare(void *state, const struct chip_window_req *req,
                              struct chip_window_desc *desc)
{
    struct sim_state *s = state;
    struct sim_window *w;
    strata_err err;

    if (find(s, req->alloc_id))
        return base_fail(STRATA_EEXIST, "window %llu already prepared",
                         (unsigned long long)req->alloc_id);
    if (BASE_FAULT("window.prepare"))
        return base_fail(STRATA_EIO, "fault point window.prepare");
    w = base_calloc(1, sizeof(*w));
    if (!w)
        return base_fail(STRATA_ENOMEM, "out of memory for a window");
    w->alloc_id = req->alloc_id;
    w->rank = req->rank;
    w->rank_count = req->rank_count;
    w->mapping_size = page_round(req->window_size);
    memset(desc, 0, sizeof(*desc));
    sim_window_name(desc->handle, sizeof(desc->handle), req->creator_pid,
                    req->alloc_id, req->rank, 0);
    err = map_name(desc->handle, w->mapping_size, true, &w->own);
    if (err) {
        base_free(w);
        return err;
    }
    desc->version = CHIP_WINDOW_DESC_VERSION;
    desc->rank = req->rank;
    desc->rank_count = req->rank_count;
    desc->mapping_size = w->mapping_size;
    snprintf(desc->profile, sizeof(desc->profile), "sim");
    w->next = s->windows;
    s->windows = w;
    return STRATA_OK;
}

static strata_err check_table(const struct sim_window *w,
                              const struct chip_window_desc *t, uint32_t n)
{
    if (n != w->rank_count)
        return base_fail(STRATA_EPROTO,
                         "descriptor table has %u entries, "
                         "expected %u",
                         n, w->rank_count);
    for (uint32_t r = 0; r < n; r++) {
        if (t[r].version != CHIP_WINDOW_DESC_VERSION || t[r].rank != r ||
            t[r].mapping_size != w->mapping_size ||
            strcmp(t[r].profile, "sim") != 0 ||
            !memchr(t[r].handle, '\0', sizeof(t[r].handle)))
            return base_fail(STRATA_EPROTO,
                             "descriptor for rank %u is inconsistent", r);
    }
    return STRATA_OK;
}

/* Gives an adopted window's addresses back to the reserved range; false
 * when they could not be reserved again (the worker must not hand them
 * out: the kernel may put other mappings in the hole). */
static bool unreserve_fixed(void *p, size_t size)
{
    if (mmap(p, size, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1,
             0) != MAP_FAILED)
        return true;
    munmap(p, size);
    return false;
}

/* False when an adopted window's addresses were lost to the range. */
static bool unmap_peers(struct sim_window *w)
{
    bool ok = true;

    for (uint32_t r = 0; w->peers && r < w->rank_count; r++) {
        if (!w->peers[r] || (r == w->rank && !w->adopted))
            continue;
        if (w->adopted)
            ok &= unreserve_fixed(w->peers[r], w->mapping_size);
        else
            munmap(w->peers[r], w->mapping_size);
    }
    base_free(w->peers);
    w->peers = NULL;
    return ok;
}

strata_err sim_window_import(void *state, uint64_t alloc_id,
                             const struct chip_window_desc *table, uint32_t n,
                             struct chip_window_import_out *out)
{
    struct sim_state *s = state;
    struct sim_window *w = find(s, alloc_id);
    strata_err err;

    if (!w)
        return base_fail(STRATA_ENOENT, "window %llu was not prepared here",
                         (unsigned long long)alloc_id);
    err = check_table(w, table, n);
    if (err)
        return err;
    if (BASE_FAULT("window.import"))
        return base_fail(STRATA_EIO, "fault point window.import");
    w->peers = base_calloc(n, sizeof(void *));
    w->ctx = base_calloc(1, sizeof(*w->ctx) + n * sizeof(void *));
    if (!w->peers || !w->ctx) {
        err = base_fail(STRATA_ENOMEM, "out of memory importing %u peers", n);
        goto fail;
    }
    for (uint32_t r = 0; r < n; r++) {
        if (r == w->rank)
            w->peers[r] = w->own;
        else if ((err = map_name(table[r].handle, w->mapping_size, false,
                                 &w->peers[r])) != STRATA_OK)
            goto fail;
        w->ctx->window_base[r] = w->peers[r];
    }
    w->ctx->version = STRATA_COMM_CONTEXT_VERSION;
    w->ctx->rank = w->rank;
    w->ctx->rank_count = n;
    w->ctx->window_size = w->mapping_size;
    out->device_ctx = SIM_CTX_TAG | w->alloc_id;
    out->local_base = (uint64_t)(uintptr_t)w->own;
    return STRATA_OK;
fail:
    unmap_peers(w);
    base_free(w->ctx);
    w->ctx = NULL;
    return err;
}

static bool free_window(struct sim_window *w)
{
    bool ok = unmap_peers(w);

    if (!w->adopted)
        munmap(w->own, w->mapping_size);
    base_free(w->ctx);
    base_free(w);
    return ok;
}

strata_err sim_window_release(void *state, uint64_t alloc_id)
{
    struct sim_state *s = state;

    if (BASE_FAULT("window.release"))
        return base_fail(STRATA_EIO, "fault point window.release");
    for (struct sim_window **pp = &s->windows; *pp; pp = &(*pp)->next) {
        if ((*pp)->alloc_id == alloc_id) {
            struct sim_window *w = *pp;

            *pp = w->next;
            if (!free_window(w))
                return base_fail(STRATA_ESYS,
                                 "window %llu: its addresses could not be "
                                 "reserved again",
                                 (unsigned long long)alloc_id);
            break;
        }
    }
    return STRATA_OK;
}

void sim_windows_release_all(struct sim_state *s)
{
    while (s->windows) {
        struct sim_window *w = s->windows;

        s->windows = w->next;
        free_window(w);
    }
}

void *sim_window_local(void *state, uint64_t alloc_id, size_t *size_out)
{
    struct sim_window *w = find(state, alloc_id);

    if (!w)
        return NULL;
    *size_out = w->mapping_size;
    return w->own;
}

const strata_comm_context *sim_comm_context(void *state, uint64_t device_ctx)
{
    struct sim_state *s = state;

    /* A typed lookup: a stale or foreign value answers NULL, never a
     * dangling pointer. */
    for (struct sim_window *w = s->windows; w; w = w->next)
        if (w->ctx && (SIM_CTX_TAG | w->alloc_id) == device_ctx)
            return w->ctx;
    return NULL;
}

/* ---- windows the worker makes (no round trip to the members) ---------- */

uint64_t sim_window_mapping_size(uint64_t window_size)
{
    return page_round(window_size);
}

/* The members create the segments when they first map them
 * (sim_window_adopt) and reserve their pages then. Here, once per domain
 * (at rank 0: every rank of a sim domain is on this host), the windows of
 * every rank are checked against the space /dev/shm has free, so that a
 * domain that cannot fit is refused at allocation, not when a member maps
 * it. */
strata_err sim_host_window_create(const struct chip_window_req *req,
                                  uint64_t *device_ctx_out)
{
    if (BASE_FAULT("window.prepare"))
        return base_fail(STRATA_EIO, "fault point window.prepare");
    if (req->rank == 0) {
        uint64_t map = page_round(req->window_size);
        uint32_t n = req->rank_count ? req->rank_count : 1;
        strata_err err;
        char what[96];

        size_t page = (size_t)sysconf(_SC_PAGESIZE);

        snprintf(what, sizeof(what),
                 "%u domain windows (%llu bytes each) and their control page",
                 n, (unsigned long long)map);
        if (map > (SIZE_MAX - page) / n)
            return base_fail(STRATA_ENOMEM, "%s: more than memory holds", what);
        /* The control page too: the first member to map makes it. */
        err = base_shm_check((size_t)(map * n) + page, what);
        if (err)
            return err;
    }
    *device_ctx_out = SIM_CTX_TAG | req->alloc_id;
    return STRATA_OK;
}

void sim_host_window_name(const struct chip_window_req *req, char *out,
                          size_t cap)
{
    sim_window_name(out, cap, req->creator_pid, req->alloc_id, req->rank,
                    req->name_token);
}

void sim_host_window_unlink(const struct chip_window_req *req)
{
    char name[CHIP_WINDOW_HANDLE_MAX];

    sim_host_window_name(req, name, sizeof(name));
    shm_unlink(name); /* ENOENT: never made, or gone already */
}

/* Opens name, creating it if no member has yet, and maps it at at. A new
 * segment reads as zeros; extending one to the size it already has (a
 * peer made it first, and may have written) changes nothing. */
static strata_err map_fixed(const char *name, void *at, size_t size)
{
    int fd = shm_open(name, O_RDWR | O_CREAT, 0600);
    struct stat st;
    strata_err err;
    void *p;

    if (fd < 0)
        return base_fail_errno(errno, "shm_open %s", name);
    /* Whoever finds it short sizes it and reserves its pages (two members
     * racing both do, harmlessly); a window at its size was reserved by
     * the member that made it. */
    if (fstat(fd, &st) != 0)
        err = base_fail_errno(errno, "fstat %s", name);
    else if ((uint64_t)st.st_size < size)
        err = base_shm_reserve(fd, size, "a domain window");
    else
        err = STRATA_OK;
    if (err) {
        close(fd);
        return err;
    }
    /* at lies in the range this process reserved: MAP_FIXED replaces
     * only that reservation. */
    p = mmap(at, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return base_fail_errno(errno, "mmap %s", name);
    return STRATA_OK;
}

strata_err sim_window_adopt(void *state, const struct chip_window_req *req,
                            uint64_t base, uint64_t mapping_size)
{
    struct sim_state *s = state;
    uint32_t n = req->rank_count;
    char name[CHIP_WINDOW_HANDLE_MAX];
    struct sim_window *w;
    strata_err err = STRATA_OK;

    if (find(s, req->alloc_id))
        return base_fail(STRATA_EEXIST, "window %llu already here",
                         (unsigned long long)req->alloc_id);
    if (BASE_FAULT("window.import"))
        return base_fail(STRATA_EIO, "fault point window.import");
    w = base_calloc(1, sizeof(*w));
    if (w) {
        w->peers = base_calloc(n, sizeof(void *));
        w->ctx = base_calloc(1, sizeof(*w->ctx) + n * sizeof(void *));
    }
    if (!w || !w->peers || !w->ctx) {
        if (w) {
            base_free(w->peers);
            base_free(w->ctx);
        }
        base_free(w);
        return base_fail(STRATA_ENOMEM, "out of memory adopting %u windows", n);
    }
    w->alloc_id = req->alloc_id;
    w->rank = req->rank;
    w->rank_count = n;
    w->mapping_size = mapping_size;
    w->adopted = true;
    for (uint32_t r = 0; r < n && !err; r++) {
        void *at = (void *)(uintptr_t)(base + (uint64_t)r * mapping_size);

        sim_window_name(name, sizeof(name), req->creator_pid, req->alloc_id, r,
                        req->name_token);
        err = map_fixed(name, at, mapping_size);
        if (!err) {
            w->peers[r] = at;
            w->ctx->window_base[r] = at;
        }
    }
    if (err) {
        unmap_peers(w);
        base_free(w->ctx);
        base_free(w);
        return err;
    }
    w->own = w->peers[w->rank];
    w->ctx->version = STRATA_COMM_CONTEXT_VERSION;
    w->ctx->rank = w->rank;
    w->ctx->rank_count = n;
    w->ctx->window_size = mapping_size;
    w->next = s->windows;
    s->windows = w;
    return STRATA_OK;
}
