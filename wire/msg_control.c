/* Control messages: CONTROL and CONTROL_REPLY with their typed operand
 * maps, checked against a per-op schema. */
#include "codec.h"

#include <stdio.h>
#include <string.h>

#define B(k) WIRE_OPND_BIT(WIRE_OPND_##k)

/* Index 0 is the COMM_INIT reply: no operands, no results. */
static const struct wire_ctrl_schema schemas[WIRE_CTRL_OP_MAX + 1] = {
    [WIRE_CTRL_CANCEL] = {.required = B(REQUEST)},
    [WIRE_CTRL_BUFFER_CREATE] = {.required = B(NBYTES),
                                 .optional = B(NAME) | B(BUFFER_ID),
                                 .result_required = B(BUFFER_ID)},
    [WIRE_CTRL_BUFFER_RELEASE] = {.required = B(BUFFER_ID)},
    [WIRE_CTRL_BUFFER_WRITE] = {.required =
                                    B(BUFFER_ID) | B(OFFSET) | B(NBYTES),
                                .optional = B(DATA)},
    [WIRE_CTRL_BUFFER_READ] = {.required = B(BUFFER_ID) | B(OFFSET) | B(NBYTES),
                               .result_optional = B(DATA)},
    [WIRE_CTRL_WINDOW_WRITE] = {.required = B(DOMAIN_ID) | B(RANK) | B(OFFSET) |
                                            B(NBYTES) | B(DATA)},
    [WIRE_CTRL_WINDOW_READ] = {.required = B(DOMAIN_ID) | B(RANK) | B(OFFSET) |
                                           B(NBYTES),
                               .result_required = B(DATA)},
};

static const char *const op_names[WIRE_CTRL_OP_MAX + 1] = {
    [0] = "COMM_INIT",
    [WIRE_CTRL_PING] = "PING",
    [WIRE_CTRL_CANCEL] = "CANCEL",
    [WIRE_CTRL_BUFFER_CREATE] = "BUFFER_CREATE",
    [WIRE_CTRL_BUFFER_RELEASE] = "BUFFER_RELEASE",
    [WIRE_CTRL_BUFFER_WRITE] = "BUFFER_WRITE",
    [WIRE_CTRL_BUFFER_READ] = "BUFFER_READ",
    [WIRE_CTRL_WINDOW_WRITE] = "WINDOW_WRITE",
    [WIRE_CTRL_WINDOW_READ] = "WINDOW_READ",
};

const struct wire_ctrl_schema *wire_ctrl_schema(unsigned op)
{
    return op >= WIRE_CTRL_PING && op <= WIRE_CTRL_OP_MAX ? &schemas[op] : NULL;
}

/* ---- Operands ----------------------------------------------------------- */

static const char *const opnd_names[] = {
    [WIRE_OPND_REQUEST] = "request",     [WIRE_OPND_BUFFER_ID] = "buffer_id",
    [WIRE_OPND_OFFSET] = "offset",       [WIRE_OPND_NBYTES] = "nbytes",
    [WIRE_OPND_NAME] = "name",           [WIRE_OPND_DATA] = "data",
    [WIRE_OPND_DOMAIN_ID] = "domain_id", [WIRE_OPND_RANK] = "rank",
};

static const char *opnd_path(char *buf, size_t size, const char *field,
                             unsigned k)
{
    snprintf(buf, size, "%s.%s", field, opnd_names[k]);
    return buf;
}

static strata_err opnd_read(const struct wire_dec *d, const char *name,
                            unsigned k, const msgpack_object *o,
                            struct wire_operands *out)
{
    switch (k) {
    case WIRE_OPND_REQUEST:
        return wire_get_uint(d, name, o, 1, UINT64_MAX, &out->request);
    case WIRE_OPND_BUFFER_ID:
        return wire_get_uint(d, name, o, 0, UINT64_MAX, &out->buffer_id);
    case WIRE_OPND_OFFSET:
        return wire_get_uint(d, name, o, 0, UINT64_MAX, &out->offset);
    case WIRE_OPND_NBYTES:
        return wire_get_uint(d, name, o, 1, UINT64_MAX, &out->nbytes);
    case WIRE_OPND_NAME:
        return wire_get_str(d, name, o, 1, WIRE_NAME_MAX, &out->name);
    case WIRE_OPND_DOMAIN_ID:
        return wire_get_uint(d, name, o, 0, UINT64_MAX, &out->domain_id);
    case WIRE_OPND_RANK: {
        uint64_t v;

        WIRE_TRY(wire_get_uint(d, name, o, 0, WIRE_DEVICE_RANK_MAX, &v));
        out->rank = (uint32_t)v;
        return STRATA_OK;
    }
    default:
        return wire_get_bin(d, name, o, 0, WIRE_INLINE_MAX, &out->data,
                            &out->data_len);
    }
}

strata_err wire_operands_read(struct wire_dec *d, const char *field,
                              const msgpack_object *o,
                              struct wire_operands *out)
{
    const msgpack_object *vals[WIRE_OPND_MAX + 1];
    char name[48];

