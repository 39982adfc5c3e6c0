/*
 * Invalid submissions and arguments through the public API: each is
 * refused where it is made (STRATA_EINVAL at add or submit time, ENOMEM
 * past the args limits, ESTATE for releasing a buffer in use), and the run
 * around it goes on.
 */
#define _GNU_SOURCE
#include "it_kernels.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

static strata_callable k_sum, k_nop, k_late, o_dummy, s_dummy;

/* Sums every IN tensor's first word and every scalar into the OUT one (the
 * last tensor). Exercises the largest legal args blob. */
static strata_err sum_kernel(strata_chip *chip, const strata_args *a)
{
    (void)chip;
    size_t n = strata_args_num_tensors(a);
    uint64_t sum = 0;
    if (n == 0)
        return STRATA_EINVAL;
    for (size_t i = 0; i + 1 < n; i++)
        sum += it_arg_u32(a, i)[0];
    for (size_t i = 0; i < strata_args_num_scalars(a); i++)
        sum += strata_args_scalar(a, i);
    it_arg_u32(a, n - 1)[0] = (uint32_t)sum;
    it_arg_u32(a, n - 1)[1] = (uint32_t)strata_args_tensor_ndims(a, 0);
    return STRATA_OK;
}

static strata_err nop_kernel(strata_chip *chip, const strata_args *a)
{
    (void)chip;
    (void)a;
    return STRATA_OK;
}

static strata_err dummy_orch(strata_orch *o, const strata_args *a, void *u)
{
    (void)o;
    (void)a;
    (void)u;
    return STRATA_OK;
}

static strata_err dummy_sub(const strata_args *a)
{
    (void)a;
    return STRATA_OK;
}

#define MAX_CHECKS 32

/* What an orch fn saw; checked after the run by the test thread. */
struct checks {
    struct it_fx *f;
    size_t n;
    const char *what[MAX_CHECKS];
    strata_err got[MAX_CHECKS];
    strata_err want[MAX_CHECKS];
};

static void check(struct checks *c, const char *what, strata_err got,
                  strata_err want)
{
    if (c->n < MAX_CHECKS) {
        c->what[c->n] = what;
        c->got[c->n] = got;
        c->want[c->n] = want;
        c->n++;
    }
}

static void assert_checks(const struct checks *c, size_t expected)
{
    assert_int_equal(c->n, expected);
    for (size_t i = 0; i < c->n; i++)
        if (c->got[i] != c->want[i])
            fail_msg("%s: got %s, want %s", c->what[i],
                     strata_errname(c->got[i]), strata_errname(c->want[i]));
}

static strata_err ids_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)args;
    struct checks *c = user;
    strata_buffer *b = c->f->b[0];
    strata_args *a[2];
    static const int bad_group[] = {0, 9};
    static const int dup_group[] = {1, 1};
    it_try(it_args1(b, 0, 1, STRATA_OUT, &a[0]));
    it_try(it_args1(b, 1, 1, STRATA_OUT, &a[1]));
    check(c, "chip 7", strata_orch_submit_next_level(o, it_k_inc, a[0], 7),
          STRATA_EINVAL);
    check(c, "chip -1", strata_orch_submit_next_level(o, it_k_inc, a[0], -1),
          STRATA_EINVAL);
    const strata_args *const *ga = (const strata_args *const *)a;
    check(c, "group with chip 9",
          strata_orch_submit_next_level_group(o, it_k_inc, ga, bad_group, 2),
          STRATA_EINVAL);
    check(c, "group with chip 1 twice",
          strata_orch_submit_next_level_group(o, it_k_inc, ga, dup_group, 2),
          STRATA_EINVAL);
    check(c, "empty group",
          strata_orch_submit_next_level_group(o, it_k_inc, ga, bad_group, 0),
          STRATA_EINVAL);
    /* A valid submit after the refusals still works. */
    check(c, "valid", strata_orch_submit_next_level(o, it_k_inc, a[0], 3),
          STRATA_OK);
    strata_args_destroy(a[0]);
    strata_args_destroy(a[1]);
    return STRATA_OK;
}

static void test_invalid_unknown_worker_id_einval(void **state)
{
    (void)state;
    struct it_fx f;
    struct checks c = {.f = &f};
    it_fx_start(&f, 4);
    it_ok(strata_worker_run(f.w, ids_orch, NULL, &c));
    assert_checks(&c, 6);
    assert_int_equal(it_fx_w(&f, 0)[0], 1); /* only the valid task ran */
    assert_int_equal(it_fx_w(&f, 0)[1], 0);
    it_fx_end(&f);
}

