/* Strictness of every decoder, by mutating each sample's packed body:
 * every key removed, every value (at any depth) replaced by each other
 * msgpack type, unknown and repeated keys, non-integer keys, trailing
 * bytes, truncation at every length, and every length field replaced by a
 * hostile 2^32 - 1. Each mutation must fail with STRATA_EPROTO and a
 * message that names the message (and the field, where there is one). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "wire/msg.h"
#include "wire_samples.h"

#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Key names and the keys whose absence is legal, per type (the spec in
 * docs/wire.md, restated here independently of the codecs). */
static const char *const key_names[WIRE_MSG_TYPE_MAX + 1][15] = {
    [WIRE_MSG_HELLO] = {NULL, "proto_min", "proto_max", "capabilities",
                        "node_name", "pid", "platform", "chip_ids",
                        "num_sub_workers", "comm_profile",
                        "global_device_ranks", "startup_budget_ms"},
    [WIRE_MSG_HELLO_REPLY] = {NULL, "version", "error", "message",
                              "capabilities", "node_name", "pid", "boot_id",
                              "hello_rx_ns", "time_ns"},
    [WIRE_MSG_TASK] = {NULL, "request_id", "run_id", "digest", "args", "target",
                       "chip", "deadline_ms", "data_tensors"},
    [WIRE_MSG_COMPLETION] = {NULL, "request_id", "error", "message",
                             "data_tensors", "not_run"},
    [WIRE_MSG_DATA_CHUNK] = {NULL, "request_id", "tensor", "offset", "data",
                             "last"},
    [WIRE_MSG_CONTROL] = {NULL, "request_id", "op", "operands"},
    [WIRE_MSG_CONTROL_REPLY] = {NULL, "request_id", "op", "error", "message",
                                "results"},
    [WIRE_MSG_HEARTBEAT] = {NULL, "seq", "time_ns", "ack_seq"},
    [WIRE_MSG_GOODBYE] = {NULL, "reason", "message"},
    [WIRE_MSG_DOMAIN_CMD] = {NULL, "request_id", "version", "phase",
                             "domain_id", "generation", "window_size", "name",
                             "profile", "members", "attachments", "buffers",
                             "descriptors", "gather", "exchange"},
    [WIRE_MSG_DOMAIN_REPLY] = {NULL, "request_id", "phase", "domain_id",
                               "generation", "error", "message", "descriptors"},
    [WIRE_MSG_COMM_INIT] = {NULL, "request_id", "version", "cluster_id",
                            "node_rank", "node_count", "global_device_ranks",
                            "profile", "bootstrap"},
    [WIRE_MSG_HEALTH] = {NULL, "nonce"},
    [WIRE_MSG_HEALTH_REPLY] = {NULL, "nonce", "version", "proto_min",
                               "proto_max", "sessions", "max_sessions",
                               "max_procs", "uptime_ms", "pid"},
    [WIRE_MSG_TRACE] = {NULL, "request_id", "pid", "ppid", "role", "dropped",
                        "records", "last"},
};

#define K(k) (1u << (k))
static const unsigned may_be_absent[WIRE_MSG_TYPE_MAX + 1] = {
    [WIRE_MSG_HELLO] = K(10) | K(11),
    [WIRE_MSG_HELLO_REPLY] = K(3) | K(7),
    [WIRE_MSG_TASK] = K(7) | K(8),
    [WIRE_MSG_COMPLETION] = K(3) | K(4) | K(5),
    [WIRE_MSG_CONTROL] = K(3),
    [WIRE_MSG_CONTROL_REPLY] = K(4) | K(5),
    [WIRE_MSG_HEARTBEAT] = K(3),
    [WIRE_MSG_GOODBYE] = K(2),
    [WIRE_MSG_DOMAIN_CMD] = K(10) | K(13) | K(14),
    [WIRE_MSG_DOMAIN_REPLY] = K(6),
    [WIRE_MSG_COMM_INIT] = K(8),
};

/* The sample being mutated: its packed body and parsed tree. */
struct subject {
    const struct wire_sample *s;
    struct wire_buf frame;
    const uint8_t *body;
    size_t len;
    msgpack_unpacked up;
    msgpack_sbuffer out; /* the mutated body */
};

