/* The seed corpus of fuzz_l4_link (FUZZ_WRITE_SEEDS=DIR): what a node
 * sends while the L4 runs the harness's script, in records of
 * fuzz_records.h. Replies name the L4's requests by their place in what
 * it sent (k, from 1), domain id 1 is the command's and a handle "=" the
 * predicted window (see fuzz_l4_link.c): with every request answered the
 * L4 sends, in order,
 *   1 BUFFER_CREATE, 2 BUFFER_WRITE, 3 BUFFER_READ (the remote buffer),
 *   4 TASK (its input in a DATA_CHUNK), 5 COMM_INIT, 6..8 PREPARE_EXPORT,
 *   IMPORT, COMMIT, 9 WINDOW_WRITE, 10 WINDOW_READ, 11 ABORT (run 1),
 *   12..14 the second domain's three phases (one batch, or one by one),
 *   15 its ABORT, 16..18 BUFFER_RELEASE of the three buffers. */
#include "fuzz_l4_link.h"
#include "fuzz_records.h"

#define NODE_CHIPS FUZZ_L4_CHIPS
#define HERE FUZZ_L4_HERE

/* Replies name requests by their place in what the L4 sent (k, from 1);
 * see the top of the file. */

static void hello_reply(struct fuzz_seed *sd, uint64_t caps, unsigned flags)
{
    struct wire_msg m = {.type = WIRE_MSG_HELLO_REPLY};

    m.u.hello_reply.version = WIRE_PROTO_MAX;
    m.u.hello_reply.capabilities = caps;
    m.u.hello_reply.node_name = HERE;
    m.u.hello_reply.pid = 1;
    m.u.hello_reply.boot_id = HERE;
    m.u.hello_reply.message = "";
    fuzz_seed_msg(sd, &m, flags);
}

/* A CONTROL_REPLY to request k (op 0: to a COMM_INIT), with what op's
 * success returns. */
static void ctl_reply(struct fuzz_seed *sd, uint64_t k, unsigned op,
                      strata_err err, unsigned flags)
{
    static const uint8_t bytes[64] = {5, 4, 3, 2, 1};
    struct wire_msg m = {.type = WIRE_MSG_CONTROL_REPLY};
    struct wire_operands *o = &m.u.control_reply.results;

    m.u.control_reply.request_id = k;
    m.u.control_reply.op = (uint8_t)op;
    m.u.control_reply.error = err;
    m.u.control_reply.message = err ? "refused" : "";
    if (!err && op == WIRE_CTRL_BUFFER_CREATE) {
        o->present = WIRE_OPND_BIT(WIRE_OPND_BUFFER_ID);
        o->buffer_id = 1;
    } else if (!err &&
               (op == WIRE_CTRL_BUFFER_READ || op == WIRE_CTRL_WINDOW_READ)) {
        o->present = WIRE_OPND_BIT(WIRE_OPND_DATA);
        o->data = bytes;
        o->data_len = sizeof(bytes);
    }
    fuzz_seed_msg(sd, &m, flags);
}

static void completion(struct fuzz_seed *sd, uint64_t k, strata_err err,
                       bool not_run)
{
    static const uint32_t out[1] = {1};
    struct wire_msg m = {.type = WIRE_MSG_COMPLETION};

    m.u.completion.request_id = k;
    m.u.completion.error = err;
    m.u.completion.message = err ? "failed" : "";
    m.u.completion.data_tensors = err ? NULL : out;
    m.u.completion.num_data_tensors = err ? 0 : 1;
    m.u.completion.not_run = not_run;
    fuzz_seed_msg(sd, &m, 0);
}

static void chunk(struct fuzz_seed *sd, uint64_t k, uint32_t tensor,
                  uint64_t off, size_t len, bool last)
{
    static const uint8_t bytes[64] = {6, 6, 6};
    struct wire_msg m = {.type = WIRE_MSG_DATA_CHUNK};

    m.u.data_chunk.request_id = k;
    m.u.data_chunk.tensor = tensor;
    m.u.data_chunk.offset = off;
    m.u.data_chunk.data = bytes;
    m.u.data_chunk.len = len < sizeof(bytes) ? len : sizeof(bytes);
    m.u.data_chunk.last = last;
    fuzz_seed_msg(sd, &m, 0);
}

/* A DOMAIN_REPLY to request k: the command's domain and generation; at
 * PREPARE_EXPORT the windows of both chips, as predicted (handle "=") or
 * named otherwise. */
