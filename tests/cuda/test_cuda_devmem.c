/* Device buffers (strata/device.h): allocation on a chip, host <-> device
 * and device <-> device copies (one chip and across chips), device
 * tensors in task arguments (resolved on their chip, dependencies by tag
 * and byte range), and the refusals: a device tensor in a task for
 * another chip or the sub queue (STRATA_EINVAL), a release or write while
 * a run names it (STRATA_ESTATE).
 *
 * argv[1] is the platform. On "sim" (label cuda integration) the chip's
 * device memory is the chip process's own memory, so every path above
 * the backend runs without a GPU. On "cuda" (label gpu) the same cases
 * run on a device, and the program exits 77 (SKIPPED) when the worker
 * cannot start for want of a driver or device. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <strata/cuda.h>
#include <strata/device.h>
#include <strata/domain.h>
#include <strata/strata.h>
#include <string.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#define EXIT_SKIPPED 77

static const char *platform = "sim";
static strata_callable k_fail, k_mark, k_sum, k_gate, s_mark;

/* ------------------------------------------------------------------ */
/* Kernels                                                             */
/* ------------------------------------------------------------------ */

/* Fails: its dependents are poisoned. */
static strata_err fail_kernel(strata_chip *chip, const strata_args *a)
{
    (void)chip;
    (void)a;
    strata_errmsg_set("fails on purpose");
    return STRATA_EIO;
}

/* Host tensor 0 (u32) gets scalar 0; tensor 1 (a device tensor) must
 * resolve to a device address here. */
static strata_err mark_kernel(strata_chip *chip, const strata_args *a)
{
    uint32_t *out = strata_args_tensor_data(a, 0);

    (void)chip;
    if (!strata_args_tensor_data(a, 1)) {
        strata_errmsg_set("the device tensor has no address");
        return STRATA_EINVAL;
    }
    *out = (uint32_t)strata_args_scalar(a, 0);
    return STRATA_OK;
}

/* sim only (the device memory is this process's): host tensor 0 gets the
 * sum of device tensor 1's u32s. */
static strata_err sum_kernel(strata_chip *chip, const strata_args *a)
{
    const uint32_t *in = strata_args_tensor_data(a, 1);
    uint32_t *out = strata_args_tensor_data(a, 0);
    uint32_t sum = 0;

    (void)chip;
    for (size_t i = 0; i < strata_args_tensor_nbytes(a, 1) / 4; i++)
        sum += in[i];
    *out = sum;
    return STRATA_OK;
}

/* A sub: never runs (a device tensor is refused for the sub queue). */
static strata_err sub_mark(const strata_args *a)
{
    (void)a;
    return STRATA_OK;
}

/* Waits (bounded) until host tensor 0's first u32 is 1. */
static strata_err gate_kernel(strata_chip *chip, const strata_args *a)
{
    (void)chip;
    if (!testutil_wait_u32(strata_args_tensor_data(a, 0), 1, 60.0)) {
        strata_errmsg_set("the gate never opened");
        return STRATA_ETIMEDOUT;
    }
    return STRATA_OK;
}

/* ------------------------------------------------------------------ */
/* Fixture                                                             */
/* ------------------------------------------------------------------ */

struct fixture {
    strata_worker *w;
    testutil_snapshot before;
};

static struct fixture fx;

static void start(size_t chips, size_t subs)
{
    static const int ids[] = {0, 1};
    strata_worker_config cfg;

    testutil_snapshot_take(&fx.before);
    strata_worker_config_init(&cfg, 3);
    cfg.platform = platform;
    cfg.chip_ids = ids;
    cfg.num_chips = chips;
    cfg.num_sub_workers = subs;
    if (strcmp(platform, "cuda") == 0)
        cfg.device_ordinals = (const int[]){0, 0}; /* one GPU will do */
    assert_int_equal(strata_worker_create(&cfg, &fx.w), STRATA_OK);
    if (strata_worker_init(fx.w) != STRATA_OK)
        fail_msg("strata_worker_init: %s", strata_errmsg());
}

static void stop(void)
{
    assert_int_equal(strata_worker_destroy(fx.w), STRATA_OK);
    fx.w = NULL;
    testutil_assert_clean(&fx.before);
}

