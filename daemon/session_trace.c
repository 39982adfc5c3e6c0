/* A node session's timeline trace: recorded like any traced tree's (the
 * session process is its root), written to no file, and sent to the
 * parent when it asks (TRACE frames, docs/wire.md). */
#include "session_trace.h"
#include "base/log.h"
#include "trace/trace.h"
#include "wire/args.h"
#include "wire/msg.h"

#include <unistd.h>

bool session_trace_start(uint64_t capabilities)
{
    if (!(capabilities & WIRE_CAP_TRACE))
        return false;
    if (trace_session_start(NULL, "L3") != STRATA_OK) {
        LOG_WARN("the parent traces, this session cannot: %s", strata_errmsg());
        return false;
    }
    return true;
}

struct answer {
    struct wire_conn *conn;
    uint64_t request_id;
    strata_err err; /* the first failure to send */
};

static void send_trace(struct answer *a, const struct wire_trace *t)
{
    struct wire_msg m = {.type = WIRE_MSG_TRACE};
    struct wire_buf b;

    if (a->err)
        return;
    m.u.trace = *t;
    wire_buf_init(&b);
    a->err = wire_msg_pack(&m, &b);
    if (!a->err)
        a->err = wire_conn_send(a->conn, b.data, b.len);
    if (a->err)
        LOG_WARN("cannot send the trace: %s", strata_errmsg());
    wire_buf_fini(&b);
}

/* One process's records, in frames of at most WIRE_TRACE_RECS_MAX. */
static void send_proc(void *ctx, int32_t pid, int32_t ppid, const char *role,
                      uint64_t dropped, const void *recs, uint32_t n)
{
    struct answer *a = ctx;
    uint32_t at = 0;

    do {
        uint32_t k =
            n - at < WIRE_TRACE_RECS_MAX ? n - at : WIRE_TRACE_RECS_MAX;
        struct wire_trace t = {
            .request_id = a->request_id,
            .is_data = true,
            .pid = (uint32_t)pid,
            .ppid = ppid > 0 ? (uint32_t)ppid : 0,
            .role = role[0] ? role : "process",
            .dropped = at ? 0 : dropped,
            .records = (const uint8_t *)recs + (size_t)at * WIRE_TRACE_REC_SIZE,
            .num_records = k,
        };

        send_trace(a, &t);
        at += k;
    } while (at < n);
}

void session_trace_answer(struct wire_conn *conn, uint64_t request_id)
{
    struct answer a = {.conn = conn, .request_id = request_id};
    struct wire_trace last = {.request_id = request_id,
                              .is_data = true,
                              .pid = (uint32_t)getpid(),
                              .role = "L3",
                              .last = true};

    if (trace_session_collect(send_proc, &a) != STRATA_OK)
        LOG_WARN("the trace is incomplete: %s", strata_errmsg());
    /* Ends the answer even after a failure: the parent stops waiting. */
    a.err = STRATA_OK;
    send_trace(&a, &last);
}

/* Lanes held by running tasks; past 64 at once, the last is shared. */
static uint64_t lanes_held;

uint16_t session_trace_lane_take(void)
{
    uint64_t held = __atomic_load_n(&lanes_held, __ATOMIC_RELAXED);

    for (;;) {
        uint16_t lane =
            held == UINT64_MAX ? 63 : (uint16_t)__builtin_ctzll(~held);

        if (held == UINT64_MAX || __atomic_compare_exchange_n(
                                      &lanes_held, &held, held | (1ull << lane),
                                      true, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            return lane;
    }
}

uint64_t session_trace_arg_bytes(const strata_args *args)
{
    uint64_t bytes = 0;

    for (uint32_t i = 0; args && i < args->num_tensors; i++)
        bytes += args->tensors[i].nbytes;
    return bytes;
}

void session_trace_task(uint64_t t0, uint16_t lane, const char *name,
                        const struct wire_task *task, uint64_t arg_bytes,
                        strata_err err)
{
    trace_record(TRACE_K_RUN, err ? TRACE_TASK_FAILED : 0, lane, t0,
                 trace_now(), task->run_id, arg_bytes, 0,
                 TRACE_SLOT_KEY(0, task->request_id), name);
    __atomic_and_fetch(&lanes_held, ~(1ull << lane), __ATOMIC_RELEASE);
}

void session_trace_finish(void)
{
    if (trace_session_finish() != STRATA_OK)
        LOG_WARN("trace: %s", strata_errmsg());
}
