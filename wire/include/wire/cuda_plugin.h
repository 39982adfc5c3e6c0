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

#include <stdint.h>

#define CUDA_PLUGIN_ABI 3u
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

/* What the plug-in gives back; static, valid while the process lives. */
struct cuda_plugin {
    uint32_t abi;                       /* CUDA_PLUGIN_ABI */
    const struct chip_backend_ops *ops; /* name "cuda" */
    /* The chip's stream (a CUstream) and its device ordinal, from the
     * state ops->init made. */
    void *(*stream)(void *state);
    int (*device)(void *state);
};

typedef strata_err (*cuda_plugin_open_fn)(const struct cuda_plugin_host *host,
                                          const struct cuda_plugin **out);

#endif
