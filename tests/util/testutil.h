/*
 * Test utilities shared by strata's CMocka tests: a snapshot of the
 * process's resources (fds, threads, child processes, strata shm segments)
 * with a leak check, deadline helpers, and fork helpers.
 *
 * Depends on libc and CMocka only, so it can be used by any test (and from
 * inside forked chip processes, where CMocka asserts must not be used).
 */
#ifndef STRATA_TESTUTIL_H
#define STRATA_TESTUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TESTUTIL_MAX_FDS 512
#define TESTUTIL_MAX_PIDS 256
#define TESTUTIL_MAX_SHM 128
#define TESTUTIL_NAME_MAX 256

/* Resources of the calling process at one instant. */
typedef struct testutil_snapshot {
    size_t num_fds;
    int fds[TESTUTIL_MAX_FDS];                            /* ascending */
    char fd_targets[TESTUTIL_MAX_FDS][TESTUTIL_NAME_MAX]; /* readlink text */
    /* What each fd is open on (0, 0: fstat failed): an inherited file
     * whose name is unlinked meanwhile is still the same file. */
    dev_t fd_dev[TESTUTIL_MAX_FDS];
    ino_t fd_ino[TESTUTIL_MAX_FDS];
    size_t num_threads; /* /proc/self/task */
    size_t num_children;
    pid_t children[TESTUTIL_MAX_PIDS]; /* live or zombie, not yet reaped */
    size_t num_shm;
    char shm[TESTUTIL_MAX_SHM][TESTUTIL_NAME_MAX]; /* /dev/shm/ *strata* */
} testutil_snapshot;

/* Fills snap with the current fds, threads, children and strata shm
 * entries. Aborts the process on an internal failure (it never fails in a
 * sane environment). Any thread. */
void testutil_snapshot_take(testutil_snapshot *snap);

/* Compares the present against before and fails the current CMocka test,
 * naming every fd, child process, thread and shm segment that is new (shm:
 * only segments named for this process or a live descendant, since tests
 * may run in parallel). Child processes and shm must be gone at once
 * (destroy reaps synchronously); threads get up to 1 s, since a joined
 * thread's /proc entry may linger (not checked under TSan, whose runtime
 * adds a thread). Call from the CMocka test thread only. */
#define testutil_assert_clean(before)                                          \
    testutil_assert_clean_at((before), 0.0, __FILE__, __LINE__)
/* Same, but polls up to timeout_s for children and shm to disappear. */
#define testutil_assert_clean_within(before, timeout_s)                        \
    testutil_assert_clean_at((before), (timeout_s), __FILE__, __LINE__)
void testutil_assert_clean_at(const testutil_snapshot *before, double timeout_s,
                              const char *file, int line);

/* Counts resources new since before (for loops that want to report rather
 * than fail), with the same strictness as testutil_assert_clean. Writes a
 * description into msg (may be NULL). */
size_t testutil_count_leaks(const testutil_snapshot *before, char *msg,
                            size_t msg_size);

/* Number of child processes (live or unreaped) that are new since before,
 * right now. */
size_t testutil_new_children(const testutil_snapshot *before);

/* Monotonic clock in seconds. */
double testutil_now(void);
/* Sleeps for seconds (restarting on EINTR). */
void testutil_sleep(double seconds);

/* Polls cond(arg) until it returns true or timeout_s passes; sleeps ~200 us
 * between polls. Returns the last value of cond. */
bool testutil_wait_until(bool (*cond)(void *arg), void *arg, double timeout_s);

/* Waits until *p == want (acquire load) or timeout_s passes. Spins briefly,
 * then yields and naps 50 us between checks so waiting processes do not
 * starve others on a small machine. Safe inside chip and sub processes. */
bool testutil_wait_u32(const uint32_t *p, uint32_t want, double timeout_s);
/* Waits until *p >= want. */
bool testutil_wait_u32_ge(const uint32_t *p, uint32_t want, double timeout_s);
/* Release store / acquire load / atomic add on a shared word. */
void testutil_store_u32(uint32_t *p, uint32_t v);
uint32_t testutil_load_u32(const uint32_t *p);
uint32_t testutil_add_u32(uint32_t *p, uint32_t v); /* returns old value */

/* Busy-waits (no sleep) for seconds; for kernels that must take a while. */
void testutil_busy(double seconds);

/* Forks a child that runs fn(arg, write_fd) and _exit()s with its return
 * value (0..255). *read_fd_out gets the read end of a pipe whose write end
 * the child holds. Returns the child's pid, or -1. Call only while the
 * process has a single thread (no live worker). */
pid_t testutil_spawn(int (*fn)(void *arg, int write_fd), void *arg,
                     int *read_fd_out);
/* Waits up to timeout_s (< 0: forever) for child pid; true and *status_out
 * (waitpid status) when it was reaped. */
bool testutil_wait_child(pid_t pid, double timeout_s, int *status_out);
/* Runs fn(arg) in a forked child; returns its waitpid status or -1. */
int testutil_run_in_child(int (*fn)(void *arg), void *arg);

/* Reads exactly n bytes from fd within timeout_s; true on success. */
bool testutil_read_full(int fd, void *buf, size_t n, double timeout_s);
/* Writes exactly n bytes; true on success. */
bool testutil_write_full(int fd, const void *buf, size_t n);

/* True while pid exists (kill(pid, 0) succeeds; zombies count). */
bool testutil_pid_exists(pid_t pid);
/* Reaps pid if it is our (possibly adopted) child; then reports whether it
 * is gone (reaped now or kill(pid, 0) fails with ESRCH). */
bool testutil_pid_gone_reap(pid_t pid);

/* Processes a test waits to see gone (killed, or orphaned to this process
 * as a subreaper). testutil_pids_gone, a testutil_wait_until predicate,
 * reaps each (testutil_pid_gone_reap) and looks at one no more once it is
 * gone, so a pid reused meanwhile is not waited for. Zero-initialize. */
#define TESTUTIL_PIDS_MAX 64
typedef struct testutil_pids {
    pid_t pid[TESTUTIL_PIDS_MAX];
    bool gone[TESTUTIL_PIDS_MAX];
    size_t n;
} testutil_pids;
bool testutil_pids_gone(void *pids);

/* CPU time (utime + stime, clock ticks) of process pid from /proc; -1 if
 * it cannot be read. */
long testutil_proc_cpu_ticks(pid_t pid);

#endif /* STRATA_TESTUTIL_H */
