/* Remote nodes of an L4 (their specs: remote_spec.c). Each looks to the
 * scheduler like a forked child: it has a mailbox ring (private to this
 * process) and a "pidfd" (an eventfd written when the node is lost). One
 * connection thread, a libevent loop, sends each posted frame as a TASK
 * (with its input bytes as DATA_CHUNKs) or CONTROL, writes the answers
 * back into the ring, and rings the scheduler's doorbell, so the scheduler
 * code is the same for both. */
#include "remote.h"
#include "base/alloc.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/futex.h"
#include "base/log.h"

#include <errno.h>
#include <event2/thread.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define HEARTBEAT_S 1
#define PEER_SILENT_S 10.0
#define RX_NONE UINT32_MAX /* remote_node.rx_tensor: no tensor under way */

/* ---- on the connection thread ---------------------------------------- */

static void ring_doorbell(strata_worker *w)
{
    uint64_t one = 1;

    if (write(w->doorbell_fd, &one, sizeof(one)) < 0)
        LOG_DEBUG("doorbell: %s", strerror(errno));
}

/* Every request sent and not answered fails here, where its request id
 * is known, before the scheduler learns of the loss. */
static void fail_in_flight(struct remote_node *r)
{
    struct mbx *mb = r->ep->mbx;

    for (uint32_t k = mb->h.tail; k != r->sent; k++) {
        struct mbx_frame *f = &mb->ring[k % MBX_RING];

        if (r->done[k % MBX_RING])
            continue;
        f->result = (int32_t)STRATA_EPEER;
        /* No request id: it says nothing to a user (a node command's has
         * its top bit set, worker_request_ids). */
        snprintf(f->msg, sizeof(f->msg), "node %zu lost: %.440s", r->index,
                 r->why);
        r->done[k % MBX_RING] = true;
        __atomic_store_n(&f->done, 1, __ATOMIC_SEQ_CST);
    }
}

/* The node is gone: before init it failed to start, after it is lost. */
static void lose(struct remote_node *r, strata_err err, const char *why)
{
    uint64_t one = 1;

    if (r->lost)
        return;
    r->lost = true;
    remote_trace_lost(r);
    snprintf(r->why, sizeof(r->why), "remote %s: %s", r->endpoint, why);
    /* An MPI rank missing at start-up: say who was turned away, if any. */
    if (r->group && !r->ready && mpigroup_refused(r->group)[0])
        snprintf(r->why + strlen(r->why), sizeof(r->why) - strlen(r->why),
                 "; %s", mpigroup_refused(r->group));
    LOG_WARN("%s", r->why);
    if (!r->ready) {
        mbx_child_init_done(r->ep->mbx, err ? err : STRATA_EPEER, r->why);
        ring_doorbell(r->w);
        return;
    }
    fail_in_flight(r);
    __atomic_store_n(&r->ep->lost, r->why, __ATOMIC_RELEASE);
    if (write(r->ep->pidfd, &one, sizeof(one)) < 0)
        LOG_ERROR("cannot report the loss of %s", r->endpoint);
}

static void send_msg(struct remote_node *r, const struct wire_msg *m)
{
    struct wire_buf b;

    wire_buf_init(&b);
    if (wire_msg_pack(m, &b) != STRATA_OK ||
        wire_conn_send(r->conn, b.data, b.len) != STRATA_OK)
        lose(r, STRATA_EPEER, strata_errmsg());
    wire_buf_fini(&b);
}

static void send_hello(struct remote_node *r)
{
    struct wire_msg m = {.type = WIRE_MSG_HELLO};
    struct wire_hello *h = &m.u.hello;
    char host[WIRE_NAME_MAX + 1] = "strata";
    uint64_t now = base_now_ns();

    if (gethostname(host, sizeof(host)) != 0)
        snprintf(host, sizeof(host), "strata");
    host[sizeof(host) - 1] = '\0';
    h->proto_min = WIRE_PROTO_MIN;
    h->proto_max = WIRE_PROTO_MAX;
    h->capabilities = WIRE_CAP_DATA_CHUNKS | WIRE_CAP_REMOTE_BUFFERS |
                      WIRE_CAP_GLOBAL_DOMAINS | WIRE_CAP_DEADLINES |
                      WIRE_CAP_STARTUP_HEARTBEATS |
                      WIRE_CAP_ORDERED_DOMAIN_CMDS;
    h->node_name = host;
    h->pid = (uint32_t)getpid();
    h->platform = r->platform;
    h->chip_ids = r->chip_ids;
    h->num_chips = r->num_chips;
    h->num_sub_workers = (uint32_t)r->num_subs;
    h->comm_profile = r->comm_profile;
    h->global_device_ranks = r->ranks;
    /* What is left of the tree's one deadline, never a fresh budget. */
    h->startup_budget_ms =
        r->deadline > now ? (r->deadline - now) / 1000000 + 1 : 1;
    remote_trace_hello(r, h);
    send_msg(r, &m);
    r->hello_sent = true;
}

