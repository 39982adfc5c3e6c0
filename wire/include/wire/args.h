/* Task arguments: the in-memory list users build, and its encoding in a
 * mailbox frame. The encoding holds ids and offsets, never pointers. */
#ifndef WIRE_ARGS_H
#define WIRE_ARGS_H

#include <strata/strata.h>

/* A host buffer. Created by worker/; fields below id are the owner's. */
struct strata_buffer {
    uint64_t id; /* unique per creating process, never reused */
    size_t size; /* bytes, > 0 */
    void *data;  /* mapping in the creating process */
    struct strata_worker *owner;
    int creator;   /* pid of the process that created it */
    bool foreign;  /* mapped from a creator above: never unlinked here */
    bool remote;   /* lives on remote node `node` only; data is NULL */
    int node;      /* the node of a remote buffer */
    bool device;   /* device memory of chip `chip` only; data is NULL */
    int chip;      /* the chip of a device buffer */
    uint32_t pins; /* unfinished tasks naming it (owner's lock) */
    void *access;  /* dependency records (orch/, owner's lock) */
    char name[64]; /* POSIX shm name */
};

/* One tensor as encoded in a frame (fixed size, little-endian host). */
struct wire_tensor {
    uint64_t buffer_id;
    uint64_t buffer_size;
    uint64_t offset;
    uint64_t nbytes;
    uint64_t shape[STRATA_MAX_DIMS];
    uint8_t dtype;
    uint8_t ndims;
    uint8_t tag;
    uint8_t flags;   /* WIRE_TENSOR_*; other bits zero */
    int32_t creator; /* pid of the process that created the buffer */
};

/* The tensor lives in device memory of the chip that runs the task: the
 * chip resolves it in its own allocations, not as a shm segment. */
#define WIRE_TENSOR_DEVICE 0x1u

struct wire_args_header {
    uint32_t num_tensors;
    uint32_t num_scalars;
};

/* The largest legal encoded argument list; mailbox frames are sized to it. */
#define WIRE_ARGS_MAX                                                          \
    (sizeof(struct wire_args_header) +                                         \
     STRATA_MAX_TENSORS * sizeof(struct wire_tensor) +                         \
     STRATA_MAX_SCALARS * sizeof(uint64_t))

struct strata_args {
    uint32_t num_tensors;
    uint32_t num_scalars;
    struct wire_tensor tensors[STRATA_MAX_TENSORS];
    uint64_t scalars[STRATA_MAX_SCALARS];
    strata_buffer *buffers[STRATA_MAX_TENSORS]; /* building side only */
    void *data[STRATA_MAX_TENSORS];             /* first byte, this process */
};

/* Bytes wire_args_encode will write for a. */
size_t wire_args_encoded_size(const strata_args *a);
/* Encodes a into dst (cap >= wire_args_encoded_size). Returns bytes. */
size_t wire_args_encode(const strata_args *a, void *dst, size_t cap);
/* Strictly decodes len bytes into out (data[] and buffers[] zeroed).
 * STRATA_EPROTO naming the offending field for any inconsistency. */
strata_err wire_args_decode(const void *src, size_t len, strata_args *out);
/* Checks one tensor's fields (dtype, tag, dims, sizes, range). */
strata_err wire_tensor_check(const struct wire_tensor *t, size_t index);

#endif
