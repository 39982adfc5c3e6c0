/* A node session's timeline trace for a tracing parent (WIRE_CAP_TRACE,
 * docs/tracing.md): session_trace.c. */
#ifndef DAEMON_SESSION_TRACE_H
#define DAEMON_SESSION_TRACE_H

#include "wire/conn.h"
#include "wire/msg.h"

#include <stdbool.h>
#include <stdint.h>

/* At HELLO: whether this session records (the parent offered TRACE and
 * the buffer was made). Before the worker forks anything. */
bool session_trace_start(uint64_t capabilities);

/* Answers the TRACE request request_id: every process of the session's
 * records, in TRACE frames, the last one flagged. On the loop thread. */
void session_trace_answer(struct wire_conn *conn, uint64_t request_id);

/* A lane for a TASK starting now: the lowest no task running holds, so
 * that the slices of tasks that run at once nest (one per lane). */
uint16_t session_trace_lane_take(void);

/* The bytes of args' tensors (NULL: none), for session_trace_task. */
uint64_t session_trace_arg_bytes(const strata_args *args);

/* The task slice of a TASK this session ran from t0 (trace_now) until
 * now on lane (from session_trace_lane_take, given back here): name its
 * callable (NULL: unknown), arg_bytes its tensors' bytes, err how it
 * ended (a deadline's STRATA_ETIMEDOUT included: the slice ends there,
 * marked failed). Its frame key is the request id (slot 0). */
void session_trace_task(uint64_t t0, uint16_t lane, const char *name,
                        const struct wire_task *task, uint64_t arg_bytes,
                        strata_err err);

/* After the worker is gone: the session's buffers leave /dev/shm. */
void session_trace_finish(void);

#endif