static strata_err callables_orch(strata_orch *o, const strata_args *args,
                                 void *user)
{
    (void)args;
    struct checks *c = user;
    strata_args *a = NULL;
    strata_callable unknown = {.kind = STRATA_CALLABLE_KERNEL};
    strata_callable kernel_as_orch = it_k_inc;
    int one = 1;
    for (size_t i = 0; i < sizeof(unknown.digest); i++)
        unknown.digest[i] = (uint8_t)(0x9e ^ (i * 37));
    kernel_as_orch.kind = STRATA_CALLABLE_ORCH;
    it_try(it_args1(c->f->b[0], 0, 1, STRATA_INOUT, &a));
    check(c, "unregistered kernel",
          strata_orch_submit_next_level(o, unknown, a, 0), STRATA_EINVAL);
    unknown.kind = STRATA_CALLABLE_SUB;
    check(c, "unregistered sub", strata_orch_submit_sub(o, unknown, a),
          STRATA_EINVAL);
    check(c, "orch as kernel", strata_orch_submit_next_level(o, o_dummy, a, 0),
          STRATA_EINVAL);
    check(c, "sub as kernel", strata_orch_submit_next_level(o, s_dummy, a, 0),
          STRATA_EINVAL);
    check(c, "kernel as sub", strata_orch_submit_sub(o, it_k_inc, a),
          STRATA_EINVAL);
    check(c, "kernel digest, orch kind",
          strata_orch_submit_next_level(o, kernel_as_orch, a, 0),
          STRATA_EINVAL);
    const strata_args *const *ga = (const strata_args *const *)&a;
    check(c, "orch as group kernel",
          strata_orch_submit_next_level_group(o, o_dummy, ga, &one, 1),
          STRATA_EINVAL);
    /* Registered after init: the chips never saw it. */
    check(c, "registered after init",
          strata_orch_submit_next_level(o, k_late, a, 0), STRATA_EINVAL);
    strata_args_destroy(a);
    return STRATA_OK;
}

static void test_invalid_callables_einval(void **state)
{
    (void)state;
    struct it_fx f;
    struct checks c = {.f = &f};
    it_fx_start(&f, 4);
    it_ok(strata_register_kernel("invalid.late", nop_kernel, &k_late));
    it_ok(strata_worker_run(f.w, callables_orch, NULL, &c));
    assert_checks(&c, 8);
    assert_int_equal(it_fx_w(&f, 0)[0], 0);
    it_fx_end(&f);
}

/* Adds a tensor [off, off + nbytes) as u8; if add_tensor accepts it, the
 * submit must refuse it. Returns the first error. */
static strata_err outside(strata_orch *o, strata_buffer *b, size_t off,
                          size_t d0, size_t d1)
{
    strata_args *a = NULL;
    size_t shape[2] = {d0, d1};
    it_try(strata_args_create(&a));
    strata_err e = strata_args_add_tensor(a, b, off, STRATA_U8, d1 ? 2 : 1,
                                          shape, STRATA_IN);
    if (e == STRATA_OK)
        e = strata_orch_submit_next_level(o, k_nop, a, 0);
    strata_args_destroy(a);
    return e;
}

static strata_err writes(strata_orch *o, strata_buffer *b1, size_t off1,
                         strata_tag t1, strata_buffer *b2, size_t off2,
                         strata_tag t2)
{
    strata_args *a = NULL;
    it_try(it_args1(b1, off1, 4, t1, &a));
    strata_err e = it_add_u32(a, b2, off2, 4, t2);
    if (e == STRATA_OK)
        e = strata_orch_submit_next_level(o, k_nop, a, 1);
    strata_args_destroy(a);
    return e;
}

