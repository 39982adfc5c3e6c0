/* The gate: connections that have not authenticated yet, handled by the
 * daemon itself, as sshd does. Nothing is forked for them: the TLS
 * handshake runs here, non-blocking, under a deadline, and only a peer
 * that has proved the key (or its certificate) is offered to admit. Their
 * number is bounded on its own, with early random drop as it fills
 * (START:RATE:FULL, as sshd's MaxStartups) and a cap per source address,
 * so that a flood from a few addresses cannot keep good parents out. What
 * it drops is logged as one summary line per interval; only the first few
 * failed handshakes of an interval get a line of their own. An
 * authenticated client that names the TLS server WIRE_HEALTH_SERVER_NAME
 * (`strata node ping`) sends HEALTH and gets the daemon's health report
 * from here, with no session. */
#define _GNU_SOURCE /* accept4 */
#include "base/alloc.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "daemon.h"
#include "wire/msg.h"

#include <errno.h>
#include <netdb.h>
#include <openssl/err.h>
#include <stdarg.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define ACCEPT_BATCH 256 /* accepts per wake-up, so signals still run */
#define DETAILS_PER_INTERVAL 5
#define REFUSE_LINGER_S 2.0 /* a refusal's reply, then waiting for EOF */
#define ADDR_SET 64         /* distinct addresses counted per interval */
#define ADDR_MAX 64         /* numeric IPv4 or IPv6 text */
#define LISTEN_REST_MS 100  /* out of fds: the listener is not polled */

enum pstate {
    P_HANDSHAKE, /* TLS handshake under way */
    P_FIRST,     /* plaintext: waiting for the first frame's type */
    P_HEALTH,    /* reading a HEALTH frame */
    P_REFUSE,    /* writing a reply: a refusal (node full) or health */
    P_DRAIN,     /* refusal sent: reading until EOF, so that the reply is
                    not lost to a reset */
};

struct pending {
    int fd;
    SSL *ssl; /* NULL: plaintext */
    enum pstate state;
    short events;
    uint64_t deadline_ns;
    char addr[ADDR_MAX];                     /* source address, numeric */
    char peer[ADDR_MAX + 8];                 /* address:port */
    struct wire_buf out;                     /* the refusal or health reply */
    uint8_t in[WIRE_FRAME_HEADER_SIZE + 64]; /* a HEALTH frame */
    size_t in_len;
};

struct stats {
    uint32_t per_source; /* past --max-unauth-per-source */
    uint32_t unauth;     /* past --max-unauth (full or random drop) */
    uint32_t timed_out;  /* handshake past its deadline */
    uint32_t failed;     /* handshake refused (wrong key, garbage) */
    uint32_t closed;     /* closed by the client during the handshake */
    uint32_t full;       /* authenticated, refused: node full */
    uint32_t no_fd;      /* accepts that failed: no fd free (EMFILE) */
    uint32_t quiet;      /* detail lines not written */
    uint32_t details;
    uint32_t naddrs;
    bool more_addrs;
    char addrs[ADDR_SET][ADDR_MAX];
};

struct gate {
    SSL_CTX *ctx;
    struct daemon_limits lim;
    gate_admit_fn admit;
    gate_health_fn health;
    void *arg;
    struct pending *p;
    struct pollfd *pfd; /* refresh's, cap entries */
    size_t n, cap;
    size_t polled; /* pending filled in by the last gate_poll_fill */
    size_t added;  /* connections added since the last refresh */
    struct stats st;
    uint64_t interval_ns;
    uint64_t rng;
    uint64_t listen_after_ns; /* out of fds: the listener rests till then */
};

struct gate *gate_create(SSL_CTX *ctx, const struct daemon_limits *lim,
                         gate_admit_fn admit, gate_health_fn health, void *arg)
{
    struct gate *g = base_calloc(1, sizeof(*g));

    if (!g)
        return NULL;
    g->cap = lim->unauth_full;
    g->p = base_calloc(g->cap, sizeof(*g->p));
    g->pfd = base_calloc(g->cap, sizeof(*g->pfd));
    if (!g->p || !g->pfd) {
        base_free(g->p);
        base_free(g->pfd);
        base_free(g);
        return NULL;
    }
    g->ctx = ctx;
    g->lim = *lim;
    g->admit = admit;
    g->health = health;
    g->arg = arg;
    g->interval_ns = base_now_ns();
    g->rng = base_now_ns() ^ ((uint64_t)getpid() << 32) ^ 0x9e3779b97f4a7c15u;
    return g;
}

