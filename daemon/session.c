/* The session process. Nothing is parsed before TLS has authenticated the
 * peer; the first message must be HELLO, which sizes the L3 worker. The
 * worker starts on a pool thread while the loop goes on answering
 * heartbeats; HELLO_REPLY goes out once it is up. Each TASK waits for its
 * input bytes (DATA_CHUNK, accounted exactly as docs/wire.md says), then
 * runs on a pool thread as a run of the L3 worker; its output bytes and
 * COMPLETION go back on the same connection, so several tasks are in
 * flight at once and control messages never wait behind them. The
 * parent's buffers live here as shadow buffers, kept across tasks and
 * pinned while a task names them. What one session may hold is capped
 * (struct worker_session_limits): past the job or reply marks it stops
 * reading the socket until work drains. HELLO and the worker's start are
 * in session_hello.c, the shadow buffers in session_shadow.c, why a
 * SIGTERM ends the session in session_end.c. */
#include "base/alloc.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/hostid.h"
#include "base/log.h"
#include "chip/registry.h"
#include "session_end.h"
#include "session_int.h"
#include "session_trace.h"
#include "spool.h"
#include "trace/trace.h"
#include "wire/conn.h"
#include "wire/msg.h"
#include "worker_int.h"

#include <event2/event.h>
#include <event2/thread.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

/* A reply that cannot go out. Once the connection has closed (the parent
 * vanished, or the session is ending), every job still running fails to
 * send: the session said why it ends already, so the first such reply
 * is noted (info) and the rest go quietly, not one warning each. */
static void send_failed(struct session *s, const char *what, strata_err err)
{
    if (err != STRATA_EPEER)
        LOG_WARN("cannot send %s: %s", what, strata_errmsg());
    else if (!__atomic_exchange_n(&s->closed_noted, true, __ATOMIC_ACQ_REL))
        LOG_INFO("replies from %s on are dropped: %s", what, strata_errmsg());
}

void session_send_msg(struct session *s, const struct wire_msg *m)
{
    struct wire_buf b;
    strata_err err;

    wire_buf_init(&b);
    err = wire_msg_pack(m, &b);
    if (!err)
        err = wire_conn_send(s->conn, b.data, b.len);
    if (err)
        send_failed(s, wire_msg_name(m->type), err);
    wire_buf_fini(&b);
}

/* Nobody will take the results of running work: kill the chips and subs
 * so it fails at once (it may be running on the thread that must end the
 * session). */
void session_abandon_work(struct session *s)
{
    if (!s->abandon || __atomic_load_n(&s->work, __ATOMIC_ACQUIRE) == 0)
        return;
    LOG_INFO("abandoning running tasks");
    worker_kill_children(s->w);
}

static void stop(struct session *s, int status, const char *why)
{
    /* A refused or broken peer (bad key, bad frame, no HELLO) is worth a
     * line at the default level; an orderly end is not. */
    if (status != 0)
        LOG_WARN("session ends: %s", why);
    else
        LOG_INFO("session ends: %s", why);
    s->status = status;
    s->ended = true;
    /* Only an orderly GOODBYE lets running tasks finish. */
    if (status != 0) {
        s->abandon = true;
        session_abandon_work(s);
    }
    /* Nobody takes results from here on: a task waiting for room to
     * queue them (send_outputs) drops them, whatever thread it holds
     * (the one that would run finish(), when it ran inline). */
    if (s->conn)
        wire_conn_stop_waits(s->conn);
    spool_loop_end(&s->loop, NULL);
}

/* Ends the session telling the parent why: the GOODBYE goes out before
 * the chips die, so that no completion of a task they fail reaches the
 * parent ahead of it (sends after it are refused), and the loop ends once
 * it is flushed (on_state) or after a short grace (a flooding parent may
 * read nothing). */
static void end_telling(struct session *s, int status, const char *why)
{
    static const struct timeval grace = {1, 0};

    s->status = status;
    s->ended = true;
    s->abandon = true;
    wire_conn_close(s->conn, STRATA_EPEER, why);
    wire_conn_stop_waits(s->conn);
    session_abandon_work(s);
    spool_loop_end(&s->loop, &grace);
}

/* A limit the parent passed. */
static void stop_telling(struct session *s, const char *why)
{
    LOG_WARN("session ends: %s", why);
    end_telling(s, 1, why);
}

/* ---- tasks ---------------------------------------------------------- */