static bool sends_input(uint8_t tag)
{
    return tag != STRATA_OUT && tag != STRATA_OUT_EXISTING;
}

static void send_chunks(struct remote_node *r, uint64_t req,
                        const strata_args *a, uint32_t i)
{
    const struct wire_tensor *t = &a->tensors[i];
    strata_buffer *b = worker_buffer_find(r->w, t->creator, t->buffer_id);
    struct wire_msg m = {.type = WIRE_MSG_DATA_CHUNK};
    const uint8_t *p;
    size_t off = 0;

    if (!b) {
        lose(r, STRATA_EPROTO, "a task names a buffer this worker lacks");
        return;
    }
    p = (const uint8_t *)b->data + t->offset;
    do {
        size_t len =
            t->nbytes - off < WIRE_CHUNK_MAX ? t->nbytes - off : WIRE_CHUNK_MAX;

        memset(&m.u.data_chunk, 0, sizeof(m.u.data_chunk));
        m.u.data_chunk.request_id = req;
        m.u.data_chunk.tensor = i;
        m.u.data_chunk.offset = off;
        m.u.data_chunk.data = p + off;
        m.u.data_chunk.len = len;
        m.u.data_chunk.last = off + len == t->nbytes;
        send_msg(r, &m);
        off += len;
    } while (off < t->nbytes);
}

static void send_task(struct remote_node *r, unsigned pos,
                      const struct mbx_frame *f)
{
    struct wire_msg m = {.type = WIRE_MSG_TASK};
    struct wire_task *t = &m.u.task;
    strata_args *a = r->args[pos];
    uint32_t ins[STRATA_MAX_TENSORS];
    size_t nin = 0;

    if (wire_args_decode(f->args, f->args_len, a) != STRATA_OK) {
        lose(r, STRATA_EPROTO, strata_errmsg());
        return;
    }
    for (uint32_t i = 0; i < a->num_tensors; i++) {
        const struct wire_tensor *x = &a->tensors[i];
        strata_buffer *b = worker_buffer_find(r->w, x->creator, x->buffer_id);

        /* A remote buffer's bytes are on the node already. */
        if (sends_input(x->tag) && !(b && b->remote))
            ins[nin++] = i;
    }
    __atomic_add_fetch(&r->tasks_sent, 1, __ATOMIC_RELAXED);
    r->rx_tensor[pos] = RX_NONE;
    r->rx_off[pos] = 0;
    memset(r->rx_done[pos], 0, sizeof(r->rx_done[pos]));
    t->request_id = r->req[pos];
    t->deadline_ms = f->arg[0];
    t->run_id = f->run_id;
    memcpy(t->digest, f->digest, sizeof(t->digest));
    t->args = f->args;
    t->args_len = f->args_len;
    t->target = WIRE_TARGET_WORKER;
    t->data_tensors = ins;
    t->num_data_tensors = nin;
    send_msg(r, &m);
    for (size_t k = 0; k < nin && !r->lost; k++)
        send_chunks(r, t->request_id, a, ins[k]);
}

