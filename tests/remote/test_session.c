/*
 * A session's protocol rules and limits, driven by a raw plaintext peer
 * that speaks frames to a real strata-node (--insecure on loopback), and
 * by real L4s against a PSK node that is stalled or slow to start:
 * - a buffer named by a task still receiving its input is pinned, and a
 *   release of an unknown buffer is an error;
 * - DATA_CHUNKs follow docs/wire.md exactly (one sequence per announced
 *   tensor, in order, the last flag where it belongs), else the session
 *   ends with the rule it broke in the log;
 * - a refused TASK's announced bytes are read and dropped;
 * - no frame precedes HELLO, and a node whose chips take longer than the
 *   heartbeat limit to start is not taken for dead;
 * - job threads, tasks in flight, queued replies and processes per
 *   session are bounded;
 * - domain commands sent back to back run, and are answered, in order.
 */
#include "limits_kit.h"
#include "node_launch.h"
#include "remote_kit.h"

#include "wire/args.h"
#include "wire/frame.h"
#include "wire/msg.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* RSS per byte the session holds: a ThreadSanitizer build's processes
 * count its shadow memory too. */
#if defined(__SANITIZE_THREAD__)
#define MEM_COST 3
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MEM_COST 3
#endif
#endif
#ifndef MEM_COST
#define MEM_COST 1
#endif

static struct rk_node plain, psk;

static int group_setup(void **state)
{
    (void)state;
    if (rk_register() != 0 || rk_node_start(&plain, RK_INSECURE, NULL) != 0 ||
        rk_node_start(&psk, RK_PSK, NULL) != 0)
        return -1;
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    int rc = rk_node_stop(&plain);
    rc |= rk_node_stop(&psk);
    return rc;
}

/* ---- a raw peer ---------------------------------------------------------- */

struct peer {
    int fd;
    uint8_t *buf; /* one frame body */
    size_t cap;
};

static void peer_send(struct peer *p, const struct wire_msg *m)
{
    struct wire_buf b;

    wire_buf_init(&b);
    assert_int_equal(wire_msg_pack(m, &b), STRATA_OK);
    assert_true(testutil_write_full(p->fd, b.data, b.len));
    wire_buf_fini(&b);
}

static bool read_full(int fd, void *dst, size_t n, double deadline)
{
    uint8_t *d = dst;

    while (n > 0) {
        struct pollfd q = {fd, POLLIN, 0};
        double left = deadline - testutil_now();
        ssize_t r;

        if (left <= 0 || poll(&q, 1, (int)(left * 1000) + 1) < 0)
            return false;
        if (!(q.revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        r = read(fd, d, n);
        if (r <= 0 && !(r < 0 && errno == EINTR))
            return false;
        if (r > 0) {
            d += r;
            n -= (size_t)r;
        }
    }
    return true;
}

/* The next frame other than a HEARTBEAT, decoded into m; false when the
 * session closed or nothing came within RK_WAIT_S. */
static bool peer_recv(struct peer *p, struct wire_msg *m)
{
    double deadline = testutil_now() + RK_WAIT_S;

    for (;;) {
        uint8_t head[WIRE_FRAME_HEADER_SIZE];
        struct wire_frame_header h;

        if (!read_full(p->fd, head, sizeof(head), deadline))
            return false;
        assert_int_equal(wire_frame_header_unpack(head, sizeof(head), &h),
                         STRATA_OK);
        if (h.body_len > p->cap) {
            p->buf = realloc(p->buf, h.body_len);
            assert_non_null(p->buf);
            p->cap = h.body_len;
        }
        if (!read_full(p->fd, p->buf, h.body_len, deadline))
            return false;
        if (h.type == WIRE_MSG_HEARTBEAT)
            continue;
        assert_int_equal(wire_msg_unpack(h.type, p->buf, h.body_len, m),
                         STRATA_OK);
        return true;
    }
}

static void peer_connect(struct peer *p, const struct rk_node *n)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)n->port)};

    memset(p, 0, sizeof(*p));
    p->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(p->fd >= 0);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(p->fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        fail_msg("connect to %s: %s", n->endpoint, strerror(errno));
}

/* HELLO for chips 0..nchips-1 and subs sub workers; returns the reply's
 * error (its message in *why when not NULL). */
static strata_err peer_hello(struct peer *p, size_t nchips, uint32_t subs,
                             char *why, size_t cap)
{
    static const uint32_t ids[4] = {0, 1, 2, 3};
    struct wire_msg m = {.type = WIRE_MSG_HELLO};
    struct wire_msg r;
    strata_err err;

    m.u.hello.proto_min = WIRE_PROTO_MIN;
    m.u.hello.proto_max = WIRE_PROTO_MAX;
    m.u.hello.capabilities = WIRE_CAP_DATA_CHUNKS | WIRE_CAP_REMOTE_BUFFERS;
    m.u.hello.node_name = "raw-peer";
    m.u.hello.pid = (uint32_t)getpid();
    m.u.hello.platform = "sim";
    m.u.hello.chip_ids = ids;
    m.u.hello.num_chips = nchips;
    m.u.hello.num_sub_workers = subs;
    m.u.hello.comm_profile = "sim";
    peer_send(p, &m);
    assert_true(peer_recv(p, &r));
    assert_int_equal(r.type, WIRE_MSG_HELLO_REPLY);
    err = r.u.hello_reply.error;
    if (why)
        snprintf(why, cap, "%s", r.u.hello_reply.message);
    wire_msg_free(&r);
    return err;
}

static void peer_close(struct peer *p)
{
    struct wire_msg m = {.type = WIRE_MSG_GOODBYE};

    m.u.goodbye.message = "done";
    peer_send(p, &m);
    close(p->fd);
    free(p->buf);
    p->fd = -1;
}

/* True once the session hung up on us within RK_WAIT_S. */
static bool peer_dropped(struct peer *p)
{
    struct wire_msg m;

    while (peer_recv(p, &m))
        wire_msg_free(&m);
    close(p->fd);
    free(p->buf);
    p->fd = -1;
    return true;
}

/* Args of tensors in buffers ids[i] of sizes[i] bytes, each tensor the
 * first nbytes[i] bytes, tag tags[i]; scalars after. */
struct targs {
    uint8_t blob[WIRE_ARGS_MAX];
    size_t len;
};

static void targs_make(struct targs *a, size_t n, const uint64_t *ids,
                       const uint64_t *sizes, const uint64_t *nbytes,
                       const uint8_t *tags, size_t nscalars,
                       const uint64_t *scalars)
{
    struct wire_args_header h = {(uint32_t)n, (uint32_t)nscalars};
    struct wire_tensor t[4];

    memset(t, 0, sizeof(t));
    for (size_t k = 0; k < n; k++) {
        t[k].buffer_id = ids[k];
        t[k].buffer_size = sizes[k];
        t[k].nbytes = nbytes[k];
        t[k].shape[0] = nbytes[k];
        t[k].dtype = STRATA_U8;
        t[k].ndims = 1;
        t[k].tag = tags[k];
        t[k].creator = 1;
    }
    memcpy(a->blob, &h, sizeof(h));
    memcpy(a->blob + sizeof(h), t, n * sizeof(t[0]));
    if (nscalars) /* scalars may be NULL then */
        memcpy(a->blob + sizeof(h) + n * sizeof(t[0]), scalars,
               nscalars * sizeof(uint64_t));
    a->len = sizeof(h) + n * sizeof(t[0]) + nscalars * sizeof(uint64_t);
}

static void send_task_to(struct peer *p, uint64_t req, const strata_callable *c,
                         const struct targs *a, const uint32_t *data,
                         size_t ndata, uint8_t target, uint32_t chip)
{
    struct wire_msg m = {.type = WIRE_MSG_TASK};

    m.u.task.request_id = req;
    memcpy(m.u.task.digest, c->digest, sizeof(m.u.task.digest));
    m.u.task.args = a->blob;
    m.u.task.args_len = a->len;
    m.u.task.target = target;
    m.u.task.chip = chip;
    m.u.task.data_tensors = data;
    m.u.task.num_data_tensors = ndata;
    peer_send(p, &m);
}

