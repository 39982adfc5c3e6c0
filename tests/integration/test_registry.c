/*
 * The callable registry through the public API: names, digests, kinds,
 * loadable modules (and running a module's kernel on a real chip).
 */
#define _GNU_SOURCE
#include "it_kernels.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

#if !defined(STRATA_TEST_MODULE_PATH) ||                                       \
    !defined(STRATA_TEST_MODULE_NOSYM_PATH) ||                                 \
    !defined(STRATA_TEST_MODULE_FAIL_PATH)
#error "the STRATA_TEST_MODULE_*_PATH definitions name the test modules"
#endif

static strata_err kernel_a(strata_chip *chip, const strata_args *a)
{
    (void)chip;
    (void)a;
    return STRATA_OK;
}

static strata_err kernel_b(strata_chip *chip, const strata_args *a)
{
    (void)chip;
    (void)a;
    return STRATA_EIO;
}

static strata_err orch_a(strata_orch *o, const strata_args *a, void *u)
{
    (void)o;
    (void)a;
    (void)u;
    return STRATA_OK;
}

static strata_err sub_a(const strata_args *a)
{
    (void)a;
    return STRATA_OK;
}

/* SHA-256("kind:name") computed independently of strata. */
static void expected_digest(const char *kind, const char *name, uint8_t out[32])
{
    char text[256];
    unsigned int len = 0;
    int n = snprintf(text, sizeof(text), "%s:%s", kind, name);
    assert_true(n > 0 && (size_t)n < sizeof(text));
    assert_int_equal(EVP_Digest(text, (size_t)n, out, &len, EVP_sha256(), NULL),
                     1);
    assert_int_equal(len, 32);
}

static void assert_digest(strata_callable c, const char *kind, const char *name)
{
    uint8_t want[32];
    char hex[65], want_hex[65];
    expected_digest(kind, name, want);
    assert_memory_equal(c.digest, want, 32);
    for (size_t i = 0; i < 32; i++)
        snprintf(want_hex + 2 * i, 3, "%02x", want[i]);
    assert_ptr_equal(strata_callable_digest_hex(c, hex), hex);
    assert_string_equal(hex, want_hex);
}

static strata_callable callable_of(uint32_t kind, const char *kind_text,
                                   const char *name)
{
    strata_callable c;
    memset(&c, 0, sizeof(c));
    c.kind = kind;
    expected_digest(kind_text, name, c.digest);
    return c;
}

static void test_registry_register_lookup_ok(void **state)
{
    (void)state;
    strata_callable c;
    it_ok(strata_register_kernel("reg.alpha", kernel_a, &c));
    assert_int_equal(c.kind, STRATA_CALLABLE_KERNEL);
    assert_digest(c, "kernel", "reg.alpha");
    assert_non_null(strata_callable_name(c));
    assert_string_equal(strata_callable_name(c), "reg.alpha");
}

static void test_registry_same_name_same_fn_same_digest(void **state)
{
    (void)state;
    strata_callable c1, c2;
    it_ok(strata_register_kernel("reg.twice", kernel_a, &c1));
    it_ok(strata_register_kernel("reg.twice", kernel_a, &c2));
    assert_memory_equal(&c1, &c2, sizeof(c1));
}

static void test_registry_same_name_other_fn_eexist(void **state)
{
    (void)state;
    strata_callable c1, c2;
    it_ok(strata_register_kernel("reg.clash", kernel_a, &c1));
    memset(&c2, 0x5a, sizeof(c2));
    it_expect(STRATA_EEXIST,
              strata_register_kernel("reg.clash", kernel_b, &c2));
    /* Output written only on success. */
    for (size_t i = 0; i < sizeof(c2.digest); i++)
        assert_int_equal(c2.digest[i], 0x5a);
    assert_true(strata_errmsg()[0] != '\0');
    /* The first registration stays. */
    assert_string_equal(strata_callable_name(c1), "reg.clash");
}

static void test_registry_kinds_are_separate(void **state)
{
    (void)state;
    strata_callable k, o, s;
    it_ok(strata_register_kernel("reg.shared", kernel_a, &k));
    it_ok(strata_register_orch("reg.shared", orch_a, &o));
    it_ok(strata_register_sub("reg.shared", sub_a, &s));
    assert_int_equal(o.kind, STRATA_CALLABLE_ORCH);
    assert_int_equal(s.kind, STRATA_CALLABLE_SUB);
    assert_digest(k, "kernel", "reg.shared");
    assert_digest(o, "orch", "reg.shared");
    assert_digest(s, "sub", "reg.shared");
    assert_memory_not_equal(k.digest, o.digest, 32);
    assert_memory_not_equal(o.digest, s.digest, 32);
    assert_string_equal(strata_callable_name(o), "reg.shared");
    assert_string_equal(strata_callable_name(s), "reg.shared");
}

