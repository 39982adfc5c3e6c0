/* A node's answer to a domain command (DOMAIN_REPLY) and the global
 * communicator identity (COMM_INIT). */
#include "codec.h"

#include <string.h>

/* ---- DOMAIN_REPLY ------------------------------------------------------- */

enum {
    REPLY_REQUEST_ID = 1,
    REPLY_PHASE = 2,
    REPLY_DOMAIN_ID = 3,
    REPLY_GENERATION = 4,
    REPLY_ERROR = 5,
    REPLY_MESSAGE = 6,
    REPLY_DESCRIPTORS = 7,
};

static const unsigned domain_reply_nkeys = REPLY_DESCRIPTORS;
static const char *const domain_reply_names[] = {
    [REPLY_REQUEST_ID] = "request_id",
    [REPLY_PHASE] = "phase",
    [REPLY_DOMAIN_ID] = "domain_id",
    [REPLY_GENERATION] = "generation",
    [REPLY_ERROR] = "error",
    [REPLY_MESSAGE] = "message",
    [REPLY_DESCRIPTORS] = "descriptors",
};

/* Only a successful PREPARE_EXPORT reply carries descriptors. */
static bool reply_has_descriptors(const struct wire_domain_reply *m)
{
    return m->phase == WIRE_PHASE_PREPARE_EXPORT && m->error == STRATA_OK;
}

/* The node's own members: ascending ranks of one domain, one profile. */
static strata_err reply_descriptors_check(struct wire_dec *d,
                                          const struct wire_domain_reply *m)
{
    const struct wire_descriptor *t = m->descriptors;

    if (m->num_descriptors < 1 || m->num_descriptors > WIRE_MAX_CHIPS || !t)
        return wire_dec_fail(d, "descriptors",
                             "must be array of 1..%d elements", WIRE_MAX_CHIPS);
    for (size_t k = 0; k < m->num_descriptors; k++) {
        wire_dec_enter(d, "descriptors", (long)k);
        WIRE_TRY(wire_descriptor_check(d, &t[k]));
        if (k && t[k].domain_rank <= t[k - 1].domain_rank)
            return wire_dec_fail(d, "domain_rank",
                                 "is %u, not above the one before",
                                 t[k].domain_rank);
        if (t[k].rank_count != t[0].rank_count)
            return wire_dec_fail(d, "rank_count", "is %u, entry 0 says %u",
                                 t[k].rank_count, t[0].rank_count);
        if (strcmp(t[k].profile, t[0].profile) != 0)
            return wire_dec_fail(d, "profile", "differs from entry 0");
    }
    wire_dec_leave(d);
    return STRATA_OK;
}

static strata_err domain_reply_check(struct wire_dec *d, const void *vm)
{
    const struct wire_domain_reply *m = vm;

    if (m->request_id == 0)
        return wire_dec_fail(d, "request_id", "is 0");
    if (m->phase < WIRE_PHASE_PREPARE_EXPORT || m->phase > WIRE_PHASE_ABORT)
        return wire_dec_fail(d, "phase", "has unknown value %u", m->phase);
    if (m->domain_id == 0)
        return wire_dec_fail(d, "domain_id", "is 0");
    WIRE_TRY(wire_check_err(d, "error", m->error));
    WIRE_TRY(wire_check_opt_str(d, "message", m->message, WIRE_MESSAGE_MAX));
    if (reply_has_descriptors(m))
        return reply_descriptors_check(d, m);
    if (m->num_descriptors)
        return wire_dec_fail(d, "descriptors",
                             "only allowed in a successful PREPARE_EXPORT "
                             "reply");
    return STRATA_OK;
}

