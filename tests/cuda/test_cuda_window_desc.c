/* The cuda-ipc window descriptor codec (cuda/window_desc.c) and the comm
 * profiles a worker accepts: no GPU needed. */
#include "window_desc.h"

#include <stdio.h>
#include <strata/strata.h>
#include <string.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

static const struct cuda_window_handle good = {
    .kind = CUDA_WINDOW_KIND_FD,
    .pid = 4242,
    .fd = 17,
    .ordinal = 1,
    .granularity = 2u << 20,
    .alloc_size = 6u << 20,
};

static void test_cuda_window_desc_round_trip(void **state)
{
    struct chip_window_desc d;
    struct cuda_window_handle h;
    char why[160];

    (void)state;
    assert_true(cuda_window_desc_encode(&good, 2, 4, &d, why, sizeof(why)));
    assert_string_equal(d.profile, "cuda-ipc");
    assert_int_equal(d.mapping_size, good.alloc_size);
    /* Little-endian magic first: the layout is a contract. */
    assert_memory_equal(d.handle, "SCW1", 4);
    assert_true(cuda_window_desc_decode(&d, 2, 4, &h, why, sizeof(why)));
    assert_memory_equal(&h, &good, sizeof(h));
}

/* Every field out of place is refused, each with its reason. */
static void test_cuda_window_desc_refuses_each_field(void **state)
{
    struct chip_window_desc d, bad;
    struct cuda_window_handle h;
    char why[160];
    const struct {
        size_t off; /* byte of the handle to change */
        uint8_t val;
        const char *reason;
    } flips[] = {
        {0, 'X', "magic"},     {4, 9, "kind"},     {4, 2, "cuda-fabric"},
        {5, 1, "padding"},     {11, 0x80, "pid"},  {15, 0x80, "fd"},
        {19, 0x80, "ordinal"}, {21, 1, "padding"}, {24, 1, "granularity"},
        {33, 1, "multiple"},   {63, 1, "padding"},
    };

    (void)state;
    assert_true(cuda_window_desc_encode(&good, 0, 2, &d, why, sizeof(why)));
    for (size_t i = 0; i < sizeof(flips) / sizeof(flips[0]); i++) {
        bad = d;
        bad.handle[flips[i].off] = (char)flips[i].val;
        assert_false(cuda_window_desc_decode(&bad, 0, 2, &h, why, sizeof(why)));
        print_message("byte %zu: %s\n", flips[i].off, why);
        if (!strstr(why, flips[i].reason))
            fail_msg("byte %zu: '%s' lacks '%s'", flips[i].off, why,
                     flips[i].reason);
        assert_non_null(strstr(why, "rank 0's window descriptor"));
    }
    bad = d;
    bad.version = 2;
    assert_false(cuda_window_desc_decode(&bad, 0, 2, &h, why, sizeof(why)));
    assert_false(cuda_window_desc_decode(&d, 1, 2, &h, why, sizeof(why)));
    assert_false(cuda_window_desc_decode(&d, 0, 3, &h, why, sizeof(why)));
    bad = d;
    bad.mapping_size += 4096;
    assert_false(cuda_window_desc_decode(&bad, 0, 2, &h, why, sizeof(why)));
    assert_non_null(strstr(why, "mapping size"));
    bad = d;
    memcpy(bad.profile, "sim", 4);
    assert_false(cuda_window_desc_decode(&bad, 0, 2, &h, why, sizeof(why)));
    bad = d;
    snprintf(bad.profile, sizeof(bad.profile), "cuda-fabric");
    assert_false(cuda_window_desc_decode(&bad, 0, 2, &h, why, sizeof(why)));
    assert_non_null(strstr(why, "cuda-fabric is not supported"));
    bad = d;
    memset(bad.profile, 'a', sizeof(bad.profile)); /* unterminated */
    assert_false(cuda_window_desc_decode(&bad, 0, 2, &h, why, sizeof(why)));
    bad = d;
    bad.reserved = 1;
    assert_false(cuda_window_desc_decode(&bad, 0, 2, &h, why, sizeof(why)));
}

static void test_cuda_window_desc_encode_refuses_bad_handles(void **state)
{
    struct chip_window_desc d;
    struct cuda_window_handle h = good;
    char why[160];

    (void)state;
    h.alloc_size = good.granularity + 1;
    assert_false(cuda_window_desc_encode(&h, 0, 1, &d, why, sizeof(why)));
    h = good;
    h.granularity = 3000;
    assert_false(cuda_window_desc_encode(&h, 0, 1, &d, why, sizeof(why)));
    h = good;
    h.kind = CUDA_WINDOW_KIND_FABRIC;
    assert_false(cuda_window_desc_encode(&h, 0, 1, &d, why, sizeof(why)));
    assert_non_null(strstr(why, "cuda-fabric"));
    assert_false(cuda_window_desc_encode(&good, 1, 1, &d, why, sizeof(why)));
}

static void test_cuda_window_round(void **state)
{
    (void)state;
    assert_int_equal(cuda_window_round(1, 2u << 20), 2u << 20);
    assert_int_equal(cuda_window_round(2u << 20, 2u << 20), 2u << 20);
    assert_int_equal(cuda_window_round((2u << 20) + 1, 2u << 20), 4u << 20);
    assert_int_equal(cuda_window_round(0, 4096), 0);
    assert_int_equal(cuda_window_round(UINT64_MAX, 4096), 0);
}

static strata_err create_with(const char *platform, const char *profile)
{
    static const int ids[] = {0};
    strata_worker_config cfg;
    strata_worker *w = NULL;
    strata_err err;

    strata_worker_config_init(&cfg, 3);
    cfg.platform = platform;
    cfg.comm_profile = profile;
    cfg.chip_ids = ids;
    cfg.num_chips = 1;
    err = strata_worker_create(&cfg, &w);
    if (!err)
        assert_int_equal(strata_worker_destroy(w), STRATA_OK);
    return err;
}

/* cuda-fabric is refused at create, before any domain is prepared;
 * cuda-ipc only on platform cuda. */
static void test_cuda_window_profiles_at_create(void **state)
{
    (void)state;
    assert_int_equal(create_with("cuda", "cuda-fabric"), STRATA_ENOTSUP);
    assert_non_null(strstr(strata_errmsg(), "'cuda-fabric' is not supported"));
    assert_int_equal(create_with("sim", "cuda-ipc"), STRATA_EINVAL);
    assert_non_null(strstr(strata_errmsg(), "needs platform \"cuda\""));
    assert_int_equal(create_with("cuda", "cuda-ipc"), STRATA_OK);
    assert_int_equal(create_with("cuda", "nvshmem"), STRATA_EINVAL);
    assert_non_null(strstr(strata_errmsg(), "'nvshmem' is not supported"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda_window_desc_round_trip),
        cmocka_unit_test(test_cuda_window_desc_refuses_each_field),
        cmocka_unit_test(test_cuda_window_desc_encode_refuses_bad_handles),
        cmocka_unit_test(test_cuda_window_round),
        cmocka_unit_test(test_cuda_window_profiles_at_create),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
