/* The layout of a process's trace buffer in /dev/shm, shared by the
 * recorder (trace.c) and the merge (trace_merge.c, trace_json.c). */
#ifndef TRACE_INT_H
#define TRACE_INT_H

#include "trace/trace.h"

#include <stddef.h>
#include <stdio.h>

#define TRACE_MAGIC 0x52545453u /* "STTR" */
#define TRACE_VERSION 2u
#define TRACE_NAME_MAX TRACE_NAME_BYTES
#define TRACE_ROLE_MAX 64
/* Records per process unless STRATA_TRACE_EVENTS says otherwise. */
#define TRACE_DEFAULT_EVENTS 32768u
#define TRACE_MAX_EVENTS (1u << 24)

/* One record; kind is stored last (release), so a record the merge sees
 * with a kind is whole. */
struct trace_rec {
    uint32_t kind; /* enum trace_kind */
    uint16_t cat;
    uint16_t lane;
    uint64_t t0, t1; /* CLOCK_MONOTONIC ns */
    uint64_t a, b, c, d;
    char name[TRACE_NAME_MAX];
};

_Static_assert(sizeof(struct trace_rec) == 104,
               "a record is WIRE_TRACE_REC_SIZE bytes on the wire");

struct trace_hdr {
    uint32_t magic;
    uint32_t version;
    uint32_t cap;      /* records after the header */
    uint32_t rec_size; /* sizeof(struct trace_rec) */
    int32_t pid;       /* the process that records */
    int32_t ppid;      /* its parent: the orchestrator of its tasks */
    uint64_t head;     /* records claimed (may pass cap: those dropped) */
    uint64_t dropped;  /* records lost to a full buffer */
    uint32_t clock;    /* enum trace_clock of the record times */
    uint32_t reserved;
    /* TRACE_CLOCK_TSC: a TSC reading and CLOCK_MONOTONIC ns at the same
     * moment (the session's start), the merge's anchor for converting. */
    uint64_t tsc0, ns0;
    char role[TRACE_ROLE_MAX];
    _Alignas(64) struct trace_rec recs[];
};

enum trace_clock {
    TRACE_CLOCK_NS = 0,  /* CLOCK_MONOTONIC ns */
    TRACE_CLOCK_TSC = 1, /* TSC ticks: ns0 + (t - tsc0) * ns per tick */
};

/* A TSC reading and the CLOCK_MONOTONIC ns at the same moment (the
 * middle of the tightest of a few clock_gettime pairs around it). */
void trace_clock_pair(uint64_t *tsc, uint64_t *ns);

/* "/strata-<uid>-<root>-trace-<pid>": named for the session's process, so
 * that the tree's teardown of dead children's names leaves it to the merge
 * and leftover checks see whose it is. */
void trace_shm_name(char *out, size_t cap, pid_t root, pid_t pid);

/* One buffer read back for the merge: a heap copy whose times are
 * CLOCK_MONOTONIC ns of the merging host and whose kinds are plain enum
 * trace_kind (0: a record not written). */
struct trace_buf {
    struct trace_hdr *h; /* base_malloc'ed */
    uint32_t n;          /* records in recs */
};

/* Copies n records of the buffer h (mapped, possibly still being written)
 * into out, converting their times to ns (tsc1, ns1: a clock pair taken
 * now) and adding shift_ns; false when out of memory. */
bool trace_buf_load(const struct trace_hdr *h, uint32_t n, uint64_t tsc1,
                    uint64_t ns1, int64_t shift_ns, struct trace_buf *out);

/* Reads every buffer of root's session from /dev/shm and the remote
 * nodes' buffers (trace_remote_add), writes their merge to path (through
 * a temporary file renamed into place; NULL: nothing written) and removes
 * them all, whatever else fails (trace_merge.c). */
strata_err trace_merge_session(const char *path, pid_t root);

/* trace_session_collect for the session of root. */
strata_err trace_session_collect_root(pid_t root, trace_collect_fn fn,
                                      void *ctx);

_Static_assert(TRACE_RUNTASK_NAME + 16 == TRACE_NAME_MAX,
               "a TRACE_K_RUNTASK's two words fill its name's tail");

/* A TRACE_K_RUNTASK r as the two records it stands for. */
void trace_runtask_split(const struct trace_rec *r, struct trace_rec *run,
                         struct trace_rec *task);

/* Converts a record copied from a buffer of clock h->clock in place (its
 * stored kind: flags and all) to ns plus shift (trace_merge.c). */
void trace_rec_to_ns(const struct trace_hdr *h, struct trace_rec *o,
                     uint32_t kind, double per_tick, int64_t shift);

/* Moves the remote buffers received so far into out (at most cap; the
 * rest are freed) and returns how many (trace_remote.c). */
size_t trace_remote_take(struct trace_buf *out, size_t cap);

/* Writes the merged trace of bufs[0..n) as trace-event JSON to f;
 * STRATA_EIO when a write fails. */
strata_err trace_json_write(FILE *f, const struct trace_buf *bufs, size_t n);

#endif