static strata_buffer *dev(int chip, size_t n)
{
    strata_buffer *b = NULL;

    if (strata_worker_create_device_buffer(fx.w, chip, n, &b) != STRATA_OK)
        fail_msg("device buffer on chip %d: %s", chip, strata_errmsg());
    assert_int_equal(strata_buffer_chip(b), chip);
    assert_null(strata_buffer_data(b));
    assert_int_equal(strata_buffer_size(b), n);
    return b;
}

static strata_buffer *host(size_t n)
{
    strata_buffer *b = NULL;

    assert_int_equal(strata_worker_create_buffer(fx.w, n, &b), STRATA_OK);
    assert_int_equal(strata_buffer_chip(b), -1);
    return b;
}

/* ------------------------------------------------------------------ */
/* Round trips and copies                                              */
/* ------------------------------------------------------------------ */

/* Written from host memory and read back, past one staging area (1 MiB)
 * and at an offset; a new buffer reads as zeros. */
static void test_devmem_write_read_round_trip(void **state)
{
    const size_t n = 3u << 20; /* three staging pieces */
    uint8_t *src = malloc(n), *back = malloc(n);
    strata_buffer *d;

    (void)state;
    assert_non_null(src);
    assert_non_null(back);
    start(1, 0);
    d = dev(0, n + 4096);
    assert_int_equal(strata_buffer_read(d, 0, back, n), STRATA_OK);
    for (size_t i = 0; i < n; i++)
        if (back[i])
            fail_msg("byte %zu of a new device buffer is %u", i, back[i]);
    for (size_t i = 0; i < n; i++)
        src[i] = (uint8_t)(i * 131u + 7u);
    assert_int_equal(strata_buffer_write(d, 4096, src, n), STRATA_OK);
    memset(back, 0, n);
    assert_int_equal(strata_buffer_read(d, 4096, back, n), STRATA_OK);
    assert_memory_equal(src, back, n);
    /* Outside the buffer: refused, nothing copied. */
    assert_int_equal(strata_buffer_write(d, 4097, src, n), STRATA_EINVAL);
    assert_int_equal(strata_buffer_release(d), STRATA_OK);
    stop();
    free(src);
    free(back);
}

struct copy_job {
    strata_buffer *h_in, *h_out, *d0, *d0b, *d1;
    size_t n;
};

/* host -> chip 0 -> (same chip) chip 0 -> (across) chip 1 -> host. */
static strata_err copy_chain(strata_orch *o, const strata_args *unused,
                             void *user)
{
    struct copy_job *j = user;
    strata_err err;

    (void)unused;
    err = strata_orch_buffer_copy(o, j->d0, 0, j->h_in, 0, j->n);
    if (!err)
        err = strata_orch_buffer_copy(o, j->d0b, 16, j->d0, 0, j->n);
    if (!err)
        err = strata_orch_buffer_copy(o, j->d1, 0, j->d0b, 16, j->n);
    if (!err)
        err = strata_orch_buffer_copy(o, j->h_out, 0, j->d1, 0, j->n);
    return err;
}

static void test_devmem_copies_host_device_and_across_chips(void **state)
{
    struct copy_job j = {.n = 1u << 16};
    uint32_t *in, *out;

    (void)state;
    start(2, 0);
    j.h_in = host(j.n);
    j.h_out = host(j.n);
    j.d0 = dev(0, j.n);
    j.d0b = dev(0, j.n + 16);
    j.d1 = dev(1, j.n);
    in = strata_buffer_data(j.h_in);
    out = strata_buffer_data(j.h_out);
    for (size_t i = 0; i < j.n / 4; i++)
        in[i] = (uint32_t)(i * 2654435761u);
    if (strata_worker_run(fx.w, copy_chain, NULL, &j) != STRATA_OK)
        fail_msg("copy chain: %s", strata_errmsg());
    assert_memory_equal(in, out, j.n);
    assert_int_equal(strata_buffer_release(j.d0), STRATA_OK);
    assert_int_equal(strata_buffer_release(j.d0b), STRATA_OK);
    /* d1 and the host buffers go with the worker. */
    stop();
}

struct bad_copy {
    strata_buffer *h, *h2, *d;
    strata_err got[4];
    char msg[4][STRATA_ERRMSG_MAX];
};

