/* The global domain command's rules (phases, members, attachment matrix,
 * buffers, descriptor table), DOMAIN_REPLY and COMM_INIT. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "wire/msg.h"
#include "wire_mutate.h"
#include "wire_samples.h"

#include <string.h>

/* Keys of DOMAIN_CMD (docs/wire.md). */
enum {
    PHASE = 3,
    DOMAIN_ID = 4,
    WINDOW = 6,
    MEMBERS = 9,
    ATTACH = 10,
    BUFFERS = 11,
    DESCS = 12,
    GATHER = 13,
    EXCHANGE = 14,
};

/* A pointer to a copy of v that stays valid for a few dozen calls. */
static const msgpack_object *obj(msgpack_object v)
{
    static msgpack_object pool[64];
    static unsigned next;
    msgpack_object *p = &pool[next++ % 64];

    *p = v;
    return p;
}

static const msgpack_object *u(uint64_t v)
{
    static msgpack_object o[64];
    static unsigned next;
    msgpack_object *p = &o[next++ % 64];

    *p = wire_obj_uint(v);
    return p;
}

static const msgpack_object *s(const char *v)
{
    static msgpack_object o[64];
    static unsigned next;
    msgpack_object *p = &o[next++ % 64];

    *p = wire_obj_str(v);
    return p;
}

static void test_domain_phase_rules_eproto(void **state)
{
    struct wire_msg prep = wire_sample_copy("domain_prepare");
    struct wire_msg imp = wire_sample_copy("domain_import");
    struct wire_msg plain = wire_sample_copy("domain_prepare_plain");

    (void)state;
    /* Attachments ride on PREPARE_EXPORT only. */
    WIRE_EXPECT_EDIT(&prep, WIRE_PATH(PHASE), u(WIRE_PHASE_IMPORT),
                     "DOMAIN_CMD: field 'attachments' not allowed in phase "
                     "IMPORT");
    WIRE_EXPECT_EDIT(&prep, WIRE_PATH(PHASE), u(WIRE_PHASE_COMMIT),
                     "field 'attachments' not allowed in phase COMMIT");
    WIRE_EXPECT_EDIT(&prep, WIRE_PATH(PHASE), u(WIRE_PHASE_ABORT),
                     "field 'attachments' not allowed in phase ABORT");
    /* gather rides on PREPARE_EXPORT only, and is 1 when there. */
    {
        struct wire_msg gat = wire_sample_copy("domain_prepare_gather");

        WIRE_EXPECT_EDIT(&gat, WIRE_PATH(GATHER), u(0), "field 'gather' is 0");
        WIRE_EXPECT_EDIT(&gat, WIRE_PATH(GATHER), u(2), "field 'gather' is 2");
        WIRE_EXPECT_EDIT(&gat, WIRE_PATH(PHASE), u(WIRE_PHASE_ABORT),
                         "field 'attachments' not allowed in phase ABORT");
        gat.u.domain_cmd.attach_rows = NULL;
        gat.u.domain_cmd.num_attach_rows = 0;
        WIRE_EXPECT_EDIT(&gat, WIRE_PATH(PHASE), u(WIRE_PHASE_ABORT),
                         "field 'gather' not allowed in phase ABORT");
        gat.u.domain_cmd.phase = WIRE_PHASE_ABORT;
        WIRE_EXPECT_PACK_EINVAL(&gat, "field 'gather' not allowed in phase "
                                      "ABORT");
    }
    /* exchange likewise. */
    {
        struct wire_msg ex = wire_sample_copy("domain_prepare_exchange");

        WIRE_EXPECT_EDIT(&ex, WIRE_PATH(EXCHANGE), u(0),
                         "field 'exchange' is 0");
        WIRE_EXPECT_EDIT(&ex, WIRE_PATH(EXCHANGE), u(2),
                         "field 'exchange' is 2");
        ex.u.domain_cmd.attach_rows = NULL;
        ex.u.domain_cmd.num_attach_rows = 0;
        WIRE_EXPECT_EDIT(&ex, WIRE_PATH(PHASE), u(WIRE_PHASE_ABORT),
                         "field 'exchange' not allowed in phase ABORT");
        ex.u.domain_cmd.phase = WIRE_PHASE_ABORT;
        WIRE_EXPECT_PACK_EINVAL(&ex, "field 'exchange' not allowed in phase "
                                     "ABORT");
    }
    /* Descriptors ride on IMPORT and COMMIT only, and must be there. */
    WIRE_EXPECT_EDIT(&imp, WIRE_PATH(PHASE), u(WIRE_PHASE_PREPARE_EXPORT),
                     "field 'descriptors' not allowed in phase "
                     "PREPARE_EXPORT");
    WIRE_EXPECT_EDIT(&imp, WIRE_PATH(PHASE), u(WIRE_PHASE_ABORT),
                     "field 'descriptors' not allowed in phase ABORT");
    WIRE_EXPECT_EDIT(&plain, WIRE_PATH(PHASE), u(WIRE_PHASE_COMMIT),
                     "field 'descriptors' missing in phase COMMIT");
    WIRE_EXPECT_EDIT(&imp, WIRE_PATH(DESCS), NULL,
                     "field 'descriptors' missing in phase IMPORT");
    WIRE_EXPECT_EDIT(&prep, WIRE_PATH(PHASE), u(5),
                     "field 'phase' has unknown value 5");
    WIRE_EXPECT_EDIT(&prep, WIRE_PATH(PHASE), u(0),
                     "field 'phase' has unknown value 0");
    WIRE_EXPECT_EDIT(&prep, WIRE_PATH(2), u(1),
                     "field 'version' is 1, this build speaks 2");
    WIRE_EXPECT_EDIT(&prep, WIRE_PATH(2), u(3),
                     "field 'version' is 3, this build speaks 2");
    WIRE_EXPECT_EDIT(&prep, WIRE_PATH(DOMAIN_ID), u(0),
                     "field 'domain_id' is 0");
    WIRE_EXPECT_EDIT(&prep, WIRE_PATH(WINDOW), u(0),
                     "field 'window_size' is 0");
}

