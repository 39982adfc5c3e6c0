/* Frames: the envelope around every message on a node connection, and the
 * growable byte buffer messages are packed into. Pure code: no I/O, no
 * threads, no global state. See docs/wire.md.
 *
 * A frame is a 12-byte header followed by a msgpack body. Every multi-byte
 * header field is big-endian (network order, as in msgpack itself):
 *
 *   offset size field
 *        0    4 magic     "STRA"
 *        4    1 version   WIRE_FRAME_VERSION
 *        5    1 type      enum wire_msg_type
 *        6    2 flags     reserved, zero in version 1
 *        8    4 body_len  bytes of msgpack body after the header
 *
 * A receiver reads the 12 header bytes, calls wire_frame_header_unpack
 * (which checks body_len against the type's maximum), and only then
 * allocates body_len bytes and reads the body. */
#ifndef WIRE_FRAME_H
#define WIRE_FRAME_H

#include <strata/strata.h>

#define WIRE_FRAME_MAGIC "STRA"
#define WIRE_FRAME_HEADER_SIZE 12
#define WIRE_FRAME_VERSION 1

/* Message types: one byte on the wire. Append, never renumber. */
enum wire_msg_type {
    WIRE_MSG_HELLO = 1,         /* parent -> node: versions, identity, config */
    WIRE_MSG_HELLO_REPLY = 2,   /* node -> parent: accepted or refused */
    WIRE_MSG_TASK = 3,          /* run a callable */
    WIRE_MSG_COMPLETION = 4,    /* a request's outcome */
    WIRE_MSG_DATA_CHUNK = 5,    /* up to 1 MiB of a tensor or buffer copy */
    WIRE_MSG_CONTROL = 6,       /* buffer ops, cancel, ping */
    WIRE_MSG_CONTROL_REPLY = 7, /* answers CONTROL and COMM_INIT */
    WIRE_MSG_HEARTBEAT = 8,     /* liveness, both directions */
    WIRE_MSG_GOODBYE = 9,       /* explicit close, both directions */
    WIRE_MSG_DOMAIN_CMD = 10,   /* global domain transaction phase */
    WIRE_MSG_DOMAIN_REPLY = 11, /* a node's answer to DOMAIN_CMD */
    WIRE_MSG_COMM_INIT = 12,    /* global communicator identity */
    WIRE_MSG_HEALTH = 13,       /* client -> daemon: health request */
    WIRE_MSG_HEALTH_REPLY = 14, /* daemon -> client: its health */
    WIRE_MSG_TRACE = 15,        /* trace records: request / answer */
};
#define WIRE_MSG_TYPE_MIN WIRE_MSG_HELLO
#define WIRE_MSG_TYPE_MAX WIRE_MSG_TRACE

/* A decoded frame header. */
struct wire_frame_header {
    uint8_t version;   /* WIRE_FRAME_VERSION */
    uint8_t type;      /* enum wire_msg_type */
    uint16_t flags;    /* zero */
    uint32_t body_len; /* 1..wire_frame_max_body(type) */
};

/* A growable byte buffer (heap via base_malloc). Zero-initialized or
 * wire_buf_init'ed storage is an empty buffer. Not thread-safe. */
struct wire_buf {
    uint8_t *data; /* NULL while cap == 0 */
    size_t len;    /* bytes in use */
    size_t cap;    /* bytes allocated */
};

void wire_buf_init(struct wire_buf *b);
/* Frees the storage; the buffer is empty and reusable afterwards. */
void wire_buf_fini(struct wire_buf *b);
/* Forgets the contents, keeps the storage. */
void wire_buf_reset(struct wire_buf *b);
/* Appends n bytes. STRATA_ENOMEM leaves b unchanged. */
STRATA_MUST_CHECK strata_err wire_buf_append(struct wire_buf *b,
                                             const void *src, size_t n);
/* Makes room for n more bytes. STRATA_ENOMEM leaves b unchanged. */
STRATA_MUST_CHECK strata_err wire_buf_reserve(struct wire_buf *b, size_t n);

/* "TASK" for WIRE_MSG_TASK; NULL for an unknown type. Any thread. */
const char *wire_msg_name(unsigned type);
/* The largest legal body of a message type; 0 for an unknown type. */
uint32_t wire_frame_max_body(unsigned type);

/* Writes h as 12 header bytes into dst. */
void wire_frame_header_pack(const struct wire_frame_header *h, void *dst);
/* Decodes and checks the first 12 bytes of src: magic, version, known
 * type, zero flags, 1 <= body_len <= wire_frame_max_body(type). Reads
 * nothing past src[11] and allocates nothing. STRATA_EPROTO (message names
 * the field) when len < 12 or any check fails; *out only on success. */
STRATA_MUST_CHECK strata_err wire_frame_header_unpack(
    const void *src, size_t len, struct wire_frame_header *out);

#endif
