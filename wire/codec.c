/* Shared machinery of the message codecs: error paths, the arena, the
 * bounded structure scan that runs before msgpack-c sees a body, field
 * getters and the frame packer. */
#include "codec.h"
#include "base/alloc.h"
#include "base/err.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- Decode context and errors ---------------------------------------- */

void wire_dec_init(struct wire_dec *d, unsigned type, strata_err code,
                   struct wire_arena *arena)
{
    const char *name = wire_msg_name(type);

    d->msg = name ? name : "frame";
    d->code = code;
    d->arena = arena;
    wire_dec_leave(d);
}

void wire_dec_enter(struct wire_dec *d, const char *outer, long i)
{
    d->outer = outer;
    d->i = i;
    d->inner = NULL;
    d->j = -1;
}

void wire_dec_enter_inner(struct wire_dec *d, const char *inner, long j)
{
    d->inner = inner;
    d->j = j;
}

void wire_dec_leave(struct wire_dec *d)
{
    wire_dec_enter(d, NULL, -1);
}

/* Appends to a fixed buffer, keeping n within size on truncation. */
static size_t append(char *buf, size_t size, size_t n, const char *fmt, ...)
    STRATA_PRINTF(4, 5);

static size_t append(char *buf, size_t size, size_t n, const char *fmt, ...)
{
    va_list ap;
    int r;

    if (n >= size)
        return n;
    va_start(ap, fmt);
    r = vsnprintf(buf + n, size - n, fmt, ap);
    va_end(ap);
    if (r < 0)
        return n;
    return n + (size_t)r < size ? n + (size_t)r : size - 1;
}

strata_err wire_dec_fail(const struct wire_dec *d, const char *field,
                         const char *fmt, ...)
{
    char path[192];
    char what[320];
    size_t n = 0;
    va_list ap;

    path[0] = '\0';
    if (d->outer)
        n = append(path, sizeof(path), n, "%s[%ld]", d->outer, d->i);
    if (d->inner)
        n = append(path, sizeof(path), n, "%s%s[%ld]", n ? "." : "", d->inner,
                   d->j);
    if (field && *field)
        n = append(path, sizeof(path), n, "%s%s", n ? "." : "", field);
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    if (n)
        return base_fail(d->code, "%s: field '%s' %s", d->msg, path, what);
    return base_fail(d->code, "%s: %s", d->msg, what);
}

/* ---- Arena -------------------------------------------------------------- */

struct arena_block {
    struct arena_block *next;
    size_t used;
    size_t cap;
    size_t pad; /* keeps the data that follows 16-byte aligned */
};

#define ARENA_BLOCK_SIZE 4096

void *wire_arena_alloc(struct wire_arena *a, size_t size)
{
    struct arena_block *head = a->head;
    struct arena_block *b = head;
    size_t cap;
    char *p;

    if (size > SIZE_MAX - sizeof(*b) - 8)
        return NULL;
    size = size ? (size + 7) & ~(size_t)7 : 8;
    if (!b || b->cap - b->used < size) {
        cap = ARENA_BLOCK_SIZE - sizeof(*b);
        if (size > cap / 2)
            cap = size; /* a dedicated block; keep the head's free space */
        b = base_malloc(sizeof(*b) + cap);
        if (!b)
            return NULL;
        b->used = 0;
        b->cap = cap;
        if (head && cap == size) {
            b->next = head->next;
            head->next = b;
        } else {
            b->next = head;
            a->head = b;
        }
    }
    p = (char *)(b + 1) + b->used;
    b->used += size;
    memset(p, 0, size);
    return p;
}

void wire_arena_fini(struct wire_arena *a)
{
    struct arena_block *b = a->head;

    while (b) {
        struct arena_block *next = b->next;

        base_free(b);
        b = next;
    }
    a->head = NULL;
}

/* ---- Structure scan ------------------------------------------------------
 * msgpack-c allocates a container's element array as soon as it reads the
 * container's header, so a 5-byte "array of 2^32 elements" would make it
 * ask for ~96 GiB. This scan walks the bytes first, allocating nothing,
 * and rejects any declared length or element count larger than the bytes
 * left (each element needs at least one byte), nesting deeper than
 * WIRE_MAX_DEPTH, more objects than the type allows, and trailing bytes.
 * After it passes, msgpack-c's allocations are bounded by the body size. */

