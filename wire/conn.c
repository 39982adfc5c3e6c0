/* Framed connections over libevent bufferevents, TLS through
 * bufferevent_openssl. The read side parses a header as soon as 12 bytes
 * are there and refuses a bad one before any body is buffered; the body is
 * capped by wire_frame_max_body(type). */
#include "wire/conn.h"
#include "base/alloc.h"
#include "base/clock.h"
#include "base/err.h"
#include "trace/trace.h"
#include "wire/msg.h"
#include "wire/tls.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct wire_conn {
    struct bufferevent *bev;
    struct wire_conn_cbs cbs;
    char peer[96];
    bool up;
    bool failed;
    bool goodbye_seen;   /* the peer closed in order */
    bool got_frame;      /* a whole frame arrived: the peer authenticated */
    bool authed;         /* opened after its handshake (wire_conn_open) */
    bool tls;            /* TLS, not plaintext */
    bool connecting;     /* ours (wire_conn_connect), not accepted */
    bool closing;        /* we sent GOODBYE: close once flushed */
    bool await_eof;      /* ... and once the peer has closed its end */
    bool draining;       /* flushed: reading to the peer's end */
    uint64_t last_rx_ns; /* (atomic) a frame (or ALIVE_BYTES of one)
                            arrived, or the peer took some of ours: it
                            is alive */
    size_t rx_mark;      /* input bytes when last marked alive */
    /* Back-pressure (wire_conn_set_flow): reads stop while held(arg) or
     * while more than high_water bytes wait to go out. */
    bool (*held)(void *arg);
    size_t high_water;
    bool paused;             /* EV_READ disabled by the flow check */
    struct event *next_turn; /* resumes a read turn that yielded */
    /* wire_conn_wait_room: senders waiting for the output to drain. A
     * waiter counts itself before it looks, so that a change after its
     * look bumps room_gen and wakes it (room_gen under room_mu). */
    pthread_mutex_t room_mu;
    pthread_cond_t room_cv;
    uint64_t room_gen;
    uint32_t room_waiters; /* atomic */
    bool no_waits;         /* wire_conn_stop_waits (bufferevent locked) */
};

/* Wakes the senders waiting for room: the output drained, or there is
 * nothing more to wait for (failed, closing, stop_waits). */
static void room_wake(struct wire_conn *c)
{
    if (!__atomic_load_n(&c->room_waiters, __ATOMIC_SEQ_CST))
        return;
    pthread_mutex_lock(&c->room_mu);
    c->room_gen++;
    pthread_cond_broadcast(&c->room_cv);
    pthread_mutex_unlock(&c->room_mu);
}

const char *wire_conn_peer(const struct wire_conn *c)
{
    return c->peer;
}

/* More than the high water mark waits to go out. */
static bool over_mark(struct wire_conn *c)
{
    bool over;

    if (!c->high_water)
        return false;
    bufferevent_lock(c->bev);
    over = evbuffer_get_length(bufferevent_get_output(c->bev)) > c->high_water;
    bufferevent_unlock(c->bev);
    return over;
}

static void alive_now(struct wire_conn *c)
{
    __atomic_store_n(&c->last_rx_ns, base_now_ns(), __ATOMIC_RELAXED);
}

double wire_conn_idle_s(struct wire_conn *c)
{
    uint64_t now, last;

    /* Paused for our own work (held): the peer waits on us, and its
     * silence says nothing; the clock starts again when we read. Paused
     * because the peer leaves our replies unread, it is silent unless it
     * takes some of them (on_output): so too when our work is only
     * waiting for it to take them (tasks whose results wait for room). */
    if (__atomic_load_n(&c->paused, __ATOMIC_RELAXED) && c->held &&
        c->held(c->cbs.arg) && !over_mark(c)) {
        alive_now(c);
        return 0.0;
    }
    now = base_now_ns();
    last = __atomic_load_n(&c->last_rx_ns, __ATOMIC_RELAXED);
    return now > last ? (double)(now - last) / 1e9 : 0.0;
}