static void send_control(struct remote_node *r, unsigned pos,
                         const struct mbx_frame *f)
{
    struct wire_msg m = {.type = WIRE_MSG_CONTROL};
    struct wire_control *c = &m.u.control;

    if (f->op == MBX_CTL_NODE_CMD) {
        /* A packed command: it goes as it is, under its own request id.
         * A batch (arg[2] frames, gdomain_batch.c) has consecutive ids
         * from arg[1], and its replies pile up in the staging area. */
        r->req[pos] = f->arg[1];
        r->replies[pos] = 0;
        if (f->staged_len > MBX_STAGING_SIZE ||
            wire_conn_send(r->conn, r->ep->mbx->staging, f->staged_len))
            lose(r, STRATA_EPEER, "cannot send a domain command");
        return;
    }
    c->request_id = r->req[pos];
    if (f->op == MBX_CTL_UNMAP_BUFFER) {
        c->op = WIRE_CTRL_BUFFER_RELEASE;
        c->operands.present = WIRE_OPND_BIT(WIRE_OPND_BUFFER_ID);
        c->operands.buffer_id = f->arg[0];
    } else {
        c->op = WIRE_CTRL_PING;
    }
    send_msg(r, &m);
}

/* Sends every frame the scheduler posted since the last call. */
static void send_posted(struct remote_node *r)
{
    struct mbx *mb = r->ep->mbx;

    while (!r->lost &&
           r->sent != __atomic_load_n(&mb->h.head, __ATOMIC_ACQUIRE)) {
        unsigned pos = r->sent % MBX_RING;
        const struct mbx_frame *f = &mb->ring[pos];

        r->req[pos] = ++r->next_req;
        r->done[pos] = false;
        if (f->kind == MBX_TASK)
            send_task(r, pos, f);
        else
            send_control(r, pos, f);
        r->sent++;
    }
}

