/* base_host_id: the boot id is read once per process and cached; every
 * answer, threads racing for the first one included, equals the file's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/hostid.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define THREADS 8

static void file_boot_id(char *out, size_t cap)
{
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, out, cap - 1) : -1;

    if (fd >= 0)
        close(fd);
    out[n > 0 ? n : 0] = '\0';
    out[strcspn(out, "\n")] = '\0';
}

static void *ask(void *arg)
{
    base_host_id(arg);
    return NULL;
}

static void test_hostid_every_answer_is_the_files(void **state)
{
    struct base_host_id ids[THREADS], again;
    pthread_t t[THREADS];
    char want[BASE_BOOT_ID_MAX], name[BASE_HOST_NAME_MAX] = {0};

    (void)state;
    file_boot_id(want, sizeof(want));
    if (!base_boot_id_valid(want))
        skip(); /* no /proc here: nothing to compare with */
    assert_int_equal(gethostname(name, sizeof(name) - 1), 0);
    /* The first answers race for the cache. */
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, ask, &ids[i]), 0);
    for (int i = 0; i < THREADS; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_string_equal(ids[i].boot, want);
        assert_string_equal(ids[i].name, name);
        assert_true(base_host_id_same(&ids[i], &ids[0]));
    }
    base_host_id(&again);
    assert_string_equal(again.boot, want);
    assert_true(base_host_id_same(&again, &ids[0]));
}

/* A forked child answers alike, from the cache it inherited. */
static void test_hostid_child_answers_alike(void **state)
{
    struct base_host_id me;
    pid_t pid;
    int status;

    (void)state;
    base_host_id(&me);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct base_host_id child;

        base_host_id(&child);
        _exit(base_host_id_same(&child, &me) || !me.boot[0] ? 0 : 1);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* Testing builds: the override wins over the cache, and is read anew. */
static void test_hostid_test_override_is_not_cached(void **state)
{
    struct base_host_id id, real;

    (void)state;
    base_host_id(&real);
    setenv("STRATA_TEST_HOST_ID", "elsewhere/0123-abcd", 1);
    base_host_id(&id);
    unsetenv("STRATA_TEST_HOST_ID");
    assert_string_equal(id.name, "elsewhere");
    assert_string_equal(id.boot, "0123-abcd");
    base_host_id(&id);
    assert_string_equal(id.boot, real.boot);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hostid_every_answer_is_the_files),
        cmocka_unit_test(test_hostid_child_answers_alike),
        cmocka_unit_test(test_hostid_test_override_is_not_cached),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