static void send_task(struct peer *p, uint64_t req, const strata_callable *c,
                      const struct targs *a, const uint32_t *data, size_t ndata)
{
    send_task_to(p, req, c, a, data, ndata, WIRE_TARGET_WORKER, 0);
}

static void send_chunk(struct peer *p, uint64_t req, uint32_t tensor,
                       uint64_t off, size_t len, bool last)
{
    static const uint8_t bytes[256];
    struct wire_msg m = {.type = WIRE_MSG_DATA_CHUNK};

    assert_true(len <= sizeof(bytes));
    m.u.data_chunk.request_id = req;
    m.u.data_chunk.tensor = tensor;
    m.u.data_chunk.offset = off;
    m.u.data_chunk.data = bytes;
    m.u.data_chunk.len = len;
    m.u.data_chunk.last = last;
    peer_send(p, &m);
}

static void send_control(struct peer *p, uint64_t req, unsigned op,
                         uint64_t buffer_id, uint64_t offset, uint64_t nbytes)
{
    struct wire_msg m = {.type = WIRE_MSG_CONTROL};

    m.u.control.request_id = req;
    m.u.control.op = op;
    if (op != WIRE_CTRL_PING) {
        m.u.control.operands.present = WIRE_OPND_BIT(WIRE_OPND_BUFFER_ID);
        m.u.control.operands.buffer_id = buffer_id;
    }
    if (op == WIRE_CTRL_BUFFER_CREATE || op == WIRE_CTRL_BUFFER_READ) {
        m.u.control.operands.present |= WIRE_OPND_BIT(WIRE_OPND_NBYTES);
        m.u.control.operands.nbytes = nbytes;
    }
    if (op == WIRE_CTRL_BUFFER_READ) {
        m.u.control.operands.present |= WIRE_OPND_BIT(WIRE_OPND_OFFSET);
        m.u.control.operands.offset = offset;
    }
    peer_send(p, &m);
}

/* The reply to request req: its error (message into why). */
static strata_err expect_reply(struct peer *p, uint64_t req, char *why,
                               size_t cap)
{
    struct wire_msg m;
    strata_err err = STRATA_OK;
    uint64_t got = 0;

    if (!peer_recv(p, &m))
        fail_msg("no reply to request %llu", (unsigned long long)req);
    if (m.type == WIRE_MSG_CONTROL_REPLY) {
        got = m.u.control_reply.request_id;
        err = m.u.control_reply.error;
        if (why)
            snprintf(why, cap, "%s", m.u.control_reply.message);
    } else if (m.type == WIRE_MSG_COMPLETION) {
        got = m.u.completion.request_id;
        err = m.u.completion.error;
        if (why)
            snprintf(why, cap, "%s", m.u.completion.message);
    } else {
        fail_msg("unexpected %s", wire_msg_name(m.type));
    }
    wire_msg_free(&m);
    assert_int_equal(got, req);
    return err;
}

static void idle_after(struct rk_node *n, const testutil_snapshot *before)
{
    assert_true(rk_node_alive(n));
    if (!rk_node_wait_sessions(n, 0, RK_WAIT_S))
        fail_msg("sessions of %s still running", n->endpoint);
    testutil_assert_clean(before);
}

/* ---- pinning and releases ------------------------------------------------ */

/* The reported use-after-free: TASK naming buffer 7 with its bytes to
 * come, BUFFER_RELEASE 7, then the bytes. The release is refused while
 * the task waits; the task runs on its buffer; then the release works
 * once, and a second one names the unknown buffer. */
static void test_session_release_pinned_by_waiting_task(void **state)
{
    static const uint64_t id[1] = {7}, size[1] = {4096}, nb[1] = {64};
    static const uint8_t tag[1] = {STRATA_IN};
    static const uint32_t data[1] = {0};
    testutil_snapshot before;
    struct targs a;
    struct peer p;
    char why[STRATA_ERRMSG_MAX];

    (void)state;
    testutil_snapshot_take(&before);
    peer_connect(&p, &plain);
    assert_int_equal(peer_hello(&p, 1, 0, NULL, 0), STRATA_OK);
    targs_make(&a, 1, id, size, nb, tag, 0, NULL);
    send_task(&p, 1, &rk_o_noop, &a, data, 1);
    send_control(&p, 2, WIRE_CTRL_BUFFER_RELEASE, 7, 0, 0);
    assert_int_equal(expect_reply(&p, 2, why, sizeof(why)), STRATA_ESTATE);
    rk_assert_contains(why, "in flight");
    send_chunk(&p, 1, 0, 0, 64, true);
    assert_int_equal(expect_reply(&p, 1, why, sizeof(why)), STRATA_OK);
    send_control(&p, 3, WIRE_CTRL_BUFFER_RELEASE, 7, 0, 0);
    assert_int_equal(expect_reply(&p, 3, NULL, 0), STRATA_OK);
    send_control(&p, 4, WIRE_CTRL_BUFFER_RELEASE, 7, 0, 0);
    assert_int_equal(expect_reply(&p, 4, why, sizeof(why)), STRATA_ENOENT);
    rk_assert_contains(why, "no buffer 7");
    peer_close(&p);
    idle_after(&plain, &before);
}

/* A TASK refused at receipt (its buffer changed size) is answered at once;
 * the bytes it announced are read and dropped, and the session goes on. */
static void test_session_refused_task_bytes_dropped(void **state)
{
    static const uint64_t id[1] = {7}, small[1] = {4096}, big[1] = {8192};
    static const uint64_t nb[1] = {64};
    static const uint8_t tag[1] = {STRATA_IN};
    static const uint32_t data[1] = {0};
    testutil_snapshot before;
    struct targs a;
    struct peer p;
    char why[STRATA_ERRMSG_MAX];

    (void)state;
    testutil_snapshot_take(&before);
    peer_connect(&p, &plain);
    assert_int_equal(peer_hello(&p, 1, 0, NULL, 0), STRATA_OK);
    targs_make(&a, 1, id, small, nb, tag, 0, NULL);
    send_task(&p, 1, &rk_o_noop, &a, data, 1);
    send_chunk(&p, 1, 0, 0, 64, true);
    assert_int_equal(expect_reply(&p, 1, NULL, 0), STRATA_OK);
    targs_make(&a, 1, id, big, nb, tag, 0, NULL);
    send_task(&p, 2, &rk_o_noop, &a, data, 1);
    assert_int_equal(expect_reply(&p, 2, why, sizeof(why)), STRATA_EPROTO);
    rk_assert_contains(why, "changed size");
    send_chunk(&p, 2, 0, 0, 32, false);
    send_chunk(&p, 2, 0, 32, 32, true);
    send_control(&p, 3, WIRE_CTRL_PING, 0, 0, 0);
    assert_int_equal(expect_reply(&p, 3, NULL, 0), STRATA_OK);
    /* A task for one of the node's chips, or its sub workers, is not the
     * parent's to send: refused, its bytes dropped, the session goes on
     * (it used to run the orch callable anyway). */
    targs_make(&a, 1, id, small, nb, tag, 0, NULL);
    send_task_to(&p, 4, &rk_o_noop, &a, data, 1, WIRE_TARGET_CHIP, 999);
    assert_int_equal(expect_reply(&p, 4, why, sizeof(why)), STRATA_ENOTSUP);
    rk_assert_contains(why, "TASK target 2");
    send_chunk(&p, 4, 0, 0, 64, true);
    send_task_to(&p, 5, &rk_o_noop, &a, NULL, 0, WIRE_TARGET_SUB, 0);
    assert_int_equal(expect_reply(&p, 5, why, sizeof(why)), STRATA_ENOTSUP);
    send_control(&p, 6, WIRE_CTRL_PING, 0, 0, 0);
    assert_int_equal(expect_reply(&p, 6, NULL, 0), STRATA_OK);
    peer_close(&p);
    idle_after(&plain, &before);
}

