/* The session process. Nothing is parsed before TLS has authenticated the
 * peer; the first message must be HELLO, which sizes the L3 worker. Each
 * TASK waits for its input bytes (DATA_CHUNK), then runs on its own thread
 * as a run of the L3 worker; its output bytes and COMPLETION go back on
 * the same connection, so several tasks are in flight at once and control
 * messages never wait behind them. The parent's buffers live here as
 * shadow buffers, kept across tasks. */
#include "worker/session.h"
#include "base/alloc.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "chip/registry.h"
#include "spool.h"
#include "wire/conn.h"
#include "wire/msg.h"
#include "worker_int.h"

#include <event2/event.h>
#include <event2/thread.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#define HELLO_TIMEOUT_S 10.0
#define HEARTBEAT_S 1
#define PEER_SILENT_S 10.0

struct shadow {
    uint64_t id;
    strata_buffer *buf;
    bool resident; /* a remote buffer of the parent: its bytes stay here */
};

struct stask {
    struct spool_job job; /* first: the pool hands it back */
    struct wire_task task;
    strata_args *args; /* decoded tensors, for shapes and tags */
    uint32_t waiting;  /* data tensors whose last chunk is missing */
    bool resident[STRATA_MAX_TENSORS]; /* tensor i's bytes stay here */
    struct session *s;
    struct stask *next;
};

struct session {
    struct event_base *base;
    struct wire_conn *conn;
    strata_worker *w;
    bool hello_done;
    uint64_t start_ns; /* accepted: the HELLO deadline counts from here */
    uint16_t proto;    /* the protocol version HELLO chose */
    uint32_t peer_pid;
    pthread_mutex_t mu; /* shadows */
    struct spool pool;  /* tasks and domain commands, off the loop */
    struct spool_loop loop;
    uint32_t work; /* tasks and commands started, not finished (atomic) */
    struct shadow *shadows;
    size_t num_shadows;
    size_t cap_shadows;
    struct stask *waiting; /* tasks still receiving input */
    struct event *timer;
    uint64_t hb_seq;
    int status;
    bool abandon; /* the parent is gone or we are told to stop: kill work */
};

static void send_msg(struct session *s, const struct wire_msg *m)
{
    struct wire_buf b;

    wire_buf_init(&b);
    if (wire_msg_pack(m, &b) != STRATA_OK ||
        wire_conn_send(s->conn, b.data, b.len) != STRATA_OK)
        LOG_WARN("cannot send %s: %s", wire_msg_name(m->type), strata_errmsg());
    wire_buf_fini(&b);
}

/* Nobody will take the results of running work: kill the chips and subs
 * so it fails at once (it may be running on the thread that must end the
 * session). */
static void abandon_work(struct session *s)
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
    /* Only an orderly GOODBYE lets running tasks finish. */
    if (status != 0) {
        s->abandon = true;
        abandon_work(s);
    }
    spool_loop_end(&s->loop, NULL);
}

/* ---- shadows ------------------------------------------------------- */

/* The shadow of buffer id, made on first use; create: only make it
 * (BUFFER_CREATE, resident), STRATA_EEXIST if it is there. */
static strata_buffer *shadow_get(struct session *s, uint64_t id, size_t size,
                                 bool create, bool *resident, strata_err *err)
{
    strata_buffer *b = NULL;

    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->num_shadows && !b; i++) {
        if (s->shadows[i].id == id) {
            b = s->shadows[i].buf;
            *resident = s->shadows[i].resident;
        }
    }
    if (b && create) {
        *err = base_fail(STRATA_EEXIST, "buffer %llu exists",
                         (unsigned long long)id);
        b = NULL;
    } else if (b && strata_buffer_size(b) != size) {
        *err = base_fail(STRATA_EPROTO, "buffer %llu changed size",
                         (unsigned long long)id);
        b = NULL;
    } else if (!b) {
        if (s->num_shadows == s->cap_shadows) {
            size_t cap = s->cap_shadows ? 2 * s->cap_shadows : 8;
            void *p = base_realloc(s->shadows, cap * sizeof(*s->shadows));

            if (!p) {
                *err = base_fail(STRATA_ENOMEM, "out of memory");
                goto out;
            }
            s->shadows = p;
            s->cap_shadows = cap;
        }
        *err = strata_worker_create_buffer(s->w, size, &b);
        if (!*err) {
            s->shadows[s->num_shadows].id = id;
            s->shadows[s->num_shadows].buf = b;
            s->shadows[s->num_shadows].resident = create;
            s->num_shadows++;
            *resident = create;
        }
    }