struct scan_item {
    size_t hdr;        /* header bytes */
    uint64_t payload;  /* str/bin/ext bytes after the header */
    uint64_t children; /* objects inside (2 per map pair) */
};

static uint64_t be(const uint8_t *p, size_t n)
{
    uint64_t v = 0;

    for (size_t k = 0; k < n; k++)
        v = v << 8 | p[k];
    return v;
}

/* Header size and the size of its length field for byte b (0 = fixed). */
static void scan_shape(uint8_t b, size_t *hdr, size_t *lenbytes, int *kind)
{
    /* kind: 0 scalar, 1 bytes, 2 array, 3 map */
    static const uint8_t fixed[] = {
        [0xc0] = 1, [0xc2] = 1, [0xc3] = 1, [0xca] = 5, [0xcb] = 9,
        [0xcc] = 2, [0xcd] = 3, [0xce] = 5, [0xcf] = 9, [0xd0] = 2,
        [0xd1] = 3, [0xd2] = 5, [0xd3] = 9,
    };

    *lenbytes = 0;
    *kind = 0;
    *hdr = 1;
    if (b >= 0xc0 && b <= 0xd3 && fixed[b]) {
        *hdr = fixed[b];
    } else if (b >= 0xc4 && b <= 0xc6) { /* bin 8/16/32 */
        *lenbytes = (size_t)1 << (b - 0xc4);
        *hdr = 1 + *lenbytes;
        *kind = 1;
    } else if (b >= 0xd9 && b <= 0xdb) { /* str 8/16/32 */
        *lenbytes = (size_t)1 << (b - 0xd9);
        *hdr = 1 + *lenbytes;
        *kind = 1;
    } else if (b >= 0xc7 && b <= 0xc9) { /* ext 8/16/32: length, type */
        *lenbytes = (size_t)1 << (b - 0xc7);
        *hdr = 2 + *lenbytes;
        *kind = 1;
    } else if (b >= 0xd4 && b <= 0xd8) { /* fixext: type byte + data */
        *hdr = 2 + ((size_t)1 << (b - 0xd4));
    } else if (b == 0xdc || b == 0xdd) {
        *lenbytes = b == 0xdc ? 2 : 4;
        *hdr = 1 + *lenbytes;
        *kind = 2;
    } else if (b == 0xde || b == 0xdf) {
        *lenbytes = b == 0xde ? 2 : 4;
        *hdr = 1 + *lenbytes;
        *kind = 3;
    }
}

static strata_err scan_item(const struct wire_dec *d, const uint8_t *p,
                            size_t pos, size_t len, struct scan_item *it)
{
    size_t left = len - pos;
    size_t lenbytes;
    uint64_t n;
    int kind;
    uint8_t b;

    if (left == 0)
        return wire_dec_fail(d, NULL,
                             "malformed msgpack: truncated at "
                             "byte %zu",
                             pos);
    b = p[pos];
    it->payload = 0;
    it->children = 0;
    if (b == 0xc1)
        return wire_dec_fail(d, NULL, "malformed msgpack: byte 0xc1 at %zu",
                             pos);
    if (b <= 0x7f || b >= 0xe0) {
        it->hdr = 1;
        return STRATA_OK;
    }
    if (b <= 0x8f) {
        it->hdr = 1;
        kind = 3;
        n = (uint64_t)(b & 0x0f);
    } else if (b <= 0x9f) {
        it->hdr = 1;
        kind = 2;
        n = (uint64_t)(b & 0x0f);
    } else if (b <= 0xbf) {
        it->hdr = 1;
        kind = 1;
        n = (uint64_t)(b & 0x1f);
    } else {
        scan_shape(b, &it->hdr, &lenbytes, &kind);
        if (left < it->hdr)
            return wire_dec_fail(
                d, NULL, "malformed msgpack: truncated at byte %zu", len);
        n = be(p + pos + 1, lenbytes);
        if (kind == 0)
            return STRATA_OK;
    }
    left -= it->hdr;
    if (kind == 1 && n > left)
        return wire_dec_fail(d, NULL,
                             "malformed msgpack: %" PRIu64
                             " bytes declared at byte %zu, %zu left",
                             n, pos, left);
    if (kind >= 2 && n > left)
        return wire_dec_fail(d, NULL,
                             "malformed msgpack: %" PRIu64
                             " elements declared at byte %zu, %zu bytes left",
                             n, pos, left);
    if (kind == 1)
        it->payload = n;
    else
        it->children = kind == 3 ? 2 * n : n;
    return STRATA_OK;
}