static bool tag_returns(uint8_t tag)
{
    return tag != STRATA_IN;
}

/* False when the results could not all go: the session gave up on its
 * parent (nobody takes them, nor the COMPLETION). */
static bool send_outputs(struct session *s, struct stask *t)
{
    const strata_args *a = t->args;
    struct wire_msg m = {.type = WIRE_MSG_DATA_CHUNK};

    for (uint32_t i = 0; i < a->num_tensors; i++) {
        const uint8_t *p = strata_args_tensor_data(a, i);
        size_t n = strata_args_tensor_nbytes(a, i);
        size_t off = 0;

        if (!tag_returns(a->tensors[i].tag) || t->resident[i])
            continue;
        do {
            size_t len = n - off < WIRE_CHUNK_MAX ? n - off : WIRE_CHUNK_MAX;

            /* No more than the mark waits to go out: a task whose
             * results name one large buffer many times, or many tasks
             * at once, must not queue gigabytes for a parent that reads
             * slowly or not at all (that one the silence limit ends). */
            if (wire_conn_wait_room(s->conn, s->lim.reply_high_water))
                return false;

            memset(&m.u.data_chunk, 0, sizeof(m.u.data_chunk));
            m.u.data_chunk.request_id = t->task.request_id;
            m.u.data_chunk.tensor = i;
            m.u.data_chunk.offset = off;
            m.u.data_chunk.data = p + off;
            m.u.data_chunk.len = len;
            m.u.data_chunk.last = off + len == n;
            session_send_msg(s, &m);
            off += len;
        } while (off < n);
    }
    return true;
}

/* The connection's flow check: no more frames while the jobs are at
 * their cap (called with the connection locked). */
static bool jobs_full(void *arg)
{
    struct session *s = arg;

    /* Commands waiting on a busy chip are kept whole (up to ~5 MB each):
     * their bytes count against the same mark as queued replies. */
    return __atomic_load_n(&s->work, __ATOMIC_ACQUIRE) >= s->lim.max_threads ||
           __atomic_load_n(&s->held_bytes, __ATOMIC_ACQUIRE) >
               s->lim.reply_high_water;
}

/* A domain command of len bytes is done or dropped. */
static void cmd_bytes_done(struct session *s, size_t len)
{
    size_t was = __atomic_fetch_sub(&s->held_bytes, len, __ATOMIC_ACQ_REL);

    if (was > s->lim.reply_high_water && was - len <= s->lim.reply_high_water)
        wire_conn_recheck(s->conn);
}

static void job_done(struct session *s)
{
    if (__atomic_sub_fetch(&s->work, 1, __ATOMIC_ACQ_REL) + 1 >=
        s->lim.max_threads)
        wire_conn_recheck(s->conn);
}

/* The task is over: its shadows may go, and it no longer counts. */
static void task_free(struct session *s, struct stask *t)
{
    session_shadow_unpin_all(s, t);
    wire_task_free(&t->task);
    strata_args_destroy(t->args);
    base_free(t);
    __atomic_sub_fetch(&s->tasks, 1, __ATOMIC_RELEASE);
}

static void task_job(struct spool_job *job)
{
    struct stask *t = (struct stask *)job;
    struct session *s = t->s;
    const struct chip_callable *c = chip_registry_find(t->task.digest);
    struct wire_msg m = {.type = WIRE_MSG_COMPLETION};
    uint32_t outs[STRATA_MAX_TENSORS];
    size_t nout = 0;
    strata_orch_fn fn;
    strata_err err;
    bool answer;
    uint64_t t0 = s->traced ? trace_now() : 0;
    uint16_t lane = t0 ? session_trace_lane_take() : 0;
    /* Taken now: past a deadline the run keeps the args. */
    uint64_t arg_bytes = t0 ? session_trace_arg_bytes(t->args) : 0;

    if (!c || c->kind != STRATA_CALLABLE_ORCH) {
        char hex[65];
        strata_callable tmp = {0};

        memcpy(tmp.digest, t->task.digest, 32);
        err = base_fail(STRATA_ENOENT,
                        "node has no orch callable with digest %s (modules "
                        "are loaded with strata-node --module)",
                        strata_callable_digest_hex(tmp, hex));
        /* A key of protocol 2: an older parent would refuse it. */
        m.u.completion.not_run = s->proto >= 2;
    } else {
        memcpy(&fn, &c->fn, sizeof(fn));
        /* Past a deadline, the run keeps t->args (set to NULL). */
        err = worker_run_bounded(s->w, fn, &t->args, t->task.deadline_ms);
    }
    if (t0)
        session_trace_task(t0, lane, c ? c->name : NULL, &t->task, arg_bytes,
                           err);
    /* No COMPLETION saying OK for results that never went (the session
     * gave up on its parent). */
    answer = err || send_outputs(s, t);
    if (!err)
        for (uint32_t i = 0; i < t->args->num_tensors; i++)
            if (tag_returns(t->args->tensors[i].tag) && !t->resident[i])
                outs[nout++] = i;
    /* Before the COMPLETION: the parent may release the buffers as soon
     * as it has it. */
    session_shadow_unpin_all(s, t);
    m.u.completion.request_id = t->task.request_id;
    m.u.completion.error = err;
    m.u.completion.message = err ? strata_errmsg() : "";
    m.u.completion.data_tensors = outs;
    m.u.completion.num_data_tensors = nout;
    if (answer)
        session_send_msg(s, &m);
    task_free(s, t);
    job_done(s);
}

