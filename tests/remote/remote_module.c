/*
 * The callables of the remote tests. This file is built twice: as the
 * module the test daemons load (--module, without libstrata: strata_*
 * resolve from strata-node) and into the test executables, whose forked L3
 * nodes need the same callables. See remote_module.h.
 */
#define _GNU_SOURCE
#include "remote_module.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static strata_callable k_add, k_span;

static uint64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(uint64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* t2 = t0 + t1 (u32). */
static strata_err add_kernel(strata_chip *chip, const strata_args *a)
{
    const uint32_t *x = strata_args_tensor_data(a, 0);
    const uint32_t *y = strata_args_tensor_data(a, 1);
    uint32_t *z = strata_args_tensor_data(a, 2);
    size_t n = strata_args_tensor_nbytes(a, 2) / sizeof(uint32_t);

    (void)chip;
    if (!x || !y || !z || strata_args_tensor_nbytes(a, 0) != n * 4 ||
        strata_args_tensor_nbytes(a, 1) != n * 4) {
        strata_errmsg_set("rt.add: bad tensors");
        return STRATA_EINVAL;
    }
    for (size_t i = 0; i < n; i++)
        z[i] = x[i] + y[i];
    return STRATA_OK;
}

/* t0 = struct rt_span (NO_DEP), scalar 0 = ms to sleep; t1 (optional, IN,
 * u8) = a NUL-terminated path created once the kernel runs. */
static strata_err span_kernel(strata_chip *chip, const strata_args *a)
{
    struct rt_span *s = strata_args_tensor_data(a, 0);
    uint64_t start = mono_ns();

    if (!s || strata_args_tensor_nbytes(a, 0) < sizeof(*s)) {
        strata_errmsg_set("rt.span: tensor 0 must hold a struct rt_span");
        return STRATA_EINVAL;
    }
    s->start_ns = start;
    s->pid = (uint64_t)getpid();
    s->chip = (uint64_t)strata_chip_id(chip);
    if (strata_args_num_tensors(a) > 1) {
        const char *path = strata_args_tensor_data(a, 1);
        size_t n = strata_args_tensor_nbytes(a, 1);
        int fd;

        if (!path || n == 0 || path[n - 1] != '\0') {
            strata_errmsg_set("rt.span: tensor 1 must be a C string");
            return STRATA_EINVAL;
        }
        fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0) {
            strata_errmsg_set("rt.span: cannot create %s: %s", path,
                              strerror(errno));
            return STRATA_EIO;
        }
        close(fd);
    }
    sleep_ms(strata_args_num_scalars(a) > 0 ? strata_args_scalar(a, 0) : 0);
    s->end_ns = mono_ns();
    return STRATA_OK;
}

/* Passes tensor i of args on to a kernel, by buffer identity. */
static strata_err pass_tensor(strata_args *to, const strata_args *from,
                              size_t i, size_t byte_off, size_t bytes)
{
    size_t elem = strata_dtype_size(strata_args_tensor_dtype(from, i));
    size_t shape[1] = {bytes / elem};

    return strata_args_add_tensor(to, strata_args_tensor_buffer(from, i),
                                  strata_args_tensor_offset(from, i) + byte_off,
                                  strata_args_tensor_dtype(from, i), 1, shape,
                                  strata_args_tensor_tag(from, i));
}

/* t0, t1 (IN u32), t2 (OUT u32): one rt.add kernel per chip of the node
 * (chip ids 0..n-1), each on a contiguous share. */
static strata_err add_orch(strata_orch *o, const strata_args *args, void *user)
{
    size_t chips = strata_worker_num_chips(strata_orch_worker(o));
    size_t n = strata_args_tensor_nbytes(args, 2) / sizeof(uint32_t);
    strata_err err = STRATA_OK;

    (void)user;
    if (chips == 0 || strata_args_num_tensors(args) != 3) {
        strata_errmsg_set("rt.add: needs 3 tensors and a chip");
        return STRATA_EINVAL;
    }
    for (size_t c = 0; c < chips && !err; c++) {
        size_t lo = n * c / chips, hi = n * (c + 1) / chips;
        strata_args *k = NULL;

        if (hi == lo)
            continue;
        err = strata_args_create(&k);
        for (size_t t = 0; t < 3 && !err; t++)
            err = pass_tensor(k, args, t, lo * 4, (hi - lo) * 4);
        if (!err)
            err = strata_orch_submit_next_level(o, k_add, k, (int)c);
        strata_args_destroy(k);
    }
    return err;
}

/* Every tensor passed on by identity to rt.span on chip scalar 1, with
 * scalar 0 (ms) as the kernel's scalar. */
static strata_err span_orch(strata_orch *o, const strata_args *args, void *user)
{
    strata_args *k = NULL;
    strata_err err;

    (void)user;
    if (strata_args_num_scalars(args) < 2) {
        strata_errmsg_set("rt.span: needs scalars (ms, chip)");
        return STRATA_EINVAL;
    }
    err = strata_args_create(&k);
    for (size_t t = 0; t < strata_args_num_tensors(args) && !err; t++)
        err = pass_tensor(k, args, t, 0, strata_args_tensor_nbytes(args, t));
    if (!err)
        err = strata_args_add_scalar(k, strata_args_scalar(args, 0));
    if (!err)
        err = strata_orch_submit_next_level(o, k_span, k,
                                            (int)strata_args_scalar(args, 1));
    strata_args_destroy(k);
    return err;
}

static strata_err noop_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)o;
    (void)args;
    (void)user;
    return STRATA_OK;
}

strata_err strata_module_init(void)
{
    strata_callable c;
    strata_err err = strata_register_kernel(RT_K_ADD, add_kernel, &k_add);

    if (!err)
        err = strata_register_kernel(RT_K_SPAN, span_kernel, &k_span);
    if (!err)
        err = strata_register_orch(RT_O_ADD, add_orch, &c);
    if (!err)
        err = strata_register_orch(RT_O_SPAN, span_orch, &c);
    if (!err)
        err = strata_register_orch(RT_O_NOOP, noop_orch, &c);
    return err;
}
