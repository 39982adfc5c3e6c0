/* Message codecs for node connections: one msgpack map per message body,
 * small integer keys, strict decoders. Pure code: no I/O. The key tables,
 * types and limits are in docs/wire.md.
 *
 * Every message has three functions:
 *   wire_<msg>_pack(m, buf)   checks m and appends a whole frame (header +
 *                             body) to buf. STRATA_EINVAL naming the field
 *                             for a value the decoder would refuse,
 *                             STRATA_ENOMEM; buf is unchanged on failure.
 *   wire_<msg>_unpack(body, len, out)
 *                             decodes one frame body (without the header).
 *                             STRATA_EPROTO with a message that names the
 *                             message and field ("TASK: field 'digest' must
 *                             be bin of 32 bytes"), STRATA_ENOMEM. On
 *                             STRATA_OK *out owns its memory; otherwise
 *                             *out is untouched and nothing is held.
 *   wire_<msg>_free(m)        releases what unpack allocated (NULL, a
 *                             zeroed struct and a repeated call are fine).
 * A struct filled by the caller for pack may point anywhere; its arena
 * member must be zero. Any thread; no shared state. */
#ifndef WIRE_MSG_H
#define WIRE_MSG_H

#include "wire/frame.h"

/* Protocol versions this build speaks (negotiated in HELLO). */
#define WIRE_PROTO_MIN 1
#define WIRE_PROTO_MAX 2 /* 2: COMPLETION's not_run */

/* Limits (bytes exclude the terminating NUL). */
#define WIRE_NAME_MAX 255     /* node, domain, buffer names; handles */
#define WIRE_PROFILE_MAX 63   /* platform, comm/adapter/descriptor profiles */
#define WIRE_BOOT_ID_MAX 63   /* HELLO_REPLY boot_id (base/hostid.h) */
#define WIRE_MESSAGE_MAX 4095 /* error and goodbye messages */
#define WIRE_MAX_CHIPS 1024   /* chips on one node */
#define WIRE_MAX_SUBS 1024    /* sub workers on one node */
#define WIRE_CHUNK_MAX (1u << 20)       /* DATA_CHUNK payload */
#define WIRE_INLINE_MAX (1u << 20)      /* CONTROL inline data operand */
#define WIRE_DEVICE_RANK_MAX 0x7fffffff /* ids and ranks fit an int */

/* Decoded messages own their strings and arrays through this; it is the
 * first member of every message struct. Opaque. */
struct wire_arena {
    void *head;
};

/* ---- HELLO ---------------------------------------------------------- */

/* Capability bits. A receiver grants the intersection with its own set;
 * bits it does not know are ignored, never an error. */
#define WIRE_CAP_DATA_CHUNKS (1ull << 0)    /* tensor bytes via DATA_CHUNK */
#define WIRE_CAP_REMOTE_BUFFERS (1ull << 1) /* CONTROL buffer ops */
#define WIRE_CAP_GLOBAL_DOMAINS (1ull << 2) /* COMM_INIT, DOMAIN_CMD */
#define WIRE_CAP_DEADLINES (1ull << 3)      /* TASK deadline_ms honoured */
/* The parent takes HEARTBEATs before HELLO_REPLY: the node sends them
 * while its chips start. */
#define WIRE_CAP_STARTUP_HEARTBEATS (1ull << 4)
/* The parent records a timeline trace: the node records its session too
 * and sends the records back on a TRACE request (docs/tracing.md). */
#define WIRE_CAP_TRACE (1ull << 5)
/* The node runs DOMAIN_CMDs and COMM_INITs one at a time, in the order
 * sent: the parent may send a transaction's commands back to back. */
#define WIRE_CAP_ORDERED_DOMAIN_CMDS (1ull << 6)

/* The parent's opening message: who it is and the L3 it asks for. */
struct wire_hello {
    struct wire_arena arena;
    uint16_t proto_min; /* 1 <= proto_min <= proto_max */
    uint16_t proto_max;
    uint64_t capabilities;    /* WIRE_CAP_* */
    const char *node_name;    /* sender's host/node label, 1..255 bytes */
    uint32_t pid;             /* sender pid, 1..INT32_MAX */
    const char *platform;     /* chip platform ("sim"), 1..63 bytes */
    const uint32_t *chip_ids; /* num_chips unique ids <= INT32_MAX */
    size_t num_chips;         /* 0..WIRE_MAX_CHIPS */
    uint32_t num_sub_workers; /* 0..WIRE_MAX_SUBS */
    const char *comm_profile; /* "sim", 1..63 bytes */
    /* NULL when absent, else num_chips unique ranks <= INT32_MAX. */
    const uint32_t *global_device_ranks;
    uint64_t startup_budget_ms; /* startup time left; 0 = absent */
};

