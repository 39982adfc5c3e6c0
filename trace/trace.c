/* Recording: the session, each process's buffer and the record path. */
#include "base/alloc.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "base/shm.h"
#include "trace_int.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct trace_hdr *trace_self;
bool trace_clock_tsc;

/* The session, inherited by every forked child. */
static struct {
    char *path;    /* the JSON file */
    pid_t root;    /* the process that merges; 0 = no session */
    uint32_t cap;  /* records per buffer */
    int refs;      /* trace_session_start calls not yet finished */
    uint64_t tsc0; /* the clock pair at the start (TSC clock) */
    uint64_t ns0;
} sess;

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

uint64_t trace_now_ns(void)
{
    return base_now_ns();
}

void trace_clock_pair(uint64_t *tsc, uint64_t *ns)
{
    uint64_t best = UINT64_MAX;

    *tsc = 0;
    *ns = base_now_ns();
#if defined(__x86_64__) || defined(__i386__)
    for (int i = 0; i < 7; i++) {
        uint64_t a = base_now_ns(), t = __builtin_ia32_rdtsc();
        uint64_t b = base_now_ns();

        if (b - a < best) {
            best = b - a;
            *tsc = t;
            *ns = a + (b - a) / 2;
        }
    }
#endif
}

/* Whether the first line of path starts with want. */
static bool file_has(const char *path, const char *key, const char *want)
{
    char line[4096];
    bool found = false;
    FILE *f = fopen(path, "re");

    if (!f)
        return false;
    while (!found && fgets(line, sizeof(line), f))
        if (strncmp(line, key, strlen(key)) == 0)
            found = strstr(line, want) != NULL;
    fclose(f);
    return found;
}

/* The TSC as the record clock: x86, the kernel's clocksource (so it
 * trusts every CPU's to agree), constant rate, running in every sleep
 * state; STRATA_TRACE_CLOCK=monotonic says no. */
static bool tsc_wanted(void)
{
#if defined(__x86_64__) || defined(__i386__)
    const char *v = getenv("STRATA_TRACE_CLOCK");

    if (v && strcmp(v, "monotonic") == 0)
        return false;
    return file_has("/sys/devices/system/clocksource/clocksource0/"
                    "current_clocksource",
                    "tsc", "tsc") &&
           file_has("/proc/cpuinfo", "flags", " constant_tsc") &&
           file_has("/proc/cpuinfo", "flags", " nonstop_tsc");
#else
    return false;
#endif
}

void trace_shm_name(char *out, size_t cap, pid_t root, pid_t pid)
{
    snprintf(out, cap, "/strata-%u-%d-trace-%d", (unsigned)getuid(), (int)root,
             (int)pid);
}

/* Records a thread claims from its process's buffer at once: one atomic
 * add per run of them, not per record. A thread that stops recording
 * leaves the rest of its run unwritten (kind 0, which the merge skips). */
#define TRACE_RUN_RECS 32u

/* Bumped whenever trace_self changes, so that a thread's claimed run of
 * an earlier buffer (or of its parent's, after fork) is never used. */
static uint64_t buf_gen;

/* This thread's claimed run [next, end) of the buffer of generation gen;
 * initial-exec: no call to reach it from the shared library. */
static __thread struct {
    uint64_t gen;
    uint32_t next, end;
} mine __attribute__((tls_model("initial-exec")));

/* A record's index, or UINT32_MAX with the record counted dropped. */
static uint32_t claim(struct trace_hdr *h)
{
    uint64_t gen = __atomic_load_n(&buf_gen, __ATOMIC_RELAXED), i;

    if (__builtin_expect(mine.gen == gen && mine.next < mine.end, 1))
        return mine.next++;
    i = __atomic_fetch_add(&h->head, TRACE_RUN_RECS, __ATOMIC_RELAXED);
    if (i >= h->cap) {
        __atomic_fetch_add(&h->dropped, 1, __ATOMIC_RELAXED);
        return UINT32_MAX;
    }
    mine.gen = gen;
    mine.next = (uint32_t)i + 1;
    mine.end =
        i + TRACE_RUN_RECS < h->cap ? (uint32_t)(i + TRACE_RUN_RECS) : h->cap;
    return (uint32_t)i;
}

