/* The table a device backend (sim, cuda) implements. The chip process
 * reaches a backend only through it; a NULL slot means "not supported" and
 * its wrapper in chip/ answers STRATA_ENOTSUP. */
#ifndef WIRE_CHIP_BACKEND_H
#define WIRE_CHIP_BACKEND_H

#include <strata/strata.h>

struct chip_backend_ops {
    const char *name; /* platform name: "sim", "cuda" */
    uint32_t abi;     /* CHIP_BACKEND_ABI */
    strata_err (*init)(strata_chip *chip, void **state_out);
    void (*fini)(strata_chip *chip, void *state);
    strata_err (*malloc)(void *state, size_t nbytes, void **dev_out);
    strata_err (*free)(void *state, void *dev);
    strata_err (*copy_h2d)(void *state, void *dst, const void *src, size_t n);
    strata_err (*copy_d2h)(void *state, void *dst, const void *src, size_t n);
    strata_err (*window_prepare)(void *state, const void *req, void *desc_out);
    strata_err (*window_import)(void *state, const void *table, void *ctx_out);
    strata_err (*window_release)(void *state, uint64_t window_id);
    strata_err (*launch)(void *state, strata_chip *chip, strata_kernel_fn fn,
                         const strata_args *args);
    strata_err (*sync)(void *state);
};

#define CHIP_BACKEND_ABI 1u

#endif
