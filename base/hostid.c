/* Which machine this process runs on (base/hostid.h). */
#include "base/hostid.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BOOT_ID_PATH "/proc/sys/kernel/random/boot_id"

bool base_boot_id_valid(const char *s)
{
    size_t n = 0;

    for (; s[n]; n++) {
        char c = s[n];

        if (n >= BASE_BOOT_ID_MAX - 1 ||
            !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
              (c >= 'A' && c <= 'Z') || c == '-'))
            return false;
    }
    return n > 0;
}

static void read_boot_id(char *out, size_t cap)
{
    int fd = open(BOOT_ID_PATH, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, out, cap - 1) : -1;

    if (fd >= 0)
        close(fd);
    out[n > 0 ? n : 0] = '\0';
    out[strcspn(out, "\n")] = '\0';
    if (!base_boot_id_valid(out))
        out[0] = '\0';
}

#ifdef STRATA_TESTING
/* STRATA_TEST_HOST_ID="NAME/BOOT": a test's other host. */
static bool test_override(struct base_host_id *out)
{
    const char *v = getenv("STRATA_TEST_HOST_ID");
    const char *slash = v ? strchr(v, '/') : NULL;
    size_t len = slash ? (size_t)(slash - v) : 0;

    if (!slash || len == 0 || len >= sizeof(out->name) ||
        !base_boot_id_valid(slash + 1))
        return false;
    memcpy(out->name, v, len);
    out->name[len] = '\0';
    snprintf(out->boot, sizeof(out->boot), "%s", slash + 1);
    return true;
}
#endif

/* The boot id cannot change while this process lives: it is read once
 * (three system calls a global domain's allocation with remote members
 * paid per member). No lock: a fork may come at any time, and a caller
 * that finds the cache not ready yet reads the file itself. The host
 * name can change, and costs one call. */
static char boot_cache[BASE_BOOT_ID_MAX];
static int boot_state; /* 0 empty, 1 being filled, 2 ready (atomic) */

static void boot_id(char *out, size_t cap)
{
    int empty = 0;

    if (__atomic_load_n(&boot_state, __ATOMIC_ACQUIRE) == 2) {
        snprintf(out, cap, "%s", boot_cache);
        return;
    }
    read_boot_id(out, cap);
    if (__atomic_compare_exchange_n(&boot_state, &empty, 1, false,
                                    __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        snprintf(boot_cache, sizeof(boot_cache), "%s", out);
        __atomic_store_n(&boot_state, 2, __ATOMIC_RELEASE);
    }
}

void base_host_id(struct base_host_id *out)
{
    memset(out, 0, sizeof(*out));
#ifdef STRATA_TESTING
    if (test_override(out))
        return;
#endif
    if (gethostname(out->name, sizeof(out->name) - 1) != 0)
        out->name[0] = '\0';
    boot_id(out->boot, sizeof(out->boot));
}

bool base_host_id_same(const struct base_host_id *a,
                       const struct base_host_id *b)
{
    return a->boot[0] && a->name[0] && strcmp(a->boot, b->boot) == 0 &&
           strcmp(a->name, b->name) == 0;
}
