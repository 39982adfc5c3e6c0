/* The tier runtime's CUDA tiers (docs/tiers.md): device and host-pinned
 * instances through the CUDA plug-in, loaded in this process.
 *
 *   cuda_tier nogpu   with the toolkit's stub libcuda as the driver
 *                     (skipped where there is none): each tier refused
 *                     with STRATA_ENOTSUP naming the tier and the reason
 *                     (CUDA_ERROR_STUB_LIBRARY), leaving no trace in the
 *                     accounting;
 *   cuda_tier gpu     on a device (exit 77, skipped, when none): bytes
 *                     survive ram -> device -> host-pinned -> nvme ->
 *                     device -> ram, across chunks and an odd tail;
 *                     host reads and writes of a device instance; the
 *                     device budget; a cuda worker forked after the tier
 *                     set CUDA up refuses to start, naming why.
 * Linked with the shared libstrata, so the plug-in is found beside it. */
#define _GNU_SOURCE
#include <strata/strata.h>
#include <strata/tier.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "testutil.h"

#define EXIT_SKIPPED 77
/* Three 1 MiB chunks and an odd tail. */
#define CAP ((uint64_t)3 * 1024 * 1024 + 4097)

static char nvme_dir[] = "/tmp/strata-cuda-tier-XXXXXX";

static void msg_has(const char *needle)
{
    if (!strstr(strata_errmsg(), needle))
        fail_msg("error message lacks \"%s\": %s", needle, strata_errmsg());
}

static strata_tier_runtime *runtime(const char *budgets)
{
    strata_tier_config cfg;
    strata_tier_runtime *rt = NULL;

    strata_tier_config_init(&cfg);
    cfg.nvme_dir = nvme_dir;
    cfg.budgets = budgets;
    assert_int_equal(strata_tier_runtime_create(&cfg, &rt), STRATA_OK);
    return rt;
}

static void move(strata_tier_runtime *rt, strata_instance *src,
                 strata_instance *dst)
{
    strata_transfer_handle *t = NULL;
    strata_err err = strata_transfer(rt, src, dst, &t);

    if (!err)
        err = strata_transfer_wait(t, 60);
    if (err)
        fail_msg("transfer: %s: %s", strata_errname(err), strata_errmsg());
    strata_transfer_free(t);
}

static void test_cuda_tier_refused_without_driver(void **state)
{
    static const char *const tiers[] = {"device", "hbm", "host-pinned",
                                        "pinned_ram"};
    strata_tier_runtime *rt;
    strata_tier_report r;
    strata_instance *i = NULL;
    const char *stub = STRATA_CUDA_STUB;

    (void)state;
    /* Without the stub (a bundle on a GPU machine) the real driver would
     * answer: nothing to check here. */
    if (!stub[0] || access(stub, R_OK) != 0)
        skip();
    setenv("STRATA_CUDA_DRIVER", stub, 1);
    rt = runtime("device=1MiB");
    for (size_t k = 0; k < 4; k++) {
        assert_int_equal(strata_instance_allocate(rt, "x", 1, tiers[k], 8, &i),
                         STRATA_ENOTSUP);
        msg_has(k < 2 ? "tier 'device'" : "tier 'host-pinned'");
        msg_has("needs the CUDA backend");
        msg_has("CUDA_ERROR_STUB_LIBRARY");
        assert_null(i);
    }
    assert_int_equal(strata_tier_report_get(rt, &r), STRATA_OK);
    assert_int_equal(r.tiers[STRATA_TIER_DEVICE].live, 0);
    assert_int_equal(r.tiers[STRATA_TIER_DEVICE].instances, 0);
    assert_int_equal(strata_tier_runtime_destroy(rt), STRATA_OK);
    unsetenv("STRATA_CUDA_DRIVER");
}

