/* bench_cuda_dispatch's device side: a no-op CUDA kernel, the strata
 * kernel that enqueues it on the chip's stream, and the raw reference
 * loop (launch, synchronize) the bench compares against. */
#include <cuda_runtime.h>
#include <strata/cuda.h>
#include <strata/strata.h>

#include <stdio.h>
#include <time.h>

__global__ static void noop(void) {}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The task: one launch on the chip's stream; the chip waits for it. */
extern "C" strata_err cuda_dispatch_noop(strata_chip *chip,
                                         const strata_args *args)
{
    cudaStream_t s = strata_chip_cuda_stream(chip);
    cudaError_t e;

    (void)args;
    if (!s) {
        strata_errmsg_set("chip %d is not a cuda chip", strata_chip_id(chip));
        return STRATA_ENOTSUP;
    }
    noop<<<1, 1, 0, s>>>();
    e = cudaGetLastError();
    if (e != cudaSuccess) {
        strata_errmsg_set("launch: %s", cudaGetErrorString(e));
        return STRATA_EIO;
    }
    return STRATA_OK;
}

/* iters launches, each followed by cudaStreamSynchronize, on a
 * non-blocking stream of device 0; blocking_sync: the device's schedule
 * flag is blocking sync, as a chip's context is (else CUDA's default,
 * spin then yield). Seconds per iteration, or < 0 with msg filled. */
extern "C" double cuda_dispatch_reference(int iters, int blocking_sync,
                                          char *msg, size_t cap)
{
    cudaStream_t s;
    cudaError_t e;
    double t0;

    if (blocking_sync)
        cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync);
    e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    for (int i = 0; e == cudaSuccess && i < 100; i++) { /* warm-up */
        noop<<<1, 1, 0, s>>>();
        e = cudaStreamSynchronize(s);
    }
    t0 = now_s();
    for (int i = 0; e == cudaSuccess && i < iters; i++) {
        noop<<<1, 1, 0, s>>>();
        e = cudaGetLastError();
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(s);
    }
    if (e != cudaSuccess) {
        snprintf(msg, cap, "%s", cudaGetErrorString(e));
        return -1.0;
    }
    t0 = (now_s() - t0) / iters;
    cudaStreamDestroy(s);
    return t0;
}
