/*
 * base_cpu_oversubscribed (base/cpu.h): with more busy processes than
 * CPUs it must say so within a few of its 20 ms looks. Whether an idle
 * machine reads as not oversubscribed depends on what else runs on it,
 * so that side is not asserted.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/cpu.h"
#include "testutil.h"

#define BOUND_S 20.0 /* a loaded machine; a look takes 20 ms */
#define MAX_BUSY 512

static bool oversubscribed(void *arg)
{
    (void)arg;
    return base_cpu_oversubscribed();
}

static void test_cpu_busy_children_oversubscribed(void **state)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    pid_t pids[MAX_BUSY];
    int n = (int)cpus + 2;
    pid_t parent = getpid();

    (void)state;
    assert_true(cpus > 0 && n <= MAX_BUSY);
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent)
                _exit(0);
            for (;;)
                __asm__ volatile("" ::: "memory");
        }
    }
    bool seen = testutil_wait_until(oversubscribed, NULL, BOUND_S);
    for (int i = 0; i < n; i++) {
        kill(pids[i], SIGKILL);
        waitpid(pids[i], NULL, 0);
    }
    assert_true(seen);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_busy_children_oversubscribed),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
