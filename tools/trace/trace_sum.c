/* strata trace summary: per-callable times, queue wait, the critical path
 * through the dependency flows, and each chip's idle share. */
#include "trace_read.h"

#include <stdlib.h>
#include <string.h>

#define PATH_SHOWN 8

struct sum {
    const struct tr_file *f;
    const struct tr_event **task; /* X slices of cat "task", by lane then ts */
    size_t num_task;
    double t_begin, t_end; /* the span the task slices cover */
};

static int dbl_cmp(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;

    return (a > b) - (a < b);
}

static int name_cmp(const void *x, const void *y)
{
    const struct tr_event *a = *(const struct tr_event *const *)x;
    const struct tr_event *b = *(const struct tr_event *const *)y;

    return strcmp(a->name, b->name);
}

static int lane_cmp(const void *x, const void *y)
{
    const struct tr_event *a = *(const struct tr_event *const *)x;
    const struct tr_event *b = *(const struct tr_event *const *)y;

    if (a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    if (a->tid != b->tid)
        return a->tid < b->tid ? -1 : 1;
    return (a->ts > b->ts) - (a->ts < b->ts);
}

/* The p-th percentile (nearest rank) of n sorted values. */
static double pct(const double *v, size_t n, double p)
{
    size_t k = (size_t)(p / 100.0 * (double)n + 0.999999);

    return v[k ? (k > n ? n - 1 : k - 1) : 0];
}

/* The median of n >= 1 sorted values: the mean of the middle two when n
 * is even (the lower one alone reads 0 for a pair of one 0). */
static double median(const double *v, size_t n)
{
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Median queue wait of callable name's dispatch events; -1: none. */
static double wait_median(const struct tr_file *f, const char *name)
{
    double *w = malloc((f->n ? f->n : 1) * sizeof(*w)), m = -1;
    size_t n = 0;

    if (!w)
        return -1;
    for (size_t i = 0; i < f->n; i++)
        if (f->ev[i].ph == 'b' && f->ev[i].wait_us >= 0 &&
            strcmp(f->ev[i].name, name) == 0)
            w[n++] = f->ev[i].wait_us;
    if (n) {
        qsort(w, n, sizeof(*w), dbl_cmp);
        m = median(w, n);
    }
    free(w);
    return m;
}

static void callables(const struct sum *s, FILE *out)
{
    const struct tr_event **v =
        malloc((s->num_task ? s->num_task : 1) * sizeof(*v));
    double *d = malloc((s->num_task ? s->num_task : 1) * sizeof(*d));

    if (!v || !d) {
        fprintf(out, "out of memory\n");
        free(v);
        free(d);
        return;
    }
    memcpy(v, s->task, s->num_task * sizeof(*v));
    qsort(v, s->num_task, sizeof(*v), name_cmp);
    fprintf(out, "%-28s %7s %12s %12s %12s %12s\n", "callable", "count",
            "total ms", "median us", "p99 us", "wait med us");
    for (size_t i = 0; i < s->num_task;) {
        size_t j = i;
        double total = 0, wm;

        for (; j < s->num_task && strcmp(v[j]->name, v[i]->name) == 0; j++) {
            d[j - i] = v[j]->dur;
            total += v[j]->dur;
        }
        qsort(d, j - i, sizeof(*d), dbl_cmp);
        wm = wait_median(s->f, v[i]->name);
        fprintf(out, "%-28.28s %7zu %12.3f %12.3f %12.3f ", v[i]->name, j - i,
                total / 1e3, median(d, j - i), pct(d, j - i, 99));
        if (wm >= 0)
            fprintf(out, "%12.3f\n", wm);
        else
            fprintf(out, "%12s\n", "-");
        i = j;
    }
    free(v);
    free(d);
}

/* The task slice of lane (pid, tid) that holds time ts; -1 when none. */
static long slice_at(const struct sum *s, int64_t pid, int64_t tid, double ts)
{
    size_t lo = 0, hi = s->num_task;

    /* The last slice of the lane starting at or before ts. */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct tr_event *e = s->task[mid];

        if (e->pid < pid || (e->pid == pid && e->tid < tid) ||
            (e->pid == pid && e->tid == tid && e->ts <= ts + 1e-6))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!lo)
        return -1;
    lo--;
    if (s->task[lo]->pid != pid || s->task[lo]->tid != tid ||
        ts > s->task[lo]->ts + s->task[lo]->dur + 1e-6)
        return -1;
    return (long)lo;
}

static int id_cmp(const void *x, const void *y)
{
    const struct tr_event *a = *(const struct tr_event *const *)x;
    const struct tr_event *b = *(const struct tr_event *const *)y;
    int c = strcmp(a->id, b->id);

    return c ? c : (a->ph < b->ph) - (a->ph > b->ph); /* 's' before 'f' */
}

/* Dependency edges (from, to) as indices into s->task; count returned. */
static size_t edges(const struct sum *s, long (*e)[2], size_t cap)
{
    const struct tr_file *f = s->f;
    struct tr_event **fl = malloc((f->n ? f->n : 1) * sizeof(*fl));
    size_t n = 0, k = 0;

    if (!fl)
        return 0;
    for (size_t i = 0; i < f->n; i++)
        if (f->ev[i].ph == 's' || f->ev[i].ph == 'f')
            fl[n++] = &f->ev[i];
    qsort(fl, n, sizeof(*fl), id_cmp);
    for (size_t i = 0; i + 1 < n && k < cap; i++) {
        long a, b;

        if (fl[i]->ph != 's' || fl[i + 1]->ph != 'f' ||
            strcmp(fl[i]->id, fl[i + 1]->id) != 0)
            continue;
        a = slice_at(s, fl[i]->pid, fl[i]->tid, fl[i]->ts);
        b = slice_at(s, fl[i + 1]->pid, fl[i + 1]->tid, fl[i + 1]->ts);
        if (a >= 0 && b >= 0 && a != b) {
            e[k][0] = a;
            e[k][1] = b;
            k++;
        }
    }
    free(fl);
    return k;
}

struct at {
    double ts;
    long i;
};

static int at_cmp(const void *x, const void *y)
{
    const struct at *a = x, *b = y;

    return (a->ts > b->ts) - (a->ts < b->ts);
}

static int edge_cmp(const void *x, const void *y)
{
    const long *a = x, *b = y;

    return (a[1] > b[1]) - (a[1] < b[1]);
}

/* The longest chain of dependent tasks, by the sum of their run times;
 * tasks in start order are a topological order (a consumer starts after
 * its producer ended; an edge that says otherwise is ignored). */
static void critical_path(const struct sum *s, FILE *out)
{
    size_t n = s->num_task, cap = 1, ne = 0, k = 0;
    long(*e)[2];
    struct at *order = malloc((n + 1) * sizeof(*order));
    long *pred = malloc((n + 1) * sizeof(*pred));
    double *best = malloc((n + 1) * sizeof(*best)), top = 0;
    long end = -1, chain[PATH_SHOWN];
    size_t len = 0;

    /* An edge per flow: a task may have many (every earlier access it
     * conflicts with), not a bounded few. */
    for (size_t i = 0; i < s->f->n; i++)
        cap += s->f->ev[i].ph == 's';
    e = malloc(cap * sizeof(*e));
    if (!e || !order || !pred || !best)
        goto out;
    ne = edges(s, e, cap);
    qsort(e, ne, sizeof(*e), edge_cmp);
    for (size_t i = 0; i < n; i++) {
        order[i] = (struct at){s->task[i]->ts, (long)i};
        pred[i] = -1;
        best[i] = s->task[i]->dur;
    }
    qsort(order, n, sizeof(*order), at_cmp);
    for (size_t i = 0; i < n; i++) {
        long v = order[i].i, lo = 0, hi = (long)ne;

        /* The first edge into v. */
        while (lo < hi) {
            long mid = lo + (hi - lo) / 2;

            if (e[mid][1] < v)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (k = (size_t)lo; k < ne && e[k][1] == v; k++) {
            long u = e[k][0];

            if (s->task[u]->ts >= s->task[v]->ts)
                continue;
            if (best[u] + s->task[v]->dur > best[v]) {
                best[v] = best[u] + s->task[v]->dur;
                pred[v] = u;
            }
        }
        if (best[v] > top || end < 0) {
            top = best[v];
            end = v;
        }
    }
    fprintf(out, "dependency edges: %zu\n", ne);
    if (end < 0)
        goto out;
    /* pred only points to earlier starts: the walk ends. */
    for (long v = end; v >= 0; v = pred[v], len++)
        if (len < PATH_SHOWN)
            chain[len] = v;
    fprintf(out, "critical path: %.3f ms of task time over %zu task%s",
            top / 1e3, len, len == 1 ? "" : "s");
    if (s->t_end > s->t_begin)
        fprintf(out, " (%.1f %% of the %.3f ms span)",
                100.0 * top / (s->t_end - s->t_begin),
                (s->t_end - s->t_begin) / 1e3);
    fprintf(out, "\n  ends with:");
    for (size_t i = 0; i < len && i < PATH_SHOWN; i++)
        fprintf(out, "%s %s", i ? " <-" : "", s->task[chain[i]]->name);
    fprintf(out, "%s\n", len > PATH_SHOWN ? " <- ..." : "");
out:
    free(e);
    free(order);
    free(pred);
    free(best);
}

/* The name a process_name metadata event gives pid; "" when none. */
static const char *process_name(const struct tr_file *f, int64_t pid)
{
    for (size_t i = 0; i < f->n; i++)
        if (f->ev[i].ph == 'M' && f->ev[i].pid == pid &&
            strcmp(f->ev[i].name, "process_name") == 0)
            return f->ev[i].label;
    return "";
}

/* Whether pid ran a task (s->task is sorted by pid first). */
static bool ran_tasks(const struct sum *s, int64_t pid)
{
    size_t lo = 0, hi = s->num_task;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (s->task[mid]->pid < pid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s->num_task && s->task[lo]->pid == pid;
}

static bool chip_or_sub(const char *name)
{
    return strstr(name, "chip") || strstr(name, "sub");
}

static void idle_shares(const struct sum *s, FILE *out)
{
    double span = s->t_end - s->t_begin;

    if (span <= 0)
        return;
    fprintf(out, "idle share per chip and sub worker (of the %.3f ms span):\n",
            span / 1e3);
    for (size_t i = 0; i < s->num_task;) {
        size_t j = i;
        double busy = 0, until = -1;
        const char *name = process_name(s->f, s->task[i]->pid);

        /* Slices of one process, by lane and start: their union. */
        for (; j < s->num_task && s->task[j]->pid == s->task[i]->pid; j++) {
            const struct tr_event *e = s->task[j];
            double from = e->ts > until ? e->ts : until;

            if (e->ts + e->dur > from)
                busy += e->ts + e->dur - from;
            if (e->ts + e->dur > until)
                until = e->ts + e->dur;
        }
        if (chip_or_sub(name))
            fprintf(out, "  %-36.36s %6.1f %%  (busy %.3f ms, %zu task%s)\n",
                    name, 100.0 * (1.0 - busy / span), busy / 1e3, j - i,
                    j - i == 1 ? "" : "s");
        i = j;
    }
    /* Those that ran nothing were idle throughout. */
    for (size_t i = 0; i < s->f->n; i++) {
        const struct tr_event *e = &s->f->ev[i];

        if (e->ph == 'M' && strcmp(e->name, "process_name") == 0 &&
            chip_or_sub(e->label) && !ran_tasks(s, e->pid))
            fprintf(out, "  %-36.36s %6.1f %%  (busy 0.000 ms, 0 tasks)\n",
                    e->label, 100.0);
    }
}

void tr_summary(const struct tr_file *f, FILE *out)
{
    struct sum s = {.f = f};
    size_t procs = 0, flows = 0;

    s.task = malloc((f->n ? f->n : 1) * sizeof(*s.task));
    if (!s.task) {
        fprintf(out, "out of memory\n");
        return;
    }
    for (size_t i = 0; i < f->n; i++) {
        const struct tr_event *e = &f->ev[i];

        procs += e->ph == 'M' && strcmp(e->name, "process_name") == 0;
        flows += e->ph == 's';
        if (e->ph != 'X' || strcmp(e->cat, "task") != 0)
            continue;
        if (!s.num_task || e->ts < s.t_begin)
            s.t_begin = e->ts;
        if (!s.num_task || e->ts + e->dur > s.t_end)
            s.t_end = e->ts + e->dur;
        s.task[s.num_task++] = e;
    }
    qsort(s.task, s.num_task, sizeof(*s.task), lane_cmp);
    fprintf(out,
            "%zu events, %zu processes, %zu task slices, %zu flows, "
            "span %.3f ms\n",
            f->n, procs, s.num_task, flows, (s.t_end - s.t_begin) / 1e3);
    if (f->dropped)
        fprintf(out,
                "warning: %llu records were dropped (trace buffers full; "
                "STRATA_TRACE_EVENTS raises the cap): counts, times and the "
                "path below miss them\n",
                (unsigned long long)f->dropped);
    callables(&s, out);
    critical_path(&s, out);
    idle_shares(&s, out);
    free(s.task);
}
