/* Global communication domain messages: COMM_INIT, the versioned domain
 * command (PREPARE_EXPORT / IMPORT / COMMIT / ABORT) and a node's reply,
 * with window descriptors and the attachment matrix. Included by
 * wire/msg.h (include that one); the conventions are described there. */
#ifndef WIRE_MSG_DOMAIN_H
#define WIRE_MSG_DOMAIN_H

#ifndef WIRE_MSG_H
#error "include wire/msg.h instead of wire/msg_domain.h"
#endif

#define WIRE_DOMAIN_CMD_VERSION 2 /* the command and its attachment matrix */
#define WIRE_DESCRIPTOR_VERSION 1
#define WIRE_COMM_INIT_VERSION 1

#define WIRE_MAX_RANKS 8192           /* members of one domain */
#define WIRE_MAX_NODES 4096           /* nodes of one cluster */
#define WIRE_MAX_DOMAIN_BUFFERS 256   /* named buffers of one domain */
#define WIRE_MAX_ATTACH_ENTRIES 65536 /* rows x members */
#define WIRE_BOOTSTRAP_MAX 4096       /* COMM_INIT opaque bootstrap blob */

enum wire_domain_phase {
    WIRE_PHASE_PREPARE_EXPORT = 1, /* create + zero + export windows */
    WIRE_PHASE_IMPORT = 2,         /* import every peer's descriptor */
    WIRE_PHASE_COMMIT = 3,         /* make the view visible */
    WIRE_PHASE_ABORT = 4,          /* release what was prepared */
};

/* "PREPARE_EXPORT", ..., or "unknown". */
const char *wire_phase_name(unsigned phase);

enum wire_address_space {
    WIRE_SPACE_HOST = 1,
    WIRE_SPACE_DEVICE = 2,
};

enum wire_attach_role {
    WIRE_ROLE_PROVIDER = 1,
    WIRE_ROLE_CONSUMER = 2,
};

enum wire_adapter_kind {
    WIRE_ADAPTER_NONE = 0, /* explicit "no adapter"; profile must be "" */
    WIRE_ADAPTER_DIRECT_MAP = 1,
    WIRE_ADAPTER_DEVICE_PEER = 2,
    WIRE_ADAPTER_OWNER_DELEGATED_COPY = 3,
    WIRE_ADAPTER_EXPLICIT_TRANSFER = 4,
    WIRE_ADAPTER_COLLECTIVE = 5,
};
#define WIRE_ADAPTER_MAX WIRE_ADAPTER_COLLECTIVE

/* One member of a domain; members[i].domain_rank == i (dense order). */
struct wire_domain_member {
    uint32_t node_worker_id;     /* the L4's id of the node, <= INT32_MAX */
    uint32_t local_worker_id;    /* the chip on that node, <= INT32_MAX */
    uint32_t global_device_rank; /* <= INT32_MAX */
    uint32_t domain_rank;
};

/* How one receiving node reaches one member's window. */
struct wire_attach_entry {
    uint8_t address_space;       /* enum wire_address_space */
    uint8_t role;                /* enum wire_attach_role */
    uint8_t adapter;             /* enum wire_adapter_kind */
    const char *adapter_profile; /* 0..63 bytes; "" when adapter NONE */
};

/* One row of the attachment matrix: what node_worker_id keeps. */
struct wire_attach_row {
    uint32_t node_worker_id;                 /* a node that owns members */
    const struct wire_attach_entry *entries; /* one per member, rank order */
};

/* A named slice of every member's window. */
struct wire_domain_buffer {
    const char *name; /* 1..255 bytes, unique in the domain */
    uint8_t dtype;    /* strata_dtype */
    uint64_t count;   /* elements, count * dtype size == nbytes */
    uint64_t nbytes;  /* >= 1; the buffers' sum <= window_size */
};

/* A member's exported window. */
struct wire_descriptor {
    uint32_t version;      /* WIRE_DESCRIPTOR_VERSION */
    const char *profile;   /* 1..63 bytes */
    uint32_t domain_rank;  /* < rank_count */
    uint32_t rank_count;   /* 1..WIRE_MAX_RANKS */
    uint64_t mapping_size; /* bytes mapped, >= 1 */
    const char *handle;    /* how to import it (sim: shm name), 1..255 */
};

