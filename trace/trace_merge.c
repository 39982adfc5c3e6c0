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

/* A record time in ns: ticks (tsc) through the anchor (tsc0, ns0) of h
 * and per_tick; then shifted (a remote node's clock offset). */
static uint64_t to_ns(const struct trace_hdr *h, bool tsc, uint64_t t,
                      double per_tick, int64_t shift)
{
    double ns = (double)t;

    if (tsc)
        ns = (double)h->ns0 + ((double)t - (double)h->tsc0) * per_tick;
    ns += (double)shift;
    /* A peer's record may hold any value: clamped, never converted out
     * of range (2^64 is exactly a double). */
    return !(ns > 0)                      ? 0
           : ns >= 18446744073709551616.0 ? UINT64_MAX
                                          : (uint64_t)ns;
}

void trace_rec_to_ns(const struct trace_hdr *h, struct trace_rec *o,
                     uint32_t kind, double per_tick, int64_t shift)
{
    bool tsc = h->clock == TRACE_CLOCK_TSC && !(kind & TRACE_F_NS);

    o->t0 = to_ns(h, tsc, o->t0, per_tick, shift);
    if (o->t1)
        o->t1 = to_ns(h, tsc, o->t1, per_tick, shift);
    if (o->c && (o->kind == TRACE_K_TASK || o->kind == TRACE_K_PTASK ||
                 o->kind == TRACE_K_RUNTASK ||
                 (o->kind == TRACE_K_SPAN && o->cat == TRACE_CAT_RUN)))
        o->c = to_ns(h, tsc, o->c, per_tick, shift);
    if (o->kind == TRACE_K_RUNTASK) {
        uint64_t submit;

        memcpy(&submit, o->name + TRACE_RUNTASK_NAME, sizeof(submit));
        submit = to_ns(h, tsc, submit, per_tick, shift);
        memcpy(o->name + TRACE_RUNTASK_NAME, &submit, sizeof(submit));
    }
}

void trace_runtask_split(const struct trace_rec *r, struct trace_rec *run,
                         struct trace_rec *task)
{
    *run = *r;
    run->kind = TRACE_K_RUN;
    run->cat = r->cat & TRACE_TASK_FAILED;
    run->lane = 0;
    run->c = 0;
    memset(run->name + TRACE_RUNTASK_NAME, 0,
           TRACE_NAME_MAX - TRACE_RUNTASK_NAME);
    *task = *run;
    task->kind = TRACE_K_TASK;
    task->cat = r->cat;
    task->lane = r->lane;
    memcpy(&task->t0, r->name + TRACE_RUNTASK_NAME, sizeof(task->t0));
    memcpy(&task->b, r->name + TRACE_RUNTASK_NAME + 8, sizeof(task->b));
    task->c = r->c;
}

bool trace_buf_load(const struct trace_hdr *h, uint32_t n, uint64_t tsc1,
                    uint64_t ns1, int64_t shift_ns, struct trace_buf *out)
{
    size_t size = sizeof(*h) + (size_t)n * sizeof(struct trace_rec);
    struct trace_hdr *c = base_malloc(size);
    double per_tick = 1.0;

    if (!c)
        return false;
    memcpy(c, h, sizeof(*h));
    if (h->clock == TRACE_CLOCK_TSC && tsc1 > h->tsc0 && ns1 > h->ns0)
        per_tick = (double)(ns1 - h->ns0) / (double)(tsc1 - h->tsc0);
    for (uint32_t i = 0; i < n; i++) {
        struct trace_rec *o = &c->recs[i];
        uint32_t kind = __atomic_load_n(&h->recs[i].kind, __ATOMIC_ACQUIRE);

        *o = h->recs[i];
        o->kind = kind & 0xffu;
        if (o->kind)
            trace_rec_to_ns(h, o, kind, per_tick, shift_ns);
    }
    c->clock = TRACE_CLOCK_NS;
    c->cap = n;
    c->head = n;
    out->h = c;
    out->n = n;
    return true;
}

