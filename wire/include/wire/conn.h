/* A framed message connection over TCP, with TLS unless insecure, driven by
 * a libevent loop. Every frame's header is checked, and its length capped
 * per type, before its body is buffered. A peer that closes without a
 * GOODBYE, sends a bad frame or stays silent past the heartbeat limit is a
 * failed peer. A TLS connect that the server closes before answering its
 * ClientHello fails with STRATA_EBUSY (a node dropping connections it has
 * no room for), any other failure before the first frame with
 * STRATA_EAUTH. */
#ifndef WIRE_CONN_H
#define WIRE_CONN_H

#include "wire/frame.h"

#include <event2/event.h>
#include <openssl/ssl.h>

struct wire_conn;

/* A whole message arrived (body is valid during the call). */
typedef void (*wire_conn_msg_fn)(struct wire_conn *c, unsigned type,
                                 const uint8_t *body, size_t len, void *arg);
/* The connection is up (err == STRATA_OK, once) or has failed or closed
 * (err != STRATA_OK, once, with a reason). Not called after free. */
typedef void (*wire_conn_state_fn)(struct wire_conn *c, strata_err err,
                                   const char *why, void *arg);

struct wire_conn_cbs {
    wire_conn_msg_fn on_msg;
    wire_conn_state_fn on_state;
    void *arg;
};

/* Starts connecting to host:port (numeric or resolved by the caller into
 * addr). ctx NULL = plaintext. */
strata_err wire_conn_connect(struct event_base *base, SSL_CTX *ctx,
                             const struct sockaddr *addr, int addrlen,
                             const char *peer_name,
                             const struct wire_conn_cbs *cbs,
                             struct wire_conn **out);
/* Wraps an accepted socket fd whose peer has authenticated: ssl is its
 * established TLS connection (the handshake done, nothing more read), or
 * NULL for plaintext. The connection is up at once (no "connected" state
 * call). Ownership of fd and ssl moves to the connection on STRATA_OK. */
strata_err wire_conn_open(struct event_base *base, SSL *ssl, int fd,
                          const char *peer_name,
                          const struct wire_conn_cbs *cbs,
                          struct wire_conn **out);
/* Queues whole frames (as the wire_*_pack functions append them).
 * Thread-safe: the connection's bufferevent is locked. */
strata_err wire_conn_send(struct wire_conn *c, const void *frames, size_t len);
/* The connection's lock, which its callbacks (on_msg, on_state) run
 * holding and wire_conn_send takes: state they share with another thread
 * can live under it. Recursive. */
void wire_conn_lock(struct wire_conn *c);
void wire_conn_unlock(struct wire_conn *c);
/* Blocks SIGPIPE in the calling thread for good (a thread running an event
 * loop that writes to sockets). wire_conn_send and wire_conn_close block
 * it around their own writes, so callers need not. */
void wire_conn_block_sigpipe(void);
/* Sends GOODBYE and closes once it is flushed. */
void wire_conn_close(struct wire_conn *c, uint32_t reason, const char *msg);
/* The same, but the connection ends (the "closed" state call) only once
 * the peer has closed its end too; what it sends meanwhile is dropped.
 * Freed then, the socket cannot reset the connection with the peer's
 * bytes unread, which could lose the GOODBYE before the peer reads it. */
void wire_conn_close_await(struct wire_conn *c, uint32_t reason,
                           const char *msg);
void wire_conn_free(struct wire_conn *c);
/* Frees a base whose loop has stopped, once every connection and event on
 * it is freed. Use it, not event_base_free: a connection's last callback
 * may still be queued there, and only running it lets its socket close. */
void wire_base_free(struct event_base *base);
const char *wire_conn_peer(const struct wire_conn *c);
/* Back-pressure: the connection reads no more frames while held(arg)
 * returns true (held may be NULL) or while more than high_water bytes (0 =
 * no mark) wait to go out; the frames already read wait. Reading resumes
 * when the output drains to half the mark, or when wire_conn_recheck (any
 * thread) finds held false. held runs with the connection locked. */
void wire_conn_set_flow(struct wire_conn *c, bool (*held)(void *arg),
                        size_t high_water);
void wire_conn_recheck(struct wire_conn *c);
/* Waits until at most limit bytes wait to go out (not on the loop's
 * thread: the loop drains them), so that a sender of much (a task's
 * results) queues no more than the mark while its peer reads slowly.
 * STRATA_EPEER once the connection failed or is closing (what was not
 * queued is dropped). A peer that reads nothing is the silence limit's
 * to end (wire_conn_idle_s). */
strata_err wire_conn_wait_room(struct wire_conn *c, size_t limit);
/* Ends every wire_conn_wait_room, now and later, with STRATA_EPEER: the
 * owner gives up on the connection (a session that ends for a silent
 * peer, whose bytes would never drain). */
void wire_conn_stop_waits(struct wire_conn *c);
/* Seconds since the last byte arrived, or since the peer last took bytes
 * of a backlog of ours. 0 while reading is paused by the flow's held():
 * the peer waits on us. Paused for the high water mark, the peer counts
 * as silent until it takes some of our replies. From the loop's thread. */
double wire_conn_idle_s(struct wire_conn *c);

#endif
