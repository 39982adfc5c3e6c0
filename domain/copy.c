/* Staging copies between host buffers and a member's window. Each copy is
 * a control frame that carries the host range as an argument, so it is
 * ordered after earlier tasks that write (or, for copy_from, use) those
 * bytes, and after the chip's earlier work. */
#include "base/err.h"
#include "domain_int.h"

#include <string.h>

static strata_err locate(const strata_domain *d, int chip, const char *buffer,
                         size_t offset, size_t nbytes, uint32_t *rank_out,
                         size_t *win_off_out)
{
    const strata_comm_buffer_info *b = NULL;
    uint32_t r;

    if (__atomic_load_n(&d->released, __ATOMIC_ACQUIRE))
        return base_fail(STRATA_ESTATE, "domain '%s' is released", d->name);
    for (r = 0; r < d->n && d->chips[r] != chip; r++)
        ;
    if (r == d->n)
        return base_fail(STRATA_ENOENT,
                         "chip %d is not a member of domain '%s'", chip,
                         d->name);
    for (size_t i = 0; i < d->num_buffers; i++)
        if (strcmp(d->buffers[i].name, buffer) == 0)
            b = &d->buffers[i];
    if (!b)
        return base_fail(STRATA_EINVAL, "domain '%s' has no buffer '%s'",
                         d->name, buffer);
    if (nbytes == 0)
        return base_fail(STRATA_EINVAL,
                         "domain '%s': nbytes is 0: a copy moves at least "
                         "one byte",
                         d->name);
    if (offset > b->nbytes || nbytes > b->nbytes - offset)
        return base_fail(STRATA_EINVAL,
                         "domain '%s': %zu bytes at offset %zu: outside "
                         "buffer '%s' of %zu bytes",
                         d->name, nbytes, offset, buffer, b->nbytes);
    *rank_out = r;
    *win_off_out = b->offset + offset;
    return STRATA_OK;
}

static strata_err copy(strata_orch *o, const strata_domain *d, int chip,
                       const char *buffer, size_t offset, strata_buffer *host,
                       size_t host_offset, size_t nbytes, bool to)
{
    struct orch_ctl c;
    struct orch_ctl *cp = &c;
    strata_args *a;
    size_t win_off = 0;
    uint32_t rank = 0;
    const char *fn = to ? "strata_orch_copy_to" : "strata_orch_copy_from";
    strata_err err;

    if (!o || !d || !buffer || !host)
        return base_fail_null(fn, !o        ? "orch"
                                  : !d      ? "d"
                                  : !buffer ? "buffer"
                                  : to      ? "src"
                                            : "dst");
    err = orch_usable(o, fn);
    if (!err)
        err = locate(d, chip, buffer, offset, nbytes, &rank, &win_off);
    if (err)
        return err;
    err = strata_args_create(&a);
    if (err)
        return err;
    err = strata_args_add_tensor(a, host, host_offset, STRATA_U8, 1, &nbytes,
                                 to ? STRATA_IN : STRATA_OUT);
    if (err) {
        strata_args_destroy(a);
        return base_fail(STRATA_EINVAL, "window copy: host range: %s",
                         strata_errmsg());
    }
    memset(&c, 0, sizeof(c));
    c.op = to ? MBX_CTL_COPY_TO_WINDOW : MBX_CTL_COPY_FROM_WINDOW;
    c.ordered = true;
    c.arg[0] = d->alloc_id;
    c.arg[1] = win_off;
    c.arg[2] = nbytes;
    err = orch_control_post(d->sched, o, d->eps[rank], &c, a);
    strata_args_destroy(a);
    if (err == STRATA_EINVAL)
        base_errmsg_prefix("%s: %s", fn, to ? "src" : "dst");
    if (!err)
        err = orch_control_wait(d->sched, &cp, 1);
    return err;
}

strata_err strata_orch_copy_to(strata_orch *o, const strata_domain *d, int chip,
                               const char *buffer, size_t offset,
                               const strata_buffer *src, size_t src_offset,
                               size_t nbytes)
{
    /* The source is only read; the argument list's type is shared with
     * writes. */
    return copy(o, d, chip, buffer, offset, (strata_buffer *)(uintptr_t)src,
                src_offset, nbytes, true);
}

strata_err strata_orch_copy_from(strata_orch *o, const strata_domain *d,
                                 int chip, const char *buffer, size_t offset,
                                 strata_buffer *dst, size_t dst_offset,
                                 size_t nbytes)
{
    return copy(o, d, chip, buffer, offset, dst, dst_offset, nbytes, false);
}
