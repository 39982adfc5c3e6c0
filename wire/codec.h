/* Private helpers shared by the message codecs: the decode context with
 * its error formatting, the arena decoded messages own, the bounded
 * msgpack parse of a body, typed field getters, and a msgpack packer
 * that writes frames into a wire_buf. */
#ifndef WIRE_CODEC_H
#define WIRE_CODEC_H

#include "wire/msg.h"

#include <msgpack.h>

/* Deepest nesting any message uses is 5 (domain attachment entries). */
#define WIRE_MAX_DEPTH 8
/* Keys of the largest message map; key 0 is never valid. */
#define WIRE_MAX_KEYS 16

#define WIRE_TRY(expr)                                                         \
    do {                                                                       \
        strata_err try_err_ = (expr);                                          \
        if (try_err_ != STRATA_OK)                                             \
            return try_err_;                                                   \
    } while (0)

/* Where a check or decode is: the message, the failure code (EPROTO when
 * decoding, EINVAL when packing) and the current element path, so that
 * errors read "DOMAIN_CMD: field 'members[3].domain_rank' ...". */
struct wire_dec {
    const char *msg;
    strata_err code;
    struct wire_arena *arena; /* NULL when packing */
    const char *outer;        /* enclosing array, or NULL */
    long i;                   /* index in outer */
    const char *inner;        /* array inside outer[i], or NULL */
    long j;                   /* index in inner */
};

void wire_dec_init(struct wire_dec *d, unsigned type, strata_err code,
                   struct wire_arena *arena);
/* Records "MSG: field 'path' <what>" (or "MSG: <what>" when field and the
 * path are empty) and returns d->code. */
strata_err wire_dec_fail(const struct wire_dec *d, const char *field,
                         const char *fmt, ...) STRATA_PRINTF(3, 4);
/* Enters element i of array outer (inner = NULL) or element j of inner. */
void wire_dec_enter(struct wire_dec *d, const char *outer, long i);
void wire_dec_enter_inner(struct wire_dec *d, const char *inner, long j);
void wire_dec_leave(struct wire_dec *d);

/* Arena: 8-byte aligned, zeroed bumps from base_malloc'ed blocks. */
void *wire_arena_alloc(struct wire_arena *a, size_t size);
void wire_arena_fini(struct wire_arena *a);

/* A body parsed into a msgpack tree, with the map's values by key. */
struct wire_body {
    msgpack_unpacked up;
    const char *const *names; /* names[k] for keys 1..nkeys */
    unsigned nkeys;
    const msgpack_object *val[WIRE_MAX_KEYS + 1]; /* NULL = absent */
};

/* Checks that a map holds only keys 1..nkeys with a name, each once, and
 * fills vals[k]. field names the map ("" for the body). */
strata_err wire_dec_map(const struct wire_dec *d, const char *field,
                        const msgpack_object *o, const char *const *names,
                        unsigned nkeys, const msgpack_object **vals);

typedef strata_err (*wire_read_fn)(struct wire_dec *d,
                                   const struct wire_body *b, void *m);
typedef strata_err (*wire_check_fn)(struct wire_dec *d, const void *m);

/* The whole decode of one body: size and msgpack structure checks before
 * any allocation (declared lengths against the bytes left, depth, object
 * count, no trailing bytes), the msgpack-c parse, the key map, then read
 * and check. m is the caller's zeroed struct, arena its arena; on failure
 * the arena is released. */
strata_err wire_unpack_body(unsigned type, const void *src, size_t len,
                            const char *const *names, unsigned nkeys,
                            wire_read_fn read, wire_check_fn check, void *m,
                            struct wire_arena *arena);

/* Getters: o NULL means the field is absent ("missing"). Strings and bins
 * are copied into the arena (strings NUL-terminated, no NUL inside). */
strata_err wire_get_uint(const struct wire_dec *d, const char *field,
                         const msgpack_object *o, uint64_t min, uint64_t max,
                         uint64_t *out);
