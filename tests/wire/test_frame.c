/* Frame headers: layout, byte order, every rejection, hostile lengths, and
 * the byte buffer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/fault.h"
#include "wire/msg.h"

#include <stdlib.h>
#include <string.h>

static void header(uint8_t out[WIRE_FRAME_HEADER_SIZE], uint8_t type,
                   uint32_t body_len)
{
    struct wire_frame_header h = {WIRE_FRAME_VERSION, type, 0, body_len};

    wire_frame_header_pack(&h, out);
}

static void assert_rejected(const uint8_t *p, size_t len, const char *what)
{
    struct wire_frame_header h;

    assert_int_equal(wire_frame_header_unpack(p, len, &h), STRATA_EPROTO);
    assert_non_null(strstr(strata_errmsg(), what));
}

static void test_frame_header_layout_big_endian(void **state)
{
    struct wire_frame_header h = {WIRE_FRAME_VERSION, WIRE_MSG_DATA_CHUNK, 0,
                                  0x00010203};
    static const uint8_t want[] = {'S', 'T', 'R', 'A', 1, 5, 0, 0, 0, 1, 2, 3};
    struct wire_frame_header back;
    uint8_t p[WIRE_FRAME_HEADER_SIZE];

    (void)state;
    wire_frame_header_pack(&h, p);
    assert_memory_equal(p, want, sizeof(want));
    assert_int_equal(wire_frame_header_unpack(p, sizeof(p), &back), STRATA_OK);
    assert_int_equal(back.version, WIRE_FRAME_VERSION);
    assert_int_equal(back.type, WIRE_MSG_DATA_CHUNK);
    assert_int_equal(back.flags, 0);
    assert_int_equal(back.body_len, 0x00010203);
}

static void test_frame_header_every_type_max_body_ok(void **state)
{
    struct wire_frame_header h;
    uint8_t p[WIRE_FRAME_HEADER_SIZE];

    (void)state;
    for (unsigned t = WIRE_MSG_TYPE_MIN; t <= WIRE_MSG_TYPE_MAX; t++) {
        assert_non_null(wire_msg_name(t));
        assert_true(wire_frame_max_body(t) > 0);
        header(p, (uint8_t)t, wire_frame_max_body(t));
        assert_int_equal(wire_frame_header_unpack(p, sizeof(p), &h), STRATA_OK);
        assert_int_equal(h.type, t);
        header(p, (uint8_t)t, 1);
        assert_int_equal(wire_frame_header_unpack(p, sizeof(p), &h), STRATA_OK);
    }
    assert_null(wire_msg_name(0));
    assert_null(wire_msg_name(WIRE_MSG_TYPE_MAX + 1));
    assert_int_equal(wire_frame_max_body(0), 0);
    assert_int_equal(wire_frame_max_body(200), 0);
}

static void test_frame_header_truncated_rejected(void **state)
{
    uint8_t p[WIRE_FRAME_HEADER_SIZE];
    struct wire_frame_header h = {9, 9, 9, 9};

    (void)state;
    header(p, WIRE_MSG_TASK, 10);
    for (size_t len = 0; len < sizeof(p); len++) {
        assert_rejected(p, len, "truncated");
        assert_int_equal(h.type, 9); /* output untouched */
    }
    assert_int_equal(wire_frame_header_unpack(NULL, 12, &h), STRATA_EPROTO);
}

/* A peer that sends only "STRA", version and type and then stalls or
 * closes must be turned away without any allocation. */
static void test_frame_header_hostile_six_bytes_rejected(void **state)
{
    static const uint8_t six[] = {'S', 'T', 'R', 'A', 1, WIRE_MSG_DOMAIN_CMD};

    (void)state;
    assert_rejected(six, sizeof(six), "header truncated (6 of 12 bytes)");
}

static void test_frame_header_bad_magic_rejected(void **state)
{
    uint8_t p[WIRE_FRAME_HEADER_SIZE];

    (void)state;
    for (int k = 0; k < 4; k++) {
        header(p, WIRE_MSG_TASK, 10);
        p[k] ^= 0x20;
        assert_rejected(p, sizeof(p), "'magic'");
    }
}

static void test_frame_header_bad_version_rejected(void **state)
{
    uint8_t p[WIRE_FRAME_HEADER_SIZE];

    (void)state;
    header(p, WIRE_MSG_TASK, 10);
    p[4] = 0;
    assert_rejected(p, sizeof(p), "'version' is 0");
    p[4] = 2;
    assert_rejected(p, sizeof(p), "'version' is 2");
}

static void test_frame_header_unknown_type_rejected(void **state)
{
    static const uint8_t bad[] = {0, WIRE_MSG_TYPE_MAX + 1, 100, 255};
    uint8_t p[WIRE_FRAME_HEADER_SIZE];

    (void)state;
    for (size_t k = 0; k < sizeof(bad); k++) {
        header(p, bad[k], 10);
        assert_rejected(p, sizeof(p), "'type'");
    }
}

static void test_frame_header_reserved_flags_rejected(void **state)
{
    uint8_t p[WIRE_FRAME_HEADER_SIZE];

    (void)state;
    for (int bit = 0; bit < 16; bit++) {
        header(p, WIRE_MSG_TASK, 10);
        p[6 + (bit < 8)] = (uint8_t)(1u << (bit % 8));
        assert_rejected(p, sizeof(p), "'flags'");
    }
}

static void test_frame_header_body_len_limits_rejected(void **state)
{
    uint8_t p[WIRE_FRAME_HEADER_SIZE];

    (void)state;
    for (unsigned t = WIRE_MSG_TYPE_MIN; t <= WIRE_MSG_TYPE_MAX; t++) {
        header(p, (uint8_t)t, 0);
        assert_rejected(p, sizeof(p), "'body_len' is 0");
        header(p, (uint8_t)t, wire_frame_max_body(t) + 1);
        assert_rejected(p, sizeof(p), "'body_len'");
        header(p, (uint8_t)t, UINT32_MAX);
        assert_rejected(p, sizeof(p), "'body_len' is 4294967295");
    }
}

