/* TRACE: a parent's request for a node's trace records, and the node's
 * answer, one process's records per frame (docs/wire.md, tracing.md). */
#include "base/err.h"
#include "codec.h"

#include <string.h>

enum {
    TRACE_REQUEST_ID = 1,
    TRACE_PID = 2,
    TRACE_PPID = 3,
    TRACE_ROLE = 4,
    TRACE_DROPPED = 5,
    TRACE_RECORDS = 6,
    TRACE_LAST = 7,
};

static const unsigned trace_nkeys = TRACE_LAST;
static const char *const trace_names[] = {
    [TRACE_REQUEST_ID] = "request_id",
    [TRACE_PID] = "pid",
    [TRACE_PPID] = "ppid",
    [TRACE_ROLE] = "role",
    [TRACE_DROPPED] = "dropped",
    [TRACE_RECORDS] = "records",
    [TRACE_LAST] = "last",
};

static strata_err trace_check(struct wire_dec *d, const void *vm)
{
    const struct wire_trace *m = vm;

    if (m->request_id < 1)
        return wire_dec_fail(d, "request_id", "is 0");
    if (!m->is_data) {
        if (m->pid || m->ppid || m->role || m->dropped || m->records ||
            m->num_records || m->last)
            return wire_dec_fail(d, "pid", "is set in a request");
        return STRATA_OK;
    }
    if (m->pid < 1 || m->pid > INT32_MAX)
        return wire_dec_fail(d, "pid", "is %u, not a process id", m->pid);
    if (m->ppid > INT32_MAX)
        return wire_dec_fail(d, "ppid", "is %u, not a process id", m->ppid);
    WIRE_TRY(wire_check_str(d, "role", m->role, 1, WIRE_TRACE_ROLE_MAX));
    if (m->num_records > WIRE_TRACE_RECS_MAX)
        return wire_dec_fail(d, "records", "holds %zu records, above %u",
                             m->num_records, WIRE_TRACE_RECS_MAX);
    if (m->num_records && !m->records)
        return wire_dec_fail(d, "records", "is NULL");
    return STRATA_OK;
}

static strata_err trace_read(struct wire_dec *d, const struct wire_body *b,
                             void *vm)
{
    struct wire_trace *m = vm;
    size_t len = 0;

    WIRE_TRY(wire_get_uint(d, WIRE_FIELD(b, TRACE_REQUEST_ID), 1, UINT64_MAX,
                           &m->request_id));
    for (unsigned k = TRACE_PID; k <= TRACE_LAST; k++)
        m->is_data |= b->val[k] != NULL;
    if (!m->is_data)
        return STRATA_OK;
    WIRE_TRY(wire_get_u32(d, WIRE_FIELD(b, TRACE_PID), 1, INT32_MAX, &m->pid));
    WIRE_TRY(
        wire_get_u32(d, WIRE_FIELD(b, TRACE_PPID), 0, INT32_MAX, &m->ppid));
    WIRE_TRY(wire_get_str(d, WIRE_FIELD(b, TRACE_ROLE), 1, WIRE_TRACE_ROLE_MAX,
                          &m->role));
    WIRE_TRY(wire_get_uint(d, WIRE_FIELD(b, TRACE_DROPPED), 0, UINT64_MAX,
                           &m->dropped));
    WIRE_TRY(wire_get_bin(d, WIRE_FIELD(b, TRACE_RECORDS), 0,
                          (size_t)WIRE_TRACE_RECS_MAX * WIRE_TRACE_REC_SIZE,
                          &m->records, &len));
    if (len % WIRE_TRACE_REC_SIZE)
        return wire_dec_fail(d, "records", "is %zu bytes, not a multiple of %u",
                             len, WIRE_TRACE_REC_SIZE);
    m->num_records = len / WIRE_TRACE_REC_SIZE;
    return wire_get_bool(d, WIRE_FIELD(b, TRACE_LAST), &m->last);
}

static void trace_write(struct wire_pk *p, const struct wire_trace *m)
{
    wire_pk_map(p, m->is_data ? 7 : 1);
    wire_pk_key_uint(p, TRACE_REQUEST_ID, m->request_id);
    if (!m->is_data)
        return;
    wire_pk_key_uint(p, TRACE_PID, m->pid);
    wire_pk_key_uint(p, TRACE_PPID, m->ppid);
    wire_pk_key_str(p, TRACE_ROLE, m->role);
    wire_pk_key_uint(p, TRACE_DROPPED, m->dropped);
    wire_pk_key_bin(p, TRACE_RECORDS, m->records,
                    m->num_records * WIRE_TRACE_REC_SIZE);
    wire_pk_key_bool(p, TRACE_LAST, m->last);
}

WIRE_DEFINE_CODEC(trace, TRACE)