static strata_err bad_copies(strata_orch *o, const strata_args *unused,
                             void *user)
{
    struct bad_copy *b = user;

    (void)unused;
    b->got[0] = strata_orch_buffer_copy(o, b->h, 0, b->h2, 0, 8);
    snprintf(b->msg[0], sizeof(b->msg[0]), "%s", strata_errmsg());
    b->got[1] = strata_orch_buffer_copy(o, b->d, 60, b->h, 0, 8);
    snprintf(b->msg[1], sizeof(b->msg[1]), "%s", strata_errmsg());
    b->got[2] = strata_orch_buffer_copy(o, b->d, 0, b->d, 4, 8);
    snprintf(b->msg[2], sizeof(b->msg[2]), "%s", strata_errmsg());
    b->got[3] = strata_orch_buffer_copy(o, NULL, 0, b->d, 0, 8);
    snprintf(b->msg[3], sizeof(b->msg[3]), "%s", strata_errmsg());
    return STRATA_OK;
}

static void test_devmem_bad_copies_einval(void **state)
{
    static const char *const want[] = {"both host buffers", "outside",
                                       "overlap", "dst"};
    struct bad_copy b = {0};

    (void)state;
    start(1, 0);
    b.h = host(64);
    b.h2 = host(64);
    b.d = dev(0, 64);
    assert_int_equal(strata_worker_run(fx.w, bad_copies, NULL, &b), STRATA_OK);
    for (int i = 0; i < 4; i++) {
        print_message("copy %d: %s\n", i, b.msg[i]);
        assert_int_equal(b.got[i], STRATA_EINVAL);
        if (!strstr(b.msg[i], want[i]))
            fail_msg("copy %d: '%s' lacks '%s'", i, b.msg[i], want[i]);
    }
    stop();
}

/* ------------------------------------------------------------------ */
/* Device tensors in tasks                                             */
/* ------------------------------------------------------------------ */

struct task_job {
    strata_buffer *d, *marks;
    int chip;     /* target of every task */
    int bad_chip; /* >= 0: one more task, for this chip, naming d */
    bool to_subs; /* one more task, to the sub queue, naming d */
    strata_err bad_err;
    char bad_msg[STRATA_ERRMSG_MAX];
};

static strata_err add_dev(strata_args *a, strata_buffer *d, size_t off,
                          size_t count, strata_tag tag)
{
    return strata_args_add_tensor(a, d, off, STRATA_U32, 1, &count, tag);
}

static strata_err add_mark(strata_args *a, strata_buffer *marks, size_t i)
{
    const size_t one = 1;

    return strata_args_add_tensor(a, marks, i * 4, STRATA_U32, 1, &one,
                                  STRATA_OUT);
}

/* K1 writes d[0, 64) and fails; K2 reads d[32, 96) (after K1: poisoned,
 * never runs); K3 reads d[64, 128) (independent of K1: runs); K4 reads
 * all of d and sums it into marks[3] (sim). */
static strata_err poison_job(strata_orch *o, const strata_args *unused,
                             void *user)
{
    struct task_job *j = user;
    strata_args *a = NULL;
    strata_err err = strata_args_create(&a);

    (void)unused;
    if (!err)
        err = add_mark(a, j->marks, 0);
    if (!err)
        err = add_dev(a, j->d, 0, 16, STRATA_OUT);
    if (!err)
        err = strata_orch_submit_next_level(o, k_fail, a, j->chip);
    for (int k = 1; !err && k <= 2; k++) {
        strata_args_clear(a);
        err = add_mark(a, j->marks, (size_t)k);
        if (!err)
            err = add_dev(a, j->d, k == 1 ? 32 : 64, 16, STRATA_IN);
        if (!err)
            err = strata_args_add_scalar(a, 100u + (unsigned)k);
        if (!err)
            err = strata_orch_submit_next_level(o, k_mark, a, j->chip);
    }
    if (!err && strcmp(platform, "sim") == 0) {
        strata_args_clear(a);
        err = add_mark(a, j->marks, 3);
        if (!err)
            err = add_dev(a, j->d, 64, 16, STRATA_IN);
        if (!err)
            err = strata_orch_submit_next_level(o, k_sum, a, j->chip);
    }
    strata_args_destroy(a);
    return err;
}