static strata_err domain_reply_read(struct wire_dec *d,
                                    const struct wire_body *b, void *vm)
{
    struct wire_domain_reply *m = vm;

    WIRE_TRY(wire_get_uint(d, WIRE_FIELD(b, REPLY_REQUEST_ID), 1, UINT64_MAX,
                           &m->request_id));
    WIRE_TRY(wire_get_enum(d, WIRE_FIELD(b, REPLY_PHASE),
                           WIRE_PHASE_PREPARE_EXPORT, WIRE_PHASE_ABORT,
                           &m->phase));
    WIRE_TRY(wire_get_uint(d, WIRE_FIELD(b, REPLY_DOMAIN_ID), 1, UINT64_MAX,
                           &m->domain_id));
    WIRE_TRY(wire_get_uint(d, WIRE_FIELD(b, REPLY_GENERATION), 0, UINT64_MAX,
                           &m->generation));
    WIRE_TRY(wire_get_err(d, WIRE_FIELD(b, REPLY_ERROR), &m->error));
    WIRE_TRY(wire_get_opt_str(d, WIRE_FIELD(b, REPLY_MESSAGE), WIRE_MESSAGE_MAX,
                              &m->message));
    if (!reply_has_descriptors(m)) {
        if (b->val[REPLY_DESCRIPTORS])
            return wire_dec_fail(d, "descriptors",
                                 "only allowed in a successful "
                                 "PREPARE_EXPORT reply");
        return STRATA_OK;
    }
    return wire_descriptors_read(d, WIRE_FIELD(b, REPLY_DESCRIPTORS), 1,
                                 WIRE_MAX_CHIPS, &m->descriptors,
                                 &m->num_descriptors);
}

static void domain_reply_write(struct wire_pk *p,
                               const struct wire_domain_reply *m)
{
    bool msg = WIRE_HAS_STR(m->message);
    bool descs = reply_has_descriptors(m);

    wire_pk_map(p, 5 + msg + descs);
    wire_pk_key_uint(p, REPLY_REQUEST_ID, m->request_id);
    wire_pk_key_uint(p, REPLY_PHASE, m->phase);
    wire_pk_key_uint(p, REPLY_DOMAIN_ID, m->domain_id);
    wire_pk_key_uint(p, REPLY_GENERATION, m->generation);
    wire_pk_key_uint(p, REPLY_ERROR, (uint64_t)m->error);
    if (msg)
        wire_pk_key_str(p, REPLY_MESSAGE, m->message);
    if (descs) {
        wire_pk_uint(p, REPLY_DESCRIPTORS);
        wire_pk_array(p, m->num_descriptors);
        for (size_t k = 0; k < m->num_descriptors; k++)
            wire_descriptor_pack(p, &m->descriptors[k]);
    }
}

WIRE_DEFINE_CODEC(domain_reply, DOMAIN_REPLY)

/* ---- COMM_INIT ---------------------------------------------------------- */

enum {
    COMM_REQUEST_ID = 1,
    COMM_VERSION = 2,
    COMM_CLUSTER_ID = 3,
    COMM_NODE_RANK = 4,
    COMM_NODE_COUNT = 5,
    COMM_GLOBAL_DEVICE_RANKS = 6,
    COMM_PROFILE = 7,
    COMM_BOOTSTRAP = 8,
};

static const unsigned comm_init_nkeys = COMM_BOOTSTRAP;
static const char *const comm_init_names[] = {
    [COMM_REQUEST_ID] = "request_id",
    [COMM_VERSION] = "version",
    [COMM_CLUSTER_ID] = "cluster_id",
    [COMM_NODE_RANK] = "node_rank",
    [COMM_NODE_COUNT] = "node_count",
    [COMM_GLOBAL_DEVICE_RANKS] = "global_device_ranks",
    [COMM_PROFILE] = "profile",
    [COMM_BOOTSTRAP] = "bootstrap",
};

