/* base_log: one line per call, whatever the text holds. A name a peer
 * chose (a node's HELLO, a comm profile) reaches the daemon's log through
 * these lines: a newline or an escape sequence in it must not start a
 * forged line or reach the terminal raw. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/log.h"

#include <string.h>
#include <unistd.h>

/* Logs "<prefix>'<arg>'" with stderr on a pipe; returns what was written. */
static void capture(char *out, size_t cap, const char *arg)
{
    int p[2], saved = dup(STDERR_FILENO);
    ssize_t n;

    assert_true(saved >= 0);
    assert_int_equal(pipe(p), 0);
    assert_true(dup2(p[1], STDERR_FILENO) >= 0);
    base_log(BASE_LOG_ERROR, "session for '%s'", arg);
    assert_true(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);
    close(p[1]);
    n = read(p[0], out, cap - 1);
    close(p[0]);
    assert_true(n > 0);
    out[n] = '\0';
}

static void test_log_control_characters_escaped(void **state)
{
    char got[2048];

    (void)state;
    base_log_set_role("test");
    capture(got, sizeof(got),
            "evil\nstrata strata-node[1] warn: FORGED\x1b[31m\x7f\t");
    /* One line, ending in the newline base_log adds. */
    assert_non_null(strchr(got, '\n'));
    assert_int_equal(strchr(got, '\n') - got, (long)strlen(got) - 1);
    assert_null(strchr(got, '\x1b'));
    assert_non_null(strstr(got, "'evil\\x0astrata strata-node[1] warn: "
                                "FORGED\\x1b[31m\\x7f\\x09'"));
    assert_true(strncmp(got, "strata test[", 12) == 0);
}

/* Bytes of 0x80 and above: printable UTF-8 stays as it is; C1 controls
 * (raw or encoded), line and paragraph separators, overlong forms and
 * bytes that are no UTF-8 are escaped. */
static void test_log_high_bytes_escaped_unless_printable(void **state)
{
    /* Each piece apart: a hex escape would take the digits after it. */
    static const char in[] = "caf\xc3\xa9 "
                             "\x9b"
                             "31m "
                             "\xc2\x9b \xe2\x80\xa8 \xff\xfe "
                             "\xc0\x8a \xed\xa0\x80 \xf0\x9f\x98\x80 "
                             "\xe2\x82";
    static const char want[] = "'caf\xc3\xa9 \\x9b31m \\xc2\\x9b "
                               "\\xe2\\x80\\xa8 \\xff\\xfe \\xc0\\x8a "
                               "\\xed\\xa0\\x80 \xf0\x9f\x98\x80 "
                               "\\xe2\\x82'";
    char got[2048];

    (void)state;
    capture(got, sizeof(got), in);
    if (!strstr(got, want))
        fail_msg("got %s", got);
    assert_int_equal(strchr(got, '\n') - got, (long)strlen(got) - 1);
}

static void test_log_long_line_cut_whole(void **state)
{
    char big[3000], got[2048];

    (void)state;
    memset(big, '\n', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    capture(got, sizeof(got), big);
    /* Cut at the line's size, never inside an escape, one line still. */
    assert_true(strlen(got) <= 1024);
    assert_int_equal(strchr(got, '\n') - got, (long)strlen(got) - 1);
    assert_true(strlen(got) >= 4);
    assert_memory_equal(got + strlen(got) - 5, "\\x0a\n", 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log_control_characters_escaped),
        cmocka_unit_test(test_log_high_bytes_escaped_unless_printable),
        cmocka_unit_test(test_log_long_line_cut_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