static void test_devmem_tensor_deps_by_byte_range(void **state)
{
    struct task_job j = {.chip = 1};
    uint32_t vals[16], *marks;
    uint32_t sum = 0;
    strata_err err;

    (void)state;
    start(2, 0);
    j.d = dev(1, 128);
    j.marks = host(16);
    marks = strata_buffer_data(j.marks);
    for (int i = 0; i < 16; i++) {
        vals[i] = (uint32_t)(i + 1) * 3u;
        sum += vals[i];
    }
    assert_int_equal(strata_buffer_write(j.d, 64, vals, sizeof(vals)),
                     STRATA_OK);
    err = strata_worker_run(fx.w, poison_job, NULL, &j);
    print_message("run: %s\n", strata_errmsg());
    assert_int_equal(err, STRATA_ETASK);
    assert_non_null(strstr(strata_errmsg(), "fails on purpose"));
    assert_int_equal(marks[1], 0);   /* K2 depended on K1: never ran */
    assert_int_equal(marks[2], 102); /* K3 did not */
    if (strcmp(platform, "sim") == 0)
        assert_int_equal(marks[3], sum); /* the device bytes, on the chip */
    stop();
}

static strata_err misdirected_job(strata_orch *o, const strata_args *unused,
                                  void *user)
{
    struct task_job *j = user;
    strata_args *a = NULL;
    strata_err err = strata_args_create(&a);

    (void)unused;
    if (!err)
        err = add_mark(a, j->marks, 0);
    if (!err)
        err = add_dev(a, j->d, 0, 4, STRATA_IN);
    if (!err)
        err = strata_args_add_scalar(a, 7);
    if (!err) {
        j->bad_err = j->to_subs ? strata_orch_submit_sub(o, s_mark, a)
                                : strata_orch_submit_next_level(o, k_mark, a,
                                                                j->bad_chip);
        snprintf(j->bad_msg, sizeof(j->bad_msg), "%s", strata_errmsg());
        /* The refused submit changed nothing: its own chip takes it. */
        err = strata_orch_submit_next_level(o, k_mark, a, j->chip);
    }
    strata_args_destroy(a);
    return err;
}

static void test_devmem_tensor_for_other_chip_or_subs_einval(void **state)
{
    struct task_job j = {.chip = 0, .bad_chip = 1};

    (void)state;
    start(2, 1);
    j.d = dev(0, 64);
    j.marks = host(16);
    assert_int_equal(strata_worker_run(fx.w, misdirected_job, NULL, &j),
                     STRATA_OK);
    print_message("other chip: %s\n", j.bad_msg);
    assert_int_equal(j.bad_err, STRATA_EINVAL);
    assert_non_null(strstr(j.bad_msg, "lives on chip 0"));
    assert_non_null(strstr(j.bad_msg, "chip 1"));
    assert_int_equal(((uint32_t *)strata_buffer_data(j.marks))[0], 7);

    j.to_subs = true;
    assert_int_equal(strata_worker_run(fx.w, misdirected_job, NULL, &j),
                     STRATA_OK);
    print_message("sub queue: %s\n", j.bad_msg);
    assert_int_equal(j.bad_err, STRATA_EINVAL);
    assert_non_null(strstr(j.bad_msg, "sub task"));
    stop();
}

struct gate_job {
    strata_buffer *gate, *d;
};

static strata_err gated_job(strata_orch *o, const strata_args *unused,
                            void *user)
{
    struct gate_job *g = user;
    const size_t one = 1, n = 16;
    strata_args *a = NULL;
    strata_err err = strata_args_create(&a);

    (void)unused;
    if (!err)
        err = strata_args_add_tensor(a, g->gate, 0, STRATA_U32, 1, &one,
                                     STRATA_NO_DEP);
    if (!err)
        err =
            strata_args_add_tensor(a, g->d, 0, STRATA_U32, 1, &n, STRATA_INOUT);
    if (!err)
        err = strata_orch_submit_next_level(o, k_gate, a, 0);
    strata_args_destroy(a);
    return err;
}

/* While a run names a device buffer, it is neither freed nor copied into
 * (STRATA_ESTATE, buffer kept); after the run, both work. */
