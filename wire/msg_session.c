/* Session messages: HELLO, HELLO_REPLY, HEARTBEAT, GOODBYE, HEALTH,
 * HEALTH_REPLY, and protocol version negotiation. */
#include "base/err.h"
#include "base/hostid.h"
#include "codec.h"

#include <string.h>

strata_err wire_proto_choose(unsigned our_min, unsigned our_max,
                             unsigned their_min, unsigned their_max,
                             uint16_t *version_out)
{
    unsigned lo = our_min > their_min ? our_min : their_min;
    unsigned hi = our_max < their_max ? our_max : their_max;

    if (lo == 0 || lo > hi || hi > UINT16_MAX)
        return base_fail(STRATA_EPROTO,
                         "HELLO: no common protocol version (ours %u..%u, "
                         "theirs %u..%u)",
                         our_min, our_max, their_min, their_max);
    *version_out = (uint16_t)hi;
    return STRATA_OK;
}

/* ---- HELLO -------------------------------------------------------------- */

enum {
    HELLO_PROTO_MIN = 1,
    HELLO_PROTO_MAX = 2,
    HELLO_CAPABILITIES = 3,
    HELLO_NODE_NAME = 4,
    HELLO_PID = 5,
    HELLO_PLATFORM = 6,
    HELLO_CHIP_IDS = 7,
    HELLO_NUM_SUB_WORKERS = 8,
    HELLO_COMM_PROFILE = 9,
    HELLO_GLOBAL_DEVICE_RANKS = 10,
    HELLO_STARTUP_BUDGET_MS = 11,
};

static const unsigned hello_nkeys = HELLO_STARTUP_BUDGET_MS;
static const char *const hello_names[] = {
    [HELLO_PROTO_MIN] = "proto_min",
    [HELLO_PROTO_MAX] = "proto_max",
    [HELLO_CAPABILITIES] = "capabilities",
    [HELLO_NODE_NAME] = "node_name",
    [HELLO_PID] = "pid",
    [HELLO_PLATFORM] = "platform",
    [HELLO_CHIP_IDS] = "chip_ids",
    [HELLO_NUM_SUB_WORKERS] = "num_sub_workers",
    [HELLO_COMM_PROFILE] = "comm_profile",
    [HELLO_GLOBAL_DEVICE_RANKS] = "global_device_ranks",
    [HELLO_STARTUP_BUDGET_MS] = "startup_budget_ms",
};

static strata_err hello_check(struct wire_dec *d, const void *vm)
{
    const struct wire_hello *m = vm;

    if (m->proto_min < 1 || m->proto_min > m->proto_max)
        return wire_dec_fail(d, "proto_min", "is %u, outside 1..proto_max (%u)",
                             m->proto_min, m->proto_max);
    WIRE_TRY(wire_check_str(d, "node_name", m->node_name, 1, WIRE_NAME_MAX));
    if (m->pid < 1 || m->pid > INT32_MAX)
        return wire_dec_fail(d, "pid", "is %u, not a process id", m->pid);
    WIRE_TRY(wire_check_str(d, "platform", m->platform, 1, WIRE_PROFILE_MAX));
    WIRE_TRY(wire_check_array(d, "chip_ids", m->chip_ids, m->num_chips,
                              WIRE_MAX_CHIPS));
    WIRE_TRY(wire_check_u32_set(d, "chip_ids", m->chip_ids, m->num_chips,
                                INT32_MAX, false));
    if (m->num_sub_workers > WIRE_MAX_SUBS)
        return wire_dec_fail(d, "num_sub_workers", "is %u, outside 0..%d",
                             m->num_sub_workers, WIRE_MAX_SUBS);
    WIRE_TRY(wire_check_str(d, "comm_profile", m->comm_profile, 1,
                            WIRE_PROFILE_MAX));
    if (m->global_device_ranks)
        WIRE_TRY(wire_check_u32_set(d, "global_device_ranks",
                                    m->global_device_ranks, m->num_chips,
                                    WIRE_DEVICE_RANK_MAX, false));
    return STRATA_OK;
}

