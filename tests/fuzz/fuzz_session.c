/* libFuzzer target: one strata-node session's message handler, driven
 * with sequences of frames (the record format of fuzz_records.h).
 *
 * Each input gets a fresh session in this process, served on a thread
 * over a socketpair, plaintext (no TLS), exactly as strata-node runs it
 * after the handshake; the harness is its parent. The records are written
 * to the peer end while the session's replies are read (and decoded: the
 * session must send well-formed frames only); after a HELLO the harness
 * waits for HELLO_REPLY, as a parent does. At the end it half-closes the
 * socket and the session must end within SESSION_END_S, leaving no child
 * process, no fd and no /dev/shm name of this process behind. A reply
 * naming a chip killed by a signal other than SIGKILL/SIGTERM (the session
 * kills its chips when it drops a peer) is a crash of that chip, so it
 * aborts too.
 *
 * The harness keeps inputs from using the machine up: a HELLO asking for
 * more than MAX_PROCS processes and a DOMAIN_CMD with windows over
 * MAX_WINDOW bytes end the input unsent; the session's own limits are
 * small (run_session). A COMM_INIT gets this process's pid in its cluster
 * id, which names the domain windows (see own_cluster).
 *
 * FUZZ_TRACE=1 prints every reply and the time each phase took;
 * FUZZ_WRITE_SEEDS=DIR writes the seed corpus to DIR and exits. */
#define _GNU_SOURCE /* pthread_timedjoin_np */
#include "fuzz_domain_seeds.h"
#include "fuzz_leaks.h"
#include "fuzz_module.h"
#include "fuzz_peer.h"
#include "fuzz_records.h"
#include "wire/args.h"
#include "worker/session.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
const char *__asan_default_options(void);

#define SESSION_END_S 10.0 /* from the peer's EOF to the session's end */
#define HELLO_WAIT_S 10.0  /* HELLO to HELLO_REPLY (chips start) */
#define REPLY_WAIT_S 0.25  /* a record's FUZZ_OP_WAIT ... */
#define WAIT_BUDGET_S 1.0  /* ... and all of an input's together */
#define STALL_S 10.0       /* a write that makes no progress */
#define MAX_PROCS 4        /* one more than the session allows */
#define MAX_WINDOW (1u << 20)

/* Chips report an ASan error by aborting: the session names the signal. */
const char *__asan_default_options(void)
{
    return "abort_on_error=1";
}

/* The one place that knows how a session is started: a change of
 * worker_session_main's signature is a change here. */
static int run_session(int fd)
{
    struct worker_session_limits lim;

    worker_session_limits_default(&lim);
    lim.max_tasks = 8;
    lim.max_threads = 4;
    lim.max_buffer_bytes = 16u << 20;
    lim.max_procs = MAX_PROCS - 1;
    lim.reply_high_water = 1u << 20;
    return worker_session_main(fd, NULL, "fuzz-peer", &lim);
}

/* Reports what went wrong and aborts: libFuzzer keeps the input. */
#define die(...)                                                               \
    do {                                                                       \
        fprintf(stderr, "fuzz_session: ");                                     \
        fprintf(stderr, __VA_ARGS__);                                          \
        fprintf(stderr, "\n");                                                 \
        abort();                                                               \
    } while (0)

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- the session, on its own thread ---------------------------------- */

struct sess {
    int fd;
    pthread_t th;
};

static void *sess_main(void *arg)
{
    struct sess *s = arg;

    (void)run_session(s->fd);
    return NULL;
}

/* ---- the parent's end ------------------------------------------------ */

struct peer {
    int fd;
    struct wire_buf in; /* bytes read, not yet a whole frame */
    unsigned replies;   /* frames other than HEARTBEAT */
    bool hello_reply;
    bool eof;    /* the session closed */
    bool broken; /* writes fail */
    /* The stream as the session parses it: frames are checked whole. */
    struct wire_buf out;
    bool out_bad; /* a bad header: the session reads no further */
    bool hello_sent;
    double wait_left; /* of WAIT_BUDGET_S: replies that never come cost
                         an input little */
};

/* A chip that died of a signal the session did not send. */
static void check_text(const char *msg)
{
    const char *p = msg ? strstr(msg, "killed by signal ") : NULL;
    int sig;

    if (!p)
        return;
    sig = atoi(p + strlen("killed by signal "));
    if (sig != SIGKILL && sig != SIGTERM)
        die("a chip crashed: %s", msg);
}