strata_err wire_get_u32(const struct wire_dec *d, const char *field,
                        const msgpack_object *o, uint32_t min, uint32_t max,
                        uint32_t *out);
strata_err wire_get_enum(const struct wire_dec *d, const char *field,
                         const msgpack_object *o, unsigned min, unsigned max,
                         uint8_t *out);
strata_err wire_get_err(const struct wire_dec *d, const char *field,
                        const msgpack_object *o, strata_err *out);
strata_err wire_get_bool(const struct wire_dec *d, const char *field,
                         const msgpack_object *o, bool *out);
strata_err wire_get_str(const struct wire_dec *d, const char *field,
                        const msgpack_object *o, size_t min, size_t max,
                        const char **out);
/* An optional string: absent gives "". */
strata_err wire_get_opt_str(const struct wire_dec *d, const char *field,
                            const msgpack_object *o, size_t max,
                            const char **out);
strata_err wire_get_bin(const struct wire_dec *d, const char *field,
                        const msgpack_object *o, size_t min, size_t max,
                        const uint8_t **out, size_t *len);
strata_err wire_get_array(const struct wire_dec *d, const char *field,
                          const msgpack_object *o, size_t min, size_t max,
                          const msgpack_object **items, size_t *n);
/* An array of exactly n elements (a fixed-arity record). */
strata_err wire_get_tuple(const struct wire_dec *d, const char *field,
                          const msgpack_object *o, size_t n,
                          const msgpack_object **items);
/* An array of uints <= max, copied into the arena. */
strata_err wire_get_u32_list(const struct wire_dec *d, const char *field,
                             const msgpack_object *o, size_t min_n,
                             size_t max_n, uint32_t max, const uint32_t **out,
                             size_t *n);

/* Checks shared by pack and unpack. */
bool wire_err_known(uint64_t v);
strata_err wire_check_str(const struct wire_dec *d, const char *field,
                          const char *s, size_t min, size_t max);
/* An optional string: NULL or 0..max bytes. */
strata_err wire_check_opt_str(const struct wire_dec *d, const char *field,
                              const char *s, size_t max);
strata_err wire_check_err(const struct wire_dec *d, const char *field,
                          strata_err e);
/* Non-NULL array pointer when n > 0. */
strata_err wire_check_array(const struct wire_dec *d, const char *field,
                            const void *p, size_t n, size_t max);
/* n values, each <= max; unique (strictly ascending if ascending). */
strata_err wire_check_u32_set(const struct wire_dec *d, const char *field,
                              const uint32_t *v, size_t n, uint32_t max,
                              bool ascending);

/* A packer appending one frame to a wire_buf. Errors are sticky: the pack
 * calls never fail individually; wire_pk_end reports and rolls back. */
struct wire_pk {
    msgpack_packer pk;
    struct wire_buf *buf;
    size_t start; /* buf->len before the frame */
    bool nomem;
};

void wire_pk_begin(struct wire_pk *p, struct wire_buf *buf);
/* Fills the header of type; STRATA_ENOMEM or STRATA_EINVAL (body larger
 * than the type's maximum) restore buf->len. */
strata_err wire_pk_end(struct wire_pk *p, unsigned type);
void wire_pk_map(struct wire_pk *p, size_t n);
void wire_pk_array(struct wire_pk *p, size_t n);
void wire_pk_uint(struct wire_pk *p, uint64_t v);
void wire_pk_bool(struct wire_pk *p, bool v);
void wire_pk_str(struct wire_pk *p, const char *s);
void wire_pk_bin(struct wire_pk *p, const void *data, size_t n);
void wire_pk_u32_list(struct wire_pk *p, const uint32_t *v, size_t n);
/* A map entry: the key, then the value. */
void wire_pk_key_uint(struct wire_pk *p, unsigned key, uint64_t v);
void wire_pk_key_bool(struct wire_pk *p, unsigned key, bool v);
void wire_pk_key_str(struct wire_pk *p, unsigned key, const char *s);
void wire_pk_key_bin(struct wire_pk *p, unsigned key, const void *data,
                     size_t n);

