/* The cuda backend ops: one chip process per chip, each on its device's
 * primary context with its own non-blocking stream. A kernel stays a host
 * function that enqueues work on that stream; the chip records an event
 * after it and sleeps on the event (blocking sync, no spinning) before it
 * reports the task done. */
#include "cuda_chip.h"
#include "cuda_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct cuda_plugin_host *cuda_host_table;

/* Records "device N: call failed: NAME (code): text". */
strata_err cuda_chip_fail(const struct cuda_chip *c, CUresult r,
                          const char *call)
{
    char what[128];

    snprintf(what, sizeof(what), "device %d: %s failed", c->ordinal, call);
    return cuda_fail(cuda_host_table, c->d, r, what);
}

/* The chip's device ordinal: the config's device_ordinals, else
 * STRATA_CUDA_DEVICES, else its id; checked before the driver is asked
 * anything. */
static strata_err map_device(struct cuda_chip *c, int configured)
{
    char why[192];

    c->from_config = configured >= 0;
    if (c->from_config) {
        c->ordinal = configured;
        return STRATA_OK;
    }
    if (cuda_device_map_lookup(getenv("STRATA_CUDA_DEVICES"), c->chip_id,
                               &c->ordinal, why, sizeof(why)))
        return cuda_host_table->fail(STRATA_EINVAL, "%s", why);
    return STRATA_OK;
}

/* Opens the chip's device, checked against what the driver sees. */
static strata_err pick_device(struct cuda_chip *c)
{
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    int count = 0;
    CUresult r;

    r = c->d->cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS)
        return cuda_fail(cuda_host_table, c->d, r, "cuDeviceGetCount failed");
    if (count == 0)
        return cuda_host_table->fail(
            STRATA_ENOTSUP,
            "no CUDA device is visible (CUDA_VISIBLE_DEVICES=%s)",
            visible ? visible : "(unset)");
    if (c->ordinal >= count)
        return cuda_host_table->fail(
            STRATA_EINVAL,
            "device ordinal %d (%s) is out of range: %d CUDA "
            "device%s visible (CUDA_VISIBLE_DEVICES=%s); map "
            "chips to devices with the config's "
            "device_ordinals or STRATA_CUDA_DEVICES",
            c->ordinal,
            c->from_config ? "from device_ordinals"
                           : "the default or "
                             "STRATA_CUDA_DEVICES",
            count, count == 1 ? " is" : "s are", visible ? visible : "(unset)");
    r = c->d->cuDeviceGet(&c->dev, c->ordinal);
    if (r != CUDA_SUCCESS)
        return cuda_chip_fail(c, r, "cuDeviceGet");
    return STRATA_OK;
}

/* The primary context (shared with the CUDA runtime a kernel may use)
 * with blocking sync, current on this, the chip's only, thread. */
static strata_err open_context(struct cuda_chip *c)
{
    const char *call;
    CUresult r;

    /* Before the retain, so the context starts with the flag (since CUDA
     * 11 it may also be set on an active one). */
    r = c->d->cuDevicePrimaryCtxSetFlags(c->dev, CU_CTX_SCHED_BLOCKING_SYNC);
    if (r != CUDA_SUCCESS)
        return cuda_chip_fail(c, r, "cuDevicePrimaryCtxSetFlags");
    r = c->d->cuDevicePrimaryCtxRetain(&c->ctx, c->dev);
    if (r != CUDA_SUCCESS)
        return cuda_chip_fail(c, r, "cuDevicePrimaryCtxRetain");
    call = "cuCtxSetCurrent";
    r = c->d->cuCtxSetCurrent(c->ctx);
    if (r != CUDA_SUCCESS)
        goto err_release;
    call = "cuStreamCreate";
    r = c->d->cuStreamCreate(&c->stream, CU_STREAM_NON_BLOCKING);
    if (r != CUDA_SUCCESS)
        goto err_release;
    call = "cuEventCreate";
    r = c->d->cuEventCreate(&c->done,
                            CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING);
    if (r != CUDA_SUCCESS)
        goto err_stream;
    return STRATA_OK;

err_stream:
    c->d->cuStreamDestroy(c->stream);
    c->stream = NULL;
err_release:
    c->d->cuCtxSetCurrent(NULL);
    c->d->cuDevicePrimaryCtxRelease(c->dev);
    c->ctx = NULL;
    return cuda_chip_fail(c, r, call);
}

