/* libFuzzer target: the L4 (parent) side of a remote node's link, played
 * by the input as the node: every frame a node sends (worker/remote.c,
 * on_msg: HELLO_REPLY, COMPLETION, CONTROL_REPLY, DOMAIN_REPLY,
 * DATA_CHUNK, TRACE, HEARTBEAT, GOODBYE), the staging of the replies to
 * node commands (stage_reply, a batch's several replies) and what reads
 * them (domain/global: the batch's reply_frame/check_phase/judge, the
 * phases, COMM_INIT; worker/rbuffer.c: remote buffers and window copies).
 *
 * Each input gets a fresh level-4 worker in this process with one remote
 * node of 2 chips, plaintext on loopback (strata_worker_add_remote_worker,
 * insecure): its endpoint is a listener of the harness, so the L4 dials,
 * sends HELLO and reads exactly as from a strata-node. A thread of the
 * harness accepts and plays the node: the input's records (the format of
 * fuzz_records.h; op | 0x80: first wait until the L4 has been quiet for
 * QUIET_S), while the L4 (this thread) runs the script (run_script):
 *   a remote buffer: BUFFER_CREATE, BUFFER_WRITE, BUFFER_READ;
 *   run 1: a TASK on the node with a host input, a host output and the
 *     remote buffer (in a scope), then a global domain over both chips
 *     (COMM_INIT, PREPARE_EXPORT, IMPORT, COMMIT), a WINDOW_WRITE and a
 *     WINDOW_READ; its fence ABORTs the domain;
 *   run 2: a second domain, kept past the fence: PREPARE_EXPORT, IMPORT
 *     and COMMIT as one batch when the node granted ORDERED_DOMAIN_CMDS
 *     and named the first domain's windows as predicted, else phase by
 *     phase; then strata_global_domain_release (ABORT, waited for);
 *   the buffers released; strata_worker_destroy (GOODBYE).
 * Each step runs whatever the earlier ones returned.
 *
 * Rewrites, so that an input can say what it cannot know (ids the process
 * draws, names that hold pids):
 * - a reply's request id k in 1..MAX_REQS is the id of the k-th request
 *   the L4 sent on the link (TASK, CONTROL, COMM_INIT, DOMAIN_CMD; each
 *   frame of a batch counts), waited for (WAIT_BUDGET_S per input);
 * - in a DOMAIN_REPLY to a DOMAIN_CMD so named, domain id 1 is the
 *   command's (ids are drawn per process, never 0), and a descriptor
 *   whose handle is "=" gets the window name and mapping size the L4
 *   predicts for that rank (after the cluster id of its COMM_INIT), as
 *   in fuzz_gnode;
 * - in HELLO_REPLY, a node_name or boot_id "here" is this host's (a sim
 *   domain needs its nodes on the L4's host), and the pid is always this
 *   process's: the L4 unlinks window names after a lost node's pid
 *   (gdomain.c, unlink_dead_exchange), so no input may name another
 *   process.
 * Checks: the L4 sends well-formed frames only, HELLO first; each run
 * ends within RUN_S; every call returns a known strata_err (destroy too);
 * the L4 closes the link by the end of destroy; and no fd, child process
 * or /dev/shm name of this process is left.
 *
 * FUZZ_TRACE=1 prints every frame both ways and each step's result;
 * FUZZ_WRITE_SEEDS=DIR writes the seed corpus (fuzz_l4_seeds.c) to DIR
 * and exits. */
#define _GNU_SOURCE /* pthread_timedjoin_np */
#include "fuzz_l4_link.h"
#include "base/hostid.h"
#include "chip/chip.h"
#include "domain/exchange.h"
#include "fuzz_leaks.h"
#include "fuzz_module.h"
#include "fuzz_peer.h"
#include "fuzz_records.h"
#include "gview.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NODE_CHIPS FUZZ_L4_CHIPS
#define MAX_REQS 64       /* requests of the L4 an input can name */
#define MAX_PREDICT 16    /* descriptors of a reply rewritten */
#define ACCEPT_S 10.0     /* init to the L4's connection */
#define WAIT_BUDGET_S 2.0 /* an input's waits for requests, in all */
#define QUIET_S 0.05      /* op | 0x80: the L4 sent nothing this long */
#define IDLE_S 0.15       /* after the input: the L4 waits for nothing */
#define END_S 10.0        /* the node's EOF to the L4's (its destroy) */
#define RUN_S 20.0        /* one run of the script */
#define HERE FUZZ_L4_HERE