out:
    pthread_mutex_unlock(&s->mu);
    return b;
}

static strata_err shadow_release(struct session *s, uint64_t id)
{
    strata_err err = STRATA_OK;

    /* A run past its deadline may still use it: it stays until the
     * session ends. */
    if (s->w && worker_bounded_late_running(s->w))
        return STRATA_OK;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->num_shadows; i++) {
        if (s->shadows[i].id == id) {
            err = strata_buffer_release(s->shadows[i].buf);
            if (!err)
                s->shadows[i] = s->shadows[--s->num_shadows];
            break;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return err;
}

/* ---- tasks ---------------------------------------------------------- */

static bool tag_returns(uint8_t tag)
{
    return tag != STRATA_IN;
}

static void send_outputs(struct session *s, struct stask *t)
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

            memset(&m.u.data_chunk, 0, sizeof(m.u.data_chunk));
            m.u.data_chunk.request_id = t->task.request_id;
            m.u.data_chunk.tensor = i;
            m.u.data_chunk.offset = off;
            m.u.data_chunk.data = p + off;
            m.u.data_chunk.len = len;
            m.u.data_chunk.last = off + len == n;
            send_msg(s, &m);
            off += len;
        } while (off < n);
    }
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
    if (!err) {
        send_outputs(s, t);
        for (uint32_t i = 0; i < t->args->num_tensors; i++)
            if (tag_returns(t->args->tensors[i].tag) && !t->resident[i])
                outs[nout++] = i;
    }
    m.u.completion.request_id = t->task.request_id;
    m.u.completion.error = err;
    m.u.completion.message = err ? strata_errmsg() : "";
    m.u.completion.data_tensors = outs;
    m.u.completion.num_data_tensors = nout;
    send_msg(s, &m);
    wire_task_free(&t->task);
    strata_args_destroy(t->args);
    base_free(t);
    __atomic_sub_fetch(&s->work, 1, __ATOMIC_RELEASE);
}

/* A job (a task, a domain command) runs on the thread that read it when
 * it can (the loop moves to a pool thread), else on a pool thread. false:
 * it cannot run at all; the session stops and the caller frees the job. */
static bool start_job(struct session *s, struct spool_job *job)
{
    __atomic_add_fetch(&s->work, 1, __ATOMIC_RELEASE);
    if (spool_loop_offer(&s->loop, job))
        return true;
    if (spool_submit(&s->pool, job) == STRATA_OK)
        return true;
    LOG_ERROR("cannot run a job: %s", strata_errmsg());
    __atomic_sub_fetch(&s->work, 1, __ATOMIC_RELEASE);
    stop(s, 1, "out of threads");
    return false;
}

static void start_task(struct session *s, struct stask *t)
{
    t->job.fn = task_job;
    if (start_job(s, &t->job))
        return;
    wire_task_free(&t->task);
    strata_args_destroy(t->args);
    base_free(t);
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
        strata_buffer *b = shadow_get(s, x->buffer_id, x->buffer_size, false,
                                      &t->resident[i], &err);

        if (!b)
            break;
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
    send_msg(s, &m);
}

