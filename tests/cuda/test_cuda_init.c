/* A worker with platform = "cuda" on a machine without a usable CUDA
 * device: strata_worker_init fails fast with an error naming the chip and
 * the reason, leaves no process, shm segment or fd behind, and the worker
 * process itself never loads the plug-in or libcuda (only chip processes
 * do, after the fork). Runs without a GPU: the driver is made absent, or
 * is the toolkit's stub libcuda, by STRATA_CUDA_DRIVER.
 *
 * Linked with the shared libstrata, so that the loader's default search
 * (beside libstrata.so) is what finds the plug-in. */
#include "testutil.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <strata/cuda.h>
#include <strata/strata.h>
#include <string.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

/* Generous: a chip that fails its init answers in milliseconds. */
#define FAIL_FAST_S 30.0

struct expect {
    strata_err err;
    const char *has[4]; /* substrings of the message, NULL-terminated */
    const char *lacks;  /* not in the message (NULL: no check) */
    bool parent_maps;   /* the test itself loaded libcuda in this process */
};

/* Whether this process has a CUDA library or the plug-in mapped. */
static bool maps_cuda(char *which, size_t cap)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[1024];
    bool found = false;

    assert_non_null(f);
    while (!found && fgets(line, sizeof(line), f))
        if (strstr(line, "libcuda") || strstr(line, "libstrata-cuda") ||
            strstr(line, "libnccl")) {
            snprintf(which, cap, "%s", line);
            found = true;
        }
    fclose(f);
    return found;
}

static void init_fails(size_t num_chips, size_t num_subs,
                       const struct expect *want)
{
    static const int ids[] = {0, 1, 2, 3};
    testutil_snapshot before;
    strata_worker_config cfg;
    strata_worker *w = NULL;
    char msg[STRATA_ERRMSG_MAX], which[1024];
    double t0;

    testutil_snapshot_take(&before);
    strata_worker_config_init(&cfg, 3);
    cfg.platform = "cuda";
    cfg.chip_ids = ids;
    cfg.num_chips = num_chips;
    cfg.num_sub_workers = num_subs;
    assert_int_equal(strata_worker_create(&cfg, &w), STRATA_OK);
    t0 = testutil_now();
    assert_int_equal(strata_worker_init(w), want->err);
    snprintf(msg, sizeof(msg), "%s", strata_errmsg());
    print_message("strata_worker_init: %s\n", msg);
    assert_true(testutil_now() - t0 < FAIL_FAST_S);
    assert_non_null(strstr(msg, "chip "));
    assert_non_null(strstr(msg, " failed to start: "));
    for (int i = 0; want->has[i]; i++)
        if (!strstr(msg, want->has[i]))
            fail_msg("'%s' lacks '%s'", msg, want->has[i]);
    if (want->lacks && strstr(msg, want->lacks))
        fail_msg("'%s' has '%s'", msg, want->lacks);
    assert_int_equal(strata_worker_destroy(w), STRATA_OK);
    testutil_assert_clean(&before);
    if (!want->parent_maps && maps_cuda(which, sizeof(which)))
        fail_msg("the worker process mapped %s", which);
}

static int set_env(void **state)
{
    (void)state;
    unsetenv("STRATA_CUDA_PLUGIN");
    unsetenv("STRATA_CUDA_DRIVER");
    unsetenv("STRATA_CUDA_DEVICES");
    return 0;
}