static bool trace; /* FUZZ_TRACE=1: each reply on stderr */

static void trace_reply(const struct wire_msg *m)
{
    uint64_t id = 0;
    strata_err err = STRATA_OK;
    const char *msg = "";

    if (m->type == WIRE_MSG_COMPLETION) {
        id = m->u.completion.request_id;
        err = m->u.completion.error;
        msg = m->u.completion.message;
    } else if (m->type == WIRE_MSG_CONTROL_REPLY) {
        id = m->u.control_reply.request_id;
        err = m->u.control_reply.error;
        msg = m->u.control_reply.message;
    } else if (m->type == WIRE_MSG_DOMAIN_REPLY) {
        id = m->u.domain_reply.request_id;
        err = m->u.domain_reply.error;
        msg = m->u.domain_reply.message;
    } else if (m->type == WIRE_MSG_HELLO_REPLY) {
        err = m->u.hello_reply.error;
        msg = m->u.hello_reply.message;
    } else if (m->type == WIRE_MSG_GOODBYE) {
        err = m->u.goodbye.reason;
        msg = m->u.goodbye.message;
    } else if (m->type == WIRE_MSG_DATA_CHUNK) {
        id = m->u.data_chunk.request_id;
    }
    fprintf(stderr, "fuzz_session: <- %s %llu: %s %s\n", wire_msg_name(m->type),
            (unsigned long long)id, strata_strerror(err), msg ? msg : "");
}

static void check_reply(const struct wire_msg *m)
{
    if (trace && m->type != WIRE_MSG_HEARTBEAT)
        trace_reply(m);
    switch (m->type) {
    case WIRE_MSG_HELLO_REPLY:
        check_text(m->u.hello_reply.message);
        break;
    case WIRE_MSG_COMPLETION:
        check_text(m->u.completion.message);
        break;
    case WIRE_MSG_CONTROL_REPLY:
        check_text(m->u.control_reply.message);
        break;
    case WIRE_MSG_DOMAIN_REPLY:
        check_text(m->u.domain_reply.message);
        break;
    case WIRE_MSG_GOODBYE:
        check_text(m->u.goodbye.message);
        break;
    default:
        break;
    }
}

/* One frame the session sent. */
static void peer_frame(struct wire_msg *m, void *arg)
{
    struct peer *p = arg;

    check_reply(m);
    if (m->type != WIRE_MSG_HEARTBEAT)
        p->replies++;
    if (m->type == WIRE_MSG_HELLO_REPLY)
        p->hello_reply = true;
}

/* Reads what the session sent, waiting up to ms for the first byte. */
static void peer_pump(struct peer *p, int ms)
{
    int got = fuzz_peer_recv(p->fd, &p->in, &p->eof, ms);

    if (got < 0)
        die("%s", "out of memory");
    if (got > 0) {
        const char *bad = fuzz_peer_frames(&p->in, peer_frame, p);

        if (bad)
            die("the session sent %s: %s", bad, strata_errmsg());
    }
}

