/* A paged plan holds only for the store it was made from: rows cached
 * from it, or read again, would belong to another graph. The checks both
 * the chips (before cached rows are used, and on the files they open) and
 * strata_halo_forward_pages make. */
#include "base/err.h"
#include "halo_exec_int.h"

#include <string.h>

static strata_err changed(const char *who)
{
    return base_fail(STRATA_EINVAL,
                     "%s: the store changed since the plan was made", who);
}

strata_err halo_store_same(const void *plan, const char *who)
{
    const struct halo_plan_hdr *hdr = plan;
    struct graph_gfg_stamp now;
    strata_err err;

    if (hdr->gfg_path_off == 0)
        return STRATA_OK;
    err = graph_gfg_stamp_at((const char *)plan + hdr->gfg_path_off, &now);
    if (!err && memcmp(&now, &hdr->store, sizeof(now)) != 0)
        err = changed(who);
    return err;
}

strata_err halo_store_open(const void *plan, const char *who, strata_gfg **out)
{
    const struct halo_plan_hdr *hdr = plan;
    struct graph_gfg_stamp now;
    strata_err err =
        strata_gfg_open((const char *)plan + hdr->gfg_path_off, out);

    if (!err)
        err = graph_gfg_stamp_of(*out, &now);
    if (!err && memcmp(&now, &hdr->store, sizeof(now)) != 0)
        err = changed(who);
    if (err) {
        strata_gfg_close(*out);
        *out = NULL;
    }
    return err;
}