/* Queued output past this means the socket's buffer was full: a drain
 * then needs the peer to take bytes. */
#define BACKLOG_BYTES (256u << 10)

/* Bytes of a backlog went to the socket: the peer took some of ours, so
 * it is not silent, however long it takes to drain a large queue without
 * sending (a raw client reading 300 MiB of BUFFER_READ replies). A small
 * queue (heartbeats) drains into the kernel's buffer whether or not
 * anyone is there, and says nothing, unless reading is paused for it
 * (past the high water mark the kernel's buffer is full already). */
static void on_output(struct evbuffer *buf, const struct evbuffer_cb_info *info,
                      void *arg)
{
    struct wire_conn *c = arg;

    (void)buf;
    if (info->n_deleted > 0 && (info->orig_size > BACKLOG_BYTES ||
                                __atomic_load_n(&c->paused, __ATOMIC_RELAXED)))
        alive_now(c);
    if (info->n_deleted > 0)
        room_wake(c);
}

static void fail(struct wire_conn *c, strata_err err, const char *why)
{
    if (c->failed)
        return;
    c->failed = true;
    bufferevent_disable(c->bev, EV_READ | EV_WRITE);
    room_wake(c);
    if (c->cbs.on_state)
        c->cbs.on_state(c, err, why, c->cbs.arg);
}

static bool flow_blocked(struct wire_conn *c)
{
    if (c->held && c->held(c->cbs.arg))
        return true;
    return c->high_water &&
           evbuffer_get_length(bufferevent_get_output(c->bev)) > c->high_water;
}

/* Pauses or resumes reading as the flow check says (bufferevent locked).
 * Frames read before a pause wait in the input buffer; a resume delivers
 * them from the loop. */
static void flow_update(struct wire_conn *c)
{
    bool blocked;

    if (c->failed || c->draining || (!c->held && !c->high_water))
        return;
    blocked = flow_blocked(c);
    if (blocked && !c->paused) {
        __atomic_store_n(&c->paused, true, __ATOMIC_RELAXED);
        bufferevent_disable(c->bev, EV_READ);
    } else if (!blocked && c->paused) {
        __atomic_store_n(&c->paused, false, __ATOMIC_RELAXED);
        alive_now(c);
        /* Both: whatever is still queued must keep going out while the
         * frames held back are read (and answered). */
        bufferevent_enable(c->bev, EV_READ | EV_WRITE);
        if (evbuffer_get_length(bufferevent_get_input(c->bev)) > 0)
            bufferevent_trigger(c->bev, EV_READ,
                                BEV_TRIG_IGNORE_WATERMARKS |
                                    BEV_TRIG_DEFER_CALLBACKS);
    }
}

/* Replies one read turn may queue before it lets the loop write. */
#define READ_TURN_BYTES (4u << 20)

/* Bytes of a frame still arriving that show the peer alive: a peer that
 * trickles a frame a byte at a time sends no heartbeat meanwhile and must
 * not pass for alive (a node that did held a run for good); a slow link
 * carrying a large frame moves this much in far less than the silence
 * limit. */
#define ALIVE_BYTES (16u << 10)