static void peer_write(struct peer *p, const uint8_t *d, size_t n)
{
    double stall = now_s() + STALL_S;

    while (n > 0 && !p->broken) {
        struct pollfd q = {p->fd, POLLOUT | (p->eof ? 0 : POLLIN), 0};
        ssize_t r;

        if (now_s() > stall)
            die("%s", "the session stopped reading for 10 s");
        if (poll(&q, 1, 100) <= 0)
            continue;
        if (q.revents & POLLIN)
            peer_pump(p, 0);
        if (!(q.revents & (POLLOUT | POLLERR | POLLHUP)))
            continue;
        r = send(p->fd, d, n, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (r > 0) {
            d += r;
            n -= (size_t)r;
            stall = now_s() + STALL_S;
        } else if (r < 0 && errno != EAGAIN && errno != EINTR) {
            p->broken = true;
        }
    }
}

/* A frame the session will read: false if the harness must not send it
 * (it would take more of the machine than a fuzz run may). */
static bool frame_allowed(struct peer *p, const uint8_t *frame, size_t n)
{
    struct wire_msg m;
    bool ok = true;

    if (wire_frame_unpack(frame, n, &m) != STRATA_OK)
        return true; /* the session refuses it */
    if (m.type == WIRE_MSG_HELLO) {
        ok = m.u.hello.num_chips + m.u.hello.num_sub_workers <= MAX_PROCS;
        p->hello_sent = ok;
    } else if (m.type == WIRE_MSG_DOMAIN_CMD) {
        ok = m.u.domain_cmd.window_size <= MAX_WINDOW &&
             m.u.domain_cmd.num_members <= 16;
    }
    wire_msg_free(&m);
    return ok;
}

/* Feeds bytes about to be sent through the session's framing; false if
 * a frame they complete must not be sent. */
static bool stream_check(struct peer *p, const uint8_t *d, size_t n)
{
    size_t at = 0;

    if (p->out_bad)
        return true;
    if (wire_buf_append(&p->out, d, n) != STRATA_OK)
        die("%s", "out of memory");
    while (p->out.len - at >= WIRE_FRAME_HEADER_SIZE) {
        struct wire_frame_header h;
        size_t len;

        if (wire_frame_header_unpack(p->out.data + at, WIRE_FRAME_HEADER_SIZE,
                                     &h) != STRATA_OK) {
            p->out_bad = true; /* the session drops the stream here */
            return true;
        }
        len = WIRE_FRAME_HEADER_SIZE + h.body_len;
        if (p->out.len - at < len)
            break;
        if (!frame_allowed(p, p->out.data + at, len))
            return false;
        at += len;
    }
    if (at) {
        memmove(p->out.data, p->out.data + at, p->out.len - at);
        p->out.len -= at;
    }
    return true;
}

/* Waits until cond() holds, the session closed, or seconds passed. */
static void peer_wait(struct peer *p, unsigned replies, bool hello,
                      double seconds)
{
    double end = now_s() + seconds;

    while (!p->eof && now_s() < end) {
        if (hello ? p->hello_reply : p->replies > replies)
            return;
        peer_pump(p, 50);
    }
}

/* Writes one record (its frame header first, if framed) and waits as it
 * asks; false: the input ends here. */
static bool send_frame(struct peer *p, const struct fuzz_record *r)
{
    uint8_t head[WIRE_FRAME_HEADER_SIZE];
    unsigned before = p->replies;

    p->hello_sent = false;
    if (r->type) {
        struct wire_frame_header h = {WIRE_FRAME_VERSION, (uint8_t)r->type, 0,
                                      (uint32_t)r->len};

        wire_frame_header_pack(&h, head);
        if (!stream_check(p, head, sizeof(head)))
            return false;
    }
    if (!stream_check(p, r->payload, r->len))
        return false;
    if (r->type)
        peer_write(p, head, sizeof(head));
    peer_write(p, r->payload, r->len);
    if (p->hello_sent && !p->hello_reply)
        peer_wait(p, 0, true, HELLO_WAIT_S);
    else if (r->wait && p->wait_left > 0) {
        double t = now_s();

        peer_wait(p, before, false,
                  p->wait_left < REPLY_WAIT_S ? p->wait_left : REPLY_WAIT_S);
        p->wait_left -= now_s() - t;
    }
    return !p->broken;
}

/* COMM_INIT's cluster id names the windows by the L4's pid (its high 32
 * bits): this process's pid goes there, so that no input can name (or
 * unlink) another process's windows, and what is left is seen. A record
 * whose body decodes is packed again, into *b. */
static void own_cluster(struct fuzz_record *r, struct wire_buf *b)
{
    struct wire_msg m;

    if (r->type != WIRE_MSG_COMM_INIT ||
        wire_msg_unpack(r->type, r->payload, r->len, &m) != STRATA_OK)
        return;
    m.u.comm_init.cluster_id = (uint64_t)(uint32_t)getpid() << 32 |
                               (m.u.comm_init.cluster_id & 0xffffffffu);
    if (wire_msg_pack(&m, b) == STRATA_OK) {
        r->payload = b->data + WIRE_FRAME_HEADER_SIZE;
        r->len = b->len - WIRE_FRAME_HEADER_SIZE;
    }
    wire_msg_free(&m);
}

/* Sends one record; false: the input ends here. */
static bool send_record(struct peer *p, const struct fuzz_record *rec)
{
    struct fuzz_record own = *rec, *r = &own;
    struct wire_buf b;
    bool ok;

    wire_buf_init(&b);
    own_cluster(r, &b);
    ok = send_frame(p, r);
    wire_buf_fini(&b);
    return ok;
}

/* ---- what an input must leave behind: nothing ------------------------ */

/* fuzz_leaks.h counts them; here a count that cannot be taken ends the
 * run. */
static int count_fds(void)
{
    int n = fuzz_count_fds();

    if (n < 0)
        die("%s", "cannot list /proc/self/fd");
    return n;
}

static void check_children(void)
{
    double end = now_s() + 2.0;
    int st;

    /* None at all: the common case, without a look at /proc. */
    if (waitpid(-1, &st, WNOHANG) == -1 && errno == ECHILD)
        return;
    /* The worker waits for its children at destroy: any child still here
     * (even one that is just exiting) was not waited for. */
    while (fuzz_children() > 0 && now_s() < end) {
        struct timespec ts = {0, 10 * 1000 * 1000};

        nanosleep(&ts, NULL);
    }
    if (fuzz_children() > 0)
        die("%s", "the session left a child process behind");
}

/* ---- the target ------------------------------------------------------ */

static struct fuzz_callables calls;

static void write_seeds(const char *dir);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *seeds = getenv("FUZZ_WRITE_SEEDS");

    (void)argc;
    (void)argv;
    /* Every dropped peer is a warning: too many lines to keep. */
    setenv("STRATA_LOG", "error", 0);
    trace = getenv("FUZZ_TRACE") && strcmp(getenv("FUZZ_TRACE"), "1") == 0;
    if (fuzz_module_register(&calls) != 0)
        exit(1);
    if (seeds) {
        write_seeds(seeds);
        exit(0);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct peer p;
    struct sess s;
    struct fuzz_record r;
    int sv[2];
    int fds = count_fds();
    double t0 = now_s(), end;
    struct stat st;

    memset(&p, 0, sizeof(p));
    memset(&s, 0, sizeof(s));
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        die("socketpair: %s", strerror(errno));
    p.fd = sv[0];
    p.wait_left = WAIT_BUDGET_S;
    s.fd = sv[1];
    if (fstat(s.fd, &st) != 0)
        die("fstat: %s", strerror(errno));
    if (pthread_create(&s.th, NULL, sess_main, &s) != 0)
        die("%s", "pthread_create");
    while (fuzz_record_next(&data, &size, &r) && !p.eof)
        if (!send_record(&p, &r))
            break;
    /* The parent hangs up: the session must end, and clean up. */
    if (trace)
        fprintf(stderr, "fuzz_session: sent after %.3f s\n", now_s() - t0);
    shutdown(p.fd, SHUT_WR);
    end = now_s() + SESSION_END_S;
    while (!p.eof && now_s() < end)
        peer_pump(&p, 100);
    if (trace)
        fprintf(stderr, "fuzz_session: EOF after %.3f s\n", now_s() - t0);
    {
        struct timespec abs;
        double left = end - now_s();

        clock_gettime(CLOCK_REALTIME, &abs);
        left = left > 0 ? left : 0;
        abs.tv_sec += (time_t)left;
        abs.tv_nsec += (long)((left - (double)(time_t)left) * 1e9);
        if (abs.tv_nsec >= 1000000000L) {
            abs.tv_sec++;
            abs.tv_nsec -= 1000000000L;
        }
        if (pthread_timedjoin_np(s.th, NULL, &abs) != 0)
            die("%s", "the session did not end within 10 s of its peer's EOF");
    }
    if (trace)
        fprintf(stderr, "fuzz_session: ended after %.3f s\n", now_s() - t0);
    close(p.fd);
    {
        /* A session that failed before it took the socket left it open. */
        struct stat now;

        if (fstat(s.fd, &now) == 0 && now.st_ino == st.st_ino &&
            now.st_dev == st.st_dev)
            close(s.fd);
    }
    wire_buf_fini(&p.in);
    wire_buf_fini(&p.out);
    check_children();
    if (fuzz_shm_leftovers("fuzz_session") > 0)
        die("%s", "the session left names in /dev/shm");
    if (count_fds() != fds)
        die("%s", "the session left a file descriptor open");
    if (trace)
        fprintf(stderr, "fuzz_session: checked after %.3f s\n", now_s() - t0);
    return 0;
}

/* ---- seeds ----------------------------------------------------------- */

static void hello(struct fuzz_seed *sd, size_t chips, uint32_t subs)
{
    static const uint32_t ids[2] = {0, 1};
    struct wire_msg m = {.type = WIRE_MSG_HELLO};

    m.u.hello.proto_min = WIRE_PROTO_MIN;
    m.u.hello.proto_max = WIRE_PROTO_MAX;
    m.u.hello.capabilities = WIRE_CAP_DATA_CHUNKS | WIRE_CAP_REMOTE_BUFFERS |
                             WIRE_CAP_GLOBAL_DOMAINS | WIRE_CAP_DEADLINES;
    m.u.hello.node_name = "fuzz";
    m.u.hello.pid = 4242;
    m.u.hello.platform = "sim";
    m.u.hello.chip_ids = ids;
    m.u.hello.num_chips = chips;
    m.u.hello.num_sub_workers = subs;
    m.u.hello.comm_profile = "sim";
    fuzz_seed_msg(sd, &m, 0);
}

/* One tensor of the TASKs below: u8[nbytes] at offset 0 of buffer id. */
struct tdesc {
    uint64_t id, size, nbytes;
    uint8_t tag;
};

static void task_to(struct fuzz_seed *sd, uint64_t req, strata_callable c,
                    const struct tdesc *t, size_t n, const uint64_t *sc,
                    size_t nsc, const uint32_t *data, size_t ndata,
                    uint64_t deadline_ms, unsigned flags, uint8_t target)
{
    struct wire_msg m = {.type = WIRE_MSG_TASK};
    uint8_t blob[WIRE_ARGS_MAX];
    struct wire_args_header h = {(uint32_t)n, (uint32_t)nsc};
    size_t len = sizeof(h);

    memcpy(blob, &h, sizeof(h));
    for (size_t k = 0; k < n; k++) {
        struct wire_tensor x;

        memset(&x, 0, sizeof(x));
        x.buffer_id = t[k].id;
        x.buffer_size = t[k].size;
        x.nbytes = t[k].nbytes;
        x.shape[0] = t[k].nbytes;
        x.dtype = STRATA_U8;
        x.ndims = 1;
        x.tag = t[k].tag;
        x.creator = 4242;
        memcpy(blob + len, &x, sizeof(x));
        len += sizeof(x);
    }
    if (nsc)
        memcpy(blob + len, sc, nsc * sizeof(uint64_t));
    len += nsc * sizeof(uint64_t);
    m.u.task.request_id = req;
    memcpy(m.u.task.digest, c.digest, sizeof(m.u.task.digest));
    m.u.task.args = blob;
    m.u.task.args_len = len;
    m.u.task.target = target;
    m.u.task.chip = target == WIRE_TARGET_CHIP ? 9 : 0;
    m.u.task.deadline_ms = deadline_ms;
    m.u.task.data_tensors = data;
    m.u.task.num_data_tensors = ndata;
    fuzz_seed_msg(sd, &m, flags);
}

/* A TASK for the node itself (target WORKER). */
static void task(struct fuzz_seed *sd, uint64_t req, strata_callable c,
                 const struct tdesc *t, size_t n, const uint64_t *sc,
                 size_t nsc, const uint32_t *data, size_t ndata,
                 uint64_t deadline_ms, unsigned flags)
{
    task_to(sd, req, c, t, n, sc, nsc, data, ndata, deadline_ms, flags,
            WIRE_TARGET_WORKER);
}

static void chunk(struct fuzz_seed *sd, uint64_t req, uint32_t tensor,
                  uint64_t off, size_t len, bool last, unsigned flags)
{
    static const uint8_t bytes[256] = {1, 2, 3, 4, 5, 6, 7, 8};
    struct wire_msg m = {.type = WIRE_MSG_DATA_CHUNK};

    if (len > sizeof(bytes))
        fuzz_seed_die("chunk longer than 256 bytes");

    m.u.data_chunk.request_id = req;
    m.u.data_chunk.tensor = tensor;
    m.u.data_chunk.offset = off;
    m.u.data_chunk.data = bytes;
    m.u.data_chunk.len = len;
    m.u.data_chunk.last = last;
    fuzz_seed_msg(sd, &m, flags);
}

static void control(struct fuzz_seed *sd, uint64_t req, unsigned op,
                    uint64_t id, uint64_t off, uint64_t nbytes, unsigned flags)
{
    static const uint8_t bytes[256] = {9, 8, 7, 6, 5, 4, 3, 2, 1};
    struct wire_msg m = {.type = WIRE_MSG_CONTROL};
    struct wire_operands *o = &m.u.control.operands;

    m.u.control.request_id = req;
    m.u.control.op = (uint8_t)op;
    switch (op) {
    case WIRE_CTRL_CANCEL:
        o->present = WIRE_OPND_BIT(WIRE_OPND_REQUEST);
        o->request = id;
        break;
    case WIRE_CTRL_BUFFER_CREATE:
        o->present = WIRE_OPND_BIT(WIRE_OPND_BUFFER_ID) |
                     WIRE_OPND_BIT(WIRE_OPND_NBYTES);
        break;
    case WIRE_CTRL_BUFFER_RELEASE:
        o->present = WIRE_OPND_BIT(WIRE_OPND_BUFFER_ID);
        break;
    case WIRE_CTRL_BUFFER_WRITE:
        o->present = WIRE_OPND_BIT(WIRE_OPND_BUFFER_ID) |
                     WIRE_OPND_BIT(WIRE_OPND_OFFSET) |
                     WIRE_OPND_BIT(WIRE_OPND_NBYTES) |
                     WIRE_OPND_BIT(WIRE_OPND_DATA);
        o->data = bytes;
        o->data_len = nbytes;
        break;
    case WIRE_CTRL_BUFFER_READ:
        o->present = WIRE_OPND_BIT(WIRE_OPND_BUFFER_ID) |
                     WIRE_OPND_BIT(WIRE_OPND_OFFSET) |
                     WIRE_OPND_BIT(WIRE_OPND_NBYTES);
        break;
    default:
        break;
    }
    o->buffer_id = id;
    o->offset = off;
    o->nbytes = nbytes;
    fuzz_seed_msg(sd, &m, flags);
}

static void goodbye(struct fuzz_seed *sd)
{
    struct wire_msg m = {.type = WIRE_MSG_GOODBYE};

    m.u.goodbye.message = "done";
    fuzz_seed_msg(sd, &m, 0);
}

static void heartbeat(struct fuzz_seed *sd)
{
    struct wire_msg m = {.type = WIRE_MSG_HEARTBEAT};

    m.u.heartbeat.seq = 1;
    m.u.heartbeat.time_ns = 1000;
    fuzz_seed_msg(sd, &m, 0);
}

static void write_seeds(const char *dir)
{
    static const struct tdesc in7 = {7, 4096, 64, STRATA_IN};
    static const struct tdesc io[3] = {{2, 4096, 256, STRATA_IN},
                                       {1, 4096, 128, STRATA_OUT},
                                       {3, 512, 512, STRATA_INOUT}};
    static const uint32_t d0[1] = {0}, d02[2] = {0, 2};
    static const uint64_t sc[2] = {1, 2}, ms30[1] = {30};
    struct fuzz_seed sd;

    wire_buf_init(&sd.b);

    hello(&sd, 1, 0);
    goodbye(&sd);
    fuzz_seed_write(&sd, dir, "hello_goodbye");

    /* No chips: nothing forks, so the fuzzer runs many more of these. */
    hello(&sd, 0, 0);
    task(&sd, 1, calls.noop, &in7, 1, NULL, 0, d0, 1, 0, 0);
    control(&sd, 2, WIRE_CTRL_BUFFER_RELEASE, 7, 0, 0, 0);
    chunk(&sd, 1, 0, 0, 32, false, 0);
    chunk(&sd, 1, 0, 32, 32, true, FUZZ_OP_WAIT);
    control(&sd, 3, WIRE_CTRL_BUFFER_RELEASE, 7, 0, 0, 0);
    control(&sd, 4, WIRE_CTRL_BUFFER_CREATE, 9, 0, 4096, 0);
    control(&sd, 5, WIRE_CTRL_BUFFER_WRITE, 9, 0, 64, 0);
    task(&sd, 6, calls.touch, io, 3, NULL, 0, d02, 2, 0, 0);
    chunk(&sd, 6, 0, 0, 256, true, 0);
    chunk(&sd, 6, 2, 0, 256, false, 0);
    chunk(&sd, 6, 2, 256, 256, true, FUZZ_OP_WAIT);
    control(&sd, 7, WIRE_CTRL_BUFFER_READ, 9, 0, 64, FUZZ_OP_WAIT);
    goodbye(&sd);
    fuzz_seed_write(&sd, dir, "no_chips");

    /* The use-after-free of issue 14: a TASK announcing data in buffer 7,
     * BUFFER_RELEASE 7, then the data. */
    hello(&sd, 1, 0);
    task(&sd, 1, calls.touch, &in7, 1, NULL, 0, d0, 1, 0, 0);
    control(&sd, 2, WIRE_CTRL_BUFFER_RELEASE, 7, 0, 0, FUZZ_OP_WAIT);
    chunk(&sd, 1, 0, 0, 64, true, FUZZ_OP_WAIT);
    goodbye(&sd);
    fuzz_seed_write(&sd, dir, "release_before_chunk");

    /* Its variant: a new buffer of the same size in between. */
    hello(&sd, 1, 0);
    task(&sd, 1, calls.touch, &in7, 1, NULL, 0, d0, 1, 0, 0);
    control(&sd, 2, WIRE_CTRL_BUFFER_RELEASE, 7, 0, 0, 0);
    control(&sd, 3, WIRE_CTRL_BUFFER_CREATE, 8, 0, 4096, 0);
    chunk(&sd, 1, 0, 0, 64, true, FUZZ_OP_WAIT);
    control(&sd, 4, WIRE_CTRL_BUFFER_RELEASE, 7, 0, 0, FUZZ_OP_WAIT);
    goodbye(&sd);
    fuzz_seed_write(&sd, dir, "release_create_chunk");

    /* A whole exchange on two chips: resident buffer 1 and 3, two data
     * tensors in chunks, kernels on chip 1, reads and releases. */
    hello(&sd, 2, 0);
    control(&sd, 1, WIRE_CTRL_BUFFER_CREATE, 1, 0, 4096, 0);
    control(&sd, 2, WIRE_CTRL_BUFFER_WRITE, 1, 64, 64, 0);
    control(&sd, 3, WIRE_CTRL_BUFFER_CREATE, 3, 0, 512, 0);
    task(&sd, 4, calls.touch, io, 3, sc, 2, d02, 2, 0, 0);
    chunk(&sd, 4, 0, 0, 200, false, 0);
    chunk(&sd, 4, 0, 200, 56, true, 0);
    chunk(&sd, 4, 2, 0, 256, false, 0);
    chunk(&sd, 4, 2, 256, 256, true, FUZZ_OP_WAIT);
    heartbeat(&sd);
    control(&sd, 5, WIRE_CTRL_PING, 0, 0, 0, FUZZ_OP_WAIT);
    control(&sd, 6, WIRE_CTRL_BUFFER_READ, 1, 0, 128, FUZZ_OP_WAIT);
    control(&sd, 7, WIRE_CTRL_BUFFER_RELEASE, 1, 0, 0, 0);
    control(&sd, 8, WIRE_CTRL_BUFFER_RELEASE, 2, 0, 0, 0);
    control(&sd, 9, WIRE_CTRL_BUFFER_RELEASE, 3, 0, 0, FUZZ_OP_WAIT);
    goodbye(&sd);
    fuzz_seed_write(&sd, dir, "task_two_chips");

    /* Tasks without data, one failing, one with a deadline, one unknown
     * callable and one for a chip of the node (refused) whose announced
     * data is read and dropped. */
    hello(&sd, 1, 1);
    task(&sd, 1, calls.noop, io + 1, 1, NULL, 0, NULL, 0, 0, 0);
    task(&sd, 2, calls.fail, io + 1, 1, NULL, 0, NULL, 0, 0, 0);
    task(&sd, 3, calls.touch, io + 1, 1, sc, 1, NULL, 0, 500, FUZZ_OP_WAIT);
    {
        strata_callable none = calls.noop;

        none.digest[0] ^= 0xff;
        task(&sd, 4, none, &in7, 1, NULL, 0, d0, 1, 0, 0);
        chunk(&sd, 4, 0, 0, 64, true, FUZZ_OP_WAIT);
    }
    task_to(&sd, 6, calls.noop, &in7, 1, NULL, 0, d0, 1, 0, 0,
            WIRE_TARGET_CHIP);
    chunk(&sd, 6, 0, 0, 64, true, FUZZ_OP_WAIT);
    control(&sd, 5, WIRE_CTRL_CANCEL, 3, 0, 0, FUZZ_OP_WAIT);
    goodbye(&sd);
    fuzz_seed_write(&sd, dir, "tasks_mixed");

    /* Runs past their deadline that still write their buffers, which
     * are released meanwhile and at the end. */
    hello(&sd, 0, 0);
    control(&sd, 1, WIRE_CTRL_BUFFER_CREATE, 1, 0, 4096, 0);
    task(&sd, 2, calls.late, io + 1, 1, ms30, 1, NULL, 0, 1, FUZZ_OP_WAIT);
    control(&sd, 3, WIRE_CTRL_BUFFER_RELEASE, 1, 0, 0, FUZZ_OP_WAIT);
    task(&sd, 4, calls.late, &in7, 1, ms30, 1, d0, 1, 1, 0);
    chunk(&sd, 4, 0, 0, 64, true, FUZZ_OP_WAIT);
    control(&sd, 5, WIRE_CTRL_BUFFER_RELEASE, 7, 0, 0, FUZZ_OP_WAIT);
    goodbye(&sd);
    fuzz_seed_write(&sd, dir, "past_deadline");

    /* Chunks out of turn: the session drops the peer. */
    hello(&sd, 1, 0);
    task(&sd, 1, calls.touch, io, 3, NULL, 0, d02, 2, 0, 0);
    chunk(&sd, 1, 2, 0, 256, true, FUZZ_OP_WAIT);
    goodbye(&sd);
    fuzz_seed_write(&sd, dir, "chunk_out_of_turn");

    /* Buffer controls at their edges. */
    hello(&sd, 1, 0);
    control(&sd, 1, WIRE_CTRL_BUFFER_CREATE, 5, 0, 4096, 0);
    control(&sd, 2, WIRE_CTRL_BUFFER_CREATE, 5, 0, 4096, 0);
    control(&sd, 3, WIRE_CTRL_BUFFER_WRITE, 5, 4090, 16, 0);
    control(&sd, 4, WIRE_CTRL_BUFFER_READ, 5, 4000, 96, 0);
    control(&sd, 5, WIRE_CTRL_BUFFER_READ, 6, 0, 1, 0);
    control(&sd, 6, WIRE_CTRL_BUFFER_RELEASE, 6, 0, 0, 0);
    control(&sd, 7, WIRE_CTRL_BUFFER_RELEASE, 5, 0, 0, 0);
    control(&sd, 8, WIRE_CTRL_BUFFER_RELEASE, 5, 0, 0, FUZZ_OP_WAIT);
    goodbye(&sd);
    fuzz_seed_write(&sd, dir, "buffer_controls");

    /* Before HELLO, and a second HELLO. */
    heartbeat(&sd);
    hello(&sd, 1, 0);
    fuzz_seed_write(&sd, dir, "before_hello");
    hello(&sd, 1, 0);
    hello(&sd, 1, 0);
    fuzz_seed_write(&sd, dir, "second_hello");

    /* Global domain commands through the session (a pool thread). */
    hello(&sd, 2, 0);
    fuzz_seed_comm_init(&sd, 0, 1, FUZZ_OP_WAIT);
    fuzz_seed_domain_cmd(&sd, 1, WIRE_PHASE_PREPARE_EXPORT, 1, 1, false,
                         FUZZ_OP_WAIT);
    fuzz_seed_window(&sd, 2, WIRE_CTRL_WINDOW_WRITE, 1, 1, 128, 256, 0);
    fuzz_seed_window(&sd, 3, WIRE_CTRL_WINDOW_READ, 1, 0, 0, 64, 0);
    fuzz_seed_domain_cmd(&sd, 4, WIRE_PHASE_ABORT, 1, 1, false, FUZZ_OP_WAIT);
    goodbye(&sd);
    fuzz_seed_write(&sd, dir, "domain_commands");

    /* A frame header cut short, after a good start. */
    hello(&sd, 1, 0);
    fuzz_seed_bytes(&sd, 0, "STRA\x01\x06\x00", 7);
    fuzz_seed_write(&sd, dir, "raw_truncated");

    wire_buf_fini(&sd.b);
    printf("fuzz_session: seeds written to %s\n", dir);
}