/* The node's answer. Accepted: error == STRATA_OK, version chosen.
 * Refused: error != STRATA_OK, version 0, message says why. */
struct wire_hello_reply {
    struct wire_arena arena;
    uint16_t version;      /* chosen protocol version, 0 when refused */
    strata_err error;      /* a known strata_err */
    const char *message;   /* 0..4095 bytes; non-empty when refused */
    uint64_t capabilities; /* granted WIRE_CAP_* */
    const char *node_name; /* the session's host/node label, 1..255 */
    uint32_t pid;          /* the session process, 1..INT32_MAX */
    /* optional: the node's boot id (base/hostid.h), 1..63 bytes of
     * [0-9a-zA-Z-]; with node_name it says which host the node is on */
    const char *boot_id;
    /* optional, both or neither (has_clock): the node's monotonic clock
     * (ns) when HELLO arrived and when this reply was sent, for the
     * parent's estimate of the offset between their clocks */
    bool has_clock;
    uint64_t hello_rx_ns;
    uint64_t time_ns; /* >= hello_rx_ns */
};

/* Picks the highest version in both [min, max] ranges: STRATA_OK and
 * *version_out, or STRATA_EPROTO naming both ranges. */
STRATA_MUST_CHECK strata_err wire_proto_choose(unsigned our_min,
                                               unsigned our_max,
                                               unsigned their_min,
                                               unsigned their_max,
                                               uint16_t *version_out);

/* ---- TASK, COMPLETION, DATA_CHUNK ----------------------------------- */

enum wire_target_kind {
    WIRE_TARGET_WORKER = 1, /* the session's L3 worker (orch callables) */
    WIRE_TARGET_CHIP = 2,   /* one chip of that worker */
    WIRE_TARGET_SUB = 3,    /* any sub worker of that worker */
};

/* Runs a callable. The tensors listed in data_tensors are followed by
 * their bytes as DATA_CHUNK frames with the same request_id. */
struct wire_task {
    struct wire_arena arena;
    uint64_t request_id; /* nonzero; unique among the sender's open ones */
    uint64_t run_id;
    uint8_t digest[32];  /* callable digest (SHA-256 of "kind:name") */
    const uint8_t *args; /* wire/args.h encoding, 8..WIRE_ARGS_MAX bytes */
    size_t args_len;
    uint8_t target;       /* enum wire_target_kind */
    uint32_t chip;        /* chip id when target == CHIP, else 0 */
    uint64_t deadline_ms; /* relative to receipt; 0 = no deadline */
    /* Strictly ascending tensor indexes < STRATA_MAX_TENSORS. */
    const uint32_t *data_tensors;
    size_t num_data_tensors;
};

/* A request's outcome. Its data_tensors' bytes follow as DATA_CHUNKs. */
struct wire_completion {
    struct wire_arena arena;
    uint64_t request_id;
    strata_err error;             /* a known strata_err */
    const char *message;          /* 0..4095 bytes */
    const uint32_t *data_tensors; /* as in wire_task; none on error */
    size_t num_data_tensors;
    bool not_run; /* the node never began it (error set): no callable */
};

/* Bytes [offset, offset + len) of one tensor (or buffer copy) of a
 * request. A chunk of 0 bytes is legal only as the last one. */
struct wire_data_chunk {
    struct wire_arena arena;
    uint64_t request_id;
    uint32_t tensor; /* tensor index < STRATA_MAX_TENSORS; 0 for copies */
    uint64_t offset; /* offset + len <= UINT64_MAX */
    const uint8_t *data;
    size_t len; /* 0..WIRE_CHUNK_MAX */
    bool last;  /* the tensor's final chunk */
};

/* ---- CONTROL, CONTROL_REPLY ----------------------------------------- */

enum wire_ctrl_op {
    WIRE_CTRL_PING = 1,   /* no operands */
    WIRE_CTRL_CANCEL = 2, /* request */
    /* nbytes [name] [buffer_id] -> buffer_id: a zeroed buffer that lives
     * on the node; the sender may choose its id (it echoes back). */
    WIRE_CTRL_BUFFER_CREATE = 3,
    WIRE_CTRL_BUFFER_RELEASE = 4, /* buffer_id */
    WIRE_CTRL_BUFFER_WRITE = 5,   /* buffer_id offset nbytes [data] */
    WIRE_CTRL_BUFFER_READ = 6,    /* buffer_id offset nbytes -> [data] */
    /* Bytes of a global domain member's window on the node. */
    WIRE_CTRL_WINDOW_WRITE = 7, /* domain_id rank offset nbytes data */
    WIRE_CTRL_WINDOW_READ = 8,  /* domain_id rank offset nbytes -> data */
};
#define WIRE_CTRL_OP_MAX WIRE_CTRL_WINDOW_READ

