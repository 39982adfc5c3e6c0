/* The chip process's private state. */
#ifndef CHIP_INT_H
#define CHIP_INT_H

#include "chip/bufmap.h"
#include "chip/chip.h"

struct strata_chip {
    const struct chip_child_cfg *cfg;
    void *state; /* backend state */
    struct bufmap map;
    struct bufmap devs; /* device buffers of this chip (devmem.c) */
    strata_args args;   /* decoded arguments of the running frame */
};

/* Decodes f's args and maps every tensor's buffer. */
strata_err chip_resolve_args(strata_chip *chip, const struct mbx_frame *f);
/* devmem.c: the base of this chip's device buffer id of creator (size
 * bytes); STRATA_EINVAL when the chip has no such buffer. */
strata_err chip_devmem_resolve(strata_chip *chip, pid_t creator, uint64_t id,
                               size_t size, void **base_out);
/* The MBX_CTL_DEV_* frames. */
strata_err chip_devmem_control(strata_chip *chip, struct mbx_frame *f);
/* Frees every device buffer (before the backend's fini). */
void chip_devmem_fini(strata_chip *chip);
/* Runs a control frame; results go back in the frame. */
strata_err chip_run_control(strata_chip *chip, struct mbx_frame *f);
/* Makes this chip count its parked signal waiters in *parked for words in
 * [base, base + size), the worker's window range (chip/signal.c). */
void chip_signal_bind(uint32_t *parked, uint64_t base, uint64_t size);

#endif
