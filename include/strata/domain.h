/* Communication domains: symmetric memory windows shared by a subset of a
 * worker's chips. Included by strata.h. */
#ifndef STRATA_DOMAIN_H
#define STRATA_DOMAIN_H

#include <strata/strata.h>

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

/* Kernel side: the context behind device_ctx on this chip, or NULL if it
 * is not a live domain of this chip. */
STRATA_API const strata_comm_context *
strata_chip_comm_context(strata_chip *chip, uint64_t device_ctx);

/* Cross-rank signals on 32-bit words inside windows. add: atomic add,
 * then wake every waiter. wait: until *word >= at_least (spin, then
 * futex), STRATA_ETIMEDOUT after timeout_s (< 0: forever). */
STRATA_API void strata_signal_add(volatile uint32_t *word, uint32_t v);
STRATA_API STRATA_MUST_CHECK strata_err strata_signal_wait(
    const volatile uint32_t *word, uint32_t at_least, double timeout_s);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_DOMAIN_H */
