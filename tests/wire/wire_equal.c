/* Field-by-field comparison of two decoded (or sample) messages. An absent
 * optional string equals "", an absent array equals an empty one. */
#include "wire_samples.h"

#include <stdio.h>
#include <string.h>

static bool str_eq(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "") == 0;
}

static bool mem_eq(const void *a, const void *b, size_t n)
{
    return n == 0 || (a && b && memcmp(a, b, n) == 0);
}

#define EQ(f)                                                                  \
    do {                                                                       \
        if (a->f != b->f)                                                      \
            return fail(why, n, #f);                                           \
    } while (0)
#define EQ_STR(f)                                                              \
    do {                                                                       \
        if (!str_eq(a->f, b->f))                                               \
            return fail(why, n, #f);                                           \
    } while (0)
#define EQ_MEM(f, len)                                                         \
    do {                                                                       \
        if (!mem_eq(a->f, b->f, (len)))                                        \
            return fail(why, n, #f);                                           \
    } while (0)

static bool fail(char *why, size_t n, const char *field)
{
    snprintf(why, n, "field %s differs", field);
    return false;
}

static bool hello_eq(const struct wire_hello *a, const struct wire_hello *b,
                     char *why, size_t n)
{
    EQ(proto_min);
    EQ(proto_max);
    EQ(capabilities);
    EQ_STR(node_name);
    EQ(pid);
    EQ_STR(platform);
    EQ(num_chips);
    EQ_MEM(chip_ids, a->num_chips * sizeof(uint32_t));
    EQ(num_sub_workers);
    EQ_STR(comm_profile);
    if ((a->global_device_ranks && a->num_chips) !=
        (b->global_device_ranks && b->num_chips))
        return fail(why, n, "global_device_ranks presence");
    if (a->global_device_ranks && a->num_chips)
        EQ_MEM(global_device_ranks, a->num_chips * sizeof(uint32_t));
    EQ(startup_budget_ms);
    return true;
}

static bool hello_reply_eq(const struct wire_hello_reply *a,
                           const struct wire_hello_reply *b, char *why,
                           size_t n)
{
    EQ(version);
    EQ(error);
    EQ_STR(message);
    EQ(capabilities);
    EQ_STR(node_name);
    EQ(pid);
    EQ_STR(boot_id);
    EQ(has_clock);
    EQ(hello_rx_ns);
    EQ(time_ns);
    return true;
}

static bool task_eq(const struct wire_task *a, const struct wire_task *b,
                    char *why, size_t n)
{
    EQ(request_id);
    EQ(run_id);
    EQ_MEM(digest, sizeof(a->digest));
    EQ(args_len);
    EQ_MEM(args, a->args_len);
    EQ(target);
    EQ(chip);
    EQ(deadline_ms);
    EQ(num_data_tensors);
    EQ_MEM(data_tensors, a->num_data_tensors * sizeof(uint32_t));
    return true;
}

static bool completion_eq(const struct wire_completion *a,
                          const struct wire_completion *b, char *why, size_t n)
{
    EQ(request_id);
    EQ(error);
    EQ_STR(message);
    EQ(num_data_tensors);
    EQ_MEM(data_tensors, a->num_data_tensors * sizeof(uint32_t));
    EQ(not_run);
    return true;
}

static bool chunk_eq(const struct wire_data_chunk *a,
                     const struct wire_data_chunk *b, char *why, size_t n)
{
    EQ(request_id);
    EQ(tensor);
    EQ(offset);
    EQ(len);
    EQ_MEM(data, a->len);
    EQ(last);
    return true;
}

static bool operands_eq(const struct wire_operands *a,
                        const struct wire_operands *b, char *why, size_t n)
{
    EQ(present);
    if (a->present & WIRE_OPND_BIT(WIRE_OPND_REQUEST))
        EQ(request);
    if (a->present & WIRE_OPND_BIT(WIRE_OPND_BUFFER_ID))
        EQ(buffer_id);
    if (a->present & WIRE_OPND_BIT(WIRE_OPND_OFFSET))
        EQ(offset);
    if (a->present & WIRE_OPND_BIT(WIRE_OPND_NBYTES))
        EQ(nbytes);
    if (a->present & WIRE_OPND_BIT(WIRE_OPND_NAME))
        EQ_STR(name);
    if (a->present & WIRE_OPND_BIT(WIRE_OPND_DATA)) {
        EQ(data_len);
        EQ_MEM(data, a->data_len);
    }
    return true;
}

static bool control_eq(const struct wire_control *a,
                       const struct wire_control *b, char *why, size_t n)
{
    EQ(request_id);
    EQ(op);
    return operands_eq(&a->operands, &b->operands, why, n);
}

static bool control_reply_eq(const struct wire_control_reply *a,
                             const struct wire_control_reply *b, char *why,
                             size_t n)
{
    EQ(request_id);
    EQ(op);
    EQ(error);
    EQ_STR(message);
    return operands_eq(&a->results, &b->results, why, n);
}

static bool heartbeat_eq(const struct wire_heartbeat *a,
                         const struct wire_heartbeat *b, char *why, size_t n)
{
    EQ(seq);
    EQ(time_ns);
    EQ(has_ack);
    EQ(ack_seq);
    return true;
}

static bool goodbye_eq(const struct wire_goodbye *a,
                       const struct wire_goodbye *b, char *why, size_t n)
{
    EQ(reason);
    EQ_STR(message);
    return true;
}

static bool descriptor_eq(const struct wire_descriptor *a,
                          const struct wire_descriptor *b, char *why, size_t n)
{
    EQ(version);
    EQ_STR(profile);
    EQ(domain_rank);
    EQ(rank_count);
    EQ(mapping_size);
    EQ_STR(handle);
    return true;
}

static bool entry_eq(const struct wire_attach_entry *a,
                     const struct wire_attach_entry *b, char *why, size_t n)
{
    EQ(address_space);
    EQ(role);
    EQ(adapter);
    EQ_STR(adapter_profile);
    return true;
}

static bool buffer_eq(const struct wire_domain_buffer *a,
                      const struct wire_domain_buffer *b, char *why, size_t n)
{
    EQ_STR(name);
    EQ(dtype);
    EQ(count);
    EQ(nbytes);
    return true;
}

static bool domain_cmd_eq(const struct wire_domain_cmd *a,
                          const struct wire_domain_cmd *b, char *why, size_t n)
{
    EQ(request_id);
    EQ(version);
    EQ(phase);
    EQ(domain_id);
    EQ(generation);
    EQ(window_size);
    EQ_STR(name);
    EQ_STR(profile);
    EQ(num_members);
    EQ_MEM(members, a->num_members * sizeof(*a->members));
    EQ(num_attach_rows);
    for (size_t r = 0; r < a->num_attach_rows; r++) {
        if (a->attach_rows[r].node_worker_id !=
            b->attach_rows[r].node_worker_id)
            return fail(why, n, "attach_rows[].node_worker_id");
        for (size_t k = 0; k < a->num_members; k++)
            if (!entry_eq(&a->attach_rows[r].entries[k],
                          &b->attach_rows[r].entries[k], why, n))
                return false;
    }
    EQ(num_buffers);
    for (size_t k = 0; k < a->num_buffers; k++)
        if (!buffer_eq(&a->buffers[k], &b->buffers[k], why, n))
            return false;
    EQ(num_descriptors);
    for (size_t k = 0; k < a->num_descriptors; k++)
        if (!descriptor_eq(&a->descriptors[k], &b->descriptors[k], why, n))
            return false;
    EQ(gather);
    EQ(exchange);
    return true;
}

static bool domain_reply_eq(const struct wire_domain_reply *a,
                            const struct wire_domain_reply *b, char *why,
                            size_t n)
{
    EQ(request_id);
    EQ(phase);
    EQ(domain_id);
    EQ(generation);
    EQ(error);
    EQ_STR(message);
    EQ(num_descriptors);
    for (size_t k = 0; k < a->num_descriptors; k++)
        if (!descriptor_eq(&a->descriptors[k], &b->descriptors[k], why, n))
            return false;
    return true;
}

static bool comm_init_eq(const struct wire_comm_init *a,
                         const struct wire_comm_init *b, char *why, size_t n)
{
    EQ(request_id);
    EQ(version);
    EQ(cluster_id);
    EQ(node_rank);
    EQ(node_count);
    EQ(num_ranks);
    EQ_MEM(global_device_ranks, a->num_ranks * sizeof(uint32_t));
    EQ_STR(profile);
    EQ(bootstrap_len);
    EQ_MEM(bootstrap, a->bootstrap_len);
    return true;
}

static bool health_eq(const struct wire_health *a, const struct wire_health *b,
                      char *why, size_t n)
{
    EQ(nonce);
    return true;
}

static bool health_reply_eq(const struct wire_health_reply *a,
                            const struct wire_health_reply *b, char *why,
                            size_t n)
{
    EQ(nonce);
    EQ_STR(version);
    EQ(proto_min);
    EQ(proto_max);
    EQ(sessions);
    EQ(max_sessions);
    EQ(max_procs);
    EQ(uptime_ms);
    EQ(pid);
    return true;
}

static bool trace_eq(const struct wire_trace *a, const struct wire_trace *b,
                     char *why, size_t n)
{
    EQ(request_id);
    EQ(is_data);
    EQ(pid);
    EQ(ppid);
    EQ_STR(role);
    EQ(dropped);
    EQ(num_records);
    EQ_MEM(records, a->num_records * WIRE_TRACE_REC_SIZE);
    EQ(last);
    return true;
}

bool wire_sample_equal(const struct wire_msg *a, const struct wire_msg *b,
                       char *why, size_t why_size)
{
    if (a->type != b->type) {
        snprintf(why, why_size, "type %u vs %u", a->type, b->type);
        return false;
    }
    switch (a->type) {
    case WIRE_MSG_HELLO:
        return hello_eq(&a->u.hello, &b->u.hello, why, why_size);
    case WIRE_MSG_HELLO_REPLY:
        return hello_reply_eq(&a->u.hello_reply, &b->u.hello_reply, why,
                              why_size);
    case WIRE_MSG_TASK:
        return task_eq(&a->u.task, &b->u.task, why, why_size);
    case WIRE_MSG_COMPLETION:
        return completion_eq(&a->u.completion, &b->u.completion, why, why_size);
    case WIRE_MSG_DATA_CHUNK:
        return chunk_eq(&a->u.data_chunk, &b->u.data_chunk, why, why_size);
    case WIRE_MSG_CONTROL:
        return control_eq(&a->u.control, &b->u.control, why, why_size);
    case WIRE_MSG_CONTROL_REPLY:
        return control_reply_eq(&a->u.control_reply, &b->u.control_reply, why,
                                why_size);
    case WIRE_MSG_HEARTBEAT:
        return heartbeat_eq(&a->u.heartbeat, &b->u.heartbeat, why, why_size);
    case WIRE_MSG_GOODBYE:
        return goodbye_eq(&a->u.goodbye, &b->u.goodbye, why, why_size);
    case WIRE_MSG_DOMAIN_CMD:
        return domain_cmd_eq(&a->u.domain_cmd, &b->u.domain_cmd, why, why_size);
    case WIRE_MSG_DOMAIN_REPLY:
        return domain_reply_eq(&a->u.domain_reply, &b->u.domain_reply, why,
                               why_size);
    case WIRE_MSG_COMM_INIT:
        return comm_init_eq(&a->u.comm_init, &b->u.comm_init, why, why_size);
    case WIRE_MSG_HEALTH:
        return health_eq(&a->u.health, &b->u.health, why, why_size);
    case WIRE_MSG_TRACE:
        return trace_eq(&a->u.trace, &b->u.trace, why, why_size);
    case WIRE_MSG_HEALTH_REPLY:
        return health_reply_eq(&a->u.health_reply, &b->u.health_reply, why,
                               why_size);
    }
    snprintf(why, why_size, "unknown type %u", a->type);
    return false;
}