/* Operand keys (inside the operands and results maps), each one type. */
enum wire_operand {
    WIRE_OPND_REQUEST = 1,   /* uint: a request id (CANCEL) */
    WIRE_OPND_BUFFER_ID = 2, /* uint: a remote buffer */
    WIRE_OPND_OFFSET = 3,    /* uint: byte offset */
    WIRE_OPND_NBYTES = 4,    /* uint: byte count, >= 1 */
    WIRE_OPND_NAME = 5,      /* str: 1..255 bytes */
    WIRE_OPND_DATA = 6,      /* bin: 0..WIRE_INLINE_MAX bytes inline */
    WIRE_OPND_DOMAIN_ID = 7, /* uint: a global domain */
    WIRE_OPND_RANK = 8,      /* uint: a rank of it, < 2^31 */
};
#define WIRE_OPND_MAX WIRE_OPND_RANK
#define WIRE_OPND_BIT(k) (1u << (k))

/* A set of operands; a field is meaningful when its bit is in present. */
struct wire_operands {
    uint32_t present; /* WIRE_OPND_BIT(k) for each present key k */
    uint64_t request;
    uint64_t buffer_id;
    uint64_t offset;
    uint64_t nbytes;
    const char *name;
    const uint8_t *data;
    size_t data_len;
    uint64_t domain_id;
    uint32_t rank;
};

/* Which operands each op requires and allows (WIRE_OPND_BIT masks),
 * in requests and in successful replies. */
struct wire_ctrl_schema {
    uint32_t required;
    uint32_t optional;
    uint32_t result_required;
    uint32_t result_optional;
};
/* The schema of op; NULL for an unknown op. */
const struct wire_ctrl_schema *wire_ctrl_schema(unsigned op);
/* The name of op for logs ("BUFFER_READ"; "COMM_INIT" for 0); NULL when
 * unknown. */
const char *wire_ctrl_op_name(unsigned op);

struct wire_control {
    struct wire_arena arena;
    uint64_t request_id; /* nonzero */
    uint8_t op;          /* enum wire_ctrl_op */
    struct wire_operands operands;
};

/* Answers a CONTROL (op echoed) or a COMM_INIT (op 0). Results only when
 * error == STRATA_OK. */
struct wire_control_reply {
    struct wire_arena arena;
    uint64_t request_id;
    uint8_t op; /* the request's op; 0 for COMM_INIT */
    strata_err error;
    const char *message; /* 0..4095 bytes */
    struct wire_operands results;
};

/* ---- HEARTBEAT, GOODBYE --------------------------------------------- */

struct wire_heartbeat {
    struct wire_arena arena;
    uint64_t seq;     /* sender's counter, increasing */
    uint64_t time_ns; /* sender's monotonic clock */
    bool has_ack;
    uint64_t ack_seq; /* last seq received from the peer (if has_ack) */
};

/* Sent before closing; EOF without it is a peer failure. */
struct wire_goodbye {
    struct wire_arena arena;
    strata_err reason;   /* STRATA_OK = orderly close */
    const char *message; /* 0..4095 bytes */
};

/* ---- TRACE ---------------------------------------------------------- */

/* One record of a trace buffer on the wire: trace/trace_int.h's struct
 * trace_rec, little-endian (docs/wire.md). */
#define WIRE_TRACE_REC_SIZE 104u
#define WIRE_TRACE_RECS_MAX 8192u /* records per TRACE frame */
#define WIRE_TRACE_ROLE_MAX 63u

/* A request (parent -> node: request_id alone, is_data false) or a piece
 * of the answer (node -> parent): records of one process of the node's
 * session, times in the node's CLOCK_MONOTONIC ns. */
struct wire_trace {
    struct wire_arena arena;
    uint64_t request_id;    /* >= 1 */
    bool is_data;           /* keys 2..7 present */
    uint32_t pid;           /* the recording process, 1..INT32_MAX */
    uint32_t ppid;          /* its parent, 0..INT32_MAX */
    const char *role;       /* "chip 0", 1..63 bytes */
    uint64_t dropped;       /* records its buffer had no room for */
    const uint8_t *records; /* num_records * WIRE_TRACE_REC_SIZE bytes */
    size_t num_records;     /* 0..WIRE_TRACE_RECS_MAX */
    bool last;              /* the answer's final frame */
};

