/* strata_register_*: name -> function, identified by SHA-256("kind:name"). */
#include "chip/registry.h"
#include "base/alloc.h"
#include "base/digest.h"
#include "base/err.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static struct chip_callable entries[CHIP_REGISTRY_MAX];
static uint32_t count; /* published with release after an entry is full */
static pthread_mutex_t writer = PTHREAD_MUTEX_INITIALIZER;

/* Names of callables this process only named (strata_callable_by_name:
 * an L4 naming what its remote nodes run), for messages. Append-only and
 * lock-free (a fork may happen while another thread adds one); full, it
 * names no more, and a racing pair may both add one name. */
struct known_name {
    uint8_t digest[32];
    char name[CHIP_NAME_MAX];
    uint32_t ready; /* published (release) once the entry is written */
};
static struct known_name known[CHIP_REGISTRY_MAX];
static uint32_t known_claimed;

static const char *known_name(const uint8_t digest[32])
{
    uint32_t n = __atomic_load_n(&known_claimed, __ATOMIC_ACQUIRE);

    n = n < CHIP_REGISTRY_MAX ? n : CHIP_REGISTRY_MAX;
    for (uint32_t i = 0; i < n; i++)
        if (__atomic_load_n(&known[i].ready, __ATOMIC_ACQUIRE) &&
            memcmp(known[i].digest, digest, 32) == 0)
            return known[i].name;
    return NULL;
}

static void remember_name(const strata_callable *c, const char *name)
{
    uint32_t i;

    if (chip_registry_find(c->digest) || known_name(c->digest))
        return;
    /* Claim a slot, never past the end (a counter that only grew would
     * wrap after 2^32 misses and hand out slot 0 again). */
    i = __atomic_load_n(&known_claimed, __ATOMIC_ACQUIRE);
    do {
        if (i >= CHIP_REGISTRY_MAX)
            return;
    } while (!__atomic_compare_exchange_n(&known_claimed, &i, i + 1, false,
                                          __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
    memcpy(known[i].digest, c->digest, 32);
    snprintf(known[i].name, sizeof(known[i].name), "%s", name);
    __atomic_store_n(&known[i].ready, 1, __ATOMIC_RELEASE);
}

const char *chip_callable_kind_name(uint32_t kind)
{
    switch (kind) {
    case STRATA_CALLABLE_KERNEL:
        return "kernel";
    case STRATA_CALLABLE_ORCH:
        return "orch";
    case STRATA_CALLABLE_SUB:
        return "sub";
    }
    return "unknown";
}

uint32_t chip_registry_count(void)
{
    return __atomic_load_n(&count, __ATOMIC_ACQUIRE);
}

const struct chip_callable *chip_registry_find(const uint8_t digest[32])
{
    uint32_t n = chip_registry_count();

    for (uint32_t i = 0; i < n; i++)
        if (memcmp(entries[i].digest, digest, 32) == 0)
            return &entries[i];
    return NULL;
}

static strata_err digest_of(uint32_t kind, const char *name, strata_callable *c)
{
    char key[CHIP_NAME_MAX + 16];
    size_t len;

    if (kind < STRATA_CALLABLE_KERNEL || kind > STRATA_CALLABLE_SUB)
        return base_fail(STRATA_EINVAL,
                         "strata_callable_by_name: kind %u is not a "
                         "strata_callable_kind",
                         kind);
    if (!name)
        return base_fail_null("strata_callable_by_name", "name");
    len = strlen(name);
    if (len == 0 || len >= CHIP_NAME_MAX)
        return base_fail(STRATA_EINVAL,
                         "strata_callable_by_name: name must be 1..%d bytes",
                         CHIP_NAME_MAX - 1);
    memset(c, 0, sizeof(*c));
    c->kind = kind;
    snprintf(key, sizeof(key), "%s:%s", chip_callable_kind_name(kind), name);
    return base_sha256(key, strlen(key), c->digest);
}

strata_err strata_callable_by_name(strata_callable_kind kind, const char *name,
                                   strata_callable *out)
{
    strata_callable c;
    strata_err err;

    if (!out)
        return base_fail_null("strata_callable_by_name", "out");
    err = digest_of((uint32_t)kind, name, &c);
    if (!err) {
        remember_name(&c, name);
        *out = c;
    }
    return err;
}

static strata_err register_fn(uint32_t kind, const char *name, void (*fn)(void),
                              strata_callable *out)
{
    char key[CHIP_NAME_MAX + 16];
    strata_callable c = {.kind = kind};
    const struct chip_callable *old;
    strata_err err = STRATA_OK;
    size_t len;

    if (!name || !fn || !out)
        return base_fail(STRATA_EINVAL, "strata_register_%s: %s is NULL",
                         chip_callable_kind_name(kind),
                         !name ? "name"
                         : !fn ? "fn"
                               : "out");
    len = strlen(name);
    if (len == 0 || len >= CHIP_NAME_MAX)
        return base_fail(STRATA_EINVAL,
                         "strata_register_%s: name must be 1..%d bytes",
                         chip_callable_kind_name(kind), CHIP_NAME_MAX - 1);
    snprintf(key, sizeof(key), "%s:%s", chip_callable_kind_name(kind), name);
    err = base_sha256(key, strlen(key), c.digest);
    if (err)
        return err;
    pthread_mutex_lock(&writer);
    old = chip_registry_find(c.digest);
    if (old && old->fn != fn) {
        err = base_fail(STRATA_EEXIST,
                        "%s '%s' is already registered with another function",
                        chip_callable_kind_name(kind), name);
    } else if (!old && count == CHIP_REGISTRY_MAX) {
        err = base_fail(STRATA_ENOMEM, "more than %d callables registered",
                        CHIP_REGISTRY_MAX);
    } else if (!old) {
        struct chip_callable *e = &entries[count];

        e->kind = kind;
        e->seq = count;
        e->fn = fn;
        memcpy(e->digest, c.digest, 32);
        memcpy(e->name, name, len + 1);
        __atomic_store_n(&count, count + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&writer);
    if (!err)
        *out = c;
    return err;
}

/* Function pointers of different types are stored as void (*)(void) and
 * cast back by kind before the call. */
strata_err strata_register_kernel(const char *name, strata_kernel_fn fn,
                                  strata_callable *out)
{
    return register_fn(STRATA_CALLABLE_KERNEL, name, (void (*)(void))fn, out);
}

strata_err strata_register_orch(const char *name, strata_orch_fn fn,
                                strata_callable *out)
{
    return register_fn(STRATA_CALLABLE_ORCH, name, (void (*)(void))fn, out);
}

strata_err strata_register_sub(const char *name, strata_sub_fn fn,
                               strata_callable *out)
{
    return register_fn(STRATA_CALLABLE_SUB, name, (void (*)(void))fn, out);
}

const char *strata_callable_name(strata_callable c)
{
    const struct chip_callable *e = chip_registry_find(c.digest);

    return e ? e->name : known_name(c.digest);
}

char *strata_callable_digest_hex(strata_callable c, char buf[65])
{
    if (!buf)
        return NULL;
    for (int i = 0; i < 32; i++)
        snprintf(buf + 2 * i, 3, "%02x", c.digest[i]);
    return buf;
}