static uint32_t rnd(struct gate *g)
{
    /* xorshift64: the drop needs no more than a fair coin. */
    g->rng ^= g->rng << 13;
    g->rng ^= g->rng >> 7;
    g->rng ^= g->rng << 17;
    return (uint32_t)(g->rng >> 32);
}

static void drop_at(struct gate *g, size_t i)
{
    struct pending *p = &g->p[i];

    if (p->ssl) {
        /* No close_notify: the peer learns nothing but the close. */
        SSL_set_quiet_shutdown(p->ssl, 1);
        SSL_free(p->ssl);
    }
    if (p->fd >= 0)
        close(p->fd);
    wire_buf_fini(&p->out);
    g->p[i] = g->p[--g->n];
}

void gate_destroy(struct gate *g)
{
    if (!g)
        return;
    while (g->n > 0)
        drop_at(g, g->n - 1);
    base_free(g->p);
    base_free(g->pfd);
    base_free(g);
}

void gate_forget_in_child(struct gate *g, int keep_fd)
{
    for (size_t i = 0; i < g->n; i++)
        if (g->p[i].fd != keep_fd)
            close(g->p[i].fd);
}

size_t gate_max_fds(const struct gate *g)
{
    return g->cap;
}

int gate_poll_fill(struct gate *g, struct pollfd *pfd, int n)
{
    for (size_t i = 0; i < g->n; i++) {
        pfd[n + (int)i].fd = g->p[i].fd;
        pfd[n + (int)i].events = g->p[i].events;
        pfd[n + (int)i].revents = 0;
    }
    g->polled = g->n;
    return n + (int)g->n;
}

static bool stats_any(const struct stats *s)
{
    return s->per_source || s->unauth || s->timed_out || s->failed ||
           s->closed || s->full || s->no_fd;
}

bool gate_listening(const struct gate *g)
{
    return base_now_ns() >= g->listen_after_ns;
}

int gate_timeout_ms(const struct gate *g)
{
    uint64_t next = UINT64_MAX;

    for (size_t i = 0; i < g->n; i++)
        if (g->p[i].deadline_ns < next)
            next = g->p[i].deadline_ns;
    if (stats_any(&g->st)) {
        uint64_t t = g->interval_ns + (uint64_t)(g->lim.log_interval_s * 1e9);

        if (t < next)
            next = t;
    }
    if (g->listen_after_ns && g->listen_after_ns < next && !gate_listening(g))
        next = g->listen_after_ns;
    return next == UINT64_MAX ? -1 : base_deadline_poll_ms(next);
}

static void note_addr(struct gate *g, const char *addr)
{
    struct stats *s = &g->st;

    for (uint32_t i = 0; i < s->naddrs; i++)
        if (strcmp(s->addrs[i], addr) == 0)
            return;
    if (s->naddrs == ADDR_SET) {
        s->more_addrs = true;
        return;
    }
    snprintf(s->addrs[s->naddrs++], ADDR_MAX, "%s", addr);
}

/* A line of its own for the first few events of an interval. */
__attribute__((format(printf, 2, 3))) static void detail(struct gate *g,
                                                         const char *fmt, ...)
{
    char line[512];
    va_list ap;

    if (g->st.details == DETAILS_PER_INTERVAL) {
        g->st.quiet++;
        return;
    }
    g->st.details++;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    LOG_WARN("%s", line);
}