static void on_notify(evutil_socket_t fd, short what, void *arg)
{
    struct remote_node *r = arg;
    uint64_t v;

    (void)what;
    if (read(fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
        LOG_DEBUG("notify read: %s", strerror(errno));
    wire_conn_lock(r->conn);
    send_posted(r);
    wire_conn_unlock(r->conn);
}

static bool live(const struct remote_node *o)
{
    return o && o->ep && o->conn && o->ready && !o->lost;
}

/* A thread that posted to this node sends it now, itself (orch/kick.c),
 * holding the connection's lock like the connection thread's callbacks:
 * the round trip needs no wake-up of the connection thread to start.
 * Called without the scheduler's lock. A node not up (or lost) is left
 * to the connection thread, as before kicks. */
void remote_kick(void *arg)
{
    struct remote_node *r = arg;
    uint64_t one = 1;
    bool sent = false;

    /* conn is set before the node is ready and freed only at remote_stop,
     * after every run: a post implies a worker that is up. */
    if (r->conn) {
        wire_conn_lock(r->conn);
        if (live(r)) {
            uint32_t from = r->sent;

            send_posted(r);
            __atomic_add_fetch(&r->kicked, r->sent - from, __ATOMIC_RELAXED);
            sent = true;
        }
        wire_conn_unlock(r->conn);
    }
    if (!sent && write(r->ep->notify_fd, &one, sizeof(one)) < 0)
        LOG_WARN("cannot notify the connection of %s", r->endpoint);
}

/* Frames complete in any order; the ring's tail advances in order. */
static void complete(struct remote_node *r, uint64_t req, strata_err err,
                     const char *msg, bool not_run)
{
    struct mbx *mb = r->ep->mbx;
    uint32_t tail = mb->h.tail;
    bool matched = false;

    for (uint32_t k = tail; k != r->sent; k++) {
        unsigned pos = k % MBX_RING;

        if (r->req[pos] != req || r->done[pos])
            continue;
        matched = true;
        mb->ring[pos].result =
            (int32_t)err | (err && not_run ? MBX_RESULT_NOT_RUN : 0);
        if (err) /* the node, not the request id: that says nothing */
            snprintf(mb->ring[pos].msg, sizeof(mb->ring[pos].msg), "%s: %s",
                     r->endpoint, msg ? msg : "");
        else
            mb->ring[pos].msg[0] = '\0';
        /* The scheduler may take it now, ahead of the ring's tail. */
        __atomic_store_n(&mb->ring[pos].done, 1, __ATOMIC_SEQ_CST);
        r->done[pos] = true;
        break;
    }
    while (tail != r->sent && r->done[tail % MBX_RING]) {
        r->done[tail % MBX_RING] = false;
        tail++;
        mbx_child_complete(mb, r->w->shared);
    }
    /* Finish the task here rather than wake the scheduler to do it. A
     * frame was posted, so the scheduler exists (a reply to nothing, or
     * one before the scheduler started, finishes nothing). */
    if (matched) {
        /* The caller this wakes may kick this connection at once: it need
         * not wait for the lock while the scheduler finishes the task
         * (nothing of r is touched past here; on_msg returns next). */
        wire_conn_unlock(r->conn);
        orch_harvest_now(r->w->sched);
        wire_conn_lock(r->conn);
    }
}

/* The ring position of request req still in flight, or -1. */
static int pos_of(const struct remote_node *r, uint64_t req)
{
    for (uint32_t k = r->ep->mbx->h.tail; k != r->sent; k++)
        if (r->req[k % MBX_RING] == req)
            return (int)(k % MBX_RING);
    return -1;
}

static bool rx_done(const struct remote_node *r, int pos, uint32_t i)
{
    return (r->rx_done[pos][i / 8] >> (i % 8)) & 1u;
}

/* Output bytes land straight in the parent's buffer, in the order
 * docs/wire.md prescribes (the node's own check, chunk_misfit, mirrored):
 * a tensor that returns data, from offset 0 on without a gap, the last
 * chunk flagged at its end, one tensor after the other. */
static void on_chunk(struct remote_node *r, const struct wire_data_chunk *c)
{
    int pos = pos_of(r, c->request_id);
    const strata_args *a = pos >= 0 ? r->args[pos] : NULL;
    const struct wire_tensor *t;
    strata_buffer *b;

    if (!a || c->tensor >= a->num_tensors) {
        lose(r, STRATA_EPROTO, "data for an unknown request or tensor");
        return;
    }
    t = &a->tensors[c->tensor];
    b = worker_buffer_find(r->w, t->creator, t->buffer_id);
    if (!b || b->remote || c->offset > t->nbytes ||
        c->len > t->nbytes - c->offset) {
        lose(r, STRATA_EPROTO, "data outside its tensor");
        return;
    }
    if (t->tag == STRATA_IN) {
        lose(r, STRATA_EPROTO, "data for an input tensor (tag IN)");
        return;
    }
    if (r->rx_tensor[pos] == RX_NONE) {
        if (c->offset != 0 || rx_done(r, pos, c->tensor)) {
            lose(r, STRATA_EPROTO, "data chunk out of order");
            return;
        }
        r->rx_tensor[pos] = c->tensor;
        r->rx_off[pos] = 0;
    } else if (c->tensor != r->rx_tensor[pos] || c->offset != r->rx_off[pos]) {
        lose(r, STRATA_EPROTO, "data chunk out of order");
        return;
    }
    memcpy((uint8_t *)b->data + t->offset + c->offset, c->data, c->len);
    r->rx_off[pos] += c->len;
    if (c->last) {
        if (r->rx_off[pos] != t->nbytes) {
            lose(r, STRATA_EPROTO,
                 "data chunk flagged last before its tensor's end");
            return;
        }
        r->rx_done[pos][c->tensor / 8] |= (uint8_t)(1u << (c->tensor % 8));
        r->rx_tensor[pos] = RX_NONE;
    }
}

/* A COMPLETION that says OK names the tensors whose data came: each of
 * them must have come whole (its last chunk), and none be half way. */
static bool results_whole(const struct remote_node *r,
                          const struct wire_completion *m)
{
    int pos = pos_of(r, m->request_id);

    if (m->error || pos < 0 || !r->args[pos])
        return true; /* an unknown request: complete() says nothing */
    if (r->rx_tensor[pos] != RX_NONE)
        return false;
    for (size_t k = 0; k < m->num_data_tensors; k++)
        if (m->data_tensors[k] >= STRATA_MAX_TENSORS ||
            !rx_done(r, pos, m->data_tensors[k]))
            return false;
    return true;
}

static void on_reply(struct remote_node *r, const struct wire_hello_reply *h)
{
    if (h->error) {
        char why[STRATA_ERRMSG_MAX];

        snprintf(why, sizeof(why), "refused: %s", h->message);
        lose(r, h->error, why);
        return;
    }
    if (h->version < WIRE_PROTO_MIN || h->version > WIRE_PROTO_MAX) {
        char why[96];

        snprintf(why, sizeof(why),
                 "the node chose protocol %u, outside the %u..%u offered",
                 (unsigned)h->version, WIRE_PROTO_MIN, WIRE_PROTO_MAX);
        lose(r, STRATA_EPROTO, why);
        return;
    }
    r->ready = true;
    r->session_pid = h->pid;
    /* An older node may run domain commands in any order: one at a time
     * for it (domain/global/gdomain_batch.c). */
    __atomic_store_n(&r->ordered_cmds,
                     (h->capabilities & WIRE_CAP_ORDERED_DOMAIN_CMDS) != 0,
                     __ATOMIC_RELEASE);
    remote_trace_reply(r, h);
    /* An MPI rank said where it is in its identity record already. */
    if (h->boot_id && h->boot_id[0] && !r->host_id.boot[0]) {
        snprintf(r->host_id.name, sizeof(r->host_id.name), "%s", h->node_name);
        snprintf(r->host_id.boot, sizeof(r->host_id.boot), "%s", h->boot_id);
    }
    LOG_INFO("remote %s ready (session pid %u)", r->endpoint, h->pid);
    mbx_child_init_done(r->ep->mbx, STRATA_OK, "");
    ring_doorbell(r->w);
}

/* A node command's reply, packed again into the ring's staging area where
 * the scheduler expects it, after the earlier replies of its batch. The
 * frame's first request id, to complete, once its batch is in; 0 while
 * replies are still to come; false when nobody asked for this one. */
static bool stage_reply(struct remote_node *r, uint64_t req, unsigned type,
                        const uint8_t *body, size_t len, uint64_t *finish)
{
    struct mbx *mb = r->ep->mbx;
    struct wire_frame_header h = {WIRE_FRAME_VERSION, (uint8_t)type, 0,
                                  (uint32_t)len};

    for (uint32_t k = mb->h.tail; k != r->sent; k++) {
        unsigned pos = k % MBX_RING;
        struct mbx_frame *f = &mb->ring[pos];
        uint32_t count = f->arg[2] > 1 ? (uint32_t)f->arg[2] : 1;
        uint64_t at = f->staged_len;

        if (f->kind != MBX_CONTROL || f->op != MBX_CTL_NODE_CMD ||
            r->done[pos] || req != r->req[pos] + r->replies[pos])
            continue;
        if (r->replies[pos] == 0)
            at = 0;
        if (at + len + WIRE_FRAME_HEADER_SIZE > MBX_STAGING_SIZE)
            return false;
        wire_frame_header_pack(&h, mb->staging + at);
        memcpy(mb->staging + at + WIRE_FRAME_HEADER_SIZE, body, len);
        f->staged_len = at + WIRE_FRAME_HEADER_SIZE + len;
        *finish = ++r->replies[pos] == count ? r->req[pos] : 0;
        return true;
    }
    return false;
}

static void on_msg(struct wire_conn *c, unsigned type, const uint8_t *body,
                   size_t len, void *arg)
{
    struct remote_node *r = arg;
    struct wire_msg m;
    uint64_t finish = 0;

    (void)c;
    /* A lost node is done with: what it sends later must not undo that.
     * (A HELLO_REPLY behind a bad start-up HEARTBEAT made a node that had
     * failed to start ready again: init returned OK, and every request
     * to it then waited forever, as nothing was sent and its loss was
     * never reported. fuzz_l4_link found it.) */
    if (r->lost)
        return;
    if (wire_msg_unpack(type, body, len, &m) != STRATA_OK) {
        lose(r, STRATA_EPROTO, strata_errmsg());
        return;
    }
    /* A node heartbeats while its chips start (STARTUP_HEARTBEATS). */
    if (!r->ready && type != WIRE_MSG_HELLO_REPLY && type != WIRE_MSG_GOODBYE &&
        type != WIRE_MSG_HEARTBEAT)
        lose(r, STRATA_EPROTO, "a message before HELLO_REPLY");
    else if (type == WIRE_MSG_HELLO_REPLY)
        on_reply(r, &m.u.hello_reply);
    else if (type == WIRE_MSG_DATA_CHUNK)
        on_chunk(r, &m.u.data_chunk);
    else if (type == WIRE_MSG_COMPLETION && !results_whole(r, &m.u.completion))
        lose(r, STRATA_EPROTO,
             "a task completed without all of the results it names");
    else if (type == WIRE_MSG_COMPLETION)
        complete(r, m.u.completion.request_id, m.u.completion.error,
                 m.u.completion.message, m.u.completion.not_run);
    else if (type == WIRE_MSG_CONTROL_REPLY) {
        /* A staged COMM_INIT reply carries its outcome itself. A release
         * goes to every node, and one that never saw the buffer says
         * so: nothing to undo. */
        if (stage_reply(r, m.u.control_reply.request_id, type, body, len,
                        &finish)) {
            if (finish)
                complete(r, finish, STRATA_OK, "", false);
        } else if (m.u.control_reply.op == WIRE_CTRL_BUFFER_RELEASE &&
                   m.u.control_reply.error == STRATA_ENOENT)
            complete(r, m.u.control_reply.request_id, STRATA_OK, "", false);
        else
            complete(r, m.u.control_reply.request_id, m.u.control_reply.error,
                     m.u.control_reply.message, false);
    } else if (type == WIRE_MSG_DOMAIN_REPLY) {
        /* The reply carries the outcome; the frame itself succeeded. */
        if (!stage_reply(r, m.u.domain_reply.request_id, type, body, len,
                         &finish))
            lose(r, STRATA_EPROTO, "a domain reply nobody asked for");
        else if (finish)
            complete(r, finish, STRATA_OK, "", false);
    } else if (type == WIRE_MSG_TRACE) {
        if (!remote_trace_data(r, &m.u.trace))
            lose(r, STRATA_EPROTO, "trace records nobody asked for");
    } else if (type == WIRE_MSG_HEARTBEAT)
        remote_trace_heartbeat(r, &m.u.heartbeat);
    else if (type == WIRE_MSG_GOODBYE)
        lose(r, STRATA_EPEER,
             m.u.goodbye.message[0] ? m.u.goodbye.message
                                    : "the node said goodbye");
    wire_msg_free(&m);
}

static void on_state(struct wire_conn *c, strata_err err, const char *why,
                     void *arg)
{
    struct remote_node *r = arg;

    (void)c;
    if (err == STRATA_OK && strcmp(why, "connected") == 0) {
        send_hello(r);
        return;
    }
    if (r->closed) { /* our GOODBYE: the node has left, or failed to */
        if (err != STRATA_OK)
            lose(r, err, why);
        if (--r->w->net->closing == 0)
            event_base_loopbreak(r->w->net->base);
        return;
    }
    lose(r, err ? err : STRATA_EPEER, why);
}

strata_err remote_attach(struct remote_node *r, struct event_base *base,
                         SSL *ssl, int fd, const char *peer)
{
    struct wire_conn_cbs cbs = {on_msg, on_state, r};
    strata_err err = wire_conn_open(base, ssl, fd, peer, &cbs, &r->conn);

    if (err)
        return err;
    r->notify_ev =
        event_new(base, r->ep->notify_fd, EV_READ | EV_PERSIST, on_notify, r);
    if (!r->notify_ev || event_add(r->notify_ev, NULL) != 0) {
        lose(r, STRATA_ENOMEM, "cannot watch its ring");
        return STRATA_OK; /* the connection is r's now */
    }
    send_hello(r);
    return STRATA_OK;
}

void remote_lose(struct remote_node *r, strata_err err, const char *why)
{
    lose(r, err, why);
}

/* One node's heartbeat tick (its connection locked: a kick may lose the
 * node meanwhile, in another thread). */
static void tick(struct remote_node *r)
{
    struct wire_msg m = {.type = WIRE_MSG_HEARTBEAT};

    if (r->lost || r->closed)
        return;
    if (!r->ready && base_now_ns() > r->deadline) {
        lose(r, STRATA_ETIMEDOUT,
             "no HELLO_REPLY within the start-up "
             "deadline");
        return;
    }
    /* No frame may precede HELLO: while TCP and TLS are still coming up
     * (a busy or stalled node), only the start-up deadline runs. From
     * HELLO on, the node heartbeats while its chips start. */
    if (!r->hello_sent)
        return;
    if (wire_conn_idle_s(r->conn) > PEER_SILENT_S) {
        lose(r, STRATA_EPEER, "silent for 10 s (no heartbeat)");
        return;
    }
    m.u.heartbeat.seq = ++r->hb_seq;
    m.u.heartbeat.time_ns = base_now_ns();
    send_msg(r, &m);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    strata_worker *w = arg;

    (void)fd;
    (void)what;
    for (size_t i = 0; i < w->num_nodes; i++) {
        struct remote_node *r = w->nodes[i].remote;

        if (!r || !r->conn)
            continue;
        wire_conn_lock(r->conn);
        tick(r);
        wire_conn_unlock(r->conn);
    }
}

/* A host-name look-up on a thread of its own, so the caller can give up
 * at the deadline; an abandoned look-up frees itself when it ends. */
struct lookup {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    bool abandoned;
    int rc;
    struct addrinfo *res;
    char host[256];
    char port[16];
};

static void lookup_free(struct lookup *l)
{
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    base_free(l);
}

static void *lookup_main(void *arg)
{
    struct lookup *l = arg;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(l->host, l->port, &hints, &res);
    bool abandoned;

    pthread_mutex_lock(&l->mu);
    l->rc = rc;
    l->res = res;
    l->done = true;
    abandoned = l->abandoned;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
    if (abandoned) {
        if (res)
            freeaddrinfo(res);
        lookup_free(l);
    }
    return NULL;
}

/* Waits for l until the deadline; true when it finished. */
static bool lookup_wait(struct lookup *l, uint64_t deadline)
{
    struct timespec ts;
    bool done;

    clock_gettime(CLOCK_REALTIME, &ts);
    {
        uint64_t now = base_now_ns();
        uint64_t left = deadline > now ? deadline - now : 0;
        uint64_t ns = (uint64_t)ts.tv_nsec + left % 1000000000u;

        ts.tv_sec += (time_t)(left / 1000000000u + ns / 1000000000u);
        ts.tv_nsec = (long)(ns % 1000000000u);
    }
    pthread_mutex_lock(&l->mu);
    while (!l->done && pthread_cond_timedwait(&l->cv, &l->mu, &ts) != ETIMEDOUT)
        ;
    done = l->done;
    if (!done)
        l->abandoned = true; /* the thread frees l when it ends */
    pthread_mutex_unlock(&l->mu);
    return done;
}

/* Resolves r's host under the start-up deadline: numeric addresses at
 * once, names on a thread the caller stops waiting for at the deadline. */
static strata_err resolve(struct remote_node *r, struct addrinfo **res_out)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICHOST};
    struct lookup *l;
    pthread_attr_t attr;
    pthread_t th;
    int rc = getaddrinfo(r->host, r->port, &hints, res_out);

    if (rc != EAI_NONAME)
        return rc == 0
                   ? STRATA_OK
                   : base_fail(STRATA_EPEER, "remote %s: cannot resolve %s: %s",
                               r->endpoint, r->host, gai_strerror(rc));
    l = base_calloc(1, sizeof(*l));
    if (!l)
        return base_fail(STRATA_ENOMEM, "out of memory resolving %s", r->host);
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    snprintf(l->host, sizeof(l->host), "%s", r->host);
    snprintf(l->port, sizeof(l->port), "%s", r->port);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&th, &attr, lookup_main, l);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        lookup_free(l);
        return base_fail_errno(rc, "remote %s: resolver thread", r->endpoint);
    }
    if (!lookup_wait(l, r->deadline))
        return base_fail(STRATA_ETIMEDOUT,
                         "remote %s: resolving %s took past the start-up "
                         "deadline",
                         r->endpoint, r->host);
    rc = l->rc;
    *res_out = l->res;
    lookup_free(l);
    if (rc != 0)
        return base_fail(STRATA_EPEER, "remote %s: cannot resolve %s: %s",
                         r->endpoint, r->host, gai_strerror(rc));
    return STRATA_OK;
}

