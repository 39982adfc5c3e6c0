/* The table of registered device backends, and the loader of the CUDA
 * plug-in. The "cuda" platform is always known here, as a table of
 * forwarders: the worker process only passes that table to its chips, and
 * each chip process loads libstrata-cuda.so in its init, after the fork,
 * so that no CUDA library or context is ever in the worker process (a
 * CUDA context does not survive fork). */
#define _GNU_SOURCE /* dladdr */
#include "base/err.h"
#include "base/log.h"
#include "chip/chip.h"
#include "chip_int.h"
#include "wire/cuda_plugin.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strata/cuda.h>
#include <string.h>
#include <unistd.h>

#define MAX_BACKENDS 8

static const struct chip_backend_ops *backends[MAX_BACKENDS];
static int num_backends;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* The plug-in's table once this chip process has loaded it. Set once, in
 * the chip's init, before the chip serves any frame. */
static const struct cuda_plugin *cuda_plugin;

static const struct chip_backend_ops cuda_loader_ops;

strata_err chip_backend_register(const struct chip_backend_ops *ops)
{
    strata_err err = STRATA_OK;

    if (!ops || !ops->name || ops->abi != CHIP_BACKEND_ABI)
        return base_fail(STRATA_EINVAL, "backend ops table is invalid");
    pthread_mutex_lock(&lock);
    for (int i = 0; i < num_backends; i++)
        if (strcmp(backends[i]->name, ops->name) == 0)
            goto out; /* registered before: keep the first */
    if (num_backends == MAX_BACKENDS)
        err = base_fail(STRATA_ENOMEM, "too many backends");
    else
        backends[num_backends++] = ops;
out:
    pthread_mutex_unlock(&lock);
    return err;
}

const struct chip_backend_ops *chip_backend_find(const char *platform)
{
    const struct chip_backend_ops *found = NULL;

    pthread_mutex_lock(&lock);
    for (int i = 0; i < num_backends; i++)
        if (strcmp(backends[i]->name, platform) == 0)
            found = backends[i];
    pthread_mutex_unlock(&lock);
    if (!found && strcmp(platform, "cuda") == 0)
        found = &cuda_loader_ops;
    return found;
}

/* ------------------------------------------------------------------ */
/* Loading the plug-in (chip process only)                             */
/* ------------------------------------------------------------------ */

static void host_log(int level, const char *fmt, ...) STRATA_PRINTF(2, 3);

static void host_log(int level, const char *fmt, ...)
{
    enum base_log_level l = level <= CUDA_PLUGIN_LOG_WARN   ? BASE_LOG_WARN
                            : level == CUDA_PLUGIN_LOG_INFO ? BASE_LOG_INFO
                                                            : BASE_LOG_DEBUG;
    char line[512];
    va_list ap;

    if (!base_log_enabled(l))
        return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    base_log(l, "%s", line);
}

static int host_device_ordinal(const strata_chip *chip)
{
    return chip && chip->cfg ? chip->cfg->device_ordinal : -1;
}

static const struct cuda_plugin_host cuda_host = {
    .abi = CUDA_PLUGIN_ABI,
    .chip_id = strata_chip_id,
    .device_ordinal = host_device_ordinal,
    .fail = base_fail,
    .log = host_log,
};

/* The plug-in's path beside the object this code is linked into
 * (libstrata.so, or a program linked with libstrata.a such as
 * strata-node): in its directory, or in ../lib or ../lib64 of it (an
 * installed bin/strata-node). False when none is there. */
static bool path_beside_self(char *out, size_t cap)
{
    static const char *const rel[] = {"", "/../lib", "/../lib64"};
    Dl_info info;
    const char *slash;
    int dir_len;

    if (!dladdr((const void *)&cuda_plugin, &info) || !info.dli_fname)
        return false;
    slash = strrchr(info.dli_fname, '/');
    if (!slash)
        return false;
    dir_len = (int)(slash - info.dli_fname);
    for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
        int n = snprintf(out, cap, "%.*s%s/%s", dir_len, info.dli_fname, rel[i],
                         CUDA_PLUGIN_FILE);

        if (n > 0 && (size_t)n < cap && access(out, F_OK) == 0)
            return true;
    }
    return false;
}