static strata_err scan_body(const struct wire_dec *d, const uint8_t *p,
                            size_t len, uint64_t max_objects)
{
    uint64_t pending[WIRE_MAX_DEPTH + 1];
    uint64_t objects = 0;
    struct scan_item it = {0, 0, 0};
    size_t pos = 0;
    int depth = 0;

    pending[0] = 1;
    while (depth >= 0) {
        if (pending[depth] == 0) {
            depth--;
            continue;
        }
        pending[depth]--;
        WIRE_TRY(scan_item(d, p, pos, len, &it));
        if (++objects > max_objects)
            return wire_dec_fail(d, NULL, "more than %" PRIu64 " objects",
                                 max_objects);
        pos += it.hdr + (size_t)it.payload;
        if (it.children == 0)
            continue;
        if (depth == WIRE_MAX_DEPTH)
            return wire_dec_fail(d, NULL, "nested deeper than %d levels",
                                 WIRE_MAX_DEPTH);
        pending[++depth] = it.children;
    }
    if (pos != len)
        return wire_dec_fail(d, NULL, "%zu trailing bytes after the body",
                             len - pos);
    return STRATA_OK;
}

/* ---- Maps and the body -------------------------------------------------- */

strata_err wire_dec_map(const struct wire_dec *d, const char *field,
                        const msgpack_object *o, const char *const *names,
                        unsigned nkeys, const msgpack_object **vals)
{
    bool top = !field || !*field;

    if (o->type != MSGPACK_OBJECT_MAP)
        return wire_dec_fail(d, field, "must be a map");
    for (unsigned k = 0; k <= nkeys; k++)
        vals[k] = NULL;
    for (uint32_t n = 0; n < o->via.map.size; n++) {
        const msgpack_object_kv *kv = &o->via.map.ptr[n];
        uint64_t k = kv->key.via.u64;

        if (kv->key.type != MSGPACK_OBJECT_POSITIVE_INTEGER)
            return top ? wire_dec_fail(d, NULL,
                                       "map key %" PRIu32 " is not a uint", n)
                       : wire_dec_fail(d, field,
                                       "key %" PRIu32 " is not a uint", n);
        if (k == 0 || k > nkeys || !names[k])
            return top ? wire_dec_fail(d, NULL, "unknown key %" PRIu64, k)
                       : wire_dec_fail(d, field, "has unknown key %" PRIu64, k);
        if (vals[k] && top)
            return wire_dec_fail(d, names[k], "appears twice");
        if (vals[k])
            return wire_dec_fail(d, field, "has key %" PRIu64 " twice", k);
        vals[k] = &kv->val;
    }
    return STRATA_OK;
}

strata_err wire_unpack_body(unsigned type, const void *src, size_t len,
                            const char *const *names, unsigned nkeys,
                            wire_read_fn read, wire_check_fn check, void *m,
                            struct wire_arena *arena)
{
    struct wire_dec d;
    struct wire_body b;
    msgpack_unpack_return ret;
    size_t off = 0;
    strata_err err;

    wire_dec_init(&d, type, STRATA_EPROTO, arena);
    if (len > wire_frame_max_body(type))
        return wire_dec_fail(&d, NULL,
                             "body of %zu bytes exceeds the maximum %" PRIu32,
                             len, wire_frame_max_body(type));
    if (!src)
        len = 0;
    WIRE_TRY(scan_body(&d, src, len, wire_msg_max_objects(type)));
    b.names = names;
    b.nkeys = nkeys;
    msgpack_unpacked_init(&b.up);
    ret = msgpack_unpack_next(&b.up, src, len, &off);
    if (ret == MSGPACK_UNPACK_NOMEM_ERROR)
        err = base_fail(STRATA_ENOMEM, "%s: out of memory parsing", d.msg);
    else if (ret != MSGPACK_UNPACK_SUCCESS || off != len)
        err = wire_dec_fail(&d, NULL, "msgpack-c refused the body (%d)",
                            (int)ret);
    else if (b.up.data.type != MSGPACK_OBJECT_MAP)
        err = wire_dec_fail(&d, NULL, "body must be a map");
    else
        err = wire_dec_map(&d, NULL, &b.up.data, names, nkeys, b.val);
    if (err == STRATA_OK)
        err = read(&d, &b, m);
    if (err == STRATA_OK) {
        wire_dec_leave(&d);
        err = check(&d, m);
    }
    msgpack_unpacked_destroy(&b.up);
    if (err != STRATA_OK)
        wire_arena_fini(arena);
    return err;
}

