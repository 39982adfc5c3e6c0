/* Reading trace-event JSON files (strata trace validate|summary): the
 * checks a file must pass to open as one timeline in Perfetto's UI and
 * chrome://tracing, and the events the summary works from. The input is
 * untrusted (fuzz_trace); nothing here trusts a field's type or range. */
#ifndef STRATA_TRACE_READ_H
#define STRATA_TRACE_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TR_ERR_MAX 256

/* One event of the file, as the checks and the summary need it. */
struct tr_event {
    char ph;           /* phase: X, B, E, b, e, s, t, f, i, I, M, C, n */
    int64_t pid, tid;  /* 0 when absent (metadata, global instants) */
    double ts, dur;    /* microseconds; dur 0 but for X */
    const char *name;  /* "" when absent; owned by the JSON tree */
    const char *cat;   /* "" when absent */
    const char *label; /* metadata: args.name ("" when not a string) */
    char id[40];       /* b/e/n and s/t/f: the id as text; "" otherwise */
    double wait_us;    /* dispatch "b": args.queue_wait_us; -1 otherwise */
};

struct tr_file {
    void *root; /* the jansson tree the strings point into */
    struct tr_event *ev;
    size_t n;
    /* records the recording processes had no room for (otherData.dropped,
     * strata's traces; 0 for others): the events are a lower bound */
    uint64_t dropped;
};

/* Parses and checks len bytes of JSON (need not end in NUL): the object
 * format ({"traceEvents": [...]}) or the array format. 0 and *out filled
 * when the file is a sound trace; -1 with the first problem in err (the
 * event's index named) otherwise, *out untouched. */
int tr_load(const char *data, size_t len, struct tr_file *out, char *err,
            size_t cap);

/* Frees what tr_load filled; f zeroed. */
void tr_free(struct tr_file *f);

/* Writes the summary of a loaded trace to out: per-callable counts and
 * times, queue wait, the critical path through the dependency flows and
 * each chip's and sub worker's idle share. */
void tr_summary(const struct tr_file *f, FILE *out);

#endif
