/* Every message packs, frames and decodes back to what was packed; packing
 * is deterministic; allocation failures leave nothing behind; messages at
 * the documented limits fit their frames. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/fault.h"
#include "wire/args.h"
#include "wire/msg.h"
#include "wire_samples.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void assert_same(const struct wire_msg *a, const struct wire_msg *b,
                        const char *name)
{
    char why[128];

    if (!wire_sample_equal(a, b, why, sizeof(why)))
        fail_msg("%s: %s", name, why);
}

static void test_roundtrip_every_sample_ok(void **state)
{
    const struct wire_sample *s;
    size_t n = wire_samples(&s);
    unsigned seen = 0;

    (void)state;
    for (size_t k = 0; k < n; k++) {
        struct wire_frame_header h;
        struct wire_buf b1, b2;
        struct wire_msg m, f;

        wire_buf_init(&b1);
        wire_buf_init(&b2);
        if (wire_msg_pack(&s[k].msg, &b1) != STRATA_OK)
            fail_msg("%s: pack: %s", s[k].name, strata_errmsg());
        assert_int_equal(wire_frame_header_unpack(b1.data, b1.len, &h),
                         STRATA_OK);
        assert_int_equal(h.type, s[k].msg.type);
        assert_int_equal(h.body_len, b1.len - WIRE_FRAME_HEADER_SIZE);
        if (wire_msg_unpack(h.type, b1.data + WIRE_FRAME_HEADER_SIZE,
                            h.body_len, &m) != STRATA_OK)
            fail_msg("%s: unpack: %s", s[k].name, strata_errmsg());
        assert_same(&s[k].msg, &m, s[k].name);
        assert_int_equal(wire_frame_unpack(b1.data, b1.len, &f), STRATA_OK);
        assert_same(&s[k].msg, &f, s[k].name);
        /* The decoded message packs to the same bytes. */
        assert_int_equal(wire_msg_pack(&m, &b2), STRATA_OK);
        assert_int_equal(b2.len, b1.len);
        assert_memory_equal(b1.data, b2.data, b1.len);
        wire_msg_free(&m);
        wire_msg_free(&m); /* idempotent */
        wire_msg_free(&f);
        wire_buf_fini(&b1);
        wire_buf_fini(&b2);
        seen |= 1u << s[k].msg.type;
    }
    for (unsigned t = WIRE_MSG_TYPE_MIN; t <= WIRE_MSG_TYPE_MAX; t++)
        if (!(seen & (1u << t)))
            fail_msg("no sample of %s", wire_msg_name(t));
}

/* Frames appended back to back can be walked by their headers. */
static void test_roundtrip_frames_concatenate_ok(void **state)
{
    const struct wire_sample *s;
    size_t n = wire_samples(&s);
    struct wire_buf b;
    size_t off = 0;

    (void)state;
    wire_buf_init(&b);
    for (size_t k = 0; k < n; k++)
        assert_int_equal(wire_msg_pack(&s[k].msg, &b), STRATA_OK);
    for (size_t k = 0; k < n; k++) {
        struct wire_frame_header h;
        struct wire_msg m;

        assert_int_equal(
            wire_frame_header_unpack(b.data + off, b.len - off, &h), STRATA_OK);
        off += WIRE_FRAME_HEADER_SIZE;
        assert_int_equal(wire_msg_unpack(h.type, b.data + off, h.body_len, &m),
                         STRATA_OK);
        assert_same(&s[k].msg, &m, s[k].name);
        wire_msg_free(&m);
        off += h.body_len;
    }
    assert_int_equal(off, b.len);
    wire_buf_fini(&b);
}

