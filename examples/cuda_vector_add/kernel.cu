/* cuda_vector_add's kernel: a strata kernel (a host function in the chip
 * process) that enqueues a CUDA kernel and its copies on the chip's
 * stream. It returns as soon as the work is enqueued; the chip waits for
 * the stream before it reports the task done. */
#include <cuda_runtime.h>
#include <strata/cuda.h>
#include <strata/strata.h>

__global__ static void add(const float *x, const float *y, float *z, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

    if (i < n)
        z[i] = x[i] + y[i];
}

static strata_err cuda_failed(const char *what, cudaError_t e)
{
    strata_errmsg_set("%s: %s: %s", what, cudaGetErrorName(e),
                      cudaGetErrorString(e));
    return STRATA_EIO;
}

/* Tensors 0 and 1 (IN) and 2 (OUT): float32 slices of one length, in the
 * worker's host buffers. */
extern "C" strata_err cuda_vector_add_kernel(strata_chip *chip,
                                             const strata_args *args)
{
    cudaStream_t s = strata_chip_cuda_stream(chip);
    size_t bytes = strata_args_tensor_nbytes(args, 0);
    size_t n = bytes / sizeof(float);
    float *d = NULL;
    cudaError_t e;

    if (!s) {
        strata_errmsg_set("chip %d is not a cuda chip", strata_chip_id(chip));
        return STRATA_ENOTSUP;
    }
    if (strata_args_tensor_nbytes(args, 1) != bytes ||
        strata_args_tensor_nbytes(args, 2) != bytes) {
        strata_errmsg_set("x, y and z must have the same length");
        return STRATA_EINVAL;
    }
    /* One allocation for x, y and z, ordered on the stream with the rest. */
    e = cudaMallocAsync((void **)&d, 3 * bytes, s);
    if (e != cudaSuccess)
        return cuda_failed("cudaMallocAsync", e);
    cudaMemcpyAsync(d, strata_args_tensor_data(args, 0), bytes,
                    cudaMemcpyHostToDevice, s);
    cudaMemcpyAsync(d + n, strata_args_tensor_data(args, 1), bytes,
                    cudaMemcpyHostToDevice, s);
    add<<<(unsigned)((n + 255) / 256), 256, 0, s>>>(d, d + n, d + 2 * n, n);
    cudaMemcpyAsync(strata_args_tensor_data(args, 2), d + 2 * n, bytes,
                    cudaMemcpyDeviceToHost, s);
    cudaFreeAsync(d, s);
    /* Launch and enqueue errors; errors while the work runs fail the task
     * when the chip waits for the stream. */
    e = cudaGetLastError();
    return e == cudaSuccess ? STRATA_OK : cuda_failed("enqueue", e);
}