/* Reports what went wrong and aborts: libFuzzer keeps the input. */
#define die(...)                                                               \
    do {                                                                       \
        fprintf(stderr, "fuzz_l4_link: ");                                     \
        fprintf(stderr, __VA_ARGS__);                                          \
        fprintf(stderr, "\n");                                                 \
        abort();                                                               \
    } while (0)

static bool trace; /* FUZZ_TRACE=1 */
static struct fuzz_callables calls;
static struct base_host_id host;

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- the node's end, on its own thread ------------------------------- */

/* One request the L4 sent, in order. */
struct req {
    uint64_t id;
    unsigned type; /* TASK, CONTROL, COMM_INIT or DOMAIN_CMD */
    uint64_t domain_id, window_size;
    uint32_t n; /* the domain's ranks */
};

struct peer {
    int listen_fd, fd;
    const uint8_t *data; /* the input */
    size_t size;
    pthread_t th;
    struct wire_buf in; /* bytes from the L4, not yet a whole frame */
    struct req reqs[MAX_REQS];
    unsigned nreqs; /* recorded in reqs (the first MAX_REQS) */
    bool hello, goodbye, eof, broken;
    bool lingered;       /* the L4 kept the link open END_S after our EOF */
    uint64_t cluster_id; /* of the L4's COMM_INIT */
    double last_rx;      /* when the L4 last sent a frame (no HEARTBEAT) */
    double wait_left;    /* of WAIT_BUDGET_S */
    int stop;            /* set by the L4's thread after destroy (atomic) */
};

static void note_request(struct peer *p, const struct wire_msg *m)
{
    struct req q;

    memset(&q, 0, sizeof(q));
    q.type = m->type;
    switch (m->type) {
    case WIRE_MSG_TASK:
        q.id = m->u.task.request_id;
        break;
    case WIRE_MSG_CONTROL:
        q.id = m->u.control.request_id;
        break;
    case WIRE_MSG_COMM_INIT:
        q.id = m->u.comm_init.request_id;
        p->cluster_id = m->u.comm_init.cluster_id;
        break;
    case WIRE_MSG_DOMAIN_CMD:
        q.id = m->u.domain_cmd.request_id;
        q.domain_id = m->u.domain_cmd.domain_id;
        q.window_size = m->u.domain_cmd.window_size;
        q.n = (uint32_t)m->u.domain_cmd.num_members;
        break;
    default:
        return;
    }
    if (p->nreqs < MAX_REQS)
        p->reqs[p->nreqs++] = q;
}

/* FUZZ_TRACE: a frame from the L4 (p: the requests counted so far) or
 * to it (p NULL); (phase, op or error). */
static void trace_frame(const char *dir, const struct wire_msg *m,
                        const struct peer *p)
{
    uint64_t id = 0;
    unsigned detail = 0;

    if (!trace || m->type == WIRE_MSG_HEARTBEAT)
        return;
    switch (m->type) {
    case WIRE_MSG_TASK:
        id = m->u.task.request_id;
        break;
    case WIRE_MSG_CONTROL:
        id = m->u.control.request_id;
        detail = m->u.control.op;
        break;
    case WIRE_MSG_COMM_INIT:
        id = m->u.comm_init.request_id;
        break;
    case WIRE_MSG_DOMAIN_CMD:
        id = m->u.domain_cmd.request_id;
        detail = m->u.domain_cmd.phase;
        break;
    case WIRE_MSG_COMPLETION:
        id = m->u.completion.request_id;
        detail = (unsigned)m->u.completion.error;
        break;
    case WIRE_MSG_CONTROL_REPLY:
        id = m->u.control_reply.request_id;
        detail = (unsigned)m->u.control_reply.error;
        break;
    case WIRE_MSG_DOMAIN_REPLY:
        id = m->u.domain_reply.request_id;
        detail = m->u.domain_reply.phase;
        break;
    case WIRE_MSG_DATA_CHUNK:
        id = m->u.data_chunk.request_id;
        break;
    case WIRE_MSG_TRACE:
        id = m->u.trace.request_id;
        break;
    default:
        break;
    }
    fprintf(stderr, "fuzz_l4_link: %s %s id %llu (%u)", dir,
            wire_msg_name(m->type), (unsigned long long)id, detail);
    if (p)
        fprintf(stderr, ", requests so far %u", p->nreqs);
    fprintf(stderr, "\n");
}