static void test_domain_phase_rules_pack_einval(void **state)
{
    struct wire_msg m = wire_sample_copy("domain_prepare");
    const struct wire_msg imp = wire_sample_copy("domain_import");

    (void)state;
    m.u.domain_cmd.descriptors = imp.u.domain_cmd.descriptors;
    m.u.domain_cmd.num_descriptors = 4;
    WIRE_EXPECT_PACK_EINVAL(&m, "field 'descriptors' not allowed in phase "
                                "PREPARE_EXPORT");
    m = wire_sample_copy("domain_prepare");
    m.u.domain_cmd.phase = WIRE_PHASE_IMPORT;
    m.u.domain_cmd.descriptors = imp.u.domain_cmd.descriptors;
    m.u.domain_cmd.num_descriptors = 4;
    WIRE_EXPECT_PACK_EINVAL(&m, "field 'attachments' not allowed in phase "
                                "IMPORT");
    m = imp;
    m.u.domain_cmd.num_descriptors = 3;
    WIRE_EXPECT_PACK_EINVAL(&m, "field 'descriptors' has 3 entries for 4 "
                                "members");
    m = imp;
    m.u.domain_cmd.version = 1;
    WIRE_EXPECT_PACK_EINVAL(&m, "field 'version' is 1");
    m = imp;
    m.u.domain_cmd.num_members = 0;
    WIRE_EXPECT_PACK_EINVAL(&m, "field 'members' must be array of 1..8192");
}

static void test_domain_members_rules_eproto(void **state)
{
    struct wire_msg m = wire_sample_copy("domain_prepare");
    msgpack_object empty = {.type = MSGPACK_OBJECT_ARRAY};

    (void)state;
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(MEMBERS, 1, 3), u(2),
                     "field 'members[1].domain_rank' is 2, members are in "
                     "rank order (1)");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(MEMBERS, 1, 1), u(0),
                     "field 'members' names node 1 chip 0 twice");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(MEMBERS, 2, 0), u(1ull << 31),
                     "field 'members[2].node_worker_id' is 2147483648");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(MEMBERS, 3, 2), s("x"),
                     "field 'members[3].global_device_rank' must be uint");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(MEMBERS, 0), u(1),
                     "field 'members[0]' must be array of 4 elements");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(MEMBERS), &empty,
                     "field 'members' must be array of 1..8192 elements");
}