    memset(out, 0, sizeof(*out));
    if (!o)
        return STRATA_OK;
    WIRE_TRY(wire_dec_map(d, field, o, opnd_names, WIRE_OPND_MAX, vals));
    for (unsigned k = 1; k <= WIRE_OPND_MAX; k++) {
        if (!vals[k])
            continue;
        WIRE_TRY(opnd_read(d, opnd_path(name, sizeof(name), field, k), k,
                           vals[k], out));
        out->present |= WIRE_OPND_BIT(k);
    }
    return STRATA_OK;
}

strata_err wire_operands_check(const struct wire_dec *d, const char *field,
                               const struct wire_operands *ops,
                               uint32_t required, uint32_t optional)
{
    char name[48];

    for (unsigned k = 0; k < 32; k++) {
        uint32_t bit = (uint32_t)1 << k;
        bool known = k >= 1 && k <= WIRE_OPND_MAX;

        if ((ops->present & bit) && !((required | optional) & bit))
            return known
                       ? wire_dec_fail(d,
                                       opnd_path(name, sizeof(name), field, k),
                                       "not allowed for this op")
                       : wire_dec_fail(d, field, "has unknown operand %u", k);
        if ((required & bit) && !(ops->present & bit))
            return wire_dec_fail(d, opnd_path(name, sizeof(name), field, k),
                                 "missing");
    }
    if ((ops->present & B(NBYTES)) && ops->nbytes == 0)
        return wire_dec_fail(
            d, opnd_path(name, sizeof(name), field, WIRE_OPND_NBYTES), "is 0");
    if ((ops->present & B(REQUEST)) && ops->request == 0)
        return wire_dec_fail(
            d, opnd_path(name, sizeof(name), field, WIRE_OPND_REQUEST), "is 0");
    if (ops->present & B(NAME))
        WIRE_TRY(wire_check_str(
            d, opnd_path(name, sizeof(name), field, WIRE_OPND_NAME), ops->name,
            1, WIRE_NAME_MAX));
    if ((ops->present & B(DATA)) &&
        (ops->data_len > WIRE_INLINE_MAX || (ops->data_len && !ops->data)))
        return wire_dec_fail(
            d, opnd_path(name, sizeof(name), field, WIRE_OPND_DATA),
            "must be bin of 0..%u bytes", WIRE_INLINE_MAX);
    return STRATA_OK;
}

void wire_operands_pack(struct wire_pk *p, const struct wire_operands *ops)
{
    wire_pk_map(p, (size_t)__builtin_popcount(ops->present));
    if (ops->present & B(REQUEST))
        wire_pk_key_uint(p, WIRE_OPND_REQUEST, ops->request);
    if (ops->present & B(BUFFER_ID))
        wire_pk_key_uint(p, WIRE_OPND_BUFFER_ID, ops->buffer_id);
    if (ops->present & B(OFFSET))
        wire_pk_key_uint(p, WIRE_OPND_OFFSET, ops->offset);
    if (ops->present & B(NBYTES))
        wire_pk_key_uint(p, WIRE_OPND_NBYTES, ops->nbytes);
    if (ops->present & B(NAME))
        wire_pk_key_str(p, WIRE_OPND_NAME, ops->name);
    if (ops->present & B(DATA))
        wire_pk_key_bin(p, WIRE_OPND_DATA, ops->data, ops->data_len);
    if (ops->present & B(DOMAIN_ID))
        wire_pk_key_uint(p, WIRE_OPND_DOMAIN_ID, ops->domain_id);
    if (ops->present & B(RANK))
        wire_pk_key_uint(p, WIRE_OPND_RANK, ops->rank);
}

/* ---- CONTROL ------------------------------------------------------------ */

enum {
    CONTROL_REQUEST_ID = 1,
    CONTROL_OP = 2,
    CONTROL_OPERANDS = 3,
};

static const unsigned control_nkeys = CONTROL_OPERANDS;
static const char *const control_names[] = {
    [CONTROL_REQUEST_ID] = "request_id",
    [CONTROL_OP] = "op",
    [CONTROL_OPERANDS] = "operands",
};

static strata_err control_check(struct wire_dec *d, const void *vm)
{
    const struct wire_control *m = vm;
    const struct wire_ctrl_schema *s = wire_ctrl_schema(m->op);
    const struct wire_operands *o = &m->operands;

    if (m->request_id == 0)
        return wire_dec_fail(d, "request_id", "is 0");
    if (!s)
        return wire_dec_fail(d, "op", "has unknown value %u", m->op);
    WIRE_TRY(wire_operands_check(d, "operands", o, s->required, s->optional));
    if ((m->op == WIRE_CTRL_BUFFER_WRITE || m->op == WIRE_CTRL_WINDOW_WRITE) &&
        (o->present & B(DATA)) && o->data_len != o->nbytes)
        return wire_dec_fail(d, "operands.data",
                             "holds %zu bytes, nbytes says %llu", o->data_len,
                             (unsigned long long)o->nbytes);
    return STRATA_OK;
}

