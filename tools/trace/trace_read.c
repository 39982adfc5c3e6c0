/* Loading and checking a trace-event JSON file. */
#include "trace_read.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* At most this many events: a bound on memory for any input. */
#define TR_MAX_EVENTS (1u << 24)
/* Slices of one lane that start or end within this many microseconds are
 * taken as touching (the times are printed with ns precision). */
#define TR_EPS 1e-6

static int fail(char *err, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t cap, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return -1;
}

static bool is_int(const json_t *v)
{
    return json_is_integer(v);
}

/* A finite number (integer or real); *out set. */
static bool num(const json_t *v, double *out)
{
    if (!json_is_number(v))
        return false;
    *out = json_number_value(v);
    return isfinite(*out);
}

static const char *str_or_empty(const json_t *v)
{
    return json_is_string(v) ? json_string_value(v) : "";
}

static bool needs_pid(char ph)
{
    return strchr("XBEbensftiIC", ph) != NULL;
}

/* The id as text, from a string or an integer; false when absent or of
 * another type. */
static bool id_text(const json_t *e, char *out, size_t cap)
{
    const json_t *v = json_object_get(e, "id");

    if (!v) {
        const json_t *id2 = json_object_get(e, "id2");

        v = json_is_object(id2) ? json_object_get(id2, "local") : NULL;
        if (!v && json_is_object(id2))
            v = json_object_get(id2, "global");
    }
    if (json_is_string(v))
        snprintf(out, cap, "s:%s", json_string_value(v));
    else if (is_int(v))
        snprintf(out, cap, "i:%lld", (long long)json_integer_value(v));
    else
        return false;
    return true;
}

static int read_one(const json_t *e, size_t i, struct tr_event *ev, char *err,
                    size_t cap)
{
    const json_t *ph, *args;
    const char *p;

    if (!json_is_object(e))
        return fail(err, cap, "event %zu is not an object", i);
    ph = json_object_get(e, "ph");
    p = json_string_value(ph);
    args = json_object_get(e, "args");
    if (!p)
        return fail(err, cap, "event %zu: \"ph\" is missing or not a string",
                    i);
    if (strlen(p) != 1 || !strchr("XBEbensftiIMCPOND", p[0]))
        return fail(err, cap,
                    "event %zu: \"ph\" \"%.16s\" is not a known phase", i, p);
    memset(ev, 0, sizeof(*ev));
    ev->ph = p[0];
    ev->wait_us = -1;
    ev->name = str_or_empty(json_object_get(e, "name"));
    ev->cat = str_or_empty(json_object_get(e, "cat"));
    ev->label = str_or_empty(json_object_get(args, "name"));
    if (json_object_get(e, "name") &&
        !json_is_string(json_object_get(e, "name")))
        return fail(err, cap, "event %zu: \"name\" is not a string", i);
    if (args && !json_is_object(args))
        return fail(err, cap, "event %zu: \"args\" is not an object", i);
    if (needs_pid(ev->ph) || ev->ph == 'M') {
        if (!is_int(json_object_get(e, "pid")))
            return fail(err, cap, "event %zu (%c): no integer \"pid\"", i,
                        ev->ph);
        ev->pid = json_integer_value(json_object_get(e, "pid"));
        if (json_object_get(e, "tid") && !is_int(json_object_get(e, "tid")))
            return fail(err, cap, "event %zu: \"tid\" is not an integer", i);
        ev->tid = json_integer_value(json_object_get(e, "tid"));
    }
    if (ev->ph == 'M') {
        if (!*ev->name || !args)
            return fail(err, cap, "event %zu: metadata needs a name and args",
                        i);
        return 0;
    }
    if (!num(json_object_get(e, "ts"), &ev->ts) || ev->ts < 0)
        return fail(err, cap, "event %zu (%c): no finite \"ts\" >= 0", i,
                    ev->ph);
    if (ev->ph == 'X' &&
        (!num(json_object_get(e, "dur"), &ev->dur) || ev->dur < 0))
        return fail(err, cap, "event %zu: a complete event needs \"dur\" >= 0",
                    i);
    if (strchr("XBbe", ev->ph) && ev->ph != 'E' && !*ev->name)
        return fail(err, cap, "event %zu (%c): no \"name\"", i, ev->ph);
    if (strchr("bensft", ev->ph) && !id_text(e, ev->id, sizeof(ev->id)))
        return fail(err, cap, "event %zu (%c): no string or integer \"id\"", i,
                    ev->ph);
    if (ev->ph == 'b' && args)
        (void)num(json_object_get(args, "queue_wait_us"), &ev->wait_us);
    return 0;
}