static void test_domain_attachment_rules_eproto(void **state)
{
    struct wire_msg m = wire_sample_copy("domain_prepare");
    msgpack_object short_entries = {.type = MSGPACK_OBJECT_ARRAY};
    msgpack_object entries[3];

    (void)state;
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(ATTACH, 0, 0), u(9),
                     "field 'attachments[0].node_worker_id' is 9, which "
                     "owns no member");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(ATTACH, 1, 0), u(1),
                     "field 'attachments[1].node_worker_id' repeats node 1");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(ATTACH, 0, 1, 1, 0), u(3),
                     "field 'attachments[0].entries[1].address_space' has "
                     "unknown value 3");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(ATTACH, 1, 1, 2, 1), u(0),
                     "field 'attachments[1].entries[2].role' has unknown "
                     "value 0");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(ATTACH, 1, 1, 3, 2), u(6),
                     "field 'attachments[1].entries[3].adapter_kind' has "
                     "unknown value 6");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(ATTACH, 0, 1, 3, 3), s("sim"),
                     "field 'attachments[0].entries[3].adapter_profile' must "
                     "be empty without an adapter");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(ATTACH, 0, 1, 0, 3),
                     s("0123456789012345678901234567890123456789012345678901"
                       "234567890123"),
                     "field 'attachments[0].entries[0].adapter_profile' must "
                     "be str of 0..63");
    /* A row per member node: one row for two nodes is incomplete. */
    {
        struct wire_msg only = m;
        struct wire_attach_row row = m.u.domain_cmd.attach_rows[0];

        only.u.domain_cmd.attach_rows = &row;
        only.u.domain_cmd.num_attach_rows = 1;
        WIRE_EXPECT_PACK_EINVAL(&only, "field 'attachments' has 1 rows, the "
                                       "members live on 2 nodes");
    }
    /* Each row holds one entry per member. */
    for (int k = 0; k < 3; k++) {
        entries[k].type = MSGPACK_OBJECT_ARRAY;
        entries[k].via.array.size = 0;
    }
    short_entries.via.array.size = 3;
    short_entries.via.array.ptr = entries;
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(ATTACH, 0, 1), &short_entries,
                     "field 'attachments[0].entries' must be array of 4..4 "
                     "elements");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(ATTACH, 0), u(1),
                     "field 'attachments[0]' must be array of 2 elements");
}

static void test_domain_buffer_rules_eproto(void **state)
{
    struct wire_msg m = wire_sample_copy("domain_abort");

    (void)state;
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(BUFFERS, 0, 1), u(99),
                     "field 'buffers[0].dtype' has unknown value 99");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(BUFFERS, 0, 2), u(15),
                     "field 'buffers[0].nbytes' is 64, count 15 of 4-byte "
                     "elements");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(BUFFERS, 1, 0), s("signal"),
                     "field 'buffers[1].name' repeats \"signal\"");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(WINDOW), u(100),
                     "field 'buffers[1].nbytes' overruns the window of 100 "
                     "bytes");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(BUFFERS, 1, 3), u(0),
                     "field 'buffers[1].nbytes' is 0, outside");
}

static void test_domain_descriptor_table_rules_eproto(void **state)
{
    struct wire_msg m = wire_sample_copy("domain_import");

    (void)state;
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(DESCS, 2, 2), u(3),
                     "field 'descriptors[2].domain_rank' is 3, expected 2");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(DESCS, 1, 1), s("cuda-ipc"),
                     "field 'descriptors[1].profile' is \"cuda-ipc\", the "
                     "domain's is \"sim\"");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(DESCS, 3, 4), u(16384),
                     "field 'descriptors[3].mapping_size' is 16384, rank 0 "
                     "maps 8192");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(WINDOW), u(16384),
                     "field 'descriptors[0].mapping_size' is 8192, below the "
                     "window size 16384");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(DESCS, 0, 3), u(5),
                     "field 'descriptors[0].rank_count' is 5 in a table of 4");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(DESCS, 0, 0), u(2),
                     "field 'descriptors[0].version' is 2, this build speaks "
                     "1");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(DESCS, 1, 5), s(""),
                     "field 'descriptors[1].handle' must be str of 1..255");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(DESCS, 1), u(5),
                     "field 'descriptors[1]' must be array of 6 elements");
}

static void test_domain_descriptor_table_check_einval(void **state)
{
    struct wire_msg m = wire_sample_copy("domain_import");
    struct wire_descriptor t[4];

    (void)state;
    memcpy(t, m.u.domain_cmd.descriptors, sizeof(t));
    assert_int_equal(wire_descriptor_table_check(t, 4, "sim", 8192), STRATA_OK);
    assert_int_equal(wire_descriptor_table_check(t, 4, NULL, 1), STRATA_OK);
    /* Incomplete: three entries that each say four ranks. */
    assert_int_equal(wire_descriptor_table_check(t, 3, "sim", 8192),
                     STRATA_EINVAL);
    assert_non_null(strstr(strata_errmsg(),
                           "descriptor table: field 'descriptors[0]."
                           "rank_count' is 4 in a table of 3"));
    /* A repeated rank. */
    t[2].domain_rank = 1;
    assert_int_equal(wire_descriptor_table_check(t, 4, "sim", 8192),
                     STRATA_EINVAL);
    assert_non_null(strstr(strata_errmsg(), "'descriptors[2].domain_rank' "
                                            "is 1, expected 2"));
    t[2].domain_rank = 2;
    t[3].profile = "cuda-fabric";
    assert_int_equal(wire_descriptor_table_check(t, 4, "sim", 8192),
                     STRATA_EINVAL);
    assert_non_null(strstr(strata_errmsg(), "descriptors[3].profile"));
    t[3].profile = "sim";
    t[1].mapping_size = 4096;
    assert_int_equal(wire_descriptor_table_check(t, 4, "sim", 4096),
                     STRATA_EINVAL);
    assert_non_null(strstr(strata_errmsg(), "descriptors[1].mapping_size"));
    t[1].mapping_size = 8192;
    assert_int_equal(wire_descriptor_table_check(t, 4, "sim", 8193),
                     STRATA_EINVAL);
    assert_non_null(strstr(strata_errmsg(), "below the window size 8193"));
    assert_int_equal(wire_descriptor_table_check(NULL, 0, "sim", 1),
                     STRATA_EINVAL);
    t[0].version = 9;
    assert_int_equal(wire_descriptor_table_check(t, 4, "sim", 1),
                     STRATA_EINVAL);
    assert_non_null(strstr(strata_errmsg(), "descriptors[0].version' is 9"));
}

