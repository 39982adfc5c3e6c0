/* Message-specific rules of the session, work and control messages: each
 * value a decoder must refuse (with the field named), and the same rule
 * refused by the packer with STRATA_EINVAL. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "wire/args.h"
#include "wire/msg.h"
#include "wire_mutate.h"
#include "wire_samples.h"

#include <stdlib.h>
#include <string.h>

/* A pointer to a copy of v that stays valid for a few dozen calls. */
static const msgpack_object *obj(msgpack_object v)
{
    static msgpack_object pool[64];
    static unsigned next;
    msgpack_object *p = &pool[next++ % 64];

    *p = v;
    return p;
}

static msgpack_object u(uint64_t v)
{
    return wire_obj_uint(v);
}

static msgpack_object s(const char *v)
{
    return wire_obj_str(v);
}

static void test_messages_hello_rules_eproto(void **state)
{
    struct wire_msg m = wire_sample_copy("hello_full");
    static const char nul[] = {'a', '\0', 'b'};
    msgpack_object v;
    msgpack_object one = wire_obj_uint(1);
    char *longname = malloc(WIRE_NAME_MAX + 2);

    (void)state;
    memset(longname, 'x', WIRE_NAME_MAX + 1);
    longname[WIRE_NAME_MAX + 1] = '\0';
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(1), obj(u(0)),
                     "HELLO: field 'proto_min' is 0, outside 1..65535");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(1), obj(u(4)),
                     "field 'proto_min' is 4, outside 1..proto_max (3)");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(2), obj(u(65536)),
                     "field 'proto_max' is 65536");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(4), obj(s("")),
                     "field 'node_name' must be str of 1..255 bytes");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(4), obj(s(longname)),
                     "field 'node_name' must be str of 1..255 bytes");
    v = wire_obj_str("x");
    v.via.str.ptr = nul;
    v.via.str.size = sizeof(nul);
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(4), &v,
                     "field 'node_name' contains a NUL byte");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(5), obj(u(0)), "field 'pid' is 0");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(5), obj(u(1ull << 31)), "field 'pid'");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(7, 1), obj(u(0)),
                     "field 'chip_ids[1]' repeats 0");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(7, 2), obj(u(1ull << 31)),
                     "field 'chip_ids[2]' is 2147483648");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(7, 0), obj(wire_obj_int(-1)),
                     "field 'chip_ids[0]' must be uint");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(8), obj(u(WIRE_MAX_SUBS + 1)),
                     "field 'num_sub_workers'");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(10, 2), obj(u(4)),
                     "field 'global_device_ranks[2]' repeats 4");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(11), obj(u(0)),
                     "field 'startup_budget_ms' is 0");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(7), obj(wire_obj_nil()),
                     "field 'chip_ids' must be array of 0..1024");
    /* One global device rank per chip. */
    v.type = MSGPACK_OBJECT_ARRAY;
    v.via.array.size = 1;
    v.via.array.ptr = &one;
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(10), &v,
                     "field 'global_device_ranks' must be array of 3..3");
    free(longname);
}

static void test_messages_hello_pack_einval(void **state)
{
    struct wire_msg m = wire_sample_copy("hello_full");

    (void)state;
    m.u.hello.proto_min = 4;
    WIRE_EXPECT_PACK_EINVAL(&m, "HELLO: field 'proto_min' is 4");
    m = wire_sample_copy("hello_full");
    m.u.hello.node_name = NULL;
    WIRE_EXPECT_PACK_EINVAL(&m, "field 'node_name' must be str");
    m = wire_sample_copy("hello_full");
    m.u.hello.chip_ids = NULL;
    WIRE_EXPECT_PACK_EINVAL(&m, "field 'chip_ids' is NULL with 3 elements");
    m = wire_sample_copy("hello_full");
    m.u.hello.num_chips = WIRE_MAX_CHIPS + 1;
    WIRE_EXPECT_PACK_EINVAL(&m, "field 'chip_ids' must be array");
    m = wire_sample_copy("hello_full");
    m.u.hello.pid = 0;
    WIRE_EXPECT_PACK_EINVAL(&m, "field 'pid'");
    m = wire_sample_copy("hello_full");
    m.u.hello.platform = "0123456789012345678901234567890123456789012345678"
                         "901234567890123";
    WIRE_EXPECT_PACK_EINVAL(&m, "field 'platform' must be str of 1..63");
}

