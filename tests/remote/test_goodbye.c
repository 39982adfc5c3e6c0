/* An L4 against a node that misbehaves; the node is this test's own
 * thread on plaintext loopback (--insecure), which answers HELLO.
 * - GOODBYE to a node that does not leave: strata_worker_destroy waits
 *   for each remote node to close its end after the GOODBYE, so that its
 *   socket cannot reset the connection under the node's unread bytes; a
 *   node that never closes (silent, or talking on and on) must not hold
 *   the destroy beyond its bound, nor leave anything behind.
 * - A task's results that do not add up (found by a tester playing a
 *   hostile node): data for an input tensor, a COMPLETION naming results
 *   that never came or came half. The node is lost with STRATA_EPROTO
 *   naming why, and the input's bytes are untouched; before, the run
 *   returned OK over stale, half-written or overwritten buffers. */
#define _GNU_SOURCE /* accept4 */
#include "remote_kit.h"
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "testutil.h"
#include "wire/frame.h"
#include "wire/msg.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <strata/strata.h>

#define WAIT_S 30.0

enum after { STAY_SILENT, TALK_ON };

/* How the node answers a TASK of tensors 0 (IN) and 1 (OUT), 16 bytes
 * each. */
enum results {
    NO_TASKS,
    DATA_FOR_INPUT,
    RESULT_MISSING,
    RESULT_HALF,
    RESULT_TRICKLED /* a COMPLETION a byte a second, never whole */
};

struct fake {
    int lfd;
    enum after after;
    enum results results;
    uint8_t trickle[512]; /* RESULT_TRICKLED: the frame, and how far */
    size_t trickle_len, trickled;
    double trickle_at;
    pthread_t thread;
    int goodbye; /* atomics */
    int stop;
    int failed;
    uint8_t in[1 << 16];
    size_t have;
};

static bool answer_hello(int fd, const uint8_t *body, size_t len)
{
    struct wire_msg h, r;
    struct wire_buf b;
    bool ok;

    if (wire_msg_unpack(WIRE_MSG_HELLO, body, len, &h) != STRATA_OK)
        return false;
    memset(&r, 0, sizeof(r));
    r.type = WIRE_MSG_HELLO_REPLY;
    r.u.hello_reply.version = h.u.hello.proto_max < WIRE_PROTO_MAX
                                  ? h.u.hello.proto_max
                                  : WIRE_PROTO_MAX;
    r.u.hello_reply.error = STRATA_OK;
    r.u.hello_reply.message = "";
    r.u.hello_reply.node_name = "fake-node";
    r.u.hello_reply.pid = (uint32_t)getpid();
    wire_msg_free(&h);
    wire_buf_init(&b);
    ok = wire_msg_pack(&r, &b) == STRATA_OK &&
         testutil_write_full(fd, b.data, b.len);
    wire_buf_fini(&b);
    return ok;
}

static bool send_frame(int fd, const struct wire_msg *m)
{
    struct wire_buf b;
    bool ok;

    wire_buf_init(&b);
    ok = wire_msg_pack(m, &b) == STRATA_OK &&
         testutil_write_full(fd, b.data, b.len);
    wire_buf_fini(&b);
    return ok;
}

static bool answer_task(struct fake *f, int fd, const uint8_t *body, size_t len)
{
    static const uint8_t bytes[16] = {0x66, 0x66, 0x66, 0x66, 0x66, 0x66,
                                      0x66, 0x66, 0x66, 0x66, 0x66, 0x66,
                                      0x66, 0x66, 0x66, 0x66};
    struct wire_msg t, d = {.type = WIRE_MSG_DATA_CHUNK},
                       c = {.type = WIRE_MSG_COMPLETION};
    uint32_t named;
    bool ok = true;

    if (wire_msg_unpack(WIRE_MSG_TASK, body, len, &t) != STRATA_OK)
        return false;
    d.u.data_chunk.request_id = c.u.completion.request_id = t.u.task.request_id;
    wire_msg_free(&t);
    d.u.data_chunk.data = bytes;
    d.u.data_chunk.len = sizeof(bytes);
    d.u.data_chunk.last = true;
    named = 1;
    if (f->results == DATA_FOR_INPUT) {
        d.u.data_chunk.tensor = 0;
        named = 0;
    } else if (f->results == RESULT_HALF) {
        d.u.data_chunk.tensor = 1;
        d.u.data_chunk.len = 8;
        d.u.data_chunk.last = false;
    }
    c.u.completion.message = "";
    c.u.completion.data_tensors = &named;
    c.u.completion.num_data_tensors = 1;
    if (f->results == RESULT_TRICKLED) {
        static char msg[300];
        struct wire_buf b;

        /* A long frame: its trickle outlasts the test. */
        memset(msg, 'x', sizeof(msg) - 1);
        c.u.completion.message = msg;
        wire_buf_init(&b);
        ok = wire_msg_pack(&c, &b) == STRATA_OK && b.len <= sizeof(f->trickle);
        if (ok)
            memcpy(f->trickle, b.data, b.len);
        f->trickle_len = ok ? b.len : 0;
        wire_buf_fini(&b);
        return ok;
    }
    if (f->results != RESULT_MISSING)
        ok = send_frame(fd, &d);
    return ok && send_frame(fd, &c);
}