static void summarize(struct gate *g)
{
    struct stats *s = &g->st;
    uint32_t total = s->per_source + s->unauth + s->timed_out + s->failed +
                     s->closed + s->full;

    if (s->no_fd)
        LOG_WARN("%u accepts failed in the last %.0f s: no fd free (the "
                 "daemon's fd limit, ulimit -n, is below what its pending "
                 "connections and sessions need)",
                 s->no_fd, g->lim.log_interval_s);
    if (!total)
        return;

    LOG_WARN("dropped %u connections from %s%u addresses in the last %.0f s "
             "(%u past --max-unauth-per-source %u, %u past --max-unauth "
             "%u:%u:%u, %u handshakes timed out, %u failed, %u closed by "
             "the client, %u refused: node full; %u lines not shown)",
             total, s->more_addrs ? "more than " : "", s->naddrs,
             g->lim.log_interval_s, s->per_source, g->lim.unauth_per_source,
             s->unauth, g->lim.unauth_start, g->lim.unauth_rate,
             g->lim.unauth_full, s->timed_out, s->failed, s->closed, s->full,
             s->quiet);
}

static void tick(struct gate *g)
{
    uint64_t now = base_now_ns();

    if (now - g->interval_ns < (uint64_t)(g->lim.log_interval_s * 1e9))
        return;
    if (stats_any(&g->st))
        summarize(g);
    memset(&g->st, 0, sizeof(g->st));
    g->interval_ns = now;
}

/* Which limit a new connection from addr is past, or NULL. */
static uint32_t *screen(struct gate *g, const char *addr)
{
    const struct daemon_limits *l = &g->lim;
    uint32_t same = 0;

    if (g->n >= l->unauth_full || g->n >= g->cap)
        return &g->st.unauth;
    for (size_t i = 0; i < g->n; i++)
        same += strcmp(g->p[i].addr, addr) == 0;
    if (same >= l->unauth_per_source)
        return &g->st.per_source;
    if (g->n >= l->unauth_start) {
        /* From RATE% at START, linearly, to 100% at FULL. */
        uint32_t pct =
            l->unauth_rate +
            (uint32_t)((100 - l->unauth_rate) * (g->n - l->unauth_start) /
                       (l->unauth_full - l->unauth_start + 1));

        if (rnd(g) % 100 < pct)
            return &g->st.unauth;
    }
    return NULL;
}

static void refuse(struct gate *g, struct pending *p, strata_err err,
                   const char *why)
{
    struct wire_hello_reply r = {.version = 0,
                                 .error = err,
                                 .message = why,
                                 .node_name = "strata-node",
                                 .pid = (uint32_t)getpid()};

    g->st.full++;
    note_addr(g, p->addr);
    detail(g, "refused %s: %s", p->peer, why);
    wire_buf_init(&p->out);
    if (wire_hello_reply_pack(&r, &p->out) != STRATA_OK) {
        p->deadline_ns = 0; /* dropped at the next look */
        return;
    }
    p->state = P_REFUSE;
    p->events = POLLOUT;
    p->deadline_ns = base_deadline_after(REFUSE_LINGER_S);
}

/* The peer has authenticated (or needs not, plaintext): a session, or a
 * refusal it can read. Returns true when p is gone from the gate. */
static bool authenticated(struct gate *g, size_t i)
{
    struct pending *p = &g->p[i];
    char why[256];
    strata_err err = g->admit(g->arg, p->fd, p->ssl, p->peer, why, sizeof(why));

    if (err) {
        refuse(g, p, err, why);
        return false;
    }
    drop_at(g, i); /* the session has its own copy now */
    return true;
}

static void handshake_failed(struct gate *g, struct pending *p, int e)
{
    unsigned long first = ERR_peek_error();
    char tls[256];

    wire_tls_error(tls, sizeof(tls));
    note_addr(g, p->addr);
    /* A client that hung up is no failed authentication. */
    if (ERR_GET_REASON(first) == SSL_R_UNEXPECTED_EOF_WHILE_READING ||
        e == SSL_ERROR_ZERO_RETURN || e == SSL_ERROR_SYSCALL) {
        g->st.closed++;
    } else if (tls[0]) {
        g->st.failed++;
        detail(g, "TLS error with %s: %s (authentication failed?)", p->peer,
               tls);
    } else {
        g->st.failed++;
        detail(g, "TLS handshake with %s failed (SSL error %d)", p->peer, e);
    }
}