static void subject_open(struct subject *x, const struct wire_sample *s)
{
    size_t off = 0;

    x->s = s;
    wire_buf_init(&x->frame);
    assert_int_equal(wire_msg_pack(&s->msg, &x->frame), STRATA_OK);
    x->body = x->frame.data + WIRE_FRAME_HEADER_SIZE;
    x->len = x->frame.len - WIRE_FRAME_HEADER_SIZE;
    msgpack_unpacked_init(&x->up);
    assert_int_equal(
        msgpack_unpack_next(&x->up, (const char *)x->body, x->len, &off),
        MSGPACK_UNPACK_SUCCESS);
    msgpack_sbuffer_init(&x->out);
}

static void subject_close(struct subject *x)
{
    msgpack_sbuffer_destroy(&x->out);
    msgpack_unpacked_destroy(&x->up);
    wire_buf_fini(&x->frame);
}

/* Packs the (mutated) tree into x->out. */
static void subject_repack(struct subject *x)
{
    msgpack_packer pk;

    msgpack_sbuffer_clear(&x->out);
    msgpack_packer_init(&pk, &x->out, msgpack_sbuffer_write);
    assert_int_equal(msgpack_pack_object(&pk, x->up.data), 0);
}

/* Decodes p[0..len) as the subject's type; returns the result and frees. */
static strata_err decode(const struct subject *x, const void *p, size_t len)
{
    struct wire_msg m;
    strata_err err = wire_msg_unpack(x->s->msg.type, p, len, &m);

    if (err == STRATA_OK)
        wire_msg_free(&m);
    return err;
}

static size_t mutations;

static void expect_rejected(const struct subject *x, const void *p, size_t len,
                            const char *what, const char *detail)
{
    strata_err err = decode(x, p, len);
    const char *msg = strata_errmsg();

    mutations++;
    if (err != STRATA_EPROTO)
        fail_msg("%s: %s: got %s, expected STRATA_EPROTO (%s)", x->s->name,
                 what, strata_errname(err), msg);
    if (strncmp(msg, wire_msg_name(x->s->msg.type),
                strlen(wire_msg_name(x->s->msg.type))) != 0)
        fail_msg("%s: %s: message does not name the type: %s", x->s->name, what,
                 msg);
    if (detail && !strstr(msg, detail))
        fail_msg("%s: %s: message lacks \"%s\": %s", x->s->name, what, detail,
                 msg);
}

/* ---- Tree walking ------------------------------------------------------- */

#define MAX_NODES 4096

struct nodes {
    msgpack_object *v[MAX_NODES];
    size_t n;
    msgpack_object *maps[MAX_NODES];
    size_t nmaps;
};

static void collect(struct nodes *ns, msgpack_object *o)
{
    assert_true(ns->n < MAX_NODES);
    ns->v[ns->n++] = o;
    if (o->type == MSGPACK_OBJECT_ARRAY) {
        for (uint32_t k = 0; k < o->via.array.size; k++)
            collect(ns, &o->via.array.ptr[k]);
    } else if (o->type == MSGPACK_OBJECT_MAP) {
        ns->maps[ns->nmaps++] = o;
        for (uint32_t k = 0; k < o->via.map.size; k++)
            collect(ns, &o->via.map.ptr[k].val);
    }
}

static int type_class(msgpack_object_type t)
{
    return t == MSGPACK_OBJECT_FLOAT32 ? MSGPACK_OBJECT_FLOAT64 : (int)t;
}

static msgpack_object substitute(int k)
{
    msgpack_object o;

    memset(&o, 0, sizeof(o));
    switch (k) {
    case 0:
        o.type = MSGPACK_OBJECT_NIL;
        break;
    case 1:
        o.type = MSGPACK_OBJECT_BOOLEAN;
        o.via.boolean = true;
        break;
    case 2:
        o.type = MSGPACK_OBJECT_POSITIVE_INTEGER;
        o.via.u64 = 7;
        break;
    case 3:
        o.type = MSGPACK_OBJECT_NEGATIVE_INTEGER;
        o.via.i64 = -1;
        break;
    case 4:
        o.type = MSGPACK_OBJECT_FLOAT64;
        o.via.f64 = 1.5;
        break;
    case 5:
        o.type = MSGPACK_OBJECT_STR;
        o.via.str.ptr = "x";
        o.via.str.size = 1;
        break;
    case 6:
        o.type = MSGPACK_OBJECT_BIN;
        o.via.bin.ptr = "x";
        o.via.bin.size = 1;
        break;
    case 7:
        o.type = MSGPACK_OBJECT_ARRAY;
        break;
    default:
        o.type = MSGPACK_OBJECT_MAP;
        break;
    }
    return o;
}