static strata_err hello_read(struct wire_dec *d, const struct wire_body *b,
                             void *vm)
{
    struct wire_hello *m = vm;
    uint32_t v;
    size_t n;

    WIRE_TRY(
        wire_get_u32(d, WIRE_FIELD(b, HELLO_PROTO_MIN), 1, UINT16_MAX, &v));
    m->proto_min = (uint16_t)v;
    WIRE_TRY(
        wire_get_u32(d, WIRE_FIELD(b, HELLO_PROTO_MAX), 1, UINT16_MAX, &v));
    m->proto_max = (uint16_t)v;
    WIRE_TRY(wire_get_uint(d, WIRE_FIELD(b, HELLO_CAPABILITIES), 0, UINT64_MAX,
                           &m->capabilities));
    WIRE_TRY(wire_get_str(d, WIRE_FIELD(b, HELLO_NODE_NAME), 1, WIRE_NAME_MAX,
                          &m->node_name));
    WIRE_TRY(wire_get_u32(d, WIRE_FIELD(b, HELLO_PID), 1, INT32_MAX, &m->pid));
    WIRE_TRY(wire_get_str(d, WIRE_FIELD(b, HELLO_PLATFORM), 1, WIRE_PROFILE_MAX,
                          &m->platform));
    WIRE_TRY(wire_get_u32_list(d, WIRE_FIELD(b, HELLO_CHIP_IDS), 0,
                               WIRE_MAX_CHIPS, INT32_MAX, &m->chip_ids,
                               &m->num_chips));
    WIRE_TRY(wire_get_u32(d, WIRE_FIELD(b, HELLO_NUM_SUB_WORKERS), 0,
                          WIRE_MAX_SUBS, &m->num_sub_workers));
    WIRE_TRY(wire_get_str(d, WIRE_FIELD(b, HELLO_COMM_PROFILE), 1,
                          WIRE_PROFILE_MAX, &m->comm_profile));
    if (b->val[HELLO_GLOBAL_DEVICE_RANKS]) {
        WIRE_TRY(wire_get_u32_list(
            d, WIRE_FIELD(b, HELLO_GLOBAL_DEVICE_RANKS), m->num_chips,
            m->num_chips, WIRE_DEVICE_RANK_MAX, &m->global_device_ranks, &n));
    }
    if (b->val[HELLO_STARTUP_BUDGET_MS])
        WIRE_TRY(wire_get_uint(d, WIRE_FIELD(b, HELLO_STARTUP_BUDGET_MS), 1,
                               UINT64_MAX, &m->startup_budget_ms));
    return STRATA_OK;
}

static void hello_write(struct wire_pk *p, const struct wire_hello *m)
{
    bool ranks = m->global_device_ranks && m->num_chips;

    wire_pk_map(p, 9 + ranks + (m->startup_budget_ms != 0));
    wire_pk_key_uint(p, HELLO_PROTO_MIN, m->proto_min);
    wire_pk_key_uint(p, HELLO_PROTO_MAX, m->proto_max);
    wire_pk_key_uint(p, HELLO_CAPABILITIES, m->capabilities);
    wire_pk_key_str(p, HELLO_NODE_NAME, m->node_name);
    wire_pk_key_uint(p, HELLO_PID, m->pid);
    wire_pk_key_str(p, HELLO_PLATFORM, m->platform);
    wire_pk_uint(p, HELLO_CHIP_IDS);
    wire_pk_u32_list(p, m->chip_ids, m->num_chips);
    wire_pk_key_uint(p, HELLO_NUM_SUB_WORKERS, m->num_sub_workers);
    wire_pk_key_str(p, HELLO_COMM_PROFILE, m->comm_profile);
    if (ranks) {
        wire_pk_uint(p, HELLO_GLOBAL_DEVICE_RANKS);
        wire_pk_u32_list(p, m->global_device_ranks, m->num_chips);
    }
    if (m->startup_budget_ms)
        wire_pk_key_uint(p, HELLO_STARTUP_BUDGET_MS, m->startup_budget_ms);
}

WIRE_DEFINE_CODEC(hello, HELLO)

/* ---- HELLO_REPLY -------------------------------------------------------- */

