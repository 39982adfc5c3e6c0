/* Loading libcuda at run time, and CUresult -> strata_err. */
#include "cuda_driver.h"
#include "cuda_util.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CUDA_STR2(x) #x
#define CUDA_STR(x) CUDA_STR2(x) /* after macro expansion: "cuMemAlloc_v2" */

/* cuda_util.c's table is kept by number: hold it to cuda.h's. */
_Static_assert(CUDA_ERROR_STUB_LIBRARY == 34, "CUresult numbering");
_Static_assert(CUDA_ERROR_NO_DEVICE == 100, "CUresult numbering");
_Static_assert(CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER == 36,
               "CUresult numbering");
_Static_assert(CUDA_ERROR_ILLEGAL_ADDRESS == 700, "CUresult numbering");
_Static_assert(CUDA_ERROR_LAUNCH_FAILED == 719, "CUresult numbering");
_Static_assert(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH == 803, "CUresult numbering");

static struct cuda_driver driver;
static bool loaded;

void cuda_driver_describe(const struct cuda_driver *d, CUresult r, char *out,
                          size_t cap)
{
    const char *name = NULL, *text = NULL;

    /* A stub's cuGetErrorName fails; fall back on our own table. */
    if (d && d->cuGetErrorName && d->cuGetErrorName(r, &name) != CUDA_SUCCESS)
        name = NULL;
    if (d && d->cuGetErrorString &&
        d->cuGetErrorString(r, &text) != CUDA_SUCCESS)
        text = NULL;
    if (!name)
        name = cuda_result_name((int)r);
    if (!text)
        text = cuda_result_hint((int)r);
    snprintf(out, cap, "%s (%d)%s%s", name ? name : "CUresult", (int)r,
             text ? ": " : "", text ? text : "");
}

strata_err cuda_fail(const struct cuda_plugin_host *host,
                     const struct cuda_driver *d, CUresult r, const char *what)
{
    bool fork_hint = d && d->inherited && d->starting;
    char desc[256];

    cuda_driver_describe(d, r, desc, sizeof(desc));
    return host->fail(cuda_result_errcode((int)r), "%s: %s%s", what, desc,
                      fork_hint ? " (libcuda was loaded in the worker process "
                                  "before it forked this chip, and CUDA does "
                                  "not survive fork: make no CUDA call in "
                                  "that process before strata_worker_init)"
                                : "");
}

void cuda_driver_started(void)
{
    driver.starting = false;
}

static strata_err resolve(const struct cuda_plugin_host *host, const char *path)
{
#define CUDA_DRIVER_RESOLVE(fn)                                                \
    do {                                                                       \
        void *sym = dlsym(driver.lib, CUDA_STR(fn));                           \
        if (!sym)                                                              \
            return host->fail(STRATA_ENOTSUP,                                  \
                              "CUDA driver %s has no %s (a driver older "      \
                              "than CUDA %d.%d?)",                             \
                              path, CUDA_STR(fn), CUDA_VERSION / 1000,         \
                              CUDA_VERSION % 1000 / 10);                       \
        memcpy(&driver.fn, &sym, sizeof(sym));                                 \
    } while (0);
    CUDA_DRIVER_FNS(CUDA_DRIVER_RESOLVE)
#undef CUDA_DRIVER_RESOLVE
    return STRATA_OK;
}

static strata_err load(const struct cuda_plugin_host *host)
{
    const char *env = getenv("STRATA_CUDA_DRIVER");
    const char *path = env && env[0] ? env : "libcuda.so.1";
    void *pre = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    strata_err err;
    CUresult r;

    if (pre) {
        driver.inherited = true;
        dlclose(pre);
    }
    driver.starting = true;
    driver.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!driver.lib)
        return host->fail(STRATA_ENOTSUP, "CUDA driver not available: %s",
                          dlerror());
    err = resolve(host, path);
    if (err)
        goto err_close;
    r = driver.cuInit(0);
    if (r != CUDA_SUCCESS) {
        err = cuda_fail(host, &driver, r, "cuInit failed");
        if (err == STRATA_EIO || err == STRATA_EINVAL)
            err = STRATA_ENOTSUP; /* at start-up: no usable driver */
        goto err_close;
    }
    if (driver.cuDriverGetVersion(&driver.version) != CUDA_SUCCESS)
        driver.version = 0;
    return STRATA_OK;

err_close:
    dlclose(driver.lib);
    memset(&driver, 0, sizeof(driver));
    return err;
}

strata_err cuda_driver_load(const struct cuda_plugin_host *host,
                            const struct cuda_driver **out)
{
    strata_err err = STRATA_OK;

    /* A chip process loads once, in its init; a failed load is retried
     * by the next caller (there is none: the chip exits). */
    if (!loaded) {
        err = load(host);
        loaded = err == STRATA_OK;
    }
    if (!err)
        *out = &driver;
    return err;
}