static void dom_reply(struct fuzz_seed *sd, uint64_t k, unsigned phase,
                      strata_err err, const char *handle)
{
    struct wire_descriptor d[NODE_CHIPS];
    struct wire_msg m = {.type = WIRE_MSG_DOMAIN_REPLY};

    m.u.domain_reply.request_id = k;
    m.u.domain_reply.phase = (uint8_t)phase;
    m.u.domain_reply.domain_id = 1;
    m.u.domain_reply.generation = 1;
    m.u.domain_reply.error = err;
    m.u.domain_reply.message = err ? "refused" : "";
    if (!err && phase == WIRE_PHASE_PREPARE_EXPORT) {
        for (uint32_t r = 0; r < NODE_CHIPS; r++) {
            d[r].version = WIRE_DESCRIPTOR_VERSION;
            d[r].profile = "sim";
            d[r].domain_rank = r;
            d[r].rank_count = NODE_CHIPS;
            d[r].mapping_size = 4096;
            d[r].handle = handle;
        }
        m.u.domain_reply.descriptors = d;
        m.u.domain_reply.num_descriptors = NODE_CHIPS;
    }
    fuzz_seed_msg(sd, &m, 0);
}

static void goodbye(struct fuzz_seed *sd, strata_err reason, unsigned flags)
{
    struct wire_msg m = {.type = WIRE_MSG_GOODBYE};

    m.u.goodbye.reason = reason;
    m.u.goodbye.message = reason ? "node failing" : "";
    fuzz_seed_msg(sd, &m, flags);
}

static void heartbeat(struct fuzz_seed *sd, uint64_t seq)
{
    struct wire_msg m = {.type = WIRE_MSG_HEARTBEAT};

    m.u.heartbeat.seq = seq;
    m.u.heartbeat.time_ns = 1000 * seq;
    fuzz_seed_msg(sd, &m, 0);
}

#define CAPS_OLD                                                               \
    (WIRE_CAP_DATA_CHUNKS | WIRE_CAP_REMOTE_BUFFERS |                          \
     WIRE_CAP_GLOBAL_DOMAINS | WIRE_CAP_DEADLINES |                            \
     WIRE_CAP_STARTUP_HEARTBEATS)
#define CAPS (CAPS_OLD | WIRE_CAP_ORDERED_DOMAIN_CMDS)

/* Requests 1..3: the remote buffer. */
static void rbuffer_replies(struct fuzz_seed *sd)
{
    ctl_reply(sd, 1, WIRE_CTRL_BUFFER_CREATE, STRATA_OK, 0);
    ctl_reply(sd, 2, WIRE_CTRL_BUFFER_WRITE, STRATA_OK, 0);
    ctl_reply(sd, 3, WIRE_CTRL_BUFFER_READ, STRATA_OK, 0);
}

/* Requests 4..11: run 1 (the TASK, the first domain, its copies and its
 * ABORT). */
static void run1_replies(struct fuzz_seed *sd)
{
    chunk(sd, 4, 1, 0, 64, true);
    completion(sd, 4, STRATA_OK, false);
    ctl_reply(sd, 5, 0, STRATA_OK, 0);
    dom_reply(sd, 6, WIRE_PHASE_PREPARE_EXPORT, STRATA_OK, "=");
    dom_reply(sd, 7, WIRE_PHASE_IMPORT, STRATA_OK, "=");
    dom_reply(sd, 8, WIRE_PHASE_COMMIT, STRATA_OK, "=");
    ctl_reply(sd, 9, WIRE_CTRL_WINDOW_WRITE, STRATA_OK, 0);
    ctl_reply(sd, 10, WIRE_CTRL_WINDOW_READ, STRATA_OK, 0);
    dom_reply(sd, 11, WIRE_PHASE_ABORT, STRATA_OK, "=");
}

/* Requests 12..15: run 2's domain (one batch where the node granted
 * ORDERED_DOMAIN_CMDS, else phase by phase) and its release; 16..18: the
 * buffers' releases (the host buffers' go to the node that saw them). */
static void run2_replies(struct fuzz_seed *sd)
{
    dom_reply(sd, 12, WIRE_PHASE_PREPARE_EXPORT, STRATA_OK, "=");
    dom_reply(sd, 13, WIRE_PHASE_IMPORT, STRATA_OK, "=");
    dom_reply(sd, 14, WIRE_PHASE_COMMIT, STRATA_OK, "=");
    dom_reply(sd, 15, WIRE_PHASE_ABORT, STRATA_OK, "=");
}

static void release_replies(struct fuzz_seed *sd, uint64_t k)
{
    ctl_reply(sd, k, WIRE_CTRL_BUFFER_RELEASE, STRATA_OK, 0);
    ctl_reply(sd, k + 1, WIRE_CTRL_BUFFER_RELEASE, STRATA_OK, 0);
    ctl_reply(sd, k + 2, WIRE_CTRL_BUFFER_RELEASE, STRATA_ENOENT, 0);
}

