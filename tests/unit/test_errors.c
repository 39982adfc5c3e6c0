/* Error codes, names, text and the thread-local detail message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/err.h"

#include <pthread.h>
#include <string.h>

static void test_errors_every_code_has_name_and_text(void **state)
{
    (void)state;
#define CHECK_(name, value, text)                                              \
    assert_int_equal(name, value);                                             \
    assert_string_equal(strata_errname(name), #name);                          \
    assert_string_equal(strata_strerror(name), text);
    STRATA_ERRORS(CHECK_)
#undef CHECK_
}

static void test_errors_unknown_code_has_placeholder(void **state)
{
    (void)state;
    assert_string_equal(strata_strerror((strata_err)9999), "unknown error");
    assert_string_equal(strata_errname((strata_err)9999), "STRATA_E?");
}

static void test_errors_numbers_are_stable(void **state)
{
    (void)state;
    /* A wire contract: these never change. */
    assert_int_equal(STRATA_EINVAL, 1);
    assert_int_equal(STRATA_ETASK, 6);
    assert_int_equal(STRATA_EPEER, 7);
    assert_int_equal(STRATA_ESYS, 14);
    assert_int_equal(STRATA_EBUDGET, 15);
}

static void test_errors_message_truncated_not_overflowed(void **state)
{
    char big[4 * STRATA_ERRMSG_MAX];

    (void)state;
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    strata_errmsg_set("%s", big);
    assert_int_equal(strlen(strata_errmsg()), STRATA_ERRMSG_MAX - 1);
}

static void *other_thread(void *arg)
{
    static char empty[] = "empty";
    static char set[] = "set";

    (void)arg;
    return strata_errmsg()[0] == '\0' ? empty : set;
}

static void test_errors_message_is_thread_local(void **state)
{
    pthread_t t;
    void *res;

    (void)state;
    strata_errmsg_set("only here");
    assert_int_equal(pthread_create(&t, NULL, other_thread, NULL), 0);
    pthread_join(t, &res);
    assert_string_equal((const char *)res, "empty");
    assert_string_equal(strata_errmsg(), "only here");
}

static void test_errors_fail_errno_maps_and_appends(void **state)
{
    (void)state;
    assert_int_equal(base_fail_errno(12 /* ENOMEM */, "mmap"), STRATA_ENOMEM);
    assert_int_equal(base_fail_errno(2 /* ENOENT */, "open %s", "f"),
                     STRATA_ESYS);
    assert_string_equal(strata_errmsg(), "open f: No such file or directory");
    base_errmsg_prefix("ctx %d", 3);
    assert_string_equal(strata_errmsg(),
                        "ctx 3: open f: No such file or directory");
}

/* Context added by passing the old detail as an argument: the new one
 * reads it whole, not the half-written buffer. */
static void test_errors_fail_may_quote_the_old_detail(void **state)
{
    (void)state;
    base_fail(STRATA_EINVAL, "bytes [%d, %d) outside", 60, 76);
    assert_int_equal(
        base_fail(STRATA_EINVAL, "host range: %s", strata_errmsg()),
        STRATA_EINVAL);
    assert_string_equal(strata_errmsg(), "host range: bytes [60, 76) outside");
    strata_errmsg_set("%s; %s", strata_errmsg(), "again");
    assert_string_equal(strata_errmsg(),
                        "host range: bytes [60, 76) outside; again");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors_every_code_has_name_and_text),
        cmocka_unit_test(test_errors_unknown_code_has_placeholder),
        cmocka_unit_test(test_errors_numbers_are_stable),
        cmocka_unit_test(test_errors_message_truncated_not_overflowed),
        cmocka_unit_test(test_errors_message_is_thread_local),
        cmocka_unit_test(test_errors_fail_errno_maps_and_appends),
        cmocka_unit_test(test_errors_fail_may_quote_the_old_detail),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