/* Delivers the whole frames in the input buffer. */
static void on_read(struct bufferevent *bev, void *arg)
{
    struct wire_conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    struct wire_frame_header h;
    uint8_t head[WIRE_FRAME_HEADER_SIZE];
    char why[STRATA_ERRMSG_MAX + 64];

    size_t out0 = evbuffer_get_length(bufferevent_get_output(bev));
    size_t in_len = evbuffer_get_length(in);

    if (in_len < c->rx_mark || in_len - c->rx_mark >= ALIVE_BYTES) {
        alive_now(c);
        c->rx_mark = in_len;
    }
    if (c->draining) { /* nothing the peer says now matters */
        evbuffer_drain(in, evbuffer_get_length(in));
        return;
    }
    while (!c->failed && evbuffer_get_length(in) >= WIRE_FRAME_HEADER_SIZE) {
        flow_update(c);
        if (c->paused)
            return;
        /* A turn that has queued a lot of replies (1 MiB BUFFER_READs)
         * yields to the loop, so that they start going out while the
         * rest is read: the first reply must not wait for the 64th. */
        if (evbuffer_get_length(bufferevent_get_output(bev)) >
                out0 + READ_TURN_BYTES &&
            c->next_turn) {
            /* A zero timeout runs after the loop's next poll, behind the
             * socket's write callback (a deferred read would run before
             * it, in the same pass). */
            static const struct timeval now = {0, 0};

            event_add(c->next_turn, &now);
            return;
        }
        evbuffer_copyout(in, head, sizeof(head));
        if (wire_frame_header_unpack(head, sizeof(head), &h) != STRATA_OK) {
            /* A TLS record (handshake, version 3.x) on a plaintext
             * connection: a client with a key, a node without. */
            bool tls_hello = !c->tls && head[0] == 0x16 && head[1] == 0x03;

            snprintf(why, sizeof(why), "bad frame from %s: %s%s", c->peer,
                     strata_errmsg(),
                     tls_hello ? " (a TLS handshake: the client uses a key "
                                 "or certificate, and this connection has "
                                 "none: --insecure)"
                               : "");
            fail(c, STRATA_EPROTO, why);
            return;
        }
        if (evbuffer_get_length(in) < sizeof(head) + h.body_len)
            return; /* the body is still on its way */
        evbuffer_drain(in, sizeof(head));
        {
            const uint8_t *body = evbuffer_pullup(in, h.body_len);

            c->got_frame = true;
            trace_frame(h.body_len, false, h.type);
            if (h.type == WIRE_MSG_GOODBYE)
                c->goodbye_seen = true;
            if (c->cbs.on_msg)
                c->cbs.on_msg(c, h.type, body, h.body_len, c->cbs.arg);
        }
        evbuffer_drain(in, h.body_len);
        alive_now(c); /* a whole frame */
        c->rx_mark = evbuffer_get_length(in);
    }
}

/* The next read turn (READ_TURN_BYTES). */
static void on_next_turn(evutil_socket_t fd, short what, void *arg)
{
    struct wire_conn *c = arg;

    (void)fd;
    (void)what;
    bufferevent_lock(c->bev);
    if (!c->failed && !c->paused &&
        evbuffer_get_length(bufferevent_get_input(c->bev)) > 0)
        bufferevent_trigger(c->bev, EV_READ,
                            BEV_TRIG_IGNORE_WATERMARKS |
                                BEV_TRIG_DEFER_CALLBACKS);
    bufferevent_unlock(c->bev);
}

static void on_write(struct bufferevent *bev, void *arg)
{
    struct wire_conn *c = arg;

    /* A deferred call may predate the last frames queued (a refusal and
     * its GOODBYE): close only once they are out. */
    if (c->closing && evbuffer_get_length(bufferevent_get_output(bev)) == 0) {
        if (!c->await_eof) {
            fail(c, STRATA_OK, "closed");
            return;
        }
        /* Our socket stays open until the peer's is closed: closed
         * earlier, with bytes of the peer's unread, it would reset the
         * connection, and the peer could lose our GOODBYE unread. */
        c->draining = true;
        bufferevent_disable(bev, EV_WRITE);
        bufferevent_enable(bev, EV_READ);
    } else {
        flow_update(c);
    }
}