/* ---- chunk accounting ---------------------------------------------------- */

struct chunk_case {
    const char *name;
    size_t ntensors; /* announced: tensors 0..ntensors-1, 64 bytes each */
    struct {
        uint64_t req;
        uint32_t tensor;
        uint64_t off;
        size_t len;
        bool last;
    } chunks[3];
    size_t nchunks;
    const char *log; /* the rule, as the session logs it */
};

static const struct chunk_case chunk_cases[] = {
    {"unannounced request", 1, {{9, 0, 0, 64, true}}, 1, "announced none"},
    {"tensor out of turn", 2, {{1, 1, 0, 64, true}}, 1, "out of turn"},
    {"gap", 1, {{1, 0, 8, 56, true}}, 1, "out of order"},
    {"overlap",
     1,
     {{1, 0, 0, 32, false}, {1, 0, 16, 48, true}},
     2,
     "out of order"},
    {"last too early", 1, {{1, 0, 0, 32, true}}, 1, "before its tensor's end"},
    {"end unflagged", 1, {{1, 0, 0, 64, false}}, 1, "unflagged"},
    {"past the end", 1, {{1, 0, 0, 128, true}}, 1, "outside its tensor"},
    {"after the last",
     1,
     {{1, 0, 0, 64, true}, {1, 0, 64, 0, true}},
     2,
     "announced none"},
};

static void test_session_chunk_rules(void **state)
{
    static const uint64_t id[2] = {7, 8}, size[2] = {4096, 4096};
    static const uint64_t nb[2] = {64, 64};
    static const uint8_t tag[2] = {STRATA_IN, STRATA_IN};
    static const uint32_t data[2] = {0, 1};
    testutil_snapshot before;

    (void)state;
    testutil_snapshot_take(&before);
    for (size_t i = 0; i < sizeof(chunk_cases) / sizeof(chunk_cases[0]); i++) {
        const struct chunk_case *c = &chunk_cases[i];
        struct targs a;
        struct peer p;

        print_message("  %s\n", c->name);
        peer_connect(&p, &plain);
        assert_int_equal(peer_hello(&p, 1, 0, NULL, 0), STRATA_OK);
        /* A long task keeps "after the last" from racing the run. */
        targs_make(&a, c->ntensors, id, size, nb, tag, 0, NULL);
        send_task(&p, 1, &rk_o_noop, &a, data, c->ntensors);
        for (size_t k = 0; k < c->nchunks; k++)
            send_chunk(&p, c->chunks[k].req, c->chunks[k].tensor,
                       c->chunks[k].off, c->chunks[k].len, c->chunks[k].last);
        assert_true(peer_dropped(&p));
        if (!rk_node_log_has(&plain, c->log, RK_WAIT_S)) {
            rk_node_print_log(&plain);
            fail_msg("%s: no \"%s\" in the log", c->name, c->log);
        }
        assert_true(rk_node_wait_sessions(&plain, 0, RK_WAIT_S));
    }
    idle_after(&plain, &before);
}

/* ---- limits -------------------------------------------------------------- */

static pid_t only_session(const struct rk_node *n)
{
    pid_t s[2];

    assert_int_equal(rk_node_sessions(n, s, 2), 1);
    return s[0];
}

static long proc_status(pid_t pid, const char *key)
{
    char path[64], line[256];
    size_t klen = strlen(key);
    long v = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    f = fopen(path, "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, key, klen) == 0 && line[klen] == ':')
            v = strtol(line + klen + 1, NULL, 10);
    fclose(f);
    return v;
}

/* The state letter of pid (R, S, D, ...), '?' when gone. */
static char proc_state(pid_t pid)
{
    char path[64], buf[512], *p;
    size_t n;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (!f)
        return '?';
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')');
    return p && p[1] && p[2] ? p[2] : '?';
}

/* 120 tasks that each hold a run (they queue on one chip): the session
 * stops reading at its job cap (64 by default), so it never has more than
 * about that many threads; every task still completes. */
static void test_session_threads_bounded(void **state)
{
    enum { N = 120 };
    static const uint64_t id[1] = {7}, size[1] = {4096};
    static const uint64_t nb[1] = {sizeof(struct rt_span)};
    static const uint8_t tag[1] = {STRATA_OUT};
    static const uint64_t sc[2] = {20, 0}; /* 20 ms on chip 0 */
    testutil_snapshot before;
    struct targs a;
    struct peer p;
    long peak = 0;
    pid_t sess;

    (void)state;
    testutil_snapshot_take(&before);
    peer_connect(&p, &plain);
    assert_int_equal(peer_hello(&p, 1, 0, NULL, 0), STRATA_OK);
    sess = only_session(&plain);
    send_control(&p, 1, WIRE_CTRL_BUFFER_CREATE, 7, 0, 4096);
    assert_int_equal(expect_reply(&p, 1, NULL, 0), STRATA_OK);
    targs_make(&a, 1, id, size, nb, tag, 2, sc);
    for (uint64_t r = 0; r < N; r++)
        send_task(&p, 100 + r, &rk_o_span, &a, NULL, 0);
    for (int done = 0; done < N; done++) {
        struct wire_msg m;
        long t = proc_status(sess, "Threads");

        peak = t > peak ? t : peak;
        assert_true(peer_recv(&p, &m));
        assert_int_equal(m.type, WIRE_MSG_COMPLETION);
        assert_int_equal(m.u.completion.error, STRATA_OK);
        wire_msg_free(&m);
    }
    print_message("  peak threads in the session: %ld\n", peak);
    /* 64 jobs, the loop and its watch, main, sanitizer threads */
    assert_true(peak > 0 && peak <= 64 + 12);
    peer_close(&p);
    idle_after(&plain, &before);
}

/* A session of the plain node with buffer 7 and, on chip 0, an rt.span
 * of ms under a deadline of deadline_ms that it passes: request 2
 * answered STRATA_ETIMEDOUT, the span going on. */
static void peer_late_span(struct peer *p, uint64_t ms, uint64_t deadline_ms)
{
    static const uint64_t id[1] = {7}, size[1] = {4096};
    static const uint64_t nb[1] = {sizeof(struct rt_span)};
    static const uint8_t tag[1] = {STRATA_OUT};
    const uint64_t span[2] = {ms, 0};
    struct wire_msg m = {.type = WIRE_MSG_TASK};
    struct targs a;

    peer_connect(p, &plain);
    assert_int_equal(peer_hello(p, 1, 0, NULL, 0), STRATA_OK);
    send_control(p, 1, WIRE_CTRL_BUFFER_CREATE, 7, 0, 4096);
    assert_int_equal(expect_reply(p, 1, NULL, 0), STRATA_OK);
    targs_make(&a, 1, id, size, nb, tag, 2, span);
    m.u.task.request_id = 2;
    memcpy(m.u.task.digest, rk_o_span.digest, sizeof(m.u.task.digest));
    m.u.task.args = a.blob;
    m.u.task.args_len = a.len;
    m.u.task.target = WIRE_TARGET_WORKER;
    m.u.task.deadline_ms = deadline_ms;
    peer_send(p, &m);
    assert_int_equal(expect_reply(p, 2, NULL, 0), STRATA_ETIMEDOUT);
}

/* A task past its deadline holds chip 0 (a 30 s span), and a second task
 * waits behind it; the parent says GOODBYE. The session ends at once: it
 * kills the late task's chips before it waits for its jobs (it waited
 * for the 30 s kernel before, and for ever behind one that never
 * returns, holding its slot and processes). */
