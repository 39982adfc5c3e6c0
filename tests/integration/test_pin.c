/*
 * STRATA_PIN: unset or 0, chips keep the worker's CPU set; STRATA_PIN=1
 * binds the i-th chip of a worker (in chip_ids order, not id order) to the
 * i-th CPU the worker may run on, as long as the chips do not outnumber
 * those CPUs (else nothing is bound). Checked from outside with
 * sched_getaffinity on the chip processes, for 2 and 4 chips: on a
 * 2-CPU machine the first are bound and the second are not.
 */
#define _GNU_SOURCE
#include "it_kernels.h"

#include <sched.h>
#include <stdlib.h>

static const int ids2[2] = {1, 0};
static const int ids4[4] = {3, 1, 0, 2};

/* The k-th CPU of set. */
static int nth_cpu(const cpu_set_t *set, int k)
{
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, set) && k-- == 0)
            return cpu;
    return -1;
}

static void check_chips(const char *pin, const int *ids, int n)
{
    testutil_snapshot before;
    strata_worker_config cfg;
    strata_worker *w = NULL;
    cpu_set_t mine;
    bool pinned;

    if (pin)
        assert_int_equal(setenv("STRATA_PIN", pin, 1), 0);
    else
        assert_int_equal(unsetenv("STRATA_PIN"), 0);
    testutil_snapshot_take(&before);
    assert_int_equal(sched_getaffinity(0, sizeof(mine), &mine), 0);
    pinned = pin && pin[0] == '1' && n <= CPU_COUNT(&mine);
    print_message("STRATA_PIN=%s, %d chips, %d CPUs: %s\n",
                  pin ? pin : "(unset)", n, CPU_COUNT(&mine),
                  pinned ? "each on its own CPU" : "not bound");
    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = ids;
    cfg.num_chips = (size_t)n;
    it_ok(strata_worker_create(&cfg, &w));
    it_ok(strata_worker_init(w));
    for (int i = 0; i < n; i++) {
        cpu_set_t set;
        int pid = strata_worker_chip_pid(w, ids[i]);

        assert_true(pid > 0);
        assert_int_equal(sched_getaffinity(pid, sizeof(set), &set), 0);
        if (!pinned) {
            assert_true(CPU_EQUAL(&set, &mine));
            continue;
        }
        assert_int_equal(CPU_COUNT(&set), 1);
        if (!CPU_ISSET(nth_cpu(&mine, i), &set))
            fail_msg("chip %d (index %d) is not on CPU %d", ids[i], i,
                     nth_cpu(&mine, i));
    }
    it_ok(strata_worker_destroy(w));
    unsetenv("STRATA_PIN");
    testutil_assert_clean(&before);
}

static void test_pin_unset_leaves_chips_alone(void **state)
{
    (void)state;
    check_chips(NULL, ids2, 2);
    check_chips("0", ids4, 4);
}

static void test_pin_binds_chip_i_to_cpu_i_when_they_fit(void **state)
{
    (void)state;
    check_chips("1", ids2, 2);
    check_chips("1", ids4, 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pin_unset_leaves_chips_alone),
        cmocka_unit_test(test_pin_binds_chip_i_to_cpu_i_when_they_fit),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
