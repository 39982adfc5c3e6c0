/* Control frames in the chip process: buffers, the base communicator,
 * windows and window copies. They share the ring with tasks, so each runs
 * after every task posted before it. */
#include "base/alloc.h"
#include "base/err.h"
#include "chip_int.h"
#include "watch.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static strata_err need(const strata_chip *chip, bool have, const char *what)
{
    if (!have)
        return base_fail(STRATA_ENOTSUP, "backend %s does not support %s",
                         chip->cfg->ops->name, what);
    return STRATA_OK;
}

static strata_err prepare(strata_chip *chip, struct mbx_frame *f)
{
    const struct chip_backend_ops *ops = chip->cfg->ops;
    struct chip_window_req req = {
        .alloc_id = f->arg[0],
        .rank = (uint32_t)f->arg[1],
        .rank_count = (uint32_t)f->arg[2],
        .window_size = f->arg[3],
        .creator_pid = chip->cfg->parent,
    };
    struct chip_window_desc desc;
    strata_err err = need(chip, ops->window_prepare != NULL, "windows");

    if (!err)
        err = ops->window_prepare(chip->state, &req, &desc);
    if (err)
        return err;
    /* The reply travels back in the frame's args area. */
    memcpy(f->args, &desc, sizeof(desc));
    f->args_len = sizeof(desc);
    return STRATA_OK;
}

/* Releases the windows of alloc_id after err, keeping err's message. */
static strata_err undo(strata_chip *chip, uint64_t alloc_id, strata_err err)
{
    char msg[STRATA_ERRMSG_MAX];

    snprintf(msg, sizeof(msg), "%s", strata_errmsg());
    if (chip->cfg->ops->window_release(chip->state, alloc_id) != STRATA_OK)
        snprintf(msg + strlen(msg), sizeof(msg) - strlen(msg),
                 " (and the windows could not be released)");
    return base_fail(err, "%s", msg);
}

/* Watches the domain's control page over the n windows just imported,
 * if the worker made one (domain/domain.c; a node's exchange makes none):
 * a wait on them then ends when a member is lost. On failure the windows
 * are released again. */
static strata_err watch_imported(strata_chip *chip, uint64_t alloc_id,
                                 uint32_t n, uint64_t device_ctx)
{
    const struct chip_backend_ops *ops = chip->cfg->ops;
    struct chip_window_req req = {.alloc_id = alloc_id,
                                  .rank_count = n,
                                  .creator_pid = chip->cfg->parent};
    const strata_comm_context *cc =
        ops->comm_context ? ops->comm_context(chip->state, device_ctx) : NULL;
    char name[CHIP_WINDOW_HANDLE_MAX];
    struct chip_domain_ctl *ctl = NULL;
    uintptr_t *bases;
    strata_err err;

    if (!cc || !chip_domain_ctl_name(ops, &req, name, sizeof(name)))
        return STRATA_OK;
    err = chip_domain_ctl_map(name, false, &ctl);
    if (err == STRATA_ENOENT)
        return STRATA_OK;
    bases = err ? NULL : base_calloc(n, sizeof(*bases));
    if (!err && !bases) {
        chip_domain_ctl_unmap(ctl);
        err = base_fail(STRATA_ENOMEM, "out of memory watching %u windows", n);
    }
    for (uint32_t r = 0; !err && r < n; r++)
        bases[r] = (uintptr_t)cc->window_base[r];
    if (!err)
        err = chip_watch_add(alloc_id, ctl, bases, n, cc->window_size);
    base_free(bases);
    return err ? undo(chip, alloc_id, err) : STRATA_OK;
}

static strata_err import(strata_chip *chip, struct mbx_frame *f)
{
    const struct chip_backend_ops *ops = chip->cfg->ops;
    uint32_t n = (uint32_t)f->arg[2];
    struct chip_window_import_out out;
    strata_err err = need(chip, ops->window_import != NULL, "windows");

    if (err)
        return err;
    if (f->staged_len != (uint64_t)n * sizeof(struct chip_window_desc) ||
        f->staged_len > MBX_STAGING_SIZE)
        return base_fail(STRATA_EPROTO,
                         "window import: %llu staged bytes for %u ranks",
                         (unsigned long long)f->staged_len, n);
    err = ops->window_import(
        chip->state, f->arg[0],
        (const struct chip_window_desc *)(const void *)chip->cfg->mbx->staging,
        n, &out);
    if (!err)
        err = watch_imported(chip, f->arg[0], n, out.device_ctx);
    if (err)
        return err;
    f->arg[0] = out.device_ctx;
    f->arg[1] = out.local_base;
    return STRATA_OK;
}