/* Handles the whole frames read so far; false on a bad one. */
static bool frames(struct fake *f, int fd)
{
    size_t at = 0;

    while (f->have - at >= WIRE_FRAME_HEADER_SIZE) {
        struct wire_frame_header h;

        if (wire_frame_header_unpack(f->in + at, WIRE_FRAME_HEADER_SIZE, &h) !=
            STRATA_OK)
            return false;
        if (h.body_len > sizeof(f->in) - WIRE_FRAME_HEADER_SIZE)
            return false;
        if (f->have - at < WIRE_FRAME_HEADER_SIZE + h.body_len)
            break;
        if (h.type == WIRE_MSG_HELLO &&
            !answer_hello(fd, f->in + at + WIRE_FRAME_HEADER_SIZE, h.body_len))
            return false;
        if (h.type == WIRE_MSG_GOODBYE)
            __atomic_store_n(&f->goodbye, 1, __ATOMIC_RELEASE);
        if (h.type == WIRE_MSG_TASK && f->results != NO_TASKS &&
            !answer_task(f, fd, f->in + at + WIRE_FRAME_HEADER_SIZE,
                         h.body_len))
            return false;
        at += WIRE_FRAME_HEADER_SIZE + h.body_len;
    }
    memmove(f->in, f->in + at, f->have - at);
    f->have -= at;
    return true;
}

static void *node_main(void *arg)
{
    struct fake *f = arg;
    struct wire_msg m = {.type = WIRE_MSG_HEARTBEAT};
    struct wire_buf hb;
    int fd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);

    wire_buf_init(&hb);
    m.u.heartbeat.seq = 1;
    m.u.heartbeat.time_ns = 1;
    if (fd < 0 || wire_msg_pack(&m, &hb) != STRATA_OK) {
        __atomic_store_n(&f->failed, 1, __ATOMIC_RELEASE);
        goto out;
    }
    while (!__atomic_load_n(&f->stop, __ATOMIC_ACQUIRE)) {
        struct pollfd p = {fd, POLLIN, 0};
        bool said = __atomic_load_n(&f->goodbye, __ATOMIC_ACQUIRE);
        ssize_t n;

        /* After the GOODBYE: heartbeats as fast as the socket takes
         * them. */
        if (said && f->after == TALK_ON)
            (void)!send(fd, hb.data, hb.len, MSG_DONTWAIT | MSG_NOSIGNAL);
        /* The header at once, then the body a byte a second. */
        if (f->trickled + 1 < f->trickle_len &&
            testutil_now() - f->trickle_at >= 1.0) {
            size_t step = f->trickled ? 1 : WIRE_FRAME_HEADER_SIZE;

            (void)!send(fd, f->trickle + f->trickled, step,
                        MSG_DONTWAIT | MSG_NOSIGNAL);
            f->trickled += step;
            f->trickle_at = testutil_now();
        }
        if (poll(&p, 1, said && f->after == TALK_ON ? 0 : 10) <= 0)
            continue;
        n = recv(fd, f->in + f->have, sizeof(f->in) - f->have, 0);
        if (n <= 0)
            break; /* the L4 closed: it gave up waiting */
        f->have += (size_t)n;
        if (!frames(f, fd)) {
            __atomic_store_n(&f->failed, 1, __ATOMIC_RELEASE);
            break;
        }
    }
out:
    /* Only now, once the test says so: never while the L4 waits. */
    while (!__atomic_load_n(&f->stop, __ATOMIC_ACQUIRE))
        testutil_sleep(0.005);
    if (fd >= 0)
        close(fd);
    wire_buf_fini(&hb);
    return NULL;
}

static int listen_loopback(uint16_t *port)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t alen = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 1), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

/* Starts f (set up by the caller) on a loopback port and an L4 whose
 * one remote node (one chip, --insecure) it is. */
static strata_worker *l4_on_fake(struct fake *f)
{
    static const int chips[1] = {0};
    strata_worker_config cfg;
    strata_remote_spec rs;
    strata_worker *w = NULL;
    char endpoint[64];
    uint16_t port;
    int id;

    f->lfd = listen_loopback(&port);
    assert_int_equal(pthread_create(&f->thread, NULL, node_main, f), 0);
    snprintf(endpoint, sizeof(endpoint), "127.0.0.1:%u", (unsigned)port);
    memset(&rs, 0, sizeof(rs));
    rs.endpoint = endpoint;
    rs.insecure = true;
    rs.chip_ids = chips;
    rs.num_chips = 1;
    strata_worker_config_init(&cfg, 4);
    assert_int_equal(strata_worker_create(&cfg, &w), STRATA_OK);
    assert_int_equal(strata_worker_add_remote_worker(w, &rs, &id), STRATA_OK);
    assert_int_equal(strata_worker_init(w), STRATA_OK);
    return w;
}

