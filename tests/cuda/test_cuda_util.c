/* The CUDA backend's pure parts: CUresult names and codes, and the
 * chip-to-device map (STRATA_CUDA_DEVICES). No GPU, no driver. */
#include "cuda_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

static void test_cuda_util_result_names_known_and_unknown(void **state)
{
    (void)state;
    assert_string_equal(cuda_result_name(34), "CUDA_ERROR_STUB_LIBRARY");
    assert_string_equal(cuda_result_name(100), "CUDA_ERROR_NO_DEVICE");
    assert_string_equal(cuda_result_name(700), "CUDA_ERROR_ILLEGAL_ADDRESS");
    assert_non_null(cuda_result_hint(34));
    assert_null(cuda_result_name(12345));
    assert_null(cuda_result_hint(700));
}

static void test_cuda_util_result_errcode_maps_classes(void **state)
{
    (void)state;
    assert_int_equal(cuda_result_errcode(0), STRATA_OK);
    assert_int_equal(cuda_result_errcode(2), STRATA_ENOMEM);
    assert_int_equal(cuda_result_errcode(1), STRATA_EINVAL);
    assert_int_equal(cuda_result_errcode(101), STRATA_EINVAL);
    assert_int_equal(cuda_result_errcode(34), STRATA_ENOTSUP);
    assert_int_equal(cuda_result_errcode(100), STRATA_ENOTSUP);
    assert_int_equal(cuda_result_errcode(36), STRATA_ENOTSUP);
    assert_int_equal(cuda_result_errcode(700), STRATA_EIO);
    assert_int_equal(cuda_result_errcode(999), STRATA_EIO);
}

static int lookup(const char *map, int chip, char *why)
{
    int ordinal = -7;
    strata_err err = cuda_device_map_lookup(map, chip, &ordinal, why, 160);

    return err ? -(int)err : ordinal;
}

static void test_cuda_util_device_map_default_is_chip_id(void **state)
{
    char why[160];

    (void)state;
    assert_int_equal(lookup(NULL, 0, why), 0);
    assert_int_equal(lookup("", 5, why), 5);
    assert_int_equal(lookup("1=0", 5, why), 5); /* not named: its id */
}

static void test_cuda_util_device_map_explicit_entries(void **state)
{
    char why[160];

    (void)state;
    assert_int_equal(lookup("0=1,1=1", 0, why), 1);
    assert_int_equal(lookup("0=1,1=1", 1, why), 1);
    assert_int_equal(lookup(" 7 = 2 , 8=3 ", 7, why), 2);
    assert_int_equal(lookup(" 7 = 2 , 8=3 ", 8, why), 3);
    assert_int_equal(lookup("3=0,", 3, why), 0); /* trailing comma */
}

static void test_cuda_util_device_map_malformed_einval(void **state)
{
    static const char *bad[] = {"0",    "0=",   "=1",
                                "a=1",  "0=-1", "0=1,,1=2",
                                "0=1x", "-1=0", "0=99999999999"};
    char why[160];

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why[0] = '\0';
        assert_int_equal(lookup(bad[i], 0, why), -(int)STRATA_EINVAL);
        assert_non_null(strstr(why, "STRATA_CUDA_DEVICES"));
        assert_non_null(strstr(why, "not chip=ordinal"));
    }
    assert_int_equal(lookup("2=0,2=1", 2, why), -(int)STRATA_EINVAL);
    assert_non_null(strstr(why, "chip 2 is named twice"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda_util_result_names_known_and_unknown),
        cmocka_unit_test(test_cuda_util_result_errcode_maps_classes),
        cmocka_unit_test(test_cuda_util_device_map_default_is_chip_id),
        cmocka_unit_test(test_cuda_util_device_map_explicit_entries),
        cmocka_unit_test(test_cuda_util_device_map_malformed_einval),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