/* One frame the L4 sent: HELLO first, and only once. */
static void peer_frame(struct wire_msg *m, void *arg)
{
    struct peer *p = arg;

    if (p->hello == (m->type == WIRE_MSG_HELLO))
        die("the L4 sent %s %s HELLO", wire_msg_name(m->type),
            p->hello ? "after" : "before");
    p->hello = true;
    p->goodbye |= m->type == WIRE_MSG_GOODBYE;
    if (m->type != WIRE_MSG_HEARTBEAT)
        p->last_rx = now_s();
    note_request(p, m);
    trace_frame("L4 ->", m, p);
}

/* Reads what the L4 sent, waiting up to ms for the first byte. */
static void peer_pump(struct peer *p, int ms)
{
    int got = fuzz_peer_recv(p->fd, &p->in, &p->eof, ms);

    if (got < 0)
        die("%s", "out of memory");
    if (got > 0) {
        const char *bad = fuzz_peer_frames(&p->in, peer_frame, p);

        if (bad)
            die("the L4 sent %s: %s", bad, strata_errmsg());
    }
}

static void peer_write(struct peer *p, const uint8_t *d, size_t n)
{
    while (n > 0 && !p->broken) {
        struct pollfd q = {p->fd, POLLOUT | (p->eof ? 0 : POLLIN), 0};
        ssize_t r;

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
        } else if (r < 0 && errno != EAGAIN && errno != EINTR) {
            p->broken = true;
        }
    }
}

/* Pumps until done(p) holds, the L4 hangs up or the input's wait budget
 * is spent. */
static void peer_wait(struct peer *p, bool (*done)(const struct peer *, void *),
                      void *arg)
{
    while (!p->eof && p->wait_left > 0 && !done(p, arg)) {
        double t = now_s();

        peer_pump(p, 10);
        p->wait_left -= now_s() - t;
    }
}

static bool has_requests(const struct peer *p, void *arg)
{
    return p->nreqs >= *(unsigned *)arg;
}

static bool has_hello(const struct peer *p, void *arg)
{
    (void)arg;
    return p->hello;
}

static bool is_quiet(const struct peer *p, void *arg)
{
    (void)arg;
    return now_s() - p->last_rx >= QUIET_S;
}

/* The request an input's id k names (the L4's k-th), waited for; NULL
 * when k names none or the L4 has not sent it. */
static const struct req *ref(struct peer *p, uint64_t k)
{
    unsigned want = (unsigned)k;

    if (k < 1 || k > MAX_REQS)
        return NULL;
    peer_wait(p, has_requests, &want);
    return want <= p->nreqs ? &p->reqs[want - 1] : NULL;
}

/* The descriptors of a PREPARE_EXPORT reply to q, those with handle "="
 * named and sized as the L4 predicts them (gdomain_batch.c). */
static void predict(const struct peer *p, const struct req *q,
                    struct wire_domain_reply *d)
{
    static struct wire_descriptor descs[MAX_PREDICT];
    static char names[MAX_PREDICT][WIRE_NAME_MAX + 1];
    const struct chip_backend_ops *ops = chip_backend_find("sim");

    if (!ops || !ops->host_window_name || d->num_descriptors > MAX_PREDICT)
        return;
    for (size_t i = 0; i < d->num_descriptors; i++) {
        struct chip_window_req w =
            gwin_req(p->cluster_id, d->domain_id, d->descriptors[i].domain_rank,
                     q->n, q->window_size);

        descs[i] = d->descriptors[i];
        if (strcmp(descs[i].handle, "=") != 0)
            continue;
        ops->host_window_name(&w, names[i], sizeof(names[i]));
        descs[i].handle = names[i];
        descs[i].mapping_size = domain_adopt_mapping(ops, q->window_size, q->n);
    }
    d->descriptors = descs;
}

static void rewrite_id(struct peer *p, uint64_t *id)
{
    const struct req *q = ref(p, *id);

    if (q)
        *id = q->id;
}

static void rewrite_domain_reply(struct peer *p, struct wire_domain_reply *d)
{
    const struct req *q = ref(p, d->request_id);

    if (!q)
        return;
    d->request_id = q->id;
    if (q->type != WIRE_MSG_DOMAIN_CMD)
        return;
    if (d->domain_id == 1)
        d->domain_id = q->domain_id;
    predict(p, q, d);
}

static void rewrite_hello_reply(struct wire_hello_reply *h)
{
    h->pid = (uint32_t)getpid();
    if (h->node_name && strcmp(h->node_name, HERE) == 0 && host.name[0])
        h->node_name = host.name;
    if (h->boot_id && strcmp(h->boot_id, HERE) == 0 && host.boot[0])
        h->boot_id = host.boot;
}