/* A job (a task, a domain command) runs on the thread that read it when
 * it can (the loop moves to a pool thread), else on a pool thread. false:
 * it cannot run at all; the session stops and the caller frees the job.
 * At max_threads jobs the connection stops reading (jobs_full) until one
 * ends, so threads stay bounded and the peer feels the back-pressure. */
static bool start_job(struct session *s, struct spool_job *job)
{
    if (__atomic_add_fetch(&s->work, 1, __ATOMIC_ACQ_REL) >= s->lim.max_threads)
        wire_conn_recheck(s->conn);
    if (spool_loop_offer(&s->loop, job))
        return true;
    if (spool_submit(&s->pool, job) == STRATA_OK)
        return true;
    LOG_ERROR("cannot run a job: %s", strata_errmsg());
    job_done(s);
    stop(s, 1, "out of threads");
    return false;
}

static void start_task(struct session *s, struct stask *t)
{
    t->job.fn = task_job;
    if (!start_job(s, &t->job))
        task_free(s, t);
}

/* Maps the task's tensors onto shadow buffers. */
static strata_err bind_args(struct session *s, struct stask *t)
{
    strata_err err = strata_args_create(&t->args);

    /* The decoder checked every tensor against its buffer's size, which
     * its shadow has too; the tensor then names the shadow, so the node's
     * chips map it by identity. */
    if (!err)
        err = wire_args_decode(t->task.args, t->task.args_len, t->args);
    for (uint32_t i = 0; !err && i < t->args->num_tensors; i++) {
        struct wire_tensor *x = &t->args->tensors[i];
        strata_buffer *b = session_shadow_get(s, x->buffer_id, x->buffer_size,
                                              false, &t->resident[i], &err);

        if (!b)
            break;
        session_shadow_pin(s, t, x->buffer_id);
        x->buffer_id = b->id;
        x->creator = b->creator;
        t->args->buffers[i] = b;
        t->args->data[i] = (char *)b->data + x->offset;
    }
    return err;
}

static void fail_request(struct session *s, uint64_t id, strata_err err,
                         const char *msg)
{
    struct wire_msg m = {.type = WIRE_MSG_COMPLETION};

    m.u.completion.request_id = id;
    m.u.completion.error = err;
    m.u.completion.message = msg;
    /* Refused before anything of the parent's ran (its shadow buffers
     * past --max-buffer-bytes, say): the parent keeps the code, as for an
     * unknown callable, rather than call it a failed task. */
    m.u.completion.not_run = s->proto >= 2;
    session_send_msg(s, &m);
}

static bool request_open(const struct session *s, uint64_t id)
{
    for (const struct stask *t = s->waiting; t; t = t->next)
        if (t->task.request_id == id)
            return true;
    return false;
}