/* A claimed record with its common fields set (kind not yet: the caller
 * publishes it last), or NULL: not tracing, or counted dropped. */
static inline struct trace_rec *fill(uint16_t cat, uint16_t lane, uint64_t t0,
                                     uint64_t t1, uint64_t a, uint64_t b,
                                     uint64_t c, uint64_t d)
{
    struct trace_hdr *h = __atomic_load_n(&trace_self, __ATOMIC_ACQUIRE);
    struct trace_rec *r;
    uint32_t i;

    if (!h)
        return NULL;
    i = claim(h);
    if (i == UINT32_MAX)
        return NULL;
    r = &h->recs[i];
    r->cat = cat;
    r->lane = lane;
    r->t0 = t0;
    r->t1 = t1;
    r->a = a;
    r->b = b;
    r->c = c;
    r->d = d;
    return r;
}

void trace_put(enum trace_kind kind, uint16_t cat, uint16_t lane, uint64_t t0,
               uint64_t t1, uint64_t a, uint64_t b, uint64_t c, uint64_t d,
               const char *name, bool name_array)
{
    struct trace_rec *r = fill(cat, lane, t0, t1, a, b, c, d);

    if (!r)
        return;
    if (name && name_array) {
        /* A fixed-size copy: no length to measure first. */
        memcpy(r->name, name, TRACE_NAME_MAX);
        r->name[TRACE_NAME_MAX - 1] = '\0';
    } else if (name) {
        size_t len = strnlen(name, TRACE_NAME_MAX - 1);

        memcpy(r->name, name, len);
        r->name[len] = '\0';
    }
    __atomic_store_n(&r->kind, (uint32_t)kind, __ATOMIC_RELEASE);
}

void trace_put_runtask(uint16_t cat, uint16_t lane, uint64_t t0, uint64_t t1,
                       uint64_t run_id, uint64_t bytes, uint64_t key,
                       uint64_t submit, uint64_t post, uint64_t seq,
                       const char *name_array)
{
    struct trace_rec *r = fill(cat, lane, t0, t1, run_id, bytes, post, key);

    if (!r)
        return;
    if (name_array)
        memcpy(r->name, name_array, TRACE_RUNTASK_NAME);
    else
        r->name[0] = '\0';
    r->name[TRACE_RUNTASK_NAME - 1] = '\0';
    memcpy(r->name + TRACE_RUNTASK_NAME, &submit, sizeof(submit));
    memcpy(r->name + TRACE_RUNTASK_NAME + 8, &seq, sizeof(seq));
    __atomic_store_n(&r->kind, (uint32_t)TRACE_K_RUNTASK, __ATOMIC_RELEASE);
}

/* Points trace_self at h (or nothing), retiring every thread's claim. */
static void set_self(struct trace_hdr *h)
{
    /* The generation first: a thread that sees h sees the new one. */
    __atomic_fetch_add(&buf_gen, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&trace_self, h, __ATOMIC_RELEASE);
}

/* A forked child records nothing into its parent's buffer: it opens its
 * own (trace_proc_open) or stays silent. */
static void forget_in_child(void)
{
    set_self(NULL);
}

static void register_atfork(void)
{
    if (pthread_atfork(NULL, NULL, forget_in_child) != 0)
        LOG_WARN("trace: pthread_atfork failed; children share a buffer");
}

static uint32_t events_wanted(void)
{
    const char *v = getenv("STRATA_TRACE_EVENTS");
    char *end;
    unsigned long n;

    if (!v || !*v)
        return TRACE_DEFAULT_EVENTS;
    errno = 0;
    n = strtoul(v, &end, 10);
    if (errno || *end || n < 16 || n > TRACE_MAX_EVENTS) {
        LOG_WARN("trace: STRATA_TRACE_EVENTS=%s is not 16..%u; using %u", v,
                 TRACE_MAX_EVENTS, TRACE_DEFAULT_EVENTS);
        return TRACE_DEFAULT_EVENTS;
    }
    return (uint32_t)n;
}

static size_t buf_size(uint32_t cap)
{
    return sizeof(struct trace_hdr) + (size_t)cap * sizeof(struct trace_rec);
}