/* ---- Getters ------------------------------------------------------------ */

strata_err wire_get_uint(const struct wire_dec *d, const char *field,
                         const msgpack_object *o, uint64_t min, uint64_t max,
                         uint64_t *out)
{
    if (!o)
        return wire_dec_fail(d, field, "missing");
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return wire_dec_fail(d, field, "must be uint");
    if (o->via.u64 < min || o->via.u64 > max)
        return wire_dec_fail(d, field,
                             "is %" PRIu64 ", outside %" PRIu64 "..%" PRIu64,
                             o->via.u64, min, max);
    *out = o->via.u64;
    return STRATA_OK;
}

strata_err wire_get_u32(const struct wire_dec *d, const char *field,
                        const msgpack_object *o, uint32_t min, uint32_t max,
                        uint32_t *out)
{
    uint64_t v = 0;

    WIRE_TRY(wire_get_uint(d, field, o, min, max, &v));
    *out = (uint32_t)v;
    return STRATA_OK;
}

strata_err wire_get_enum(const struct wire_dec *d, const char *field,
                         const msgpack_object *o, unsigned min, unsigned max,
                         uint8_t *out)
{
    if (!o)
        return wire_dec_fail(d, field, "missing");
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return wire_dec_fail(d, field, "must be uint");
    if (o->via.u64 < min || o->via.u64 > max)
        return wire_dec_fail(d, field, "has unknown value %" PRIu64,
                             o->via.u64);
    *out = (uint8_t)o->via.u64;
    return STRATA_OK;
}

bool wire_err_known(uint64_t v)
{
    switch (v) {
#define WIRE_ERR_CASE_(name, value, text) case value:
        STRATA_ERRORS(WIRE_ERR_CASE_)
#undef WIRE_ERR_CASE_
        return true;
    default:
        return false;
    }
}

strata_err wire_get_err(const struct wire_dec *d, const char *field,
                        const msgpack_object *o, strata_err *out)
{
    uint64_t v = 0;

    WIRE_TRY(wire_get_uint(d, field, o, 0, UINT64_MAX, &v));
    if (!wire_err_known(v))
        return wire_dec_fail(d, field, "has unknown error code %" PRIu64, v);
    *out = (strata_err)v;
    return STRATA_OK;
}

strata_err wire_get_bool(const struct wire_dec *d, const char *field,
                         const msgpack_object *o, bool *out)
{
    if (!o)
        return wire_dec_fail(d, field, "missing");
    if (o->type != MSGPACK_OBJECT_BOOLEAN)
        return wire_dec_fail(d, field, "must be bool");
    *out = o->via.boolean;
    return STRATA_OK;
}

static void *dec_copy(const struct wire_dec *d, const void *src, size_t n,
                      size_t extra)
{
    char *p = wire_arena_alloc(d->arena, n + extra);

    if (p && n)
        memcpy(p, src, n);
    return p;
}

strata_err wire_get_str(const struct wire_dec *d, const char *field,
                        const msgpack_object *o, size_t min, size_t max,
                        const char **out)
{
    const char *p;
    size_t n;

    if (!o)
        return wire_dec_fail(d, field, "missing");
    n = o->type == MSGPACK_OBJECT_STR ? o->via.str.size : 0;
    if (o->type != MSGPACK_OBJECT_STR || n < min || n > max)
        return wire_dec_fail(d, field, "must be str of %zu..%zu bytes", min,
                             max);
    if (n && memchr(o->via.str.ptr, '\0', n))
        return wire_dec_fail(d, field, "contains a NUL byte");
    p = dec_copy(d, o->via.str.ptr, n, 1);
    if (!p)
        return base_fail(STRATA_ENOMEM, "%s: out of memory", d->msg);
    *out = p;
    return STRATA_OK;
}

strata_err wire_get_opt_str(const struct wire_dec *d, const char *field,
                            const msgpack_object *o, size_t max,
                            const char **out)
{
    if (!o) {
        *out = "";
        return STRATA_OK;
    }
    return wire_get_str(d, field, o, 0, max, out);
}

