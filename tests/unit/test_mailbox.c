/* The shared-memory mailbox between two real processes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/clock.h"
#include "wire/mailbox.h"

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static struct mbx *m;
static struct mbx_shared *sh;
static int bell_fd;

static int setup(void **state)
{
    (void)state;
    bell_fd = eventfd(0, EFD_NONBLOCK);
    if (mbx_create(&m) || mbx_shared_create(&sh) || bell_fd < 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    mbx_destroy(m);
    mbx_shared_destroy(sh);
    close(bell_fd);
    return 0;
}

/* Child: answer arg[0] + 1 in arg[1] until shutdown. */
static pid_t start_echo(void)
{
    pid_t pid = fork();

    if (pid == 0) {
        struct mbx_frame *f;
        uint64_t one = 1;

        /* A failed assertion in the parent must not leave us behind. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);

        while ((f = mbx_child_wait(m)) != NULL) {
            f->arg[1] = f->arg[0] + 1;
            f->result = 0;
            if (mbx_child_complete(m, sh) &&
                write(bell_fd, &one, sizeof(one)) < 0)
                _exit(3);
        }
        _exit(0);
    }
    return pid;
}

static void wait_tail(uint32_t want)
{
    uint64_t deadline = base_deadline_after(10);

    while ((int32_t)(__atomic_load_n(&m->h.tail, __ATOMIC_ACQUIRE) - want) <
           0) {
        assert_true(base_now_ns() < deadline);
        sched_yield();
    }
}

static void test_mailbox_fresh_is_stamped_and_zero(void **state)
{
    (void)state;
    assert_int_equal(m->h.magic, MBX_MAGIC);
    assert_int_equal(m->h.version, MBX_VERSION);
    assert_int_equal(m->h.head, 0);
    assert_int_equal(m->h.tail, 0);
    assert_int_equal(m->h.shutdown, 0);
    assert_int_equal(m->h.init_state, MBX_INIT_STARTING);
    assert_int_equal(m->ring[MBX_RING - 1].result, 0);
}

static void test_mailbox_round_trips_in_order(void **state)
{
    pid_t pid = start_echo();
    uint32_t posted = m->h.head;
    int status;

    (void)state;
    assert_true(pid > 0);
    for (uint64_t i = 0; i < 2000; i++) {
        struct mbx_frame *f;

        if (mbx_in_flight(m) == MBX_RING)
            wait_tail(posted - MBX_RING + 1);
        f = mbx_next_frame(m);
        f->arg[0] = i;
        f->arg[1] = 0;
        mbx_post(m);
        posted++;
    }
    wait_tail(posted);
    for (uint32_t k = 0; k < MBX_RING; k++) {
        const struct mbx_frame *f = &m->ring[(posted - 1 - k) % MBX_RING];

        assert_int_equal(f->arg[1], f->arg[0] + 1);
        assert_int_equal(f->arg[0], 1999 - k);
    }
    mbx_shutdown(m);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_mailbox_shutdown_is_sticky(void **state)
{
    pid_t pid;
    int status;

    (void)state;
    /* Shutdown was set by the previous test and never clears: a new child
     * leaves at once, without serving. */
    assert_int_equal(m->h.shutdown, 1);
    pid = start_echo();
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(m->h.shutdown, 1);
}

static void test_mailbox_parked_child_is_woken(void **state)
{
    struct mbx *saved = m;
    uint64_t deadline;
    pid_t pid;
    int status;

    (void)state;
    assert_int_equal(mbx_create(&m), STRATA_OK);
    pid = start_echo();
    /* Wait until the child has given up spinning and parked. */
    deadline = base_deadline_after(10);
    while (!__atomic_load_n(&m->h.parked, __ATOMIC_ACQUIRE)) {
        assert_true(base_now_ns() < deadline);
        sched_yield();
    }
    __atomic_store_n(&sh->sched_parked, 1, __ATOMIC_SEQ_CST);
    mbx_next_frame(m)->arg[0] = 41;
    mbx_post(m);
    wait_tail(1);
    assert_int_equal(m->ring[0].arg[1], 42);
    /* The child rings the doorbell (after publishing tail) because the
     * scheduler was parked. */
    {
        struct pollfd pfd = {.fd = bell_fd, .events = POLLIN};
        uint64_t v = 0;

        assert_int_equal(poll(&pfd, 1, 10000), 1);
        assert_int_equal(read(bell_fd, &v, sizeof(v)), sizeof(v));
        assert_true(v >= 1);
    }
    __atomic_store_n(&sh->sched_parked, 0, __ATOMIC_SEQ_CST);
    mbx_shutdown(m);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    mbx_destroy(m);
    m = saved;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mailbox_fresh_is_stamped_and_zero),
        cmocka_unit_test(test_mailbox_round_trips_in_order),
        cmocka_unit_test(test_mailbox_shutdown_is_sticky),
        cmocka_unit_test(test_mailbox_parked_child_is_woken),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