/* For the checks across events: X slices and B/E pairs of one lane. */
static int lane_cmp(const void *x, const void *y)
{
    const struct tr_event *a = *(const struct tr_event *const *)x;
    const struct tr_event *b = *(const struct tr_event *const *)y;

    if (a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    if (a->tid != b->tid)
        return a->tid < b->tid ? -1 : 1;
    if (a->ts != b->ts)
        return a->ts < b->ts ? -1 : 1;
    /* At one start, the longer slice is the outer one. */
    return (a->dur < b->dur) - (a->dur > b->dur);
}

#define TR_DEPTH 64

/* Complete slices of a lane must nest: one that starts inside another
 * ends inside it too, or the viewers draw them wrong. */
static int check_nesting(struct tr_event **x, size_t n, char *err, size_t cap)
{
    double end[TR_DEPTH];
    size_t depth = 0;

    for (size_t i = 0; i < n; i++) {
        if (i && (x[i]->pid != x[i - 1]->pid || x[i]->tid != x[i - 1]->tid))
            depth = 0;
        while (depth && x[i]->ts >= end[depth - 1] - TR_EPS)
            depth--;
        if (depth && x[i]->ts + x[i]->dur > end[depth - 1] + TR_EPS)
            return fail(err, cap,
                        "slice \"%s\" (pid %lld tid %lld, ts %.3f) overlaps "
                        "the slice around it without nesting",
                        x[i]->name, (long long)x[i]->pid, (long long)x[i]->tid,
                        x[i]->ts);
        if (depth == TR_DEPTH)
            return fail(err, cap, "slices nest deeper than %d", TR_DEPTH);
        end[depth++] = x[i]->ts + x[i]->dur;
    }
    return 0;
}

/* Where an event sits among its id's events at one time: start, step,
 * end. */
static int pair_rank(char ph)
{
    return ph == 'e' || ph == 'f' ? 2 : ph == 't' ? 1 : 0;
}

/* By id and category (an id names one thing within its category), then
 * time; at one time a start before a step before an end. */
static int id_cmp(const void *x, const void *y)
{
    const struct tr_event *a = *(const struct tr_event *const *)x;
    const struct tr_event *b = *(const struct tr_event *const *)y;
    int c = strcmp(a->id, b->id);

    if (!c)
        c = strcmp(a->cat, b->cat);
    if (c)
        return c;
    if (a->ts != b->ts)
        return a->ts < b->ts ? -1 : 1;
    return pair_rank(a->ph) - pair_rank(b->ph);
}

/* Per id, in time order, starts and ends alternate, start first, and
 * none is left open: every flow start ('s') has its end ('f'), steps
 * ('t') in between; every async begin ('b') its end ('e'), and no id is
 * open twice at once (two tasks given one id). */
static int check_pairs(struct tr_event **v, size_t n, char start, char end,
                       char *err, size_t cap)
{
    qsort(v, n, sizeof(*v), id_cmp);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        bool open = false;

        for (; j < n && strcmp(v[j]->id, v[i]->id) == 0 &&
               strcmp(v[j]->cat, v[i]->cat) == 0;
             j++) {
            if (v[j]->ph == start && open)
                return fail(err, cap,
                            "id %s: a second '%c' at %.3f us while one is "
                            "open (two events share the id)",
                            v[i]->id + 2, start, v[j]->ts);
            if (v[j]->ph != start && !open)
                return fail(err, cap,
                            "id %s: '%c' at %.3f us with no '%c' open",
                            v[i]->id + 2, v[j]->ph, v[j]->ts, start);
            if (v[j]->ph == start || v[j]->ph == end)
                open = v[j]->ph == start;
        }
        if (open)
            return fail(err, cap, "id %s: a '%c' has no '%c'", v[i]->id + 2,
                        start, end);
        i = j;
    }
    return 0;
}

