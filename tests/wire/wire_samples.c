/* Sample messages and a field-by-field comparison for the wire tests. */
#include "wire_samples.h"
#include "wire/args.h"

#include <stdio.h>
#include <string.h>

/* ---- Sample data -------------------------------------------------------- */

static uint8_t args_blob[sizeof(struct wire_args_header) +
                         2 * sizeof(struct wire_tensor) + sizeof(uint64_t)];
static uint8_t args_empty[sizeof(struct wire_args_header)];

static void build_args(void)
{
    struct wire_args_header h = {.num_tensors = 2, .num_scalars = 1};
    struct wire_tensor t[2];
    uint64_t scalar = 42;

    memset(t, 0, sizeof(t));
    for (int k = 0; k < 2; k++) {
        t[k].buffer_id = 7 + (uint64_t)k;
        t[k].buffer_size = 4096;
        t[k].offset = 64 * (uint64_t)k;
        t[k].nbytes = 64;
        t[k].shape[0] = 16;
        t[k].dtype = STRATA_F32;
        t[k].ndims = 1;
        t[k].tag = k ? STRATA_OUT : STRATA_IN;
    }
    memcpy(args_blob, &h, sizeof(h));
    memcpy(args_blob + sizeof(h), t, sizeof(t));
    memcpy(args_blob + sizeof(h) + sizeof(t), &scalar, sizeof(scalar));
    memset(args_empty, 0, sizeof(args_empty));
}

static const uint32_t chip_ids[] = {0, 1, 3};
static const uint32_t device_ranks[] = {4, 5, 7};
static const uint32_t task_data[] = {0, 1};
static const uint32_t out_data[] = {1};
static uint8_t chunk_bytes[300];
static const uint8_t inline_bytes[] = {1, 2, 3, 4, 5, 6, 7, 8};
static const uint8_t bootstrap[] = {0xde, 0xad, 0xbe, 0xef, 0, 1, 2, 3};

/* Two nodes (ids 1 and 2) with two chips each; ranks 0..3. */
static const struct wire_domain_member members[] = {
    {1, 0, 0, 0},
    {1, 1, 1, 1},
    {2, 0, 2, 2},
    {2, 1, 3, 3},
};

static const struct wire_attach_entry row_entries[2][4] = {
    {
        {WIRE_SPACE_DEVICE, WIRE_ROLE_PROVIDER, WIRE_ADAPTER_DIRECT_MAP, "sim"},
        {WIRE_SPACE_DEVICE, WIRE_ROLE_PROVIDER, WIRE_ADAPTER_DIRECT_MAP, "sim"},
        {WIRE_SPACE_HOST, WIRE_ROLE_CONSUMER, WIRE_ADAPTER_OWNER_DELEGATED_COPY,
         "tcp"},
        {WIRE_SPACE_HOST, WIRE_ROLE_CONSUMER, WIRE_ADAPTER_NONE, ""},
    },
    {
        {WIRE_SPACE_HOST, WIRE_ROLE_CONSUMER, WIRE_ADAPTER_EXPLICIT_TRANSFER,
         "tcp"},
        {WIRE_SPACE_HOST, WIRE_ROLE_CONSUMER, WIRE_ADAPTER_COLLECTIVE, "nccl"},
        {WIRE_SPACE_DEVICE, WIRE_ROLE_PROVIDER, WIRE_ADAPTER_DEVICE_PEER,
         "sim"},
        {WIRE_SPACE_DEVICE, WIRE_ROLE_PROVIDER, WIRE_ADAPTER_DIRECT_MAP, "sim"},
    },
};

static const struct wire_attach_row rows[] = {
    {1, row_entries[0]},
    {2, row_entries[1]},
};

static const struct wire_domain_buffer buffers[] = {
    {"signal", STRATA_U32, 16, 64},
    {"data", STRATA_F32, 1024, 4096},
};

static const struct wire_descriptor table[] = {
    {WIRE_DESCRIPTOR_VERSION, "sim", 0, 4, 8192, "/strata-1234-7-0"},
    {WIRE_DESCRIPTOR_VERSION, "sim", 1, 4, 8192, "/strata-1234-7-1"},
    {WIRE_DESCRIPTOR_VERSION, "sim", 2, 4, 8192, "/strata-1234-7-2"},
    {WIRE_DESCRIPTOR_VERSION, "sim", 3, 4, 8192, "/strata-1234-7-3"},
};

static struct wire_domain_cmd domain(uint8_t phase)
{
    struct wire_domain_cmd c;