static strata_err connect_node(struct net *net, struct remote_node *r)
{
    struct addrinfo *res = NULL;
    struct wire_conn_cbs cbs = {on_msg, on_state, r};
    strata_err err = resolve(r, &res);

    if (err || !res)
        return err ? err
                   : base_fail(STRATA_EPEER, "remote %s: %s has no address",
                               r->endpoint, r->host);
    err = wire_conn_connect(net->base, r->ctx, res->ai_addr,
                            (int)res->ai_addrlen, r->endpoint, &cbs, &r->conn);
    freeaddrinfo(res);
    if (err)
        return err;
    r->notify_ev = event_new(net->base, r->ep->notify_fd, EV_READ | EV_PERSIST,
                             on_notify, r);
    if (!r->notify_ev || event_add(r->notify_ev, NULL) != 0)
        return base_fail(STRATA_ENOMEM, "remote %s: cannot watch its ring",
                         r->endpoint);
    return STRATA_OK;
}

static void *net_main(void *arg)
{
    struct net *net = arg;

    /* The loop flushes TLS records to peers that may have hung up. */
    wire_conn_block_sigpipe();
    event_base_loop(net->base, EVLOOP_NO_EXIT_ON_EMPTY);
    return NULL;
}

strata_err remote_start(strata_worker *w, uint64_t deadline)
{
    static const struct timeval tick = {HEARTBEAT_S, 0};
    struct net *net;
    strata_err err = STRATA_OK;
    bool any = false;

    for (size_t i = 0; i < w->num_nodes; i++)
        any |= w->nodes[i].remote != NULL;
    if (!any)
        return STRATA_OK;
    net = base_calloc(1, sizeof(*net));
    if (!net)
        return base_fail(STRATA_ENOMEM, "out of memory for connections");
    pthread_mutex_init(&net->trace_mu, NULL);
    pthread_cond_init(&net->trace_cv, NULL);
    w->net = net;
    evthread_use_pthreads();
    net->base = event_base_new();
    net->timer =
        net->base ? event_new(net->base, -1, EV_PERSIST, on_timer, w) : NULL;
    if (!net->timer || event_add(net->timer, &tick) != 0)
        return base_fail(STRATA_ENOMEM, "cannot create the event loop");
    for (size_t i = 0; !err && i < w->num_nodes; i++) {
        struct remote_node *r = w->nodes[i].remote;

        if (!r)
            continue;
        r->deadline = deadline;
        if (!r->group) /* an MPI rank dials back instead */
            err = connect_node(net, r);
    }
    if (!err)
        err = mpigroup_start(w, net->base, deadline);
    if (err)
        return err;
    if (pthread_create(&net->thread, NULL, net_main, net) != 0)
        return base_fail(STRATA_ESYS, "cannot start the connection thread");
    net->started = true;
    return STRATA_OK;
}