static void on_task(struct session *s, struct wire_msg *m)
{
    struct stask *t;
    strata_err err;

    /* A parent keeps at most a ring of requests out (8 today): more is a
     * peer that ignores completions. */
    if (__atomic_load_n(&s->tasks, __ATOMIC_ACQUIRE) >= s->lim.max_tasks) {
        char why[128];

        snprintf(why, sizeof(why),
                 "the parent has more than %u tasks in flight "
                 "(strata-node --max-tasks)",
                 s->lim.max_tasks);
        wire_msg_free(m);
        stop_telling(s, why);
        return;
    }
    if (request_open(s, m->u.task.request_id)) {
        wire_msg_free(m);
        stop(s, 1, "a TASK reuses the request id of one still receiving");
        return;
    }
    t = base_calloc(1, sizeof(*t));
    if (!t) {
        wire_msg_free(m);
        stop(s, 1, "out of memory for a task");
        return;
    }
    __atomic_add_fetch(&s->tasks, 1, __ATOMIC_ACQ_REL);
    t->task = m->u.task; /* takes the decoded memory */
    t->s = s;
    /* A parent hands a node orch tasks; the node's own orch fn submits to
     * its chips and sub workers. */
    if (t->task.target != WIRE_TARGET_WORKER)
        err = base_fail(STRATA_ENOTSUP,
                        "TASK target %u: a node runs only tasks for itself "
                        "(target 1, an orch callable); its orch fn submits "
                        "to its chips",
                        (unsigned)t->task.target);
    /* A task past its deadline goes on, on a thread of its own, and no
     * longer counts as in flight: without this, tasks with short
     * deadlines would add threads without end. */
    else if (t->task.deadline_ms && s->w &&
             worker_bounded_count(s->w) >= s->lim.max_tasks)
        err = base_fail(STRATA_EBUSY,
                        "this node still runs %u tasks with deadlines (most "
                        "of them past it), the most a session may "
                        "(strata-node --max-tasks %u); tasks with a "
                        "deadline are refused until one of them ends",
                        worker_bounded_count(s->w), s->lim.max_tasks);
    else
        err = bind_args(s, t);
    if (!err) {
        for (size_t k = 0; k < t->task.num_data_tensors; k++) {
            if (t->task.data_tensors[k] >= t->args->num_tensors) {
                err = base_fail(STRATA_EPROTO,
                                "TASK announces data for tensor %u of %u",
                                t->task.data_tensors[k], t->args->num_tensors);
                break;
            }
        }
    }
    if (err) {
        /* Answered now; the data it announced is still on its way and
         * is read and dropped. */
        fail_request(s, t->task.request_id, err, strata_errmsg());
        session_shadow_unpin_all(s, t);
        t->refused = true;
    }
    if (t->task.num_data_tensors == 0) {
        if (t->refused)
            task_free(s, t);
        else
            start_task(s, t);
        return;
    }
    t->next = s->waiting;
    s->waiting = t;
}

/* Checks one chunk against the sequence docs/wire.md prescribes: for
 * each announced tensor in turn, chunks from offset 0 on without a gap,
 * the last one flagged and ending at the tensor's end. NULL when it
 * fits, else why not. */
static const char *chunk_misfit(const struct stask *t,
                                const struct wire_data_chunk *c)
{
    uint32_t want = t->task.data_tensors[t->cur];
    size_t n;

    if (c->tensor != want)
        return "data chunk for a tensor out of turn";
    if (c->offset != t->next_off)
        return "data chunk out of order";
    if (c->len == 0 && !c->last)
        return "empty data chunk that is not the last";
    if (t->refused)
        return NULL; /* its sizes may be unknown: the last flag ends it */
    n = strata_args_tensor_nbytes(t->args, want);
    if (c->offset > n || c->len > n - c->offset)
        return "data chunk outside its tensor";
    if (c->last != (c->offset + c->len == n))
        return c->last ? "data chunk flagged last before its tensor's end"
                       : "data chunk reaches its tensor's end unflagged";
    return NULL;
}

static void on_chunk(struct session *s, const struct wire_data_chunk *c)
{
    struct stask **pp = &s->waiting;
    struct stask *t;
    const char *why;

    while (*pp && (*pp)->task.request_id != c->request_id)
        pp = &(*pp)->next;
    t = *pp;
    if (!t) {
        stop(s, 1, "data chunk for a request that announced none");
        return;
    }
    why = chunk_misfit(t, c);
    if (why) {
        LOG_WARN("request %llu tensor %u offset %llu: %s",
                 (unsigned long long)c->request_id, c->tensor,
                 (unsigned long long)c->offset, why);
        stop(s, 1, why);
        return;
    }
    if (!t->refused)
        memcpy((uint8_t *)strata_args_tensor_data(t->args, c->tensor) +
                   c->offset,
               c->data, c->len);
    t->next_off += c->len;
    if (!c->last)
        return;
    t->next_off = 0;
    if (++t->cur < t->task.num_data_tensors)
        return;
    *pp = t->next;
    if (t->refused)
        task_free(s, t);
    else
        start_task(s, t);
}