/* Writes why the connection failed; true when TLS said so. */
static bool describe_error(struct wire_conn *c, short what, char *buf,
                           size_t cap, int *reason)
{
    unsigned long e = bufferevent_get_openssl_error(c->bev);
    char tls[256] = "";

    *reason = e ? ERR_GET_REASON(e) : 0;
    /* OpenSSL 3 reports a close without close_notify as an error, and a
     * reset as a bare system error (library 0): both are the peer going
     * away without GOODBYE. */
    if (e && (ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING ||
              ERR_GET_LIB(e) == 0)) {
        what |= BEV_EVENT_EOF;
        e = 0;
    }
    if (e)
        ERR_error_string_n(e, tls, sizeof(tls));
    if ((what & BEV_EVENT_EOF) && c->tls && !c->got_frame && !c->authed)
        snprintf(buf, cap,
                 "TLS handshake with %s failed: it closed the connection "
                 "(authentication refused?)",
                 c->peer);
    else if (what & BEV_EVENT_EOF)
        snprintf(buf, cap, "%s " WIRE_NO_GOODBYE, c->peer);
    else if (tls[0])
        snprintf(buf, cap, "TLS error with %s: %s%s", c->peer, tls,
                 c->got_frame || c->authed ? "" : " (authentication failed?)");
    else
        snprintf(buf, cap, "connection to %s failed: %s", c->peer,
                 evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
    return tls[0] != '\0' && !(what & BEV_EVENT_EOF);
}

/* Whether a connect of ours failed at the TCP level (nobody listening,
 * no route), and with which errno: the socket's pending error, else seen
 * (what libevent reported). */
static bool connect_failed(struct wire_conn *c, int seen, int *errnum)
{
    evutil_socket_t fd = bufferevent_getfd(c->bev);
    socklen_t elen = sizeof(*errnum);

    *errnum = 0;
    if (!c->connecting || c->up || c->got_frame)
        return false;
    if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, errnum, &elen) != 0 ||
        !*errnum)
        *errnum = seen;
    /* Plaintext has nothing to refuse but the connect itself. */
    if (!c->tls)
        return true;
    switch (*errnum) {
    case ECONNREFUSED:
    case ETIMEDOUT:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case EHOSTDOWN:
    case ENETDOWN:
    case EADDRNOTAVAIL:
        return true;
    }
    return false;
}

/* Whether our TLS connect ended before the server sent a byte: the
 * ClientHello went out (or not even that) and nothing came back. */
static bool unanswered(struct wire_conn *c)
{
    SSL *ssl;
    OSSL_HANDSHAKE_STATE st;

    if (!c->connecting || !c->tls || c->up || c->got_frame)
        return false;
    ssl = bufferevent_openssl_get_ssl(c->bev);
    if (!ssl)
        return false;
    st = SSL_get_state(ssl);
    return st == TLS_ST_BEFORE || st == TLS_ST_CW_CLNT_HELLO;
}

/* Whether the server's ServerHello took our pre-shared key
 * (SSL_session_reused): it checked our binder, so it knows our key. */