static int check_all(struct tr_event *ev, size_t n, char *err, size_t cap)
{
    struct tr_event **v = malloc((n ? n : 1) * sizeof(*v));
    size_t k = 0;
    int rc;

    if (!v)
        return fail(err, cap, "out of memory");
    for (size_t i = 0; i < n; i++)
        if (ev[i].ph == 'X')
            v[k++] = &ev[i];
    qsort(v, k, sizeof(*v), lane_cmp);
    rc = check_nesting(v, k, err, cap);
    k = 0;
    for (size_t i = 0; !rc && i < n; i++)
        if (strchr("sft", ev[i].ph))
            v[k++] = &ev[i];
    if (!rc)
        rc = check_pairs(v, k, 's', 'f', err, cap);
    k = 0;
    for (size_t i = 0; !rc && i < n; i++)
        if (ev[i].ph == 'b' || ev[i].ph == 'e')
            v[k++] = &ev[i];
    if (!rc)
        rc = check_pairs(v, k, 'b', 'e', err, cap);
    free(v);
    return rc;
}

/* The sum of otherData.dropped's per-process counts, where present. */
static uint64_t dropped_of(const json_t *root)
{
    json_t *d = json_object_get(json_object_get(root, "otherData"), "dropped");
    const char *key;
    json_t *v;
    uint64_t sum = 0;

    if (!json_is_object(d))
        return 0;
    json_object_foreach(d, key, v)
    {
        if (json_is_integer(v) && json_integer_value(v) > 0)
            sum += (uint64_t)json_integer_value(v);
    }
    return sum;
}

int tr_load(const char *data, size_t len, struct tr_file *out, char *err,
            size_t cap)
{
    json_error_t jerr;
    json_t *root = json_loadb(data, len, JSON_REJECT_DUPLICATES, &jerr);
    const json_t *list;
    struct tr_event *ev;
    size_t n;

    if (!root)
        return fail(err, cap, "not JSON: line %d column %d: %s", jerr.line,
                    jerr.column, jerr.text);
    list = json_is_array(root) ? root : json_object_get(root, "traceEvents");
    if (!json_is_array(list)) {
        json_decref(root);
        return fail(err, cap, "no \"traceEvents\" array");
    }
    n = json_array_size(list);
    if (n > TR_MAX_EVENTS) {
        json_decref(root);
        return fail(err, cap, "%zu events: more than %u", n, TR_MAX_EVENTS);
    }
    ev = calloc(n ? n : 1, sizeof(*ev));
    if (!ev) {
        json_decref(root);
        return fail(err, cap, "out of memory for %zu events", n);
    }
    for (size_t i = 0; i < n; i++)
        if (read_one(json_array_get(list, i), i, &ev[i], err, cap) ||
            (i + 1 == n && check_all(ev, n, err, cap))) {
            free(ev);
            json_decref(root);
            return -1;
        }
    out->root = root;
    out->ev = ev;
    out->n = n;
    out->dropped = json_is_object(root) ? dropped_of(root) : 0;
    return 0;
}

void tr_free(struct tr_file *f)
{
    if (!f)
        return;
    free(f->ev);
    json_decref(f->root);
    memset(f, 0, sizeof(*f));
}
