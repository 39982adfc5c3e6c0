/* Remote nodes' records, received by a traced L4 over the wire: kept as
 * buffers of their own until the merge. */
#include "base/alloc.h"
#include "base/log.h"
#include "trace_int.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

/* Remote pids move here: 0x40000000 + node * 2^22 + pid (Linux pids stay
 * below 2^22), so that no two hosts' processes share a pid in the JSON. */
#define REMOTE_PID_BASE 0x40000000
#define REMOTE_PID_BITS 22
#define REMOTE_NODES_MAX 255u
#define REMOTE_BUFS_MAX 4096u

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct trace_buf bufs[REMOTE_BUFS_MAX]; /* under mu */
static size_t num_bufs;

static int32_t remote_pid(unsigned node, int32_t pid)
{
    return REMOTE_PID_BASE + (int32_t)(node << REMOTE_PID_BITS) +
           (pid & ((1 << REMOTE_PID_BITS) - 1));
}

/* The buffer of pid, made with its header when new; NULL when out of
 * room or memory. Under mu. */
static struct trace_buf *buf_of(int32_t pid, int32_t ppid, const char *role,
                                uint64_t dropped)
{
    struct trace_hdr *h;

    for (size_t i = 0; i < num_bufs; i++)
        if (bufs[i].h->pid == pid) {
            bufs[i].h->dropped += dropped;
            return &bufs[i];
        }
    if (num_bufs == REMOTE_BUFS_MAX)
        return NULL;
    h = base_calloc(1, sizeof(*h));
    if (!h)
        return NULL;
    h->magic = TRACE_MAGIC;
    h->version = TRACE_VERSION;
    h->rec_size = sizeof(struct trace_rec);
    h->pid = pid;
    h->ppid = ppid;
    h->dropped = dropped;
    h->clock = TRACE_CLOCK_NS;
    snprintf(h->role, sizeof(h->role), "%s", role);
    bufs[num_bufs] = (struct trace_buf){.h = h, .n = 0};
    return &bufs[num_bufs++];
}

/* Appends n records to b, shifted; false when out of memory. */
static bool append(struct trace_buf *b, const void *recs, size_t n,
                   int64_t shift)
{
    static const struct trace_hdr ns_clock = {.clock = TRACE_CLOCK_NS};
    size_t total = (size_t)b->n + n;
    struct trace_hdr *h;

    if (total > TRACE_MAX_EVENTS)
        return false;
    h = base_realloc(b->h, sizeof(*h) + total * sizeof(struct trace_rec));
    if (!h)
        return false;
    memcpy(&h->recs[b->n], recs, n * sizeof(struct trace_rec));
    for (size_t i = b->n; i < total; i++) {
        struct trace_rec *r = &h->recs[i];
        uint32_t kind = r->kind;

        r->kind = kind & 0xffu;
        if (r->kind)
            trace_rec_to_ns(&ns_clock, r, kind, 1.0, shift);
    }
    h->cap = (uint32_t)total;
    h->head = total;
    b->h = h;
    b->n = (uint32_t)total;
    return true;
}

void trace_remote_add(unsigned node, int32_t session_pid, int32_t pid,
                      int32_t ppid, const char *role, uint64_t dropped,
                      const void *recs, size_t n, int64_t shift_ns)
{
    char name[TRACE_ROLE_MAX];
    struct trace_buf *b;
    bool ok;

    if (node > REMOTE_NODES_MAX || pid <= 0)
        return;
    snprintf(name, sizeof(name), "%s", role);
    if (pid == session_pid) {
        snprintf(name, sizeof(name), "node %u (L3)", node);
        ppid = (int32_t)getpid();
    } else {
        ppid = remote_pid(node, ppid);
    }
    pthread_mutex_lock(&mu);
    b = buf_of(remote_pid(node, pid), ppid, name, dropped);
    ok = b && append(b, recs, n, shift_ns);
    pthread_mutex_unlock(&mu);
    if (!ok)
        LOG_WARN("trace: %zu records of node %u's pid %d dropped (no room)", n,
                 node, (int)pid);
}

size_t trace_remote_take(struct trace_buf *out, size_t cap)
{
    size_t n = 0;

    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < num_bufs; i++) {
        if (out && n < cap)
            out[n++] = bufs[i];
        else
            base_free(bufs[i].h);
    }
    num_bufs = 0;
    pthread_mutex_unlock(&mu);
    return n;
}