static strata_err ranges_orch(strata_orch *o, const strata_args *args,
                              void *user)
{
    (void)args;
    struct checks *c = user;
    strata_buffer *b = c->f->b[0], *b2 = c->f->b[1];
    /* Buffers are 16 words = 64 bytes. */
    check(c, "end past size", outside(o, b, 60, 8, 0), STRATA_EINVAL);
    check(c, "offset at size", outside(o, b, 64, 1, 0), STRATA_EINVAL);
    check(c, "offset overflow", outside(o, b, SIZE_MAX - 2, 4, 0),
          STRATA_EINVAL);
    check(c, "shape overflow", outside(o, b, 0, SIZE_MAX / 2, 4),
          STRATA_EINVAL);
    check(c, "exactly the buffer", outside(o, b, 0, 64, 0), STRATA_OK);
    check(c, "OUT/OUT overlap", writes(o, b, 0, STRATA_OUT, b, 2, STRATA_OUT),
          STRATA_EINVAL);
    check(c, "OUT/INOUT overlap",
          writes(o, b, 4, STRATA_INOUT, b, 7, STRATA_OUT), STRATA_EINVAL);
    check(c, "OUT_EXISTING/OUT overlap",
          writes(o, b, 8, STRATA_OUT_EXISTING, b, 8, STRATA_OUT),
          STRATA_EINVAL);
    check(c, "adjacent OUTs", writes(o, b, 0, STRATA_OUT, b, 4, STRATA_OUT),
          STRATA_OK);
    check(c, "same range, two buffers",
          writes(o, b, 8, STRATA_OUT, b2, 8, STRATA_OUT), STRATA_OK);
    check(c, "IN/IN overlap", writes(o, b, 0, STRATA_IN, b, 1, STRATA_IN),
          STRATA_OK);
    return STRATA_OK;
}

static void test_invalid_tensor_ranges_and_overlapping_writes(void **state)
{
    (void)state;
    struct it_fx f;
    struct checks c = {.f = &f};
    it_fx_start(&f, 16);
    it_ok(strata_worker_run(f.w, ranges_orch, NULL, &c));
    assert_checks(&c, 11);
    it_fx_end(&f);
}

static void test_invalid_tensor_descriptions_einval(void **state)
{
    (void)state;
    struct it_fx f;
    strata_args *a = NULL;
    size_t shape[6] = {1, 1, 1, 1, 1, 1};
    it_fx_start(&f, 16);
    strata_buffer *b = f.b[0];
    it_ok(strata_args_create(&a));
    it_expect(STRATA_EINVAL, strata_args_add_tensor(a, b, 0, (strata_dtype)0, 1,
                                                    shape, STRATA_IN));
    it_expect(STRATA_EINVAL, strata_args_add_tensor(a, b, 0, (strata_dtype)14,
                                                    1, shape, STRATA_IN));
    it_expect(STRATA_EINVAL, strata_args_add_tensor(a, b, 0, STRATA_U8, 1,
                                                    shape, (strata_tag)0));
    it_expect(STRATA_EINVAL, strata_args_add_tensor(a, b, 0, STRATA_U8, 1,
                                                    shape, (strata_tag)6));
    it_expect(STRATA_EINVAL,
              strata_args_add_tensor(a, b, 0, STRATA_U8, 0, shape, STRATA_IN));
    it_expect(STRATA_EINVAL,
              strata_args_add_tensor(a, b, 0, STRATA_U8, 6, shape, STRATA_IN));
    it_expect(STRATA_EINVAL,
              strata_args_add_tensor(a, b, 0, STRATA_U8, 1, NULL, STRATA_IN));
    it_expect(STRATA_EINVAL, strata_args_add_tensor(a, NULL, 0, STRATA_U8, 1,
                                                    shape, STRATA_IN));
    assert_int_equal(strata_args_num_tensors(a), 0); /* nothing appended */
    it_ok(strata_args_add_tensor(a, b, 4, STRATA_F16, 5, shape, STRATA_IN));
    assert_int_equal(strata_args_num_tensors(a), 1);
    assert_int_equal(strata_args_tensor_nbytes(a, 0), 2);
    assert_int_equal(strata_args_tensor_dtype(a, 0), STRATA_F16);
    assert_int_equal(strata_args_tensor_ndims(a, 0), 5);
    assert_int_equal(strata_args_tensor_dim(a, 0, 4), 1);
    assert_int_equal(strata_args_tensor_tag(a, 0), STRATA_IN);
    assert_ptr_equal(strata_args_tensor_data(a, 0),
                     (char *)strata_buffer_data(b) + 4);
    /* Out-of-range accessors answer NULL/0. */
    assert_null(strata_args_tensor_data(a, 1));
    assert_int_equal(strata_args_tensor_nbytes(a, 1), 0);
    assert_int_equal(strata_args_tensor_dim(a, 0, 5), 0);
    assert_int_equal(strata_args_scalar(a, 0), 0);
    strata_args_destroy(a);
    it_fx_end(&f);
}