/* Maps the buffer /dev/shm/name read-only and loads it into *b (times in
 * ns, see trace_buf_load); false (with a warning) for one that is not a
 * whole buffer of ours. */
static bool map_buf(const char *name, uint64_t tsc1, uint64_t ns1,
                    struct trace_buf *b)
{
    char path[300];
    struct stat st;
    struct trace_hdr *h;
    uint64_t n;
    bool ok;
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
    ok = trace_buf_load(h, n < h->cap ? (uint32_t)n : h->cap, tsc1, ns1, 0, b);
    munmap(h, (size_t)st.st_size);
    if (!ok)
        LOG_WARN("trace: no memory to read %s", name);
    return ok;
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

/* Loads every buffer of root's session from /dev/shm into bufs (up to
 * MERGE_MAX_BUFS; *n of them; none when bufs is NULL), removing each name
 * when unlink_them. */
static strata_err load_session(pid_t root, bool unlink_them,
                               struct trace_buf *bufs, size_t *n)
{
    char prefix[300], name[300];
    uint64_t tsc1, ns1;
    struct dirent *e;
    DIR *d;

    /* prefix without the leading slash: what readdir shows. */
    trace_shm_name(name, sizeof(name), root, 0);
    snprintf(prefix, sizeof(prefix), "%s", name + 1);
    prefix[strlen(prefix) - 1] = '\0'; /* drop the "0" */
    trace_clock_pair(&tsc1, &ns1);
    d = opendir("/dev/shm");
    if (!d)
        return base_fail_errno(errno, "trace: opendir /dev/shm");
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        snprintf(name, sizeof(name), "/%s", e->d_name);
        if (bufs && *n < MERGE_MAX_BUFS &&
            map_buf(e->d_name, tsc1, ns1, &bufs[*n]))
            (*n)++;
        if (unlink_them)
            shm_unlink(name);
    }
    closedir(d);
    return STRATA_OK;
}

strata_err trace_session_collect_root(pid_t root, trace_collect_fn fn,
                                      void *ctx)
{
    struct trace_buf *bufs = base_calloc(MERGE_MAX_BUFS, sizeof(*bufs));
    size_t n = 0;
    strata_err err = bufs ? load_session(root, false, bufs, &n)
                          : base_fail(STRATA_ENOMEM, "trace: buffer list");

    qsort(bufs, n, sizeof(*bufs), by_pid);
    for (size_t i = 0; i < n; i++) {
        const struct trace_hdr *h = bufs[i].h;
        char role[TRACE_ROLE_MAX];

        snprintf(role, sizeof(role), "%.*s", TRACE_ROLE_MAX - 1, h->role);
        if (!err)
            fn(ctx, h->pid, h->ppid, role, h->dropped, h->recs, bufs[i].n);
        base_free(bufs[i].h);
    }
    base_free(bufs);
    return err;
}

strata_err trace_merge_session(const char *path, pid_t root)
{
    /* No file (a node session's): the names only go. */
    struct trace_buf *bufs =
        path ? base_calloc(MERGE_MAX_BUFS, sizeof(*bufs)) : NULL;
    size_t n = 0;
    strata_err err = load_session(root, true, bufs, &n);

    if (path && !bufs)
        err = base_fail(STRATA_ENOMEM, "trace: buffer list");
    /* A node's processes, sent by the node (trace_remote.c). */
    if (!err && bufs)
        n += trace_remote_take(bufs + n, MERGE_MAX_BUFS - n);
    else
        trace_remote_take(NULL, 0);
    if (!err && path) {
        qsort(bufs, n, sizeof(*bufs), by_pid);
        err = write_file(path, bufs, n);
    }
    for (size_t i = 0; i < n; i++)
        base_free(bufs[i].h);
    base_free(bufs);
    return err;
}
