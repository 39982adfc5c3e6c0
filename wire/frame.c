/* Frame headers, byte buffers, the per-type limits, and dispatch of any
 * message to its codec. */
#include "base/alloc.h"
#include "base/err.h"
#include "codec.h"
#include "wire/args.h"

#include <inttypes.h>
#include <string.h>

/* Every message, as (TYPE suffix, codec name). */
#define WIRE_MSGS(X)                                                           \
    X(HELLO, hello)                                                            \
    X(HELLO_REPLY, hello_reply)                                                \
    X(TASK, task)                                                              \
    X(COMPLETION, completion)                                                  \
    X(DATA_CHUNK, data_chunk)                                                  \
    X(CONTROL, control)                                                        \
    X(CONTROL_REPLY, control_reply)                                            \
    X(HEARTBEAT, heartbeat)                                                    \
    X(GOODBYE, goodbye)                                                        \
    X(DOMAIN_CMD, domain_cmd)                                                  \
    X(DOMAIN_REPLY, domain_reply)                                              \
    X(COMM_INIT, comm_init)                                                    \
    X(HEALTH, health)                                                          \
    X(HEALTH_REPLY, health_reply)                                              \
    X(TRACE, trace)

/* Body limits, sized from the field limits in msg.h with headroom, so a
 * message within those limits always packs. max_objects bounds msgpack-c's
 * parse tree (24 bytes per object); 0 = bounded by the body size alone. */
static const struct {
    const char *name;
    uint32_t max_body;
    uint32_t max_objects;
} types[WIRE_MSG_TYPE_MAX + 1] = {
    [WIRE_MSG_HELLO] = {"HELLO", 16u << 10, 0},
    [WIRE_MSG_HELLO_REPLY] = {"HELLO_REPLY", 8u << 10, 0},
    [WIRE_MSG_TASK] = {"TASK", WIRE_ARGS_MAX + (4u << 10), 0},
    [WIRE_MSG_COMPLETION] = {"COMPLETION", 8u << 10, 0},
    [WIRE_MSG_DATA_CHUNK] = {"DATA_CHUNK", WIRE_CHUNK_MAX + 64, 0},
    [WIRE_MSG_CONTROL] = {"CONTROL", WIRE_INLINE_MAX + (1u << 10), 0},
    [WIRE_MSG_CONTROL_REPLY] = {"CONTROL_REPLY", WIRE_INLINE_MAX + (8u << 10),
                                0},
    [WIRE_MSG_HEARTBEAT] = {"HEARTBEAT", 64, 0},
    [WIRE_MSG_GOODBYE] = {"GOODBYE", 8u << 10, 0},
    [WIRE_MSG_DOMAIN_CMD] = {"DOMAIN_CMD", 8u << 20, 512u << 10},
    [WIRE_MSG_DOMAIN_REPLY] = {"DOMAIN_REPLY", 512u << 10, 0},
    [WIRE_MSG_COMM_INIT] = {"COMM_INIT", 16u << 10, 0},
    [WIRE_MSG_HEALTH] = {"HEALTH", 64, 0},
    [WIRE_MSG_HEALTH_REPLY] = {"HEALTH_REPLY", 512, 0},
    [WIRE_MSG_TRACE] = {"TRACE",
                        WIRE_TRACE_RECS_MAX *WIRE_TRACE_REC_SIZE + 1024, 0},
};

const char *wire_msg_name(unsigned type)
{
    return type <= WIRE_MSG_TYPE_MAX ? types[type].name : NULL;
}

uint32_t wire_frame_max_body(unsigned type)
{
    return type <= WIRE_MSG_TYPE_MAX ? types[type].max_body : 0;
}

uint32_t wire_msg_max_objects(unsigned type)
{
    if (type > WIRE_MSG_TYPE_MAX)
        return 0;
    return types[type].max_objects ? types[type].max_objects
                                   : types[type].max_body;
}

/* ---- Buffers ------------------------------------------------------------ */

void wire_buf_init(struct wire_buf *b)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

void wire_buf_fini(struct wire_buf *b)
{
    base_free(b->data);
    wire_buf_init(b);
}

void wire_buf_reset(struct wire_buf *b)
{
    b->len = 0;
}

strata_err wire_buf_reserve(struct wire_buf *b, size_t n)
{
    size_t cap = b->cap ? b->cap : 256;
    uint8_t *p;

    if (n <= b->cap - b->len)
        return STRATA_OK;
    if (n > SIZE_MAX / 2 - b->len)
        return base_fail(STRATA_ENOMEM, "wire buffer: %zu bytes too many", n);
    while (cap - b->len < n)
        cap *= 2;
    p = base_realloc(b->data, cap);
    if (!p)
        return base_fail(STRATA_ENOMEM,
                         "wire buffer: out of memory (%zu "
                         "bytes)",
                         cap);
    b->data = p;
    b->cap = cap;
    return STRATA_OK;
}