/* BUFFER_WRITE / BUFFER_READ on a shadow; the parent makes sure no task
 * uses those bytes meanwhile. A read's bytes go out from the shadow. */
static strata_err buffer_copy(struct session *s, const struct wire_control *c,
                              struct wire_operands *res)
{
    const struct wire_operands *o = &c->operands;
    strata_buffer *b = NULL;
    uint8_t *p;

    b = session_shadow_lookup(s, o->buffer_id);
    if (!b)
        return base_fail(STRATA_ENOENT, "no buffer %llu on this node",
                         (unsigned long long)o->buffer_id);
    if (o->offset > strata_buffer_size(b) ||
        o->nbytes > strata_buffer_size(b) - o->offset)
        return base_fail(
            STRATA_EINVAL,
            "bytes [%llu, +%llu) outside buffer %llu of %zu "
            "bytes",
            (unsigned long long)o->offset, (unsigned long long)o->nbytes,
            (unsigned long long)o->buffer_id, strata_buffer_size(b));
    p = (uint8_t *)strata_buffer_data(b) + o->offset;
    if (c->op == WIRE_CTRL_BUFFER_READ && o->nbytes > WIRE_INLINE_MAX)
        return base_fail(STRATA_EINVAL,
                         "BUFFER_READ of %llu bytes: at most %u per request",
                         (unsigned long long)o->nbytes, WIRE_INLINE_MAX);
    if (c->op == WIRE_CTRL_BUFFER_READ) {
        res->present = WIRE_OPND_BIT(WIRE_OPND_DATA);
        res->data = p;
        res->data_len = o->nbytes;
    } else if (!(o->present & WIRE_OPND_BIT(WIRE_OPND_DATA))) {
        return base_fail(STRATA_ENOTSUP, "BUFFER_WRITE takes its bytes "
                                         "inline here");
    } else {
        memcpy(p, o->data, o->nbytes);
    }
    return STRATA_OK;
}

static void on_control(struct session *s, const struct wire_control *c)
{
    struct wire_msg m = {.type = WIRE_MSG_CONTROL_REPLY};
    strata_err err = STRATA_OK;
    bool resident;

    switch (c->op) {
    case WIRE_CTRL_PING:
        break;
    case WIRE_CTRL_BUFFER_RELEASE:
        err = session_shadow_release(s, c->operands.buffer_id);
        break;
    case WIRE_CTRL_BUFFER_CREATE:
        if (!(c->operands.present & WIRE_OPND_BIT(WIRE_OPND_BUFFER_ID))) {
            err = base_fail(STRATA_ENOTSUP, "BUFFER_CREATE needs the "
                                            "sender's buffer_id here");
            break;
        }
        session_shadow_get(s, c->operands.buffer_id, c->operands.nbytes, true,
                           &resident, &err);
        m.u.control_reply.results.present =
            err ? 0 : WIRE_OPND_BIT(WIRE_OPND_BUFFER_ID);
        m.u.control_reply.results.buffer_id = c->operands.buffer_id;
        break;
    case WIRE_CTRL_BUFFER_WRITE:
    case WIRE_CTRL_BUFFER_READ:
        err = buffer_copy(s, c, &m.u.control_reply.results);
        if (err)
            m.u.control_reply.results.present = 0;
        break;
    default:
        err = base_fail(STRATA_ENOTSUP, "control op %s is not supported",
                        wire_ctrl_op_name(c->op));
    }
    m.u.control_reply.request_id = c->request_id;
    m.u.control_reply.op = c->op;
    m.u.control_reply.error = err;
    m.u.control_reply.message = err ? strata_errmsg() : "";
    session_send_msg(s, &m);
}

/* ---- global domain commands ------------------------------------------ */

struct scmd {
    struct spool_job job; /* first: the pool hands it back */
    struct session *s;
    struct scmd *next; /* queued behind the running one (s->mu) */
    size_t len;
    uint8_t frame[]; /* header + body */
};

/* Runs c; its reply goes after those in out. */
static void cmd_run(struct scmd *c, struct wire_buf *out)
{
    if (gnode_handle(c->s->w, c->frame, c->len, out) != STRATA_OK)
        LOG_WARN("domain command: %s", strata_errmsg());
}