static void test_messages_hello_reply_rules_eproto(void **state)
{
    struct wire_msg m = wire_sample_copy("hello_reply_refuse");

    (void)state;
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(3), NULL,
                     "HELLO_REPLY: field 'message' missing in a refusing "
                     "reply");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(1), obj(u(1)),
                     "field 'version' is 1 in a refusing reply");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(2), obj(u(999)),
                     "field 'error' has unknown error code 999");
    m = wire_sample_copy("hello_reply_accept");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(1), obj(u(0)),
                     "field 'version' is 0 in an accepting reply");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(7), obj(s("0f4e2a3c/../x")),
                     "field 'boot_id' is not a boot id");
    m.u.hello_reply.boot_id = "a b";
    WIRE_EXPECT_PACK_EINVAL(&m, "field 'boot_id' is not a boot id");
    m = wire_sample_copy("hello_reply_accept");
    m.u.hello_reply.error = (strata_err)77;
    WIRE_EXPECT_PACK_EINVAL(&m, "field 'error' has unknown error code 77");
    m = wire_sample_copy("hello_reply_refuse");
    m.u.hello_reply.message = "";
    WIRE_EXPECT_PACK_EINVAL(&m, "field 'message' missing");
}

static void test_messages_task_rules_eproto(void **state)
{
    struct wire_msg m = wire_sample_copy("task_chip");
    uint8_t digest[33] = {0};
    uint8_t args[16] = {0};

    (void)state;
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(3), obj(wire_obj_bin(digest, 31)),
                     "TASK: field 'digest' must be bin of 32 bytes");
    assert_string_equal(strata_errmsg(),
                        "TASK: field 'digest' must be bin of 32 bytes");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(3), obj(wire_obj_bin(digest, 33)),
                     "TASK: field 'digest' must be bin of 32 bytes");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(3), obj(s("digest")),
                     "TASK: field 'digest' must be bin of 32 bytes");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(1), obj(u(0)), "field 'request_id' is 0");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(4), obj(wire_obj_bin(args, 7)),
                     "field 'args' must be bin of 8..");
    args[0] = 1; /* one tensor declared, none present */
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(4), obj(wire_obj_bin(args, 16)),
                     "field 'args' is 16 bytes, its header says");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(5), obj(u(4)),
                     "field 'target' has unknown value 4");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(5), obj(u(0)),
                     "field 'target' has unknown value 0");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(5), obj(u(WIRE_TARGET_SUB)),
                     "field 'chip' not allowed unless target is CHIP");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(7), obj(u(0)), "field 'deadline_ms' is 0");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(8, 1), obj(u(0)),
                     "field 'data_tensors[1]' must be above the one before");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(8, 1), obj(u(2)),
                     "field 'data_tensors' names tensor 2 of a task with 2 "
                     "tensors");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(8, 1), obj(u(256)),
                     "field 'data_tensors[1]' is 256, outside 0..255");
    m = wire_sample_copy("task_worker");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(6), obj(u(0)),
                     "field 'chip' not allowed unless target is CHIP");
}

static void test_messages_task_pack_einval(void **state)
{
    struct wire_msg m = wire_sample_copy("task_chip");

    (void)state;
    m.u.task.request_id = 0;
    WIRE_EXPECT_PACK_EINVAL(&m, "TASK: field 'request_id' is 0");
    m = wire_sample_copy("task_chip");
    m.u.task.args_len -= 1;
    WIRE_EXPECT_PACK_EINVAL(&m, "field 'args'");
    m = wire_sample_copy("task_chip");
    m.u.task.args = NULL;
    WIRE_EXPECT_PACK_EINVAL(&m, "field 'args' must be bin");
    m = wire_sample_copy("task_worker");
    m.u.task.chip = 2;
    WIRE_EXPECT_PACK_EINVAL(&m, "field 'chip' is set for a non-chip target");
    m = wire_sample_copy("task_worker");
    m.u.task.target = 9;
    WIRE_EXPECT_PACK_EINVAL(&m, "field 'target' has unknown value 9");
    m = wire_sample_copy("task_chip");
    m.u.task.num_data_tensors = 3; /* reads past the args' 2 tensors */
    m.u.task.data_tensors = (const uint32_t[]){0, 1, 2};
    WIRE_EXPECT_PACK_EINVAL(&m, "names tensor 2 of a task with 2 tensors");
}

