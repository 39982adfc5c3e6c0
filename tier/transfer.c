/* Transfers: preconditions, read/write ordering between transfers, and the
 * I/O pool that moves their chunks.
 *
 * A transfer reads its source and writes its destination. It waits for the
 * unfinished transfer that last wrote the source (read after write), the
 * one that last wrote the destination (write after write) and those that
 * read the destination (write after read). Each instance records those
 * unfinished transfers; a transfer's successors hold a count of the
 * predecessors they still wait for, and the last one to finish queues
 * them. The queue is FIFO; every pool thread takes the next chunk of the
 * transfer at its head, so one large transfer uses every thread. */
#include "base/alloc.h"
#include "base/err.h"
#include "base/fault.h"
#include "base/proc.h"
#include "tier_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static bool push_ptr(struct strata_transfer_handle ***arr, size_t *num,
                     size_t *cap, struct strata_transfer_handle *t)
{
    if (*num == *cap) {
        size_t ncap = *cap ? *cap * 2 : 4;
        void *p = base_realloc(*arr, ncap * sizeof(**arr));

        if (!p)
            return false;
        *arr = p;
        *cap = ncap;
    }
    (*arr)[(*num)++] = t;
    return true;
}

static void remove_reader(strata_instance *inst,
                          struct strata_transfer_handle *t)
{
    for (size_t i = 0; i < inst->num_readers; i++) {
        if (inst->readers[i] == t) {
            inst->readers[i] = inst->readers[--inst->num_readers];
            return;
        }
    }
}

static void enqueue(strata_tier_runtime *rt, struct strata_transfer_handle *t)
{
    t->state = TIER_XFER_QUEUED;
    t->qnext = NULL;
    if (rt->qtail)
        rt->qtail->qnext = t;
    else
        rt->qhead = t;
    rt->qtail = t;
    pthread_cond_broadcast(&rt->work);
}

static void drop_ref(struct strata_transfer_handle *t)
{
    if (--t->refs == 0) {
        pthread_cond_destroy(&t->cond);
        base_free(t->succs);
        base_free(t);
    }
}

static void finish(strata_tier_runtime *rt, struct strata_transfer_handle *t);

/* A handle's condition variable runs on CLOCK_MONOTONIC, as its deadlines
 * do: a wall clock set back does not stretch a wait. */
static void init_cond(pthread_cond_t *cond)
{
    pthread_condattr_t ca;

    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(cond, &ca);
    pthread_condattr_destroy(&ca);
}

/* Starts t: queued, or finished at once when it has nothing to move or its
 * source is poisoned (rt->lock held). */
static void start(strata_tier_runtime *rt, struct strata_transfer_handle *t)
{
    if (t->src_poisoned) {
        t->result = STRATA_EIO;
        snprintf(t->msg, sizeof(t->msg),
                 "transfer of '%s' v%llu: an earlier transfer into its "
                 "source failed",
                 t->src->name, (unsigned long long)t->src->version);
        finish(rt, t);
        return;
    }
    enqueue(rt, t);
}

/* Marks t finished (rt->lock held): accounting, the instances' records,
 * successors, waiters. */
static void finish(strata_tier_runtime *rt, struct strata_transfer_handle *t)
{
    bool failed = t->result != STRATA_OK;

    t->state = TIER_XFER_DONE;
    remove_reader(t->src, t);
    if (t->dst->writer == t)
        t->dst->writer = NULL;
    t->dst->invalid = failed;
    if (failed) {
        rt->xfers_failed++;
        tier_nvme_discard(t->dst);
    } else {
        rt->xfers_done++;
        rt->moved[t->src->tier][t->dst->tier] += t->nbytes;
    }
    for (size_t i = 0; i < t->num_succs; i++) {
        struct strata_transfer_handle *s = t->succs[i];

        /* Only a successor that reads what t wrote inherits its failure. */
        if (failed && s->src == t->dst)
            s->src_poisoned = true;
        if (--s->preds == 0)
            start(rt, s);
    }
    t->num_succs = 0;
    rt->unfinished--;
    pthread_cond_broadcast(&t->cond);
    pthread_cond_broadcast(&rt->idle);
    drop_ref(t);
}