enum {
    HELLO_REPLY_VERSION = 1,
    HELLO_REPLY_ERROR = 2,
    HELLO_REPLY_MESSAGE = 3,
    HELLO_REPLY_CAPABILITIES = 4,
    HELLO_REPLY_NODE_NAME = 5,
    HELLO_REPLY_PID = 6,
    HELLO_REPLY_BOOT_ID = 7,
    HELLO_REPLY_HELLO_RX_NS = 8,
    HELLO_REPLY_TIME_NS = 9,
};

static const unsigned hello_reply_nkeys = HELLO_REPLY_TIME_NS;
static const char *const hello_reply_names[] = {
    [HELLO_REPLY_VERSION] = "version",
    [HELLO_REPLY_ERROR] = "error",
    [HELLO_REPLY_MESSAGE] = "message",
    [HELLO_REPLY_CAPABILITIES] = "capabilities",
    [HELLO_REPLY_NODE_NAME] = "node_name",
    [HELLO_REPLY_PID] = "pid",
    [HELLO_REPLY_BOOT_ID] = "boot_id",
    [HELLO_REPLY_HELLO_RX_NS] = "hello_rx_ns",
    [HELLO_REPLY_TIME_NS] = "time_ns",
};

static strata_err hello_reply_check(struct wire_dec *d, const void *vm)
{
    const struct wire_hello_reply *m = vm;

    WIRE_TRY(wire_check_err(d, "error", m->error));
    WIRE_TRY(wire_check_opt_str(d, "message", m->message, WIRE_MESSAGE_MAX));
    if (m->error == STRATA_OK && m->version == 0)
        return wire_dec_fail(d, "version", "is 0 in an accepting reply");
    if (m->error != STRATA_OK && m->version != 0)
        return wire_dec_fail(d, "version", "is %u in a refusing reply",
                             m->version);
    if (m->error != STRATA_OK && !WIRE_HAS_STR(m->message))
        return wire_dec_fail(d, "message", "missing in a refusing reply");
    WIRE_TRY(wire_check_str(d, "node_name", m->node_name, 1, WIRE_NAME_MAX));
    if (m->pid < 1 || m->pid > INT32_MAX)
        return wire_dec_fail(d, "pid", "is %u, not a process id", m->pid);
    WIRE_TRY(wire_check_opt_str(d, "boot_id", m->boot_id, WIRE_BOOT_ID_MAX));
    if (WIRE_HAS_STR(m->boot_id) && !base_boot_id_valid(m->boot_id))
        return wire_dec_fail(d, "boot_id", "is not a boot id");
    if (!m->has_clock && (m->hello_rx_ns || m->time_ns))
        return wire_dec_fail(d, "time_ns", "is set without has_clock");
    if (m->has_clock && m->time_ns < m->hello_rx_ns)
        return wire_dec_fail(d, "time_ns", "is before hello_rx_ns");
    return STRATA_OK;
}

static strata_err hello_reply_read(struct wire_dec *d,
                                   const struct wire_body *b, void *vm)
{
    struct wire_hello_reply *m = vm;
    uint32_t v;

    WIRE_TRY(
        wire_get_u32(d, WIRE_FIELD(b, HELLO_REPLY_VERSION), 0, UINT16_MAX, &v));
    m->version = (uint16_t)v;
    WIRE_TRY(wire_get_err(d, WIRE_FIELD(b, HELLO_REPLY_ERROR), &m->error));
    WIRE_TRY(wire_get_opt_str(d, WIRE_FIELD(b, HELLO_REPLY_MESSAGE),
                              WIRE_MESSAGE_MAX, &m->message));
    WIRE_TRY(wire_get_uint(d, WIRE_FIELD(b, HELLO_REPLY_CAPABILITIES), 0,
                           UINT64_MAX, &m->capabilities));
    WIRE_TRY(wire_get_str(d, WIRE_FIELD(b, HELLO_REPLY_NODE_NAME), 1,
                          WIRE_NAME_MAX, &m->node_name));
    WIRE_TRY(
        wire_get_u32(d, WIRE_FIELD(b, HELLO_REPLY_PID), 1, INT32_MAX, &m->pid));
    WIRE_TRY(wire_get_opt_str(d, WIRE_FIELD(b, HELLO_REPLY_BOOT_ID),
                              WIRE_BOOT_ID_MAX, &m->boot_id));
    m->has_clock = b->val[HELLO_REPLY_HELLO_RX_NS] != NULL ||
                   b->val[HELLO_REPLY_TIME_NS] != NULL;
    if (!m->has_clock)
        return STRATA_OK;
    WIRE_TRY(wire_get_uint(d, WIRE_FIELD(b, HELLO_REPLY_HELLO_RX_NS), 0,
                           UINT64_MAX, &m->hello_rx_ns));
    return wire_get_uint(d, WIRE_FIELD(b, HELLO_REPLY_TIME_NS), 0, UINT64_MAX,
                         &m->time_ns);
}