/* The answer to HEALTH, written as a refusal is. */
static void health_reply(struct gate *g, struct pending *p, uint64_t nonce)
{
    struct wire_health_reply r;

    memset(&r, 0, sizeof(r));
    g->health(g->arg, &r);
    r.nonce = nonce;
    wire_buf_init(&p->out);
    if (wire_health_reply_pack(&r, &p->out) != STRATA_OK) {
        LOG_ERROR("health reply for %s: %s", p->peer, strata_errmsg());
        p->deadline_ns = 0; /* dropped at the next look */
        return;
    }
    LOG_INFO("health check from %s", p->peer);
    p->state = P_REFUSE;
    p->events = POLLOUT;
    p->deadline_ns = base_deadline_after(REFUSE_LINGER_S);
}

/* Reads the HEALTH frame (at most 76 bytes) and answers it. A frame that
 * does not decode ends the connection with a line in the log. Returns
 * true when p is gone from the gate. */
static bool step_health(struct gate *g, size_t i)
{
    struct pending *p = &g->p[i];
    struct wire_frame_header h;
    struct wire_msg m;
    size_t want = WIRE_FRAME_HEADER_SIZE;
    ssize_t n;

    if (p->in_len >= WIRE_FRAME_HEADER_SIZE) {
        if (wire_frame_header_unpack(p->in, p->in_len, &h) != STRATA_OK ||
            h.body_len > sizeof(p->in) - WIRE_FRAME_HEADER_SIZE)
            goto bad;
        want += h.body_len;
    }
    while (p->in_len < want) {
        if (p->ssl) {
            int rc, e;

            ERR_clear_error();
            rc = SSL_read(p->ssl, p->in + p->in_len, (int)(want - p->in_len));
            if (rc <= 0) {
                e = SSL_get_error(p->ssl, rc);
                if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
                    p->events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
                    return false;
                }
                goto gone;
            }
            n = rc;
        } else {
            n = recv(p->fd, p->in + p->in_len, want - p->in_len, 0);
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return false;
            if (n <= 0)
                goto gone;
        }
        p->in_len += (size_t)n;
        if (p->in_len == WIRE_FRAME_HEADER_SIZE)
            return step_health(g, i); /* now the body's length is known */
    }
    if (wire_frame_unpack(p->in, p->in_len, &m) != STRATA_OK)
        goto bad;
    if (m.type != WIRE_MSG_HEALTH) { /* the peek saw another record */
        wire_msg_free(&m);
        goto gone;
    }
    health_reply(g, p, m.u.health.nonce);
    wire_msg_free(&m);
    return false;

bad:
    detail(g, "bad HEALTH from %s: %s", p->peer, strata_errmsg());
gone:
    drop_at(g, i);
    return true;
}

static bool start_health(struct gate *g, size_t i)
{
    struct pending *p = &g->p[i];

    p->state = P_HEALTH;
    p->events = POLLIN;
    p->in_len = 0;
    /* The request may have come with the handshake's last flight and sit
     * in the TLS buffer already, where poll cannot see it. */
    return step_health(g, i);
}

/* Plaintext (loopback) has no server name: the first frame's type, at
 * byte 5 of its header, peeked and left unread, decides. HEALTH is
 * answered here; anything else, including a first segment shorter than
 * 6 bytes, goes to a session at once. */
static bool step_first(struct gate *g, size_t i)
{
    struct pending *p = &g->p[i];
    uint8_t h[WIRE_FRAME_HEADER_SIZE];
    ssize_t n = recv(p->fd, h, sizeof(h), MSG_PEEK);

    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return false;
    if (n <= 0) {
        drop_at(g, i);
        return true;
    }
    if (n >= 6 && h[5] == WIRE_MSG_HEALTH)
        return start_health(g, i);
    return authenticated(g, i);
}