    memset(&c, 0, sizeof(c));
    c.request_id = 40 + phase;
    c.version = WIRE_DOMAIN_CMD_VERSION;
    c.phase = phase;
    c.domain_id = 7;
    c.generation = 3;
    c.window_size = 8192;
    c.name = "halo";
    c.profile = "sim";
    c.members = members;
    c.num_members = 4;
    c.buffers = buffers;
    c.num_buffers = 2;
    if (phase == WIRE_PHASE_PREPARE_EXPORT) {
        c.attach_rows = rows;
        c.num_attach_rows = 2;
    }
    if (phase == WIRE_PHASE_IMPORT || phase == WIRE_PHASE_COMMIT) {
        c.descriptors = table;
        c.num_descriptors = 4;
    }
    return c;
}

#define MAX_SAMPLES 48

static struct wire_sample samples[MAX_SAMPLES];
static size_t num_samples;

static struct wire_msg *add(const char *name, unsigned type)
{
    struct wire_sample *s = &samples[num_samples++];

    memset(s, 0, sizeof(*s));
    s->name = name;
    s->msg.type = (uint8_t)type;
    return &s->msg;
}

/* Two records of a trace buffer: a task run on a chip and an instant. */
static const uint8_t trace_recs[2 * WIRE_TRACE_REC_SIZE] = {
    1,    0,    0,   0,   0,   0,   0, 0,
    0x10, 0x27, 0,   0,   0,   0,   0, 0,
    0x20, 0x4e, 0,   0,   0,   0,   0, 0,
    1,    0,    0,   0,   0,   0,   0, 0,
    64,   0,    0,   0,   0,   0,   0, 0,
    0,    0,    0,   0,   0,   0,   0, 0,
    0,    0,    0,   0,   0,   0,   0, 0,
    'k',  'e',  'r', 'n', 'e', 'l', 0, [WIRE_TRACE_REC_SIZE] = 6,
    0,    0,    0,   0,   0,   3,   0, 0x30,
    0x75};

static void build_session(void)
{
    struct wire_msg *m;

    m = add("hello_full", WIRE_MSG_HELLO);
    m->u.hello = (struct wire_hello){.proto_min = 1,
                                     .proto_max = 3,
                                     .capabilities = WIRE_CAP_DATA_CHUNKS |
                                                     WIRE_CAP_GLOBAL_DOMAINS |
                                                     (1ull << 40),
                                     .node_name = "l4@host-a",
                                     .pid = 4242,
                                     .platform = "sim",
                                     .chip_ids = chip_ids,
                                     .num_chips = 3,
                                     .num_sub_workers = 2,
                                     .comm_profile = "sim",
                                     .global_device_ranks = device_ranks,
                                     .startup_budget_ms = 30000};
    m = add("hello_min", WIRE_MSG_HELLO);
    m->u.hello = (struct wire_hello){.proto_min = 1,
                                     .proto_max = 1,
                                     .node_name = "n",
                                     .pid = 1,
                                     .platform = "sim",
                                     .comm_profile = "sim"};
    m = add("hello_reply_accept", WIRE_MSG_HELLO_REPLY);
    m->u.hello_reply = (struct wire_hello_reply){
        .version = 1,
        .error = STRATA_OK,
        .message = "welcome",
        .capabilities = WIRE_CAP_DATA_CHUNKS,
        .node_name = "host-b:7000",
        .pid = 999,
        .boot_id = "0f4e2a3c-1b2d-4e5f-8a9b-0c1d2e3f4a5b"};
    m = add("hello_reply_clock", WIRE_MSG_HELLO_REPLY);
    m->u.hello_reply = (struct wire_hello_reply){.version = 2,
                                                 .error = STRATA_OK,
                                                 .capabilities = WIRE_CAP_TRACE,
                                                 .node_name = "host-c",
                                                 .pid = 1000,
                                                 .has_clock = true,
                                                 .hello_rx_ns = 123456789000ull,
                                                 .time_ns = 123456999000ull};
    m = add("hello_reply_refuse", WIRE_MSG_HELLO_REPLY);
    m->u.hello_reply =
        (struct wire_hello_reply){.version = 0,
                                  .error = STRATA_EPROTO,
                                  .message = "no common protocol version",
                                  .node_name = "host-b",
                                  .pid = 998};
    m = add("heartbeat_ack", WIRE_MSG_HEARTBEAT);
    m->u.heartbeat = (struct wire_heartbeat){.seq = 17,
                                             .time_ns = 123456789012345ull,
                                             .has_ack = true,
                                             .ack_seq = 16};
    m = add("heartbeat_first", WIRE_MSG_HEARTBEAT);
    m->u.heartbeat = (struct wire_heartbeat){.seq = 0, .time_ns = 1};
    m = add("goodbye_error", WIRE_MSG_GOODBYE);
    m->u.goodbye = (struct wire_goodbye){.reason = STRATA_ETIMEDOUT,
                                         .message = "peer silent for 5 s"};
    m = add("goodbye_ok", WIRE_MSG_GOODBYE);
    m->u.goodbye = (struct wire_goodbye){.reason = STRATA_OK};
    m = add("health", WIRE_MSG_HEALTH);
    m->u.health = (struct wire_health){.nonce = 0x5eed1234abcdull};
    m = add("health_reply", WIRE_MSG_HEALTH_REPLY);
    m->u.health_reply = (struct wire_health_reply){.nonce = 0x5eed1234abcdull,
                                                   .version = "0.1.0",
                                                   .proto_min = 1,
                                                   .proto_max = 2,
                                                   .sessions = 3,
                                                   .max_sessions = 64,
                                                   .max_procs = 512,
                                                   .uptime_ms = 123456,
                                                   .pid = 4242};
    m = add("trace_request", WIRE_MSG_TRACE);
    m->u.trace = (struct wire_trace){.request_id = 7};
    m = add("trace_data", WIRE_MSG_TRACE);
    m->u.trace = (struct wire_trace){.request_id = 7,
                                     .is_data = true,
                                     .pid = 5150,
                                     .ppid = 5149,
                                     .role = "chip 1",
                                     .dropped = 3,
                                     .records = trace_recs,
                                     .num_records = 2,
                                     .last = true};
}