static void test_devmem_release_while_named_estate(void **state)
{
    struct gate_job g;
    strata_run *run = NULL;
    const uint32_t v = 5;

    (void)state;
    start(1, 0);
    g.gate = host(4);
    g.d = dev(0, 64);
    assert_int_equal(strata_worker_submit(fx.w, gated_job, NULL, &g, &run),
                     STRATA_OK);
    assert_int_equal(strata_buffer_release(g.d), STRATA_ESTATE);
    assert_non_null(strstr(strata_errmsg(), "unfinished task"));
    assert_int_equal(strata_buffer_write(g.d, 0, &v, 4), STRATA_ESTATE);
    testutil_store_u32(strata_buffer_data(g.gate), 1);
    assert_int_equal(strata_run_wait(run, 60.0), STRATA_OK);
    strata_run_free(run);
    assert_int_equal(strata_buffer_write(g.d, 0, &v, 4), STRATA_OK);
    assert_int_equal(strata_buffer_release(g.d), STRATA_OK);
    stop();
}

/* Arguments: NULLs, nbytes 0, no such chip, before init, level 4. */
static void test_devmem_create_refusals(void **state)
{
    static const int ids[] = {0};
    strata_worker_config cfg;
    strata_worker *w = NULL, *l4 = NULL;
    strata_buffer *b = NULL;
    strata_args *a = NULL;
    const size_t n = 4;

    (void)state;
    testutil_snapshot_take(&fx.before);
    strata_worker_config_init(&cfg, 3);
    cfg.platform = platform;
    cfg.chip_ids = ids;
    cfg.num_chips = 1;
    assert_int_equal(strata_worker_create(&cfg, &w), STRATA_OK);
    assert_int_equal(strata_worker_create_device_buffer(w, 0, 16, &b),
                     STRATA_ESTATE);
    assert_non_null(strstr(strata_errmsg(), "strata_worker_init"));
    if (strata_worker_init(w) != STRATA_OK)
        fail_msg("strata_worker_init: %s", strata_errmsg());
    assert_int_equal(strata_worker_create_device_buffer(NULL, 0, 16, &b),
                     STRATA_EINVAL);
    assert_non_null(strstr(strata_errmsg(), ": w is NULL"));
    assert_int_equal(strata_worker_create_device_buffer(w, 0, 16, NULL),
                     STRATA_EINVAL);
    assert_non_null(strstr(strata_errmsg(), ": out is NULL"));
    assert_int_equal(strata_worker_create_device_buffer(w, 0, 0, &b),
                     STRATA_EINVAL);
    assert_non_null(strstr(strata_errmsg(), "nbytes is 0"));
    assert_int_equal(strata_worker_create_device_buffer(w, 3, 16, &b),
                     STRATA_EINVAL);
    assert_non_null(strstr(strata_errmsg(), "no chip 3"));
    assert_int_equal(strata_worker_create_device_buffer(w, -1, 16, &b),
                     STRATA_EINVAL);
    assert_null(b);
    assert_int_equal(strata_buffer_chip(NULL), -1);
    /* An argument list names a device tensor without a host address. */
    assert_int_equal(strata_worker_create_device_buffer(w, 0, 16, &b),
                     STRATA_OK);
    assert_int_equal(strata_args_create(&a), STRATA_OK);
    assert_int_equal(
        strata_args_add_tensor(a, b, 4, STRATA_U32, 1, &n, STRATA_IN),
        STRATA_EINVAL); /* 4 + 16 > 16 */
    assert_int_equal(
        strata_args_add_tensor(a, b, 0, STRATA_U32, 1, &n, STRATA_IN),
        STRATA_OK);
    assert_null(strata_args_tensor_data(a, 0));
    assert_ptr_equal(strata_args_tensor_buffer(a, 0), b);
    strata_args_destroy(a);
    assert_int_equal(strata_worker_destroy(w), STRATA_OK);

    strata_worker_config_init(&cfg, 4);
    assert_int_equal(strata_worker_create(&cfg, &l4), STRATA_OK);
    assert_int_equal(strata_worker_create_device_buffer(l4, 0, 16, &b),
                     STRATA_EINVAL);
    assert_non_null(strstr(strata_errmsg(), "level-4"));
    assert_int_equal(strata_worker_destroy(l4), STRATA_OK);
    testutil_assert_clean(&fx.before);
}

struct win_job {
    strata_buffer *in, *zeros, *out;
    size_t n;
};

/* A domain of chips 0 and 1: each window reads as zeros, takes bytes and
 * gives them back; on cuda through cuda-ipc windows (cuMemCreate, fd
 * export, pidfd_getfd, import, cuMemMap) and the backend's copies. */
