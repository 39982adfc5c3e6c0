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
#include <unistd.h>

static const struct cuda_plugin_mem *mem;
static pid_t mem_pid; /* the process mem was set up in */

strata_err tier_cuda_ready(strata_tier t)
{
    const struct cuda_plugin_mem *m = NULL;
    strata_err err;

    if (__atomic_load_n(&mem, __ATOMIC_ACQUIRE)) {
        if (mem_pid == getpid())
            return STRATA_OK;
        return base_fail(STRATA_ENOTSUP,
                         "tier '%s' needs CUDA, which process %d set up "
                         "before it forked this one (CUDA does not survive "
                         "fork)",
                         strata_tier_name(t), (int)mem_pid);
    }
    err = chip_cuda_mem(&m);
    if (err) {
        base_errmsg_prefix("tier '%s' needs the CUDA backend, which this "
                           "process cannot use",
                           strata_tier_name(t));
        return err == STRATA_ENOMEM ? err : STRATA_ENOTSUP;
    }
    mem_pid = getpid();
    __atomic_store_n(&mem, m, __ATOMIC_RELEASE);
    return STRATA_OK;
}

strata_err tier_cuda_alloc(strata_instance *inst)
{
    bool pinned = inst->tier == STRATA_TIER_HOST_PINNED;
    /* Whole blocks: an O_DIRECT file moves the last block whole, into or
     * out of a pinned instance as into a ram mapping (map_len). */
    uint64_t bytes =
        (inst->capacity + TIER_ALIGN - 1) & ~(uint64_t)(TIER_ALIGN - 1);
    void *p = NULL;
    strata_err err = mem->alloc(pinned, bytes, &p);

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
    inst->map_len = (size_t)bytes;
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
    strata_err err = n ? mem->copy(dst, src, n) : STRATA_OK;

    if (!err)
        return STRATA_OK;
    /* A failed copy is a failed I/O, as a failed file access is. */
    if (msg)
        snprintf(msg, msg_cap, "%s", strata_errmsg());
    return STRATA_EIO;
}