static void build_work(void)
{
    struct wire_msg *m;

    for (size_t k = 0; k < sizeof(chunk_bytes); k++)
        chunk_bytes[k] = (uint8_t)(k * 7);
    m = add("task_chip", WIRE_MSG_TASK);
    m->u.task = (struct wire_task){.request_id = 1001,
                                   .run_id = 5,
                                   .args = args_blob,
                                   .args_len = sizeof(args_blob),
                                   .target = WIRE_TARGET_CHIP,
                                   .chip = 3,
                                   .deadline_ms = 60000,
                                   .data_tensors = task_data,
                                   .num_data_tensors = 2};
    for (int k = 0; k < 32; k++)
        m->u.task.digest[k] = (uint8_t)(0xa0 + k);
    m = add("task_worker", WIRE_MSG_TASK);
    m->u.task = (struct wire_task){.request_id = 1,
                                   .args = args_empty,
                                   .args_len = sizeof(args_empty),
                                   .target = WIRE_TARGET_WORKER};
    m = add("task_sub", WIRE_MSG_TASK);
    m->u.task = (struct wire_task){.request_id = UINT64_MAX,
                                   .run_id = 9,
                                   .args = args_blob,
                                   .args_len = sizeof(args_blob),
                                   .target = WIRE_TARGET_SUB};
    m = add("completion_data", WIRE_MSG_COMPLETION);
    m->u.completion = (struct wire_completion){.request_id = 1001,
                                               .error = STRATA_OK,
                                               .message = "ok",
                                               .data_tensors = out_data,
                                               .num_data_tensors = 1};
    m = add("completion_failed", WIRE_MSG_COMPLETION);
    m->u.completion =
        (struct wire_completion){.request_id = 1002,
                                 .error = STRATA_ETASK,
                                 .message = "kernel vadd: shape mismatch"};
    m = add("completion_not_run", WIRE_MSG_COMPLETION);
    m->u.completion =
        (struct wire_completion){.request_id = 1003,
                                 .error = STRATA_ENOENT,
                                 .message = "node has no orch callable",
                                 .not_run = true};
    m = add("data_chunk", WIRE_MSG_DATA_CHUNK);
    m->u.data_chunk = (struct wire_data_chunk){.request_id = 1001,
                                               .tensor = 1,
                                               .offset = 1u << 20,
                                               .data = chunk_bytes,
                                               .len = sizeof(chunk_bytes),
                                               .last = false};
    m = add("data_chunk_last_empty", WIRE_MSG_DATA_CHUNK);
    m->u.data_chunk = (struct wire_data_chunk){.request_id = 3, .last = true};
}