/* The bytes [arg[1], arg[1] + arg[2]) of this chip's window arg[0]. */
static strata_err window_span(strata_chip *chip, const struct mbx_frame *f,
                              char **out)
{
    const struct chip_backend_ops *ops = chip->cfg->ops;
    size_t size = 0;
    char *win;
    strata_err err = need(chip, ops->window_local != NULL, "windows");

    if (err)
        return err;
    win = ops->window_local(chip->state, f->arg[0], &size);
    if (!win)
        return base_fail(STRATA_ENOENT,
                         "chip %d has not mapped this domain's windows "
                         "(it could not, or the domain is released)",
                         chip->cfg->id);
    if (f->arg[1] > size || f->arg[2] > size - f->arg[1])
        return base_fail(STRATA_EINVAL,
                         "a copy of %llu bytes at offset %llu is outside "
                         "chip %d's %zu-byte window",
                         (unsigned long long)f->arg[2],
                         (unsigned long long)f->arg[1], chip->cfg->id, size);
    *out = win + f->arg[1];
    return STRATA_OK;
}

/* n bytes into a window at span, or out of it: the backend's copies when
 * it has them (sim's are memcpy, cuda's cuMemcpy*), else memcpy. */
static strata_err win_write(strata_chip *chip, char *span, const void *src,
                            size_t n)
{
    const struct chip_backend_ops *ops = chip->cfg->ops;

    if (ops->copy_h2d)
        return ops->copy_h2d(chip->state, span, src, n);
    memcpy(span, src, n);
    return STRATA_OK;
}

static strata_err win_read(strata_chip *chip, void *dst, const char *span,
                           size_t n)
{
    const struct chip_backend_ops *ops = chip->cfg->ops;

    if (ops->copy_d2h)
        return ops->copy_d2h(chip->state, dst, span, n);
    memcpy(dst, span, n);
    return STRATA_OK;
}

/* A task's one tensor into a window, or window bytes into it. */
static strata_err copy(strata_chip *chip, struct mbx_frame *f, bool to)
{
    char *span = NULL;
    strata_err err = chip_resolve_args(chip, f);

    if (!err)
        err = window_span(chip, f, &span);
    if (err)
        return err;
    if (chip->args.num_tensors != 1 ||
        f->arg[2] != chip->args.tensors[0].nbytes)
        return base_fail(STRATA_EPROTO, "window copy out of range");
    /* Through the backend: a device window is not host memory. */
    return to ? win_write(chip, span, chip->args.data[0], f->arg[2])
              : win_read(chip, chip->args.data[0], span, f->arg[2]);
}

/* Staged bytes into a window, or window bytes back into staging. */
static strata_err staged_copy(strata_chip *chip, struct mbx_frame *f,
                              bool write)
{
    char *span = NULL;
    strata_err err = window_span(chip, f, &span);

    if (err)
        return err;
    if (f->arg[2] > MBX_STAGING_SIZE || (write && f->staged_len != f->arg[2]))
        return base_fail(STRATA_EPROTO, "window copy out of range");
    if (write)
        return win_write(chip, span, chip->cfg->mbx->staging, f->arg[2]);
    err = win_read(chip, chip->cfg->mbx->staging, span, f->arg[2]);
    if (!err)
        f->staged_len = f->arg[2];
    return err;
}

/* Maps the control page of the domain adopted at req. A local domain's
 * is made by whichever member maps first, as its windows are, and its
 * worker unlinks it (domain/adopt.c). A global domain's (creator is its
 * L4) was made before any member could map (the L4 holds it mapped, and
 * each node makes it at IMPORT where the L4's host is not theirs): one
 * missing now was unlinked by a node torn down with the domain, and a
 * page made again here would be one the L4's mark never reaches, so the
 * member fails instead of waiting on it for ever. */
static strata_err map_adopted_ctl(const strata_chip *chip,
                                  const struct chip_window_req *req,
                                  bool global, struct chip_domain_ctl **out)
{
    char name[CHIP_WINDOW_HANDLE_MAX];
    strata_err err;

    *out = NULL;
    if (!chip_domain_ctl_name(chip->cfg->ops, req, name, sizeof(name)))
        return STRATA_OK;
    err = chip_domain_ctl_map(name, !global, out);
    if (err == STRATA_ENOENT)
        return base_fail(STRATA_EPEER,
                         "the domain is gone: its control page %s was "
                         "removed (a member node was lost)",
                         name);
    return err;
}

/* Maps every rank's window, named by the worker, at the addresses it
 * chose inside the range this process inherited. */