/* dlopen()s the plug-in: $STRATA_CUDA_PLUGIN when set (only there), else
 * beside this library, else by name on the library search path. */
static strata_err open_library(void **handle_out, char *path, size_t cap)
{
    const char *env = getenv("STRATA_CUDA_PLUGIN");
    const char *how = "on the library search path";
    void *h;

    if (env && env[0]) {
        snprintf(path, cap, "%s", env);
        how = "from STRATA_CUDA_PLUGIN";
    } else if (path_beside_self(path, cap)) {
        how = "beside libstrata";
    } else {
        snprintf(path, cap, "%s", CUDA_PLUGIN_FILE);
    }
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return base_fail(STRATA_ENOTSUP,
                         "the CUDA backend plug-in cannot be loaded (%s): %s "
                         "(build strata with -DSTRATA_CUDA=ON, or set "
                         "STRATA_CUDA_PLUGIN to libstrata-cuda.so's path)",
                         how, dlerror());
    *handle_out = h;
    return STRATA_OK;
}

static strata_err cuda_load(void)
{
    char path[PATH_MAX];
    const struct cuda_plugin *p = NULL;
    cuda_plugin_open_fn open_fn;
    void *h = NULL;
    void *sym;
    strata_err err;

    if (cuda_plugin)
        return STRATA_OK;
    err = open_library(&h, path, sizeof(path));
    if (err)
        return err;
    /* The plug-in stays loaded: ops and streams point into it. */
    sym = dlsym(h, CUDA_PLUGIN_ENTRY);
    if (!sym)
        return base_fail(STRATA_ENOTSUP, "%s has no %s symbol", path,
                         CUDA_PLUGIN_ENTRY);
    memcpy(&open_fn, &sym, sizeof(open_fn));
    err = open_fn(&cuda_host, &p);
    if (err)
        return err;
    if (!p || p->abi != CUDA_PLUGIN_ABI || !p->ops ||
        p->ops->abi != CHIP_BACKEND_ABI || !p->ops->name ||
        strcmp(p->ops->name, "cuda") != 0 || !p->stream || !p->device ||
        !p->mem)
        return base_fail(STRATA_ENOTSUP,
                         "%s was built for another strata (plug-in ABI %u, "
                         "backend ABI %u; this library wants %u and %u)",
                         path, p ? p->abi : 0, p && p->ops ? p->ops->abi : 0,
                         CUDA_PLUGIN_ABI, CHIP_BACKEND_ABI);
    LOG_DEBUG("loaded the CUDA backend from %s", path);
    cuda_plugin = p;
    return STRATA_OK;
}

strata_err chip_cuda_mem(const struct cuda_plugin_mem **out)
{
    static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
    strata_err err;

    pthread_mutex_lock(&mem_lock);
    err = cuda_load();
    if (!err)
        err = cuda_plugin->mem->open(&cuda_host);
    pthread_mutex_unlock(&mem_lock);
    if (!err)
        *out = cuda_plugin->mem;
    return err;
}

/* ------------------------------------------------------------------ */
/* The "cuda" ops: forwarders to the plug-in's table                   */
/* ------------------------------------------------------------------ */

/* The plug-in's op, or NULL when it has none (or is not loaded). */
#define CUDA_OP(op) (cuda_plugin ? cuda_plugin->ops->op : NULL)

static strata_err missing(const char *what)
{
    return base_fail(STRATA_ENOTSUP, "the cuda backend has no %s yet", what);
}

static strata_err cl_init(strata_chip *chip, void **state_out)
{
    strata_err err = cuda_load();

    if (err)
        return err;
    return CUDA_OP(init) ? CUDA_OP(init)(chip, state_out) : STRATA_OK;
}

static void cl_fini(strata_chip *chip, void *state)
{
    if (CUDA_OP(fini))
        CUDA_OP(fini)(chip, state);
}

static strata_err cl_malloc(void *state, size_t nbytes, void **dev_out)
{
    return CUDA_OP(malloc) ? CUDA_OP(malloc)(state, nbytes, dev_out)
                           : missing("device memory");
}

static strata_err cl_free(void *state, void *dev)
{
    return CUDA_OP(free) ? CUDA_OP(free)(state, dev) : missing("device memory");
}