static void on_task(struct session *s, struct wire_msg *m)
{
    struct stask *t = base_calloc(1, sizeof(*t));
    strata_err err;

    if (!t) {
        fail_request(s, m->u.task.request_id, STRATA_ENOMEM, "out of memory");
        wire_msg_free(m);
        return;
    }
    t->task = m->u.task; /* takes the decoded memory */
    t->s = s;
    t->waiting = (uint32_t)t->task.num_data_tensors;
    err = bind_args(s, t);
    if (err) {
        fail_request(s, t->task.request_id, err, strata_errmsg());
        wire_task_free(&t->task);
        strata_args_destroy(t->args);
        base_free(t);
        return;
    }
    if (t->waiting == 0) {
        start_task(s, t);
        return;
    }
    t->next = s->waiting;
    s->waiting = t;
}

static void on_chunk(struct session *s, const struct wire_data_chunk *c)
{
    struct stask **pp = &s->waiting;
    struct stask *t;
    uint8_t *dst;
    size_t n;

    while (*pp && (*pp)->task.request_id != c->request_id)
        pp = &(*pp)->next;
    t = *pp;
    if (!t || c->tensor >= t->args->num_tensors) {
        stop(s, 1, "data chunk for an unknown request or tensor");
        return;
    }
    dst = strata_args_tensor_data(t->args, c->tensor);
    n = strata_args_tensor_nbytes(t->args, c->tensor);
    if (c->offset > n || c->len > n - c->offset) {
        stop(s, 1, "data chunk outside its tensor");
        return;
    }
    memcpy(dst + c->offset, c->data, c->len);
    if (c->last && --t->waiting == 0) {
        *pp = t->next;
        start_task(s, t);
    }
}

/* BUFFER_WRITE / BUFFER_READ on a shadow; the parent makes sure no task
 * uses those bytes meanwhile. A read's bytes go out from the shadow. */
static strata_err buffer_copy(struct session *s, const struct wire_control *c,
                              struct wire_operands *res)
{
    const struct wire_operands *o = &c->operands;
    strata_buffer *b = NULL;
    uint8_t *p;

    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->num_shadows && !b; i++)
        if (s->shadows[i].id == o->buffer_id)
            b = s->shadows[i].buf;
    pthread_mutex_unlock(&s->mu);
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
        err = shadow_release(s, c->operands.buffer_id);
        break;
    case WIRE_CTRL_BUFFER_CREATE:
        if (!(c->operands.present & WIRE_OPND_BIT(WIRE_OPND_BUFFER_ID))) {
            err = base_fail(STRATA_ENOTSUP, "BUFFER_CREATE needs the "
                                            "sender's buffer_id here");
            break;
        }
        shadow_get(s, c->operands.buffer_id, c->operands.nbytes, true,
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
    send_msg(s, &m);
}

/* ---- global domain commands ------------------------------------------ */

struct scmd {
    struct spool_job job; /* first: the pool hands it back */
    struct session *s;
    size_t len;
    uint8_t frame[]; /* header + body */
};

/* Drives the chips, which waits: off the loop, like a task. */
static void cmd_job(struct spool_job *job)
{
    struct scmd *c = (struct scmd *)job;
    struct session *s = c->s;
    struct wire_buf reply;

    wire_buf_init(&reply);
    if (gnode_handle(s->w, c->frame, c->len, &reply) != STRATA_OK ||
        wire_conn_send(s->conn, reply.data, reply.len) != STRATA_OK)
        LOG_WARN("domain command: %s", strata_errmsg());
    wire_buf_fini(&reply);
    base_free(c);
    __atomic_sub_fetch(&s->work, 1, __ATOMIC_RELEASE);
}

static void on_domain(struct session *s, unsigned type, const uint8_t *body,
                      size_t len)
{
    struct scmd *c = base_malloc(sizeof(*c) + WIRE_FRAME_HEADER_SIZE + len);
    struct wire_frame_header h = {WIRE_FRAME_VERSION, (uint8_t)type, 0,
                                  (uint32_t)len};

    if (!c) {
        stop(s, 1, "out of memory");
        return;
    }
    c->s = s;
    c->len = WIRE_FRAME_HEADER_SIZE + len;
    wire_frame_header_pack(&h, c->frame);
    memcpy(c->frame + WIRE_FRAME_HEADER_SIZE, body, len);
    c->job.fn = cmd_job;
    if (!start_job(s, &c->job))
        base_free(c);
}

