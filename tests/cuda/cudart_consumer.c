/* A module that needs libcudart: tests/cuda/test_cuda_link.c shows its
 * DT_NEEDED check sees it. Never loaded. */
#include <cuda_runtime_api.h>

int strata_cudart_consumer(void);

int strata_cudart_consumer(void)
{
    int n = 0;

    return cudaGetDeviceCount(&n) == cudaSuccess ? n : -1;
}
