/* The tests' leak check (tests/util/testutil.c) tells a /dev/shm name by
 * its maker's pid and that process's start: a name of a live child of
 * ours is our leak, but one older than the process now holding its pid
 * was made by a dead process whose pid was recycled, and is another
 * test's business. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "testutil.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A child that lives until its pipe closes. */
static pid_t child_start(int *keep)
{
    int fds[2];
    pid_t pid;

    assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char c;

        close(fds[1]);
        while (read(fds[0], &c, 1) < 0)
            ;
        _exit(0);
    }
    close(fds[0]);
    *keep = fds[1];
    return pid;
}

static void child_end(pid_t pid, int keep)
{
    int st;

    close(keep);
    assert_int_equal(waitpid(pid, &st, 0), pid);
}

/* Makes /dev/shm/strata-<uid>-<pid>-t<ours>, aged age_s seconds (its
 * modification time set back; 0: as made). */
static void name_make(char *path, size_t cap, pid_t pid, int age_s)
{
    int fd;

    snprintf(path, cap, "/dev/shm/strata-%u-%d-t%d", (unsigned)getuid(),
             (int)pid, (int)getpid());
    fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    if (age_s) {
        struct timespec t[2];

        clock_gettime(CLOCK_REALTIME, &t[0]);
        t[0].tv_sec -= age_s;
        t[1] = t[0];
        assert_int_equal(futimens(fd, t), 0);
    }
    close(fd);
}

static void test_testutil_child_name_is_a_leak(void **state)
{
    static testutil_snapshot before;
    char path[128], msg[1024];
    size_t leaks;
    int keep;
    pid_t pid = child_start(&keep);

    (void)state;
    testutil_snapshot_take(&before);
    name_make(path, sizeof(path), pid, 0);
    leaks = testutil_count_leaks(&before, msg, sizeof(msg));
    unlink(path);
    child_end(pid, keep);
    assert_int_equal(leaks, 1);
    assert_non_null(strstr(msg, path + 9));
}

/* The same name, made a minute before the process that has its pid now
 * started: a recycled pid, not our leak. */
static void test_testutil_recycled_pid_is_not_ours(void **state)
{
    static testutil_snapshot before;
    char path[128], msg[1024];
    size_t leaks;
    int keep;
    pid_t pid = child_start(&keep);

    (void)state;
    testutil_snapshot_take(&before);
    name_make(path, sizeof(path), pid, 60);
    leaks = testutil_count_leaks(&before, msg, sizeof(msg));
    unlink(path);
    child_end(pid, keep);
    assert_int_equal(leaks, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_testutil_child_name_is_a_leak),
        cmocka_unit_test(test_testutil_recycled_pid_is_not_ours),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
