/* The host side of STRATA_HALO_IN_PLACE: one task per rank naming the
 * whole input field and the rank's rows of the output, submitted as a
 * group; no domain, no exchange buffer (halo_inplace.c runs the rank). */
#include "base/err.h"
#include "halo_exec_int.h"

static strata_err rank_args(const strata_halo *h, uint32_t r, bool vjp,
                            strata_buffer *in, strata_buffer *out,
                            strata_args *a)
{
    const struct halo_rank_plan *rp =
        halo_plan_rank(strata_buffer_data(h->plan), r);
    strata_err err;

    err = halo_add_plan(a, h);
    if (!err)
        err = halo_add_stats(a, h, r);
    if (!err && h->num_rows > 0)
        err = halo_add_rows(a, h, in, 0, h->num_rows, STRATA_IN);
    if (!err && rp->owned_end > rp->owned_begin)
        err = halo_add_rows(a, h, out, rp->owned_begin, rp->owned_end,
                            STRATA_OUT);
    if (!err)
        err = strata_args_add_scalar(a, r);
    if (!err)
        err = strata_args_add_scalar(a, vjp ? 1 : 0);
    return err;
}

/* An in-place call's direction and fields. */
struct inplace_call {
    bool vjp;
    strata_buffer *in, *out;
};

static strata_err inplace_fill(const strata_halo *h, uint32_t r, strata_args *a,
                               void *ctx)
{
    const struct inplace_call *ic = ctx;

    return rank_args(h, r, ic->vjp, ic->in, ic->out, a);
}

strata_err halo_inplace_run(strata_orch *o, strata_halo *h, bool vjp,
                            strata_buffer *in, strata_buffer *out)
{
    struct inplace_call ic = {vjp, in, out};

    return halo_submit_ranks(o, h, halo_inplace_kernel(), inplace_fill, &ic);
}