/* "device 0 (NVIDIA H200, sm_90, 143771 MiB), CUDA driver 13.0" at info
 * level: which device each chip got. */
static void log_device(const struct cuda_chip *c)
{
    char name[128] = "?";
    int major = 0, minor = 0;
    size_t total = 0;

    c->d->cuDeviceGetName(name, (int)sizeof(name), c->dev);
    c->d->cuDeviceGetAttribute(
        &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, c->dev);
    c->d->cuDeviceGetAttribute(
        &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, c->dev);
    c->d->cuDeviceTotalMem(&total, c->dev);
    cuda_host_table->log(
        CUDA_PLUGIN_LOG_INFO,
        "chip %d on device %d (%s, sm_%d%d, %zu MiB), CUDA driver "
        "%d.%d",
        c->chip_id, c->ordinal, name, major, minor, total >> 20,
        c->d->version / 1000, c->d->version % 1000 / 10);
}

static strata_err cuda_init(strata_chip *chip, void **state_out)
{
    struct cuda_chip *c = calloc(1, sizeof(*c));
    strata_err err;

    if (!c)
        return cuda_host_table->fail(STRATA_ENOMEM,
                                     "cuda backend: out of memory");
    c->chip_id = cuda_host_table->chip_id(chip);
    err = cuda_mem_forked_check();
    if (!err)
        err = map_device(c, cuda_host_table->device_ordinal(chip));
    if (!err)
        err = cuda_driver_load(cuda_host_table, &c->d);
    if (!err)
        err = pick_device(c);
    if (!err)
        err = open_context(c);
    if (err) {
        /* The worker names the chip: "chip 3 failed to start: ...". */
        free(c);
        return err;
    }
    cuda_driver_started();
    log_device(c);
    *state_out = c;
    return STRATA_OK;
}

static void cuda_fini(strata_chip *chip, void *state)
{
    struct cuda_chip *c = state;

    (void)chip;
    if (!c)
        return;
    /* Errors here have nowhere to go: the chip is shutting down. */
    c->d->cuStreamSynchronize(c->stream);
    cuda_windows_release_all(c);
    c->d->cuEventDestroy(c->done);
    c->d->cuStreamDestroy(c->stream);
    c->d->cuCtxSetCurrent(NULL);
    c->d->cuDevicePrimaryCtxRelease(c->dev);
    free(c);
}

static strata_err cuda_comm_init(void *state, uint32_t rank, uint32_t size)
{
    struct cuda_chip *c = state;

    /* The base communicator is the worker's control path; NCCL
     * communicators come per domain, on demand. */
    c->comm_rank = rank;
    c->comm_size = size;
    return STRATA_OK;
}

static strata_err cuda_malloc(void *state, size_t nbytes, void **dev_out)
{
    struct cuda_chip *c = state;
    CUdeviceptr p;
    CUresult r = c->d->cuMemAlloc(&p, nbytes);

    if (r != CUDA_SUCCESS)
        return cuda_chip_fail(c, r, "cuMemAlloc");
    /* Zeroed, as host buffers are; synchronous (the null stream). */
    r = c->d->cuMemsetD8(p, 0, nbytes);
    if (r != CUDA_SUCCESS) {
        c->d->cuMemFree(p);
        return cuda_chip_fail(c, r, "cuMemsetD8");
    }
    *dev_out = (void *)(uintptr_t)p;
    return STRATA_OK;
}

static strata_err cuda_free(void *state, void *dev)
{
    struct cuda_chip *c = state;
    CUresult r;

    if (!dev)
        return STRATA_OK;
    r = c->d->cuMemFree((CUdeviceptr)(uintptr_t)dev);
    return r == CUDA_SUCCESS ? STRATA_OK : cuda_chip_fail(c, r, "cuMemFree");
}

static strata_err cuda_copy_h2d(void *state, void *dst, const void *src,
                                size_t n)
{
    struct cuda_chip *c = state;
    CUresult r = c->d->cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dst, src, n);

    return r == CUDA_SUCCESS ? STRATA_OK : cuda_chip_fail(c, r, "cuMemcpyHtoD");
}