/* ---- Mutations ---------------------------------------------------------- */

/* Every value, at every depth, replaced by every other type. */
static void wrong_types(struct subject *x)
{
    static struct nodes ns;

    ns.n = ns.nmaps = 0;
    collect(&ns, &x->up.data);
    for (size_t i = 0; i < ns.n; i++) {
        msgpack_object saved = *ns.v[i];

        for (int k = 0; k < 9; k++) {
            msgpack_object sub = substitute(k);
            char what[64];

            if (type_class(sub.type) == type_class(saved.type))
                continue;
            *ns.v[i] = sub;
            subject_repack(x);
            *ns.v[i] = saved;
            snprintf(what, sizeof(what), "node %zu as type %d", i, k);
            expect_rejected(x, x->out.data, x->out.size, what,
                            i ? "field '" : "body must be a map");
        }
    }
}

/* Every map: a key removed, an unknown key, a repeated key, a key that is
 * not an unsigned integer. */
static void key_mutations(struct subject *x)
{
    static struct nodes ns;
    unsigned type = x->s->msg.type;

    ns.n = ns.nmaps = 0;
    collect(&ns, &x->up.data);
    for (size_t m = 0; m < ns.nmaps; m++) {
        msgpack_object_map saved = ns.maps[m]->via.map;
        uint32_t n = saved.size;
        msgpack_object_kv *kv = calloc(n + 1, sizeof(*kv));

        assert_non_null(kv);
        ns.maps[m]->via.map.ptr = kv;
        /* Removal of each key. */
        for (uint32_t drop = 0; drop < n; drop++) {
            uint64_t key = saved.ptr[drop].key.via.u64;
            strata_err err;

            for (uint32_t k = 0, j = 0; k < n; k++)
                if (k != drop)
                    kv[j++] = saved.ptr[k];
            ns.maps[m]->via.map.size = n - 1;
            subject_repack(x);
            err = decode(x, x->out.data, x->out.size);
            if (m == 0 && !(may_be_absent[type] & K(key))) {
                char detail[64];

                snprintf(detail, sizeof(detail), "'%s", key_names[type][key]);
                expect_rejected(x, x->out.data, x->out.size, "key removed",
                                detail);
            } else if (err != STRATA_OK && err != STRATA_EPROTO) {
                fail_msg("%s: removing key %llu: %s", x->s->name,
                         (unsigned long long)key, strata_errname(err));
            }
        }
        /* An unknown key, key 0, a repeated key, a non-integer key. */
        memcpy(kv, saved.ptr, n * sizeof(*kv));
        ns.maps[m]->via.map.size = n + 1;
        kv[n].key.type = MSGPACK_OBJECT_POSITIVE_INTEGER;
        kv[n].val.type = MSGPACK_OBJECT_NIL;
        kv[n].key.via.u64 = 99;
        subject_repack(x);
        expect_rejected(x, x->out.data, x->out.size, "key 99",
                        "unknown key 99");
        kv[n].key.via.u64 = 0;
        subject_repack(x);
        expect_rejected(x, x->out.data, x->out.size, "key 0", "unknown key 0");
        if (n) {
            kv[n] = saved.ptr[0];
            subject_repack(x);
            expect_rejected(x, x->out.data, x->out.size, "repeated key",
                            m ? " twice" : "appears twice");
        }
        kv[n].key = substitute(5);
        subject_repack(x);
        expect_rejected(x, x->out.data, x->out.size, "str key",
                        "is not a uint");
        ns.maps[m]->via.map = saved;
        free(kv);
    }
}