/* The next chunk to move, or NULL to stop (rt->lock held; waits). */
static struct strata_transfer_handle *next_chunk(strata_tier_runtime *rt,
                                                 uint64_t *index)
{
    struct strata_transfer_handle *t;

    while (!rt->qhead && !rt->stopping)
        pthread_cond_wait(&rt->work, &rt->lock);
    t = rt->qhead;
    if (!t)
        return NULL;
    *index = t->next_chunk++;
    if (t->next_chunk == t->num_chunks) {
        rt->qhead = t->qnext;
        if (!rt->qhead)
            rt->qtail = NULL;
    }
    return t;
}

static void *pool_main(void *arg)
{
    strata_tier_runtime *rt = arg;
    void *staging = NULL;
    char msg[STRATA_ERRMSG_MAX];

    if (posix_memalign(&staging, TIER_ALIGN, TIER_CHUNK) != 0)
        staging = NULL;
    pthread_mutex_lock(&rt->lock);
    for (;;) {
        uint64_t index, off, len;
        struct strata_transfer_handle *t = next_chunk(rt, &index);
        strata_err err = STRATA_OK;

        if (!t)
            break;
        off = index * TIER_CHUNK;
        len = t->nbytes - off < TIER_CHUNK ? t->nbytes - off : TIER_CHUNK;
        /* A chunk after a failed one of the same transfer is skipped. */
        if (t->result == STRATA_OK) {
            pthread_mutex_unlock(&rt->lock);
            msg[0] = '\0';
            if (BASE_FAULT("tier.chunk")) {
                err = STRATA_EIO;
                snprintf(msg, sizeof(msg), "chunk %llu: injected failure",
                         (unsigned long long)index);
            } else if (!staging) {
                err = STRATA_ENOMEM;
                snprintf(msg, sizeof(msg), "I/O thread has no staging buffer");
            } else {
                err = tier_io_chunk(t->src, t->dst, off, len, staging, msg,
                                    sizeof(msg));
            }
            pthread_mutex_lock(&rt->lock);
        }
        if (err && t->result == STRATA_OK) {
            t->result = err;
            snprintf(t->msg, sizeof(t->msg),
                     "transfer of '%s' v%llu %s->%s: %s", t->src->name,
                     (unsigned long long)t->src->version,
                     strata_tier_name(t->src->tier),
                     strata_tier_name(t->dst->tier), msg);
        }
        if (++t->done_chunks == t->num_chunks)
            finish(rt, t);
    }
    pthread_mutex_unlock(&rt->lock);
    free(staging);
    return NULL;
}

strata_err tier_pool_start(strata_tier_runtime *rt, unsigned threads)
{
    rt->threads = base_calloc(threads, sizeof(*rt->threads));
    if (!rt->threads)
        return base_fail(STRATA_ENOMEM, "tier runtime: out of memory");
    for (unsigned i = 0; i < threads; i++) {
        int rc = pthread_create(&rt->threads[i], NULL, pool_main, rt);

        if (rc != 0) {
            rt->num_threads = i;
            tier_pool_stop(rt);
            return base_fail_errno(rc, "tier runtime: pthread_create");
        }
    }
    rt->num_threads = threads;
    return STRATA_OK;
}

void tier_pool_stop(strata_tier_runtime *rt)
{
    pthread_mutex_lock(&rt->lock);
    rt->stopping = true;
    pthread_cond_broadcast(&rt->work);
    pthread_mutex_unlock(&rt->lock);
    for (unsigned i = 0; i < rt->num_threads; i++)
        pthread_join(rt->threads[i], NULL);
    base_free(rt->threads);
    rt->threads = NULL;
    rt->num_threads = 0;
}

static bool names_unfinished(const strata_instance *inst, bool writers_only)
{
    return inst->writer || (!writers_only && inst->num_readers > 0);
}

void tier_wait_quiet(strata_instance *inst, bool writers_only)
{
    while (names_unfinished(inst, writers_only))
        pthread_cond_wait(&inst->rt->idle, &inst->rt->lock);
}

void tier_wait_all(strata_tier_runtime *rt)
{
    while (rt->unfinished > 0)
        pthread_cond_wait(&rt->idle, &rt->lock);
}

