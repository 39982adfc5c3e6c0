/* strata-node's parts: its options (options.c), the gate that runs the TLS
 * handshakes of connections that have not authenticated yet (gate.c) and
 * the main loop that forks one session per authenticated connection and
 * reaps what they leave (strata_node.c). */
#ifndef WORKER_DAEMON_H
#define WORKER_DAEMON_H

#include "wire/msg.h"
#include "wire/tls.h"
#include "worker/session.h"

#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define DAEMON_MAX_MODULES 32

/* Limits of the daemon itself (docs/deployment.md, "Limits"). */
struct daemon_limits {
    uint32_t max_sessions;      /* sessions running at once */
    uint32_t max_procs_total;   /* chips + sub workers of all sessions */
    uint32_t unauth_start;      /* unauthenticated connections: from here */
    uint32_t unauth_rate;       /* on, drop this percentage of new ones, */
    uint32_t unauth_full;       /* rising to all of them here */
    uint32_t unauth_per_source; /* unauthenticated, from one address */
    double handshake_timeout_s; /* from the accept to an authenticated peer */
    double log_interval_s;      /* one summary line of drops per interval */
};

struct daemon_options {
    const char *listen;
    const char *port_file;
    struct wire_tls_cfg tls;
    const char *modules[DAEMON_MAX_MODULES];
    int num_modules;
    struct daemon_limits lim;
    struct worker_session_limits session;
};

/* Fills o from argv with every default first. 0, or 2 with the reason
 * printed to stderr; --help prints the usage and exits 0. */
int daemon_options_parse(int argc, char **argv, struct daemon_options *o);

/* ---- the gate (gate.c) ------------------------------------------------- */

struct gate;

/* Offered an authenticated connection: fd and its established TLS (NULL:
 * plaintext). STRATA_OK when it took them (a session was forked; the gate
 * then frees its copy of ssl without a close_notify and closes fd); else
 * the error and a message for the client in why (STRATA_EBUSY: the node
 * is full), which the gate sends as a HELLO_REPLY before it closes. */
typedef strata_err (*gate_admit_fn)(void *arg, int fd, SSL *ssl,
                                    const char *peer, char *why, size_t cap);

/* Fills the daemon's health report (every field but nonce) for a HEALTH
 * request that an authenticated client sent as its first message. */
typedef void (*gate_health_fn)(void *arg, struct wire_health_reply *out);

/* The gate for listener lfd (non-blocking). ctx NULL: plaintext. An
 * authenticated connection whose first frame is HEALTH is answered here
 * (health fills the reply) and closed; any other goes to admit. NULL when
 * out of memory. */
struct gate *gate_create(SSL_CTX *ctx, const struct daemon_limits *lim,
                         gate_admit_fn admit, gate_health_fn health, void *arg);
void gate_destroy(struct gate *g);
/* The fds the gate waits on, after the n the caller put first; returns
 * the new count (pfd has room for n + gate_max_fds). */
int gate_poll_fill(struct gate *g, struct pollfd *pfd, int n);
size_t gate_max_fds(const struct gate *g);
/* Milliseconds until the gate's next deadline or summary (-1: none). */
int gate_timeout_ms(const struct gate *g);
/* Accepts every connection waiting on lfd, dropping those past a limit.
 * Out of fds, it stops, and the listener rests a while (gate_listening). */
void gate_accept(struct gate *g, int lfd);
/* False while the listener rests: leave it out of the poll (the gate's
 * timeout covers the rest's end). */
bool gate_listening(const struct gate *g);
/* Moves the connections whose fds are ready (pfd from gate_poll_fill's n
 * on), expires those past their deadline and writes a due summary. */
void gate_run(struct gate *g, const struct pollfd *pfd, int n);
/* In a forked session: closes every fd of the gate's but keep_fd (its
 * memory stays). */
void gate_forget_in_child(struct gate *g, int keep_fd);

#endif