static void test_roundtrip_typed_api_ok(void **state)
{
    static const uint32_t chips[] = {0};
    struct wire_hello h = {.proto_min = WIRE_PROTO_MIN,
                           .proto_max = WIRE_PROTO_MAX,
                           .node_name = "a",
                           .pid = 2,
                           .platform = "sim",
                           .chip_ids = chips,
                           .num_chips = 1,
                           .comm_profile = "sim"};
    struct wire_hello back;
    struct wire_buf b;
    uint16_t v = 0;

    (void)state;
    wire_buf_init(&b);
    assert_int_equal(wire_hello_pack(&h, &b), STRATA_OK);
    assert_int_equal(wire_hello_unpack(b.data + WIRE_FRAME_HEADER_SIZE,
                                       b.len - WIRE_FRAME_HEADER_SIZE, &back),
                     STRATA_OK);
    assert_string_equal(back.node_name, "a");
    assert_int_equal(back.num_chips, 1);
    assert_int_equal(back.chip_ids[0], 0);
    assert_null(back.global_device_ranks);
    wire_hello_free(&back);
    wire_hello_free(NULL);
    wire_buf_fini(&b);

    assert_int_equal(wire_proto_choose(1, 3, 2, 5, &v), STRATA_OK);
    assert_int_equal(v, 3);
    assert_int_equal(wire_proto_choose(1, 1, 1, 1, &v), STRATA_OK);
    assert_int_equal(v, 1);
    assert_int_equal(wire_proto_choose(1, 1, 2, 4, &v), STRATA_EPROTO);
    assert_non_null(strstr(strata_errmsg(), "ours 1..1, theirs 2..4"));
    assert_int_equal(v, 1);
}

/* Fail the n-th allocation for every n: STRATA_ENOMEM, the buffer as it
 * was, no output, and (checked by LeakSanitizer) nothing leaked. */
static void test_roundtrip_alloc_failures_enomem(void **state)
{
    const struct wire_sample *s;
    size_t n = wire_samples(&s);

    (void)state;
    for (size_t k = 0; k < n; k++) {
        struct wire_buf b;
        struct wire_msg m;
        strata_err err;
        long nth;

        wire_buf_init(&b);
        assert_int_equal(wire_buf_append(&b, "xyz", 3), STRATA_OK);
        for (nth = 1;; nth++) {
            base_alloc_fail_after(nth);
            err = wire_msg_pack(&s[k].msg, &b);
            base_alloc_fail_after(0);
            if (err == STRATA_OK)
                break;
            assert_int_equal(err, STRATA_ENOMEM);
            assert_int_equal(b.len, 3);
        }
        for (nth = 1;; nth++) {
            memset(&m, 0x55, sizeof(m));
            base_alloc_fail_after(nth);
            err = wire_msg_unpack(s[k].msg.type,
                                  b.data + 3 + WIRE_FRAME_HEADER_SIZE,
                                  b.len - 3 - WIRE_FRAME_HEADER_SIZE, &m);
            base_alloc_fail_after(0);
            if (err == STRATA_OK)
                break;
            assert_int_equal(err, STRATA_ENOMEM);
            assert_int_equal(m.type, 0x55);
        }
        assert_same(&s[k].msg, &m, s[k].name);
        wire_msg_free(&m);
        wire_buf_fini(&b);
    }
}

static void pack_unpack(const struct wire_msg *m, struct wire_msg *out)
{
    struct wire_buf b;

    wire_buf_init(&b);
    if (wire_msg_pack(m, &b) != STRATA_OK)
        fail_msg("pack: %s", strata_errmsg());
    if (wire_frame_unpack(b.data, b.len, out) != STRATA_OK)
        fail_msg("unpack: %s", strata_errmsg());
    assert_same(m, out, wire_msg_name(m->type));
    wire_buf_fini(&b);
}

static char *filled(size_t len, char c)
{
    char *s = malloc(len + 1);

    assert_non_null(s);
    memset(s, c, len);
    s[len] = '\0';
    return s;
}

/* The largest domain command the limits allow: WIRE_MAX_RANKS members,
 * WIRE_MAX_ATTACH_ENTRIES attachment entries with the longest profiles,
 * longest handles and names. It must fit the DOMAIN_CMD frame. */
