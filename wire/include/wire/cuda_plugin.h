/* The ABI between libstrata's loader (chip/backend.c) and the CUDA backend
 * plug-in libstrata-cuda.so. No CUDA type appears here: libstrata includes
 * this header and never links or calls CUDA itself.
 *
 * The loader runs in a chip process only, after the fork: it dlopen()s the
 * plug-in, calls its CUDA_PLUGIN_ENTRY with the host table, and forwards
 * the "cuda" platform's backend ops to the table the plug-in returns. The
 * plug-in depends on no strata symbol: what it needs from the host (the
 * chip id, recording an error message) comes through cuda_plugin_host.
 * It sits beside chip_backend.h, the seam it extends. */
#ifndef WIRE_CUDA_PLUGIN_H
#define WIRE_CUDA_PLUGIN_H

#include "wire/chip_backend.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CUDA_PLUGIN_ABI 4u
#define CUDA_PLUGIN_ENTRY "strata_cuda_plugin_open"
#define CUDA_PLUGIN_FILE "libstrata-cuda.so"

/* What libstrata lends the plug-in. */
struct cuda_plugin_host {
    uint32_t abi; /* CUDA_PLUGIN_ABI */
    int (*chip_id)(const strata_chip *chip);
    /* The device ordinal the worker's config (device_ordinals) gave the
     * chip, or -1 when it gave none. */
    int (*device_ordinal)(const strata_chip *chip);
    /* Records fmt as the calling thread's strata_errmsg and returns err. */
    strata_err (*fail)(strata_err err, const char *fmt, ...)
        STRATA_PRINTF(2, 3);
    /* A log line at a CUDA_PLUGIN_LOG_* level, as STRATA_LOG filters. */
    void (*log)(int level, const char *fmt, ...) STRATA_PRINTF(2, 3);
};

#define CUDA_PLUGIN_LOG_WARN 1
#define CUDA_PLUGIN_LOG_INFO 2
#define CUDA_PLUGIN_LOG_DEBUG 3

/* Memory for the tier runtime's device and host-pinned instances
 * (tier/device.c), in whatever process allocates them: the first visible
 * device's primary context, made current on the calling thread by every
 * call, and one stream for copies. */
struct cuda_plugin_mem {
    /* Loads the driver and sets the context and stream up, once per
     * process; STRATA_ENOTSUP with the reason when it cannot. */
    strata_err (*open)(const struct cuda_plugin_host *host);
    /* bytes of device memory (*out is the CUdeviceptr) or of page-locked
     * host memory. */
    strata_err (*alloc)(bool pinned, uint64_t bytes, void **out);
    void (*free)(bool pinned, void *p);
    /* n bytes between any two of host, pinned or device pointers
     * (unified addressing), on the stream, returning once they are
     * there. */
    strata_err (*copy)(void *dst, const void *src, size_t n);
};

/* What the plug-in gives back; static, valid while the process lives. */
struct cuda_plugin {
    uint32_t abi;                       /* CUDA_PLUGIN_ABI */
    const struct chip_backend_ops *ops; /* name "cuda" */
    /* The chip's stream (a CUstream) and its device ordinal, from the
     * state ops->init made. */
    void *(*stream)(void *state);
    int (*device)(void *state);
    const struct cuda_plugin_mem *mem;
};

typedef strata_err (*cuda_plugin_open_fn)(const struct cuda_plugin_host *host,
                                          const struct cuda_plugin **out);

#endif
