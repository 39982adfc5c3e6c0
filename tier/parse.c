/* Tier names and aliases, byte sizes with IEC units, budget strings. */
#include "base/err.h"
#include "tier_int.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

static const char *const names[STRATA_TIER_COUNT] = {
    [STRATA_TIER_DEVICE] = "device",
    [STRATA_TIER_HOST_PINNED] = "host-pinned",
    [STRATA_TIER_RAM] = "ram",
    [STRATA_TIER_NVME] = "nvme",
};

static const struct {
    const char *alias;
    strata_tier tier;
} aliases[] = {
    {"hbm", STRATA_TIER_DEVICE},
    {"pinned_ram", STRATA_TIER_HOST_PINNED},
    {"host", STRATA_TIER_RAM},
    {"ssd", STRATA_TIER_NVME},
};

/* Tiers the model knows but no runtime allocates, and why. */
static const struct {
    const char *name;
    const char *why;
} unallocatable[] = {
    {"register", "register storage belongs to generated kernels"},
    {"shared", "shared (on-chip) storage belongs to generated kernels"},
    {"remote", "remote data is managed by its transport"},
};

const char *strata_tier_name(strata_tier tier)
{
    if ((unsigned)tier >= STRATA_TIER_COUNT)
        return NULL;
    return names[tier];
}

strata_err strata_tier_parse(const char *name, strata_tier *out)
{
    if (!name)
        return base_fail_null("strata_tier_parse", "name");
    if (!out)
        return base_fail_null("strata_tier_parse", "out");
    for (int i = 0; i < STRATA_TIER_COUNT; i++) {
        if (strcmp(name, names[i]) == 0) {
            *out = (strata_tier)i;
            return STRATA_OK;
        }
    }
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++) {
        if (strcmp(name, aliases[i].alias) == 0) {
            *out = aliases[i].tier;
            return STRATA_OK;
        }
    }
    for (size_t i = 0; i < sizeof(unallocatable) / sizeof(unallocatable[0]);
         i++) {
        if (strcmp(name, unallocatable[i].name) == 0)
            return base_fail(STRATA_EINVAL,
                             "tier '%s' is known but not allocatable: %s", name,
                             unallocatable[i].why);
    }
    return base_fail(STRATA_EINVAL,
                     "unknown tier '%.64s' (tiers: device, host-pinned, ram, "
                     "nvme; aliases hbm, pinned_ram, host, ssd)",
                     name);
}

