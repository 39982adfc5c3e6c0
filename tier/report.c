/* The memory report as JSON. */
#include "base/err.h"
#include "tier_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

struct out {
    char *buf;
    size_t cap, len;
};

static void put(struct out *o, const char *fmt, ...) STRATA_PRINTF(2, 3);

static void put(struct out *o, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(o->len < o->cap ? o->buf + o->len : NULL,
                  o->len < o->cap ? o->cap - o->len : 0, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->len += (size_t)n;
}

static void put_tier(struct out *o, const strata_tier_usage *u)
{
    put(o,
        "{\"live\":%llu,\"peak\":%llu,\"budget\":", (unsigned long long)u->live,
        (unsigned long long)u->peak);
    if (u->budget == TIER_NO_BUDGET)
        put(o, "null");
    else
        put(o, "%llu", (unsigned long long)u->budget);
    put(o, ",\"instances\":%llu}", (unsigned long long)u->instances);
}

static void put_moved(struct out *o, const strata_tier_report *r)
{
    bool first = true;
    unsigned long long total = 0;

    put(o, "\"moved\":{");
    for (int s = 0; s < STRATA_TIER_COUNT; s++) {
        for (int d = 0; d < STRATA_TIER_COUNT; d++) {
            if (!r->moved[s][d])
                continue;
            put(o, "%s\"%s->%s\":%llu", first ? "" : ",",
                strata_tier_name((strata_tier)s),
                strata_tier_name((strata_tier)d),
                (unsigned long long)r->moved[s][d]);
            total += r->moved[s][d];
            first = false;
        }
    }
    put(o, "},\"bytes_moved\":%llu", total);
}

strata_err strata_tier_report_json(const strata_tier_report *r, char *buf,
                                   size_t cap, size_t *len_out)
{
    struct out o = {buf, buf ? cap : 0, 0};

    if (!r)
        return base_fail_null("strata_tier_report_json", "r");
    if (!len_out)
        return base_fail_null("strata_tier_report_json", "len_out");
    if (!buf && cap)
        return base_fail_null("strata_tier_report_json", "buf");
    put(&o, "{\"schema\":\"strata.tier-report.v1\",\"tiers\":{");
    for (int i = 0; i < STRATA_TIER_COUNT; i++) {
        put(&o, "%s\"%s\":", i ? "," : "", strata_tier_name((strata_tier)i));
        put_tier(&o, &r->tiers[i]);
    }
    put(&o, "},");
    put_moved(&o, r);
    put(&o,
        ",\"transfers_done\":%llu,\"transfers_failed\":%llu,\"spills\":%llu,"
        "\"restores\":%llu}",
        (unsigned long long)r->transfers_done,
        (unsigned long long)r->transfers_failed, (unsigned long long)r->spills,
        (unsigned long long)r->restores);
    if (buf && o.len >= cap) {
        if (cap)
            buf[0] = '\0';
        return base_fail(
            STRATA_ENOMEM,
            "strata_tier_report_json: %zu bytes needed, cap is %zu", o.len + 1,
            cap);
    }
    *len_out = o.len;
    return STRATA_OK;
}