void fuzz_l4_write_seeds(const char *dir)
{
    struct fuzz_seed sd;

    wire_buf_init(&sd.b);

    /* Everything answered, the second domain as one batch. */
    hello_reply(&sd, CAPS, 0);
    rbuffer_replies(&sd);
    run1_replies(&sd);
    run2_replies(&sd);
    release_replies(&sd, 16);
    fuzz_seed_write(&sd, dir, "ordered_all");

    /* The same from a node without ORDERED_DOMAIN_CMDS, heartbeating
     * while its chips start: phase by phase. */
    heartbeat(&sd, 1);
    heartbeat(&sd, 2);
    hello_reply(&sd, CAPS_OLD, 0);
    rbuffer_replies(&sd);
    run1_replies(&sd);
    run2_replies(&sd);
    release_replies(&sd, 16);
    fuzz_seed_write(&sd, dir, "unordered_all");

    /* The batch's PREPARE_EXPORT names the windows otherwise than
     * predicted, and IMPORT refuses: ABORT (15), then the domain phase by
     * phase with the members exchanging (16..18), its ABORT (19). */
    hello_reply(&sd, CAPS, 0);
    rbuffer_replies(&sd);
    run1_replies(&sd);
    dom_reply(&sd, 12, WIRE_PHASE_PREPARE_EXPORT, STRATA_OK, "elsewhere");
    dom_reply(&sd, 13, WIRE_PHASE_IMPORT, STRATA_EPROTO, "=");
    dom_reply(&sd, 14, WIRE_PHASE_COMMIT, STRATA_ESTATE, "=");
    dom_reply(&sd, 15, WIRE_PHASE_ABORT, STRATA_OK, "=");
    dom_reply(&sd, 16, WIRE_PHASE_PREPARE_EXPORT, STRATA_OK, "=");
    dom_reply(&sd, 17, WIRE_PHASE_IMPORT, STRATA_OK, "=");
    dom_reply(&sd, 18, WIRE_PHASE_COMMIT, STRATA_OK, "=");
    dom_reply(&sd, 19, WIRE_PHASE_ABORT, STRATA_OK, "=");
    release_replies(&sd, 20);
    fuzz_seed_write(&sd, dir, "batch_mispredicted");

    /* The batch fails at IMPORT: judged phase by phase, then ABORT. */
    hello_reply(&sd, CAPS, 0);
    rbuffer_replies(&sd);
    run1_replies(&sd);
    dom_reply(&sd, 12, WIRE_PHASE_PREPARE_EXPORT, STRATA_OK, "=");
    dom_reply(&sd, 13, WIRE_PHASE_IMPORT, STRATA_ENOMEM, "=");
    dom_reply(&sd, 14, WIRE_PHASE_COMMIT, STRATA_ESTATE, "=");
    dom_reply(&sd, 15, WIRE_PHASE_ABORT, STRATA_OK, "=");
    release_replies(&sd, 16);
    fuzz_seed_write(&sd, dir, "batch_import_fails");

    /* Two of the batch's three replies, then GOODBYE: lost mid-batch. */
    hello_reply(&sd, CAPS, 0);
    rbuffer_replies(&sd);
    run1_replies(&sd);
    dom_reply(&sd, 12, WIRE_PHASE_PREPARE_EXPORT, STRATA_OK, "=");
    dom_reply(&sd, 13, WIRE_PHASE_IMPORT, STRATA_OK, "=");
    goodbye(&sd, STRATA_EIO, 0);
    fuzz_seed_write(&sd, dir, "batch_cut_short");

    /* The batch's replies in the wrong order, one twice. */
    hello_reply(&sd, CAPS, 0);
    rbuffer_replies(&sd);
    run1_replies(&sd);
    dom_reply(&sd, 12, WIRE_PHASE_PREPARE_EXPORT, STRATA_OK, "=");
    dom_reply(&sd, 14, WIRE_PHASE_COMMIT, STRATA_OK, "=");
    dom_reply(&sd, 13, WIRE_PHASE_IMPORT, STRATA_OK, "=");
    dom_reply(&sd, 12, WIRE_PHASE_PREPARE_EXPORT, STRATA_OK, "=");
    fuzz_seed_write(&sd, dir, "batch_out_of_order");

    /* The first domain's windows named otherwise: no batch after it. */
    hello_reply(&sd, CAPS, 0);
    rbuffer_replies(&sd);
    chunk(&sd, 4, 1, 0, 64, true);
    completion(&sd, 4, STRATA_OK, false);
    ctl_reply(&sd, 5, 0, STRATA_OK, 0);
    dom_reply(&sd, 6, WIRE_PHASE_PREPARE_EXPORT, STRATA_OK, "named-so");
    dom_reply(&sd, 7, WIRE_PHASE_IMPORT, STRATA_OK, "=");
    dom_reply(&sd, 8, WIRE_PHASE_COMMIT, STRATA_OK, "=");
    ctl_reply(&sd, 9, WIRE_CTRL_WINDOW_WRITE, STRATA_OK, 0);
    ctl_reply(&sd, 10, WIRE_CTRL_WINDOW_READ, STRATA_OK, 0);
    dom_reply(&sd, 11, WIRE_PHASE_ABORT, STRATA_OK, "=");
    run2_replies(&sd);
    release_replies(&sd, 16);
    fuzz_seed_write(&sd, dir, "not_lazy");

    /* Failures the L4 must take: the remote buffer refused, the task
     * not run, COMM_INIT refused (the domains fail), ABORTs answered. */
    hello_reply(&sd, CAPS, 0);
    ctl_reply(&sd, 1, WIRE_CTRL_BUFFER_CREATE, STRATA_ENOMEM, 0);
    completion(&sd, 2, STRATA_ENOENT, true);
    ctl_reply(&sd, 3, 0, STRATA_EPROTO, 0);
    ctl_reply(&sd, 4, 0, STRATA_OK, 0);
    dom_reply(&sd, 5, WIRE_PHASE_PREPARE_EXPORT, STRATA_EBUSY, "=");
    dom_reply(&sd, 6, WIRE_PHASE_ABORT, STRATA_OK, "=");
    release_replies(&sd, 7);
    fuzz_seed_write(&sd, dir, "refusals");

    /* A reply of the wrong kind to a buffer control, a chunk outside its
     * tensor: the node is dropped. */
    hello_reply(&sd, CAPS, 0);
    ctl_reply(&sd, 1, WIRE_CTRL_BUFFER_CREATE, STRATA_OK, 0);
    dom_reply(&sd, 2, WIRE_PHASE_COMMIT, STRATA_OK, "=");
    ctl_reply(&sd, 3, WIRE_CTRL_BUFFER_WRITE, STRATA_OK, 0);
    chunk(&sd, 4, 1, 32, 64, true);
    completion(&sd, 4, STRATA_OK, false);
    fuzz_seed_write(&sd, dir, "wrong_replies");

    /* HELLO_REPLY refused; a GOODBYE after COMM_INIT. */
    {
        struct wire_msg m = {.type = WIRE_MSG_HELLO_REPLY};

        m.u.hello_reply.error = STRATA_EBUSY;
        m.u.hello_reply.message = "too many sessions";
        m.u.hello_reply.node_name = HERE;
        m.u.hello_reply.pid = 1;
        fuzz_seed_msg(&sd, &m, 0);
        fuzz_seed_write(&sd, dir, "hello_refused");
    }
    hello_reply(&sd, CAPS, 0);
    rbuffer_replies(&sd);
    chunk(&sd, 4, 1, 0, 64, true);
    completion(&sd, 4, STRATA_OK, false);
    ctl_reply(&sd, 5, 0, STRATA_OK, 0);
    goodbye(&sd, STRATA_OK, FUZZ_OP_WAIT);
    fuzz_seed_write(&sd, dir, "goodbye_midway");

    /* Heartbeats once ready, then trace records nobody asked for (the
     * L4 does not trace): the node is dropped. */
    hello_reply(&sd, CAPS | WIRE_CAP_TRACE, 0);
    heartbeat(&sd, 1);
    ctl_reply(&sd, 1, WIRE_CTRL_BUFFER_CREATE, STRATA_OK, 0);
    heartbeat(&sd, 2);
    {
        struct wire_msg m = {.type = WIRE_MSG_TRACE};

        m.u.trace.request_id = 2;
        m.u.trace.is_data = true;
        m.u.trace.pid = 1;
        m.u.trace.role = "chip 0";
        m.u.trace.last = true;
        fuzz_seed_msg(&sd, &m, 0);
    }
    fuzz_seed_write(&sd, dir, "trace_unasked");

    /* A frame header cut short after HELLO_REPLY. */
    hello_reply(&sd, CAPS, 0);
    fuzz_seed_bytes(&sd, 0, "STRA\x01\x06\x00", 7);
    fuzz_seed_write(&sd, dir, "raw_truncated");

    wire_buf_fini(&sd.b);
    printf("fuzz_l4_link: seeds written to %s\n", dir);
}
