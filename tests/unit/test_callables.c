/* The callable registry: digests, duplicates, kinds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "chip/registry.h"

#include <openssl/sha.h>
#include <string.h>

static strata_err k1(strata_chip *c, const strata_args *a)
{
    (void)c;
    (void)a;
    return STRATA_OK;
}

static strata_err k2(strata_chip *c, const strata_args *a)
{
    (void)c;
    (void)a;
    return STRATA_EIO;
}

static strata_err s1(const strata_args *a)
{
    (void)a;
    return STRATA_OK;
}

static void test_callables_digest_is_sha256_of_kind_and_name(void **state)
{
    unsigned char want[32];
    strata_callable c;

    (void)state;
    assert_int_equal(strata_register_kernel("unit.k1", k1, &c), STRATA_OK);
    SHA256((const unsigned char *)"kernel:unit.k1", 14, want);
    assert_memory_equal(c.digest, want, 32);
    assert_int_equal(c.kind, STRATA_CALLABLE_KERNEL);
    assert_string_equal(strata_callable_name(c), "unit.k1");
    assert_non_null(chip_registry_find(c.digest));
}

static void test_callables_same_name_other_fn_is_eexist(void **state)
{
    strata_callable a;
    strata_callable b;

    (void)state;
    assert_int_equal(strata_register_kernel("unit.dup", k1, &a), STRATA_OK);
    assert_int_equal(strata_register_kernel("unit.dup", k1, &b), STRATA_OK);
    assert_memory_equal(a.digest, b.digest, 32);
    assert_int_equal(strata_register_kernel("unit.dup", k2, &b), STRATA_EEXIST);
    assert_non_null(strstr(strata_errmsg(), "unit.dup"));
}

static void test_callables_kinds_have_separate_names(void **state)
{
    strata_callable k;
    strata_callable s;

    (void)state;
    assert_int_equal(strata_register_kernel("unit.both", k1, &k), STRATA_OK);
    assert_int_equal(strata_register_sub("unit.both", s1, &s), STRATA_OK);
    assert_memory_not_equal(k.digest, s.digest, 32);
    assert_int_equal(chip_registry_find(s.digest)->kind, STRATA_CALLABLE_SUB);
}

static void test_callables_bad_names_rejected(void **state)
{
    char longname[200];
    strata_callable c;

    (void)state;
    memset(longname, 'n', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    assert_int_equal(strata_register_kernel("", k1, &c), STRATA_EINVAL);
    assert_int_equal(strata_register_kernel(NULL, k1, &c), STRATA_EINVAL);
    assert_int_equal(strata_register_kernel(longname, k1, &c), STRATA_EINVAL);
    assert_int_equal(strata_register_kernel("x", NULL, &c), STRATA_EINVAL);
}

static void test_callables_unknown_digest_not_found(void **state)
{
    strata_callable c;
    char hex[65];

    (void)state;
    memset(&c, 0xab, sizeof(c));
    assert_null(strata_callable_name(c));
    assert_null(chip_registry_find(c.digest));
    strata_callable_digest_hex(c, hex);
    assert_int_equal(strlen(hex), 64);
    assert_int_equal(strncmp(hex, "abab", 4), 0);
}

/* A callable only looked up by name (an L4 naming what remote nodes
 * run) is named in messages, though nothing here can run it. */
static void test_callables_looked_up_name_known(void **state)
{
    strata_callable c;

    (void)state;
    assert_int_equal(
        strata_callable_by_name(STRATA_CALLABLE_ORCH, "unit.elsewhere", &c),
        STRATA_OK);
    assert_string_equal(strata_callable_name(c), "unit.elsewhere");
    assert_null(chip_registry_find(c.digest)); /* still not runnable */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_callables_digest_is_sha256_of_kind_and_name),
        cmocka_unit_test(test_callables_same_name_other_fn_is_eexist),
        cmocka_unit_test(test_callables_kinds_have_separate_names),
        cmocka_unit_test(test_callables_bad_names_rejected),
        cmocka_unit_test(test_callables_unknown_digest_not_found),
        cmocka_unit_test(test_callables_looked_up_name_known),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