static void test_session_goodbye_ends_behind_late_task(void **state)
{
    static const uint64_t id[1] = {7}, size[1] = {4096};
    static const uint64_t nb[1] = {sizeof(struct rt_span)};
    static const uint8_t tag[1] = {STRATA_OUT};
    static const uint64_t quick[2] = {10, 0};
    testutil_snapshot before;
    struct targs b;
    struct peer p;
    double t0;

    (void)state;
    testutil_snapshot_take(&before);
    peer_late_span(&p, 30000, 100);
    targs_make(&b, 1, id, size, nb, tag, 2, quick);
    send_task(&p, 3, &rk_o_span, &b, NULL, 0); /* waits for chip 0 */
    t0 = testutil_now();
    peer_close(&p);
    assert_true(rk_node_wait_sessions(&plain, 0, RK_WAIT_S));
    print_message("  session ended %.2f s after GOODBYE\n",
                  testutil_now() - t0);
    assert_true(testutil_now() - t0 < 5.0);
    idle_after(&plain, &before);
}

/* BUFFER_RELEASE while a task past its deadline may still use the
 * buffer: released for the parent at once (it reads as gone, its id is
 * free again), the memory kept until the late run ends. Before, the
 * release answered OK and nothing changed: the id stayed taken
 * ("exists") and the buffer readable. */
static void test_session_release_during_late_task(void **state)
{
    testutil_snapshot before;
    struct peer p;
    char why[STRATA_ERRMSG_MAX];

    (void)state;
    testutil_snapshot_take(&before);
    peer_late_span(&p, 1500, 50);
    send_control(&p, 3, WIRE_CTRL_BUFFER_RELEASE, 7, 0, 0);
    assert_int_equal(expect_reply(&p, 3, NULL, 0), STRATA_OK);
    send_control(&p, 4, WIRE_CTRL_BUFFER_READ, 7, 0, 8);
    assert_int_equal(expect_reply(&p, 4, why, sizeof(why)), STRATA_ENOENT);
    rk_assert_contains(why, "no buffer 7");
    send_control(&p, 5, WIRE_CTRL_BUFFER_CREATE, 7, 0, 4096);
    assert_int_equal(expect_reply(&p, 5, NULL, 0), STRATA_OK);
    send_control(&p, 6, WIRE_CTRL_BUFFER_RELEASE, 7, 0, 0);
    assert_int_equal(expect_reply(&p, 6, NULL, 0), STRATA_OK);
    peer_close(&p);
    idle_after(&plain, &before);
}

/* TASKs that announce bytes and never send them: past --max-tasks (256 by
 * default) the session ends and says why. */
static void test_session_tasks_bounded(void **state)
{
    static const uint64_t id[1] = {7}, size[1] = {4096}, nb[1] = {64};
    static const uint8_t tag[1] = {STRATA_IN};
    static const uint32_t data[1] = {0};
    testutil_snapshot before;
    struct targs a;
    struct peer p;

    (void)state;
    testutil_snapshot_take(&before);
    peer_connect(&p, &plain);
    assert_int_equal(peer_hello(&p, 1, 0, NULL, 0), STRATA_OK);
    targs_make(&a, 1, id, size, nb, tag, 0, NULL);
    for (uint64_t r = 1; r <= 300; r++)
        send_task(&p, r, &rk_o_noop, &a, data, 1);
    assert_true(peer_dropped(&p));
    if (!rk_node_log_has(&plain, "--max-tasks", RK_WAIT_S)) {
        rk_node_print_log(&plain);
        fail_msg("no --max-tasks in the log");
    }
    idle_after(&plain, &before);
}

/* A session of the plain node with buffer 7 of WIRE_INLINE_MAX bytes. */
static void peer_buffer(struct peer *p)
{
    peer_connect(p, &plain);
    assert_int_equal(peer_hello(p, 1, 0, NULL, 0), STRATA_OK);
    send_control(p, 1, WIRE_CTRL_BUFFER_CREATE, 7, 0, WIRE_INLINE_MAX);
    assert_int_equal(expect_reply(p, 1, NULL, 0), STRATA_OK);
}

/* n reads of all of buffer 7, requests 10 on, their replies not read. */
static void peer_reads(struct peer *p, uint64_t n)
{
    for (uint64_t r = 0; r < n; r++)
        send_control(p, 10 + r, WIRE_CTRL_BUFFER_READ, 7, 0, WIRE_INLINE_MAX);
}

/* 300 reads of 1 MiB that the peer does not read: the session stops
 * reading requests once 64 MiB of replies are queued, so its memory stays
 * near that mark; then every reply arrives. */
static void test_session_replies_bounded(void **state)
{
    enum { N = 300 };
    testutil_snapshot before;
    struct peer p;
    long rss0, rss;

    (void)state;
    testutil_snapshot_take(&before);
    peer_buffer(&p);
    rss0 = proc_status(only_session(&plain), "VmRSS");
    peer_reads(&p, N);
    /* Give it time to read all it will: until its memory stops growing. */
    for (long last = -1, i = 0; i < 50; i++) {
        struct timespec ts = {0, 100 * 1000 * 1000};

        rss = proc_status(only_session(&plain), "VmRSS");
        if (rss == last)
            break;
        last = rss;
        nanosleep(&ts, NULL);
    }
    print_message("  session RSS %ld KiB, %ld KiB before\n", rss, rss0);
    /* Unbounded, 300 MiB of replies would be queued; bounded, the 64 MiB
     * mark and what was in flight. Under TSan every byte costs about 3
     * (its shadow is counted in RSS): 197 MiB were seen for the bounded
     * queue, about 900 would be for the unbounded one. */
    assert_true(rss - rss0 < 160 * 1024 * MEM_COST);
    for (uint64_t r = 0; r < N; r++) {
        struct wire_msg m;

        if (!peer_recv(&p, &m)) {
            /* Say where the session is, and let it end (a session left
             * behind would fail the tests after this one too). */
            pid_t sess = only_session(&plain);

            print_error("no reply to request %llu: session %d has state "
                        "'%c', %ld threads, %ld KiB resident\n",
                        (unsigned long long)(10 + r), (int)sess,
                        proc_state(sess), proc_status(sess, "Threads"),
                        proc_status(sess, "VmRSS"));
            rk_node_print_log(&plain);
            close(p.fd);
            free(p.buf);
            fail_msg("no reply to request %llu", (unsigned long long)(10 + r));
        }
        assert_int_equal(m.type, WIRE_MSG_CONTROL_REPLY);
        assert_int_equal(m.u.control_reply.request_id, 10 + r);
        assert_int_equal(m.u.control_reply.error, STRATA_OK);
        wire_msg_free(&m);
    }
    peer_close(&p);
    idle_after(&plain, &before);
}

/* One task whose 200 results all name one 2 MiB buffer (OUT, not
 * resident: every tensor's bytes go back), its replies not read: 400 MiB
 * of results from a TASK of a few KB. The task waits to queue more while
 * over the 64 MiB mark, so the session's memory stays near it (a hostile
 * parent grew a session by 2 GiB this way); then every result arrives. */
enum { RES_PER = 200, RES_BYTES = 2u << 20 };

/* Args of RES_PER OUT tensors, each all of 2 MiB buffer 9. */
static void results_args(struct targs *a)
{
    enum { PER = RES_PER, BYTES = RES_BYTES };
    struct wire_args_header h = {PER, 0};
    struct wire_tensor t[PER];

    memset(t, 0, sizeof(t));
    for (size_t k = 0; k < PER; k++) {
        t[k].buffer_id = 9;
        t[k].buffer_size = BYTES;
        t[k].nbytes = BYTES;
        t[k].shape[0] = BYTES;
        t[k].dtype = STRATA_U8;
        t[k].ndims = 1;
        t[k].tag = STRATA_OUT;
        t[k].creator = 1;
    }
    assert_true(sizeof(h) + sizeof(t) <= sizeof(a->blob));
    memcpy(a->blob, &h, sizeof(h));
    memcpy(a->blob + sizeof(h), t, sizeof(t));
    a->len = sizeof(h) + sizeof(t);
}