static void build_control(void)
{
    struct wire_msg *m;

    m = add("control_create", WIRE_MSG_CONTROL);
    m->u.control = (struct wire_control){
        .request_id = 77,
        .op = WIRE_CTRL_BUFFER_CREATE,
        .operands = {.present = WIRE_OPND_BIT(WIRE_OPND_NBYTES) |
                                WIRE_OPND_BIT(WIRE_OPND_NAME),
                     .nbytes = 1u << 20,
                     .name = "weights"}};
    m = add("control_write_inline", WIRE_MSG_CONTROL);
    m->u.control = (struct wire_control){
        .request_id = 78,
        .op = WIRE_CTRL_BUFFER_WRITE,
        .operands = {.present = WIRE_OPND_BIT(WIRE_OPND_BUFFER_ID) |
                                WIRE_OPND_BIT(WIRE_OPND_OFFSET) |
                                WIRE_OPND_BIT(WIRE_OPND_NBYTES) |
                                WIRE_OPND_BIT(WIRE_OPND_DATA),
                     .buffer_id = 12,
                     .offset = 128,
                     .nbytes = sizeof(inline_bytes),
                     .data = inline_bytes,
                     .data_len = sizeof(inline_bytes)}};
    m = add("control_cancel", WIRE_MSG_CONTROL);
    m->u.control = (struct wire_control){
        .request_id = 79,
        .op = WIRE_CTRL_CANCEL,
        .operands = {.present = WIRE_OPND_BIT(WIRE_OPND_REQUEST),
                     .request = 1001}};
    m = add("control_ping", WIRE_MSG_CONTROL);
    m->u.control =
        (struct wire_control){.request_id = 80, .op = WIRE_CTRL_PING};
    m = add("control_reply_create", WIRE_MSG_CONTROL_REPLY);
    m->u.control_reply = (struct wire_control_reply){
        .request_id = 77,
        .op = WIRE_CTRL_BUFFER_CREATE,
        .error = STRATA_OK,
        .results = {.present = WIRE_OPND_BIT(WIRE_OPND_BUFFER_ID),
                    .buffer_id = 12}};
    m = add("control_reply_read", WIRE_MSG_CONTROL_REPLY);
    m->u.control_reply = (struct wire_control_reply){
        .request_id = 81,
        .op = WIRE_CTRL_BUFFER_READ,
        .error = STRATA_OK,
        .results = {.present = WIRE_OPND_BIT(WIRE_OPND_DATA),
                    .data = inline_bytes,
                    .data_len = 3}};
    m = add("control_reply_failed", WIRE_MSG_CONTROL_REPLY);
    m->u.control_reply =
        (struct wire_control_reply){.request_id = 82,
                                    .op = WIRE_CTRL_BUFFER_RELEASE,
                                    .error = STRATA_ENOENT,
                                    .message = "buffer 12 unknown"};
    m = add("control_window_write", WIRE_MSG_CONTROL);
    m->u.control = (struct wire_control){
        .request_id = 83,
        .op = WIRE_CTRL_WINDOW_WRITE,
        .operands = {.present = WIRE_OPND_BIT(WIRE_OPND_DOMAIN_ID) |
                                WIRE_OPND_BIT(WIRE_OPND_RANK) |
                                WIRE_OPND_BIT(WIRE_OPND_OFFSET) |
                                WIRE_OPND_BIT(WIRE_OPND_NBYTES) |
                                WIRE_OPND_BIT(WIRE_OPND_DATA),
                     .domain_id = 5,
                     .rank = 3,
                     .offset = 64,
                     .nbytes = sizeof(inline_bytes),
                     .data = inline_bytes,
                     .data_len = sizeof(inline_bytes)}};
    m = add("control_reply_window_read", WIRE_MSG_CONTROL_REPLY);
    m->u.control_reply = (struct wire_control_reply){
        .request_id = 84,
        .op = WIRE_CTRL_WINDOW_READ,
        .error = STRATA_OK,
        .results = {.present = WIRE_OPND_BIT(WIRE_OPND_DATA),
                    .data = inline_bytes,
                    .data_len = 5}};
    m = add("control_reply_comm_init", WIRE_MSG_CONTROL_REPLY);
    m->u.control_reply = (struct wire_control_reply){.request_id = 90};
}

