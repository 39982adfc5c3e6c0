/* Seed builders for global domain commands, shared by fuzz_gnode and
 * fuzz_session (records of fuzz_records.h): a node with chips 0 and 1. */
#ifndef FUZZ_DOMAIN_SEEDS_H
#define FUZZ_DOMAIN_SEEDS_H

#include "fuzz_records.h"

static inline void fuzz_seed_comm_init(struct fuzz_seed *sd, uint32_t rank,
                                       uint32_t count, unsigned flags)
{
    static const uint32_t granks[2] = {0, 1};
    struct wire_msg m = {.type = WIRE_MSG_COMM_INIT};

    m.u.comm_init.request_id = 100;
    m.u.comm_init.version = WIRE_COMM_INIT_VERSION;
    m.u.comm_init.cluster_id = 0x1234;
    m.u.comm_init.node_rank = rank;
    m.u.comm_init.node_count = count;
    m.u.comm_init.global_device_ranks = granks;
    m.u.comm_init.num_ranks = 2;
    m.u.comm_init.profile = "sim";
    fuzz_seed_msg(sd, &m, flags);
}

/* A DOMAIN_CMD of domain id over members on node 0's chips 0 and 1 (and
 * one on node 1 when two_nodes); IMPORT and COMMIT take "=" descriptors. */
static inline void fuzz_seed_domain_cmd(struct fuzz_seed *sd, uint64_t req,
                                        unsigned phase, uint64_t id,
                                        uint64_t gen, bool two_nodes,
                                        unsigned flags)
{
    static const struct wire_domain_member mem[3] = {
        {0, 0, 0, 0}, {0, 1, 1, 1}, {1, 0, 2, 2}};
    static const struct wire_domain_buffer bufs[2] = {
        {"x", STRATA_F32, 256, 1024}, {"y", STRATA_U8, 64, 64}};
    struct wire_descriptor d[3];
    struct wire_msg m = {.type = WIRE_MSG_DOMAIN_CMD};
    struct wire_domain_cmd *c = &m.u.domain_cmd;
    size_t n = two_nodes ? 3 : 2;

    c->request_id = req;
    c->version = WIRE_DOMAIN_CMD_VERSION;
    c->phase = (uint8_t)phase;
    c->domain_id = id;
    c->generation = gen;
    c->window_size = 4096;
    c->name = "fuzzdom";
    c->profile = "sim";
    c->members = mem;
    c->num_members = n;
    c->buffers = bufs;
    c->num_buffers = 2;
    if (phase == WIRE_PHASE_IMPORT || phase == WIRE_PHASE_COMMIT) {
        for (size_t i = 0; i < n; i++) {
            d[i].version = WIRE_DESCRIPTOR_VERSION;
            d[i].profile = "sim";
            d[i].domain_rank = (uint32_t)i;
            d[i].rank_count = (uint32_t)n;
            d[i].mapping_size = 4096;
            d[i].handle = "=";
        }
        c->descriptors = d;
        c->num_descriptors = n;
    }
    fuzz_seed_msg(sd, &m, flags);
}

static inline void fuzz_seed_window(struct fuzz_seed *sd, uint64_t req,
                                    unsigned op, uint64_t id, uint32_t rank,
                                    uint64_t off, uint64_t n, unsigned flags)
{
    static const uint8_t bytes[256] = {1, 2, 3, 4};
    struct wire_msg m = {.type = WIRE_MSG_CONTROL};
    struct wire_operands *o = &m.u.control.operands;

    m.u.control.request_id = req;
    m.u.control.op = (uint8_t)op;
    o->present =
        WIRE_OPND_BIT(WIRE_OPND_DOMAIN_ID) | WIRE_OPND_BIT(WIRE_OPND_RANK) |
        WIRE_OPND_BIT(WIRE_OPND_OFFSET) | WIRE_OPND_BIT(WIRE_OPND_NBYTES);
    if (op == WIRE_CTRL_WINDOW_WRITE) {
        o->present |= WIRE_OPND_BIT(WIRE_OPND_DATA);
        o->data = bytes;
        o->data_len = n;
    }
    o->domain_id = id;
    o->rank = rank;
    o->offset = off;
    o->nbytes = n;
    fuzz_seed_msg(sd, &m, flags);
}

#endif
