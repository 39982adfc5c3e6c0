/* Communication domains: symmetric memory windows shared by a subset of a
 * worker's chips. Included by strata.h. */
/* Before the guard: included first, this header still gets all of
 * strata.h (which includes it back at its end) before its own body. */
#include <strata/strata.h>

#ifndef STRATA_DOMAIN_H
#define STRATA_DOMAIN_H

#ifdef __cplusplus
extern "C" {
#endif

#define STRATA_DOMAIN_NAME_MAX 64

typedef struct strata_domain strata_domain;

/* One named region carved from every member's window, in spec order. */
typedef struct strata_comm_buffer_spec {
    const char *name;
    strata_dtype dtype;
    size_t count;  /* elements */
    size_t nbytes; /* must equal count * strata_dtype_size(dtype) */
} strata_comm_buffer_spec;

typedef struct strata_domain_spec {
    const char *name;   /* label, unique among this run's live domains */
    const int *workers; /* chip ids; order = dense domain rank */
    size_t num_workers;
    size_t window_size;                     /* bytes per rank, > 0 */
    const strata_comm_buffer_spec *buffers; /* carved in order */
    size_t num_buffers;
} strata_domain_spec;

/* A carved buffer as a member sees it. */
typedef struct strata_comm_buffer_info {
    const char *name;
    size_t offset; /* from the window base */
    size_t nbytes;
    strata_dtype dtype;
    size_t count;
} strata_comm_buffer_info;

/* What the orchestrator knows about one member. Pointers stay valid until
 * the worker is destroyed. */
typedef struct strata_chip_domain_ctx {
    const char *name;
    uint32_t domain_rank;
    uint32_t domain_size;
    uint64_t device_ctx;        /* pass to a kernel: strata_chip_comm_context */
    uint64_t local_window_base; /* the window's address in the chip */
    size_t actual_window_size;  /* mapping size, >= window_size */
    size_t num_buffers;
    const strata_comm_buffer_info *buffers;
} strata_chip_domain_ctx;

/* What a kernel reads, in its chip's address space. window_base[r] is rank
 * r's window as mapped by this chip; there is no fixed rank cap. */
typedef struct strata_comm_context {
    uint32_t version; /* STRATA_COMM_CONTEXT_VERSION */
    uint32_t rank;
    uint32_t rank_count;
    uint32_t reserved;
    uint64_t window_size;
    void *window_base[];
} strata_comm_context;

#define STRATA_COMM_CONTEXT_VERSION 1u

/* Allocates a domain over spec->workers, inside an orch fn. The whole spec
 * is checked before anything is allocated (STRATA_EINVAL naming the
 * problem). Every member's window is zero before any peer can see it.
 * STRATA_EPEER if a member dies during allocation; nothing is left then.
 * The domain belongs to the run: it is freed at the run's fence if not
 * released earlier. The handle is the worker's until it is destroyed. */
STRATA_API STRATA_MUST_CHECK strata_err strata_orch_allocate_domain(
    strata_orch *o, const strata_domain_spec *spec, strata_domain **out);
/* Fills *out for chip (a chip id). STRATA_ENOENT if chip is not a member,
 * STRATA_ESTATE once the domain is released. */
STRATA_API STRATA_MUST_CHECK strata_err strata_domain_context(
    const strata_domain *d, int chip, strata_chip_domain_ctx *out);
/* Marks the domain released now (contexts refused from here on); its
 * windows are freed after the run fence. Releasing twice is a no-op. */
STRATA_API STRATA_MUST_CHECK strata_err strata_domain_release(strata_domain *d);
/* True once strata_domain_release has been called on d, or once its run's
 * fence has released it. */
STRATA_API bool strata_domain_released(const strata_domain *d);
/* True once every member has unmapped and freed its window. */
STRATA_API bool strata_domain_freed(const strata_domain *d);

/* Synchronously copies nbytes from src at src_offset into chip's window,
 * into the carved buffer named buffer at offset (ordered after earlier
 * tasks that write those src bytes). STRATA_EINVAL for a range outside
 * either side or an unknown buffer name. Inside an orch fn. */
STRATA_API STRATA_MUST_CHECK strata_err strata_orch_copy_to(
    strata_orch *o, const strata_domain *d, int chip, const char *buffer,
    size_t offset, const strata_buffer *src, size_t src_offset, size_t nbytes);
/* The mirror: window bytes into dst at dst_offset. */
STRATA_API STRATA_MUST_CHECK strata_err strata_orch_copy_from(
    strata_orch *o, const strata_domain *d, int chip, const char *buffer,
    size_t offset, strata_buffer *dst, size_t dst_offset, size_t nbytes);

/* ------------------------------------------------------------------ */
/* Global domains: windows across the nodes of an L4 (or above)        */
/* ------------------------------------------------------------------ */

typedef struct strata_global_domain strata_global_domain;
typedef struct strata_global_view strata_global_view;

/* A member: a chip of a node, by the L4's node id and the node's chip id. */
typedef struct strata_global_member {
    int node_worker_id;
    int local_chip;
} strata_global_member;

typedef enum strata_address_space {
    STRATA_SPACE_HOST = 1,
    STRATA_SPACE_DEVICE = 2,
} strata_address_space;

typedef enum strata_attach_role {
    STRATA_ROLE_PROVIDER = 1,
    STRATA_ROLE_CONSUMER = 2,
} strata_attach_role;

typedef enum strata_adapter_kind {
    STRATA_ADAPTER_NONE = 0,
    STRATA_ADAPTER_DIRECT_MAP = 1,
    STRATA_ADAPTER_DEVICE_PEER = 2,
    STRATA_ADAPTER_OWNER_DELEGATED_COPY = 3,
    STRATA_ADAPTER_EXPLICIT_TRANSFER = 4,
    STRATA_ADAPTER_COLLECTIVE = 5,
} strata_adapter_kind;

/* One entry of the attachment matrix: how receiving_node reaches member
 * rank's window. Entries not given default to an explicit host-consumer
 * record with no adapter (or a host direct map of its own members). */
typedef struct strata_attachment {
    int receiving_node;          /* a node that owns members */
    uint32_t member_rank;        /* domain rank */
    uint32_t address_space;      /* strata_address_space */
    uint32_t role;               /* strata_attach_role */
    uint32_t adapter;            /* strata_adapter_kind */
    const char *adapter_profile; /* "" or NULL for STRATA_ADAPTER_NONE */
} strata_attachment;

typedef struct strata_global_domain_spec {
    const char *name;
    const strata_global_member *members; /* dense rank order */
    size_t num_members;
    size_t window_size;
    const strata_comm_buffer_spec *buffers;
    size_t num_buffers;
    bool retain_after_run; /* keep it past the run's fence until released */
    const strata_attachment *attachments; /* optional */
    size_t num_attachments;
} strata_global_domain_spec;

/* Allocates a domain across nodes (forked and remote alike) inside an L4
 * orch fn, as a PREPARE_EXPORT / IMPORT / COMMIT transaction fanned out to
 * the member nodes in parallel. The spec is checked first (STRATA_EINVAL
 * naming the problem, nothing sent). Any failure before COMMIT sends ABORT
 * to every node that prepared; if an ABORT fails the worker is poisoned
 * (new runs get STRATA_ESTATE; destroy still works). The handle is the
 * worker's until it is destroyed. The sim profile needs every node on one
 * host (forked, or remote on a loopback address). */
STRATA_API STRATA_MUST_CHECK strata_err strata_orch_allocate_global_domain(
    strata_orch *o, const strata_global_domain_spec *spec,
    strata_global_domain **out);
/* Releases the domain. Before its run's fence: freed at that fence. Once
 * retained past it: freed here, the call waiting for every node's ABORT
 * (release it after the tasks that use it). Releasing twice is a no-op.
 * Any thread but the scheduler's. */
STRATA_API STRATA_MUST_CHECK strata_err
strata_global_domain_release(strata_global_domain *g);
/* Unique per worker: nodes find the committed domain by it. */
STRATA_API uint64_t strata_global_domain_id(const strata_global_domain *g);
/* True once strata_global_domain_release has been called on g. */
STRATA_API bool strata_global_domain_released(const strata_global_domain *g);
/* True once every member's window is unmapped and freed. */
STRATA_API bool strata_global_domain_freed(const strata_global_domain *g);
/* Bounded control-plane copies into / out of member rank's window, at
 * offset within the named buffer (NULL buffer: the whole window). At most
 * 1 MiB a call; STRATA_EINVAL for a range outside. A member on a remote
 * node is reached the same way (the bytes travel in control frames). */
STRATA_API STRATA_MUST_CHECK strata_err strata_orch_copy_to_global_domain(
    strata_orch *o, strata_global_domain *g, uint32_t rank, const char *buffer,
    size_t offset, const void *src, size_t n);
/* The read direction of strata_orch_copy_to_global_domain: n bytes from
 * rank's window into dst, with the same rules and errors. */
STRATA_API STRATA_MUST_CHECK strata_err strata_orch_copy_from_global_domain(
    strata_orch *o, strata_global_domain *g, uint32_t rank, const char *buffer,
    size_t offset, void *dst, size_t n);
/* Node side (an orch fn on an L3 node): the committed domain domain_id.
 * STRATA_ENOENT before COMMIT and once the domain is freed on this node
 * (a released domain stays usable until its run's fence frees it);
 * STRATA_EINVAL from an orch fn of a worker above level 3. */
STRATA_API STRATA_MUST_CHECK strata_err strata_orch_get_global_domain(
    strata_orch *o, uint64_t domain_id, strata_global_view **out);
/* The same context local domains give, for a member chip of this node;
 * kernels use it exactly as for a local domain. */
STRATA_API STRATA_MUST_CHECK strata_err strata_global_view_context(
    const strata_global_view *v, int local_chip, strata_chip_domain_ctx *out);

/* Kernel side: the context behind device_ctx on this chip, or NULL if it
 * is not a live domain of this chip. */
STRATA_API const strata_comm_context *
strata_chip_comm_context(strata_chip *chip, uint64_t device_ctx);

/* Cross-rank signals on 32-bit words inside windows. add: atomic add,
 * then wake every waiter (a NULL word: nothing). wait: until *word >=
 * at_least (spin, yield, then futex), STRATA_ETIMEDOUT after timeout_s
 * (any negative value: forever; +inf: 1e9 s). STRATA_EPEER, naming the
 * rank and chip, once a member of the domain whose window holds the word
 * has died (or its node was lost) while the word is short: a waiter is
 * never left waiting for a dead peer (sim windows of local domains; see
 * docs/domains.md for global ones). STRATA_EINVAL for a NULL word or a
 * NaN timeout_s. A waiter must wait through strata_signal_wait: on
 * local-domain windows the add skips the wake system call when no chip
 * sleeps in it (docs/domains.md). Any thread of a chip process (or any
 * process, on host memory). */
STRATA_API void strata_signal_add(volatile uint32_t *word, uint32_t v);
STRATA_API STRATA_MUST_CHECK strata_err strata_signal_wait(
    const volatile uint32_t *word, uint32_t at_least, double timeout_s);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_DOMAIN_H */