strata_err wire_get_bin(const struct wire_dec *d, const char *field,
                        const msgpack_object *o, size_t min, size_t max,
                        const uint8_t **out, size_t *len)
{
    const uint8_t *p;
    size_t n;

    if (!o)
        return wire_dec_fail(d, field, "missing");
    n = o->type == MSGPACK_OBJECT_BIN ? o->via.bin.size : 0;
    if (o->type != MSGPACK_OBJECT_BIN || n < min || n > max) {
        if (min == max)
            return wire_dec_fail(d, field, "must be bin of %zu bytes", min);
        return wire_dec_fail(d, field, "must be bin of %zu..%zu bytes", min,
                             max);
    }
    p = dec_copy(d, o->via.bin.ptr, n, 0);
    if (!p)
        return base_fail(STRATA_ENOMEM, "%s: out of memory", d->msg);
    *out = p;
    *len = n;
    return STRATA_OK;
}

strata_err wire_get_array(const struct wire_dec *d, const char *field,
                          const msgpack_object *o, size_t min, size_t max,
                          const msgpack_object **items, size_t *n)
{
    size_t size;

    if (!o)
        return wire_dec_fail(d, field, "missing");
    size = o->type == MSGPACK_OBJECT_ARRAY ? o->via.array.size : 0;
    if (o->type != MSGPACK_OBJECT_ARRAY || size < min || size > max)
        return wire_dec_fail(d, field, "must be array of %zu..%zu elements",
                             min, max);
    *items = o->via.array.ptr;
    *n = size;
    return STRATA_OK;
}

strata_err wire_get_tuple(const struct wire_dec *d, const char *field,
                          const msgpack_object *o, size_t n,
                          const msgpack_object **items)
{
    if (!o)
        return wire_dec_fail(d, field, "missing");
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != n)
        return wire_dec_fail(d, field, "must be array of %zu elements", n);
    *items = o->via.array.ptr;
    return STRATA_OK;
}