/* Preconditions in their documented order (rt->lock held). */
static strata_err check_pair(const strata_instance *src,
                             const strata_instance *dst)
{
    if (src->closed)
        return base_fail(STRATA_ESTATE,
                         "strata_transfer: source '%s' v%llu is closed",
                         src->name, (unsigned long long)src->version);
    if (dst->closed)
        return base_fail(STRATA_ESTATE,
                         "strata_transfer: destination '%s' v%llu is closed",
                         dst->name, (unsigned long long)dst->version);
    if (src == dst)
        return base_fail(STRATA_EINVAL,
                         "strata_transfer: source and destination are the "
                         "same instance ('%s' v%llu on %s)",
                         src->name, (unsigned long long)src->version,
                         strata_tier_name(src->tier));
    if (strcmp(src->name, dst->name) != 0 || src->version != dst->version)
        return base_fail(STRATA_EINVAL,
                         "strata_transfer: source is '%s' v%llu but "
                         "destination is '%s' v%llu (name and version must "
                         "match)",
                         src->name, (unsigned long long)src->version, dst->name,
                         (unsigned long long)dst->version);
    if (src->capacity != dst->capacity)
        return base_fail(STRATA_EINVAL,
                         "strata_transfer: source capacity %llu differs from "
                         "destination capacity %llu",
                         (unsigned long long)src->capacity,
                         (unsigned long long)dst->capacity);
    return STRATA_OK;
}

/* Records pred -> t unless pred is NULL or already recorded. */
static bool add_pred(struct strata_transfer_handle *t,
                     struct strata_transfer_handle *pred)
{
    if (!pred)
        return true;
    for (size_t i = 0; i < pred->num_succs; i++)
        if (pred->succs[i] == t)
            return true;
    if (!push_ptr(&pred->succs, &pred->num_succs, &pred->cap_succs, t))
        return false;
    t->preds++;
    return true;
}

/* Links t after the transfers it must follow; on failure undoes it. */
static bool link_preds(struct strata_transfer_handle *t)
{
    strata_instance *src = t->src, *dst = t->dst;
    bool ok = add_pred(t, src->writer) && add_pred(t, dst->writer);

    for (size_t i = 0; ok && i < dst->num_readers; i++)
        ok = add_pred(t, dst->readers[i]);
    /* Room in the readers list now, so nothing fails after linking. */
    if (ok && src->num_readers == src->cap_readers) {
        ok = push_ptr(&src->readers, &src->num_readers, &src->cap_readers, t);
        if (ok)
            src->num_readers--;
    }
    if (!ok) {
        struct strata_transfer_handle *preds[2] = {src->writer, dst->writer};

        for (int k = 0; k < 2; k++)
            if (preds[k] && preds[k]->num_succs &&
                preds[k]->succs[preds[k]->num_succs - 1] == t)
                preds[k]->num_succs--;
        for (size_t i = 0; i < dst->num_readers; i++) {
            struct strata_transfer_handle *r = dst->readers[i];

            if (r->num_succs && r->succs[r->num_succs - 1] == t)
                r->num_succs--;
        }
    }
    return ok;
}

strata_err strata_transfer(strata_tier_runtime *rt, strata_instance *src,
                           strata_instance *dst, strata_transfer_handle **out)
{
    struct strata_transfer_handle *t;
    strata_err err;

    if (!rt)
        return base_fail_null("strata_transfer", "rt");
    if (tier_check_process(rt->pid, "strata_transfer"))
        return STRATA_ESTATE;
    if (!src)
        return base_fail_null("strata_transfer", "src");
    if (!dst)
        return base_fail_null("strata_transfer", "dst");
    if (!out)
        return base_fail_null("strata_transfer", "out");
    if (src->rt != rt || dst->rt != rt)
        return base_fail(STRATA_EINVAL,
                         "strata_transfer: %s belongs to "
                         "another runtime",
                         src->rt != rt ? "src" : "dst");
    t = base_calloc(1, sizeof(*t));
    if (!t)
        return base_fail(STRATA_ENOMEM, "strata_transfer: out of memory");
    t->pid = rt->pid;
    init_cond(&t->cond);
    pthread_mutex_lock(&rt->lock);
    err = check_pair(src, dst);
    if (err)
        goto err_unlock;
    t->rt = rt;
    t->src = src;
    t->dst = dst;
    t->nbytes = src->capacity;
    t->num_chunks = (t->nbytes + TIER_CHUNK - 1) / TIER_CHUNK;
    t->refs = 2;
    if (!link_preds(t)) {
        err = base_fail(STRATA_ENOMEM, "strata_transfer: out of memory");
        goto err_unlock;
    }
    src->readers[src->num_readers++] = t;
    dst->writer = t;
    /* A source with a writer learns its validity when that one ends. */
    t->src_poisoned = src->invalid && !src->writer;
    t->hnext = rt->handles;
    if (rt->handles)
        rt->handles->hprev = t;
    rt->handles = t;
    rt->unfinished++;
    if (t->preds == 0)
        start(rt, t);
    pthread_mutex_unlock(&rt->lock);
    *out = t;
    return STRATA_OK;

err_unlock:
    pthread_mutex_unlock(&rt->lock);
    pthread_cond_destroy(&t->cond);
    base_free(t);
    return err;
}