/* How a connection's end reads when the peer closed it without a
 * GOODBYE (wire_conn's reason, after the peer's address): a loss with no
 * cause given, which a caller may rank below one that says why. */
#define WIRE_NO_GOODBYE "closed the connection without GOODBYE"

/* ---- HEALTH, HEALTH_REPLY ------------------------------------------- */

/* The TLS server name (SNI) a health check sends, so that strata-node
 * answers it itself, with no session, before it reads a byte. */
#define WIRE_HEALTH_SERVER_NAME "strata-health"

/* A health check: the first and only message of an authenticated
 * connection to strata-node, answered by the daemon itself (no session). */
struct wire_health {
    struct wire_arena arena;
    uint64_t nonce; /* echoed in the reply */
};

/* The daemon's answer to HEALTH; it then closes the connection. */
struct wire_health_reply {
    struct wire_arena arena;
    uint64_t nonce;        /* the request's */
    const char *version;   /* strata's version, "0.1.0", 1..63 bytes */
    uint16_t proto_min;    /* 1 <= proto_min <= proto_max */
    uint16_t proto_max;    /* the wire protocol versions it speaks */
    uint32_t sessions;     /* sessions running now, <= max_sessions */
    uint32_t max_sessions; /* its --max-sessions, >= 1 */
    uint32_t max_procs;    /* per session: chips + sub workers, >= 1 */
    uint64_t uptime_ms;    /* since the daemon started listening */
    uint32_t pid;          /* the daemon, 1..INT32_MAX */
};

#define WIRE_DECLARE_CODEC(msg)                                                \
    STRATA_MUST_CHECK strata_err wire_##msg##_pack(const struct wire_##msg *m, \
                                                   struct wire_buf *out);      \
    STRATA_MUST_CHECK strata_err wire_##msg##_unpack(                          \
        const void *body, size_t len, struct wire_##msg *out);                 \
    void wire_##msg##_free(struct wire_##msg *m);

WIRE_DECLARE_CODEC(hello)
WIRE_DECLARE_CODEC(hello_reply)
WIRE_DECLARE_CODEC(task)
WIRE_DECLARE_CODEC(completion)
WIRE_DECLARE_CODEC(data_chunk)
WIRE_DECLARE_CODEC(control)
WIRE_DECLARE_CODEC(control_reply)
WIRE_DECLARE_CODEC(heartbeat)
WIRE_DECLARE_CODEC(goodbye)
WIRE_DECLARE_CODEC(health)
WIRE_DECLARE_CODEC(health_reply)
WIRE_DECLARE_CODEC(trace)

#include "wire/msg_domain.h"

/* ---- Any message ---------------------------------------------------- */

/* One decoded message of any type: type selects the union member. */
struct wire_msg {
    uint8_t type; /* enum wire_msg_type */
    union {
        struct wire_arena arena; /* first member of every alternative */
        struct wire_hello hello;
        struct wire_hello_reply hello_reply;
        struct wire_task task;
        struct wire_completion completion;
        struct wire_data_chunk data_chunk;
        struct wire_control control;
        struct wire_control_reply control_reply;
        struct wire_heartbeat heartbeat;
        struct wire_goodbye goodbye;
        struct wire_domain_cmd domain_cmd;
        struct wire_domain_reply domain_reply;
        struct wire_comm_init comm_init;
        struct wire_health health;
        struct wire_health_reply health_reply;
        struct wire_trace trace;
    } u;
};

/* Packs m by its type (contract of wire_<msg>_pack). */
STRATA_MUST_CHECK strata_err wire_msg_pack(const struct wire_msg *m,
                                           struct wire_buf *out);
/* Decodes a body of the given type (contract of wire_<msg>_unpack);
 * STRATA_EPROTO for an unknown type. */
STRATA_MUST_CHECK strata_err wire_msg_unpack(unsigned type, const void *body,
                                             size_t len, struct wire_msg *out);
/* Decodes one whole frame: header, then a body of exactly body_len bytes
 * ending at src + len (STRATA_EPROTO otherwise). */
STRATA_MUST_CHECK strata_err wire_frame_unpack(const void *src, size_t len,
                                               struct wire_msg *out);
void wire_msg_free(struct wire_msg *m);

#endif
