/* The callables of the handler fuzz targets: see fuzz_module.h. */
#include "fuzz_module.h"

#include <stdio.h>
#include <time.h>

static strata_callable k_touch;

/* The sum of every byte of every tensor. */
static uint8_t read_all(const strata_args *a)
{
    uint8_t sum = 0;

    for (size_t i = 0; i < strata_args_num_tensors(a); i++) {
        const volatile uint8_t *p = strata_args_tensor_data(a, i);
        size_t n = strata_args_tensor_nbytes(a, i);

        for (size_t k = 0; p && k < n; k++)
            sum = (uint8_t)(sum + p[k]);
    }
    return sum;
}

static strata_err touch_kernel(strata_chip *chip, const strata_args *a)
{
    uint8_t sum = read_all(a);

    (void)chip;
    for (size_t i = 0; i < strata_args_num_tensors(a); i++) {
        uint8_t *p = strata_args_tensor_data(a, i);
        size_t n = strata_args_tensor_nbytes(a, i);

        if (strata_args_tensor_tag(a, i) == STRATA_IN)
            continue;
        for (size_t k = 0; p && k < n; k++)
            p[k] = (uint8_t)(sum + k);
    }
    return STRATA_OK;
}

static strata_err noop_orch(strata_orch *o, const strata_args *a, void *user)
{
    (void)o;
    (void)a;
    (void)user;
    return STRATA_OK;
}

static strata_err fail_orch(strata_orch *o, const strata_args *a, void *user)
{
    (void)o;
    (void)a;
    (void)user;
    strata_errmsg_set("fuzz.fail: failing as asked");
    return STRATA_EINVAL;
}

static strata_err late_orch(strata_orch *o, const strata_args *a, void *user)
{
    uint64_t ms =
        strata_args_num_scalars(a) > 0 ? strata_args_scalar(a, 0) : 50;
    struct timespec ts;

    (void)o;
    (void)user;
    ms = ms < 100 ? ms : 100;
    ts.tv_sec = 0;
    ts.tv_nsec = (long)ms * 1000000L;
    while (nanosleep(&ts, &ts) != 0)
        ;
    for (size_t i = 0; i < strata_args_num_tensors(a); i++) {
        uint8_t *p = strata_args_tensor_data(a, i);

        if (strata_args_tensor_tag(a, i) == STRATA_IN)
            continue;
        for (size_t k = 0; p && k < strata_args_tensor_nbytes(a, i); k++)
            p[k] = (uint8_t)k;
    }
    return STRATA_OK;
}

/* Every tensor passed on by identity, with its own dtype and shape. */
static strata_err pass_all(strata_args *to, const strata_args *from)
{
    strata_err err = STRATA_OK;

    for (size_t i = 0; i < strata_args_num_tensors(from) && !err; i++) {
        size_t shape[STRATA_MAX_DIMS];
        size_t nd = strata_args_tensor_ndims(from, i);

        for (size_t d = 0; d < nd; d++)
            shape[d] = strata_args_tensor_dim(from, i, d);
        err = strata_args_add_tensor(to, strata_args_tensor_buffer(from, i),
                                     strata_args_tensor_offset(from, i),
                                     strata_args_tensor_dtype(from, i), nd,
                                     shape, strata_args_tensor_tag(from, i));
    }
    return err;
}

static strata_err touch_orch(strata_orch *o, const strata_args *a, void *user)
{
    int chip =
        strata_args_num_scalars(a) > 0 ? (int)strata_args_scalar(a, 0) : 0;
    uint64_t times =
        strata_args_num_scalars(a) > 1 ? strata_args_scalar(a, 1) : 1;
    strata_args *k = NULL;
    strata_err err;

    (void)user;
    (void)read_all(a);
    err = strata_args_create(&k);
    if (!err)
        err = pass_all(k, a);
    for (uint64_t t = 0; t < times && t < 4 && !err; t++)
        err = strata_orch_submit_next_level(o, k_touch, k, chip);
    strata_args_destroy(k);
    return err;
}

int fuzz_module_register(struct fuzz_callables *out)
{
    strata_err err =
        strata_register_kernel(FUZZ_K_TOUCH, touch_kernel, &k_touch);

    if (!err)
        err = strata_register_orch(FUZZ_O_NOOP, noop_orch, &out->noop);
    if (!err)
        err = strata_register_orch(FUZZ_O_FAIL, fail_orch, &out->fail);
    if (!err)
        err = strata_register_orch(FUZZ_O_TOUCH, touch_orch, &out->touch);
    if (!err)
        err = strata_register_orch(FUZZ_O_LATE, late_orch, &out->late);
    if (err) {
        fprintf(stderr, "fuzz: registering the callables: %s\n",
                strata_errmsg());
        return -1;
    }
    return 0;
}
