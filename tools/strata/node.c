/* strata node: ping (an authenticated HEALTH request to strata-node,
 * answered by the daemon itself) and keygen (a new cluster secret). */
#define _GNU_SOURCE
#include "cli.h"
#include "wire/endpoint.h"
#include "wire/frame.h"
#include "wire/msg.h"
#include "wire/tls.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <openssl/err.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CMD_PING "node ping"
#define CMD_KEYGEN "node keygen"
#define SECRET_BYTES 32

void cli_node_usage(FILE *f)
{
    fprintf(f,
            "usage: strata node ping ENDPOINT (--secret-file FILE |\n"
            "                        --cert C --key K --ca A | --insecure)\n"
            "                        [--timeout SECONDS]\n"
            "       strata node keygen FILE [--force]\n"
            "\n"
            "ping: connect to the strata-node at ENDPOINT (HOST:PORT or "
            "[V6]:PORT),\n"
            "authenticate as a parent does, and print its health: version, "
            "protocol\nversions, sessions running and allowed, the per-session "
            "chip and sub-worker\ncap, uptime and pid. No session is started. "
            "--timeout bounds the whole\nexchange [10]. Exit 0 when the node "
            "answered, 3 when authentication\nfailed, 1 otherwise.\n"
            "\n"
            "keygen: write a new cluster secret (32 random bytes as 64 hex "
            "digits and\na newline) to FILE with mode 600, for strata-node "
            "--secret-file and\nparents. An existing FILE is kept (exit 4) "
            "unless --force, which replaces\nit atomically.\n");
}

/* ---- keygen ------------------------------------------------------------- */

static int write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

static int keygen(int argc, char **argv)
{
    static const struct option opts[] = {{"force", no_argument, NULL, 'f'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    unsigned char key[SECRET_BYTES];
    char text[2 * SECRET_BYTES + 2], tmp[4200];
    const char *path;
    bool force = false;
    static char prog[] = "strata " CMD_KEYGEN;
    int c, fd;

    optind = 1;
    argv[0] = prog; /* getopt's messages name the command */
    while ((c = getopt_long(argc, argv, "fh", opts, NULL)) != -1) {
        if (c == 'f') {
            force = true;
        } else if (c == 'h') {
            cli_node_usage(stdout);
            return CLI_OK;
        } else {
            cli_node_usage(stderr);
            return CLI_USAGE;
        }
    }
    if (optind != argc - 1)
        return cli_fail(CLI_USAGE, CMD_KEYGEN, "give one FILE");
    path = argv[optind];
    if (getrandom(key, sizeof(key), 0) != (ssize_t)sizeof(key))
        return cli_fail(CLI_FAIL, CMD_KEYGEN, "getrandom: %s", strerror(errno));
    for (size_t i = 0; i < sizeof(key); i++)
        snprintf(text + 2 * i, 3, "%02x", key[i]);
    text[2 * SECRET_BYTES] = '\n';
    text[2 * SECRET_BYTES + 1] = '\0';
    if (!force) {
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 && errno == EEXIST)
            return cli_fail(CLI_EXISTS, CMD_KEYGEN,
                            "%s exists; not replaced (--force replaces it)",
                            path);
        if (fd < 0)
            return cli_fail(CLI_FAIL, CMD_KEYGEN, "cannot create %s: %s", path,
                            strerror(errno));
        if (write_all(fd, text, strlen(text)) != 0 || fsync(fd) != 0) {
            int e = errno;

            close(fd);
            unlink(path);
            return cli_fail(CLI_FAIL, CMD_KEYGEN, "cannot write %s: %s", path,
                            strerror(e));
        }
        close(fd);
        printf("wrote a new secret to %s (mode 600)\n", path);
        return CLI_OK;
    }
    /* --force replaces a secret file, never anything else: a device, a
     * FIFO or a link's target would be lost to the rename (as root,
     * /dev/full became a key). A path not there yet is fine. */
    {
        struct stat st;

        if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode))
            return cli_fail(CLI_FAIL, CMD_KEYGEN,
                            "%s is not a regular file; --force replaces only "
                            "a secret file",
                            path);
    }
    /* --force: a new file beside it, renamed over it, so that a reader
     * sees the old secret or the new one, never half of one. */
    snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path);
    fd = mkstemp(tmp);
    if (fd < 0)
        return cli_fail(CLI_FAIL, CMD_KEYGEN, "cannot create %s: %s", tmp,
                        strerror(errno));
    if (fchmod(fd, 0600) != 0 || write_all(fd, text, strlen(text)) != 0 ||
        fsync(fd) != 0 || rename(tmp, path) != 0) {
        int e = errno;

        close(fd);
        unlink(tmp);
        return cli_fail(CLI_FAIL, CMD_KEYGEN, "cannot write %s: %s", path,
                        strerror(e));
    }
    close(fd);
    printf("replaced the secret in %s (mode 600)\n", path);
    return CLI_OK;
}

