/* Memory for the tier runtime's device and host-pinned instances
 * (wire/cuda_plugin.h, struct cuda_plugin_mem), in the process that
 * allocates them: the first visible device's primary context and one
 * non-blocking stream for copies, set up once. Copies go through
 * cuMemcpyAsync on that stream and wait for it, so a copy between any
 * two kinds of pointer (unified addressing) is one call. */
#include "cuda_chip.h"
#include "cuda_driver.h"

#include <pthread.h>
#include <unistd.h>

static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static const struct cuda_driver *mem_d;
static CUcontext mem_ctx;
static CUstream mem_stream;
static pid_t mem_pid; /* the process that set them up */

static strata_err mem_fail(CUresult r, const char *what)
{
    return cuda_fail(cuda_host_table, mem_d, r, what);
}

/* The context, pushed on this thread for one call (mem_leave pops it):
 * whatever the caller had current stays current afterwards. */
static strata_err mem_enter(void)
{
    CUresult r = mem_d->cuCtxPushCurrent(mem_ctx);

    return r == CUDA_SUCCESS ? STRATA_OK : mem_fail(r, "cuCtxPushCurrent");
}

static void mem_leave(void)
{
    CUcontext popped;

    (void)mem_d->cuCtxPopCurrent(&popped);
}

static strata_err setup(const struct cuda_plugin_host *host)
{
    const struct cuda_driver *d = NULL;
    strata_err err = cuda_driver_load(host, &d);
    CUdevice dev;
    CUresult r;
    int count = 0;

    if (err)
        return err;
    /* From here CUDA is initialised in this process: a chip forked later
     * must not use it, whatever happens below. */
    mem_pid = getpid();
    mem_d = d;
    r = d->cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS)
        return mem_fail(r, "cuDeviceGetCount failed");
    if (count == 0)
        return host->fail(STRATA_ENOTSUP, "no CUDA device is visible");
    r = d->cuDeviceGet(&dev, 0);
    if (r == CUDA_SUCCESS)
        r = d->cuDevicePrimaryCtxRetain(&mem_ctx, dev);
    if (r != CUDA_SUCCESS)
        return mem_fail(r, "device 0: cuDevicePrimaryCtxRetain failed");
    err = mem_enter();
    if (!err) {
        r = d->cuStreamCreate(&mem_stream, CU_STREAM_NON_BLOCKING);
        mem_leave();
        if (r != CUDA_SUCCESS)
            err = mem_fail(r, "device 0: cuStreamCreate failed");
    }
    if (err) {
        d->cuDevicePrimaryCtxRelease(dev);
        mem_ctx = NULL;
        mem_stream = NULL;
        return err;
    }
    cuda_driver_started();
    return STRATA_OK;
}

strata_err cuda_mem_forked_check(void)
{
    if (mem_pid == 0 || mem_pid == getpid())
        return STRATA_OK;
    return cuda_host_table->fail(
        STRATA_ESTATE,
        "process %d used CUDA for a device or host-pinned tier instance "
        "before it forked this chip, and CUDA does not survive fork: "
        "allocate those instances after strata_worker_init",
        (int)mem_pid);
}

static strata_err mem_open(const struct cuda_plugin_host *host)
{
    strata_err err = STRATA_OK;

    if (!cuda_host_table)
        cuda_host_table = host;
    pthread_mutex_lock(&mem_lock);
    if (!mem_stream)
        err = setup(host);
    pthread_mutex_unlock(&mem_lock);
    return err;
}

static strata_err mem_alloc(bool pinned, uint64_t bytes, void **out)
{
    strata_err err = mem_enter();
    CUdeviceptr p = 0;
    CUresult r;

    if (err)
        return err;
    if (pinned) {
        r = mem_d->cuMemHostAlloc(out, (size_t)bytes, 0);
        if (r != CUDA_SUCCESS)
            err = mem_fail(r, "cuMemHostAlloc");
    } else {
        r = mem_d->cuMemAlloc(&p, (size_t)bytes);
        if (r != CUDA_SUCCESS)
            err = mem_fail(r, "cuMemAlloc");
        else
            *out = (void *)(uintptr_t)p;
    }
    mem_leave();
    return err;
}

static void mem_free(bool pinned, void *p)
{
    if (!p || mem_enter() != STRATA_OK)
        return;
    if (pinned)
        (void)mem_d->cuMemFreeHost(p);
    else
        (void)mem_d->cuMemFree((CUdeviceptr)(uintptr_t)p);
    mem_leave();
}

/* One copy at a time on the one stream: an error a synchronize finds is
 * then this copy's, not another thread's. */
static strata_err mem_copy(void *dst, const void *src, size_t n)
{
    strata_err err;
    CUresult r;

    pthread_mutex_lock(&mem_lock);
    err = mem_enter();
    if (!err) {
        r = mem_d->cuMemcpyAsync((CUdeviceptr)(uintptr_t)dst,
                                 (CUdeviceptr)(uintptr_t)src, n, mem_stream);
        if (r == CUDA_SUCCESS)
            r = mem_d->cuStreamSynchronize(mem_stream);
        if (r != CUDA_SUCCESS)
            err = mem_fail(r, "copy on the tier stream (cuMemcpyAsync)");
        mem_leave();
    }
    pthread_mutex_unlock(&mem_lock);
    return err;
}

const struct cuda_plugin_mem cuda_mem_ops = {
    .open = mem_open,
    .alloc = mem_alloc,
    .free = mem_free,
    .copy = mem_copy,
};
