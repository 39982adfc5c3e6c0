/* fd passing with SCM_RIGHTS between processes (cuda/fdpass.c), over a
 * SOCK_SEQPACKET socketpair made before the fork, as chips will pass the
 * fds of exported device allocations. No GPU: memfds stand in for them. */
#define _GNU_SOURCE /* memfd_create */
#include "fdpass.h"
#include "testutil.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#define TAG 0x0123456789abcdefull

/* A memfd holding text. */
static int memfd_with(const char *text)
{
    int fd = memfd_create("strata-fdpass-test", MFD_CLOEXEC);

    if (fd >= 0 && write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static void read_back(int fd, const char *want)
{
    char buf[64] = "";

    assert_true(pread(fd, buf, sizeof(buf) - 1, 0) == (ssize_t)strlen(want));
    assert_string_equal(buf, want);
}

/* Forks a child that runs fn(its end of the pair) and exits with its
 * status; *sock_out is the parent's end. */
static pid_t fork_peer(int (*fn)(int sock, void *arg), void *arg, int *sock_out)
{
    int sv[2];
    pid_t pid;

    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv),
                     0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(sv[0]);
        _exit(fn(sv[1], arg));
    }
    close(sv[1]);
    *sock_out = sv[0];
    return pid;
}

static void reap(pid_t pid, int want_status)
{
    int status = -1;

    assert_true(testutil_wait_child(pid, 30.0, &status));
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), want_status);
}

/* Sends n memfds "fd 0".."fd n-1" with TAG, then waits for the parent to
 * close (so the fds are in flight while it lives). */
static int send_memfds(int sock, void *arg)
{
    size_t n = *(size_t *)arg;
    int fds[CUDA_FDPASS_MAX];
    char why[256], text[16], byte;

    for (size_t i = 0; i < n; i++) {
        snprintf(text, sizeof(text), "fd %zu", i);
        fds[i] = memfd_with(text);
        if (fds[i] < 0)
            return 10;
    }
    if (cuda_fd_send(sock, TAG, fds, n, cuda_fdpass_deadline(10), why,
                     sizeof(why)))
        return 11;
    return read(sock, &byte, 1) == 0 ? 0 : 12; /* 0: the parent closed */
}

static void test_cuda_fdpass_fds_cross_processes(void **state)
{
    testutil_snapshot before;
    size_t n = 3, got = 0;
    int sock, fds[CUDA_FDPASS_MAX];
    uint64_t tag = 0;
    char why[256], text[16];
    pid_t pid;

    (void)state;
    testutil_snapshot_take(&before);
    pid = fork_peer(send_memfds, &n, &sock);
    assert_int_equal(cuda_fd_recv(sock, &tag, fds, 8, &got,
                                  cuda_fdpass_deadline(10), why, sizeof(why)),
                     STRATA_OK);
    assert_true(tag == TAG);
    assert_int_equal(got, n);
    for (size_t i = 0; i < got; i++) {
        snprintf(text, sizeof(text), "fd %zu", i);
        read_back(fds[i], text);
        assert_true(fcntl(fds[i], F_GETFD) & FD_CLOEXEC);
        close(fds[i]);
    }
    close(sock);
    reap(pid, 0);
    testutil_assert_clean(&before);
}

/* More fds than the receiver takes: refused, and none of them stays. */
static void test_cuda_fdpass_too_many_fds_eproto_no_leak(void **state)
{
    testutil_snapshot before;
    size_t n = 5, got = 0;
    int sock, fds[CUDA_FDPASS_MAX];
    uint64_t tag;
    char why[256];
    pid_t pid;

    (void)state;
    testutil_snapshot_take(&before);
    pid = fork_peer(send_memfds, &n, &sock);
    assert_int_equal(cuda_fd_recv(sock, &tag, fds, 2, &got,
                                  cuda_fdpass_deadline(10), why, sizeof(why)),
                     STRATA_EPROTO);
    print_message("%s\n", why);
    assert_non_null(strstr(why, "with 5 fds"));
    close(sock);
    reap(pid, 0);
    testutil_assert_clean(&before); /* the 2 kept and the 3 others closed */
}

static int send_nothing(int sock, void *arg)
{
    char byte;

    (void)arg;
    return read(sock, &byte, 1) == 0 ? 0 : 12;
}