/* ---- HELLO ---------------------------------------------------------- */

static strata_err start_worker(struct session *s, const struct wire_hello *h)
{
    strata_worker_config cfg;
    int *ids = base_calloc(h->num_chips ? h->num_chips : 1, sizeof(int));
    strata_err err;

    if (!ids)
        return base_fail(STRATA_ENOMEM, "out of memory");
    for (size_t i = 0; i < h->num_chips; i++)
        ids[i] = (int)h->chip_ids[i];
    strata_worker_config_init(&cfg, 3);
    cfg.platform = h->platform;
    cfg.comm_profile = h->comm_profile;
    cfg.chip_ids = ids;
    cfg.num_chips = h->num_chips;
    cfg.num_sub_workers = h->num_sub_workers;
    /* The tree's remaining start-up budget, not a fresh one. */
    if (h->startup_budget_ms)
        cfg.startup_timeout_s = (double)h->startup_budget_ms / 1e3;
    err = strata_worker_create(&cfg, &s->w);
    base_free(ids);
    if (!err) {
        err = strata_worker_init(s->w);
        if (err) {
            char msg[STRATA_ERRMSG_MAX];

            snprintf(msg, sizeof(msg), "%s", strata_errmsg());
            if (strata_worker_destroy(s->w) != STRATA_OK)
                LOG_WARN("destroy after a failed init: %s", strata_errmsg());
            s->w = NULL;
            err = base_fail(err, "%s", msg);
        }
    }
    return err;
}

static void on_hello(struct session *s, const struct wire_hello *h)
{
    struct wire_msg m = {.type = WIRE_MSG_HELLO_REPLY};
    struct wire_hello_reply *r = &m.u.hello_reply;
    char host[WIRE_NAME_MAX + 1];
    uint16_t version = 0;
    strata_err err;

    err = wire_proto_choose(WIRE_PROTO_MIN, WIRE_PROTO_MAX, h->proto_min,
                            h->proto_max, &version);
    if (!err)
        err = start_worker(s, h);
    if (gethostname(host, sizeof(host)) != 0)
        snprintf(host, sizeof(host), "strata-node");
    host[sizeof(host) - 1] = '\0';
    r->version = err ? 0 : version;
    s->proto = r->version;
    r->error = err;
    r->message = err ? strata_errmsg() : "";
    r->capabilities =
        err ? 0
            : h->capabilities &
                  (WIRE_CAP_DATA_CHUNKS | WIRE_CAP_REMOTE_BUFFERS |
                   WIRE_CAP_GLOBAL_DOMAINS | WIRE_CAP_DEADLINES);
    r->node_name = host;
    r->pid = (uint32_t)getpid();
    send_msg(s, &m);
    if (err) {
        LOG_WARN("refused HELLO: %s", strata_errmsg());
        wire_conn_close(s->conn, (uint32_t)err, "HELLO refused");
        return;
    }
    s->hello_done = true;
    s->peer_pid = h->pid;
    LOG_INFO("session for %s (pid %u): %zu chips, %u sub workers", h->node_name,
             h->pid, h->num_chips, h->num_sub_workers);
}

/* ---- the connection ------------------------------------------------- */