static void send_replies(struct session *s, struct wire_buf *out)
{
    strata_err err;

    if (out->len && (err = wire_conn_send(s->conn, out->data, out->len)) != 0)
        send_failed(s, "a domain command's reply", err);
    wire_buf_reset(out);
}

/* A window copy drives a chip, which waits: off the loop, like a task. */
static void copy_job(struct spool_job *job)
{
    struct scmd *c = (struct scmd *)job;
    struct session *s = c->s;
    struct wire_buf out;

    wire_buf_init(&out);
    cmd_run(c, &out);
    send_replies(s, &out);
    wire_buf_fini(&out);
    cmd_bytes_done(s, c->len);
    base_free(c);
    job_done(s);
}

/* The next queued domain command, or NULL (then, with last, none runs). */
static struct scmd *cmd_next(struct session *s, bool last)
{
    struct scmd *c;

    pthread_mutex_lock(&s->mu);
    c = s->cmd_head;
    if (c) {
        s->cmd_head = c->next;
        if (!s->cmd_head)
            s->cmd_tail = NULL;
    } else if (last) {
        s->cmd_running = false;
    }
    pthread_mutex_unlock(&s->mu);
    return c;
}

/* Domain commands, in order: this one, then every one queued meanwhile.
 * The next of a transaction sent at once depends on this one's outcome
 * (an IMPORT finds what PREPARE_EXPORT made). Replies go out together
 * once no command is queued (one TLS record for a whole transaction),
 * and before this thread lets another run one, so they stay in order. */
static void cmd_job(struct spool_job *job)
{
    struct scmd *c = (struct scmd *)job;
    struct session *s = c->s;
    struct wire_buf out;

    wire_buf_init(&out);
    while (c) {
        cmd_run(c, &out);
        cmd_bytes_done(s, c->len);
        base_free(c);
        job_done(s); /* each queued command counts as work too */
        c = cmd_next(s, false);
        if (!c) {
            send_replies(s, &out);
            c = cmd_next(s, true);
        }
    }
    wire_buf_fini(&out);
}

static void on_domain(struct session *s, unsigned type, const uint8_t *body,
                      size_t len, bool ordered)
{
    struct scmd *c = base_malloc(sizeof(*c) + WIRE_FRAME_HEADER_SIZE + len);
    struct wire_frame_header h = {WIRE_FRAME_VERSION, (uint8_t)type, 0,
                                  (uint32_t)len};
    bool queued = false, full = false;

    if (!c) {
        stop(s, 1, "out of memory");
        return;
    }
    c->s = s;
    c->next = NULL;
    c->len = WIRE_FRAME_HEADER_SIZE + len;
    __atomic_add_fetch(&s->held_bytes, c->len, __ATOMIC_ACQ_REL);
    wire_frame_header_pack(&h, c->frame);
    memcpy(c->frame + WIRE_FRAME_HEADER_SIZE, body, len);
    c->job.fn = ordered ? cmd_job : copy_job;
    if (ordered) {
        pthread_mutex_lock(&s->mu);
        if (s->cmd_running) {
            /* Counted like a job before the runner can see it: at
             * max_threads commands waiting or running the connection
             * stops reading, so a peer cannot queue without bound. */
            full = __atomic_add_fetch(&s->work, 1, __ATOMIC_ACQ_REL) >=
                   s->lim.max_threads;
            if (s->cmd_tail)
                s->cmd_tail->next = c;
            else
                s->cmd_head = c;
            s->cmd_tail = c;
            queued = true;
        } else {
            s->cmd_running = true;
        }
        pthread_mutex_unlock(&s->mu);
    }
    if (queued) {
        if (full || jobs_full(s))
            wire_conn_recheck(s->conn);
        return;
    }
    if (start_job(s, &c->job))
        return;
    cmd_bytes_done(s, c->len);
    base_free(c);
    if (!ordered)
        return;
    /* The session stops: nothing queued behind it will run either. */
    pthread_mutex_lock(&s->mu);
    c = s->cmd_head;
    s->cmd_head = s->cmd_tail = NULL;
    s->cmd_running = false;
    pthread_mutex_unlock(&s->mu);
    while (c) {
        struct scmd *next = c->next;

        cmd_bytes_done(s, c->len);
        base_free(c);
        job_done(s); /* counted when it was queued */
        c = next;
    }
}

/* ---- the connection ------------------------------------------------- */