/* Each str/bin/array/map, in turn, gets a header declaring 2^32 - 1. */
static void hostile_lengths(struct subject *x)
{
    static const uint8_t heads[][5] = {
        {0xdb, 0xff, 0xff, 0xff, 0xff},
        {0xc6, 0xff, 0xff, 0xff, 0xff},
        {0xdd, 0xff, 0xff, 0xff, 0xff},
        {0xdf, 0xff, 0xff, 0xff, 0xff},
    };
    static const char marker[] = "\x01strata-marker\x02";
    static struct nodes ns;
    size_t mlen = sizeof(marker) - 1;

    ns.n = ns.nmaps = 0;
    collect(&ns, &x->up.data);
    for (size_t i = 1; i < ns.n; i++) {
        msgpack_object saved = *ns.v[i];
        uint8_t *buf;
        size_t at = 0;

        if (saved.type != MSGPACK_OBJECT_STR &&
            saved.type != MSGPACK_OBJECT_BIN &&
            saved.type != MSGPACK_OBJECT_ARRAY &&
            saved.type != MSGPACK_OBJECT_MAP)
            continue;
        ns.v[i]->type = MSGPACK_OBJECT_STR;
        ns.v[i]->via.str.ptr = marker;
        ns.v[i]->via.str.size = (uint32_t)mlen;
        subject_repack(x);
        *ns.v[i] = saved;
        while (memcmp(x->out.data + at + 1, marker, mlen) != 0)
            at++;
        buf = malloc(x->out.size);
        assert_non_null(buf);
        for (size_t h = 0; h < 4; h++) {
            /* Replace the marker (1 + mlen bytes) by 5 header bytes. */
            memcpy(buf, x->out.data, at);
            memcpy(buf + at, heads[h], 5);
            memcpy(buf + at + 5, x->out.data + at + 1 + mlen,
                   x->out.size - at - 1 - mlen);
            expect_rejected(x, buf, x->out.size - 1 - mlen + 5,
                            "hostile length", "declared at byte");
        }
        free(buf);
    }
}

static void bytes_mutations(struct subject *x)
{
    uint8_t *buf = malloc(x->len + 16);

    assert_non_null(buf);
    for (size_t len = 0; len < x->len; len++)
        expect_rejected(x, x->body, len, "truncated", NULL);
    memcpy(buf, x->body, x->len);
    buf[x->len] = 0xc0;
    expect_rejected(x, buf, x->len + 1, "trailing nil", "1 trailing bytes");
    memcpy(buf + x->len, x->body, x->len < 16 ? x->len : 16);
    expect_rejected(x, buf, x->len + (x->len < 16 ? x->len : 16),
                    "trailing copy", "trailing bytes");
    buf[0] = 0xc1;
    expect_rejected(x, buf, x->len, "0xc1", "byte 0xc1");
    free(buf);
}

static void test_reject_every_mutation_eproto(void **state)
{
    const struct wire_sample *s;
    size_t n = wire_samples(&s);

    (void)state;
    for (size_t k = 0; k < n; k++) {
        struct subject x;

        subject_open(&x, &s[k]);
        wrong_types(&x);
        key_mutations(&x);
        hostile_lengths(&x);
        bytes_mutations(&x);
        subject_close(&x);
    }
    print_message("%zu mutations of %zu samples rejected\n", mutations, n);
    assert_true(mutations > 100 * n);
}

/* Structure limits of the pre-scan: nesting depth and object count. */
static void test_reject_scan_limits_eproto(void **state)
{
    size_t n = 600000;
    uint8_t *deep = malloc(n + 16);
    struct wire_msg m;

    (void)state;
    assert_non_null(deep);
    /* {9: [[[[[[[[[]]]]]]]]]} - ten levels. */
    deep[0] = 0x81;
    deep[1] = 0x09;
    for (int k = 0; k < 9; k++)
        deep[2 + k] = 0x91;
    deep[11] = 0x90;
    assert_int_equal(wire_msg_unpack(WIRE_MSG_DOMAIN_CMD, deep, 12, &m),
                     STRATA_EPROTO);
    assert_non_null(strstr(strata_errmsg(), "nested deeper than 8"));
    /* {9: [0 x 600000]}: more objects than a DOMAIN_CMD may hold. */
    deep[0] = 0x81;
    deep[1] = 0x09;
    deep[2] = 0xdd;
    deep[3] = (uint8_t)(n >> 24);
    deep[4] = (uint8_t)(n >> 16);
    deep[5] = (uint8_t)(n >> 8);
    deep[6] = (uint8_t)n;
    memset(deep + 7, 0, n);
    assert_int_equal(wire_msg_unpack(WIRE_MSG_DOMAIN_CMD, deep, n + 7, &m),
                     STRATA_EPROTO);
    assert_non_null(strstr(strata_errmsg(), "more than 524288 objects"));
    free(deep);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reject_every_mutation_eproto),
        cmocka_unit_test(test_reject_scan_limits_eproto),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
