/* The layout of a process's trace buffer in /dev/shm, shared by the
 * recorder (trace.c) and the merge (trace_merge.c, trace_json.c). */
#ifndef TRACE_INT_H
#define TRACE_INT_H

#include "trace/trace.h"

#include <stddef.h>
#include <stdio.h>

#define TRACE_MAGIC 0x52545453u /* "STTR" */
#define TRACE_VERSION 1u
#define TRACE_NAME_MAX 48
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

struct trace_hdr {
    uint32_t magic;
    uint32_t version;
    uint32_t cap;      /* records after the header */
    uint32_t rec_size; /* sizeof(struct trace_rec) */
    int32_t pid;       /* the process that records */
    int32_t ppid;      /* its parent: the orchestrator of its tasks */
    uint64_t head;     /* records claimed (may pass cap: those dropped) */
    uint64_t dropped;  /* records lost to a full buffer */
    char role[TRACE_ROLE_MAX];
    _Alignas(64) struct trace_rec recs[];
};

/* "/strata-<uid>-<root>-trace-<pid>": named for the session's process, so
 * that the tree's teardown of dead children's names leaves it to the merge
 * and leftover checks see whose it is. */
void trace_shm_name(char *out, size_t cap, pid_t root, pid_t pid);

/* One buffer read back for the merge. */
struct trace_buf {
    struct trace_hdr *h; /* mapped read-only */
    size_t map_len;
    uint32_t n; /* whole records in recs */
};

/* Reads every buffer of root's session from /dev/shm, writes their merge
 * to path (through a temporary file renamed into place) and removes them
 * all, whatever else fails (trace_merge.c). */
strata_err trace_merge_session(const char *path, pid_t root);

/* Writes the merged trace of bufs[0..n) as trace-event JSON to f;
 * STRATA_EIO when a write fails. */
strata_err trace_json_write(FILE *f, const struct trace_buf *bufs, size_t n);

#endif