static void hello_reply_write(struct wire_pk *p,
                              const struct wire_hello_reply *m)
{
    bool msg = WIRE_HAS_STR(m->message);
    bool boot = WIRE_HAS_STR(m->boot_id);

    wire_pk_map(p, 5 + msg + boot + 2 * m->has_clock);
    wire_pk_key_uint(p, HELLO_REPLY_VERSION, m->version);
    wire_pk_key_uint(p, HELLO_REPLY_ERROR, (uint64_t)m->error);
    if (msg)
        wire_pk_key_str(p, HELLO_REPLY_MESSAGE, m->message);
    wire_pk_key_uint(p, HELLO_REPLY_CAPABILITIES, m->capabilities);
    wire_pk_key_str(p, HELLO_REPLY_NODE_NAME, m->node_name);
    wire_pk_key_uint(p, HELLO_REPLY_PID, m->pid);
    if (boot)
        wire_pk_key_str(p, HELLO_REPLY_BOOT_ID, m->boot_id);
    if (m->has_clock) {
        wire_pk_key_uint(p, HELLO_REPLY_HELLO_RX_NS, m->hello_rx_ns);
        wire_pk_key_uint(p, HELLO_REPLY_TIME_NS, m->time_ns);
    }
}

WIRE_DEFINE_CODEC(hello_reply, HELLO_REPLY)

/* ---- HEARTBEAT ---------------------------------------------------------- */

enum {
    HEARTBEAT_SEQ = 1,
    HEARTBEAT_TIME_NS = 2,
    HEARTBEAT_ACK_SEQ = 3,
};

static const unsigned heartbeat_nkeys = HEARTBEAT_ACK_SEQ;
static const char *const heartbeat_names[] = {
    [HEARTBEAT_SEQ] = "seq",
    [HEARTBEAT_TIME_NS] = "time_ns",
    [HEARTBEAT_ACK_SEQ] = "ack_seq",
};

static strata_err heartbeat_check(struct wire_dec *d, const void *vm)
{
    const struct wire_heartbeat *m = vm;

    if (!m->has_ack && m->ack_seq != 0)
        return wire_dec_fail(d, "ack_seq", "is set without has_ack");
    return STRATA_OK;
}

static strata_err heartbeat_read(struct wire_dec *d, const struct wire_body *b,
                                 void *vm)
{
    struct wire_heartbeat *m = vm;

    WIRE_TRY(
        wire_get_uint(d, WIRE_FIELD(b, HEARTBEAT_SEQ), 0, UINT64_MAX, &m->seq));
    WIRE_TRY(wire_get_uint(d, WIRE_FIELD(b, HEARTBEAT_TIME_NS), 0, UINT64_MAX,
                           &m->time_ns));
    m->has_ack = b->val[HEARTBEAT_ACK_SEQ] != NULL;
    if (m->has_ack)
        WIRE_TRY(wire_get_uint(d, WIRE_FIELD(b, HEARTBEAT_ACK_SEQ), 0,
                               UINT64_MAX, &m->ack_seq));
    return STRATA_OK;
}

static void heartbeat_write(struct wire_pk *p, const struct wire_heartbeat *m)
{
    wire_pk_map(p, 2 + m->has_ack);
    wire_pk_key_uint(p, HEARTBEAT_SEQ, m->seq);
    wire_pk_key_uint(p, HEARTBEAT_TIME_NS, m->time_ns);
    if (m->has_ack)
        wire_pk_key_uint(p, HEARTBEAT_ACK_SEQ, m->ack_seq);
}