/* On the loop: say GOODBYE everywhere, then leave once every node has
 * closed its end (on_state), or after 200 ms: a node that does not leave
 * by then is not waited for. */
static void close_all(evutil_socket_t fd, short what, void *arg)
{
    strata_worker *w = arg;

    (void)fd;
    (void)what;
    /* This call counts as one until every GOODBYE is out: a close that
     * fails at once (on_state, from inside wire_conn_close_await) must
     * not end the loop before the other nodes got theirs. */
    w->net->closing = 1;
    for (size_t i = 0; i < w->num_nodes; i++) {
        struct remote_node *r = w->nodes[i].remote;

        if (!r || !r->conn)
            continue;
        wire_conn_lock(r->conn);
        if (!r->lost && !r->closed) {
            r->closed = true;
            w->net->closing++;
            wire_conn_close_await(r->conn, STRATA_OK, "parent closing");
        }
        wire_conn_unlock(r->conn);
    }
    if (--w->net->closing == 0)
        event_base_loopbreak(w->net->base);
    else
        event_base_loopexit(w->net->base, &(struct timeval){0, 200000});
}

void remote_stop(strata_worker *w)
{
    struct net *net = w->net;

    if (!net)
        return;
    if (net->started) {
        remote_trace_fetch(w);
        event_base_once(net->base, -1, EV_TIMEOUT, close_all, w, NULL);
        pthread_join(net->thread, NULL);
    }
    for (size_t i = 0; i < w->num_nodes; i++) {
        struct remote_node *r = w->nodes[i].remote;

        if (!r)
            continue;
        if (r->notify_ev)
            event_free(r->notify_ev);
        r->notify_ev = NULL;
        wire_conn_free(r->conn);
        r->conn = NULL;
    }
    /* The ranks have their GOODBYE: mpirun ends once they have left. */
    mpigroup_stop(w);
    if (net->timer)
        event_free(net->timer);
    if (net->base)
        wire_base_free(net->base);
    pthread_cond_destroy(&net->trace_cv);
    pthread_mutex_destroy(&net->trace_mu);
    base_free(net);
    w->net = NULL;
}