static void test_roundtrip_domain_at_limits_ok(void **state)
{
    size_t n = WIRE_MAX_RANKS;
    size_t nrows = WIRE_MAX_ATTACH_ENTRIES / WIRE_MAX_RANKS;
    struct wire_domain_member *mem = calloc(n, sizeof(*mem));
    struct wire_descriptor *desc = calloc(n, sizeof(*desc));
    struct wire_attach_entry *ent = calloc(n, sizeof(*ent));
    struct wire_attach_row *rows = calloc(nrows, sizeof(*rows));
    struct wire_domain_buffer *bufs =
        calloc(WIRE_MAX_DOMAIN_BUFFERS, sizeof(*bufs));
    char *name = filled(WIRE_NAME_MAX, 'n');
    char *prof = filled(WIRE_PROFILE_MAX, 'p');
    struct wire_msg m, back;
    char(*bnames)[WIRE_NAME_MAX + 1] =
        calloc(WIRE_MAX_DOMAIN_BUFFERS, sizeof(*bnames));

    (void)state;
    assert_true(mem && desc && ent && rows && bufs && bnames);
    for (size_t k = 0; k < n; k++) {
        mem[k] = (struct wire_domain_member){(uint32_t)(k % nrows), (uint32_t)k,
                                             (uint32_t)k, (uint32_t)k};
        desc[k] = (struct wire_descriptor){WIRE_DESCRIPTOR_VERSION,
                                           prof,
                                           (uint32_t)k,
                                           (uint32_t)n,
                                           UINT64_MAX,
                                           name};
        ent[k] =
            (struct wire_attach_entry){WIRE_SPACE_DEVICE, WIRE_ROLE_CONSUMER,
                                       WIRE_ADAPTER_OWNER_DELEGATED_COPY, prof};
    }
    for (size_t r = 0; r < nrows; r++)
        rows[r] = (struct wire_attach_row){(uint32_t)r, ent};
    for (size_t k = 0; k < WIRE_MAX_DOMAIN_BUFFERS; k++) {
        memset(bnames[k], 'b', WIRE_NAME_MAX);
        snprintf(bnames[k], 8, "%zu", k);
        bnames[k][strlen(bnames[k])] = 'b';
        bufs[k] = (struct wire_domain_buffer){bnames[k], STRATA_F64, 1, 8};
    }
    memset(&m, 0, sizeof(m));
    m.type = WIRE_MSG_DOMAIN_CMD;
    m.u.domain_cmd =
        (struct wire_domain_cmd){.request_id = UINT64_MAX,
                                 .version = WIRE_DOMAIN_CMD_VERSION,
                                 .phase = WIRE_PHASE_PREPARE_EXPORT,
                                 .domain_id = UINT64_MAX,
                                 .generation = UINT64_MAX,
                                 .window_size = UINT64_MAX,
                                 .name = name,
                                 .profile = prof,
                                 .members = mem,
                                 .num_members = n,
                                 .attach_rows = rows,
                                 .num_attach_rows = nrows,
                                 .buffers = bufs,
                                 .num_buffers = WIRE_MAX_DOMAIN_BUFFERS};
    pack_unpack(&m, &back);
    wire_msg_free(&back);
    m.u.domain_cmd.phase = WIRE_PHASE_IMPORT;
    m.u.domain_cmd.attach_rows = NULL;
    m.u.domain_cmd.num_attach_rows = 0;
    m.u.domain_cmd.descriptors = desc;
    m.u.domain_cmd.num_descriptors = n;
    pack_unpack(&m, &back);
    wire_msg_free(&back);
    free(bnames);
    free(prof);
    free(name);
    free(bufs);
    free(rows);
    free(ent);
    free(desc);
    free(mem);
}

