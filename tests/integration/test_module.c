/*
 * A loadable module for the registry tests, built three ways:
 * STRATA_TEST_MODULE_VARIANT 0 registers kernel "module_kernel", 1 lacks
 * strata_module_init, 2 has an init that fails with STRATA_EPROTO.
 * Symbols it uses come from the test executable (built with exports).
 */
#include <stdint.h>
#include <strata/strata.h>

#if STRATA_TEST_MODULE_VARIANT == 0
/* Writes 0xC0FFEE and the chip id into its first tensor. */
static strata_err module_kernel(strata_chip *chip, const strata_args *a)
{
    uint32_t *out = strata_args_tensor_data(a, 0);
    if (!out || strata_args_tensor_nbytes(a, 0) < 2 * sizeof(uint32_t))
        return STRATA_EINVAL;
    out[0] = 0xC0FFEE;
    out[1] = (uint32_t)strata_chip_id(chip);
    return STRATA_OK;
}

STRATA_API strata_err strata_module_init(void);
STRATA_API strata_err strata_module_init(void)
{
    strata_callable c;
    return strata_register_kernel("module_kernel", module_kernel, &c);
}
#elif STRATA_TEST_MODULE_VARIANT == 1
STRATA_API int strata_test_module_other(void);
STRATA_API int strata_test_module_other(void)
{
    return 42;
}
#else
STRATA_API strata_err strata_module_init(void);
STRATA_API strata_err strata_module_init(void)
{
    strata_errmsg_set("module init refuses");
    return STRATA_EPROTO;
}
#endif