static void test_session_task_results_bounded(void **state)
{
    enum { PER = RES_PER, BYTES = RES_BYTES };
    testutil_snapshot before;
    struct targs a;
    struct peer p;
    long rss0, rss = 0;
    unsigned chunks = 0;
    bool done = false;

    (void)state;
    results_args(&a);
    testutil_snapshot_take(&before);
    peer_connect(&p, &plain);
    assert_int_equal(peer_hello(&p, 1, 0, NULL, 0), STRATA_OK);
    rss0 = proc_status(only_session(&plain), "VmRSS");
    send_task(&p, 100, &rk_o_noop, &a, NULL, 0);
    /* Until its memory stops growing. */
    for (long last = -1, i = 0; i < 50; i++) {
        struct timespec ts = {0, 100 * 1000 * 1000};

        rss = proc_status(only_session(&plain), "VmRSS");
        if (rss == last)
            break;
        last = rss;
        nanosleep(&ts, NULL);
    }
    print_message("  session RSS %ld KiB, %ld KiB before\n", rss, rss0);
    /* Unbounded, 400 MiB (265 MB were seen with 128 results); bounded,
     * the mark and the buffer: 72 MB, 158 under ASan, whose freed blocks
     * stay resident a while (TSan counts each byte about 3 times). */
    assert_true(rss - rss0 < 200 * 1024 * MEM_COST);
    while (!done) {
        struct wire_msg m;

        if (!peer_recv(&p, &m)) {
            rk_node_print_log(&plain);
            fail_msg("no completion after %u chunks", chunks);
        }
        if (m.type == WIRE_MSG_DATA_CHUNK) {
            chunks++;
        } else {
            assert_int_equal(m.type, WIRE_MSG_COMPLETION);
            assert_int_equal(m.u.completion.error, STRATA_OK);
            assert_int_equal(m.u.completion.num_data_tensors, PER);
            done = true;
        }
        wire_msg_free(&m);
    }
    assert_int_equal(chunks, PER * (BYTES / WIRE_CHUNK_MAX));
    peer_close(&p);
    idle_after(&plain, &before);
}

/* A peer that reads 48 replies of 1 MiB slowly (one per 250 ms: 12 s, past
 * the session's 10 s silence limit) and sends nothing meanwhile is not
 * silent: it takes our bytes. Before, the session dropped it as "went
 * silent" 10 s after its last request. */
static void test_session_slow_reader_not_silent(void **state)
{
    enum { N = 48 };
    testutil_snapshot before;
    struct peer p;

    (void)state;
    testutil_snapshot_take(&before);
    peer_buffer(&p);
    peer_reads(&p, N);
    for (uint64_t r = 0; r < N; r++) {
        /* The slow reader is what the test is about: a sleep by design. */
        struct timespec ts = {0, 250 * 1000 * 1000};

        nanosleep(&ts, NULL);
        assert_int_equal(expect_reply(&p, 10 + r, NULL, 0), STRATA_OK);
    }
    send_control(&p, 2, WIRE_CTRL_PING, 0, 0, 0);
    assert_int_equal(expect_reply(&p, 2, NULL, 0), STRATA_OK);
    peer_close(&p);
    assert_false(rk_node_log_has(&plain, "went silent", 0));
    idle_after(&plain, &before);
}

/* The peer, which has left replies past the mark unread, now reads and
 * sends nothing: its session ends at the 10 s silence limit (60 s: a
 * loaded machine's margin), and its process with it. */
static void ended_silent(struct peer *p, const testutil_snapshot *before)
{
    double t0 = testutil_now();

    if (!rk_node_wait_sessions(&plain, 0, 60.0)) {
        rk_node_print_log(&plain);
        fail_msg("a peer that reads nothing still holds its session");
    }
    print_message("  session ended after %.1f s\n", testutil_now() - t0);
    assert_true(rk_node_log_has(&plain, "went silent", RK_WAIT_S));
    close(p->fd);
    free(p->buf);
    idle_after(&plain, before);
}

/* A peer that queues more than the high water mark of replies and then
 * reads none and sends nothing is silent, back-pressure or not: its
 * session ends ("went silent"), where before it held its slot, its chips
 * and 64 MiB for as long as the peer kept the socket open. */
static void test_session_non_reader_ends(void **state)
{
    enum { N = 80 }; /* 80 MiB of replies: past the 64 MiB mark */
    testutil_snapshot before;
    struct peer p;

    (void)state;
    testutil_snapshot_take(&before);
    peer_buffer(&p);
    peer_reads(&p, N);
    ended_silent(&p, &before);
}

/* The same with a task whose 400 MiB of results wait to go out: the
 * session ends at the silence limit, and so does its process (its job
 * waited for room for good before, holding its slot). */
static void test_session_non_reader_of_results_ends(void **state)
{
    testutil_snapshot before;
    struct targs a;
    struct peer p;

    (void)state;
    results_args(&a);
    testutil_snapshot_take(&before);
    peer_connect(&p, &plain);
    assert_int_equal(peer_hello(&p, 1, 0, NULL, 0), STRATA_OK);
    send_task(&p, 100, &rk_o_noop, &a, NULL, 0);
    ended_silent(&p, &before);
}

/* The same with more such tasks than the session has job threads (64):
 * every job waits for room, so reading pauses for the session's own work,
 * which must not count as the parent waiting on it (the session was kept
 * for good: found in review). */
static void test_session_non_reader_of_many_results_ends(void **state)
{
    enum { N = 70 };
    testutil_snapshot before;
    struct targs a;
    struct peer p;

    (void)state;
    results_args(&a);
    testutil_snapshot_take(&before);
    peer_connect(&p, &plain);
    assert_int_equal(peer_hello(&p, 1, 0, NULL, 0), STRATA_OK);
    for (uint64_t r = 0; r < N; r++)
        send_task(&p, 100 + r, &rk_o_noop, &a, NULL, 0);
    ended_silent(&p, &before);
}

static void test_session_procs_bounded(void **state)
{
    testutil_snapshot before;
    struct peer p;
    char why[STRATA_ERRMSG_MAX];

    (void)state;
    testutil_snapshot_take(&before);
    peer_connect(&p, &plain);
    assert_int_equal(peer_hello(&p, 2, 1000, why, sizeof(why)), STRATA_EINVAL);
    rk_assert_contains(why, "--max-procs");
    assert_true(peer_dropped(&p));
    idle_after(&plain, &before);
}

/* Lines of n's log from session pid (its role prefix and pid) that hold
 * needle. */
static size_t log_lines(const struct rk_node *n, pid_t pid, const char *needle)
{
    char line[1024], tag[32];
    size_t k = 0;
    FILE *f = fopen(n->log, "r");

    assert_non_null(f);
    snprintf(tag, sizeof(tag), "[%d]", (int)pid);
    while (fgets(line, sizeof(line), f))
        if (strstr(line, needle) && strstr(line, tag))
            k++;
    fclose(f);
    return k;
}

/* The parent vanishes (no GOODBYE) with 40 tasks queued on its chip: the
 * session ends with one line saying why, kills the runs, and does not
 * log each completion it can no longer send. */