static void test_registry_bad_names_einval(void **state)
{
    (void)state;
    strata_callable c;
    char name[129];
    it_expect(STRATA_EINVAL, strata_register_kernel(NULL, kernel_a, &c));
    it_expect(STRATA_EINVAL, strata_register_kernel("", kernel_a, &c));
    it_expect(STRATA_EINVAL, strata_register_kernel("reg.nullfn", NULL, &c));
    it_expect(STRATA_EINVAL, strata_register_orch("reg.nullfn", NULL, &c));
    it_expect(STRATA_EINVAL, strata_register_sub("reg.nullfn", NULL, &c));
    memset(name, 'n', 128);
    name[128] = '\0'; /* 128 bytes: one too many */
    it_expect(STRATA_EINVAL, strata_register_kernel(name, kernel_a, &c));
    name[127] = '\0'; /* 127 bytes: the longest legal name */
    it_ok(strata_register_kernel(name, kernel_a, &c));
    assert_string_equal(strata_callable_name(c), name);
    assert_digest(c, "kernel", name);
}

static void test_registry_unknown_callable_name_null(void **state)
{
    (void)state;
    strata_callable c =
        callable_of(STRATA_CALLABLE_KERNEL, "kernel", "reg.never_registered");
    assert_null(strata_callable_name(c));
    /* A known name under the wrong kind is unknown too. */
    strata_callable k;
    it_ok(strata_register_kernel("reg.kindcheck", kernel_a, &k));
    c = callable_of(STRATA_CALLABLE_SUB, "sub", "reg.kindcheck");
    assert_null(strata_callable_name(c));
}

static void test_registry_load_module_registers_kernel(void **state)
{
    (void)state;
    strata_callable c =
        callable_of(STRATA_CALLABLE_KERNEL, "kernel", "module_kernel");
    assert_null(strata_callable_name(c));
    it_ok(strata_load_module(STRATA_TEST_MODULE_PATH));
    assert_non_null(strata_callable_name(c));
    assert_string_equal(strata_callable_name(c), "module_kernel");
    /* Loading the same path again is a no-op. */
    it_ok(strata_load_module(STRATA_TEST_MODULE_PATH));
    /* The name is taken now by the module's function. */
    strata_callable mine;
    it_expect(STRATA_EEXIST,
              strata_register_kernel("module_kernel", kernel_a, &mine));
}

struct module_run {
    strata_callable c;
    strata_buffer *b;
};

static strata_err module_orch(strata_orch *o, const strata_args *a, void *u)
{
    (void)a;
    struct module_run *m = u;
    return it_submit1(o, m->c, 1, m->b, 0, 2, STRATA_OUT);
}

static void test_registry_module_kernel_runs_on_chip(void **state)
{
    (void)state;
    testutil_snapshot before;
    testutil_snapshot_take(&before);
    static const int ids[] = {0, 1};
    struct module_run m;
    strata_worker *w = NULL;
    /* Loaded before init, so the chips inherit it. */
    it_ok(strata_load_module(STRATA_TEST_MODULE_PATH));
    m.c = callable_of(STRATA_CALLABLE_KERNEL, "kernel", "module_kernel");
    it_ok(it_worker_start(ids, 2, 0, &w));
    it_ok(strata_worker_create_buffer(w, 8, &m.b));
    it_ok(strata_worker_run(w, module_orch, NULL, &m));
    assert_int_equal(it_u32(m.b)[0], 0xC0FFEE);
    assert_int_equal(it_u32(m.b)[1], 1);
    it_ok(it_worker_destroy(w));
    testutil_assert_clean(&before);
}

static void test_registry_load_missing_file_eio(void **state)
{
    (void)state;
    testutil_snapshot before;
    testutil_snapshot_take(&before);
    it_expect(STRATA_EIO, strata_load_module("/nonexistent/libnothing.so"));
    assert_true(strata_errmsg()[0] != '\0');
    it_expect(STRATA_EINVAL, strata_load_module(NULL));
    testutil_assert_clean(&before);
}

static void test_registry_load_without_init_enoent(void **state)
{
    (void)state;
    testutil_snapshot before;
    testutil_snapshot_take(&before);
    it_expect(STRATA_ENOENT, strata_load_module(STRATA_TEST_MODULE_NOSYM_PATH));
    assert_non_null(strstr(strata_errmsg(), "strata_module_init"));
    testutil_assert_clean(&before);
}

static void test_registry_load_failing_init_propagates(void **state)
{
    (void)state;
    it_expect(STRATA_EPROTO, strata_load_module(STRATA_TEST_MODULE_FAIL_PATH));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_registry_register_lookup_ok,
                                  it_teardown),
        cmocka_unit_test_teardown(test_registry_same_name_same_fn_same_digest,
                                  it_teardown),
        cmocka_unit_test_teardown(test_registry_same_name_other_fn_eexist,
                                  it_teardown),
        cmocka_unit_test_teardown(test_registry_kinds_are_separate,
                                  it_teardown),
        cmocka_unit_test_teardown(test_registry_bad_names_einval, it_teardown),
        cmocka_unit_test_teardown(test_registry_unknown_callable_name_null,
                                  it_teardown),
        cmocka_unit_test_teardown(test_registry_load_module_registers_kernel,
                                  it_teardown),
        cmocka_unit_test_teardown(test_registry_module_kernel_runs_on_chip,
                                  it_teardown),
        cmocka_unit_test_teardown(test_registry_load_missing_file_eio,
                                  it_teardown),
        cmocka_unit_test_teardown(test_registry_load_without_init_enoent,
                                  it_teardown),
        cmocka_unit_test_teardown(test_registry_load_failing_init_propagates,
                                  it_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