static strata_err adopt(strata_chip *chip, struct mbx_frame *f)
{
    const struct chip_backend_ops *ops = chip->cfg->ops;
    const struct chip_child_cfg *cfg = chip->cfg;
    /* arg[1]: rank | rank_count << 16 | name token << 32; arg[2]: mapping
     * size | the pid names carry << MBX_ADOPT_CREATOR_SHIFT (0: this
     * chip's worker; a global domain's names carry its L4's). */
    uint64_t base = f->arg[3], map = f->arg[2] & MBX_ADOPT_MAP_MASK;
    pid_t creator = (pid_t)(f->arg[2] >> MBX_ADOPT_CREATOR_SHIFT);
    uintptr_t at = (uintptr_t)base;
    struct chip_domain_ctl *ctl = NULL;
    struct chip_window_req req = {
        .alloc_id = f->arg[0],
        .rank = (uint32_t)(f->arg[1] & 0xffff),
        .rank_count = (uint32_t)((f->arg[1] >> 16) & 0xffff),
        .window_size = map,
        .creator_pid = creator ? creator : cfg->parent,
        .name_token = (uint32_t)(f->arg[1] >> 32),
    };
    strata_err err = need(chip, ops->window_adopt != NULL, "adopted windows");

    if (err)
        return err;
    if (req.rank_count == 0 || req.rank >= req.rank_count || map == 0 ||
        map > cfg->va_size / req.rank_count || base < cfg->va_base ||
        base - cfg->va_base > cfg->va_size - map * req.rank_count)
        return base_fail(STRATA_EPROTO,
                         "window adopt: %u x %llu bytes at 0x%llx fall "
                         "outside the reserved range",
                         req.rank_count, (unsigned long long)map,
                         (unsigned long long)base);
    /* A global domain's page first: one found gone makes no window. A
     * local domain's after its windows, as before: a member that could
     * not map them makes nothing. */
    if (creator != 0)
        err = map_adopted_ctl(chip, &req, true, &ctl);
    if (!err)
        err = ops->window_adopt(chip->state, &req, base, map);
    if (err) {
        chip_domain_ctl_unmap(ctl);
        return err;
    }
    if (creator == 0) {
        err = map_adopted_ctl(chip, &req, false, &ctl);
        if (err)
            return undo(chip, req.alloc_id, err);
    }
    if (ctl) /* chip_watch_add unmaps it on failure */
        err = chip_watch_add(req.alloc_id, ctl, &at, 1,
                             (uintptr_t)(map * req.rank_count));
    return err ? undo(chip, req.alloc_id, err) : STRATA_OK;
}

strata_err chip_run_control(strata_chip *chip, struct mbx_frame *f)
{
    const struct chip_backend_ops *ops = chip->cfg->ops;
    strata_err err;

    if (f->op >= MBX_CTL_COMM_INIT && (chip->cfg->is_sub || !ops))
        return base_fail(STRATA_ENOTSUP, "sub worker %d has no device",
                         chip->cfg->id);
    switch (f->op) {
    case MBX_CTL_PING:
        return STRATA_OK;
    case MBX_CTL_UNMAP_BUFFER:
        bufmap_drop(&chip->map, (pid_t)f->arg[1], f->arg[0]);
        return STRATA_OK;
    case MBX_CTL_COMM_INIT:
        err = need(chip, ops->comm_init != NULL, "a communicator");
        return err ? err
                   : ops->comm_init(chip->state, (uint32_t)f->arg[0],
                                    (uint32_t)f->arg[1]);
    case MBX_CTL_WINDOW_PREPARE:
        return prepare(chip, f);
    case MBX_CTL_WINDOW_IMPORT:
        return import(chip, f);
    case MBX_CTL_WINDOW_ADOPT:
        return adopt(chip, f);
    case MBX_CTL_WINDOW_RELEASE:
        chip_watch_remove(f->arg[0]);
        err = need(chip, ops->window_release != NULL, "windows");
        return err ? err : ops->window_release(chip->state, f->arg[0]);
    case MBX_CTL_COPY_TO_WINDOW:
        return copy(chip, f, true);
    case MBX_CTL_COPY_FROM_WINDOW:
        return copy(chip, f, false);
    case MBX_CTL_WINDOW_WRITE:
        return staged_copy(chip, f, true);
    case MBX_CTL_WINDOW_READ:
        return staged_copy(chip, f, false);
    case MBX_CTL_DEV_ALLOC:
    case MBX_CTL_DEV_FREE:
    case MBX_CTL_DEV_WRITE:
    case MBX_CTL_DEV_READ:
    case MBX_CTL_DEV_COPY:
        return chip_devmem_control(chip, f);
    }
    return base_fail(STRATA_EPROTO, "unknown control op %u", f->op);
}