static void test_messages_completion_chunk_rules_eproto(void **state)
{
    struct wire_msg m = wire_sample_copy("completion_data");
    char *msg = malloc(WIRE_MESSAGE_MAX + 2);
    uint8_t *big = calloc(1, WIRE_CHUNK_MAX + 1);

    (void)state;
    memset(msg, 'm', WIRE_MESSAGE_MAX + 1);
    msg[WIRE_MESSAGE_MAX + 1] = '\0';
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(2), obj(u(STRATA_ETASK)),
                     "COMPLETION: field 'data_tensors' not allowed in a "
                     "failed completion");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(2), obj(u(100)),
                     "field 'error' has unknown error code 100");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(3), obj(s(msg)),
                     "field 'message' must be str of 0..4095 bytes");
    m.u.completion.message = msg;
    WIRE_EXPECT_PACK_EINVAL(&m, "field 'message' must be str of 0..4095");
    /* not_run only says why a task failed. */
    m = wire_sample_copy("completion_not_run");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(2), obj(u(STRATA_OK)),
                     "COMPLETION: field 'not_run' set in a successful "
                     "completion");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(5), obj(u(1)),
                     "field 'not_run' must be bool");

    m = wire_sample_copy("data_chunk");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(4),
                     obj(wire_obj_bin(big, WIRE_CHUNK_MAX + 1)),
                     "DATA_CHUNK: field 'data' must be bin of 0..1048576");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(4), obj(wire_obj_bin(big, 0)),
                     "field 'data' is empty in a chunk that is not the last");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(3), obj(u(UINT64_MAX - 10)),
                     "field 'offset' plus the data length overflows");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(2), obj(u(256)),
                     "field 'tensor' is 256, outside 0..255");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(5), obj(u(1)), "field 'last' must be bool");
    m.u.data_chunk.len = WIRE_CHUNK_MAX + 1;
    m.u.data_chunk.data = big;
    WIRE_EXPECT_PACK_EINVAL(&m, "field 'data' must be bin of 0..1048576");
    free(big);
    free(msg);
}

static void test_messages_control_rules_eproto(void **state)
{
    struct wire_msg m = wire_sample_copy("control_create");

    (void)state;
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(2), obj(u(9)),
                     "CONTROL: field 'op' has unknown value 9");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(3, WIRE_OPND_NBYTES), NULL,
                     "field 'operands.nbytes' missing");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(3, WIRE_OPND_NBYTES), obj(u(0)),
                     "field 'operands.nbytes' is 0");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(3, WIRE_OPND_OFFSET), obj(u(3)),
                     "field 'operands.offset' not allowed for this op");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(3, WIRE_OPND_RANK), obj(u(1u << 31)),
                     "field 'operands.rank' is 2147483648");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(3, WIRE_OPND_NAME), obj(s("")),
                     "field 'operands.name' must be str of 1..255");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(3, 9), obj(u(3)),
                     "field 'operands' has unknown key 9");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(3, WIRE_OPND_NAME), obj(u(3)),
                     "field 'operands.name' must be str");
    m = wire_sample_copy("control_write_inline");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(3, WIRE_OPND_NBYTES), obj(u(9)),
                     "field 'operands.data' holds 8 bytes, nbytes says 9");
    m = wire_sample_copy("control_cancel");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(3, WIRE_OPND_REQUEST), obj(u(0)),
                     "field 'operands.request' is 0");
    m = wire_sample_copy("control_ping");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(3), obj(u(0)),
                     "field 'operands' must be a map");
}