/* Writes every page of the new buffer once (they read as zeros; writing
 * zeros keeps them so). MAP_POPULATE maps a shared mapping's pages for
 * reading only: without this, a record's first store to each page would
 * take a write fault on the task's path, about 30 us on a loaded VM. */
static void prefault(void *p, size_t size)
{
    volatile char *c = p;
    long page = sysconf(_SC_PAGESIZE);

    for (size_t off = 0; off<size; off += page> 0 ? (size_t)page : 4096)
        c[off] = 0;
}

/* Makes this process's buffer and points trace_self at it. */
static strata_err open_buf(const char *role)
{
    char name[96];
    size_t size = buf_size(sess.cap);
    pid_t me = getpid();
    struct trace_hdr *h;
    strata_err err;
    int fd;

    trace_shm_name(name, sizeof(name), sess.root, me);
    fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return base_fail_errno(errno, "trace: shm_open %s", name);
    err = base_shm_reserve(fd, size, "trace buffer");
    if (err)
        goto err_unlink;
    /* Populated now: no page fault on a record's first touch later. */
    h = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd,
             0);
    if (h == MAP_FAILED) {
        err = base_fail_errno(errno, "trace: mmap of %zu bytes", size);
        goto err_unlink;
    }
    close(fd);
    prefault(h, size);
    h->version = TRACE_VERSION;
    h->cap = sess.cap;
    h->rec_size = sizeof(struct trace_rec);
    h->pid = (int32_t)me;
    h->ppid = (int32_t)getppid();
    h->clock = trace_clock_tsc ? TRACE_CLOCK_TSC : TRACE_CLOCK_NS;
    h->tsc0 = sess.tsc0;
    h->ns0 = sess.ns0;
    snprintf(h->role, sizeof(h->role), "%s", role);
    __atomic_store_n(&h->magic, TRACE_MAGIC, __ATOMIC_RELEASE);
    set_self(h);
    return STRATA_OK;

err_unlink:
    close(fd);
    shm_unlink(name);
    return err;
}

strata_err trace_session_start(const char *path, const char *role)
{
    strata_err err;

    if (path && !*path)
        return base_fail(STRATA_EINVAL, "trace: empty trace path");
    if (sess.root == getpid()) {
        if (path && sess.path && strcmp(path, sess.path) != 0)
            LOG_WARN("trace: a session to %s is open; %s is not written",
                     sess.path, path);
        sess.refs++;
        return STRATA_OK;
    }
    pthread_once(&atfork_once, register_atfork);
    /* A session inherited from the parent is not this process's. */
    base_free(sess.path);
    sess.path = path ? base_strdup(path) : NULL;
    if (path && !sess.path)
        return base_fail(STRATA_ENOMEM, "trace: path");
    sess.root = getpid();
    sess.cap = events_wanted();
    trace_clock_tsc = tsc_wanted();
    trace_clock_pair(&sess.tsc0, &sess.ns0);
    err = open_buf(role);
    if (err) {
        base_free(sess.path);
        sess.path = NULL;
        sess.root = 0;
        return err;
    }
    sess.refs = 1;
    return STRATA_OK;
}

void trace_proc_open(const char *fmt, ...)
{
    char role[TRACE_ROLE_MAX];
    va_list ap;

    set_self(NULL);
    if (!sess.root)
        return;
    va_start(ap, fmt);
    vsnprintf(role, sizeof(role), fmt, ap);
    va_end(ap);
    if (open_buf(role) != STRATA_OK)
        LOG_WARN("trace: %s records nothing: %s", role, strata_errmsg());
}

strata_err trace_session_collect(trace_collect_fn fn, void *ctx)
{
    if (!sess.root || sess.root != getpid())
        return base_fail(STRATA_ESTATE, "trace: no session in this process");
    return trace_session_collect_root(sess.root, fn, ctx);
}

strata_err trace_session_finish(void)
{
    strata_err err;

    if (!sess.root || sess.root != getpid() || --sess.refs > 0)
        return STRATA_OK;
    if (trace_self) {
        struct trace_hdr *h = trace_self;

        /* Off first: the merge reads this buffer from /dev/shm. */
        set_self(NULL);
        munmap(h, buf_size(h->cap));
    }
    err = trace_merge_session(sess.path, sess.root);
    base_free(sess.path);
    sess.path = NULL;
    sess.root = 0;
    return err;
}