/* Every handle shares one lock: its runtime's while the runtime lives. A
 * handle whose runtime is gone is finished and immutable. */
bool strata_transfer_ready(const strata_transfer_handle *t)
{
    strata_tier_runtime *rt;
    bool ready;

    if (!t)
        return false;
    rt = t->rt;
    if (!rt)
        return true;
    pthread_mutex_lock(&rt->lock);
    ready = t->state == TIER_XFER_DONE;
    pthread_mutex_unlock(&rt->lock);
    return ready;
}

/* Timeouts at or past this many seconds (about 31 years), and infinity,
 * wait without a deadline: no clock arithmetic can overflow. */
#define TIER_WAIT_FOREVER_S 1e9

/* The CLOCK_MONOTONIC deadline s (finite, 0 <= s < TIER_WAIT_FOREVER_S)
 * from now. */
static struct timespec deadline_after(double s)
{
    struct timespec ts;
    double whole = floor(s);
    long nsec = (long)((s - whole) * 1e9);

    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)whole;
    ts.tv_nsec += nsec < 0 ? 0 : nsec > 999999999L ? 999999999L : nsec;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* Waits (rt->lock held) until t is done or the deadline passes; forever
 * when until is NULL. pthread_cond_timedwait's only other failure, EINVAL,
 * cannot come from deadline_after's normalised times; were it to, the
 * wait stops rather than spinning. */
static void wait_done(strata_tier_runtime *rt, struct strata_transfer_handle *t,
                      const struct timespec *until)
{
    while (t->state != TIER_XFER_DONE) {
        int rc = until ? pthread_cond_timedwait(&t->cond, &rt->lock, until)
                       : pthread_cond_wait(&t->cond, &rt->lock);

        if (rc != 0 && rc != EINTR)
            break;
    }
}

strata_err strata_transfer_wait(strata_transfer_handle *t, double timeout_s)
{
    strata_tier_runtime *rt;
    struct timespec until;
    bool forever, done = true;

    if (!t)
        return base_fail_null("strata_transfer_wait", "t");
    if (tier_check_process(t->pid, "strata_transfer_wait"))
        return STRATA_ESTATE;
    if (isnan(timeout_s))
        return base_fail(STRATA_EINVAL, "strata_transfer_wait: timeout_s is "
                                        "NaN");
    rt = t->rt;
    if (rt) {
        forever = timeout_s < 0 || timeout_s >= TIER_WAIT_FOREVER_S;
        if (!forever)
            until = deadline_after(timeout_s);
        pthread_mutex_lock(&rt->lock);
        wait_done(rt, t, forever ? NULL : &until);
        done = t->state == TIER_XFER_DONE;
        pthread_mutex_unlock(&rt->lock);
        if (!done)
            return base_fail(STRATA_ETIMEDOUT,
                             "strata_transfer_wait: '%s' v%llu not done after "
                             "%g s",
                             t->src->name, (unsigned long long)t->src->version,
                             timeout_s);
    }
    if (t->result)
        return base_fail(t->result, "%s", t->msg);
    return STRATA_OK;
}

void strata_transfer_free(strata_transfer_handle *t)
{
    strata_tier_runtime *rt;

    if (!t)
        return;
    /* A fork's copy is left alone: its memory is the parent's too. */
    if (t->pid != base_pid())
        return;
    rt = t->rt;
    if (rt) {
        pthread_mutex_lock(&rt->lock);
        if (t->hprev)
            t->hprev->hnext = t->hnext;
        else
            rt->handles = t->hnext;
        if (t->hnext)
            t->hnext->hprev = t->hprev;
    }
    drop_ref(t);
    if (rt)
        pthread_mutex_unlock(&rt->lock);
}

void tier_detach_handles(strata_tier_runtime *rt)
{
    struct strata_transfer_handle *t, *next;

    for (t = rt->handles; t; t = next) {
        next = t->hnext;
        t->rt = NULL;
        t->src = t->dst = NULL;
        t->hprev = t->hnext = NULL;
    }
    rt->handles = NULL;
}