static void on_msg(struct wire_conn *c, unsigned type, const uint8_t *body,
                   size_t len, void *arg)
{
    struct session *s = arg;
    struct wire_msg m;

    (void)c;
    if (wire_msg_unpack(type, body, len, &m) != STRATA_OK) {
        LOG_WARN("dropping the session: %s", strata_errmsg());
        stop(s, 1, "malformed message");
        return;
    }
    if (!s->hello_done && type != WIRE_MSG_HELLO) {
        stop(s, 1, "a message before HELLO");
    } else if (type == WIRE_MSG_HELLO) {
        if (s->hello_done)
            stop(s, 1, "a second HELLO");
        else
            on_hello(s, &m.u.hello);
    } else if (type == WIRE_MSG_TASK) {
        on_task(s, &m); /* takes the message's memory */
        return;
    } else if (type == WIRE_MSG_DATA_CHUNK) {
        on_chunk(s, &m.u.data_chunk);
    } else if (type == WIRE_MSG_CONTROL &&
               (m.u.control.op == WIRE_CTRL_WINDOW_WRITE ||
                m.u.control.op == WIRE_CTRL_WINDOW_READ)) {
        on_domain(s, type, body, len); /* waits for a chip: off the loop */
    } else if (type == WIRE_MSG_CONTROL) {
        on_control(s, &m.u.control);
    } else if (type == WIRE_MSG_DOMAIN_CMD || type == WIRE_MSG_COMM_INIT) {
        on_domain(s, type, body, len);
    } else if (type == WIRE_MSG_GOODBYE) {
        stop(s, 0, "the parent said goodbye");
    } else if (type != WIRE_MSG_HEARTBEAT) {
        stop(s, 1, "an unexpected message type");
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
    if (!s->hello_done &&
        (double)(base_now_ns() - s->start_ns) / 1e9 > HELLO_TIMEOUT_S) {
        stop(s, 1, "no HELLO in time");
        return;
    }
    if (wire_conn_idle_s(s->conn) > PEER_SILENT_S) {
        stop(s, 1, "the parent went silent");
        return;
    }
    if (!s->hello_done)
        return;
    m.u.heartbeat.seq = ++s->hb_seq;
    m.u.heartbeat.time_ns = 0;
    send_msg(s, &m);
}

/* SIGTERM arrives on a signalfd: whichever thread runs the loop reads it,
 * and no thread is interrupted (tasks run on the loop's thread too). */
static void on_sigterm(evutil_socket_t fd, short what, void *arg)
{
    static const struct timeval grace = {1, 0};
    struct session *s = arg;
    struct signalfd_siginfo si;

    (void)what;
    if (read(fd, &si, sizeof(si)) != (ssize_t)sizeof(si))
        return;
    /* GOODBYE first; the loop ends once it is flushed (on_state), or after
     * a short grace if the peer does not read. */
    s->abandon = true;
    s->status = 0;
    /* Queued before the chips die, so that no completion of a task they
     * fail can reach the parent ahead of it (sends after it are refused). */
    wire_conn_close(s->conn, STRATA_EPEER, "strata-node is shutting down");
    abandon_work(s);
    spool_loop_end(&s->loop, &grace);
}

static void finish(struct session *s)
{
    abandon_work(s);
    spool_wait_idle(&s->pool);
    while (s->waiting) {
        struct stask *t = s->waiting;

        s->waiting = t->next;
        wire_task_free(&t->task);
        strata_args_destroy(t->args);
        base_free(t);
    }
    if (s->w && !worker_bounded_settle(s->w, 5.0)) {
        LOG_WARN("a task past its deadline does not end; leaving without "
                 "teardown");
        s->w = NULL;
    }
    if (s->w && strata_worker_destroy(s->w) != STRATA_OK)
        LOG_WARN("worker teardown: %s", strata_errmsg());
    base_free(s->shadows);
}

int worker_session_main(int fd, SSL_CTX *ctx, const char *peer)
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
    memset(&s, 0, sizeof(s));
    s.start_ns = base_now_ns();
    pthread_mutex_init(&s.mu, NULL);
    spool_init(&s.pool);
    base_log_set_role("session");
    evthread_use_pthreads();
    s.base = event_base_new();
    if (!s.base ||
        wire_conn_accept(s.base, ctx, fd, peer, &cbs, &s.conn) != STRATA_OK)
        return 1;
    s.timer = event_new(s.base, -1, EV_PERSIST, on_timer, &s);
    sig = sfd >= 0
              ? event_new(s.base, sfd, EV_READ | EV_PERSIST, on_sigterm, &s)
              : NULL;
    if (!s.timer || !sig || event_add(s.timer, &tick) != 0 ||
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
    event_free(sig);
    if (sfd >= 0)
        close(sfd);
    wire_conn_free(s.conn);
    event_base_free(s.base);
    return s.status;
}