static void test_session_parent_gone_quietly(void **state)
{
    enum { N = 40 };
    static const uint64_t id[1] = {7}, size[1] = {4096};
    static const uint64_t nb[1] = {sizeof(struct rt_span)};
    static const uint8_t tag[1] = {STRATA_OUT};
    static const uint64_t sc[2] = {50, 0}; /* 50 ms on chip 0 */
    testutil_snapshot before;
    struct wire_msg m;
    struct targs a;
    struct peer p;
    pid_t sess;

    (void)state;
    testutil_snapshot_take(&before);
    peer_connect(&p, &plain);
    assert_int_equal(peer_hello(&p, 1, 0, NULL, 0), STRATA_OK);
    sess = only_session(&plain);
    send_control(&p, 1, WIRE_CTRL_BUFFER_CREATE, 7, 0, 4096);
    assert_int_equal(expect_reply(&p, 1, NULL, 0), STRATA_OK);
    targs_make(&a, 1, id, size, nb, tag, 2, sc);
    for (uint64_t r = 0; r < N; r++)
        send_task(&p, 100 + r, &rk_o_span, &a, NULL, 0);
    /* One has run: the others are in flight or queued. */
    assert_true(peer_recv(&p, &m));
    assert_int_equal(m.type, WIRE_MSG_COMPLETION);
    wire_msg_free(&m);
    close(p.fd);
    free(p.buf);
    assert_true(rk_node_wait_sessions(&plain, 0, RK_WAIT_S));
    /* Why it ended, and the chip its abandoned runs were killed on. */
    if (log_lines(&plain, sess, "session ends:") != 1 ||
        log_lines(&plain, sess, "cannot send") != 0 ||
        log_lines(&plain, sess, "warn:") > 2) {
        rk_node_print_log(&plain);
        fail_msg("session %d: a warning per task, or no reason", (int)sess);
    }
    idle_after(&plain, &before);
}

/* ---- start-up ------------------------------------------------------------ */

struct resume {
    pid_t pid;      /* resumed with SIGCONT after delay_s */
    bool tree;      /* every stopped descendant of pid instead */
    double delay_s; /* the stall the test is about: a sleep by design */
    pthread_t t;
};

static void cont_stopped_below(pid_t pid)
{
    char path[96], line[512];
    DIR *d = opendir("/proc");
    struct dirent *e;

    assert_non_null(d);
    while ((e = readdir(d))) {
        int child = atoi(e->d_name);
        pid_t up = child;
        FILE *f;
        char st = 0;

        if (child <= 0)
            continue;
        /* Walk up the parents: a descendant of pid? */
        for (int hops = 0; up > 1 && up != pid && hops < 16; hops++) {
            int ppid = 0;

            snprintf(path, sizeof(path), "/proc/%d/stat", (int)up);
            f = fopen(path, "r");
            if (!f || !fgets(line, sizeof(line), f)) {
                if (f)
                    fclose(f);
                up = 0;
                break;
            }
            fclose(f);
            if (up == child)
                sscanf(strrchr(line, ')') + 2, "%c", &st);
            sscanf(strrchr(line, ')') + 2, "%*c %d", &ppid);
            up = ppid;
        }
        if (up == pid && child != pid && st == 'T')
            kill(child, SIGCONT);
    }
    closedir(d);
}

static void *resume_main(void *arg)
{
    struct resume *r = arg;
    struct timespec ts = {(time_t)r->delay_s,
                          (long)((r->delay_s - (time_t)r->delay_s) * 1e9)};

    nanosleep(&ts, NULL);
    if (r->tree)
        cont_stopped_below(r->pid);
    else
        kill(r->pid, SIGCONT);
    return NULL;
}

/* The daemon stalled (SIGSTOP) for 2 s while an L4 connects: the TLS
 * handshake waits, and the L4's heartbeat timer must not send anything
 * ahead of HELLO (the session would drop the connection as "a message
 * before HELLO"). */
static void test_session_no_frame_before_hello(void **state)
{
    testutil_snapshot before;
    strata_remote_spec spec;
    struct resume r = {.pid = psk.pid, .delay_s = 2.0};
    strata_worker *w = NULL;
    strata_err err;

    (void)state;
    testutil_snapshot_take(&before);
    rk_spec(&spec, &psk, 2);
    assert_int_equal(kill(psk.pid, SIGSTOP), 0);
    assert_int_equal(pthread_create(&r.t, NULL, resume_main, &r), 0);
    err = rk_l4_start(0, &spec, 1, &w);
    pthread_join(r.t, NULL);
    if (err)
        fail_msg("init across a stalled daemon: %s", strata_errmsg());
    assert_int_equal(rk_add_run(w, (const int[]){0}, 1, 64, 5), STRATA_OK);
    rk_destroy(w, STRATA_OK);
    idle_after(&psk, &before);
}

/* Every chip of the node stops itself at start-up for 12 s, longer than
 * the 10 s without a heartbeat after which either side gives up: the
 * session heartbeats while its worker starts, and init succeeds. */
static void test_session_slow_start_not_dead(void **state)
{
    struct rk_node slow;
    testutil_snapshot before;
    strata_remote_spec spec;
    struct resume r = {.tree = true, .delay_s = 12.0};
    strata_worker *w = NULL;
    double t0, took;
    strata_err err;

    (void)state;
    assert_int_equal(
        rk_node_start_fault(&slow, RK_PSK, NULL, "chip.init:1:stop"), 0);
    testutil_snapshot_take(&before);
    r.pid = slow.pid;
    rk_spec(&spec, &slow, 2);
    assert_int_equal(pthread_create(&r.t, NULL, resume_main, &r), 0);
    t0 = testutil_now();
    err = rk_l4_start(0, &spec, 1, &w);
    took = testutil_now() - t0;
    pthread_join(r.t, NULL);
    if (err) {
        rk_node_print_log(&slow);
        fail_msg("init of a slow node: %s", strata_errmsg());
    }
    print_message("  init took %.1f s\n", took);
    assert_true(took >= 11.0); /* the chips did wait */
    assert_int_equal(rk_add_run(w, (const int[]){0}, 1, 64, 5), STRATA_OK);
    rk_destroy(w, STRATA_OK);
    assert_true(rk_node_wait_sessions(&slow, 0, RK_WAIT_S));
    assert_int_equal(rk_node_stop(&slow), 0);
    testutil_assert_clean(&before);
}

/* A TASK before HELLO ends the session; a HELLO read with it in the same
 * read must not start a worker. The daemon's chips stop themselves at
 * start-up, so a worker started anyway would hold the session in its
 * start-up (and leave stopped chips) past the bound below. */
static void test_session_nothing_after_its_end(void **state)
{
    static const uint64_t id[1] = {7}, size[1] = {4096}, nb[1] = {64};
    static const uint8_t tag[1] = {STRATA_IN};
    static const uint32_t ids[1] = {0};
    struct wire_msg hello = {.type = WIRE_MSG_HELLO};
    struct wire_msg task = {.type = WIRE_MSG_TASK};
    struct rk_node slow;
    testutil_snapshot before;
    struct wire_buf b;
    struct targs a;
    struct peer p;
    bool gone;

    (void)state;
    assert_int_equal(
        rk_node_start_fault(&slow, RK_INSECURE, NULL, "chip.init:1:stop"), 0);
    testutil_snapshot_take(&before);
    targs_make(&a, 1, id, size, nb, tag, 0, NULL);
    task.u.task.request_id = 1;
    memcpy(task.u.task.digest, rk_o_noop.digest, sizeof(task.u.task.digest));
    task.u.task.args = a.blob;
    task.u.task.args_len = a.len;
    task.u.task.target = WIRE_TARGET_WORKER;
    hello.u.hello.proto_min = WIRE_PROTO_MIN;
    hello.u.hello.proto_max = WIRE_PROTO_MAX;
    hello.u.hello.node_name = "raw-peer";
    hello.u.hello.pid = (uint32_t)getpid();
    hello.u.hello.platform = "sim";
    hello.u.hello.chip_ids = ids;
    hello.u.hello.num_chips = 1;
    hello.u.hello.comm_profile = "sim";
    wire_buf_init(&b);
    assert_int_equal(wire_msg_pack(&task, &b), STRATA_OK);
    assert_int_equal(wire_msg_pack(&hello, &b), STRATA_OK);
    peer_connect(&p, &slow);
    assert_true(testutil_write_full(p.fd, b.data, b.len)); /* one write */
    wire_buf_fini(&b);
    assert_true(peer_dropped(&p));
    gone = rk_node_wait_sessions(&slow, 0, RK_WAIT_S);
    cont_stopped_below(slow.pid); /* only if a chip did start */
    if (!gone) {
        rk_node_print_log(&slow);
        fail_msg("the session started a worker after its end");
    }
    assert_true(rk_node_log_has(&slow, "a message before HELLO", RK_WAIT_S));
    assert_int_equal(rk_node_stop(&slow), 0);
    testutil_assert_clean(&before);
}