static void test_frame_unpack_length_mismatch_rejected(void **state)
{
    struct wire_heartbeat hb = {.seq = 1, .time_ns = 2};
    struct wire_buf b;
    struct wire_msg m;

    (void)state;
    wire_buf_init(&b);
    assert_int_equal(wire_heartbeat_pack(&hb, &b), STRATA_OK);
    assert_int_equal(wire_frame_unpack(b.data, b.len, &m), STRATA_OK);
    assert_int_equal(m.type, WIRE_MSG_HEARTBEAT);
    assert_int_equal(m.u.heartbeat.time_ns, 2);
    wire_msg_free(&m);
    assert_int_equal(wire_frame_unpack(b.data, b.len - 1, &m), STRATA_EPROTO);
    assert_non_null(strstr(strata_errmsg(), "body bytes follow"));
    assert_int_equal(wire_buf_append(&b, "x", 1), STRATA_OK);
    assert_int_equal(wire_frame_unpack(b.data, b.len, &m), STRATA_EPROTO);
    assert_int_equal(wire_msg_unpack(0, b.data, b.len, &m), STRATA_EPROTO);
    assert_non_null(strstr(strata_errmsg(), "unknown"));
    wire_buf_fini(&b);
}

/* A body whose first msgpack header declares 2^32 - 1 elements or bytes:
 * msgpack-c alone would try to allocate up to ~192 GiB for it. */
static void test_frame_hostile_msgpack_headers_rejected(void **state)
{
    static const uint8_t hostile[][6] = {
        {0xdf, 0xff, 0xff, 0xff, 0xff, 0x01}, /* map32 */
        {0xdd, 0xff, 0xff, 0xff, 0xff, 0x01}, /* array32 */
        {0xdb, 0xff, 0xff, 0xff, 0xff, 0x01}, /* str32 */
        {0xc6, 0xff, 0xff, 0xff, 0xff, 0x01}, /* bin32 */
        {0xc9, 0xff, 0xff, 0xff, 0xff, 0x01}, /* ext32 */
    };
    static const uint8_t nested[] = {0x81, 0x01, 0xdd, 0xff, 0xff, 0xff, 0xff};
    struct wire_msg m;

    (void)state;
    for (unsigned t = WIRE_MSG_TYPE_MIN; t <= WIRE_MSG_TYPE_MAX; t++) {
        for (size_t k = 0; k < sizeof(hostile) / sizeof(hostile[0]); k++) {
            assert_int_equal(wire_msg_unpack(t, hostile[k], 6, &m),
                             STRATA_EPROTO);
            assert_non_null(strstr(strata_errmsg(), "declared at byte 0"));
            assert_non_null(strstr(strata_errmsg(), wire_msg_name(t)));
        }
        assert_int_equal(wire_msg_unpack(t, nested, sizeof(nested), &m),
                         STRATA_EPROTO);
        assert_non_null(strstr(strata_errmsg(), "declared at byte 2"));
    }
}

static void test_frame_body_over_type_maximum_rejected(void **state)
{
    size_t len = wire_frame_max_body(WIRE_MSG_DATA_CHUNK) + 1;
    uint8_t *big = calloc(1, len);
    struct wire_msg m;

    (void)state;
    assert_non_null(big);
    assert_int_equal(wire_msg_unpack(WIRE_MSG_DATA_CHUNK, big, len, &m),
                     STRATA_EPROTO);
    assert_non_null(strstr(strata_errmsg(), "exceeds the maximum"));
    free(big);
}

static void test_frame_buf_grows_and_reports_enomem(void **state)
{
    struct wire_buf b;
    uint8_t chunk[1000];

    (void)state;
    memset(chunk, 0x5a, sizeof(chunk));
    wire_buf_init(&b);
    for (int k = 0; k < 100; k++)
        assert_int_equal(wire_buf_append(&b, chunk, sizeof(chunk)), STRATA_OK);
    assert_int_equal(b.len, 100000);
    assert_true(b.cap >= b.len);
    assert_int_equal(b.data[99999], 0x5a);
    wire_buf_reset(&b);
    assert_int_equal(b.len, 0);
    wire_buf_fini(&b);
    assert_null(b.data);

    base_alloc_fail_after(1);
    assert_int_equal(wire_buf_append(&b, chunk, sizeof(chunk)), STRATA_ENOMEM);
    assert_int_equal(base_alloc_failures(), 1);
    assert_int_equal(b.len, 0);
    base_alloc_fail_after(0);
    wire_buf_fini(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frame_header_layout_big_endian),
        cmocka_unit_test(test_frame_header_every_type_max_body_ok),
        cmocka_unit_test(test_frame_header_truncated_rejected),
        cmocka_unit_test(test_frame_header_hostile_six_bytes_rejected),
        cmocka_unit_test(test_frame_header_bad_magic_rejected),
        cmocka_unit_test(test_frame_header_bad_version_rejected),
        cmocka_unit_test(test_frame_header_unknown_type_rejected),
        cmocka_unit_test(test_frame_header_reserved_flags_rejected),
        cmocka_unit_test(test_frame_header_body_len_limits_rejected),
        cmocka_unit_test(test_frame_unpack_length_mismatch_rejected),
        cmocka_unit_test(test_frame_hostile_msgpack_headers_rejected),
        cmocka_unit_test(test_frame_body_over_type_maximum_rejected),
        cmocka_unit_test(test_frame_buf_grows_and_reports_enomem),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