static strata_err control_read(struct wire_dec *d, const struct wire_body *b,
                               void *vm)
{
    struct wire_control *m = vm;

    WIRE_TRY(wire_get_uint(d, WIRE_FIELD(b, CONTROL_REQUEST_ID), 1, UINT64_MAX,
                           &m->request_id));
    WIRE_TRY(wire_get_enum(d, WIRE_FIELD(b, CONTROL_OP), WIRE_CTRL_PING,
                           WIRE_CTRL_OP_MAX, &m->op));
    return wire_operands_read(d, WIRE_FIELD(b, CONTROL_OPERANDS), &m->operands);
}

static void control_write(struct wire_pk *p, const struct wire_control *m)
{
    bool ops = m->operands.present != 0;

    wire_pk_map(p, 2 + ops);
    wire_pk_key_uint(p, CONTROL_REQUEST_ID, m->request_id);
    wire_pk_key_uint(p, CONTROL_OP, m->op);
    if (ops) {
        wire_pk_uint(p, CONTROL_OPERANDS);
        wire_operands_pack(p, &m->operands);
    }
}

WIRE_DEFINE_CODEC(control, CONTROL)

/* ---- CONTROL_REPLY ------------------------------------------------------ */

enum {
    CONTROL_REPLY_REQUEST_ID = 1,
    CONTROL_REPLY_OP = 2,
    CONTROL_REPLY_ERROR = 3,
    CONTROL_REPLY_MESSAGE = 4,
    CONTROL_REPLY_RESULTS = 5,
};

static const unsigned control_reply_nkeys = CONTROL_REPLY_RESULTS;
static const char *const control_reply_names[] = {
    [CONTROL_REPLY_REQUEST_ID] = "request_id",
    [CONTROL_REPLY_OP] = "op",
    [CONTROL_REPLY_ERROR] = "error",
    [CONTROL_REPLY_MESSAGE] = "message",
    [CONTROL_REPLY_RESULTS] = "results",
};

static strata_err control_reply_check(struct wire_dec *d, const void *vm)
{
    const struct wire_control_reply *m = vm;
    const struct wire_ctrl_schema *s;

    if (m->request_id == 0)
        return wire_dec_fail(d, "request_id", "is 0");
    if (m->op > WIRE_CTRL_OP_MAX)
        return wire_dec_fail(d, "op", "has unknown value %u", m->op);
    s = &schemas[m->op];
    WIRE_TRY(wire_check_err(d, "error", m->error));
    WIRE_TRY(wire_check_opt_str(d, "message", m->message, WIRE_MESSAGE_MAX));
    if (m->error != STRATA_OK) {
        if (m->results.present)
            return wire_dec_fail(d, "results", "not allowed in a failed reply");
        return STRATA_OK;
    }
    return wire_operands_check(d, "results", &m->results, s->result_required,
                               s->result_optional);
}

static strata_err control_reply_read(struct wire_dec *d,
                                     const struct wire_body *b, void *vm)
{
    struct wire_control_reply *m = vm;

    WIRE_TRY(wire_get_uint(d, WIRE_FIELD(b, CONTROL_REPLY_REQUEST_ID), 1,
                           UINT64_MAX, &m->request_id));
    WIRE_TRY(wire_get_enum(d, WIRE_FIELD(b, CONTROL_REPLY_OP), 0,
                           WIRE_CTRL_OP_MAX, &m->op));
    WIRE_TRY(wire_get_err(d, WIRE_FIELD(b, CONTROL_REPLY_ERROR), &m->error));
    WIRE_TRY(wire_get_opt_str(d, WIRE_FIELD(b, CONTROL_REPLY_MESSAGE),
                              WIRE_MESSAGE_MAX, &m->message));
    return wire_operands_read(d, WIRE_FIELD(b, CONTROL_REPLY_RESULTS),
                              &m->results);
}

static void control_reply_write(struct wire_pk *p,
                                const struct wire_control_reply *m)
{
    bool msg = WIRE_HAS_STR(m->message);
    bool res = m->results.present != 0;

    wire_pk_map(p, 3 + msg + res);
    wire_pk_key_uint(p, CONTROL_REPLY_REQUEST_ID, m->request_id);
    wire_pk_key_uint(p, CONTROL_REPLY_OP, m->op);
    wire_pk_key_uint(p, CONTROL_REPLY_ERROR, (uint64_t)m->error);
    if (msg)
        wire_pk_key_str(p, CONTROL_REPLY_MESSAGE, m->message);
    if (res) {
        wire_pk_uint(p, CONTROL_REPLY_RESULTS);
        wire_operands_pack(p, &m->results);
    }
}

WIRE_DEFINE_CODEC(control_reply, CONTROL_REPLY)

const char *wire_ctrl_op_name(unsigned op)
{
    return op <= WIRE_CTRL_OP_MAX ? op_names[op] : NULL;
}