static void test_messages_control_pack_einval(void **state)
{
    struct wire_msg m = wire_sample_copy("control_create");

    (void)state;
    m.u.control.operands.present |= 1u << 9;
    WIRE_EXPECT_PACK_EINVAL(&m, "field 'operands' has unknown operand 9");
    m = wire_sample_copy("control_create");
    m.u.control.operands.present = 0;
    WIRE_EXPECT_PACK_EINVAL(&m, "field 'operands.nbytes' missing");
    m = wire_sample_copy("control_ping");
    m.u.control.op = 0;
    WIRE_EXPECT_PACK_EINVAL(&m, "field 'op' has unknown value 0");
    assert_null(wire_ctrl_schema(0));
    assert_null(wire_ctrl_schema(WIRE_CTRL_OP_MAX + 1));
    assert_non_null(wire_ctrl_schema(WIRE_CTRL_BUFFER_READ));
    assert_string_equal(wire_ctrl_op_name(0), "COMM_INIT");
    assert_string_equal(wire_ctrl_op_name(WIRE_CTRL_BUFFER_READ),
                        "BUFFER_READ");
    assert_null(wire_ctrl_op_name(99));
}

static void test_messages_control_reply_rules_eproto(void **state)
{
    struct wire_msg m = wire_sample_copy("control_reply_create");

    (void)state;
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(3), obj(u(STRATA_ENOENT)),
                     "CONTROL_REPLY: field 'results' not allowed in a "
                     "failed reply");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(5, WIRE_OPND_BUFFER_ID), NULL,
                     "field 'results.buffer_id' missing");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(5, WIRE_OPND_NAME), obj(s("n")),
                     "field 'results.name' not allowed for this op");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(2), obj(u(9)),
                     "field 'op' has unknown value 9");
    m = wire_sample_copy("control_reply_comm_init");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(5), obj(wire_obj_nil()),
                     "field 'results' must be a map");
    m.u.control_reply.error = STRATA_EPEER;
    m.u.control_reply.results.present = WIRE_OPND_BIT(WIRE_OPND_DATA);
    WIRE_EXPECT_PACK_EINVAL(&m, "field 'results' not allowed in a failed");
}

static void test_messages_heartbeat_goodbye_rules_eproto(void **state)
{
    struct wire_msg m = wire_sample_copy("heartbeat_ack");

    (void)state;
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(1), obj(wire_obj_int(-5)),
                     "HEARTBEAT: field 'seq' must be uint");
    m = wire_sample_copy("heartbeat_first");
    m.u.heartbeat.ack_seq = 3;
    WIRE_EXPECT_PACK_EINVAL(&m, "field 'ack_seq' is set without has_ack");
    m = wire_sample_copy("goodbye_error");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(1), obj(u(4096)),
                     "GOODBYE: field 'reason' has unknown error code 4096");
    m.u.goodbye.reason = (strata_err)-1;
    WIRE_EXPECT_PACK_EINVAL(&m, "field 'reason' has unknown error code -1");
}

static void test_messages_health_rules_eproto(void **state)
{
    struct wire_msg m = wire_sample_copy("health_reply");

    (void)state;
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(5), obj(u(65)),
                     "HEALTH_REPLY: field 'sessions' is 65, above "
                     "max_sessions 64");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(3), obj(u(0)),
                     "HEALTH_REPLY: field 'proto_min' is 0, outside 1..65535");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(9), obj(u(0)),
                     "HEALTH_REPLY: field 'pid' is 0, outside");
    m.u.health_reply.proto_max = 0;
    WIRE_EXPECT_PACK_EINVAL(&m, "field 'proto_max' is 0, below proto_min 1");
    m = wire_sample_copy("health_reply");
    m.u.health_reply.version = "";
    WIRE_EXPECT_PACK_EINVAL(&m, "field 'version'");
    m = wire_sample_copy("health");
    WIRE_EXPECT_EDIT(&m, WIRE_PATH(1), obj(wire_obj_int(-1)),
                     "HEALTH: field 'nonce' must be uint");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_messages_hello_rules_eproto),
        cmocka_unit_test(test_messages_hello_pack_einval),
        cmocka_unit_test(test_messages_hello_reply_rules_eproto),
        cmocka_unit_test(test_messages_task_rules_eproto),
        cmocka_unit_test(test_messages_task_pack_einval),
        cmocka_unit_test(test_messages_completion_chunk_rules_eproto),
        cmocka_unit_test(test_messages_control_rules_eproto),
        cmocka_unit_test(test_messages_control_pack_einval),
        cmocka_unit_test(test_messages_control_reply_rules_eproto),
        cmocka_unit_test(test_messages_heartbeat_goodbye_rules_eproto),
        cmocka_unit_test(test_messages_health_rules_eproto),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
