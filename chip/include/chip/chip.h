/* The L2 chip process (and the sub worker, which is a chip without a
 * device): its start-up, task loop and kernel dispatch. */
#ifndef CHIP_CHIP_H
#define CHIP_CHIP_H

#include "wire/chip_backend.h"
#include "wire/mailbox.h"

#include <sys/types.h>

struct cuda_plugin_mem;
/* The CUDA plug-in's memory table for the calling process (the tier
 * runtime's device and host-pinned instances): loads the plug-in and
 * sets its context up on first use. STRATA_ENOTSUP with the reason (no
 * plug-in, no driver, no device). Any thread. */
strata_err chip_cuda_mem(const struct cuda_plugin_mem **out);

/* Registered backends, looked up by platform name. */
strata_err chip_backend_register(const struct chip_backend_ops *ops);
const struct chip_backend_ops *chip_backend_find(const char *platform);

struct chip_child_cfg {
    bool is_sub; /* sub worker: runs subs, has no device */
    int id;      /* chip id, or sub index */
    const struct chip_backend_ops *ops; /* NULL for a sub worker */
    struct mbx *mbx;
    struct mbx_shared *shared;
    int doorbell_fd; /* eventfd the parent's scheduler polls */
    pid_t parent;    /* the worker process */
    /* Address range reserved (PROT_NONE) before the fork, where adopted
     * windows are mapped; 0 when none. */
    uint64_t va_base;
    uint64_t va_size;
    /* Its index among the worker's chips, and their number (STRATA_PIN
     * binds by them). */
    unsigned index, count;
    /* cuda: the device ordinal the config gave this chip; -1: none. */
    int device_ordinal;
};

/* The lower part of a reserved window range of size bytes, whole pages:
 * local domains' windows, which only the worker's own chips map (the
 * upper part holds global domains'; orch/varange.c, chip/signal.c). */
static inline uint64_t chip_va_local_size(uint64_t size)
{
    return size / 2 & ~(uint64_t)0xfff;
}

/* Runs a child until shutdown; never returns. Called right after fork. */
_Noreturn void chip_child_main(const struct chip_child_cfg *cfg);

/* The name of buffer id created by process creator: "/strata-U-P-bID". */
void chip_buffer_name(char *out, size_t cap, pid_t creator, uint64_t id);

#endif