static bool step_handshake(struct gate *g, size_t i)
{
    struct pending *p = &g->p[i];
    int rc, e;

    ERR_clear_error();
    rc = SSL_accept(p->ssl);
    if (rc == 1) {
        const char *name =
            SSL_get_servername(p->ssl, TLSEXT_NAMETYPE_host_name);

        /* Only a health check names this server: it goes on here, and
         * everything else goes to a session before a byte is read. */
        if (name && strcmp(name, WIRE_HEALTH_SERVER_NAME) == 0)
            return start_health(g, i);
        return authenticated(g, i);
    }
    e = SSL_get_error(p->ssl, rc);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        p->events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
        return false;
    }
    handshake_failed(g, p, e);
    drop_at(g, i);
    return true;
}

/* Writes the refusal; once it is out, says close_notify and waits for
 * the client's EOF (closing with its HELLO unread would send a reset that
 * can destroy the reply before the client reads it). */
static bool step_refuse(struct gate *g, size_t i)
{
    struct pending *p = &g->p[i];
    ssize_t n;

    if (p->ssl) {
        ERR_clear_error();
        n = SSL_write(p->ssl, p->out.data, (int)p->out.len);
        if (n <= 0) {
            int e = SSL_get_error(p->ssl, (int)n);

            if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
                p->events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
                return false;
            }
            drop_at(g, i);
            return true;
        }
        SSL_shutdown(p->ssl);
        p->out.len = 0;
    } else {
        n = send(p->fd, p->out.data, p->out.len, MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return false;
        if (n < 0) {
            drop_at(g, i);
            return true;
        }
        memmove(p->out.data, p->out.data + n, p->out.len - (size_t)n);
        p->out.len -= (size_t)n;
        if (p->out.len > 0)
            return false;
    }
    shutdown(p->fd, SHUT_WR);
    p->state = P_DRAIN;
    p->events = POLLIN;
    return false;
}

static bool step_drain(struct gate *g, size_t i)
{
    char buf[4096];
    ssize_t n;

    while ((n = recv(g->p[i].fd, buf, sizeof(buf), 0)) > 0)
        ;
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return false;
    drop_at(g, i);
    return true;
}

static void expire(struct gate *g, size_t i)
{
    struct pending *p = &g->p[i];

    if (p->state == P_FIRST || p->state == P_HEALTH) {
        g->st.timed_out++;
        note_addr(g, p->addr);
        detail(g,
               "%s: no HELLO in time: nothing came within %g s "
               "(--handshake-timeout)%s",
               p->peer, g->lim.handshake_timeout_s,
               g->ctx ? " after the TLS handshake" : " of the connection");
    } else if (p->state == P_HANDSHAKE) {
        g->st.timed_out++;
        note_addr(g, p->addr);
        /* The words the HELLO deadline used when sessions did the
         * handshake: no HELLO can come before it. */
        detail(g,
               "%s: no HELLO in time: the TLS handshake did not finish "
               "within %g s (--handshake-timeout)",
               p->peer, g->lim.handshake_timeout_s);
    }
    drop_at(g, i);
}

/* Moves the connections that pfd[0..count) says are ready, and expires
 * those past their deadline when expiring. */
static void advance(struct gate *g, const struct pollfd *pfd, size_t count,
                    bool expiring)
{
    uint64_t now = base_now_ns();

    /* Downwards: drop_at moves the last entry (already seen) into i. */
    for (size_t i = count; i-- > 0;) {
        const struct pollfd *f = &pfd[i];
        struct pending *p = &g->p[i];

        if (i >= g->n || p->fd != f->fd)
            continue;
        if (f->revents) {
            bool gone = p->state == P_HANDSHAKE ? step_handshake(g, i)
                        : p->state == P_FIRST   ? step_first(g, i)
                        : p->state == P_HEALTH  ? step_health(g, i)
                        : p->state == P_REFUSE  ? step_refuse(g, i)
                                                : step_drain(g, i);
            if (gone)
                continue;
        }
        if (expiring && now >= g->p[i].deadline_ns)
            expire(g, i);
    }
}

void gate_run(struct gate *g, const struct pollfd *pfd, int n)
{
    advance(g, pfd + n, g->polled, true);
    g->polled = 0;
    tick(g);
}

