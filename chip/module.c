/* strata_load_module: dlopen a library of callables and run its init. */
#include "base/alloc.h"
#include "base/err.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef strata_err (*module_init_fn)(void);

#define MAX_MODULES 64

static char *loaded[MAX_MODULES];
static int num_loaded;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static bool already_loaded(const char *path)
{
    for (int i = 0; i < num_loaded; i++)
        if (strcmp(loaded[i], path) == 0)
            return true;
    return false;
}

static strata_err load(const char *real)
{
    module_init_fn init;
    void *handle;
    void *sym;
    strata_err err;

    if (num_loaded == MAX_MODULES)
        return base_fail(STRATA_ENOMEM, "more than %d modules loaded",
                         MAX_MODULES);
    /* Callables point into the module, so it is never unloaded. */
    handle = dlopen(real, RTLD_NOW | RTLD_LOCAL);
    if (!handle)
        return base_fail(STRATA_EIO, "cannot load module %s: %s", real,
                         dlerror());
    sym = dlsym(handle, "strata_module_init");
    if (!sym) {
        dlclose(handle);
        return base_fail(STRATA_ENOENT,
                         "module %s has no strata_module_init symbol", real);
    }
    memcpy(&init, &sym, sizeof(init));
    err = init();
    if (err) {
        base_errmsg_prefix("strata_module_init of %s failed", real);
        return err;
    }
    loaded[num_loaded] = base_strdup(real);
    if (!loaded[num_loaded])
        return base_fail(STRATA_ENOMEM, "out of memory recording module");
    num_loaded++;
    return STRATA_OK;
}

strata_err strata_load_module(const char *path)
{
    char real[PATH_MAX];
    strata_err err = STRATA_OK;

    if (!path)
        return base_fail_null("strata_load_module", "shared_object_path");
    if (!*path)
        return base_fail(STRATA_EINVAL,
                         "strata_load_module: shared_object_path is empty");
    if (!realpath(path, real))
        return base_fail(STRATA_EIO, "cannot load module %s: no such file",
                         path);
    pthread_mutex_lock(&lock);
    if (!already_loaded(real))
        err = load(real);
    pthread_mutex_unlock(&lock);
    return err;
}