static strata_err cuda_copy_d2h(void *state, void *dst, const void *src,
                                size_t n)
{
    struct cuda_chip *c = state;
    CUresult r = c->d->cuMemcpyDtoH(dst, (CUdeviceptr)(uintptr_t)src, n);

    return r == CUDA_SUCCESS ? STRATA_OK : cuda_chip_fail(c, r, "cuMemcpyDtoH");
}

static strata_err cuda_copy_d2d(void *state, void *dst, const void *src,
                                size_t n)
{
    struct cuda_chip *c = state;
    CUresult r = c->d->cuMemcpyDtoD((CUdeviceptr)(uintptr_t)dst,
                                    (CUdeviceptr)(uintptr_t)src, n);

    return r == CUDA_SUCCESS ? STRATA_OK : cuda_chip_fail(c, r, "cuMemcpyDtoD");
}

/* Waits, asleep, for everything the task put on the stream. */
static strata_err wait_stream_work(struct cuda_chip *c)
{
    CUresult r = c->d->cuEventRecord(c->done, c->stream);

    if (r == CUDA_SUCCESS)
        r = c->d->cuEventSynchronize(c->done);
    if (r == CUDA_SUCCESS)
        return STRATA_OK;
    return cuda_chip_fail(c, r, "the task's work on the chip's stream");
}

static strata_err cuda_launch(void *state, strata_chip *chip,
                              strata_kernel_fn fn, const strata_args *args)
{
    struct cuda_chip *c = state;
    strata_err err;
    CUresult r;

    /* A kernel may have made another context current (cudaSetDevice). */
    r = c->d->cuCtxSetCurrent(c->ctx);
    if (r != CUDA_SUCCESS)
        return cuda_chip_fail(c, r, "cuCtxSetCurrent");
    c->launches++;
    err = fn(chip, args);
    /* Even a failed kernel may have enqueued work that still uses the
     * task's buffers: the task ends only when the stream has drained. The
     * kernel's own error (and message) comes first. */
    if (err) {
        c->d->cuEventRecord(c->done, c->stream);
        c->d->cuEventSynchronize(c->done);
        return err;
    }
    return wait_stream_work(c);
}

static strata_err cuda_sync(void *state)
{
    struct cuda_chip *c = state;
    CUresult r = c->d->cuStreamSynchronize(c->stream);

    return r == CUDA_SUCCESS ? STRATA_OK
                             : cuda_chip_fail(c, r, "cuStreamSynchronize");
}

static void *cuda_stream(void *state)
{
    return ((struct cuda_chip *)state)->stream;
}

static int cuda_device(void *state)
{
    return ((struct cuda_chip *)state)->ordinal;
}

/* Device windows are cuda_window.c's; NCCL comes later. */
static const struct chip_backend_ops cuda_ops = {
    .name = "cuda",
    .abi = CHIP_BACKEND_ABI,
    .init = cuda_init,
    .fini = cuda_fini,
    .malloc = cuda_malloc,
    .free = cuda_free,
    .copy_h2d = cuda_copy_h2d,
    .copy_d2h = cuda_copy_d2h,
    .copy_d2d = cuda_copy_d2d,
    .comm_init = cuda_comm_init,
    .window_prepare = cuda_window_prepare,
    .window_import = cuda_window_import,
    .window_release = cuda_window_release,
    .window_local = cuda_window_local,
    .comm_context = cuda_comm_context,
    .launch = cuda_launch,
    .sync = cuda_sync,
};

static const struct cuda_plugin plugin = {
    .abi = CUDA_PLUGIN_ABI,
    .ops = &cuda_ops,
    .stream = cuda_stream,
    .device = cuda_device,
    .mem = &cuda_mem_ops,
};

__attribute__((visibility("default"))) strata_err
strata_cuda_plugin_open(const struct cuda_plugin_host *h,
                        const struct cuda_plugin **out);

strata_err strata_cuda_plugin_open(const struct cuda_plugin_host *h,
                                   const struct cuda_plugin **out)
{
    if (!h || h->abi != CUDA_PLUGIN_ABI || !h->fail || !h->chip_id ||
        !h->device_ordinal || !h->log)
        return h && h->fail ? h->fail(STRATA_ENOTSUP,
                                      "libstrata-cuda.so: host ABI %u, "
                                      "plug-in ABI %u",
                                      h->abi, CUDA_PLUGIN_ABI)
                            : STRATA_ENOTSUP;
    cuda_host_table = h;
    *out = &plugin;
    return STRATA_OK;
}