/* ---- ping --------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Waits for fd to be ready for events until deadline: 0, or -1 (errno
 * ETIMEDOUT when the time is up). */
static int wait_fd(int fd, short events, double deadline)
{
    for (;;) {
        struct pollfd p = {.fd = fd, .events = events};
        double left = deadline - now_s();
        int rc;

        if (left <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        rc = poll(&p, 1, (int)(left * 1000) + 1);
        if (rc > 0)
            return 0;
        if (rc < 0 && errno != EINTR)
            return -1;
    }
}

/* A non-blocking TCP connection to host:port, or -1 with why filled. */
static int dial(const char *host, int port, double deadline, char *why,
                size_t cap)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL, *a;
    char service[8];
    int fd = -1, rc, err = 0;

    snprintf(service, sizeof(service), "%d", port);
    rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0) {
        snprintf(why, cap, "%s: %s", host, gai_strerror(rc));
        return -1;
    }
    for (a = res; a; a = a->ai_next) {
        socklen_t len = sizeof(err);

        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                    0);
        if (fd < 0)
            continue;
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
            break;
        err = errno;
        if (err == EINPROGRESS && wait_fd(fd, POLLOUT, deadline) == 0 &&
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && !err)
            break;
        if (err == EINPROGRESS)
            err = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0)
        snprintf(why, cap, "cannot connect to %s:%d: %s", host, port,
                 strerror(err ? err : ECONNREFUSED));
    return fd;
}

enum ssl_op { OP_CONNECT, OP_READ, OP_WRITE };

/* SSL_connect/read/write under the deadline: > 0, or <= 0 with the SSL
 * error in *e (-1 when the time ran out). */
static int ssl_io(SSL *ssl, int fd, double deadline, enum ssl_op op, void *buf,
                  int len, int *e)
{
    for (;;) {
        int r;

        ERR_clear_error();
        r = op == OP_CONNECT ? SSL_connect(ssl)
            : op == OP_READ  ? SSL_read(ssl, buf, len)
                             : SSL_write(ssl, buf, len);
        if (r > 0)
            return r;
        *e = SSL_get_error(ssl, r);
        if (*e != SSL_ERROR_WANT_READ && *e != SSL_ERROR_WANT_WRITE)
            return r;
        if (wait_fd(fd, *e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT,
                    deadline) != 0) {
            *e = -1;
            return -1;
        }
    }
}

struct ping_opts {
    struct wire_tls_cfg tls;
    double timeout_s;
    const char *endpoint;
};

static int parse_ping(int argc, char **argv, struct ping_opts *o)
{
    static const struct option opts[] = {
        {"secret-file", required_argument, NULL, 's'},
        {"cert", required_argument, NULL, 'c'},
        {"key", required_argument, NULL, 'k'},
        {"ca", required_argument, NULL, 'a'},
        {"insecure", no_argument, NULL, 'i'},
        {"timeout", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    static char prog[] = "strata " CMD_PING;
    char *end;
    int c;

    memset(o, 0, sizeof(*o));
    o->timeout_s = 10;
    optind = 1;
    argv[0] = prog; /* getopt's messages name the command */
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 's':
            o->tls.secret_file = optarg;
            break;
        case 'c':
            o->tls.cert_file = optarg;
            break;
        case 'k':
            o->tls.key_file = optarg;
            break;
        case 'a':
            o->tls.ca_file = optarg;
            break;
        case 'i':
            o->tls.insecure = true;
            break;
        case 't':
            o->timeout_s = strtod(optarg, &end);
            if (*end || !(o->timeout_s > 0 && o->timeout_s <= 3600))
                return cli_fail(CLI_USAGE, CMD_PING,
                                "--timeout %s: must be seconds in (0, 3600]",
                                optarg);
            break;
        case 'h':
            cli_node_usage(stdout);
            return -1;
        default:
            cli_node_usage(stderr);
            return CLI_USAGE;
        }
    }
    if (optind != argc - 1)
        return cli_fail(CLI_USAGE, CMD_PING, "give one ENDPOINT (HOST:PORT)");
    o->endpoint = argv[optind];
    return 0;
}