strata_err wire_buf_append(struct wire_buf *b, const void *src, size_t n)
{
    WIRE_TRY(wire_buf_reserve(b, n));
    if (n)
        memcpy(b->data + b->len, src, n);
    b->len += n;
    return STRATA_OK;
}

/* ---- Frame header ------------------------------------------------------- */

void wire_frame_header_pack(const struct wire_frame_header *h, void *dst)
{
    uint8_t *p = dst;

    memcpy(p, WIRE_FRAME_MAGIC, 4);
    p[4] = h->version;
    p[5] = h->type;
    p[6] = (uint8_t)(h->flags >> 8);
    p[7] = (uint8_t)h->flags;
    p[8] = (uint8_t)(h->body_len >> 24);
    p[9] = (uint8_t)(h->body_len >> 16);
    p[10] = (uint8_t)(h->body_len >> 8);
    p[11] = (uint8_t)h->body_len;
}

strata_err wire_frame_header_unpack(const void *src, size_t len,
                                    struct wire_frame_header *out)
{
    const uint8_t *p = src;
    struct wire_frame_header h;

    if (!src || len < WIRE_FRAME_HEADER_SIZE)
        return base_fail(STRATA_EPROTO,
                         "frame: header truncated (%zu of %d bytes)",
                         src ? len : 0, WIRE_FRAME_HEADER_SIZE);
    if (memcmp(p, WIRE_FRAME_MAGIC, 4) != 0)
        return base_fail(STRATA_EPROTO,
                         "frame: field 'magic' is %02x%02x%02x%02x, not "
                         "\"STRA\"",
                         p[0], p[1], p[2], p[3]);
    h.version = p[4];
    h.type = p[5];
    h.flags = (uint16_t)(p[6] << 8 | p[7]);
    h.body_len = (uint32_t)p[8] << 24 | (uint32_t)p[9] << 16 |
                 (uint32_t)p[10] << 8 | p[11];
    if (h.version != WIRE_FRAME_VERSION)
        return base_fail(STRATA_EPROTO,
                         "frame: field 'version' is %u, this build speaks %d",
                         h.version, WIRE_FRAME_VERSION);
    if (!wire_msg_name(h.type))
        return base_fail(STRATA_EPROTO, "frame: field 'type' %u is unknown",
                         h.type);
    if (h.flags != 0)
        return base_fail(STRATA_EPROTO,
                         "frame: field 'flags' is 0x%04x, reserved bits must "
                         "be zero",
                         h.flags);
    if (h.body_len == 0 || h.body_len > wire_frame_max_body(h.type))
        return base_fail(STRATA_EPROTO,
                         "frame: field 'body_len' is %" PRIu32
                         ", outside 1..%" PRIu32 " for %s",
                         h.body_len, wire_frame_max_body(h.type),
                         wire_msg_name(h.type));
    *out = h;
    return STRATA_OK;
}

/* ---- Any message -------------------------------------------------------- */

strata_err wire_msg_pack(const struct wire_msg *m, struct wire_buf *out)
{
    switch (m->type) {
#define WIRE_PACK_CASE_(T, n)                                                  \
    case WIRE_MSG_##T:                                                         \
        return wire_##n##_pack(&m->u.n, out);
        WIRE_MSGS(WIRE_PACK_CASE_)
#undef WIRE_PACK_CASE_
    }
    return base_fail(STRATA_EINVAL, "frame: message type %u is unknown",
                     m->type);
}

strata_err wire_msg_unpack(unsigned type, const void *body, size_t len,
                           struct wire_msg *out)
{
    struct wire_msg m;
    strata_err err;

    memset(&m, 0, sizeof(m));
    switch (type) {
#define WIRE_UNPACK_CASE_(T, n)                                                \
    case WIRE_MSG_##T:                                                         \
        err = wire_##n##_unpack(body, len, &m.u.n);                            \
        break;
        WIRE_MSGS(WIRE_UNPACK_CASE_)
#undef WIRE_UNPACK_CASE_
    default:
        return base_fail(STRATA_EPROTO, "frame: message type %u is unknown",
                         type);
    }
    if (err != STRATA_OK)
        return err;
    m.type = (uint8_t)type;
    *out = m;
    return STRATA_OK;
}

strata_err wire_frame_unpack(const void *src, size_t len, struct wire_msg *out)
{
    struct wire_frame_header h = {0};

    WIRE_TRY(wire_frame_header_unpack(src, len, &h));
    if (len - WIRE_FRAME_HEADER_SIZE != h.body_len)
        return base_fail(STRATA_EPROTO,
                         "frame: %zu body bytes follow a header that says "
                         "%" PRIu32,
                         len - WIRE_FRAME_HEADER_SIZE, h.body_len);
    return wire_msg_unpack(
        h.type, (const uint8_t *)src + WIRE_FRAME_HEADER_SIZE, h.body_len, out);
}

void wire_msg_free(struct wire_msg *m)
{
    if (m)
        wire_arena_fini(&m->u.arena);
}