static void on_msg(struct wire_conn *c, unsigned type, const uint8_t *body,
                   size_t len, void *arg)
{
    struct session *s = arg;
    struct wire_msg m;

    (void)c;
    /* The loop ends after this read: the frames read with the one that
     * ended it are not acted on (a HELLO after a refused frame would still
     * fork chips). */
    if (s->ended)
        return;
    if (wire_msg_unpack(type, body, len, &m) != STRATA_OK) {
        LOG_WARN("dropping the session: %s", strata_errmsg());
        stop(s, 1, "malformed message");
        return;
    }
    if (s->state == S_WAIT_HELLO && type != WIRE_MSG_HELLO) {
        stop(s, 1, "a message before HELLO");
    } else if (type == WIRE_MSG_HELLO) {
        if (s->state != S_WAIT_HELLO) {
            stop(s, 1, "a second HELLO");
        } else {
            session_on_hello(s, &m); /* takes the message's memory */
            return;
        }
    } else if (s->state == S_STARTING && type != WIRE_MSG_HEARTBEAT &&
               type != WIRE_MSG_GOODBYE) {
        stop(s, 1, "a message before HELLO_REPLY");
    } else if (type == WIRE_MSG_TASK) {
        on_task(s, &m); /* takes the message's memory */
        return;
    } else if (type == WIRE_MSG_DATA_CHUNK) {
        on_chunk(s, &m.u.data_chunk);
    } else if (type == WIRE_MSG_CONTROL &&
               (m.u.control.op == WIRE_CTRL_WINDOW_WRITE ||
                m.u.control.op == WIRE_CTRL_WINDOW_READ)) {
        on_domain(s, type, body, len, false); /* waits for a chip */
    } else if (type == WIRE_MSG_CONTROL) {
        on_control(s, &m.u.control);
    } else if (type == WIRE_MSG_DOMAIN_CMD || type == WIRE_MSG_COMM_INIT) {
        on_domain(s, type, body, len, true);
    } else if (type == WIRE_MSG_TRACE && s->traced && !m.u.trace.is_data) {
        session_trace_answer(s->conn, m.u.trace.request_id);
    } else if (type == WIRE_MSG_GOODBYE) {
        stop(s, 0, "the parent said goodbye");
    } else if (type != WIRE_MSG_HEARTBEAT) {
        char why[96];

        snprintf(why, sizeof(why), "a message a parent does not send (%s)",
                 wire_msg_name(type));
        stop(s, 1, why);
    }
    wire_msg_free(&m);
}

static void on_state(struct wire_conn *c, strata_err err, const char *why,
                     void *arg)
{
    struct session *s = arg;

    (void)c;
    if (err != STRATA_OK || strcmp(why, "connected") != 0)
        stop(s, err ? 1 : (s->abandon ? s->status : 0), why);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct session *s = arg;
    struct wire_msg m = {.type = WIRE_MSG_HEARTBEAT};

    (void)fd;
    (void)what;
    /* From the accept, not the last byte: a client that trickles a
     * HELLO in byte by byte does not hold a session either. */
    if (s->state == S_WAIT_HELLO &&
        (double)(base_now_ns() - s->start_ns) / 1e9 > HELLO_TIMEOUT_S) {
        stop(s, 1, "no HELLO in time");
        return;
    }
    if (wire_conn_idle_s(s->conn) > PEER_SILENT_S) {
        stop(s, 1, "the parent went silent");
        return;
    }
    /* From HELLO on, so that a node that takes long to start is not
     * taken for dead. */
    if (s->state == S_WAIT_HELLO ||
        (s->state == S_STARTING && !s->startup_heartbeats))
        return;
    m.u.heartbeat.seq = ++s->hb_seq;
    m.u.heartbeat.time_ns = 0;
    session_send_msg(s, &m);
}

/* SIGTERM arrives on a signalfd: whichever thread runs the loop reads it,
 * and no thread is interrupted (tasks run on the loop's thread too). */
static void on_sigterm(evutil_socket_t fd, short what, void *arg)
{
    struct session *s = arg;
    struct signalfd_siginfo si;
    const char *why;
    int status;

    (void)what;
    if (read(fd, &si, sizeof(si)) != (ssize_t)sizeof(si))
        return;
    why = session_end_reason(&status);
    LOG_INFO("session ends: %s", why);
    end_telling(s, status, why);
}