static void node_does_not_leave(enum after after)
{
    static struct fake f;
    testutil_snapshot before;
    strata_worker *w;

    testutil_snapshot_take(&before);
    memset(&f, 0, sizeof(f));
    f.after = after;
    w = l4_on_fake(&f);
    /* The node holds its end open: destroy returns anyway, cleanly. */
    assert_int_equal(strata_worker_destroy(w), STRATA_OK);
    assert_int_equal(__atomic_load_n(&f.goodbye, __ATOMIC_ACQUIRE), 1);
    assert_int_equal(__atomic_load_n(&f.failed, __ATOMIC_ACQUIRE), 0);
    __atomic_store_n(&f.stop, 1, __ATOMIC_RELEASE);
    assert_int_equal(pthread_join(f.thread, NULL), 0);
    close(f.lfd);
    testutil_assert_clean(&before);
}

static void test_goodbye_silent_node_does_not_hold_destroy(void **state)
{
    (void)state;
    node_does_not_leave(STAY_SILENT);
}

static void test_goodbye_talking_node_does_not_hold_destroy(void **state)
{
    (void)state;
    node_does_not_leave(TALK_ON);
}

struct pair {
    strata_buffer *in, *out;
};

static strata_err in_out_orch(strata_orch *o, const strata_args *unused,
                              void *user)
{
    const struct pair *p = user;
    size_t shape[1] = {16};
    strata_args *a = NULL;
    strata_err err;

    (void)unused;
    it_try(strata_args_create(&a));
    err = strata_args_add_tensor(a, p->in, 0, STRATA_U8, 1, shape, STRATA_IN);
    if (!err)
        err = strata_args_add_tensor(a, p->out, 0, STRATA_U8, 1, shape,
                                     STRATA_OUT);
    if (!err)
        err = strata_orch_submit_next_level(o, rk_o_noop, a, 0);
    strata_args_destroy(a);
    return err;
}

static void results_refused(enum results results, const char *why)
{
    static struct fake f;
    testutil_snapshot before;
    strata_worker *w;
    struct pair p;
    strata_err err, derr;

    testutil_snapshot_take(&before);
    memset(&f, 0, sizeof(f));
    f.results = results;
    w = l4_on_fake(&f);
    assert_int_equal(strata_worker_create_buffer(w, 16, &p.in), STRATA_OK);
    assert_int_equal(strata_worker_create_buffer(w, 16, &p.out), STRATA_OK);
    memset(strata_buffer_data(p.in), 0x11, 16);
    err = strata_worker_run(w, in_out_orch, NULL, &p);
    print_message("  %s: %s\n", strata_errname(err), strata_errmsg());
    assert_int_not_equal(err, STRATA_OK);
    rk_assert_contains(strata_errmsg(), why);
    for (int i = 0; i < 16; i++)
        assert_int_equal(((uint8_t *)strata_buffer_data(p.in))[i], 0x11);
    derr = strata_worker_destroy(w);
    assert_true(derr == STRATA_OK || derr == STRATA_EPEER);
    __atomic_store_n(&f.stop, 1, __ATOMIC_RELEASE);
    assert_int_equal(pthread_join(f.thread, NULL), 0);
    close(f.lfd);
    testutil_assert_clean(&before);
}

static void test_results_data_for_input_refused(void **state)
{
    (void)state;
    results_refused(DATA_FOR_INPUT, "data for an input tensor");
}

static void test_results_missing_refused(void **state)
{
    (void)state;
    results_refused(RESULT_MISSING, "without all of the results it names");
}

static void test_results_half_refused(void **state)
{
    (void)state;
    results_refused(RESULT_HALF, "without all of the results it names");
}

/* A node that sends no heartbeat but trickles a frame's body a byte a
 * second is silent: lost after the silence limit (the run waited for
 * ever before: any byte counted as a sign of life). */
static void test_results_trickled_frame_lost(void **state)
{
    double t0 = testutil_now();

    (void)state;
    results_refused(RESULT_TRICKLED, "silent");
    print_message("  lost after %.1f s\n", testutil_now() - t0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_goodbye_silent_node_does_not_hold_destroy),
        cmocka_unit_test(test_goodbye_talking_node_does_not_hold_destroy),
        cmocka_unit_test(test_results_data_for_input_refused),
        cmocka_unit_test(test_results_missing_refused),
        cmocka_unit_test(test_results_half_refused),
        cmocka_unit_test(test_results_trickled_frame_lost),
    };

    if (rk_register() != 0)
        return 1;
    return cmocka_run_group_tests(tests, NULL, NULL);
}