/* Applies the rewrites to a record whose body decodes: packed again into
 * *b, which r then points into. */
static void rewrite(struct peer *p, struct fuzz_record *r, struct wire_buf *b)
{
    struct wire_msg m;

    if (!r->type || wire_msg_unpack(r->type, r->payload, r->len, &m))
        return;
    switch (m.type) {
    case WIRE_MSG_HELLO_REPLY:
        rewrite_hello_reply(&m.u.hello_reply);
        break;
    case WIRE_MSG_COMPLETION:
        rewrite_id(p, &m.u.completion.request_id);
        break;
    case WIRE_MSG_CONTROL_REPLY:
        rewrite_id(p, &m.u.control_reply.request_id);
        break;
    case WIRE_MSG_DATA_CHUNK:
        rewrite_id(p, &m.u.data_chunk.request_id);
        break;
    case WIRE_MSG_TRACE:
        rewrite_id(p, &m.u.trace.request_id);
        break;
    case WIRE_MSG_DOMAIN_REPLY:
        rewrite_domain_reply(p, &m.u.domain_reply);
        break;
    default:
        break;
    }
    trace_frame("-> L4", &m, NULL);
    if (wire_msg_pack(&m, b) == STRATA_OK) {
        r->payload = b->data + WIRE_FRAME_HEADER_SIZE;
        r->len = b->len - WIRE_FRAME_HEADER_SIZE;
    }
    wire_msg_free(&m);
}

/* Sends one record: its frame header first, unless raw. */
static void play(struct peer *p, const struct fuzz_record *rec)
{
    struct fuzz_record r = *rec;
    struct wire_buf b;

    if (r.wait)
        peer_wait(p, is_quiet, NULL);
    if (r.type == WIRE_MSG_HELLO_REPLY)
        peer_wait(p, has_hello, NULL);
    wire_buf_init(&b);
    rewrite(p, &r, &b);
    if (r.type) {
        struct wire_frame_header h = {WIRE_FRAME_VERSION, (uint8_t)r.type, 0,
                                      (uint32_t)r.len};
        uint8_t head[WIRE_FRAME_HEADER_SIZE];

        wire_frame_header_pack(&h, head);
        peer_write(p, head, sizeof(head));
    }
    peer_write(p, r.payload, r.len);
    wire_buf_fini(&b);
}

static bool stopped(struct peer *p)
{
    return __atomic_load_n(&p->stop, __ATOMIC_ACQUIRE) != 0;
}

/* Takes the L4's connection; false if none came. */
static bool peer_accept(struct peer *p)
{
    double end = now_s() + ACCEPT_S;

    while (now_s() < end && !stopped(p)) {
        struct pollfd q = {p->listen_fd, POLLIN, 0};

        if (poll(&q, 1, 50) <= 0)
            continue;
        p->fd = accept4(p->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (p->fd >= 0) {
            int one = 1;

            /* A frame's header and body go in two writes: without this,
             * the body waits for the L4's delayed ACK (40 ms). */
            (void)setsockopt(p->fd, IPPROTO_TCP, TCP_NODELAY, &one,
                             sizeof(one));
            return true;
        }
    }
    return false;
}

static void *peer_main(void *arg)
{
    struct peer *p = arg;
    const uint8_t *data = p->data;
    size_t size = p->size;
    struct fuzz_record r;
    double end;

    if (!peer_accept(p))
        return NULL;
    p->last_rx = now_s();
    while (!p->eof && !p->broken && fuzz_record_next(&data, &size, &r))
        play(p, &r);
    /* The input is over: once the L4 waits for nothing more (or says
     * GOODBYE), the node hangs up, and the L4 must close the link by the
     * end of its destroy. */
    while (!p->eof && !p->goodbye && !stopped(p) &&
           now_s() - p->last_rx < IDLE_S)
        peer_pump(p, 20);
    if (trace)
        fprintf(stderr, "fuzz_l4_link: %.3f the node hangs up\n", now_s());
    shutdown(p->fd, SHUT_WR);
    end = now_s() + END_S;
    while (!p->eof && now_s() < end)
        peer_pump(p, 50);
    p->lingered = !p->eof;
    return NULL;
}

/* A listener on 127.0.0.1, any port: the node's endpoint, "host:port". */
static int listen_loopback(char *endpoint, size_t cap)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        listen(fd, 1) != 0 || getsockname(fd, (struct sockaddr *)&a, &len))
        die("a loopback listener: %s", strerror(errno));
    snprintf(endpoint, cap, "127.0.0.1:%u", (unsigned)ntohs(a.sin_port));
    return fd;
}

