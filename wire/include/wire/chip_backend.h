/* The table a device backend (sim, cuda) implements. The chip process
 * reaches a backend only through it; a NULL slot means "not supported" and
 * its wrapper in chip/ answers STRATA_ENOTSUP. */
#ifndef WIRE_CHIP_BACKEND_H
#define WIRE_CHIP_BACKEND_H

#include <strata/strata.h>

struct strata_comm_context;

#define CHIP_WINDOW_HANDLE_MAX 64
#define CHIP_WINDOW_DESC_VERSION 1u

/* What a member is asked to create for a domain. */
struct chip_window_req {
    uint64_t alloc_id; /* unique per worker process */
    uint32_t rank;
    uint32_t rank_count;
    uint64_t window_size;
    int32_t creator_pid; /* the worker's pid, carried in names */
    uint32_t name_token; /* host windows: the worker's random name token */
};

/* What a member exports so peers can import its window. */
struct chip_window_desc {
    uint32_t version; /* CHIP_WINDOW_DESC_VERSION */
    uint32_t rank;
    uint32_t rank_count;
    uint32_t reserved;
    uint64_t mapping_size; /* >= window_size */
    char profile[16];
    char handle[CHIP_WINDOW_HANDLE_MAX]; /* sim: shm name */
};

/* What a member reports after importing every peer. */
struct chip_window_import_out {
    uint64_t device_ctx; /* resolves to a strata_comm_context */
    uint64_t local_base; /* the member's own window, in its space */
};

struct chip_backend_ops {
    const char *name; /* platform name: "sim", "cuda" */
    uint32_t abi;     /* CHIP_BACKEND_ABI */
    strata_err (*init)(strata_chip *chip, void **state_out);
    void (*fini)(strata_chip *chip, void *state);
    strata_err (*malloc)(void *state, size_t nbytes, void **dev_out);
    strata_err (*free)(void *state, void *dev);
    strata_err (*copy_h2d)(void *state, void *dst, const void *src, size_t n);
    strata_err (*copy_d2h)(void *state, void *dst, const void *src, size_t n);
    /* Base communicator for this chip (rank among the worker's chips). */
    strata_err (*comm_init)(void *state, uint32_t rank, uint32_t size);
    /* Create, zero and export a window. Zero before export: a peer may
     * signal into it as soon as it can see it. */
    strata_err (*window_prepare)(void *state, const struct chip_window_req *req,
                                 struct chip_window_desc *desc_out);
    /* Map every peer of alloc_id (table has rank_count entries, in rank
     * order) and build the kernel-visible context. */
    strata_err (*window_import)(void *state, uint64_t alloc_id,
                                const struct chip_window_desc *table,
                                uint32_t n, struct chip_window_import_out *out);
    /* Unmap and free everything of alloc_id. Unknown ids are a no-op. */
    strata_err (*window_release)(void *state, uint64_t alloc_id);
    /* The member's own window of alloc_id (NULL if none). */
    void *(*window_local)(void *state, uint64_t alloc_id, size_t *size_out);
    /* The context behind device_ctx, or NULL when it is not live here. */
    const struct strata_comm_context *(*comm_context)(void *state,
                                                      uint64_t device_ctx);
    strata_err (*launch)(void *state, strata_chip *chip, strata_kernel_fn fn,
                         const strata_args *args);
    strata_err (*sync)(void *state);
    /* Optional, for backends whose windows are host memory (sim). The
     * worker process then makes a domain without waiting for its members:
     * host_window_create (in the worker) names rank req->rank's window
     * and says the device_ctx every member will answer to; each member's
     * window_adopt maps all rank_count windows (creating, zeroed, those no
     * member has created yet), rank r at base + r * mapping_size, inside
     * the address range reserved before the worker forked (so every member
     * sees every window at the same address); host_window_unlink (in the
     * worker) drops the names once no member will map any more.
     * window_release undoes window_adopt. */
    strata_err (*host_window_create)(const struct chip_window_req *req,
                                     uint64_t *device_ctx_out);
    void (*host_window_unlink)(const struct chip_window_req *req);
    strata_err (*window_adopt)(void *state, const struct chip_window_req *req,
                               uint64_t base, uint64_t mapping_size);
    /* Bytes a window of window_size takes (page rounded on sim). */
    uint64_t (*window_mapping_size)(uint64_t window_size);
    /* The handle (sim: shm name) of req's window, as window_adopt opens
     * it; a global domain's node exports it (optional with the others). */
    void (*host_window_name)(const struct chip_window_req *req, char *out,
                             size_t cap);
    /* Device to device, both of this chip (optional: device buffers then
     * copy through the host). */
    strata_err (*copy_d2d)(void *state, void *dst, const void *src, size_t n);
};

#define CHIP_BACKEND_ABI 4u

#endif