static bool psk_accepted(struct wire_conn *c)
{
    SSL *ssl = bufferevent_openssl_get_ssl(c->bev);

    return ssl && SSL_session_reused(ssl);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    struct wire_conn *c = arg;
    int seen = EVUTIL_SOCKET_ERROR(), errnum;
    char why[384];
    bool tls_error;
    int reason;

    (void)bev;
    if (what & BEV_EVENT_CONNECTED) {
        c->up = true;
        alive_now(c);
        if (c->cbs.on_state)
            c->cbs.on_state(c, STRATA_OK, "connected", c->cbs.arg);
        return;
    }
    if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)))
        return;
    if (c->draining) { /* the end wire_conn_close_await waits for */
        fail(c, STRATA_OK, "closed");
        return;
    }
    if (c->goodbye_seen) { /* however TLS reports the close after it */
        fail(c, STRATA_OK, "closed by peer");
        return;
    }
    /* Nobody answered at that address: not a refusal of our
     * credentials. */
    if (connect_failed(c, seen, &errnum)) {
        snprintf(why, sizeof(why), "cannot connect to %s: %s", c->peer,
                 errnum ? evutil_socket_error_to_string(errnum)
                        : "connection failed");
        fail(c, STRATA_EPEER, why);
        return;
    }
    tls_error = describe_error(c, what, why, sizeof(why), &reason);
    /* A node that drops connections it has no room for (strata-node's
     * --max-unauth limits) answers the ClientHello with one alert,
     * internal_error (daemon/gate.c): no key was checked, so this is no
     * authentication failure. */
    if (tls_error && reason == SSL_R_TLSV1_ALERT_INTERNAL_ERROR && !c->up &&
        !c->got_frame) {
        snprintf(why, sizeof(why),
                 "%s refused the connection before the TLS handshake: it "
                 "is busy with other connections (its "
                 "unauthenticated-connection limits)",
                 c->peer);
        fail(c, STRATA_EBUSY, why);
        return;
    }
    /* Closed before any answer: nothing that speaks TLS listens there,
     * or the node went away. */
    if (!tls_error && unanswered(c)) {
        snprintf(why, sizeof(why),
                 "%s closed the connection before answering the TLS "
                 "handshake: the node went away, or it is no TLS "
                 "strata-node",
                 c->peer);
        fail(c, STRATA_EPEER, why);
        return;
    }
    /* The server answered our ClientHello and then closed without an
     * alert before our side of the handshake was done: it went away (a
     * killed node or session). Its refusals come as alerts (a wrong
     * key) or after our side is done (a certificate it rejects). */
    if (!tls_error && c->tls && c->connecting && !c->up && !c->got_frame) {
        snprintf(why, sizeof(why),
                 "%s closed the connection during the TLS handshake, "
                 "without an alert: the node went away",
                 c->peer);
        fail(c, STRATA_EPEER, why);
        return;
    }
    /* A server that took our pre-shared key checked it before it
     * answered: a close without an alert after that is a lost peer, not
     * a refusal. (On the server's side the same close is a parent that
     * left before its first frame: described below.) */
    if (!tls_error && c->tls && c->connecting && !c->got_frame &&
        psk_accepted(c)) {
        snprintf(why, sizeof(why),
                 "%s closed the connection after it accepted our key, "
                 "before its first frame: the node went away",
                 c->peer);
        fail(c, STRATA_EPEER, why);
        return;
    }
    /* In TLS 1.3 a client is "connected" before the server has checked
     * its certificate, and the refusal may arrive as an alert or as a
     * bare close: on a TLS connection, any failure before the first frame
     * is an authentication failure. */
    if ((tls_error || c->tls) && !c->got_frame && !c->authed)
        fail(c, STRATA_EAUTH, why);
    else
        fail(c, c->up ? STRATA_EPEER : STRATA_EAUTH, why);
}

/* Bytes one loop turn may write to (or read from) the socket. */
#define WRITE_TURN_BYTES ((size_t)1 << 20)

