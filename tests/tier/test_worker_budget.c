/* A worker's memory budgets: host buffers count against "ram"; equal is
 * allowed, one byte more is STRATA_EBUDGET and leaves nothing; releasing
 * makes room; the report shows live, peak and budget. */
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <strata/strata.h>
#include <strata/tier.h>
#include <cmocka.h>

#include "tier_test.h"

#define KiB 1024u

static void test_worker_budget_edges(void **state)
{
    testutil_snapshot before;
    strata_worker_config cfg;
    strata_worker *w;
    strata_buffer *a, *b, *c = NULL;
    strata_tier_report r;

    (void)state;
    testutil_snapshot_take(&before);
    strata_worker_config_init(&cfg, 3);
    cfg.budgets = "host = 64 KiB";
    assert_int_equal(strata_worker_create(&cfg, &w), STRATA_OK);
    assert_int_equal(strata_worker_create_buffer(w, 48 * KiB, &a), STRATA_OK);
    assert_int_equal(strata_worker_create_buffer(w, 16 * KiB, &b), STRATA_OK);
    assert_int_equal(strata_worker_create_buffer(w, 1, &c), STRATA_EBUDGET);
    assert_null(c);
    assert_msg_has("tier 'ram'");
    assert_msg_has("budget of 65536 bytes (65536 bytes live)");
    assert_int_equal(strata_worker_memory_report(w, &r), STRATA_OK);
    assert_int_equal(r.tiers[STRATA_TIER_RAM].live, 64 * KiB);
    assert_int_equal(r.tiers[STRATA_TIER_RAM].peak, 64 * KiB);
    assert_int_equal(r.tiers[STRATA_TIER_RAM].budget, 64 * KiB);
    assert_int_equal(r.tiers[STRATA_TIER_RAM].instances, 2);
    assert_true(r.tiers[STRATA_TIER_NVME].budget == UINT64_MAX);
    assert_int_equal(strata_buffer_release(a), STRATA_OK);
    assert_int_equal(strata_worker_create_buffer(w, 48 * KiB, &c), STRATA_OK);
    assert_int_equal(strata_worker_memory_report(w, &r), STRATA_OK);
    assert_int_equal(r.tiers[STRATA_TIER_RAM].live, 64 * KiB);
    assert_int_equal(r.tiers[STRATA_TIER_RAM].instances, 2);
    assert_int_equal(strata_worker_destroy(w), STRATA_OK);
    testutil_assert_clean(&before);
}

static void test_worker_budget_config_refused(void **state)
{
    strata_worker_config cfg;
    strata_worker *w = NULL;
    strata_tier_report r;

    (void)state;
    strata_worker_config_init(&cfg, 3);
    cfg.budgets = "ram=1GB";
    assert_int_equal(strata_worker_create(&cfg, &w), STRATA_EINVAL);
    assert_msg_has("SI units are refused");
    cfg.budgets = "register=1";
    assert_int_equal(strata_worker_create(&cfg, &w), STRATA_EINVAL);
    assert_msg_has("not allocatable");
    cfg.budgets = NULL;
    cfg.spill_dir = "/nonexistent/strata-spill";
    assert_int_equal(strata_worker_create(&cfg, &w), STRATA_EINVAL);
    assert_msg_has("spill_dir");
    cfg.spill_dir = NULL;
    cfg.eviction = 7;
    assert_int_equal(strata_worker_create(&cfg, &w), STRATA_EINVAL);
    assert_msg_has("eviction is 7");
    cfg.eviction = STRATA_EVICT_LRU; /* without spill_dir */
    assert_int_equal(strata_worker_create(&cfg, &w), STRATA_EINVAL);
    assert_msg_has("needs spill_dir");
    assert_null(w);
    assert_int_equal(strata_worker_memory_report(NULL, &r), STRATA_EINVAL);
    assert_msg_has("w is NULL");
}

static void test_worker_budget_unlimited_by_default(void **state)
{
    strata_worker_config cfg;
    strata_worker *w;
    strata_buffer *b;
    strata_tier_report r;

    (void)state;
    strata_worker_config_init(&cfg, 3);
    assert_int_equal(strata_worker_create(&cfg, &w), STRATA_OK);
    assert_int_equal(strata_worker_create_buffer(w, 1u << 20, &b), STRATA_OK);
    assert_int_equal(strata_worker_memory_report(w, &r), STRATA_OK);
    assert_true(r.tiers[STRATA_TIER_RAM].budget == UINT64_MAX);
    assert_int_equal(r.tiers[STRATA_TIER_RAM].live, 1u << 20);
    assert_int_equal(strata_buffer_release(b), STRATA_OK);
    assert_int_equal(strata_worker_memory_report(w, &r), STRATA_OK);
    assert_int_equal(r.tiers[STRATA_TIER_RAM].live, 0);
    assert_int_equal(r.tiers[STRATA_TIER_RAM].peak, 1u << 20);
    assert_int_equal(strata_worker_destroy(w), STRATA_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worker_budget_edges),
        cmocka_unit_test(test_worker_budget_config_refused),
        cmocka_unit_test(test_worker_budget_unlimited_by_default),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
