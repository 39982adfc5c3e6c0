/*
 * /dev/shm pages are reserved when a buffer or a domain window is created,
 * so that running out is STRATA_ENOMEM at creation, naming the size and
 * the free space, and never a SIGBUS when a far page is first touched.
 *
 * Each test runs in a child with a private mount namespace and a small
 * tmpfs of its own on /dev/shm (so it neither fills the machine's nor
 * depends on its size); the sizes come from statvfs of that tmpfs. Needs
 * root or unprivileged user namespaces; skipped without either.
 */
#define _GNU_SOURCE
#include "it_kernels.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#define SHM_MIB 64
#define SKIP_STATUS 77

static strata_callable k_touch;
static const int ids2[2] = {0, 1};

/* Writes every byte of this chip's window of the domain whose device_ctx
 * is scalar 0. */
static strata_err touch_kernel(strata_chip *chip, const strata_args *a)
{
    const strata_comm_context *c =
        strata_chip_comm_context(chip, strata_args_scalar(a, 0));

    if (!c) {
        strata_errmsg_set("touch: no domain context");
        return STRATA_EINVAL;
    }
    memset(c->window_base[c->rank], 0x5a, c->window_size);
    return STRATA_OK;
}

static int setup(void **state)
{
    if (it_setup_kernels(state) != 0)
        return -1;
    it_register(kernel, "shm_reserve.touch", touch_kernel, &k_touch);
    return 0;
}

/* Free bytes of /dev/shm, page-rounded down. */
static size_t shm_free(void)
{
    struct statvfs v;

    if (statvfs("/dev/shm", &v) != 0)
        return 0;
    return (size_t)v.f_bavail * v.f_frsize / 4096 * 4096;
}

/* The child's own small /dev/shm; false when this machine cannot give
 * one (no root, no user namespaces). */
static bool private_shm(void)
{
    char opts[32];

    snprintf(opts, sizeof(opts), "size=%dm", SHM_MIB);
    if (unshare(CLONE_NEWNS) != 0 && unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0)
        return false;
    return mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
           mount("tmpfs", "/dev/shm", "tmpfs", 0, opts) == 0;
}

/* Runs body in a child over a private /dev/shm (exit status 0: passed). */
static void in_private_shm(int (*body)(void))
{
    int status = 0;
    pid_t pid = fork();

    assert_true(pid >= 0);
    if (pid == 0) {
        /* CMocka's handlers would go on with the test in the child: a
         * SIGBUS must show as one. */
        signal(SIGBUS, SIG_DFL);
        signal(SIGSEGV, SIG_DFL);
        if (!private_shm())
            _exit(SKIP_STATUS);
        _exit(body());
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status))
        fail_msg("the child died of signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    if (WEXITSTATUS(status) == SKIP_STATUS)
        skip();
    if (WEXITSTATUS(status) != 0)
        fail_msg("a check failed in the child (printed above)");
}

/* Ends the child's body with status 1, the check and its detail printed,
 * when cond fails. */
#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "line %d: %s failed (%s)\n", __LINE__, #cond,      \
                    strata_errmsg());                                          \
            return 1;                                                          \
        }                                                                      \
    } while (0)

/* Nothing of ours left in the private /dev/shm. */
static bool shm_empty(void)
{
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    bool empty = d != NULL;

    while (d && (e = readdir(d)) != NULL)
        if (strncmp(e->d_name, "strata-", 7) == 0)
            empty = false;
    if (d)
        closedir(d);
    return empty;
}

/* Two buffers that each fit in the free space but not together: the
 * second create fails, and the first is usable to its last byte. */
static int two_buffers_body(void)
{
    strata_worker *w = NULL;
    strata_buffer *a = NULL, *b = NULL;
    size_t each;
    char want[64];

    CHECK(it_worker_start(ids2, 1, 0, &w) == STRATA_OK);
    each = shm_free() / 4 * 3 / 4096 * 4096;
    CHECK(each > 0);
    CHECK(strata_worker_create_buffer(w, each, &a) == STRATA_OK);
    CHECK(strata_worker_create_buffer(w, each, &b) == STRATA_ENOMEM);
    CHECK(b == NULL);
    snprintf(want, sizeof(want), "%zu bytes", each);
    CHECK(strstr(strata_errmsg(), want) != NULL);
    CHECK(strstr(strata_errmsg(), "/dev/shm") != NULL);
    CHECK(strstr(strata_errmsg(), "free") != NULL);
    /* The whole first buffer has its pages: no SIGBUS anywhere in it. */
    memset(strata_buffer_data(a), 0xa5, each);
    /* Released, its space is free again. */
    CHECK(strata_buffer_release(a) == STRATA_OK);
    CHECK(strata_worker_create_buffer(w, each, &b) == STRATA_OK);
    memset(strata_buffer_data(b), 0x5a, each);
    CHECK(strata_buffer_release(b) == STRATA_OK);
    CHECK(it_worker_destroy(w) == STRATA_OK);
    CHECK(shm_empty());
    return 0;
}