/* No libcuda.so.1 at all (a machine without the NVIDIA driver). */
static void test_cuda_init_no_driver_enotsup(void **state)
{
    const struct expect want = {
        .err = STRATA_ENOTSUP,
        .has = {"CUDA driver not available",
                "/nonexistent/libcuda.so.1: cannot open shared object file",
                NULL}};

    (void)state;
    if (!STRATA_CUDA_PLUGIN_BUILT)
        skip(); /* STRATA_CUDA=AUTO found no toolkit: no plug-in */
    setenv("STRATA_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
    init_fails(1, 0, &want);
    init_fails(3, 1, &want); /* several chips and a sub: all rolled back */
}

/* The toolkit's stub libcuda (what links, on a machine with no driver):
 * cuInit answers CUDA_ERROR_STUB_LIBRARY. */
static void test_cuda_init_stub_driver_enotsup(void **state)
{
    const struct expect want = {
        .err = STRATA_ENOTSUP,
        .has = {"cuInit failed", "CUDA_ERROR_STUB_LIBRARY (34)", "stub"},
        .lacks = "fork"}; /* this process never loaded libcuda */

    (void)state;
    /* No plug-in, or no stub here (a bundle run elsewhere). */
    if (!STRATA_CUDA_PLUGIN_BUILT || access(STRATA_CUDA_STUB, R_OK) != 0)
        skip();
    setenv("STRATA_CUDA_DRIVER", STRATA_CUDA_STUB, 1);
    init_fails(2, 0, &want);
}

/* The plug-in itself is missing (a build with STRATA_CUDA=OFF). */
static void test_cuda_init_no_plugin_enotsup(void **state)
{
    const struct expect want = {.err = STRATA_ENOTSUP,
                                .has = {"CUDA backend plug-in cannot be loaded",
                                        "STRATA_CUDA_PLUGIN",
                                        "/nonexistent/libstrata-cuda.so"}};

    (void)state;
    setenv("STRATA_CUDA_PLUGIN", "/nonexistent/libstrata-cuda.so", 1);
    init_fails(1, 0, &want);
}

/* A malformed chip-to-device map is refused before the driver is asked. */
static void test_cuda_init_bad_device_map_einval(void **state)
{
    const struct expect want = {
        .err = STRATA_EINVAL, .has = {"STRATA_CUDA_DEVICES", "'1=gpu0'", NULL}};

    (void)state;
    if (!STRATA_CUDA_PLUGIN_BUILT)
        skip();
    setenv("STRATA_CUDA_DEVICES", "0=0,1=gpu0", 1);
    setenv("STRATA_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
    init_fails(2, 0, &want);
}

/* device_ordinals is checked at create: a negative entry names its chip;
 * a platform other than cuda has no device ordinals. */
static void test_cuda_init_device_ordinals_refused_at_create(void **state)
{
    static const int ids[] = {4, 7};
    const int bad[] = {0, -1};
    strata_worker_config cfg;
    strata_worker *w = NULL;

    (void)state;
    strata_worker_config_init(&cfg, 3);
    cfg.platform = "cuda";
    cfg.chip_ids = ids;
    cfg.num_chips = 2;
    cfg.device_ordinals = bad;
    assert_int_equal(strata_worker_create(&cfg, &w), STRATA_EINVAL);
    assert_null(w);
    print_message("negative: %s\n", strata_errmsg());
    assert_non_null(strstr(strata_errmsg(), "device_ordinals[1] is -1"));
    assert_non_null(strstr(strata_errmsg(), "chip 7"));

    cfg.platform = "sim";
    cfg.device_ordinals = (const int[]){0, 1};
    assert_int_equal(strata_worker_create(&cfg, &w), STRATA_EINVAL);
    assert_null(w);
    assert_non_null(strstr(strata_errmsg(), "device_ordinals"));
    assert_non_null(strstr(strata_errmsg(), "'sim'"));
}

/* The config's device_ordinals reach each chip process and come before
 * STRATA_CUDA_DEVICES: with them, a malformed map is never read, and the
 * chip goes on to the (absent) driver. */
static void test_cuda_init_device_ordinals_override_env_map(void **state)
{
    const struct expect want = {.err = STRATA_ENOTSUP,
                                .has = {"CUDA driver not available", NULL},
                                .lacks = "STRATA_CUDA_DEVICES"};
    static const int ids[] = {0, 1};
    const int ordinals[] = {0, 0};
    testutil_snapshot before;
    strata_worker_config cfg;
    strata_worker *w = NULL;
    char msg[STRATA_ERRMSG_MAX];

    (void)state;
    if (!STRATA_CUDA_PLUGIN_BUILT)
        skip();
    setenv("STRATA_CUDA_DEVICES", "0=0,1=gpu0", 1);
    setenv("STRATA_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
    testutil_snapshot_take(&before);
    strata_worker_config_init(&cfg, 3);
    cfg.platform = "cuda";
    cfg.chip_ids = ids;
    cfg.num_chips = 2;
    cfg.device_ordinals = ordinals;
    assert_int_equal(strata_worker_create(&cfg, &w), STRATA_OK);
    assert_int_equal(strata_worker_init(w), want.err);
    snprintf(msg, sizeof(msg), "%s", strata_errmsg());
    print_message("strata_worker_init: %s\n", msg);
    assert_non_null(strstr(msg, want.has[0]));
    assert_null(strstr(msg, want.lacks));
    assert_int_equal(strata_worker_destroy(w), STRATA_OK);
    testutil_assert_clean(&before);
}

/* A worker process that loaded libcuda before it forked its chips: the
 * chips' failure says that CUDA does not survive fork. Last: the stub
 * stays mapped in this process. */
static void test_cuda_init_driver_loaded_before_fork_says_so(void **state)
{
    const struct expect want = {.err = STRATA_ENOTSUP,
                                .has = {"cuInit failed",
                                        "CUDA does not survive fork",
                                        "before strata_worker_init"},
                                .parent_maps = true};
    void *stub;

    (void)state;
    if (!STRATA_CUDA_PLUGIN_BUILT || access(STRATA_CUDA_STUB, R_OK) != 0)
        skip();
    stub = dlopen(STRATA_CUDA_STUB, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(stub);
    setenv("STRATA_CUDA_DRIVER", STRATA_CUDA_STUB, 1);
    init_fails(1, 0, &want);
    dlclose(stub);
}

/* The accessors answer "not a cuda chip" outside a cuda chip process. */
static void test_cuda_init_accessors_null_outside_chip(void **state)
{
    (void)state;
    assert_null(strata_chip_cuda_stream(NULL));
    assert_int_equal(strata_chip_cuda_device(NULL), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_cuda_init_no_driver_enotsup, set_env),
        cmocka_unit_test_setup(test_cuda_init_stub_driver_enotsup, set_env),
        cmocka_unit_test_setup(test_cuda_init_no_plugin_enotsup, set_env),
        cmocka_unit_test_setup(test_cuda_init_bad_device_map_einval, set_env),
        cmocka_unit_test_setup(test_cuda_init_device_ordinals_refused_at_create,
                               set_env),
        cmocka_unit_test_setup(test_cuda_init_device_ordinals_override_env_map,
                               set_env),
        cmocka_unit_test(test_cuda_init_accessors_null_outside_chip),
        cmocka_unit_test_setup(test_cuda_init_driver_loaded_before_fork_says_so,
                               set_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