WIRE_DEFINE_CODEC(heartbeat, HEARTBEAT)

/* ---- GOODBYE ------------------------------------------------------------ */

enum {
    GOODBYE_REASON = 1,
    GOODBYE_MESSAGE = 2,
};

static const unsigned goodbye_nkeys = GOODBYE_MESSAGE;
static const char *const goodbye_names[] = {
    [GOODBYE_REASON] = "reason",
    [GOODBYE_MESSAGE] = "message",
};

static strata_err goodbye_check(struct wire_dec *d, const void *vm)
{
    const struct wire_goodbye *m = vm;

    WIRE_TRY(wire_check_err(d, "reason", m->reason));
    return wire_check_opt_str(d, "message", m->message, WIRE_MESSAGE_MAX);
}

static strata_err goodbye_read(struct wire_dec *d, const struct wire_body *b,
                               void *vm)
{
    struct wire_goodbye *m = vm;

    WIRE_TRY(wire_get_err(d, WIRE_FIELD(b, GOODBYE_REASON), &m->reason));
    return wire_get_opt_str(d, WIRE_FIELD(b, GOODBYE_MESSAGE), WIRE_MESSAGE_MAX,
                            &m->message);
}

static void goodbye_write(struct wire_pk *p, const struct wire_goodbye *m)
{
    bool msg = WIRE_HAS_STR(m->message);

    wire_pk_map(p, 1 + msg);
    wire_pk_key_uint(p, GOODBYE_REASON, (uint64_t)m->reason);
    if (msg)
        wire_pk_key_str(p, GOODBYE_MESSAGE, m->message);
}

WIRE_DEFINE_CODEC(goodbye, GOODBYE)

/* ---- HEALTH ------------------------------------------------------------- */

enum {
    HEALTH_NONCE = 1,
};

static const unsigned health_nkeys = HEALTH_NONCE;
static const char *const health_names[] = {
    [HEALTH_NONCE] = "nonce",
};

static strata_err health_check(struct wire_dec *d, const void *vm)
{
    (void)d;
    (void)vm;
    return STRATA_OK;
}

static strata_err health_read(struct wire_dec *d, const struct wire_body *b,
                              void *vm)
{
    struct wire_health *m = vm;

    return wire_get_uint(d, WIRE_FIELD(b, HEALTH_NONCE), 0, UINT64_MAX,
                         &m->nonce);
}

static void health_write(struct wire_pk *p, const struct wire_health *m)
{
    wire_pk_map(p, 1);
    wire_pk_key_uint(p, HEALTH_NONCE, m->nonce);
}

WIRE_DEFINE_CODEC(health, HEALTH)

/* ---- HEALTH_REPLY ------------------------------------------------------- */

enum {
    HEALTH_REPLY_NONCE = 1,
    HEALTH_REPLY_VERSION = 2,
    HEALTH_REPLY_PROTO_MIN = 3,
    HEALTH_REPLY_PROTO_MAX = 4,
    HEALTH_REPLY_SESSIONS = 5,
    HEALTH_REPLY_MAX_SESSIONS = 6,
    HEALTH_REPLY_MAX_PROCS = 7,
    HEALTH_REPLY_UPTIME_MS = 8,
    HEALTH_REPLY_PID = 9,
};

static const unsigned health_reply_nkeys = HEALTH_REPLY_PID;
static const char *const health_reply_names[] = {
    [HEALTH_REPLY_NONCE] = "nonce",
    [HEALTH_REPLY_VERSION] = "version",
    [HEALTH_REPLY_PROTO_MIN] = "proto_min",
    [HEALTH_REPLY_PROTO_MAX] = "proto_max",
    [HEALTH_REPLY_SESSIONS] = "sessions",
    [HEALTH_REPLY_MAX_SESSIONS] = "max_sessions",
    [HEALTH_REPLY_MAX_PROCS] = "max_procs",
    [HEALTH_REPLY_UPTIME_MS] = "uptime_ms",
    [HEALTH_REPLY_PID] = "pid",
};