static void test_cuda_fdpass_recv_deadline_etimedout(void **state)
{
    testutil_snapshot before;
    size_t got;
    int sock, fds[1];
    uint64_t tag;
    char why[256];
    double t0, took;
    pid_t pid;

    (void)state;
    testutil_snapshot_take(&before);
    pid = fork_peer(send_nothing, NULL, &sock);
    t0 = testutil_now();
    assert_int_equal(cuda_fd_recv(sock, &tag, fds, 1, &got,
                                  cuda_fdpass_deadline(0.2), why, sizeof(why)),
                     STRATA_ETIMEDOUT);
    took = testutil_now() - t0;
    assert_true(took >= 0.19 && took < 10.0);
    assert_non_null(strstr(why, "deadline"));
    close(sock);
    reap(pid, 0);
    testutil_assert_clean(&before);
}

/* Reads nothing until killed. */
static int take_nothing(int sock, void *arg)
{
    (void)sock;
    (void)arg;
    for (;;)
        pause();
    return 0; /* not reached */
}

static int exit_at_once(int sock, void *arg)
{
    (void)sock;
    (void)arg;
    return 0;
}

/* A peer that dies is seen at once, not at the deadline. */
static void test_cuda_fdpass_peer_gone_epeer_before_deadline(void **state)
{
    testutil_snapshot before;
    size_t got;
    int sock, fds[1], one;
    uint64_t tag;
    char why[256];
    double t0;
    pid_t pid;

    (void)state;
    testutil_snapshot_take(&before);
    pid = fork_peer(exit_at_once, NULL, &sock);
    reap(pid, 0);
    t0 = testutil_now();
    assert_int_equal(cuda_fd_recv(sock, &tag, fds, 1, &got,
                                  cuda_fdpass_deadline(30), why, sizeof(why)),
                     STRATA_EPEER);
    assert_true(testutil_now() - t0 < 10.0);
    one = memfd_with("x");
    assert_true(one >= 0);
    assert_int_equal(cuda_fd_send(sock, 1, &one, 1, cuda_fdpass_deadline(30),
                                  why, sizeof(why)),
                     STRATA_EPEER);
    close(one);
    close(sock);
    testutil_assert_clean(&before);
}

/* A receiver that takes nothing: the sender stops at its deadline. */
static void test_cuda_fdpass_send_deadline_etimedout(void **state)
{
    testutil_snapshot before;
    int sock, one;
    char why[256];
    strata_err err = STRATA_OK;
    pid_t pid;

    (void)state;
    testutil_snapshot_take(&before);
    pid = fork_peer(take_nothing, NULL, &sock);
    one = memfd_with("x");
    assert_true(one >= 0);
    for (int i = 0; i < 100000 && err == STRATA_OK; i++)
        err = cuda_fd_send(sock, (uint64_t)i, &one, 1,
                           cuda_fdpass_deadline(0.05), why, sizeof(why));
    assert_int_equal(err, STRATA_ETIMEDOUT);
    close(one);
    close(sock); /* the queued messages and their fds go with it */
    kill(pid, SIGKILL);
    assert_true(testutil_wait_child(pid, 30.0, NULL));
    testutil_assert_clean(&before);
}

static void test_cuda_fdpass_bad_arguments_einval(void **state)
{
    int fds[CUDA_FDPASS_MAX + 1] = {0};
    size_t got;
    uint64_t tag;
    char why[256];

    (void)state;
    assert_int_equal(cuda_fd_send(-1, 0, fds, 1, 0, why, sizeof(why)),
                     STRATA_EINVAL);
    assert_int_equal(cuda_fd_send(0, 0, fds, 0, 0, why, sizeof(why)),
                     STRATA_EINVAL);
    assert_int_equal(
        cuda_fd_send(0, 0, fds, CUDA_FDPASS_MAX + 1, 0, why, sizeof(why)),
        STRATA_EINVAL);
    assert_int_equal(cuda_fd_recv(0, &tag, fds, 0, &got, 0, why, sizeof(why)),
                     STRATA_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda_fdpass_fds_cross_processes),
        cmocka_unit_test(test_cuda_fdpass_too_many_fds_eproto_no_leak),
        cmocka_unit_test(test_cuda_fdpass_recv_deadline_etimedout),
        cmocka_unit_test(test_cuda_fdpass_peer_gone_epeer_before_deadline),
        cmocka_unit_test(test_cuda_fdpass_send_deadline_etimedout),
        cmocka_unit_test(test_cuda_fdpass_bad_arguments_einval),
    };

    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