/* COMM_INIT for the raw peer as L4 of cluster id cid, one chip. */
static void pack_comm_init(struct wire_buf *b, uint64_t req, uint64_t cid)
{
    static const uint32_t ranks[1] = {0};
    struct wire_msg m = {.type = WIRE_MSG_COMM_INIT};

    m.u.comm_init.request_id = req;
    m.u.comm_init.version = WIRE_COMM_INIT_VERSION;
    m.u.comm_init.cluster_id = cid;
    m.u.comm_init.node_count = 1;
    m.u.comm_init.global_device_ranks = ranks;
    m.u.comm_init.num_ranks = 1;
    m.u.comm_init.profile = "sim";
    assert_int_equal(wire_msg_pack(&m, b), STRATA_OK);
}

static void send_comm_init(struct peer *p, uint64_t req, uint64_t cid)
{
    struct wire_buf b;

    wire_buf_init(&b);
    pack_comm_init(&b, req, cid);
    assert_true(testutil_write_full(p->fd, b.data, b.len));
    wire_buf_fini(&b);
}

/* PREPARE_EXPORT of domain id over chip 0 of node 0, asking for the
 * exchange (the chip makes its window: the command waits for it). */
static void pack_domain_cmd_exchange(struct wire_buf *b, uint64_t req,
                                     uint64_t id)
{
    static const struct wire_domain_member mem[1] = {{0, 0, 0, 0}};
    struct wire_msg m = {.type = WIRE_MSG_DOMAIN_CMD};
    struct wire_domain_cmd *c = &m.u.domain_cmd;

    c->request_id = req;
    c->version = WIRE_DOMAIN_CMD_VERSION;
    c->phase = WIRE_PHASE_PREPARE_EXPORT;
    c->domain_id = id;
    c->generation = 1;
    c->window_size = 4096;
    c->name = "stuck";
    c->profile = "sim";
    c->members = mem;
    c->num_members = 1;
    c->exchange = true;
    assert_int_equal(wire_msg_pack(&m, b), STRATA_OK);
}

/* A transaction's phases in order. */
static const uint8_t txn_phases[4] = {WIRE_PHASE_PREPARE_EXPORT,
                                      WIRE_PHASE_IMPORT, WIRE_PHASE_COMMIT,
                                      WIRE_PHASE_ABORT};

/* One DOMAIN_CMD of domain id for the raw peer as L4 (cluster id cid):
 * member 0 is chip 0 of node 0; IMPORT and COMMIT name the window as a
 * node that maps lazily does. */
static void pack_domain_cmd(struct wire_buf *b, uint64_t req, uint8_t phase,
                            uint64_t id, uint64_t cid)
{
    static const struct wire_domain_member mem[1] = {{0, 0, 0, 0}};
    struct wire_msg m = {.type = WIRE_MSG_DOMAIN_CMD};
    struct wire_domain_cmd *c = &m.u.domain_cmd;
    struct wire_descriptor d;
    char name[96];

    snprintf(name, sizeof(name), "/strata-%u-%d-d%llu-r0-%08x",
             (unsigned)getuid(), (int)(cid >> 32),
             (unsigned long long)(1ull << 62 | id), (unsigned)(uint32_t)cid);
    c->request_id = req;
    c->version = WIRE_DOMAIN_CMD_VERSION;
    c->phase = phase;
    c->domain_id = id;
    c->generation = 1;
    c->window_size = 4096;
    c->name = "order";
    c->profile = "sim";
    c->members = mem;
    c->num_members = 1;
    if (phase == WIRE_PHASE_IMPORT || phase == WIRE_PHASE_COMMIT) {
        d = (struct wire_descriptor){
            WIRE_DESCRIPTOR_VERSION, "sim", 0, 1, 4096, name};
        c->descriptors = &d;
        c->num_descriptors = 1;
    }
    assert_int_equal(wire_msg_pack(&m, b), STRATA_OK);
}

/* 50 domains' PREPARE_EXPORT, IMPORT, COMMIT and ABORT written at once,
 * as an L4 sends a warm allocation's three commands: a session runs its
 * domain commands one at a time in the order sent, so each IMPORT finds
 * its PREPARE_EXPORT done, and the replies come back in that order. */
static void test_session_domain_cmds_in_order(void **state)
{
    enum { N = 50 };
    uint64_t cid = (uint64_t)(uint32_t)getpid() << 32 | 0x5eed0001u;
    struct wire_msg r;
    testutil_snapshot before;
    struct wire_buf b;
    struct peer p;

    (void)state;
    testutil_snapshot_take(&before);
    peer_connect(&p, &plain);
    assert_int_equal(peer_hello(&p, 1, 0, NULL, 0), STRATA_OK);
    wire_buf_init(&b);
    pack_comm_init(&b, 1, cid);
    for (uint64_t k = 0; k < N; k++)
        for (int ph = 0; ph < 4; ph++)
            pack_domain_cmd(&b, 2 + 4 * k + (uint64_t)ph, txn_phases[ph], 1 + k,
                            cid);
    assert_true(testutil_write_full(p.fd, b.data, b.len));
    wire_buf_fini(&b);
    assert_true(peer_recv(&p, &r));
    assert_int_equal(r.type, WIRE_MSG_CONTROL_REPLY);
    assert_int_equal(r.u.control_reply.error, STRATA_OK);
    wire_msg_free(&r);
    for (uint64_t req = 2; req < 2 + 4 * N; req++) {
        assert_true(peer_recv(&p, &r));
        assert_int_equal(r.type, WIRE_MSG_DOMAIN_REPLY);
        if (r.u.domain_reply.request_id != req || r.u.domain_reply.error)
            fail_msg("reply to request %llu: request %llu, %s: %s",
                     (unsigned long long)req,
                     (unsigned long long)r.u.domain_reply.request_id,
                     strata_errname(r.u.domain_reply.error),
                     r.u.domain_reply.message);
        wire_msg_free(&r);
    }
    peer_close(&p);
    idle_after(&plain, &before);
}

/* A domain made, written into (its member creates the window, named
 * after the cluster id), then a second COMM_INIT with another cluster id
 * before the session ends: refused while the domain lives (STRATA_ESTATE),
 * and the domain's names are dropped at the end, those it was made under
 * (a hostile peer once left them behind this way). */
