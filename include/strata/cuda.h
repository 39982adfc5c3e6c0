/* The CUDA platform, as a kernel sees it. A worker whose config says
 * platform = "cuda" runs each chip in its own process on a CUDA device;
 * its kernels stay strata_kernel_fn host functions that enqueue device
 * work on the chip's stream, and a task completes when that stream's work
 * has completed. See docs/cuda.md.
 *
 * This header needs no CUDA header: the stream is returned as the struct
 * pointer that both cudaStream_t and CUstream name, so the result assigns
 * to either without a cast. libstrata itself never links CUDA; the calls
 * below answer from the plug-in libstrata-cuda.so, which a chip process
 * loads after its fork. */
#ifndef STRATA_CUDA_H
#define STRATA_CUDA_H

#include <strata/strata.h>

#ifdef __cplusplus
extern "C" {
#endif

struct CUstream_st;

/* The chip's non-blocking stream (a cudaStream_t / CUstream) in its
 * device's primary context, which is current on the thread that runs the
 * kernel. Work a kernel enqueues on it is part of the task: the chip waits
 * for it (blocking, not spinning) before it reports the task done, and a
 * CUDA error found then fails the task with the CUDA error's name and
 * text. NULL when chip is NULL or not a chip of the cuda platform. Call it
 * from a kernel, in the chip process. */
STRATA_API struct CUstream_st *strata_chip_cuda_stream(const strata_chip *chip);

/* The CUDA device ordinal (among the devices CUDA_VISIBLE_DEVICES leaves
 * visible) of chip's device, or -1 when chip is NULL or not a cuda chip.
 * Call it from a kernel, in the chip process. */
STRATA_API int strata_chip_cuda_device(const strata_chip *chip);

#ifdef __cplusplus
}
#endif

#endif