/* Small frames (completions, heartbeats) must not wait for delayed ACKs. */
static void no_delay(int fd)
{
    int one = 1;

    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* ssl: a TLS connection, being made (connecting: ours) or established
 * already (an accepted fd); NULL: plaintext. */
static strata_err wrap(struct event_base *base, SSL *ssl, int fd,
                       bool connecting, const char *peer,
                       const struct wire_conn_cbs *cbs, struct wire_conn **out)
{
    int opts =
        BEV_OPT_CLOSE_ON_FREE | BEV_OPT_THREADSAFE | BEV_OPT_DEFER_CALLBACKS;
    struct wire_conn *c = base_calloc(1, sizeof(*c));

    if (!c)
        return base_fail(STRATA_ENOMEM, "out of memory for a connection");
    snprintf(c->peer, sizeof(c->peer), "%s", peer);
    c->cbs = *cbs;
    c->tls = ssl != NULL;
    pthread_mutex_init(&c->room_mu, NULL);
    pthread_cond_init(&c->room_cv, NULL);
    if (ssl)
        c->bev = bufferevent_openssl_socket_new(
            base, fd, ssl,
            connecting ? BUFFEREVENT_SSL_CONNECTING : BUFFEREVENT_SSL_OPEN,
            opts);
    else
        c->bev = bufferevent_socket_new(base, fd, opts);
    if (!c->bev) {
        pthread_cond_destroy(&c->room_cv);
        pthread_mutex_destroy(&c->room_mu);
        base_free(c);
        return base_fail(STRATA_ENOMEM, "cannot create a bufferevent");
    }
    bufferevent_setcb(c->bev, on_read, on_write, on_event, c);
    /* libevent writes 16 KiB per loop turn by default: a 1 MiB reply
     * took 64 turns, which a loaded machine makes seconds. */
    bufferevent_set_max_single_write(c->bev, WRITE_TURN_BYTES);
    bufferevent_set_max_single_read(c->bev, WRITE_TURN_BYTES);
    /* An accepted socket arrives blocking: a TLS handshake on it would
     * read in the loop's thread until the client speaks, and no timer
     * (the HELLO deadline among them) would run meanwhile. */
    if (fd >= 0) {
        evutil_make_socket_nonblocking(fd);
        no_delay(fd);
    }
    evbuffer_add_cb(bufferevent_get_output(c->bev), on_output, c);
    /* NULL (out of memory): a read turn does not yield. */
    c->next_turn = evtimer_new(base, on_next_turn, c);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    alive_now(c);
    *out = c;
    return STRATA_OK;
}

strata_err wire_conn_connect(struct event_base *base, SSL_CTX *ctx,
                             const struct sockaddr *addr, int addrlen,
                             const char *peer_name,
                             const struct wire_conn_cbs *cbs,
                             struct wire_conn **out)
{
    struct wire_conn *c = NULL;
    SSL *ssl = NULL;
    strata_err err;
    /* Made here, close-on-exec from the start: libevent's own socket is
     * not, and a program's child (system(), a daemon it starts) would
     * keep the connection open after the L4 died, so the node would see
     * no EOF. */
    int fd =
        socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return base_fail_errno(errno, "socket for %s", peer_name);
    if (ctx && !(ssl = SSL_new(ctx))) {
        close(fd);
        return base_fail(STRATA_ENOMEM, "SSL_new failed");
    }
    err = wrap(base, ssl, fd, true, peer_name, cbs, &c);
    if (err || !c) {
        SSL_free(ssl);
        close(fd);
        return err ? err : STRATA_ENOMEM;
    }
    c->connecting = true;
    if (bufferevent_socket_connect(c->bev, addr, addrlen) != 0) {
        wire_conn_free(c);
        return base_fail(STRATA_EPEER, "cannot connect to %s", peer_name);
    }
    if (bufferevent_getfd(c->bev) >= 0)
        no_delay(bufferevent_getfd(c->bev));
    *out = c;
    return STRATA_OK;
}

strata_err wire_conn_open(struct event_base *base, SSL *ssl, int fd,
                          const char *peer_name,
                          const struct wire_conn_cbs *cbs,
                          struct wire_conn **out)
{
    struct wire_conn *c = NULL;
    strata_err err = wrap(base, ssl, fd, false, peer_name, cbs, &c);

    if (err || !c)
        return err ? err : STRATA_ENOMEM;
    /* Whoever accepted it has authenticated the peer already. */
    c->up = true;
    c->authed = true;
    *out = c;
    return STRATA_OK;
}

/* A write may reach the socket in the calling thread (the TLS filter
 * writes through at once), and write(2) to a peer that hung up raises
 * SIGPIPE, whose default action kills the process. A library must not
 * change the process's disposition: SIGPIPE is blocked in this thread
 * around the write, and one the write raised is consumed. */
struct quiet_pipe {
    sigset_t old;
    bool restore; /* was not blocked here: consume and unblock after */
};

static sigset_t sigpipe_set(void)
{
    sigset_t pipe;

    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    return pipe;
}

static void quiet_pipe_begin(struct quiet_pipe *q)
{
    sigset_t pipe = sigpipe_set();

    q->restore = pthread_sigmask(SIG_BLOCK, &pipe, &q->old) == 0 &&
                 !sigismember(&q->old, SIGPIPE);
}

static void quiet_pipe_end(struct quiet_pipe *q)
{
    static const struct timespec now = {0, 0};
    sigset_t pipe = sigpipe_set();

    if (!q->restore)
        return;
    while (sigtimedwait(&pipe, NULL, &now) == SIGPIPE)
        ;
    pthread_sigmask(SIG_SETMASK, &q->old, NULL);
}

void wire_conn_block_sigpipe(void)
{
    sigset_t pipe = sigpipe_set();

    pthread_sigmask(SIG_BLOCK, &pipe, NULL);
}

/* Frames up to this size go to the socket in the sending thread when
 * nothing is queued before them (write_through). */
#define THROUGH_MAX_BYTES ((size_t)64 << 10)

/* How many of len bytes reached the socket now, in this thread (the
 * bufferevent locked, its output empty); the rest goes through the
 * output buffer as before. libevent 2.1 writes a bufferevent's output
 * only on the loop's next pass (two epoll_ctl and an epoll_wait later,
 * after whatever else the turn does): a reply, a posted task, each
 * message of a round trip waited for that pass on both sides.
 *
 * TLS: a record that SSL_write could not send whole stays inside the SSL
 * object, which then wants the same bytes again, at least as many, first
 * in line: they are queued whole (one chain of at most THROUGH_MAX_BYTES,
 * so libevent's next SSL_write passes them all), so 0 is returned. */
static size_t write_through(struct wire_conn *c, const void *frames, size_t len)
{
    SSL *ssl;
    ssize_t n;
    int r;

    if (len > THROUGH_MAX_BYTES || (c->connecting && !c->up) ||
        evbuffer_get_length(bufferevent_get_output(c->bev)) != 0)
        return 0;
    if (!c->tls) {
        n = send(bufferevent_getfd(c->bev), frames, len,
                 MSG_NOSIGNAL | MSG_DONTWAIT);
        return n > 0 ? (size_t)n : 0;
    }
    ssl = bufferevent_openssl_get_ssl(c->bev);
    /* Not during a handshake, nor while OpenSSL itself waits to write
     * (a read that must answer, a record half sent). */
    if (!ssl || !SSL_is_init_finished(ssl) || SSL_want_write(ssl))
        return 0;
    ERR_clear_error();
    r = SSL_write(ssl, frames, (int)len);
    if (r > 0)
        return (size_t)r;
    /* A failed connection: libevent's own write or read reports it. */
    ERR_clear_error();
    return 0;
}

strata_err wire_conn_send(struct wire_conn *c, const void *frames, size_t len)
{
    strata_err err = STRATA_OK;
    struct quiet_pipe q;
    size_t done;

    quiet_pipe_begin(&q);
    /* Task threads send while the loop thread may be closing: the
     * bufferevent's lock covers the flags too (callbacks run holding it). */
    bufferevent_lock(c->bev);
    if (c->failed || c->closing)
        err = base_fail(STRATA_EPEER, "connection to %s is closed", c->peer);
    else if ((done = write_through(c, frames, len)) < len &&
             bufferevent_write(c->bev, (const uint8_t *)frames + done,
                               len - done) != 0)
        err = base_fail(STRATA_ENOMEM, "cannot queue %zu bytes to %s", len,
                        c->peer);
    trace_frame(err ? 0 : len, true, 0);
    bufferevent_unlock(c->bev);
    quiet_pipe_end(&q);
    return err;
}

void wire_conn_lock(struct wire_conn *c)
{
    bufferevent_lock(c->bev);
}

void wire_conn_unlock(struct wire_conn *c)
{
    bufferevent_unlock(c->bev);
}

static void close_with(struct wire_conn *c, uint32_t reason, const char *msg,
                       bool await_eof)
{
    struct wire_goodbye g = {.reason = (strata_err)reason,
                             .message = msg ? msg : ""};
    struct wire_buf b;
    struct quiet_pipe q;

    quiet_pipe_begin(&q);
    bufferevent_lock(c->bev);
    if (!c->failed && !c->closing) {
        wire_buf_init(&b);
        c->await_eof = await_eof;
        if (wire_goodbye_pack(&g, &b) == STRATA_OK &&
            bufferevent_write(c->bev, b.data, b.len) == 0) {
            c->closing = true;
            room_wake(c); /* nothing more to wait for */
        } else {
            fail(c, STRATA_OK, "closed");
        }
        wire_buf_fini(&b);
    }
    bufferevent_unlock(c->bev);
    quiet_pipe_end(&q);
}

void wire_conn_close(struct wire_conn *c, uint32_t reason, const char *msg)
{
    close_with(c, reason, msg, false);
}

void wire_conn_close_await(struct wire_conn *c, uint32_t reason,
                           const char *msg)
{
    close_with(c, reason, msg, true);
}

void wire_conn_free(struct wire_conn *c)
{
    if (!c)
        return;
    if (c->next_turn)
        event_free(c->next_turn);
    if (c->bev) {
        /* A deferred callback still queued keeps the bufferevent, and its
         * events, alive after bufferevent_free until wire_base_free runs
         * it: nothing of c may be reachable from them by then. */
        bufferevent_lock(c->bev);
        evbuffer_remove_cb(bufferevent_get_output(c->bev), on_output, c);
        bufferevent_disable(c->bev, EV_READ | EV_WRITE);
        bufferevent_unlock(c->bev);
        bufferevent_free(c->bev);
    }
    pthread_cond_destroy(&c->room_cv);
    pthread_mutex_destroy(&c->room_mu);
    base_free(c);
}

void wire_base_free(struct event_base *base)
{
    if (!base)
        return;
    /* event_base_free cancels a deferred callback without dropping the
     * reference it holds on its bufferevent, which then never closes its
     * socket. A loop stopped by loopbreak or loopexit may leave one queued
     * (CI caught the socket left behind): run the queue out first. */
    event_base_loop(base, EVLOOP_NONBLOCK);
    event_base_free(base);
}

void wire_conn_set_flow(struct wire_conn *c, bool (*held)(void *arg),
                        size_t high_water)
{
    bufferevent_lock(c->bev);
    c->held = held;
    c->high_water = high_water;
    /* on_write runs once the output has drained to half the mark. */
    bufferevent_setwatermark(c->bev, EV_WRITE, high_water / 2, 0);
    flow_update(c);
    bufferevent_unlock(c->bev);
}

strata_err wire_conn_wait_room(struct wire_conn *c, size_t limit)
{
    strata_err err = STRATA_OK;

    /* Counted before the first look: every change from here on wakes. */
    __atomic_add_fetch(&c->room_waiters, 1, __ATOMIC_SEQ_CST);
    for (;;) {
        uint64_t gen;
        bool gone;
        size_t queued;

        pthread_mutex_lock(&c->room_mu);
        gen = c->room_gen;
        pthread_mutex_unlock(&c->room_mu);
        bufferevent_lock(c->bev);
        gone = c->failed || c->closing || c->no_waits;
        queued = evbuffer_get_length(bufferevent_get_output(c->bev));
        bufferevent_unlock(c->bev);
        if (gone) {
            err =
                base_fail(STRATA_EPEER, "connection to %s is closed", c->peer);
            break;
        }
        if (queued <= limit)
            break;
        pthread_mutex_lock(&c->room_mu);
        while (c->room_gen == gen)
            pthread_cond_wait(&c->room_cv, &c->room_mu);
        pthread_mutex_unlock(&c->room_mu);
    }
    __atomic_sub_fetch(&c->room_waiters, 1, __ATOMIC_SEQ_CST);
    return err;
}

void wire_conn_stop_waits(struct wire_conn *c)
{
    bufferevent_lock(c->bev);
    c->no_waits = true;
    room_wake(c);
    bufferevent_unlock(c->bev);
}

void wire_conn_recheck(struct wire_conn *c)
{
    bufferevent_lock(c->bev);
    flow_update(c);
    bufferevent_unlock(c->bev);
}