/* ---- the L4, on the fuzzer's thread ---------------------------------- */

struct script {
    int node;
    strata_buffer *in, *out, *rb;
    strata_global_domain *kept; /* run 2's, retained past its fence */
};

/* Every result must be a known error; returns err. */
static strata_err check(const char *step, strata_err err)
{
    if (strcmp(strata_strerror(err), "unknown error") == 0)
        die("%s returned %d, not a strata_err", step, (int)err);
    if (trace)
        fprintf(stderr, "fuzz_l4_link: %.3f %s: %s %s\n", now_s(), step,
                strata_errname(err), err ? strata_errmsg() : "");
    return err;
}

static strata_err add_u8(strata_args *a, strata_buffer *b, strata_tag tag)
{
    size_t n = 64;

    return b ? strata_args_add_tensor(a, b, 0, STRATA_U8, 1, &n, tag)
             : STRATA_OK;
}

static strata_err task(strata_orch *o, const struct script *sc)
{
    strata_args *a = NULL;
    strata_err err = strata_args_create(&a);

    if (!err)
        err = add_u8(a, sc->in, STRATA_IN);
    if (!err)
        err = add_u8(a, sc->out, STRATA_OUT);
    if (!err)
        err = add_u8(a, sc->rb, STRATA_INOUT);
    if (!err)
        err = strata_orch_scope_begin(o);
    if (!err) {
        (void)check("submit",
                    strata_orch_submit_next_level(o, calls.touch, a, sc->node));
        err = check("scope_end", strata_orch_scope_end(o));
    }
    strata_args_destroy(a);
    return err;
}

static strata_err allocate(strata_orch *o, const struct script *sc, bool retain,
                           strata_global_domain **out)
{
    const strata_global_member members[NODE_CHIPS] = {{sc->node, 0},
                                                      {sc->node, 1}};
    static const strata_comm_buffer_spec bufs[1] = {
        {"x", STRATA_F32, 256, 1024}};
    strata_global_domain_spec spec = {
        .name = "l4link",
        .members = members,
        .num_members = NODE_CHIPS,
        .window_size = 4096,
        .buffers = bufs,
        .num_buffers = 1,
        .retain_after_run = retain,
    };

    return check("allocate_global_domain",
                 strata_orch_allocate_global_domain(o, &spec, out));
}

static strata_err run1(strata_orch *o, const strata_args *a, void *user)
{
    const struct script *sc = user;
    strata_global_domain *g = NULL;
    uint8_t bytes[64] = {1, 2, 3};

    (void)a;
    (void)task(o, sc);
    if (allocate(o, sc, false, &g) == STRATA_OK) {
        (void)check("copy_to_global_domain",
                    strata_orch_copy_to_global_domain(o, g, 1, "x", 0, bytes,
                                                      sizeof(bytes)));
        (void)check("copy_from_global_domain",
                    strata_orch_copy_from_global_domain(o, g, 0, NULL, 0, bytes,
                                                        sizeof(bytes)));
    }
    return STRATA_OK;
}

static strata_err run2(strata_orch *o, const strata_args *a, void *user)
{
    struct script *sc = user;

    (void)a;
    return allocate(o, sc, true, &sc->kept);
}

/* A run of fn, which must end within RUN_S. */
static void run(strata_worker *w, strata_orch_fn fn, struct script *sc,
                const char *step)
{
    strata_run *r = NULL;
    double t = now_s();
    char what[32];
    strata_err err;

    snprintf(what, sizeof(what), "submit %s", step);
    err = check(what, strata_worker_submit(w, fn, NULL, sc, &r));

    if (err)
        return;
    err = strata_run_wait(r, RUN_S);
    if (err == STRATA_ETIMEDOUT && now_s() - t >= RUN_S)
        die("%s did not end within %.0f s", step, RUN_S);
    (void)check(step, err);
    strata_run_free(r);
}

static void release(const char *step, strata_buffer *b)
{
    if (b)
        (void)check(step, strata_buffer_release(b));
}

