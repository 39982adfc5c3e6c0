/* The table of registered device backends. */
#include "base/err.h"
#include "chip/chip.h"

#include <pthread.h>
#include <string.h>

#define MAX_BACKENDS 8

static const struct chip_backend_ops *backends[MAX_BACKENDS];
static int num_backends;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

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
    return found;
}