static void test_cuda_tier_round_trip_on_device(void **state)
{
    strata_tier_runtime *rt = runtime("device=8MiB");
    strata_instance *ram, *dev, *pin, *nv, *dev2, *back, *extra = NULL;
    unsigned char *src = malloc(CAP), *got = malloc(CAP);
    strata_tier_report r;

    (void)state;
    assert_non_null(src);
    assert_non_null(got);
    for (uint64_t k = 0; k < CAP; k++)
        src[k] = (unsigned char)(k * 131 + 7);
    assert_int_equal(strata_instance_allocate(rt, "v", 1, "ram", CAP, &ram),
                     STRATA_OK);
    memcpy(strata_instance_data(ram), src, CAP);
    assert_int_equal(strata_instance_allocate(rt, "v", 1, "device", CAP, &dev),
                     STRATA_OK);
    assert_null(strata_instance_data(dev));
    assert_int_equal(
        strata_instance_allocate(rt, "v", 1, "host-pinned", CAP, &pin),
        STRATA_OK);
    assert_non_null(strata_instance_data(pin));
    assert_int_equal(strata_instance_allocate(rt, "v", 1, "nvme", CAP, &nv),
                     STRATA_OK);
    /* The budget holds two device instances of this size, not three. */
    assert_int_equal(strata_instance_allocate(rt, "v", 1, "hbm", CAP, &dev2),
                     STRATA_OK);
    assert_int_equal(
        strata_instance_allocate(rt, "v", 1, "device", CAP, &extra),
        STRATA_EBUDGET);
    msg_has("tier 'device'");
    assert_int_equal(strata_instance_allocate(rt, "v", 1, "ram", CAP, &back),
                     STRATA_OK);
    move(rt, ram, dev);
    move(rt, dev, pin);
    assert_memory_equal(strata_instance_data(pin), src, CAP);
    move(rt, pin, nv);
    move(rt, nv, dev2);
    move(rt, dev2, back);
    assert_memory_equal(strata_instance_data(back), src, CAP);
    /* Host access to a device instance: a write, then a read across a
     * chunk boundary. */
    assert_int_equal(strata_instance_write(dev, 1024 * 1024 - 3, "strata", 6),
                     STRATA_OK);
    assert_int_equal(strata_instance_read(dev, 1024 * 1024 - 5, got, 10),
                     STRATA_OK);
    assert_memory_equal(got, src + 1024 * 1024 - 5, 2);
    assert_memory_equal(got + 2, "strata", 6);
    assert_int_equal(strata_tier_report_get(rt, &r), STRATA_OK);
    assert_int_equal(r.moved[STRATA_TIER_RAM][STRATA_TIER_DEVICE], CAP);
    assert_int_equal(r.moved[STRATA_TIER_DEVICE][STRATA_TIER_HOST_PINNED], CAP);
    assert_int_equal(r.moved[STRATA_TIER_NVME][STRATA_TIER_DEVICE], CAP);
    assert_int_equal(r.tiers[STRATA_TIER_DEVICE].instances, 2);
    assert_int_equal(strata_instance_close(dev), STRATA_OK);
    assert_int_equal(strata_tier_report_get(rt, &r), STRATA_OK);
    assert_int_equal(r.tiers[STRATA_TIER_DEVICE].live, CAP);
    assert_int_equal(strata_tier_runtime_destroy(rt), STRATA_OK);
    free(src);
    free(got);
}

/* CUDA does not survive fork: a cuda worker started after this process
 * set the device tier up must fail at init, naming why. */
static void test_cuda_tier_then_cuda_worker_refused(void **state)
{
    static const int ids[1] = {0};
    strata_worker_config cfg;
    strata_worker *w = NULL;
    strata_err err;

    (void)state;
    strata_worker_config_init(&cfg, 3);
    cfg.platform = "cuda";
    cfg.chip_ids = ids;
    cfg.num_chips = 1;
    assert_int_equal(strata_worker_create(&cfg, &w), STRATA_OK);
    err = strata_worker_init(w);
    if (err == STRATA_OK)
        fail_msg("a cuda worker started after the device tier");
    msg_has("CUDA does not survive fork");
    assert_int_equal(strata_worker_destroy(w), STRATA_OK);
}

static testutil_snapshot snap;

static int group_setup(void **state)
{
    (void)state;
    testutil_snapshot_take(&snap);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    testutil_assert_clean(&snap);
    return 0;
}

/* Whether this process reaches a device: its first allocation there. */
static bool have_device(void)
{
    strata_tier_runtime *rt = runtime(NULL);
    strata_instance *probe = NULL;
    strata_err err =
        strata_instance_allocate(rt, "probe", 1, "device", 8, &probe);

    if (err)
        fprintf(stderr, "cuda_tier: no device: %s\n", strata_errmsg());
    if (strata_tier_runtime_destroy(rt) != STRATA_OK)
        return false;
    return err == STRATA_OK;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest nogpu[] = {
        cmocka_unit_test(test_cuda_tier_refused_without_driver),
    };
    const struct CMUnitTest gpu[] = {
        cmocka_unit_test(test_cuda_tier_round_trip_on_device),
        cmocka_unit_test(test_cuda_tier_then_cuda_worker_refused),
    };
    int rc;

    if (!mkdtemp(nvme_dir))
        return 1;
    if (argc > 1 && strcmp(argv[1], "gpu") == 0) {
        if (!have_device()) {
            rmdir(nvme_dir);
            return EXIT_SKIPPED;
        }
        rc = cmocka_run_group_tests(gpu, group_setup, group_teardown);
    } else {
        rc = cmocka_run_group_tests(nogpu, group_setup, group_teardown);
    }
    rmdir(nvme_dir);
    return rc;
}