/* Before a limit drops a newcomer: the connections that have ended
 * already (a client that connected and closed at once) or can move on
 * now leave first, so that only live ones count. */
static void refresh(struct gate *g)
{
    size_t count = gate_poll_fill(g, g->pfd, 0) > 0 ? g->n : 0;

    g->polled = 0;
    g->added = 0;
    if (count && poll(g->pfd, (nfds_t)count, 0) > 0)
        advance(g, g->pfd, count, false);
}

static void describe(const struct sockaddr_storage *ss, socklen_t len,
                     char *addr, char *peer)
{
    char serv[NI_MAXSERV];

    if (getnameinfo((const struct sockaddr *)ss, len, addr, ADDR_MAX, serv,
                    sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
        snprintf(addr, ADDR_MAX, "unknown");
        snprintf(serv, sizeof(serv), "0");
    }
    snprintf(peer, ADDR_MAX + 8, "%.63s:%.6s", addr, serv);
}

static void add(struct gate *g, int fd, const char *addr, const char *peer)
{
    struct pending *p = &g->p[g->n];

    memset(p, 0, sizeof(*p));
    p->fd = fd;
    p->state = P_HANDSHAKE;
    p->events = POLLIN;
    p->deadline_ns = base_deadline_after(g->lim.handshake_timeout_s);
    snprintf(p->addr, sizeof(p->addr), "%s", addr);
    snprintf(p->peer, sizeof(p->peer), "%s", peer);
    if (g->ctx) {
        p->ssl = SSL_new(g->ctx);
        if (!p->ssl || SSL_set_fd(p->ssl, fd) != 1) {
            LOG_ERROR("cannot start a TLS handshake with %s: SSL_new", peer);
            SSL_free(p->ssl);
            close(fd);
            return;
        }
        SSL_set_accept_state(p->ssl);
    }
    g->n++;
    g->added++;
    /* Plaintext has no handshake: its authentication is nil. */
    if (!g->ctx) {
        p->state = P_FIRST;
        step_first(g, g->n - 1);
    }
}

/* Before a TLS connection dropped for a limit is closed: one plaintext
 * TLS alert record (fatal, internal_error), which a client reads in
 * place of a ServerHello and can tell from a node that died (a bare
 * close: wire/conn.c). A new socket's buffer takes the 7 bytes; if not,
 * the client sees a bare close. */
static void say_busy(int fd)
{
    static const unsigned char alert[] = {21, 3, 3, 0, 2, 2, 80};

    if (send(fd, alert, sizeof(alert), MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
        LOG_DEBUG("busy alert: %s", strerror(errno));
}

void gate_accept(struct gate *g, int lfd)
{
    for (int k = 0; k < ACCEPT_BATCH; k++) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        char addr[ADDR_MAX], peer[ADDR_MAX + 8];
        uint32_t *past;
        int fd = accept4(lfd, (struct sockaddr *)&ss, &len,
                         SOCK_CLOEXEC | SOCK_NONBLOCK);

        if (fd < 0) {
            /* Out of fds (or kernel memory): the connection stays queued
             * and the listener stays readable, so it rests a while rather
             * than spin; one line now, the count in the summary. */
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
                errno == ENOMEM) {
                if (!g->st.no_fd)
                    LOG_ERROR("accept: %s: not accepting for %d ms at a "
                              "time until fds are free",
                              strerror(errno), LISTEN_REST_MS);
                g->st.no_fd++;
                g->listen_after_ns =
                    base_now_ns() + (uint64_t)LISTEN_REST_MS * 1000000u;
            }
            return;
        }
        describe(&ss, len, addr, peer);
        past = screen(g, addr);
        /* Only when a connection came since: a flood that finds the
         * gate full costs no more than its accepts. */
        if (past && g->added) {
            refresh(g);
            past = screen(g, addr);
        }
        if (past) {
            (*past)++;
            note_addr(g, addr);
            if (g->ctx)
                say_busy(fd);
            close(fd);
            continue;
        }
        add(g, fd, addr, peer);
    }
}
