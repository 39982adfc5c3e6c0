/*
 * base/proc.h's reading of another process (start time, zombie) and the
 * stale-segment reclaim that relies on it: an ended process whose parent
 * has not reaped it (an orphan in a container whose init never reaps)
 * maps nothing, so its /dev/shm names are stale like a gone one's.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/proc.h"
#include "testutil.h"
#include "worker_int.h"

#define BOUND_S 20.0 /* a loaded machine */

static bool zombie(void *arg)
{
    return base_proc_zombie(*(pid_t *)arg);
}

/* A child that makes a segment named after itself, then ends: its pid is
 * a zombie until waited for. */
static pid_t ended_child(char *name, size_t cap)
{
    int p[2];
    pid_t pid;
    char c = 0;

    assert_int_equal(pipe(p), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char n[96];
        int fd;

        close(p[0]);
        snprintf(n, sizeof(n), "/strata-%u-%d-b-unitproc", (unsigned)getuid(),
                 (int)getpid());
        fd = shm_open(n, O_CREAT | O_EXCL | O_RDWR, 0600);
        c = fd >= 0;
        (void)!write(p[1], &c, 1);
        _exit(0);
    }
    close(p[1]);
    assert_int_equal(read(p[0], &c, 1), 1);
    close(p[0]);
    assert_int_equal(c, 1);
    snprintf(name, cap, "/strata-%u-%d-b-unitproc", (unsigned)getuid(),
             (int)pid);
    return pid;
}

static bool exists(const char *name)
{
    char path[128];

    snprintf(path, sizeof(path), "/dev/shm%s", name);
    return access(path, F_OK) == 0;
}

static void test_proc_self_runs_not_zombie(void **state)
{
    unsigned long long start = 0;

    (void)state;
    assert_true(base_proc_start_time(getpid(), &start));
    assert_true(start > 0);
    assert_false(base_proc_zombie(getpid()));
}

static void test_proc_ended_child_zombie_until_reaped(void **state)
{
    unsigned long long start;
    char name[96];
    pid_t pid;

    (void)state;
    pid = ended_child(name, sizeof(name));
    assert_true(testutil_wait_until(zombie, &pid, BOUND_S));
    assert_false(base_proc_start_time(pid, &start));
    /* The reclaim unlinks what the zombie named. */
    assert_true(exists(name));
    worker_reclaim_stale_segments();
    assert_false(exists(name));
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    assert_false(base_proc_zombie(pid));
    assert_false(base_proc_start_time(pid, &start));
}

/* A live process's names stay. */
static void test_proc_live_child_segment_kept(void **state)
{
    char name[96];
    int p[2], hold[2];
    pid_t pid;
    char c = 0;

    (void)state;
    assert_int_equal(pipe(p), 0);
    assert_int_equal(pipe(hold), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char n[96];

        close(p[0]);
        close(hold[1]);
        snprintf(n, sizeof(n), "/strata-%u-%d-b-unitproc", (unsigned)getuid(),
                 (int)getpid());
        c = shm_open(n, O_CREAT | O_EXCL | O_RDWR, 0600) >= 0;
        (void)!write(p[1], &c, 1);
        (void)!read(hold[0], &c, 1); /* until the parent closes its end */
        shm_unlink(n);
        _exit(0);
    }
    close(p[1]);
    close(hold[0]);
    assert_int_equal(read(p[0], &c, 1), 1);
    assert_int_equal(c, 1);
    snprintf(name, sizeof(name), "/strata-%u-%d-b-unitproc", (unsigned)getuid(),
             (int)pid);
    worker_reclaim_stale_segments();
    assert_true(exists(name));
    close(p[0]);
    close(hold[1]);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    assert_false(exists(name));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_proc_self_runs_not_zombie),
        cmocka_unit_test(test_proc_ended_child_zombie_until_reaped),
        cmocka_unit_test(test_proc_live_child_segment_kept),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