static void test_shm_reserve_second_buffer_refused_at_create(void **state)
{
    (void)state;
    in_private_shm(two_buffers_body);
}

struct dom_case {
    size_t window;    /* per rank */
    strata_err alloc; /* what strata_orch_allocate_domain must return */
    strata_err run;   /* what touching every window must give */
};

static strata_err domain_orch(strata_orch *o, const strata_args *args,
                              void *user)
{
    struct dom_case *c = user;
    strata_domain_spec s = {"shm", ids2, 2, c->window, NULL, 0};
    strata_domain *d = NULL;
    strata_err err;

    (void)args;
    err = strata_orch_allocate_domain(o, &s, &d);
    if (err != c->alloc) {
        strata_errmsg_set("allocate: %s, want %s (%s)", strata_errname(err),
                          strata_errname(c->alloc), strata_errmsg());
        return STRATA_EPROTO;
    }
    if (err)
        return c->run; /* refused: nothing to touch */
    for (int chip = 0; chip < 2 && !err; chip++) {
        strata_chip_domain_ctx ctx;
        strata_args *a = NULL;

        err = strata_domain_context(d, chip, &ctx);
        if (!err)
            err = strata_args_create(&a);
        if (!err)
            err = strata_args_add_scalar(a, ctx.device_ctx);
        if (!err)
            err = strata_orch_submit_next_level(o, k_touch, a, chip);
        strata_args_destroy(a);
    }
    return err;
}

/* A window of 1 TiB per rank, and windows that each fit but not all
 * together (or not beside a buffer), are refused when the domain is
 * allocated; windows that fit are touched to their last byte. */
static int domain_body(void)
{
    strata_worker *w = NULL;
    strata_buffer *b = NULL;
    struct dom_case c;
    size_t free_now;
    char want[64];

    CHECK(it_worker_start(ids2, 2, 0, &w) == STRATA_OK);
    free_now = shm_free();
    c = (struct dom_case){(size_t)1 << 40, STRATA_ENOMEM, STRATA_OK};
    CHECK(strata_worker_run(w, domain_orch, NULL, &c) == STRATA_OK);
    c = (struct dom_case){free_now / 3 * 2 / 4096 * 4096, STRATA_ENOMEM,
                          STRATA_OK};
    CHECK(strata_worker_run(w, domain_orch, NULL, &c) == STRATA_OK);
    /* Each of the two windows fits, together they fit: touched whole. */
    c = (struct dom_case){free_now / 4 / 4096 * 4096, STRATA_OK, STRATA_OK};
    CHECK(strata_worker_run(w, domain_orch, NULL, &c) == STRATA_OK);
    /* Beside a buffer of half the space, two quarter-and-more windows do
     * not fit. */
    CHECK(strata_worker_create_buffer(w, free_now / 2 / 4096 * 4096, &b) ==
          STRATA_OK);
    c = (struct dom_case){free_now / 3 / 4096 * 4096, STRATA_ENOMEM, STRATA_OK};
    CHECK(strata_worker_run(w, domain_orch, NULL, &c) == STRATA_OK);
    CHECK(strata_buffer_release(b) == STRATA_OK);
    /* The message names the windows' size and the free space. */
    c = (struct dom_case){(size_t)1 << 40, STRATA_ENOMEM, STRATA_ENOMEM};
    CHECK(strata_worker_run(w, domain_orch, NULL, &c) == STRATA_ENOMEM);
    snprintf(want, sizeof(want), "%zu bytes", (size_t)1 << 40);
    CHECK(strstr(strata_errmsg(), want) != NULL);
    CHECK(strstr(strata_errmsg(), "/dev/shm") != NULL);
    CHECK(it_worker_destroy(w) == STRATA_OK);
    CHECK(shm_empty());
    return 0;
}

static void test_shm_reserve_domain_too_big_refused_at_allocation(void **st)
{
    (void)st;
    in_private_shm(domain_body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(
            test_shm_reserve_second_buffer_refused_at_create, it_teardown),
        cmocka_unit_test_teardown(
            test_shm_reserve_domain_too_big_refused_at_allocation, it_teardown),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