static strata_err window_job(strata_orch *o, const strata_args *unused,
                             void *user)
{
    static const int members[] = {0, 1};
    struct win_job *j = user;
    const strata_comm_buffer_spec buf = {"b", STRATA_U8, j->n, j->n};
    const strata_domain_spec spec = {"devwin", members, 2, j->n, &buf, 1};
    strata_domain *d = NULL;
    strata_err err;

    (void)unused;
    err = strata_orch_allocate_domain(o, &spec, &d);
    for (int r = 0; !err && r < 2; r++) {
        err = strata_orch_copy_from(o, d, r, "b", 0, j->zeros, (size_t)r * j->n,
                                    j->n);
        if (!err)
            err = strata_orch_copy_to(o, d, r, "b", 0, j->in, 0, j->n);
        if (!err)
            err = strata_orch_copy_from(o, d, r, "b", 0, j->out,
                                        (size_t)r * j->n, j->n);
    }
    if (d && strata_domain_release(d) != STRATA_OK && !err)
        err = STRATA_ESTATE;
    return err;
}

static void test_devmem_domain_windows_round_trip(void **state)
{
    struct win_job j = {.n = 1u << 16};
    uint8_t *in, *zeros, *out;

    (void)state;
    start(2, 0);
    j.in = host(j.n);
    j.zeros = host(2 * j.n);
    j.out = host(2 * j.n);
    in = strata_buffer_data(j.in);
    zeros = strata_buffer_data(j.zeros);
    out = strata_buffer_data(j.out);
    memset(zeros, 0xee, 2 * j.n);
    for (size_t i = 0; i < j.n; i++)
        in[i] = (uint8_t)(i * 7u + 1u);
    if (strata_worker_run(fx.w, window_job, NULL, &j) != STRATA_OK)
        fail_msg("domain windows: %s", strata_errmsg());
    for (size_t i = 0; i < 2 * j.n; i++)
        if (zeros[i])
            fail_msg("byte %zu of a new window is %u", i, zeros[i]);
    assert_memory_equal(out, in, j.n);
    assert_memory_equal(out + j.n, in, j.n);
    stop();
}

/* Is there a device for platform "cuda"? */
static bool cuda_usable(char *why, size_t cap)
{
    static const int ids[] = {0};
    strata_worker_config cfg;
    strata_worker *w = NULL;
    strata_err err;

    strata_worker_config_init(&cfg, 3);
    cfg.platform = "cuda";
    cfg.chip_ids = ids;
    cfg.num_chips = 1;
    cfg.device_ordinals = (const int[]){0};
    if (strata_worker_create(&cfg, &w) != STRATA_OK)
        return false;
    err = strata_worker_init(w);
    snprintf(why, cap, "%s", err ? strata_errmsg() : "");
    if (strata_worker_destroy(w) != STRATA_OK)
        return false;
    return err == STRATA_OK;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_devmem_write_read_round_trip),
        cmocka_unit_test(test_devmem_copies_host_device_and_across_chips),
        cmocka_unit_test(test_devmem_bad_copies_einval),
        cmocka_unit_test(test_devmem_tensor_deps_by_byte_range),
        cmocka_unit_test(test_devmem_tensor_for_other_chip_or_subs_einval),
        cmocka_unit_test(test_devmem_release_while_named_estate),
        cmocka_unit_test(test_devmem_create_refusals),
        cmocka_unit_test(test_devmem_domain_windows_round_trip),
    };
    char why[STRATA_ERRMSG_MAX];

    if (argc > 1)
        platform = argv[1];
    if (strata_register_kernel("devmem.fail", fail_kernel, &k_fail) ||
        strata_register_kernel("devmem.mark", mark_kernel, &k_mark) ||
        strata_register_kernel("devmem.sum", sum_kernel, &k_sum) ||
        strata_register_kernel("devmem.gate", gate_kernel, &k_gate) ||
        strata_register_sub("devmem.sub_mark", sub_mark, &s_mark)) {
        fprintf(stderr, "register: %s\n", strata_errmsg());
        return 1;
    }
    if (strcmp(platform, "cuda") == 0 && !cuda_usable(why, sizeof(why))) {
        printf("SKIPPED: no usable CUDA device (%s)\n", why);
        return EXIT_SKIPPED;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