static const struct {
    const char *unit;
    unsigned shift;
} iec[] = {
    {"B", 0}, {"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40},
};

static const char *const si_units[] = {"kB", "KB", "MB", "GB", "TB",
                                       "PB", "K",  "M",  "G",  "T"};

/* The reason a unit is refused. */
static strata_err bad_unit(const char *text, const char *unit, size_t len)
{
    for (size_t i = 0; i < sizeof(si_units) / sizeof(si_units[0]); i++)
        if (strlen(si_units[i]) == len && strncmp(unit, si_units[i], len) == 0)
            return base_fail(STRATA_EINVAL,
                             "size '%.64s': '%.*s' is not an IEC unit "
                             "(1000-based SI units are refused; use B, KiB, "
                             "MiB, GiB or TiB)",
                             text, (int)len, unit);
    return base_fail(STRATA_EINVAL,
                     "size '%.64s': unknown unit '%.*s' (use B, KiB, MiB, "
                     "GiB or TiB)",
                     text, (int)(len > 16 ? 16 : len), unit);
}

static strata_err parse_unit(const char *text, const char *p, unsigned *shift)
{
    size_t len = 0;

    while (p[len] && !isspace((unsigned char)p[len]))
        len++;
    if (len == 0) {
        *shift = 0;
        return STRATA_OK;
    }
    for (size_t i = 0; i < sizeof(iec) / sizeof(iec[0]); i++) {
        if (strlen(iec[i].unit) == len && strncmp(p, iec[i].unit, len) == 0) {
            *shift = iec[i].shift;
            break;
        }
        if (i + 1 == sizeof(iec) / sizeof(iec[0]))
            return bad_unit(text, p, len);
    }
    p += len;
    while (isspace((unsigned char)*p))
        p++;
    if (*p)
        return base_fail(STRATA_EINVAL,
                         "size '%.64s': text after the unit ('%.16s')", text,
                         p);
    return STRATA_OK;
}

/* Refusals with a reason for what is not a plain digit string. */
static strata_err not_a_number(const char *text, const char *p)
{
    if (*p == '-')
        return base_fail(STRATA_EINVAL, "size '%.64s' is negative", text);
    if (*p == '+')
        return base_fail(STRATA_EINVAL, "size '%.64s': a sign is not allowed",
                         text);
    if (strncasecmp(p, "true", 4) == 0 || strncasecmp(p, "false", 5) == 0)
        return base_fail(STRATA_EINVAL,
                         "size '%.64s' is a boolean, not a byte count", text);
    if (*p == '\0')
        return base_fail(STRATA_EINVAL, "size '%.64s' is empty", text);
    if (*p == '.')
        return base_fail(STRATA_EINVAL,
                         "size '%.64s' is a fraction; sizes are whole bytes",
                         text);
    return base_fail(STRATA_EINVAL,
                     "size '%.64s' does not start with a decimal integer",
                     text);
}

strata_err strata_parse_bytes(const char *text, uint64_t *out)
{
    const char *p = text;
    uint64_t v = 0;
    unsigned shift = 0;
    strata_err err;

    if (!text)
        return base_fail_null("strata_parse_bytes", "text");
    if (!out)
        return base_fail_null("strata_parse_bytes", "out");
    while (isspace((unsigned char)*p))
        p++;
    if (!isdigit((unsigned char)*p))
        return not_a_number(text, p);
    for (; isdigit((unsigned char)*p); p++) {
        unsigned d = (unsigned)(*p - '0');

        if (v > (UINT64_MAX - d) / 10)
            return base_fail(STRATA_EINVAL,
                             "size '%.64s' is past 2^64 - 1 bytes", text);
        v = v * 10 + d;
    }
    if (*p == '.' || *p == 'e' || *p == 'E')
        return base_fail(STRATA_EINVAL,
                         "size '%.64s' is a fraction or exponent; sizes are "
                         "whole bytes",
                         text);
    while (isspace((unsigned char)*p))
        p++;
    err = parse_unit(text, p, &shift);
    if (err)
        return err;
    if (shift && v > (UINT64_MAX >> shift))
        return base_fail(STRATA_EINVAL, "size '%.64s' is past 2^64 - 1 bytes",
                         text);
    *out = v << shift;
    return STRATA_OK;
}

/* One "tier=size" item of length len at item into budgets. */
static strata_err parse_item(const char *item, size_t len,
                             uint64_t budgets[STRATA_TIER_COUNT])
{
    char buf[128];
    char *eq, *tier_end;
    const char *tier_start = buf;
    strata_tier tier;
    uint64_t bytes;
    strata_err err;

    if (len >= sizeof(buf))
        return base_fail(STRATA_EINVAL, "budget item '%.32s...' is too long",
                         item);
    memcpy(buf, item, len);
    buf[len] = '\0';
    eq = strchr(buf, '=');
    if (!eq)
        return base_fail(STRATA_EINVAL, "budget item '%s' is not tier=size",
                         buf);
    *eq = '\0';
    while (isspace((unsigned char)*tier_start))
        tier_start++;
    tier_end = eq;
    while (tier_end > tier_start && isspace((unsigned char)tier_end[-1]))
        *--tier_end = '\0';
    err = strata_tier_parse(tier_start, &tier);
    if (!err)
        err = strata_parse_bytes(eq + 1, &bytes);
    if (err) {
        base_errmsg_prefix("budgets");
        return err;
    }
    if (budgets[tier] != TIER_NO_BUDGET)
        return base_fail(STRATA_EINVAL,
                         "budgets: tier '%s' is given twice (aliases name "
                         "the same tier)",
                         tier_start);
    budgets[tier] = bytes;
    return STRATA_OK;
}

strata_err tier_parse_budgets(const char *text,
                              uint64_t budgets_out[STRATA_TIER_COUNT])
{
    uint64_t b[STRATA_TIER_COUNT];
    const char *p = text;

    for (int i = 0; i < STRATA_TIER_COUNT; i++)
        b[i] = TIER_NO_BUDGET;
    while (p && *p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        size_t k = 0;
        strata_err err;

        while (k < len && isspace((unsigned char)p[k]))
            k++;
        if (k == len) {
            if (!comma && p != text)
                break; /* a trailing comma */
            return base_fail(STRATA_EINVAL, "budgets '%.64s': an empty item",
                             text);
        }
        err = parse_item(p, len, b);
        if (err)
            return err;
        p = comma ? comma + 1 : p + len;
    }
    memcpy(budgets_out, b, sizeof(b));
    return STRATA_OK;
}