/* What the L4 does with its node: see the top of the file. */
static void run_script(strata_worker *w, int node)
{
    struct script sc = {.node = node};
    uint8_t bytes[64] = {7, 8, 9};

    if (check("create_remote_buffer",
              strata_worker_create_remote_buffer(w, node, 4096, &sc.rb)) ==
        STRATA_OK) {
        (void)check("buffer_write",
                    strata_buffer_write(sc.rb, 0, bytes, sizeof(bytes)));
        (void)check("buffer_read",
                    strata_buffer_read(sc.rb, 0, bytes, sizeof(bytes)));
    }
    if (check("create_buffer", strata_worker_create_buffer(w, 64, &sc.in)) ||
        check("create_buffer", strata_worker_create_buffer(w, 64, &sc.out)))
        die("%s", "cannot create the host buffers");
    run(w, run1, &sc, "run 1");
    run(w, run2, &sc, "run 2");
    (void)check("global_domain_release", strata_global_domain_release(sc.kept));
    release("release remote buffer", sc.rb);
    release("release input", sc.in);
    release("release output", sc.out);
}

/* A fresh L4 whose one remote node is at endpoint; the script once it
 * started; then destroy. */
static void run_l4(const char *endpoint)
{
    static const int chips[NODE_CHIPS] = {0, 1};
    strata_remote_spec spec = {
        .endpoint = endpoint,
        .insecure = true,
        .chip_ids = chips,
        .num_chips = NODE_CHIPS,
    };
    strata_worker_config cfg;
    strata_worker *w = NULL;
    int node = -1;

    strata_worker_config_init(&cfg, 4);
    cfg.startup_timeout_s = ACCEPT_S;
    if (strata_worker_create(&cfg, &w) != STRATA_OK ||
        strata_worker_add_remote_worker(w, &spec, &node) != STRATA_OK)
        die("an L4 with a remote node: %s", strata_errmsg());
    if (check("init", strata_worker_init(w)) == STRATA_OK)
        run_script(w, node);
    (void)check("destroy", strata_worker_destroy(w));
}

/* ---- the target ------------------------------------------------------ */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *seeds = getenv("FUZZ_WRITE_SEEDS");

    (void)argc;
    (void)argv;
    /* Every lost node is a warning: too many lines to keep. */
    setenv("STRATA_LOG", "error", 0);
    trace = getenv("FUZZ_TRACE") && strcmp(getenv("FUZZ_TRACE"), "1") == 0;
    base_host_id(&host);
    if (fuzz_module_register(&calls) != 0)
        exit(1);
    if (seeds) {
        fuzz_l4_write_seeds(seeds);
        exit(0);
    }
    return 0;
}

/* The node's thread must end soon after the L4 is destroyed. */
static void join_peer(struct peer *p)
{
    struct timespec abs;

    __atomic_store_n(&p->stop, 1, __ATOMIC_RELEASE);
    clock_gettime(CLOCK_REALTIME, &abs);
    abs.tv_sec += (time_t)END_S + 5;
    if (pthread_timedjoin_np(p->th, NULL, &abs) != 0)
        die("%s", "the node's thread did not end after the L4's destroy");
}

static void check_children(void)
{
    double end = now_s() + 2.0;
    int st;

    if (waitpid(-1, &st, WNOHANG) == -1 && errno == ECHILD)
        return;
    while (fuzz_children() > 0 && now_s() < end) {
        struct timespec ts = {0, 10 * 1000 * 1000};

        nanosleep(&ts, NULL);
    }
    if (fuzz_children() > 0)
        die("%s", "the L4 left a child process behind");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct peer p;
    char endpoint[64];
    int fds = fuzz_count_fds();
    double t0 = now_s();

    memset(&p, 0, sizeof(p));
    p.fd = -1;
    p.data = data;
    p.size = size;
    p.wait_left = WAIT_BUDGET_S;
    p.listen_fd = listen_loopback(endpoint, sizeof(endpoint));
    if (pthread_create(&p.th, NULL, peer_main, &p) != 0)
        die("%s", "pthread_create");
    run_l4(endpoint);
    if (trace)
        fprintf(stderr, "fuzz_l4_link: destroyed after %.3f s\n", now_s() - t0);
    join_peer(&p);
    if (p.lingered)
        die("the L4 kept the link open %.0f s after the node hung up, and "
            "past its destroy",
            END_S);
    if (p.fd >= 0)
        close(p.fd);
    close(p.listen_fd);
    wire_buf_fini(&p.in);
    check_children();
    if (fuzz_shm_leftovers("fuzz_l4_link") > 0)
        die("%s", "the L4 left names in /dev/shm");
    if (fuzz_count_fds() != fds)
        die("%s", "the L4 left a file descriptor open");
    return 0;
}