static void finish(struct session *s)
{
    if (s->abandon)
        session_end_reclaim();
    session_abandon_work(s);
    /* A task past its deadline may hold a chip for good (a kernel that
     * never returns), and jobs queued behind it (a window copy, an ABORT)
     * would hold the pool, and so the session, with it: its chips are
     * killed now, not after the pool is idle (worker_bounded_settle). */
    if (s->w && worker_bounded_late_running(s->w)) {
        LOG_INFO("stopping tasks that passed their deadline");
        worker_kill_children(s->w);
    }
    /* However the loop ended (a failed loop calls no stop()), nothing
     * drains now: results still waiting for room are dropped. */
    if (s->conn)
        wire_conn_stop_waits(s->conn);
    spool_wait_idle(&s->pool);
    if (s->start) { /* the loop ended before it took the result */
        s->w = s->start->w;
        wire_msg_free(&s->start->m);
        base_free(s->start);
        s->start = NULL;
    }
    while (s->waiting) {
        struct stask *t = s->waiting;

        s->waiting = t->next;
        task_free(s, t);
    }
    if (s->w && !worker_bounded_settle(s->w, 5.0)) {
        LOG_WARN("a task past its deadline does not end; leaving without "
                 "teardown");
        s->w = NULL;
    }
    if (s->w && strata_worker_destroy(s->w) != STRATA_OK)
        LOG_WARN("worker teardown: %s", strata_errmsg());
    if (s->traced)
        session_trace_finish();
    base_free(s->shadows);
}

void worker_session_limits_default(struct worker_session_limits *l)
{
    l->max_tasks = 256;
    l->max_threads = 64;
    l->max_buffer_bytes = (uint64_t)16 << 30;
    l->max_window_bytes = (uint64_t)16 << 30;
    l->max_procs = 512;
    l->reply_high_water = (size_t)64 << 20;
    l->procs = NULL;
}

int worker_session_main(int fd, SSL *ssl, const char *peer,
                        const struct worker_session_limits *lim)
{
    static const struct timeval tick = {HEARTBEAT_S, 0};
    struct session s;
    struct wire_conn_cbs cbs = {on_msg, on_state, &s};
    struct event *sig = NULL;
    sigset_t term;
    int sfd;

    /* Before any thread: every thread inherits the mask. */
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigprocmask(SIG_BLOCK, &term, NULL);
    sfd = signalfd(-1, &term, SFD_CLOEXEC | SFD_NONBLOCK);
    /* A session records only for a tracing parent (session_trace.c):
     * the daemon's STRATA_TRACE would have every session write one file. */
    if (getenv("STRATA_TRACE"))
        unsetenv("STRATA_TRACE");
    memset(&s, 0, sizeof(s));
    if (lim)
        s.lim = *lim;
    else
        worker_session_limits_default(&s.lim);
    s.start_ns = base_now_ns();
    pthread_mutex_init(&s.mu, NULL);
    /* Jobs stop at max_threads (jobs_full); the loop, when it moves off
     * a thread running a job, and the start-up job take one each. */
    spool_init(&s.pool, s.lim.max_threads + 2);
    base_log_set_role("session");
    evthread_use_pthreads();
    s.base = event_base_new();
    if (!s.base ||
        wire_conn_open(s.base, ssl, fd, peer, &cbs, &s.conn) != STRATA_OK)
        return 1;
    wire_conn_set_flow(s.conn, jobs_full, s.lim.reply_high_water);
    s.timer = event_new(s.base, -1, EV_PERSIST, on_timer, &s);
    s.started = event_new(s.base, -1, 0, session_on_started, &s);
    sig = sfd >= 0
              ? event_new(s.base, sfd, EV_READ | EV_PERSIST, on_sigterm, &s)
              : NULL;
    if (!s.timer || !s.started || !sig || event_add(s.timer, &tick) != 0 ||
        event_add(sig, NULL) != 0)
        return 1;
    s.status = 1;
    if (spool_loop_init(&s.loop, &s.pool, s.base) != STRATA_OK)
        LOG_WARN("every task runs on a pool thread: %s", strata_errmsg());
    spool_loop_run(&s.loop);
    finish(&s);
    /* The watch thread may submit to the pool: it goes first. */
    spool_loop_fini(&s.loop);
    spool_fini(&s.pool);
    event_free(s.timer);
    event_free(s.started);
    event_free(sig);
    if (sfd >= 0)
        close(sfd);
    wire_conn_free(s.conn);
    wire_base_free(s.base);
    return s.status;
}
