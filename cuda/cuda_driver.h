/* The CUDA driver API, loaded with dlopen() at run time: the plug-in has
 * no link-time dependency on libcuda, so a machine without a driver gets
 * a clear error from strata_worker_init instead of a loader failure. */
#ifndef CUDA_DRIVER_H
#define CUDA_DRIVER_H

#include "wire/cuda_plugin.h"

#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>

/* Every driver function the plug-in calls. The names go through cuda.h's
 * macros (cuMemAlloc is cuMemAlloc_v2, ...), so each entry is typed by
 * cuda.h's own declaration and looked up by its versioned symbol. */
#define CUDA_DRIVER_FNS(X)                                                     \
    X(cuInit)                                                                  \
    X(cuDriverGetVersion)                                                      \
    X(cuGetErrorName)                                                          \
    X(cuGetErrorString)                                                        \
    X(cuDeviceGetCount)                                                        \
    X(cuDeviceGet)                                                             \
    X(cuDeviceGetName)                                                         \
    X(cuDeviceGetAttribute)                                                    \
    X(cuDeviceTotalMem)                                                        \
    X(cuDevicePrimaryCtxSetFlags)                                              \
    X(cuDevicePrimaryCtxRetain)                                                \
    X(cuDevicePrimaryCtxRelease)                                               \
    X(cuCtxSetCurrent)                                                         \
    X(cuCtxPushCurrent)                                                        \
    X(cuCtxPopCurrent)                                                         \
    X(cuStreamCreate)                                                          \
    X(cuStreamDestroy)                                                         \
    X(cuStreamSynchronize)                                                     \
    X(cuEventCreate)                                                           \
    X(cuEventDestroy)                                                          \
    X(cuEventRecord)                                                           \
    X(cuEventSynchronize)                                                      \
    X(cuMemAlloc)                                                              \
    X(cuMemFree)                                                               \
    X(cuMemHostAlloc)                                                          \
    X(cuMemFreeHost)                                                           \
    X(cuMemcpyAsync)                                                           \
    X(cuMemcpyHtoD)                                                            \
    X(cuMemcpyDtoH)                                                            \
    X(cuMemcpyDtoD)                                                            \
    X(cuMemsetD8)                                                              \
    X(cuMemGetAllocationGranularity)                                           \
    X(cuMemCreate)                                                             \
    X(cuMemRelease)                                                            \
    X(cuMemAddressReserve)                                                     \
    X(cuMemAddressFree)                                                        \
    X(cuMemMap)                                                                \
    X(cuMemUnmap)                                                              \
    X(cuMemSetAccess)                                                          \
    X(cuMemExportToShareableHandle)                                            \
    X(cuMemImportFromShareableHandle)

struct cuda_driver {
    void *lib;
    int version; /* cuDriverGetVersion: 1000 * major + 10 * minor */
    /* libcuda was in this process before the plug-in loaded it: the
     * worker process had it when it forked this chip. */
    bool inherited;
    bool starting; /* until cuda_driver_started: failures get the hint */
#define CUDA_DRIVER_FIELD(fn) __typeof__(fn) *fn;
    CUDA_DRIVER_FNS(CUDA_DRIVER_FIELD)
#undef CUDA_DRIVER_FIELD
};

/* Loads the driver once per process ($STRATA_CUDA_DRIVER, else
 * "libcuda.so.1") and runs cuInit. STRATA_ENOTSUP when there is no driver,
 * it lacks a function, or cuInit fails (a stub library, no device, a
 * driver older than the toolkit), with the reason. */
strata_err cuda_driver_load(const struct cuda_plugin_host *host,
                            const struct cuda_driver **out);

/* The chip has started: later failures are not the fork's. */
void cuda_driver_started(void);

/* Writes "NAME (code): text" for r into out. */
void cuda_driver_describe(const struct cuda_driver *d, CUresult r, char *out,
                          size_t cap);

/* Records "what: NAME (code): text" as the error and returns the strata
 * code r maps to (ENOMEM, EINVAL, ENOTSUP, else EIO). While the chip
 * starts with an inherited libcuda, says that CUDA does not survive fork. */
strata_err cuda_fail(const struct cuda_plugin_host *host,
                     const struct cuda_driver *d, CUresult r, const char *what);

#endif