static strata_err comm_init_check(struct wire_dec *d, const void *vm)
{
    const struct wire_comm_init *m = vm;

    if (m->request_id == 0)
        return wire_dec_fail(d, "request_id", "is 0");
    if (m->version != WIRE_COMM_INIT_VERSION)
        return wire_dec_fail(d, "version", "is %u, this build speaks %d",
                             m->version, WIRE_COMM_INIT_VERSION);
    if (m->node_count < 1 || m->node_count > WIRE_MAX_NODES)
        return wire_dec_fail(d, "node_count", "is %u, outside 1..%d",
                             m->node_count, WIRE_MAX_NODES);
    if (m->node_rank >= m->node_count)
        return wire_dec_fail(d, "node_rank", "is %u, node_count is %u",
                             m->node_rank, m->node_count);
    if (m->num_ranks < 1 || m->num_ranks > WIRE_MAX_CHIPS ||
        !m->global_device_ranks)
        return wire_dec_fail(d, "global_device_ranks",
                             "must be array of 1..%d elements", WIRE_MAX_CHIPS);
    WIRE_TRY(wire_check_u32_set(d, "global_device_ranks",
                                m->global_device_ranks, m->num_ranks,
                                WIRE_DEVICE_RANK_MAX, false));
    WIRE_TRY(wire_check_str(d, "profile", m->profile, 1, WIRE_PROFILE_MAX));
    if (m->bootstrap_len > WIRE_BOOTSTRAP_MAX ||
        (m->bootstrap_len && !m->bootstrap))
        return wire_dec_fail(d, "bootstrap", "must be bin of 1..%d bytes",
                             WIRE_BOOTSTRAP_MAX);
    return STRATA_OK;
}

static strata_err comm_init_read(struct wire_dec *d, const struct wire_body *b,
                                 void *vm)
{
    struct wire_comm_init *m = vm;

    WIRE_TRY(wire_get_uint(d, WIRE_FIELD(b, COMM_REQUEST_ID), 1, UINT64_MAX,
                           &m->request_id));
    WIRE_TRY(wire_get_u32(d, WIRE_FIELD(b, COMM_VERSION), 1, UINT32_MAX,
                          &m->version));
    if (m->version != WIRE_COMM_INIT_VERSION)
        return wire_dec_fail(d, "version", "is %u, this build speaks %d",
                             m->version, WIRE_COMM_INIT_VERSION);
    WIRE_TRY(wire_get_uint(d, WIRE_FIELD(b, COMM_CLUSTER_ID), 0, UINT64_MAX,
                           &m->cluster_id));
    WIRE_TRY(wire_get_u32(d, WIRE_FIELD(b, COMM_NODE_RANK), 0,
                          WIRE_MAX_NODES - 1, &m->node_rank));
    WIRE_TRY(wire_get_u32(d, WIRE_FIELD(b, COMM_NODE_COUNT), 1, WIRE_MAX_NODES,
                          &m->node_count));
    WIRE_TRY(wire_get_u32_list(d, WIRE_FIELD(b, COMM_GLOBAL_DEVICE_RANKS), 1,
                               WIRE_MAX_CHIPS, WIRE_DEVICE_RANK_MAX,
                               &m->global_device_ranks, &m->num_ranks));
    WIRE_TRY(wire_get_str(d, WIRE_FIELD(b, COMM_PROFILE), 1, WIRE_PROFILE_MAX,
                          &m->profile));
    if (b->val[COMM_BOOTSTRAP])
        WIRE_TRY(wire_get_bin(d, WIRE_FIELD(b, COMM_BOOTSTRAP), 1,
                              WIRE_BOOTSTRAP_MAX, &m->bootstrap,
                              &m->bootstrap_len));
    return STRATA_OK;
}

static void comm_init_write(struct wire_pk *p, const struct wire_comm_init *m)
{
    bool boot = m->bootstrap_len != 0;

    wire_pk_map(p, 7 + boot);
    wire_pk_key_uint(p, COMM_REQUEST_ID, m->request_id);
    wire_pk_key_uint(p, COMM_VERSION, m->version);
    wire_pk_key_uint(p, COMM_CLUSTER_ID, m->cluster_id);
    wire_pk_key_uint(p, COMM_NODE_RANK, m->node_rank);
    wire_pk_key_uint(p, COMM_NODE_COUNT, m->node_count);
    wire_pk_uint(p, COMM_GLOBAL_DEVICE_RANKS);
    wire_pk_u32_list(p, m->global_device_ranks, m->num_ranks);
    wire_pk_key_str(p, COMM_PROFILE, m->profile);
    if (boot)
        wire_pk_key_bin(p, COMM_BOOTSTRAP, m->bootstrap, m->bootstrap_len);
}

WIRE_DEFINE_CODEC(comm_init, COMM_INIT)