struct limits {
    struct it_fx *f;
    strata_args *a;
};

static strata_err limits_orch(strata_orch *o, const strata_args *args,
                              void *user)
{
    (void)args;
    struct limits *l = user;
    return strata_orch_submit_next_level(o, k_sum, l->a, 2);
}

static void test_invalid_args_limits_and_largest_args(void **state)
{
    (void)state;
    struct it_fx f;
    struct limits l = {.f = &f};
    size_t shape[STRATA_MAX_DIMS] = {1, 1, 1, 1, 1};
    it_fx_start(&f, STRATA_MAX_TENSORS);
    it_ok(strata_args_create(&l.a));
    for (uint32_t i = 0; i < STRATA_MAX_TENSORS; i++)
        it_fx_w(&f, 0)[i] = i;
    for (size_t i = 0; i + 1 < STRATA_MAX_TENSORS; i++)
        it_ok(strata_args_add_tensor(l.a, f.b[0], i * 4, STRATA_U32,
                                     STRATA_MAX_DIMS, shape, STRATA_IN));
    shape[0] = 2;
    it_ok(strata_args_add_tensor(l.a, f.b[1], 0, STRATA_U32, STRATA_MAX_DIMS,
                                 shape, STRATA_OUT));
    it_expect(STRATA_ENOMEM, strata_args_add_tensor(l.a, f.b[2], 0, STRATA_U32,
                                                    1, shape, STRATA_IN));
    assert_int_equal(strata_args_num_tensors(l.a), STRATA_MAX_TENSORS);
    for (uint64_t i = 0; i < STRATA_MAX_SCALARS; i++)
        it_ok(strata_args_add_scalar(l.a, 1000 + i));
    it_expect(STRATA_ENOMEM, strata_args_add_scalar(l.a, 1));
    assert_int_equal(strata_args_num_scalars(l.a), STRATA_MAX_SCALARS);
    /* The largest legal list travels to a chip intact. */
    it_ok(strata_worker_run(f.w, limits_orch, NULL, &l));
    uint32_t want = 255 * 254 / 2 + 128 * 1000 + 128 * 127 / 2;
    assert_int_equal(it_fx_w(&f, 1)[0], want);
    assert_int_equal(it_fx_w(&f, 1)[1], STRATA_MAX_DIMS);
    strata_args_clear(l.a);
    assert_int_equal(strata_args_num_tensors(l.a), 0);
    assert_int_equal(strata_args_num_scalars(l.a), 0);
    strata_args_destroy(l.a);
    it_fx_end(&f);
}

static strata_err hold_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)args;
    struct it_fx *f = user;
    return it_submit_wait_flag(o, 0, f->b[0], f->b[1]);
}

static void test_invalid_release_in_use_buffer_estate(void **state)
{
    (void)state;
    struct it_fx f;
    strata_run *run = NULL;
    it_fx_start(&f, 4);
    it_ok(strata_worker_submit(f.w, hold_orch, NULL, &f, &run));
    it_expect(STRATA_ESTATE, strata_buffer_release(f.b[1])); /* OUT */
    it_expect(STRATA_ESTATE, strata_buffer_release(f.b[0])); /* NO_DEP */
    it_ok(strata_buffer_release(f.b[2])); /* not named by the run */
    testutil_store_u32(&it_fx_w(&f, 0)[0], 1);
    it_ok(strata_run_wait(run, 10.0));
    assert_int_equal(it_fx_w(&f, 1)[0], 77); /* buffer kept */
    strata_run_free(run);
    it_ok(strata_buffer_release(f.b[1]));
    it_ok(strata_buffer_release(f.b[0]));
    it_fx_end(&f);
}

static strata_err keep_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)args;
    *(strata_orch **)user = o;
    return STRATA_OK;
}

/* An orch kept past its fn (its run still held) is refused by every
 * strata_orch call that takes it, naming the call. */
