/* The balanced block partition: owned ranges and destination owners. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "graph_helpers.h"

#include <string.h>

static void expect_range(uint64_t n, uint32_t world, uint32_t rank,
                         uint64_t begin, uint64_t end)
{
    uint64_t b = 99;
    uint64_t e = 99;

    assert_int_equal(strata_owned_range(n, world, rank, &b, &e), STRATA_OK);
    assert_int_equal(b, begin);
    assert_int_equal(e, end);
}

static void test_partition_uneven_split_first_ranks_get_extra(void **state)
{
    (void)state;
    /* 10 over 4: 10 mod 4 = 2 ranks own 3 rows, the rest 2. */
    expect_range(10, 4, 0, 0, 3);
    expect_range(10, 4, 1, 3, 6);
    expect_range(10, 4, 2, 6, 8);
    expect_range(10, 4, 3, 8, 10);
    /* The FACTS example: 6 over 3. */
    expect_range(6, 3, 0, 0, 2);
    expect_range(6, 3, 1, 2, 4);
    expect_range(6, 3, 2, 4, 6);
    /* The 8-node ring over 2 and 4. */
    expect_range(8, 2, 0, 0, 4);
    expect_range(8, 2, 1, 4, 8);
    expect_range(8, 4, 3, 6, 8);
    expect_range(7, 3, 0, 0, 3);
    expect_range(7, 3, 1, 3, 5);
    expect_range(7, 3, 2, 5, 7);
}

static void test_partition_fewer_rows_than_ranks_past_n_empty(void **state)
{
    (void)state;
    /* 3 rows over 5 ranks: one each, then empty ranges at n. */
    expect_range(3, 5, 0, 0, 1);
    expect_range(3, 5, 1, 1, 2);
    expect_range(3, 5, 2, 2, 3);
    expect_range(3, 5, 3, 3, 3);
    expect_range(3, 5, 4, 3, 3);
    expect_range(1, 8, 7, 1, 1);
}

static void test_partition_zero_rows_all_empty(void **state)
{
    uint32_t owner;

    (void)state;
    for (uint32_t w = 1; w <= 5; w++)
        for (uint32_t r = 0; r < w; r++)
            expect_range(0, w, r, 0, 0);
    assert_int_equal(strata_destination_owner(0, 0, 3, &owner), STRATA_EINVAL);
}

static void test_partition_bad_arguments_einval(void **state)
{
    uint64_t b;
    uint64_t e;
    uint32_t owner;

    (void)state;
    assert_int_equal(strata_owned_range(10, 0, 0, &b, &e), STRATA_EINVAL);
    assert_int_equal(strata_owned_range(10, 4, 4, &b, &e), STRATA_EINVAL);
    assert_int_equal(strata_owned_range(10, 4, 0, NULL, &e), STRATA_EINVAL);
    assert_int_equal(strata_owned_range(10, 4, 0, &b, NULL), STRATA_EINVAL);
    assert_int_equal(strata_destination_owner(10, 10, 4, &owner),
                     STRATA_EINVAL);
    assert_int_equal(strata_destination_owner(1, 10, 0, &owner), STRATA_EINVAL);
    assert_int_equal(strata_destination_owner(1, 10, 2, NULL), STRATA_EINVAL);
}

/* For many n and world: ranges tile [0, n) in rank order, sizes differ by
 * at most one with the larger first, and every entity's owner is the rank
 * whose range holds it. */
static void test_partition_ranges_tile_and_owner_agrees(void **state)
{
    uint64_t seed = 0x1234567;

    (void)state;
    for (uint64_t n = 0; n <= 70; n++) {
        for (uint32_t w = 1; w <= 17; w++) {
            uint64_t next = 0;

            for (uint32_t r = 0; r < w; r++) {
                uint64_t b;
                uint64_t e;

                assert_int_equal(strata_owned_range(n, w, r, &b, &e),
                                 STRATA_OK);
                assert_int_equal(b, next);
                assert_true(e >= b);
                assert_int_equal(e - b, n / w + (r < n % w ? 1 : 0));
                for (uint64_t x = b; x < e; x++) {
                    uint32_t owner = 99;

                    assert_int_equal(strata_destination_owner(x, n, w, &owner),
                                     STRATA_OK);
                    assert_int_equal(owner, r);
                }
                next = e;
            }
            assert_int_equal(next, n);
        }
    }
    /* Random large n and world: owner of sampled entities lies in range. */
    for (int i = 0; i < 2000; i++) {
        uint64_t n = 1 + gh_rand(&seed) % ((uint64_t)1 << 40);
        uint32_t w = 1 + (uint32_t)(gh_rand(&seed) % 1000);
        uint64_t x = gh_rand(&seed) % n;
        uint32_t owner;
        uint64_t b;
        uint64_t e;

        assert_int_equal(strata_destination_owner(x, n, w, &owner), STRATA_OK);
        assert_int_equal(strata_owned_range(n, w, owner, &b, &e), STRATA_OK);
        assert_true(x >= b && x < e);
        assert_int_equal(strata_destination_owner(n - 1, n, w, &owner),
                         STRATA_OK);
        assert_int_equal(owner, n >= w ? w - 1 : n - 1);
    }
}

static void test_partition_huge_values_no_overflow(void **state)
{
    uint64_t n = UINT64_MAX - 5;
    uint32_t w = UINT32_MAX;
    uint64_t b;
    uint64_t e;
    uint32_t owner;

    (void)state;
    assert_int_equal(strata_owned_range(n, w, w - 1, &b, &e), STRATA_OK);
    assert_int_equal(e, n);
    assert_int_equal(strata_destination_owner(n - 1, n, w, &owner), STRATA_OK);
    assert_int_equal(owner, w - 1);
    assert_int_equal(strata_destination_owner(0, n, w, &owner), STRATA_OK);
    assert_int_equal(owner, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_partition_uneven_split_first_ranks_get_extra),
        cmocka_unit_test(test_partition_fewer_rows_than_ranks_past_n_empty),
        cmocka_unit_test(test_partition_zero_rows_all_empty),
        cmocka_unit_test(test_partition_bad_arguments_einval),
        cmocka_unit_test(test_partition_ranges_tile_and_owner_agrees),
        cmocka_unit_test(test_partition_huge_values_no_overflow),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