/* A field of a wire_body by key: its name and its value (NULL = absent),
 * as the getters take them. */
#define WIRE_FIELD(b, k) (b)->names[k], (b)->val[k]

/* True for an optional string that is present (non-NULL, non-empty). */
#define WIRE_HAS_STR(s) ((s) != NULL && (s)[0] != '\0')

/* Defines wire_<msg>_pack from <msg>_check and <msg>_write, and
 * wire_<msg>_unpack / wire_<msg>_free from <msg>_read, <msg>_check and the
 * key table <msg>_names[1..<msg>_nkeys]. */
#define WIRE_DEFINE_CODEC(msg, TYPE)                                           \
    strata_err wire_##msg##_pack(const struct wire_##msg *m,                   \
                                 struct wire_buf *out)                         \
    {                                                                          \
        struct wire_dec d;                                                     \
        struct wire_pk p;                                                      \
                                                                               \
        wire_dec_init(&d, WIRE_MSG_##TYPE, STRATA_EINVAL, NULL);               \
        if (!m || !out)                                                        \
            return wire_dec_fail(&d, NULL, "NULL message or buffer");          \
        WIRE_TRY(msg##_check(&d, m));                                          \
        wire_pk_begin(&p, out);                                                \
        msg##_write(&p, m);                                                    \
        return wire_pk_end(&p, WIRE_MSG_##TYPE);                               \
    }                                                                          \
    strata_err wire_##msg##_unpack(const void *body, size_t len,               \
                                   struct wire_##msg *out)                     \
    {                                                                          \
        struct wire_##msg m;                                                   \
        strata_err err;                                                        \
                                                                               \
        memset(&m, 0, sizeof(m));                                              \
        err = wire_unpack_body(WIRE_MSG_##TYPE, body, len, msg##_names,        \
                               msg##_nkeys, msg##_read, msg##_check, &m,       \
                               &m.arena);                                      \
        if (err == STRATA_OK)                                                  \
            *out = m;                                                          \
        return err;                                                            \
    }                                                                          \
    void wire_##msg##_free(struct wire_##msg *m)                               \
    {                                                                          \
        if (m) {                                                               \
            wire_arena_fini(&m->arena);                                        \
            memset(m, 0, sizeof(*m));                                          \
        }                                                                      \
    }

/* Operands, shared by CONTROL and CONTROL_REPLY. */
strata_err wire_operands_read(struct wire_dec *d, const char *field,
                              const msgpack_object *o,
                              struct wire_operands *out);
strata_err wire_operands_check(const struct wire_dec *d, const char *field,
                               const struct wire_operands *ops,
                               uint32_t required, uint32_t optional);
void wire_operands_pack(struct wire_pk *p, const struct wire_operands *ops);

/* Descriptors, shared by DOMAIN_CMD and DOMAIN_REPLY. read and check run
 * inside an element path set by the caller (wire_dec_enter). */
strata_err wire_descriptor_read(const struct wire_dec *d,
                                const msgpack_object *o,
                                struct wire_descriptor *out);
strata_err wire_descriptor_check(const struct wire_dec *d,
                                 const struct wire_descriptor *desc);
void wire_descriptor_pack(struct wire_pk *p, const struct wire_descriptor *v);
/* Reads an array of descriptors (min..max entries) into the arena. */
strata_err wire_descriptors_read(struct wire_dec *d, const char *field,
                                 const msgpack_object *o, size_t min,
                                 size_t max, const struct wire_descriptor **out,
                                 size_t *n);

/* Per-type limits. */
uint32_t wire_msg_max_objects(unsigned type);

#endif