/* One phase of the global domain transaction (command version 2). Every
 * phase carries the full identity (members, buffers); attachments only on
 * PREPARE_EXPORT (optional there), descriptors on IMPORT and COMMIT
 * (required, the complete rank-ordered table) and never otherwise. */
struct wire_domain_cmd {
    struct wire_arena arena;
    uint64_t request_id; /* nonzero */
    uint32_t version;    /* WIRE_DOMAIN_CMD_VERSION */
    uint8_t phase;       /* enum wire_domain_phase */
    uint64_t domain_id;  /* nonzero */
    uint64_t generation;
    uint64_t window_size;                     /* bytes per member, >= 1 */
    const char *name;                         /* 1..255 bytes */
    const char *profile;                      /* 1..63 bytes, every member's */
    const struct wire_domain_member *members; /* 1..WIRE_MAX_RANKS */
    size_t num_members;
    /* One row per distinct member node; 0 rows = absent. */
    const struct wire_attach_row *attach_rows;
    size_t num_attach_rows;
    const struct wire_domain_buffer *buffers; /* 0..WIRE_MAX_DOMAIN_BUFFERS */
    size_t num_buffers;
    const struct wire_descriptor *descriptors; /* num_members or none */
    size_t num_descriptors;
    /* PREPARE_EXPORT only: the member nodes are every rank of one MPI
     * group; they gather their descriptors among themselves (one
     * MPI_Allgather), import and commit before they answer, so no IMPORT
     * and no COMMIT follow (docs/mpi.md). */
    bool gather;
    /* PREPARE_EXPORT only: the members exchange descriptors (their chips
     * create, export and map the windows in the phases), even where the
     * node would have them map lazily: the L4 asks it when the nodes of
     * one domain would not all make windows the same way. */
    bool exchange;
};

/* A node's answer to one DOMAIN_CMD. A successful PREPARE_EXPORT reply
 * carries the node's members' descriptors (ascending domain_rank); no
 * other reply carries any. */
struct wire_domain_reply {
    struct wire_arena arena;
    uint64_t request_id;
    uint8_t phase; /* the command's phase */
    uint64_t domain_id;
    uint64_t generation;
    strata_err error;
    const char *message;                       /* 0..4095 bytes */
    const struct wire_descriptor *descriptors; /* 0..WIRE_MAX_CHIPS */
    size_t num_descriptors;
};

/* The cluster-wide communicator identity of one node; answered by a
 * CONTROL_REPLY with op 0. */
struct wire_comm_init {
    struct wire_arena arena;
    uint64_t request_id; /* nonzero */
    uint32_t version;    /* WIRE_COMM_INIT_VERSION */
    uint64_t cluster_id;
    uint32_t node_rank;  /* < node_count */
    uint32_t node_count; /* 1..WIRE_MAX_NODES */
    /* One per local chip, unique, <= INT32_MAX; 1..WIRE_MAX_CHIPS. */
    const uint32_t *global_device_ranks;
    size_t num_ranks;
    const char *profile;      /* 1..63 bytes */
    const uint8_t *bootstrap; /* opaque backend blob (NCCL id); may be NULL */
    size_t bootstrap_len;     /* 0..WIRE_BOOTSTRAP_MAX; 0 = absent */
};

WIRE_DECLARE_CODEC(domain_cmd)
WIRE_DECLARE_CODEC(domain_reply)
WIRE_DECLARE_CODEC(comm_init)

/* Checks an assembled rank-ordered descriptor table for a domain:
 * complete (n == rank_count of every entry), entry i has domain_rank i,
 * one profile equal to profile, equal mapping_size >= window_size.
 * STRATA_EINVAL naming the first offending rank and field. */
STRATA_MUST_CHECK strata_err
wire_descriptor_table_check(const struct wire_descriptor *table, size_t n,
                            const char *profile, uint64_t window_size);

#endif