static void build_domain(void)
{
    struct wire_msg *m;

    m = add("domain_prepare", WIRE_MSG_DOMAIN_CMD);
    m->u.domain_cmd = domain(WIRE_PHASE_PREPARE_EXPORT);
    m = add("domain_import", WIRE_MSG_DOMAIN_CMD);
    m->u.domain_cmd = domain(WIRE_PHASE_IMPORT);
    m = add("domain_commit", WIRE_MSG_DOMAIN_CMD);
    m->u.domain_cmd = domain(WIRE_PHASE_COMMIT);
    m = add("domain_abort", WIRE_MSG_DOMAIN_CMD);
    m->u.domain_cmd = domain(WIRE_PHASE_ABORT);
    m = add("domain_prepare_plain", WIRE_MSG_DOMAIN_CMD);
    m->u.domain_cmd = domain(WIRE_PHASE_PREPARE_EXPORT);
    m->u.domain_cmd.attach_rows = NULL;
    m->u.domain_cmd.num_attach_rows = 0;
    m->u.domain_cmd.buffers = NULL;
    m->u.domain_cmd.num_buffers = 0;
    m = add("domain_prepare_gather", WIRE_MSG_DOMAIN_CMD);
    m->u.domain_cmd = domain(WIRE_PHASE_PREPARE_EXPORT);
    m->u.domain_cmd.gather = true;
    m = add("domain_prepare_exchange", WIRE_MSG_DOMAIN_CMD);
    m->u.domain_cmd = domain(WIRE_PHASE_PREPARE_EXPORT);
    m->u.domain_cmd.exchange = true;
    m = add("domain_reply_prepare", WIRE_MSG_DOMAIN_REPLY);
    m->u.domain_reply =
        (struct wire_domain_reply){.request_id = 41,
                                   .phase = WIRE_PHASE_PREPARE_EXPORT,
                                   .domain_id = 7,
                                   .generation = 3,
                                   .error = STRATA_OK,
                                   .message = "prepared",
                                   .descriptors = table + 2,
                                   .num_descriptors = 2};
    m = add("domain_reply_failed", WIRE_MSG_DOMAIN_REPLY);
    m->u.domain_reply =
        (struct wire_domain_reply){.request_id = 42,
                                   .phase = WIRE_PHASE_IMPORT,
                                   .domain_id = 7,
                                   .generation = 3,
                                   .error = STRATA_EPEER,
                                   .message = "chip 1 died during import"};
    m = add("domain_reply_commit", WIRE_MSG_DOMAIN_REPLY);
    m->u.domain_reply = (struct wire_domain_reply){
        .request_id = 43, .phase = WIRE_PHASE_COMMIT, .domain_id = 7};
    m = add("comm_init_full", WIRE_MSG_COMM_INIT);
    m->u.comm_init =
        (struct wire_comm_init){.request_id = 30,
                                .version = WIRE_COMM_INIT_VERSION,
                                .cluster_id = 0x1234abcd5678ull,
                                .node_rank = 1,
                                .node_count = 2,
                                .global_device_ranks = device_ranks,
                                .num_ranks = 3,
                                .profile = "sim",
                                .bootstrap = bootstrap,
                                .bootstrap_len = sizeof(bootstrap)};
    m = add("comm_init_min", WIRE_MSG_COMM_INIT);
    m->u.comm_init =
        (struct wire_comm_init){.request_id = 31,
                                .version = WIRE_COMM_INIT_VERSION,
                                .node_rank = 0,
                                .node_count = 1,
                                .global_device_ranks = device_ranks,
                                .num_ranks = 1,
                                .profile = "cuda-ipc"};
}

size_t wire_samples(const struct wire_sample **out)
{
    if (!num_samples) {
        build_args();
        build_session();
        build_work();
        build_control();
        build_domain();
    }
    *out = samples;
    return num_samples;
}

const char *wire_sample_target(unsigned type)
{
    static const char *const names[] = {
        [WIRE_MSG_HELLO] = "fuzz_hello",
        [WIRE_MSG_HELLO_REPLY] = "fuzz_hello_reply",
        [WIRE_MSG_TASK] = "fuzz_task",
        [WIRE_MSG_COMPLETION] = "fuzz_completion",
        [WIRE_MSG_DATA_CHUNK] = "fuzz_data_chunk",
        [WIRE_MSG_CONTROL] = "fuzz_control",
        [WIRE_MSG_CONTROL_REPLY] = "fuzz_control_reply",
        [WIRE_MSG_HEARTBEAT] = "fuzz_heartbeat",
        [WIRE_MSG_GOODBYE] = "fuzz_goodbye",
        [WIRE_MSG_DOMAIN_CMD] = "fuzz_domain_cmd",
        [WIRE_MSG_DOMAIN_REPLY] = "fuzz_domain_reply",
        [WIRE_MSG_COMM_INIT] = "fuzz_comm_init",
        [WIRE_MSG_HEALTH] = "fuzz_health",
        [WIRE_MSG_HEALTH_REPLY] = "fuzz_health_reply",
        [WIRE_MSG_TRACE] = "fuzz_trace_msg",
    };

    return type <= WIRE_MSG_TYPE_MAX ? names[type] : NULL;
}