static void print_health(const char *endpoint,
                         const struct wire_health_reply *r, double rtt_ms)
{
    uint64_t s = r->uptime_ms / 1000;

    printf("%s: strata-node %s, pid %u\n", endpoint, r->version, r->pid);
    printf("  protocol:  %u..%u\n", r->proto_min, r->proto_max);
    printf("  sessions:  %u of %u\n", r->sessions, r->max_sessions);
    printf("  chips:     up to %u chips + sub workers per session\n",
           r->max_procs);
    printf("  uptime:    %llud %02lluh%02llum%02llus\n",
           (unsigned long long)(s / 86400), (unsigned long long)(s / 3600 % 24),
           (unsigned long long)(s / 60 % 60), (unsigned long long)(s % 60));
    printf("  round trip: %.1f ms\n", rtt_ms);
}

/* The TLS handshake failed: a node that hung up before answering is
 * busy (its limits) or speaks no TLS (--insecure), anything else is an
 * authentication failure. */
static int handshake_failed(const char *endpoint, int e, SSL *ssl)
{
    char tls[256];
    /* OpenSSL 3 reports an EOF as an error of its own ("unexpected eof
     * while reading"): what tells is whether the node sent anything. */
    bool answered = BIO_number_read(SSL_get_rbio(ssl)) > 0;

    wire_tls_error(tls, sizeof(tls));
    if (e == -1)
        return cli_fail(CLI_FAIL, CMD_PING,
                        "%s: no TLS handshake within the timeout", endpoint);
    if (!answered && e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
        return cli_fail(CLI_FAIL, CMD_PING,
                        "%s closed the connection before answering the TLS "
                        "handshake: it is no TLS strata-node (one started "
                        "with --insecure? ping it with --insecure), or it "
                        "is busy",
                        endpoint);
    if (!tls[0] && (e == SSL_ERROR_SYSCALL || e == SSL_ERROR_ZERO_RETURN))
        return cli_fail(CLI_FAIL, CMD_PING,
                        "%s closed the connection before authenticating "
                        "(node busy, or not a strata-node)",
                        endpoint);
    return cli_fail(CLI_AUTH, CMD_PING,
                    "%s: authentication failed: %s (a wrong secret file, or "
                    "a certificate the node's CA did not sign?)",
                    endpoint, tls[0] ? tls : "TLS handshake refused");
}

/* Some bytes from the peer: > 0, or <= 0 at EOF or failure (*e is -1
 * when the time ran out). */
static int read_some(SSL *ssl, int fd, double deadline, void *buf, size_t len,
                     int *e)
{
    if (ssl)
        return ssl_io(ssl, fd, deadline, OP_READ, buf, (int)len, e);
    for (;;) {
        ssize_t n = recv(fd, buf, len, 0);

        if (n >= 0)
            return (int)n;
        if (errno != EAGAIN && errno != EINTR)
            return -1;
        if (wait_fd(fd, POLLIN, deadline) != 0) {
            *e = -1;
            return -1;
        }
    }
}

/* Reads one whole frame into buf (cap bytes): its length; -1 when the
 * connection ended or the time ran out, -2 for bytes that are no frame. */
static int read_frame(SSL *ssl, int fd, double deadline, uint8_t *buf,
                      size_t cap, int *e)
{
    size_t have = 0, want = WIRE_FRAME_HEADER_SIZE;
    struct wire_frame_header h;

    while (have < want) {
        int n = read_some(ssl, fd, deadline, buf + have, want - have, e);

        if (n <= 0)
            return -1;
        have += (size_t)n;
        if (have == WIRE_FRAME_HEADER_SIZE) {
            if (wire_frame_header_unpack(buf, have, &h) != STRATA_OK ||
                h.body_len > cap - have)
                return -2;
            want += h.body_len;
        }
    }
    return (int)have;
}

static int ping(int argc, char **argv)
{
    struct ping_opts o;
    char host[256], why[512];
    int port, fd, rc, e = 0, n;
    SSL_CTX *ctx = NULL;
    SSL *ssl = NULL;
    struct wire_health req = {.nonce = 0};
    struct wire_buf out;
    struct wire_msg m;
    uint8_t in[1024];
    double t0, deadline;

    rc = parse_ping(argc, argv, &o);
    if (rc)
        return rc < 0 ? CLI_OK : rc;
    /* A daemon that drops the connection (full, or over its
     * unauthenticated limits) must give a message and exit status 1, not
     * kill the tool with SIGPIPE from a TLS write (exit 141). */
    signal(SIGPIPE, SIG_IGN);
    if (!o.tls.secret_file && !o.tls.cert_file && !o.tls.insecure)
        return cli_fail(CLI_USAGE, CMD_PING,
                        "give --secret-file FILE, --cert/--key/--ca or "
                        "--insecure");
    if (wire_endpoint_split("ENDPOINT", o.endpoint, host, sizeof(host), 1,
                            &port) != STRATA_OK)
        return cli_fail(CLI_USAGE, CMD_PING, "%s", strata_errmsg());
    if (o.tls.insecure && !wire_addr_is_loopback(host))
        return cli_fail(CLI_USAGE, CMD_PING,
                        "--insecure is refused for %s: plaintext only on "
                        "loopback",
                        host);
    /* A key we cannot use (missing, short, readable by others) is an
     * authentication failure as much as one the node refuses. */
    if (wire_tls_ctx_create(&o.tls, false, &ctx) != STRATA_OK)
        return cli_fail(CLI_AUTH, CMD_PING, "%s", strata_errmsg());
    if (getrandom(&req.nonce, sizeof(req.nonce), 0) != sizeof(req.nonce))
        req.nonce = (uint64_t)getpid();
    t0 = now_s();
    deadline = t0 + o.timeout_s;
    fd = dial(host, port, deadline, why, sizeof(why));
    if (fd < 0) {
        wire_tls_ctx_free(ctx);
        return cli_fail(CLI_FAIL, CMD_PING, "%s", why);
    }
    if (ctx) {
        /* The server name tells strata-node this is a health check. A
         * copy: OpenSSL's macro casts the name to void *. */
        char sni[] = WIRE_HEALTH_SERVER_NAME;

        ssl = SSL_new(ctx);
        if (!ssl || SSL_set_fd(ssl, fd) != 1 ||
            SSL_set_tlsext_host_name(ssl, sni) != 1) {
            rc = cli_fail(CLI_FAIL, CMD_PING, "SSL_new failed");
            goto out;
        }
        if (ssl_io(ssl, fd, deadline, OP_CONNECT, NULL, 0, &e) <= 0) {
            rc = handshake_failed(o.endpoint, e, ssl);
            goto out;
        }
    }
    wire_buf_init(&out);
    if (wire_health_pack(&req, &out) != STRATA_OK) {
        wire_buf_fini(&out);
        rc = cli_fail(CLI_FAIL, CMD_PING, "%s", strata_errmsg());
        goto out;
    }
    /* One write: over plaintext the daemon decides by the type byte. */
    if (ssl)
        n = ssl_io(ssl, fd, deadline, OP_WRITE, out.data, (int)out.len, &e);
    else
        n = (int)send(fd, out.data, out.len, MSG_NOSIGNAL);
    wire_buf_fini(&out);
    if (n <= 0) {
        rc = cli_fail(CLI_FAIL, CMD_PING, "%s: cannot send: %s", o.endpoint,
                      e == -1 ? "timed out" : "connection lost");
        goto out;
    }
    n = read_frame(ssl, fd, deadline, in, sizeof(in), &e);
    if (n < 0) {
        rc =
            cli_fail(CLI_FAIL, CMD_PING,
                     n == -2   ? "%s: not a strata frame in the reply"
                     : e == -1 ? "%s: no answer within the timeout"
                     : ssl ? "%s: the node closed the connection without an "
                             "answer (a strata-node older than the health "
                             "check?)"
                           : "%s: the node closed the connection without an "
                             "answer: it expects TLS (started with "
                             "--secret-file or --cert; ping it with the same), "
                             "or it is a strata-node older than the health "
                             "check",
                     o.endpoint);
        goto out;
    }
    if (wire_frame_unpack(in, (size_t)n, &m) != STRATA_OK) {
        rc = cli_fail(CLI_FAIL, CMD_PING, "%s: bad reply: %s", o.endpoint,
                      strata_errmsg());
        goto out;
    }
    if (m.type == WIRE_MSG_HELLO_REPLY) {
        rc = cli_fail(CLI_FAIL, CMD_PING, "%s refused: %s", o.endpoint,
                      m.u.hello_reply.message);
    } else if (m.type != WIRE_MSG_HEALTH_REPLY ||
               m.u.health_reply.nonce != req.nonce) {
        rc = cli_fail(CLI_FAIL, CMD_PING, "%s: unexpected %s in reply",
                      o.endpoint, wire_msg_name(m.type));
    } else {
        print_health(o.endpoint, &m.u.health_reply, (now_s() - t0) * 1e3);
        rc = CLI_OK;
    }
    wire_msg_free(&m);
out:
    if (ssl) {
        SSL_set_quiet_shutdown(ssl, 1);
        SSL_free(ssl);
    }
    close(fd);
    wire_tls_ctx_free(ctx);
    return rc;
}

int cli_node(int argc, char **argv)
{
    if (argc < 2 || cli_is_help(argv[1])) {
        cli_node_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_USAGE : CLI_OK;
    }
    if (strcmp(argv[1], "ping") == 0)
        return ping(argc - 1, argv + 1);
    if (strcmp(argv[1], "keygen") == 0)
        return keygen(argc - 1, argv + 1);
    fprintf(stderr, "strata node: unknown command '%s'\n", argv[1]);
    cli_node_usage(stderr);
    return CLI_USAGE;
}