static strata_err health_reply_check(struct wire_dec *d, const void *vm)
{
    const struct wire_health_reply *m = vm;

    WIRE_TRY(wire_check_str(d, "version", m->version, 1, WIRE_PROFILE_MAX));
    if (m->proto_min < 1)
        return wire_dec_fail(d, "proto_min", "is 0");
    if (m->proto_max < m->proto_min)
        return wire_dec_fail(d, "proto_max", "is %u, below proto_min %u",
                             m->proto_max, m->proto_min);
    if (m->max_sessions < 1)
        return wire_dec_fail(d, "max_sessions", "is 0");
    if (m->sessions > m->max_sessions)
        return wire_dec_fail(d, "sessions", "is %u, above max_sessions %u",
                             m->sessions, m->max_sessions);
    if (m->max_procs < 1)
        return wire_dec_fail(d, "max_procs", "is 0");
    if (m->pid < 1 || m->pid > INT32_MAX)
        return wire_dec_fail(d, "pid", "is %u, not a process id", m->pid);
    return STRATA_OK;
}

static strata_err health_reply_read(struct wire_dec *d,
                                    const struct wire_body *b, void *vm)
{
    struct wire_health_reply *m = vm;
    uint32_t v;

    WIRE_TRY(wire_get_uint(d, WIRE_FIELD(b, HEALTH_REPLY_NONCE), 0, UINT64_MAX,
                           &m->nonce));
    WIRE_TRY(wire_get_str(d, WIRE_FIELD(b, HEALTH_REPLY_VERSION), 1,
                          WIRE_PROFILE_MAX, &m->version));
    WIRE_TRY(wire_get_u32(d, WIRE_FIELD(b, HEALTH_REPLY_PROTO_MIN), 1,
                          UINT16_MAX, &v));
    m->proto_min = (uint16_t)v;
    WIRE_TRY(wire_get_u32(d, WIRE_FIELD(b, HEALTH_REPLY_PROTO_MAX), 1,
                          UINT16_MAX, &v));
    m->proto_max = (uint16_t)v;
    WIRE_TRY(wire_get_u32(d, WIRE_FIELD(b, HEALTH_REPLY_SESSIONS), 0,
                          UINT32_MAX, &m->sessions));
    WIRE_TRY(wire_get_u32(d, WIRE_FIELD(b, HEALTH_REPLY_MAX_SESSIONS), 1,
                          UINT32_MAX, &m->max_sessions));
    WIRE_TRY(wire_get_u32(d, WIRE_FIELD(b, HEALTH_REPLY_MAX_PROCS), 1,
                          UINT32_MAX, &m->max_procs));
    WIRE_TRY(wire_get_uint(d, WIRE_FIELD(b, HEALTH_REPLY_UPTIME_MS), 0,
                           UINT64_MAX, &m->uptime_ms));
    return wire_get_u32(d, WIRE_FIELD(b, HEALTH_REPLY_PID), 1, INT32_MAX,
                        &m->pid);
}

static void health_reply_write(struct wire_pk *p,
                               const struct wire_health_reply *m)
{
    wire_pk_map(p, 9);
    wire_pk_key_uint(p, HEALTH_REPLY_NONCE, m->nonce);
    wire_pk_key_str(p, HEALTH_REPLY_VERSION, m->version);
    wire_pk_key_uint(p, HEALTH_REPLY_PROTO_MIN, m->proto_min);
    wire_pk_key_uint(p, HEALTH_REPLY_PROTO_MAX, m->proto_max);
    wire_pk_key_uint(p, HEALTH_REPLY_SESSIONS, m->sessions);
    wire_pk_key_uint(p, HEALTH_REPLY_MAX_SESSIONS, m->max_sessions);
    wire_pk_key_uint(p, HEALTH_REPLY_MAX_PROCS, m->max_procs);
    wire_pk_key_uint(p, HEALTH_REPLY_UPTIME_MS, m->uptime_ms);
    wire_pk_key_uint(p, HEALTH_REPLY_PID, m->pid);
}

WIRE_DEFINE_CODEC(health_reply, HEALTH_REPLY)