static void test_invalid_orch_after_its_fn_estate(void **state)
{
    (void)state;
    struct it_fx f;
    strata_run *run = NULL;
    strata_orch *o = NULL;
    strata_domain *d = NULL;
    strata_args *a = NULL;
    const int chips[2] = {0, 1};
    strata_domain_spec spec = {.name = "late",
                               .workers = chips,
                               .num_workers = 2,
                               .window_size = 4096};

    it_fx_start(&f, 4);
    it_ok(strata_worker_submit(f.w, keep_orch, NULL, &o, &run));
    it_ok(strata_run_wait(run, 10.0));
    assert_non_null(o);
    it_ok(strata_args_create(&a));
    it_expect(STRATA_ESTATE, strata_orch_submit_next_level(o, k_nop, a, 0));
    it_expect(STRATA_ESTATE, strata_orch_scope_begin(o));
    assert_non_null(strstr(strata_errmsg(), "strata_orch_scope_begin"));
    it_expect(STRATA_ESTATE, strata_orch_scope_end(o));
    it_expect(STRATA_ESTATE, strata_orch_set_deadline(o, 1.0));
    it_expect(STRATA_ESTATE, strata_orch_allocate_domain(o, &spec, &d));
    assert_null(d);
    assert_non_null(strstr(strata_errmsg(), "after its function returned"));
    strata_args_destroy(a);
    strata_run_free(run);
    it_fx_end(&f);
}

/* A /dev/shm without a size limit (tmpfs size=0 reports no blocks) takes
 * buffers of any size: the free-space check must not read it as full.
 * Needs root for a private mount namespace; skipped without one. */
static void test_invalid_unlimited_shm_takes_buffers(void **state)
{
    int status = 0;
    pid_t pid;

    (void)state;
    if (geteuid() != 0)
        skip();
    pid = fork();
    if (pid == 0) {
        strata_worker *w = NULL;
        strata_buffer *b = NULL;
        static const int one[1] = {0};

        if (unshare(CLONE_NEWNS) != 0 ||
            mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
            mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=0") != 0)
            _exit(77); /* no namespace here: nothing to check */
        if (it_worker_start(one, 1, 0, &w) != STRATA_OK ||
            strata_worker_create_buffer(w, 4096, &b) != STRATA_OK ||
            strata_worker_create_buffer(w, (size_t)1 << 20, &b) != STRATA_OK ||
            it_worker_destroy(w) != STRATA_OK)
            _exit(1);
        _exit(0);
    }
    assert_true(pid > 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == 77)
        skip();
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_invalid_worker_calls_einval(void **state)
{
    (void)state;
    struct it_fx f;
    strata_buffer *b = NULL;
    strata_run *run = NULL;
    it_fx_start(&f, 4);
    it_expect(STRATA_EINVAL, strata_worker_create_buffer(f.w, 0, &b));
    assert_null(b);
    /* More than /dev/shm holds: refused now, not a SIGBUS later. */
    it_expect(STRATA_ENOMEM,
              strata_worker_create_buffer(f.w, (size_t)1 << 50, &b));
    assert_null(b);
    assert_non_null(strstr(strata_errmsg(), "/dev/shm"));
    it_expect(STRATA_ENOMEM, strata_worker_create_buffer(f.w, SIZE_MAX, &b));
    assert_null(b);
    it_expect(STRATA_EINVAL, strata_worker_run(f.w, NULL, NULL, NULL));
    it_expect(STRATA_EINVAL, strata_worker_submit(f.w, NULL, NULL, NULL, &run));
    assert_null(run);
    it_fx_end(&f);
}

static int setup(void **state)
{
    (void)state;
    if (it_kernels_register() != 0)
        return -1;
    it_register(kernel, "invalid.sum", sum_kernel, &k_sum);
    it_register(kernel, "invalid.nop", nop_kernel, &k_nop);
    it_register(orch, "invalid.dummy_orch", dummy_orch, &o_dummy);
    it_register(sub, "invalid.dummy_sub", dummy_sub, &s_dummy);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_invalid_unknown_worker_id_einval,
                                  it_teardown),
        cmocka_unit_test_teardown(test_invalid_callables_einval, it_teardown),
        cmocka_unit_test_teardown(
            test_invalid_tensor_ranges_and_overlapping_writes, it_teardown),
        cmocka_unit_test_teardown(test_invalid_tensor_descriptions_einval,
                                  it_teardown),
        cmocka_unit_test_teardown(test_invalid_args_limits_and_largest_args,
                                  it_teardown),
        cmocka_unit_test_teardown(test_invalid_release_in_use_buffer_estate,
                                  it_teardown),
        cmocka_unit_test_teardown(test_invalid_orch_after_its_fn_estate,
                                  it_teardown),
        cmocka_unit_test(test_invalid_unlimited_shm_takes_buffers),
        cmocka_unit_test_teardown(test_invalid_worker_calls_einval,
                                  it_teardown),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
