/* The CUDA tiers: device and host-pinned instances, through the CUDA
 * plug-in's memory table (chip_cuda_mem), loaded in this process on the
 * first allocation on either tier. A device instance's bytes are only
 * reachable through copies (strata_instance_data is NULL); a host-pinned
 * one is ordinary host memory that happens to be page-locked, so every
 * host path (memcpy, pread/pwrite) treats it as ram. */
#include "tier/device.h"
#include "base/err.h"
#include "chip/chip.h"
#include "tier_int.h"
#include "wire/cuda_plugin.h"

#include <stdio.h>

static const struct cuda_plugin_mem *mem;

strata_err tier_cuda_ready(strata_tier t)
{
    const struct cuda_plugin_mem *m = NULL;
    strata_err err;

    if (__atomic_load_n(&mem, __ATOMIC_ACQUIRE))
        return STRATA_OK;
    err = chip_cuda_mem(&m);
    if (err) {
        base_errmsg_prefix("tier '%s' needs the CUDA backend, which this "
                           "process cannot use",
                           strata_tier_name(t));
        return err == STRATA_ENOMEM ? err : STRATA_ENOTSUP;
    }
    __atomic_store_n(&mem, m, __ATOMIC_RELEASE);
    return STRATA_OK;
}

strata_err tier_cuda_alloc(strata_instance *inst)
{
    bool pinned = inst->tier == STRATA_TIER_HOST_PINNED;
    void *p = NULL;
    strata_err err = mem->alloc(pinned, inst->capacity, &p);

    if (err) {
        base_errmsg_prefix("%s instance '%s' of %llu bytes",
                           strata_tier_name(inst->tier), inst->name,
                           (unsigned long long)inst->capacity);
        return err;
    }
    if (pinned)
        inst->data = p;
    else
        inst->dev = p;
    return STRATA_OK;
}

void tier_cuda_free(strata_instance *inst)
{
    if (inst->tier == STRATA_TIER_HOST_PINNED && inst->data)
        mem->free(true, inst->data);
    else if (inst->dev)
        mem->free(false, inst->dev);
    inst->data = NULL;
    inst->dev = NULL;
}

strata_err tier_cuda_copy(void *dst, const void *src, size_t n, char *msg,
                          size_t msg_cap)
{
    strata_err err = mem->copy(dst, src, n);

    if (err && msg)
        snprintf(msg, msg_cap, "%s", strata_errmsg());
    return err;
}
