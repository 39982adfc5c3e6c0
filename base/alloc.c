/* Allocation hooks and the test-build allocation countdown. */
#include "base/alloc.h"
#include "base/err.h"
#include "base/fault.h"

#include <stdlib.h>
#include <string.h>

static strata_alloc_hooks hooks;
static bool hooks_set;
static bool hooks_locked;

#ifdef STRATA_TESTING
static long countdown;
static long failures;

void base_alloc_fail_after(long n)
{
    __atomic_store_n(&countdown, n, __ATOMIC_SEQ_CST);
    __atomic_store_n(&failures, 0, __ATOMIC_SEQ_CST);
}

long base_alloc_failures(void)
{
    return __atomic_load_n(&failures, __ATOMIC_SEQ_CST);
}

static bool inject(void)
{
    long left = __atomic_load_n(&countdown, __ATOMIC_SEQ_CST);

    while (left > 0) {
        if (__atomic_compare_exchange_n(&countdown, &left, left - 1, false,
                                        __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
            if (left == 1) {
                __atomic_add_fetch(&failures, 1, __ATOMIC_SEQ_CST);
                return true;
            }
            return false;
        }
    }
    return false;
}
#else
void base_alloc_fail_after(long n)
{
    (void)n;
}

long base_alloc_failures(void)
{
    return 0;
}

static bool inject(void)
{
    return false;
}
#endif

strata_err strata_set_alloc_hooks(const strata_alloc_hooks *h)
{
    /* The argument first: a bad one is wrong whenever it is given. */
    if (h && (!h->malloc_fn || !h->realloc_fn || !h->free_fn))
        return base_fail(STRATA_EINVAL,
                         "strata_set_alloc_hooks: %s is NULL (hooks need "
                         "malloc_fn, realloc_fn and free_fn)",
                         !h->malloc_fn    ? "malloc_fn"
                         : !h->realloc_fn ? "realloc_fn"
                                          : "free_fn");
    if (__atomic_load_n(&hooks_locked, __ATOMIC_ACQUIRE))
        return base_fail(STRATA_ESTATE,
                         "allocation hooks must be set before any strata "
                         "object is created");
    if (!h) {
        hooks_set = false;
        return STRATA_OK;
    }
    hooks = *h;
    hooks_set = true;
    return STRATA_OK;
}

void base_alloc_lock_hooks(void)
{
    __atomic_store_n(&hooks_locked, true, __ATOMIC_RELEASE);
}

void *base_malloc(size_t size)
{
    if (inject())
        return NULL;
    if (hooks_set)
        return hooks.malloc_fn(size ? size : 1, hooks.ctx);
    return malloc(size ? size : 1);
}

void *base_calloc(size_t n, size_t size)
{
    void *p;

    if (size && n > (size_t)-1 / size)
        return NULL;
    p = base_malloc(n * size);
    if (p)
        memset(p, 0, n * size);
    return p;
}

void *base_realloc(void *ptr, size_t size)
{
    if (inject())
        return NULL;
    if (hooks_set)
        return hooks.realloc_fn(ptr, size ? size : 1, hooks.ctx);
    return realloc(ptr, size ? size : 1);
}

void base_free(void *ptr)
{
    if (!ptr)
        return;
    if (hooks_set)
        hooks.free_fn(ptr, hooks.ctx);
    else
        free(ptr);
}

char *base_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = base_malloc(n);

    if (p)
        memcpy(p, s, n);
    return p;
}

char *base_strdup_opt(const char *s, bool *fail)
{
    char *d;

    if (!s)
        return NULL;
    d = base_strdup(s);
    if (!d)
        *fail = true;
    return d;
}