static void test_roundtrip_other_limits_ok(void **state)
{
    uint8_t *chunk = malloc(WIRE_CHUNK_MAX);
    uint8_t *args = calloc(1, WIRE_ARGS_MAX);
    uint32_t *ids = malloc(WIRE_MAX_CHIPS * sizeof(*ids));
    uint32_t tensors[STRATA_MAX_TENSORS];
    char *msg = filled(WIRE_MESSAGE_MAX, 'm');
    char *name = filled(WIRE_NAME_MAX, 'n');
    char *prof = filled(WIRE_PROFILE_MAX, 'p');
    uint32_t hdr[2] = {STRATA_MAX_TENSORS, STRATA_MAX_SCALARS};
    struct wire_msg m, back;

    (void)state;
    assert_true(chunk && args && ids);
    memset(chunk, 0xab, WIRE_CHUNK_MAX);
    memcpy(args, hdr, sizeof(hdr));
    for (uint32_t k = 0; k < WIRE_MAX_CHIPS; k++)
        ids[k] = INT32_MAX - k;
    for (uint32_t k = 0; k < STRATA_MAX_TENSORS; k++)
        tensors[k] = k;
    memset(&m, 0, sizeof(m));
    m.type = WIRE_MSG_DATA_CHUNK;
    m.u.data_chunk =
        (struct wire_data_chunk){.request_id = UINT64_MAX,
                                 .tensor = STRATA_MAX_TENSORS - 1,
                                 .offset = UINT64_MAX - WIRE_CHUNK_MAX,
                                 .data = chunk,
                                 .len = WIRE_CHUNK_MAX,
                                 .last = true};
    pack_unpack(&m, &back);
    wire_msg_free(&back);

    memset(&m, 0, sizeof(m));
    m.type = WIRE_MSG_TASK;
    m.u.task = (struct wire_task){.request_id = 1,
                                  .run_id = UINT64_MAX,
                                  .args = args,
                                  .args_len = WIRE_ARGS_MAX,
                                  .target = WIRE_TARGET_CHIP,
                                  .chip = INT32_MAX,
                                  .deadline_ms = 1,
                                  .data_tensors = tensors,
                                  .num_data_tensors = STRATA_MAX_TENSORS};
    pack_unpack(&m, &back);
    wire_msg_free(&back);

    memset(&m, 0, sizeof(m));
    m.type = WIRE_MSG_HELLO;
    m.u.hello = (struct wire_hello){.proto_min = 1,
                                    .proto_max = UINT16_MAX,
                                    .capabilities = UINT64_MAX,
                                    .node_name = name,
                                    .pid = INT32_MAX,
                                    .platform = prof,
                                    .chip_ids = ids,
                                    .num_chips = WIRE_MAX_CHIPS,
                                    .num_sub_workers = WIRE_MAX_SUBS,
                                    .comm_profile = prof,
                                    .global_device_ranks = ids,
                                    .startup_budget_ms = UINT64_MAX};
    pack_unpack(&m, &back);
    wire_msg_free(&back);

    memset(&m, 0, sizeof(m));
    m.type = WIRE_MSG_COMPLETION;
    m.u.completion =
        (struct wire_completion){.request_id = 9,
                                 .message = msg,
                                 .data_tensors = tensors,
                                 .num_data_tensors = STRATA_MAX_TENSORS};
    pack_unpack(&m, &back);
    wire_msg_free(&back);
    free(prof);
    free(name);
    free(msg);
    free(ids);
    free(args);
    free(chunk);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_every_sample_ok),
        cmocka_unit_test(test_roundtrip_frames_concatenate_ok),
        cmocka_unit_test(test_roundtrip_typed_api_ok),
        cmocka_unit_test(test_roundtrip_alloc_failures_enomem),
        cmocka_unit_test(test_roundtrip_domain_at_limits_ok),
        cmocka_unit_test(test_roundtrip_other_limits_ok),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