static strata_err cl_copy_h2d(void *state, void *dst, const void *src, size_t n)
{
    return CUDA_OP(copy_h2d) ? CUDA_OP(copy_h2d)(state, dst, src, n)
                             : missing("host-to-device copy");
}

static strata_err cl_copy_d2h(void *state, void *dst, const void *src, size_t n)
{
    return CUDA_OP(copy_d2h) ? CUDA_OP(copy_d2h)(state, dst, src, n)
                             : missing("device-to-host copy");
}

static strata_err cl_copy_d2d(void *state, void *dst, const void *src, size_t n)
{
    return CUDA_OP(copy_d2d) ? CUDA_OP(copy_d2d)(state, dst, src, n)
                             : missing("device-to-device copy");
}

static strata_err cl_comm_init(void *state, uint32_t rank, uint32_t size)
{
    return CUDA_OP(comm_init) ? CUDA_OP(comm_init)(state, rank, size)
                              : missing("communicator");
}

static strata_err cl_window_prepare(void *state,
                                    const struct chip_window_req *req,
                                    struct chip_window_desc *desc_out)
{
    return CUDA_OP(window_prepare)
               ? CUDA_OP(window_prepare)(state, req, desc_out)
               : missing("device windows (communication domains)");
}

static strata_err cl_window_import(void *state, uint64_t alloc_id,
                                   const struct chip_window_desc *table,
                                   uint32_t n,
                                   struct chip_window_import_out *out)
{
    return CUDA_OP(window_import)
               ? CUDA_OP(window_import)(state, alloc_id, table, n, out)
               : missing("device windows (communication domains)");
}

static strata_err cl_window_release(void *state, uint64_t alloc_id)
{
    /* Nothing was prepared without window_prepare: releasing is a no-op. */
    return CUDA_OP(window_release) ? CUDA_OP(window_release)(state, alloc_id)
                                   : STRATA_OK;
}

static void *cl_window_local(void *state, uint64_t alloc_id, size_t *size_out)
{
    return CUDA_OP(window_local)
               ? CUDA_OP(window_local)(state, alloc_id, size_out)
               : NULL;
}

static const struct strata_comm_context *cl_comm_context(void *state,
                                                         uint64_t device_ctx)
{
    return CUDA_OP(comm_context) ? CUDA_OP(comm_context)(state, device_ctx)
                                 : NULL;
}

static strata_err cl_launch(void *state, strata_chip *chip, strata_kernel_fn fn,
                            const strata_args *args)
{
    return CUDA_OP(launch) ? CUDA_OP(launch)(state, chip, fn, args)
                           : missing("kernel launch");
}

static strata_err cl_sync(void *state)
{
    return CUDA_OP(sync) ? CUDA_OP(sync)(state) : STRATA_OK;
}

/* No host_window_* / window_adopt: device windows are not host memory,
 * so domains of cuda chips are made by their members (window_prepare and
 * window_import). */
static const struct chip_backend_ops cuda_loader_ops = {
    .name = "cuda",
    .abi = CHIP_BACKEND_ABI,
    .init = cl_init,
    .fini = cl_fini,
    .malloc = cl_malloc,
    .free = cl_free,
    .copy_h2d = cl_copy_h2d,
    .copy_d2h = cl_copy_d2h,
    .copy_d2d = cl_copy_d2d,
    .comm_init = cl_comm_init,
    .window_prepare = cl_window_prepare,
    .window_import = cl_window_import,
    .window_release = cl_window_release,
    .window_local = cl_window_local,
    .comm_context = cl_comm_context,
    .launch = cl_launch,
    .sync = cl_sync,
};

/* ------------------------------------------------------------------ */
/* Public accessors (strata/cuda.h)                                    */
/* ------------------------------------------------------------------ */

static bool is_cuda_chip(const strata_chip *chip)
{
    return chip && cuda_plugin && !chip->cfg->is_sub &&
           chip->cfg->ops == &cuda_loader_ops && chip->state;
}

struct CUstream_st *strata_chip_cuda_stream(const strata_chip *chip)
{
    return is_cuda_chip(chip) ? cuda_plugin->stream(chip->state) : NULL;
}

int strata_chip_cuda_device(const strata_chip *chip)
{
    return is_cuda_chip(chip) ? cuda_plugin->device(chip->state) : -1;
}