static void test_session_comm_init_again_names_dropped(void **state)
{
    static const uint8_t bytes[8] = "written";
    uint64_t cid = (uint64_t)(uint32_t)getpid() << 32 | 0x5eed0002u;
    struct wire_msg m = {.type = WIRE_MSG_CONTROL};
    testutil_snapshot before;
    struct wire_buf b;
    struct peer p;

    (void)state;
    testutil_snapshot_take(&before);
    peer_connect(&p, &plain);
    assert_int_equal(peer_hello(&p, 1, 0, NULL, 0), STRATA_OK);
    send_comm_init(&p, 1, cid);
    assert_int_equal(expect_reply(&p, 1, NULL, 0), STRATA_OK);
    for (int ph = 0; ph < 3; ph++) { /* not ABORT */
        struct wire_msg r;

        wire_buf_init(&b);
        pack_domain_cmd(&b, 2 + (uint64_t)ph, txn_phases[ph], 9, cid);
        assert_true(testutil_write_full(p.fd, b.data, b.len));
        wire_buf_fini(&b);
        assert_true(peer_recv(&p, &r));
        assert_int_equal(r.type, WIRE_MSG_DOMAIN_REPLY);
        assert_int_equal(r.u.domain_reply.error, STRATA_OK);
        wire_msg_free(&r);
    }
    m.u.control.request_id = 5;
    m.u.control.op = WIRE_CTRL_WINDOW_WRITE;
    m.u.control.operands.present =
        WIRE_OPND_BIT(WIRE_OPND_DOMAIN_ID) | WIRE_OPND_BIT(WIRE_OPND_RANK) |
        WIRE_OPND_BIT(WIRE_OPND_OFFSET) | WIRE_OPND_BIT(WIRE_OPND_NBYTES) |
        WIRE_OPND_BIT(WIRE_OPND_DATA);
    m.u.control.operands.domain_id = 9;
    m.u.control.operands.nbytes = sizeof(bytes);
    m.u.control.operands.data = bytes;
    m.u.control.operands.data_len = sizeof(bytes);
    peer_send(&p, &m);
    assert_int_equal(expect_reply(&p, 5, NULL, 0), STRATA_OK);
    send_comm_init(&p, 6, cid + 1);
    assert_int_equal(expect_reply(&p, 6, NULL, 0), STRATA_ESTATE);
    peer_close(&p);
    idle_after(&plain, &before);
}

/* A command of about 170 KiB: an ABORT of domain id over 8192 members
 * of another node, with 256 buffers of 200-byte names. */
static void pack_big_abort(struct wire_buf *b, uint64_t req, uint64_t id)
{
    static struct wire_domain_member mem[WIRE_MAX_RANKS];
    static struct wire_domain_buffer bufs[WIRE_MAX_DOMAIN_BUFFERS];
    static char names[WIRE_MAX_DOMAIN_BUFFERS][201];
    struct wire_msg m = {.type = WIRE_MSG_DOMAIN_CMD};
    struct wire_domain_cmd *c = &m.u.domain_cmd;

    for (uint32_t i = 0; i < WIRE_MAX_RANKS; i++)
        mem[i] = (struct wire_domain_member){5, i, i, i};
    for (uint32_t i = 0; i < WIRE_MAX_DOMAIN_BUFFERS; i++) {
        char head[8];

        memset(names[i], 'a', 200);
        names[i][200] = '\0';
        snprintf(head, sizeof(head), "b%03u", i);
        memcpy(names[i], head, 4);
        bufs[i] = (struct wire_domain_buffer){names[i], STRATA_U8, 1, 1};
    }
    c->request_id = req;
    c->version = WIRE_DOMAIN_CMD_VERSION;
    c->phase = WIRE_PHASE_ABORT;
    c->domain_id = id;
    c->generation = 1;
    c->window_size = 4096;
    c->name = "big";
    c->profile = "sim";
    c->members = mem;
    c->num_members = WIRE_MAX_RANKS;
    c->buffers = bufs;
    c->num_buffers = WIRE_MAX_DOMAIN_BUFFERS;
    assert_int_equal(wire_msg_pack(&m, b), STRATA_OK);
}

/* Domain commands wait, kept whole, behind one that drives a stopped
 * chip: past --reply-high-water of them the session stops reading, as it
 * does for replies. Without that, --max-threads was the only bound (64
 * commands of up to ~5 MB each). Here the threads are not what stops it:
 * 200 commands of ~170 KiB (34 MiB) cannot all go out while the chip is
 * stopped, only about what the kernel's buffers hold. */
static void test_session_queued_commands_bounded(void **state)
{
    static const char *const extra[] = {"--reply-high-water", "64KiB",
                                        "--max-threads", "4096", NULL};
    enum { N = 200 };
    uint64_t cid = (uint64_t)(uint32_t)getpid() << 32 | 0x5eed0003u;
    struct rk_node q;
    testutil_snapshot before;
    struct wire_buf b;
    struct peer p;
    size_t sent = 0, total = 0;
    pid_t chip = 0;
    size_t nchild = 0;
    int flags;

    (void)state;
    testutil_snapshot_take(&before);
    assert_int_equal(lk_node_start(&q, RK_INSECURE, extra), 0);
    peer_connect(&p, &q);
    assert_int_equal(peer_hello(&p, 1, 0, NULL, 0), STRATA_OK);
    send_comm_init(&p, 1, cid);
    assert_int_equal(expect_reply(&p, 1, NULL, 0), STRATA_OK);
    testutil_children_of(only_session(&q), &chip, &nchild, 1);
    assert_int_equal(nchild, 1);
    assert_int_equal(kill(chip, SIGSTOP), 0);
    /* An exchanging PREPARE waits for the stopped chip. */
    wire_buf_init(&b);
    pack_domain_cmd_exchange(&b, 2, 9);
    assert_true(testutil_write_full(p.fd, b.data, b.len));
    flags = fcntl(p.fd, F_GETFL);
    assert_int_equal(fcntl(p.fd, F_SETFL, flags | O_NONBLOCK), 0);
    for (uint64_t r = 0; r < N; r++) {
        size_t at = 0;

        wire_buf_reset(&b);
        pack_big_abort(&b, 10 + r, 100 + r);
        if (r == 0)
            total = b.len * N; /* every command is the same size */
        /* The last command may go part way: the rest is sent after. */
        while (at < b.len) {
            struct pollfd pf = {p.fd, POLLOUT, 0};
            ssize_t n = write(p.fd, b.data + at, b.len - at);

            if (n > 0) {
                at += (size_t)n;
                sent += (size_t)n;
                continue;
            }
            assert_true(n < 0 && errno == EAGAIN);
            /* Nothing leaves for a second: the session stopped reading. */
            if (poll(&pf, 1, 1000) == 0)
                goto held;
        }
    }
held:
    print_message("  %zu of %zu bytes went out while the chip was stopped\n",
                  sent, total);
    assert_true(sent < total / 2);
    assert_int_equal(kill(chip, SIGCONT), 0);
    assert_int_equal(fcntl(p.fd, F_SETFL, flags), 0);
    wire_buf_fini(&b);
    close(p.fd);
    free(p.buf);
    assert_true(rk_node_wait_sessions(&q, 0, RK_WAIT_S));
    assert_int_equal(rk_node_stop(&q), 0);
    testutil_assert_clean(&before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_session_release_pinned_by_waiting_task),
        cmocka_unit_test(test_session_refused_task_bytes_dropped),
        cmocka_unit_test(test_session_chunk_rules),
        cmocka_unit_test(test_session_threads_bounded),
        cmocka_unit_test(test_session_goodbye_ends_behind_late_task),
        cmocka_unit_test(test_session_release_during_late_task),
        cmocka_unit_test(test_session_tasks_bounded),
        cmocka_unit_test(test_session_replies_bounded),
        cmocka_unit_test(test_session_task_results_bounded),
        cmocka_unit_test(test_session_slow_reader_not_silent),
        cmocka_unit_test(test_session_non_reader_ends),
        cmocka_unit_test(test_session_non_reader_of_results_ends),
        cmocka_unit_test(test_session_non_reader_of_many_results_ends),
        cmocka_unit_test(test_session_procs_bounded),
        cmocka_unit_test(test_session_parent_gone_quietly),
        cmocka_unit_test(test_session_no_frame_before_hello),
        cmocka_unit_test(test_session_slow_start_not_dead),
        cmocka_unit_test(test_session_nothing_after_its_end),
        cmocka_unit_test(test_session_domain_cmds_in_order),
        cmocka_unit_test(test_session_comm_init_again_names_dropped),
        cmocka_unit_test(test_session_queued_commands_bounded),
    };

    rk_filter_from_env();
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
