/* The merged trace as Chrome/Perfetto trace-event JSON: one process per
 * buffer, named by its role; task runs as complete slices, orchestrator
 * views of tasks as async slices, dependency edges as flow arrows. */
#include "base/alloc.h"
#include "base/err.h"
#include "trace_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Thread ids of a process in the JSON: its lanes (enum trace_lane).
 * Tasks a process runs at once (a node session's orch tasks) take a lane
 * each so that their slices nest: lane k > 0 is thread TID_MORE_TASKS + k. */
enum {
    TID_TASKS = TRACE_LANE_TASKS,
    TID_MAILBOX = TRACE_LANE_MAILBOX,
    TID_WIRE = TRACE_LANE_WIRE,
    TID_MORE_TASKS = 100,
};

/* The thread a task that ran here (TRACE_K_RUN) is drawn on. */
static int run_tid(const struct trace_rec *r)
{
    return r->lane ? TID_MORE_TASKS + r->lane : TID_TASKS;
}

/* Where a task ran, found by its orchestrator's pid and its slot key. */
struct run_key {
    int32_t orch; /* the orchestrator's pid */
    int32_t pid;  /* who ran it */
    int32_t tid;  /* on which of its threads (run_tid) */
    uint64_t slot_key;
    uint64_t t0, t1;
};

struct writer {
    FILE *f;
    bool first; /* no event written yet */
    /* The extra task lanes named so far, of process named_pid. */
    int named_pid;
    uint64_t named_lanes;
    struct run_key *keys;
    size_t num_keys;
    uint64_t flows;    /* flow ids handed out */
    uint64_t unlinked; /* edges whose ends were not both found */
};

/* The length of the well-formed UTF-8 sequence at s (RFC 3629: no
 * overlong forms, no surrogates, nothing past U+10FFFF); 0 if there is
 * none, and *cut set when s holds a valid start of one that ends early. */
static size_t utf8_len(const unsigned char *s, bool *cut)
{
    size_t n = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : 2;
    unsigned char lo = 0x80, hi = 0xbf;

    *cut = false;
    if (s[0] < 0xc2 || s[0] > 0xf4)
        return 0;
    if (s[0] == 0xe0)
        lo = 0xa0; /* overlong */
    else if (s[0] == 0xed)
        hi = 0x9f; /* surrogates */
    else if (s[0] == 0xf0)
        lo = 0x90; /* overlong */
    else if (s[0] == 0xf4)
        hi = 0x8f; /* past U+10FFFF */
    for (size_t i = 1; i < n; i++) {
        if (s[i] == '\0') {
            *cut = true;
            return 0;
        }
        if (s[i] < (i == 1 ? lo : 0x80) || s[i] > (i == 1 ? hi : 0xbf))
            return 0;
    }
    return n;
}

/* A JSON string of s, a name as given (UTF-8). A character cut by the
 * fixed size of a record's name (TRACE_NAME_BYTES) is left out; any other
 * byte that is not UTF-8 becomes U+FFFD. */
static void put_str(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;

    fputc('"', f);
    while (*p) {
        size_t n;
        bool cut;

        if (*p < 0x80) {
            if (*p == '"' || *p == '\\')
                fprintf(f, "\\%c", *p);
            else if (*p < 0x20 || *p == 0x7f)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
            p++;
            continue;
        }
        n = utf8_len(p, &cut);
        if (cut)
            break;
        if (n) {
            fwrite(p, 1, n, f);
            p += n;
        } else {
            fputs("\\ufffd", f);
            p++;
        }
    }
    fputc('"', f);
}

/* A CLOCK_MONOTONIC time in the format's microseconds, exactly. */
static void put_us(FILE *f, const char *key, uint64_t ns)
{
    fprintf(f, ",\"%s\":%" PRIu64 ".%03u", key, ns / 1000,
            (unsigned)(ns % 1000));
}

static void begin(struct writer *w, const char *ph, int pid, int tid)
{
    fprintf(w->f, "%s\n{\"ph\":\"%s\",\"pid\":%d,\"tid\":%d",
            w->first ? "" : ",", ph, pid, tid);
    w->first = false;
}

static void meta(struct writer *w, int pid, int tid, const char *what,
                 const char *key, const char *text, long num)
{
    begin(w, "M", pid, tid);
    fprintf(w->f, ",\"name\":\"%s\",\"args\":{\"%s\":", what, key);
    if (text)
        put_str(w->f, text);
    else
        fprintf(w->f, "%ld", num);
    fputs("}}", w->f);
}

static const struct trace_buf *find_pid(const struct trace_buf *bufs, size_t n,
                                        int32_t pid)
{
    for (size_t i = 0; i < n; i++)
        if (bufs[i].h->pid == pid)
            return &bufs[i];
    return NULL;
}

/* "node 0 / chip 1": a role under its parent's, but for the parent at the
 * top of the tree (no parent of its own here). */
static void role_of(const struct trace_buf *bufs, size_t n,
                    const struct trace_buf *b, char *out, size_t cap)
{
    const struct trace_buf *p = find_pid(bufs, n, b->h->ppid);

    if (p && find_pid(bufs, n, p->h->ppid))
        snprintf(out, cap, "%.*s / %.*s", TRACE_ROLE_MAX, p->h->role,
                 TRACE_ROLE_MAX, b->h->role);
    else
        snprintf(out, cap, "%.*s", TRACE_ROLE_MAX, b->h->role);
}

static void name_process(struct writer *w, const struct trace_buf *bufs,
                         size_t n, size_t i)
{
    static const char *const lanes[TRACE_LANES] = {
        "tasks",         "mailbox",       "domains",      "remote frames",
        "orchestration", "halo exchange", "halo compute", "global domains"};
    char role[2 * TRACE_ROLE_MAX + 4];
    int pid = bufs[i].h->pid;

    role_of(bufs, n, &bufs[i], role, sizeof(role));
    meta(w, pid, 0, "process_name", "name", role, 0);
    meta(w, pid, 0, "process_sort_index", "sort_index", NULL, (long)i);
    for (int t = 0; t < TRACE_LANES; t++)
        meta(w, pid, t, "thread_name", "name", lanes[t], 0);
}

static void name_field(struct writer *w, const struct trace_rec *r,
                       const char *fallback)
{
    char name[TRACE_NAME_MAX];

    memcpy(name, r->name, sizeof(name));
    name[sizeof(name) - 1] = '\0';
    fputs(",\"name\":", w->f);
    put_str(w->f, name[0] ? name : fallback);
}

static void slice(struct writer *w, int pid, int tid, const char *cat,
                  const struct trace_rec *r, const char *fallback)
{
    begin(w, "X", pid, tid);
    fprintf(w->f, ",\"cat\":\"%s\"", cat);
    name_field(w, r, fallback);
    put_us(w->f, "ts", r->t0);
    put_us(w->f, "dur", r->t1 > r->t0 ? r->t1 - r->t0 : 0);
}

static void write_run(struct writer *w, int pid, const struct trace_rec *r)
{
    if (r->lane) { /* named where it first shows */
        char name[32];

        if (w->named_pid != pid) {
            w->named_pid = pid;
            w->named_lanes = 0;
        }
        if (r->lane < 64 && !(w->named_lanes & (1ull << r->lane))) {
            w->named_lanes |= 1ull << r->lane;
            snprintf(name, sizeof(name), "tasks %u", r->lane + 1u);
            meta(w, pid, run_tid(r), "thread_name", "name", name, 0);
        }
    }
    slice(w, pid, run_tid(r), "task", r, "task");
    fprintf(w->f,
            ",\"args\":{\"run\":%" PRIu64 ",\"slot\":%" PRIu64
            ",\"gen\":%" PRIu64 ",\"arg_bytes\":%" PRIu64 "%s}}",
            r->a, r->d >> 32, r->d & 0xffffffffu, r->b,
            r->cat & TRACE_TASK_FAILED ? ",\"failed\":true" : "");
}

static void write_task(struct writer *w, int pid, const struct trace_rec *r)
{
    static const char *const tgt[] = {"chip", "node", "sub"};
    unsigned cat = r->cat & ~TRACE_TASK_MARKS;
    const char *kind = cat < 3 ? tgt[cat] : "target";
    bool ran = !(r->cat & TRACE_TASK_NOT_RUN);
    /* A task that never ran waited all its time. */
    uint64_t posted = !ran                             ? r->t1
                      : r->c >= r->t0 && r->c <= r->t1 ? r->c
                                                       : r->t0;

    /* Async: tasks posted to one target overlap in time. */
    for (int end = 0; end < 2; end++) {
        begin(w, end ? "e" : "b", pid, TID_TASKS);
        fprintf(w->f, ",\"cat\":\"dispatch\",\"id\":\"0x%" PRIx64 "\"",
                ((uint64_t)(uint32_t)pid << 32) ^ r->b);
        name_field(w, r, "task");
        put_us(w->f, "ts", end ? r->t1 : r->t0);
        if (!end) {
            fprintf(w->f,
                    ",\"args\":{\"run\":%" PRIu64 ",\"task\":%" PRIu64
                    ",\"target\":\"%s %u\"",
                    r->a, r->b, kind, (unsigned)r->lane);
            put_us(w->f, "queue_wait_us", posted - r->t0);
            put_us(w->f, "run_us", r->t1 - posted);
            if (r->cat & TRACE_TASK_FAILED)
                fputs(",\"failed\":true", w->f);
            if (!ran)
                fputs(",\"ran\":false", w->f);
            fputc('}', w->f);
        }
        fputc('}', w->f);
    }
}

static int key_cmp(const void *x, const void *y)
{
    const struct run_key *a = x, *b = y;

    if (a->orch != b->orch)
        return a->orch < b->orch ? -1 : 1;
    return (a->slot_key > b->slot_key) - (a->slot_key < b->slot_key);
}

static const struct run_key *find_run(const struct writer *w, int32_t orch,
                                      uint64_t slot_key)
{
    struct run_key k = {.orch = orch, .slot_key = slot_key};

    return w->num_keys ? bsearch(&k, w->keys, w->num_keys, sizeof(k), key_cmp)
                       : NULL;
}

static void write_edge(struct writer *w, int pid, const struct trace_rec *r)
{
    const struct run_key *from = find_run(w, pid, r->a);
    const struct run_key *to = find_run(w, pid, r->b);
    uint64_t id, at;

    if (!from || !to) {
        w->unlinked++;
        return;
    }
    id = ++w->flows;
    /* Inside the producer's slice, at its end; the arrow ends at the
     * consumer's start ("bp":"e": bound to the slice around it). */
    at = from->t1 > from->t0 ? from->t1 - 1 : from->t0;
    begin(w, "s", from->pid, from->tid);
    fprintf(w->f, ",\"cat\":\"dep\",\"name\":\"dep\",\"id\":%" PRIu64, id);
    put_us(w->f, "ts", at);
    fputc('}', w->f);
    begin(w, "f", to->pid, to->tid);
    fprintf(w->f,
            ",\"cat\":\"dep\",\"name\":\"dep\",\"bp\":\"e\",\"id\":%" PRIu64,
            id);
    put_us(w->f, "ts", to->t0);
    fputc('}', w->f);
}

/* A run, from its orch fn's start to its fence: async, since runs of one
 * process may overlap (strata_worker_submit). */
static void write_run_span(struct writer *w, int pid, const struct trace_rec *r)
{
    uint64_t fn_end = r->c >= r->t0 && r->c <= r->t1 ? r->c : r->t1;

    for (int end = 0; end < 2; end++) {
        begin(w, end ? "e" : "b", pid, TRACE_LANE_ORCH);
        fprintf(w->f,
                ",\"cat\":\"run\",\"name\":\"run\",\"id\":\"0x%" PRIx64 "\"",
                ((uint64_t)(uint32_t)pid << 32) ^ r->a);
        put_us(w->f, "ts", end ? r->t1 : r->t0);
        if (!end) {
            fprintf(w->f, ",\"args\":{\"run\":%" PRIu64, r->a);
            put_us(w->f, "orch_fn_us", fn_end - r->t0);
            fputc('}', w->f);
        }
        fputc('}', w->f);
    }
}

/* One record of process pid, whose parent is ppid. */
static void write_rec(struct writer *w, int pid, int ppid,
                      const struct trace_rec *r)
{
    static const char *const cats[TRACE_CATS] = {"halo", "domain", "orch",
                                                 "gdomain"};

    switch (__atomic_load_n(&r->kind, __ATOMIC_ACQUIRE)) {
    case TRACE_K_RUN:
        write_run(w, pid, r);
        break;
    case TRACE_K_TASK:
        write_task(w, pid, r);
        break;
    case TRACE_K_PTASK: /* the parent's, recorded here */
        write_task(w, ppid, r);
        break;
    case TRACE_K_RUNTASK: {
        struct trace_rec run, task;

        trace_runtask_split(r, &run, &task);
        write_run(w, pid, &run);
        write_task(w, ppid, &task);
        break;
    }
    case TRACE_K_EDGE:
        write_edge(w, pid, r);
        break;
    case TRACE_K_WAKE:
        slice(w, pid, TID_MAILBOX, "mailbox", r, "parked");
        fputc('}', w->f);
        break;
    case TRACE_K_SPAN:
        if (r->cat == TRACE_CAT_RUN) {
            write_run_span(w, pid, r);
            break;
        }
        if (r->cat >= TRACE_CATS || r->lane >= TRACE_LANES)
            break;
        slice(w, pid, r->lane, cats[r->cat], r, cats[r->cat]);
        if (r->cat == TRACE_CAT_GDOMAIN)
            fprintf(w->f,
                    ",\"args\":{\"domain\":%" PRIu64 ",\"phase\":%" PRIu64
                    ",\"error\":%" PRId64 "}}",
                    r->a, r->b, (int64_t)r->c);
        else
            fprintf(w->f, ",\"args\":{\"a\":%" PRIu64 ",\"b\":%" PRIu64 "}}",
                    r->a, r->b);
        break;
    case TRACE_K_FRAME:
        begin(w, "i", pid, TID_WIRE);
        fprintf(w->f, ",\"s\":\"t\",\"cat\":\"wire\",\"name\":\"%s\"",
                r->b ? "frame sent" : "frame received");
        put_us(w->f, "ts", r->t0);
        fprintf(w->f, ",\"args\":{\"bytes\":%" PRIu64 ",\"type\":%" PRIu64 "}}",
                r->a, r->c);
        break;
    default:
        break; /* not written: its process died while writing it */
    }
}

/* Every TRACE_K_RUN (and TRACE_K_RUNTASK), keyed for the flow arrows. */
static strata_err index_runs(struct writer *w, const struct trace_buf *bufs,
                             size_t n)
{
    size_t total = 0;

    for (size_t i = 0; i < n; i++)
        total += bufs[i].n;
    w->keys = base_calloc(total ? total : 1, sizeof(*w->keys));
    if (!w->keys)
        return base_fail(STRATA_ENOMEM, "trace: %zu run keys", total);
    for (size_t i = 0; i < n; i++)
        for (uint32_t j = 0; j < bufs[i].n; j++) {
            const struct trace_rec *r = &bufs[i].h->recs[j];
            uint32_t kind = __atomic_load_n(&r->kind, __ATOMIC_ACQUIRE);

            if (kind != TRACE_K_RUN && kind != TRACE_K_RUNTASK)
                continue;
            w->keys[w->num_keys++] = (struct run_key){
                .orch = bufs[i].h->ppid,
                .pid = bufs[i].h->pid,
                .tid = kind == TRACE_K_RUN ? run_tid(r) : TID_TASKS,
                .slot_key = r->d,
                .t0 = r->t0,
                .t1 = r->t1};
        }
    qsort(w->keys, w->num_keys, sizeof(*w->keys), key_cmp);
    return STRATA_OK;
}

static void write_other(struct writer *w, const struct trace_buf *bufs,
                        size_t n)
{
    fprintf(w->f,
            "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{"
            "\"format\":\"strata.trace.v1\",\"clock\":\"CLOCK_MONOTONIC\","
            "\"flows\":%" PRIu64 ",\"edges_unlinked\":%" PRIu64
            ",\"dropped\":{",
            w->flows, w->unlinked);
    for (size_t i = 0; i < n; i++)
        fprintf(w->f, "%s\"%d\":%" PRIu64, i ? "," : "", bufs[i].h->pid,
                __atomic_load_n(&bufs[i].h->dropped, __ATOMIC_RELAXED));
    fputs("}}}\n", w->f);
}

strata_err trace_json_write(FILE *f, const struct trace_buf *bufs, size_t n)
{
    struct writer w = {.f = f, .first = true};
    strata_err err = index_runs(&w, bufs, n);

    if (err)
        return err;
    fputs("{\"traceEvents\":[", f);
    for (size_t i = 0; i < n; i++)
        name_process(&w, bufs, n, i);
    for (size_t i = 0; i < n; i++)
        for (uint32_t j = 0; j < bufs[i].n; j++)
            write_rec(&w, bufs[i].h->pid, bufs[i].h->ppid, &bufs[i].h->recs[j]);
    write_other(&w, bufs, n);
    base_free(w.keys);
    if (ferror(f))
        return base_fail(STRATA_EIO, "trace: write failed");
    return STRATA_OK;
}