static void test_domain_reply_rules_eproto(void **state)
{
    struct wire_msg m = wire_sample_copy("domain_reply_prepare");
    struct wire_msg c = wire_sample_copy("domain_reply_commit");

    (void)state;
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(5), u(STRATA_EPEER),
                     "DOMAIN_REPLY: field 'descriptors' only allowed in a "
                     "successful PREPARE_EXPORT reply");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(2), u(WIRE_PHASE_COMMIT),
                     "field 'descriptors' only allowed in a successful");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(7), NULL, "field 'descriptors' missing");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(7, 1, 2), u(2),
                     "field 'descriptors[1].domain_rank' is 2, not above the "
                     "one before");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(7, 1, 3), u(8),
                     "field 'descriptors[1].rank_count' is 8, entry 0 says "
                     "4");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(7, 1, 2), u(5),
                     "field 'descriptors[1].domain_rank' is 5, rank_count is "
                     "4");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(7, 0, 1), s("other"),
                     "field 'descriptors[1].profile' differs from entry 0");
    WIRE_EXPECT_EDIT(&c, WIRE_PATH(2), u(7),
                     "field 'phase' has unknown "
                     "value 7");
    WIRE_EXPECT_EDIT(&c, WIRE_PATH(3), u(0), "field 'domain_id' is 0");
    c.u.domain_reply.descriptors = m.u.domain_reply.descriptors;
    c.u.domain_reply.num_descriptors = 1;
    WIRE_EXPECT_PACK_EINVAL(&c, "field 'descriptors' only allowed in a "
                                "successful PREPARE_EXPORT reply");
}

static void test_domain_comm_init_rules_eproto(void **state)
{
    struct wire_msg m = wire_sample_copy("comm_init_full");
    msgpack_object empty = {.type = MSGPACK_OBJECT_ARRAY};

    (void)state;
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(4), u(2),
                     "COMM_INIT: field 'node_rank' is 2, node_count is 2");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(5), u(0), "field 'node_count' is 0");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(5), u(WIRE_MAX_NODES + 1),
                     "field 'node_count' is 4097");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(2), u(2),
                     "field 'version' is 2, this build speaks 1");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(6, 2), u(4),
                     "field 'global_device_ranks[2]' repeats 4");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(6), &empty,
                     "field 'global_device_ranks' must be array of 1..1024");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(8), obj(wire_obj_bin("", 0)),
                     "field 'bootstrap' must be bin of 1..4096 bytes");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(7), s(""),
                     "field 'profile' must be str of 1..63 bytes");
    m.u.comm_init.node_rank = 5;
    WIRE_EXPECT_PACK_EINVAL(&m, "field 'node_rank' is 5, node_count is 2");
    m = wire_sample_copy("comm_init_full");
    m.u.comm_init.bootstrap_len = WIRE_BOOTSTRAP_MAX + 1;
    WIRE_EXPECT_PACK_EINVAL(&m, "field 'bootstrap' must be bin");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_domain_phase_rules_eproto),
        cmocka_unit_test(test_domain_phase_rules_pack_einval),
        cmocka_unit_test(test_domain_members_rules_eproto),
        cmocka_unit_test(test_domain_attachment_rules_eproto),
        cmocka_unit_test(test_domain_buffer_rules_eproto),
        cmocka_unit_test(test_domain_descriptor_table_rules_eproto),
        cmocka_unit_test(test_domain_descriptor_table_check_einval),
        cmocka_unit_test(test_domain_reply_rules_eproto),
        cmocka_unit_test(test_domain_comm_init_rules_eproto),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
