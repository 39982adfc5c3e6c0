/* it_countdown.h. */
#include "it_countdown.h"
#include "base/fault.h"
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

int it_countdown_verdict(long n, const strata_err *e, const char *const *steps,
                         int nsteps, const char *msg)
{
    for (int i = 0; i < nsteps; i++) {
        if (e[i] != STRATA_OK && e[i] != STRATA_ENOMEM)
            fail_msg("n=%ld: %s returned %s (%s)", n, steps[i],
                     strata_errname(e[i]), msg);
        if (e[i] == STRATA_ENOMEM && i != nsteps - 1)
            return i + 1;
    }
    return e[nsteps - 1] == STRATA_ENOMEM ? nsteps : 0;
}

void it_alloc_countdown(it_countdown_pass pass)
{
    testutil_snapshot before;
    char msg[1024];
    long n;

    testutil_snapshot_take(&before);
    for (n = 1; n < 20000; n++) {
        base_alloc_fail_after(n);
        int failed = pass(n);
        long fired = base_alloc_failures();

        base_alloc_fail_after(0);
        if (failed && fired == 0)
            fail_msg("n=%ld: ENOMEM at step %d without an injected failure", n,
                     failed);
        if (testutil_count_leaks(&before, msg, sizeof(msg)) != 0)
            fail_msg("n=%ld (step %d failed): leaked%s", n, failed, msg);
        if (!failed && fired == 0)
            break;
    }
    assert_true(n < 20000);
    print_message("allocation countdown: %ld passes\n", n);
    testutil_assert_clean(&before);
}