strata_err wire_get_u32_list(const struct wire_dec *d, const char *field,
                             const msgpack_object *o, size_t min_n,
                             size_t max_n, uint32_t max, const uint32_t **out,
                             size_t *n)
{
    const msgpack_object *items = NULL;
    uint32_t *v;
    size_t count = 0;
    char name[96];

    WIRE_TRY(wire_get_array(d, field, o, min_n, max_n, &items, &count));
    v = wire_arena_alloc(d->arena, count * sizeof(*v));
    if (!v)
        return base_fail(STRATA_ENOMEM, "%s: out of memory", d->msg);
    for (size_t k = 0; k < count; k++) {
        if (items[k].type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
            items[k].via.u64 <= max) {
            v[k] = (uint32_t)items[k].via.u64;
            continue;
        }
        snprintf(name, sizeof(name), "%s[%zu]", field, k);
        if (items[k].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
            return wire_dec_fail(d, name, "must be uint");
        return wire_dec_fail(d, name, "is %" PRIu64 ", outside 0..%" PRIu32,
                             items[k].via.u64, max);
    }
    *out = count ? v : NULL;
    *n = count;
    return STRATA_OK;
}

/* ---- Checks shared by pack and unpack ----------------------------------- */

strata_err wire_check_str(const struct wire_dec *d, const char *field,
                          const char *s, size_t min, size_t max)
{
    size_t n = s ? strnlen(s, max + 1) : 0;

    if (!s || n < min || n > max)
        return wire_dec_fail(d, field, "must be str of %zu..%zu bytes", min,
                             max);
    return STRATA_OK;
}

strata_err wire_check_opt_str(const struct wire_dec *d, const char *field,
                              const char *s, size_t max)
{
    return s ? wire_check_str(d, field, s, 0, max) : STRATA_OK;
}

strata_err wire_check_err(const struct wire_dec *d, const char *field,
                          strata_err e)
{
    if (!wire_err_known((uint64_t)e))
        return wire_dec_fail(d, field, "has unknown error code %d", (int)e);
    return STRATA_OK;
}

strata_err wire_check_array(const struct wire_dec *d, const char *field,
                            const void *p, size_t n, size_t max)
{
    if (n > max)
        return wire_dec_fail(d, field, "must be array of 0..%zu elements", max);
    if (n && !p)
        return wire_dec_fail(d, field, "is NULL with %zu elements", n);
    return STRATA_OK;
}

strata_err wire_check_u32_set(const struct wire_dec *d, const char *field,
                              const uint32_t *v, size_t n, uint32_t max,
                              bool ascending)
{
    char name[96];

    for (size_t k = 0; k < n; k++) {
        snprintf(name, sizeof(name), "%s[%zu]", field, k);
        if (v[k] > max)
            return wire_dec_fail(d, name, "is %" PRIu32 ", outside 0..%" PRIu32,
                                 v[k], max);
        if (ascending && k && v[k] <= v[k - 1])
            return wire_dec_fail(d, name, "must be above the one before");
        for (size_t l = 0; !ascending && l < k; l++)
            if (v[l] == v[k])
                return wire_dec_fail(d, name, "repeats %" PRIu32, v[k]);
    }
    return STRATA_OK;
}

/* ---- Packer ------------------------------------------------------------- */

static int pk_write(void *data, const char *buf, size_t len)
{
    struct wire_pk *p = data;

    if (p->nomem)
        return -1;
    if (wire_buf_append(p->buf, buf, len) != STRATA_OK) {
        p->nomem = true;
        return -1;
    }
    return 0;
}

void wire_pk_begin(struct wire_pk *p, struct wire_buf *buf)
{
    static const char zero[WIRE_FRAME_HEADER_SIZE];

    p->buf = buf;
    p->start = buf->len;
    p->nomem = false;
    msgpack_packer_init(&p->pk, p, pk_write);
    (void)pk_write(p, zero, sizeof(zero));
}

strata_err wire_pk_end(struct wire_pk *p, unsigned type)
{
    struct wire_frame_header h;
    size_t body;

    if (p->nomem) {
        p->buf->len = p->start;
        return base_fail(STRATA_ENOMEM, "%s: out of memory packing",
                         wire_msg_name(type));
    }
    body = p->buf->len - p->start - WIRE_FRAME_HEADER_SIZE;
    if (body > wire_frame_max_body(type)) {
        p->buf->len = p->start;
        return base_fail(STRATA_EINVAL,
                         "%s: body of %zu bytes exceeds the maximum %" PRIu32,
                         wire_msg_name(type), body, wire_frame_max_body(type));
    }
    h.version = WIRE_FRAME_VERSION;
    h.type = (uint8_t)type;
    h.flags = 0;
    h.body_len = (uint32_t)body;
    wire_frame_header_pack(&h, p->buf->data + p->start);
    return STRATA_OK;
}

void wire_pk_map(struct wire_pk *p, size_t n)
{
    (void)msgpack_pack_map(&p->pk, n);
}

void wire_pk_array(struct wire_pk *p, size_t n)
{
    (void)msgpack_pack_array(&p->pk, n);
}

void wire_pk_uint(struct wire_pk *p, uint64_t v)
{
    (void)msgpack_pack_uint64(&p->pk, v);
}

void wire_pk_bool(struct wire_pk *p, bool v)
{
    (void)(v ? msgpack_pack_true(&p->pk) : msgpack_pack_false(&p->pk));
}

void wire_pk_str(struct wire_pk *p, const char *s)
{
    size_t n = strlen(s);

    (void)msgpack_pack_str(&p->pk, n);
    (void)msgpack_pack_str_body(&p->pk, s, n);
}

void wire_pk_bin(struct wire_pk *p, const void *data, size_t n)
{
    (void)msgpack_pack_bin(&p->pk, n);
    if (n)
        (void)msgpack_pack_bin_body(&p->pk, data, n);
}

void wire_pk_u32_list(struct wire_pk *p, const uint32_t *v, size_t n)
{
    wire_pk_array(p, n);
    for (size_t k = 0; k < n; k++)
        wire_pk_uint(p, v[k]);
}

void wire_pk_key_uint(struct wire_pk *p, unsigned key, uint64_t v)
{
    wire_pk_uint(p, key);
    wire_pk_uint(p, v);
}

void wire_pk_key_bool(struct wire_pk *p, unsigned key, bool v)
{
    wire_pk_uint(p, key);
    wire_pk_bool(p, v);
}

void wire_pk_key_str(struct wire_pk *p, unsigned key, const char *s)
{
    wire_pk_uint(p, key);
    wire_pk_str(p, s);
}

void wire_pk_key_bin(struct wire_pk *p, unsigned key, const void *data,
                     size_t n)
{
    wire_pk_uint(p, key);
    wire_pk_bin(p, data, n);
}
