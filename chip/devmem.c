/* Device buffers in the chip process: the chip's own allocations, by the
 * worker's buffer id, made and freed by control frames, filled by staged
 * or tensor copies, and resolved for tasks whose tensors are flagged
 * WIRE_TENSOR_DEVICE. The backend (sim: host memory; cuda: cuMemAlloc)
 * does the memory; this file keeps the table and checks every range. */
#include "base/alloc.h"
#include "base/err.h"
#include "chip_int.h"

#include <string.h>

static struct bufmap_entry *find(strata_chip *chip, pid_t creator, uint64_t id)
{
    struct bufmap *m = &chip->devs;

    for (size_t i = 0; i < m->count; i++)
        if (m->entries[i].id == id && m->entries[i].creator == creator)
            return &m->entries[i];
    return NULL;
}

static strata_err need_ops(const strata_chip *chip)
{
    const struct chip_backend_ops *ops = chip->cfg->ops;

    if (!ops->malloc || !ops->free || !ops->copy_h2d || !ops->copy_d2h)
        return base_fail(STRATA_ENOTSUP, "backend %s has no device memory",
                         ops->name);
    return STRATA_OK;
}

static strata_err not_here(const strata_chip *chip, uint64_t id)
{
    return base_fail(STRATA_EINVAL,
                     "device buffer %llu is not on chip %d (freed, or "
                     "allocated on another chip)",
                     (unsigned long long)id, chip->cfg->id);
}

strata_err chip_devmem_resolve(strata_chip *chip, pid_t creator, uint64_t id,
                               size_t size, void **base_out)
{
    const struct bufmap_entry *e = find(chip, creator, id);

    if (!e)
        return not_here(chip, id);
    if (e->size != size)
        return base_fail(STRATA_EPROTO,
                         "device buffer %llu: %zu bytes, named as %zu",
                         (unsigned long long)id, e->size, size);
    *base_out = e->base;
    return STRATA_OK;
}

static strata_err dev_alloc(strata_chip *chip, const struct mbx_frame *f)
{
    const struct chip_backend_ops *ops = chip->cfg->ops;
    struct bufmap *m = &chip->devs;
    pid_t creator = (pid_t)f->arg[1];
    size_t size = (size_t)f->arg[2];
    void *dev = NULL;
    strata_err err = need_ops(chip);

    if (err)
        return err;
    if (size == 0 || creator <= 0)
        return base_fail(STRATA_EPROTO, "device alloc: size %zu, creator %d",
                         size, (int)creator);
    if (find(chip, creator, f->arg[0]))
        return base_fail(STRATA_EPROTO, "device buffer %llu exists already",
                         (unsigned long long)f->arg[0]);
    if (m->count == m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 16;
        void *p = base_realloc(m->entries, cap * sizeof(*m->entries));

        if (!p)
            return base_fail(STRATA_ENOMEM, "device buffers: out of memory");
        m->entries = p;
        m->cap = cap;
    }
    err = ops->malloc(chip->state, size, &dev);
    if (err)
        return err;
    m->entries[m->count++] = (struct bufmap_entry){
        .id = f->arg[0], .creator = creator, .size = size, .base = dev};
    return STRATA_OK;
}

static strata_err dev_free(strata_chip *chip, const struct mbx_frame *f)
{
    struct bufmap *m = &chip->devs;
    struct bufmap_entry *e = find(chip, (pid_t)f->arg[1], f->arg[0]);
    void *dev;

    if (!e)
        return STRATA_OK; /* never made here: nothing to free */
    dev = e->base;
    *e = m->entries[--m->count];
    return chip->cfg->ops->free(chip->state, dev);
}

/* Staged bytes into a device buffer, or its bytes back into staging. */
static strata_err dev_staged(strata_chip *chip, struct mbx_frame *f, bool write)
{
    const struct chip_backend_ops *ops = chip->cfg->ops;
    const struct bufmap_entry *e = find(chip, (pid_t)f->arg[1], f->arg[0]);
    uint64_t off = f->arg[2], n = f->arg[3];
    uint8_t *staging = chip->cfg->mbx->staging;
    strata_err err = need_ops(chip);

    if (err)
        return err;
    if (!e)
        return not_here(chip, f->arg[0]);
    if (n > MBX_STAGING_SIZE || off > e->size || n > e->size - off ||
        (write && f->staged_len != n))
        return base_fail(STRATA_EPROTO,
                         "device copy: %llu bytes at %llu outside buffer "
                         "%llu of %zu bytes",
                         (unsigned long long)n, (unsigned long long)off,
                         (unsigned long long)f->arg[0], e->size);
    if (write)
        return ops->copy_h2d(chip->state, (char *)e->base + off, staging,
                             (size_t)n);
    err = ops->copy_d2h(chip->state, staging, (const char *)e->base + off,
                        (size_t)n);
    if (!err)
        f->staged_len = n;
    return err;
}

/* Tensor 1 into tensor 0, each host or device memory of this chip. */
static strata_err dev_copy(strata_chip *chip, struct mbx_frame *f)
{
    const struct chip_backend_ops *ops = chip->cfg->ops;
    const struct wire_tensor *t = chip->args.tensors;
    strata_err err = need_ops(chip);
    bool dst_dev, src_dev;
    void *dst, *src;
    size_t n;

    if (!err)
        err = chip_resolve_args(chip, f);
    if (err)
        return err;
    if (chip->args.num_tensors != 2 || t[0].nbytes != f->arg[0] ||
        t[1].nbytes != f->arg[0])
        return base_fail(STRATA_EPROTO, "device copy: malformed frame");
    n = (size_t)f->arg[0];
    dst = chip->args.data[0];
    src = chip->args.data[1];
    dst_dev = t[0].flags & WIRE_TENSOR_DEVICE;
    src_dev = t[1].flags & WIRE_TENSOR_DEVICE;
    if (dst_dev && src_dev)
        return ops->copy_d2d ? ops->copy_d2d(chip->state, dst, src, n)
                             : base_fail(STRATA_ENOTSUP,
                                         "backend %s has no device-to-device "
                                         "copy",
                                         ops->name);
    if (dst_dev)
        return ops->copy_h2d(chip->state, dst, src, n);
    if (src_dev)
        return ops->copy_d2h(chip->state, dst, src, n);
    memmove(dst, src, n);
    return STRATA_OK;
}

strata_err chip_devmem_control(strata_chip *chip, struct mbx_frame *f)
{
    switch (f->op) {
    case MBX_CTL_DEV_ALLOC:
        return dev_alloc(chip, f);
    case MBX_CTL_DEV_FREE:
        return dev_free(chip, f);
    case MBX_CTL_DEV_WRITE:
        return dev_staged(chip, f, true);
    case MBX_CTL_DEV_READ:
        return dev_staged(chip, f, false);
    default:
        return dev_copy(chip, f);
    }
}

void chip_devmem_fini(strata_chip *chip)
{
    struct bufmap *m = &chip->devs;

    for (size_t i = 0; i < m->count; i++)
        chip->cfg->ops->free(chip->state, m->entries[i].base);
    base_free(m->entries);
    bufmap_init(m);
}
