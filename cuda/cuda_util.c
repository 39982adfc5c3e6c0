/* CUresult names and the chip-to-device map: no CUDA header needed. */
#include "cuda_util.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The codes a chip meets when it starts or completes a task. The numbers
 * are cuda.h's (cuda_driver.c checks them against it at compile time). */
#define CUDA_RESULTS(X)                                                        \
    X(0, "CUDA_SUCCESS", NULL)                                                 \
    X(1, "CUDA_ERROR_INVALID_VALUE", NULL)                                     \
    X(2, "CUDA_ERROR_OUT_OF_MEMORY", NULL)                                     \
    X(3, "CUDA_ERROR_NOT_INITIALIZED", NULL)                                   \
    X(4, "CUDA_ERROR_DEINITIALIZED", NULL)                                     \
    X(34, "CUDA_ERROR_STUB_LIBRARY",                                           \
      "the libcuda found is the toolkit's link stub, not a driver")            \
    X(36, "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER",                             \
      "the installed driver is older than the call needs")                     \
    X(46, "CUDA_ERROR_DEVICE_UNAVAILABLE",                                     \
      "the device is busy or in exclusive-process mode")                       \
    X(100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is visible")        \
    X(101, "CUDA_ERROR_INVALID_DEVICE", NULL)                                  \
    X(201, "CUDA_ERROR_INVALID_CONTEXT", NULL)                                 \
    X(304, "CUDA_ERROR_OPERATING_SYSTEM", NULL)                                \
    X(400, "CUDA_ERROR_INVALID_HANDLE", NULL)                                  \
    X(700, "CUDA_ERROR_ILLEGAL_ADDRESS", NULL)                                 \
    X(701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", NULL)                         \
    X(702, "CUDA_ERROR_LAUNCH_TIMEOUT", NULL)                                  \
    X(709, "CUDA_ERROR_CONTEXT_IS_DESTROYED", NULL)                            \
    X(710, "CUDA_ERROR_ASSERT", NULL)                                          \
    X(715, "CUDA_ERROR_ILLEGAL_INSTRUCTION", NULL)                             \
    X(716, "CUDA_ERROR_MISALIGNED_ADDRESS", NULL)                              \
    X(719, "CUDA_ERROR_LAUNCH_FAILED", NULL)                                   \
    X(800, "CUDA_ERROR_NOT_PERMITTED", NULL)                                   \
    X(801, "CUDA_ERROR_NOT_SUPPORTED", NULL)                                   \
    X(802, "CUDA_ERROR_SYSTEM_NOT_READY",                                      \
      "the driver's system services (fabric manager) are not running")         \
    X(803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",                                \
      "the kernel module and the user-mode driver differ in version")          \
    X(999, "CUDA_ERROR_UNKNOWN", NULL)

struct result_row {
    int code;
    const char *name, *hint;
};

static const struct result_row results[] = {
#define CUDA_RESULT_ROW(code, name, hint) {code, name, hint},
    CUDA_RESULTS(CUDA_RESULT_ROW)
#undef CUDA_RESULT_ROW
};

static const struct result_row *find_row(int code)
{
    for (size_t i = 0; i < sizeof(results) / sizeof(results[0]); i++)
        if (results[i].code == code)
            return &results[i];
    return NULL;
}

const char *cuda_result_name(int code)
{
    const struct result_row *row = find_row(code);

    return row ? row->name : NULL;
}

const char *cuda_result_hint(int code)
{
    const struct result_row *row = find_row(code);

    return row ? row->hint : NULL;
}

strata_err cuda_result_errcode(int code)
{
    switch (code) {
    case 0:
        return STRATA_OK;
    case 2: /* out of memory */
        return STRATA_ENOMEM;
    case 1:   /* invalid value */
    case 101: /* invalid device */
        return STRATA_EINVAL;
    case 3:   /* not initialized */
    case 34:  /* stub library */
    case 36:  /* call requires newer driver */
    case 46:  /* device unavailable */
    case 100: /* no device */
    case 801: /* not supported */
    case 802: /* system not ready */
    case 803: /* system driver mismatch */
        return STRATA_ENOTSUP;
    default:
        return STRATA_EIO;
    }
}

/* Parses a decimal int >= 0 from [s, end), spaces around allowed. */
static bool parse_nonneg(const char *s, const char *end, int *out)
{
    char buf[16];
    char *stop;
    long v;

    while (s < end && isspace((unsigned char)*s))
        s++;
    while (end > s && isspace((unsigned char)end[-1]))
        end--;
    if (s == end || end - s >= (long)sizeof(buf) || !isdigit((unsigned char)*s))
        return false;
    memcpy(buf, s, (size_t)(end - s));
    buf[end - s] = '\0';
    errno = 0;
    v = strtol(buf, &stop, 10);
    if (errno || *stop || v > INT_MAX)
        return false;
    *out = (int)v;
    return true;
}

strata_err cuda_device_map_lookup(const char *map, int chip_id,
                                  int *ordinal_out, char *why, size_t cap)
{
    const char *item = map;
    int ordinal = chip_id;
    bool named = false;

    while (item && *item) {
        const char *comma = strchr(item, ',');
        const char *end = comma ? comma : item + strlen(item);
        const char *eq = memchr(item, '=', (size_t)(end - item));
        int chip, dev;

        if (!eq || !parse_nonneg(item, eq, &chip) ||
            !parse_nonneg(eq + 1, end, &dev)) {
            snprintf(why, cap,
                     "STRATA_CUDA_DEVICES: '%.*s' is not chip=ordinal "
                     "(decimal ints >= 0, comma-separated)",
                     (int)(end - item), item);
            return STRATA_EINVAL;
        }
        if (chip == chip_id && named) {
            snprintf(why, cap, "STRATA_CUDA_DEVICES: chip %d is named twice",
                     chip);
            return STRATA_EINVAL;
        }
        if (chip == chip_id) {
            ordinal = dev;
            named = true;
        }
        item = comma ? comma + 1 : NULL;
    }
    *ordinal_out = ordinal;
    return STRATA_OK;
}
