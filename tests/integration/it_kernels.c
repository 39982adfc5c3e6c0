/*
 * Kernels, subs, submit helpers and a worker fixture shared by the
 * integration tests.
 */
#include "it_kernels.h"

strata_callable it_k_fill, it_k_scale, it_k_add, it_k_chip_id;
strata_callable it_k_inc, it_k_wait_flag, it_s_scale;
const int it_ids4[4] = {0, 1, 2, 3};

static strata_err fill_kernel(strata_chip *chip, const strata_args *a)
{
    (void)chip;
    testutil_busy((double)strata_args_scalar(a, 1) * 1e-6);
    uint32_t *t = it_arg_u32(a, 0);
    for (size_t i = 0; i < it_arg_count(a, 0); i++)
        t[i] = (uint32_t)strata_args_scalar(a, 0) + (uint32_t)i;
    return STRATA_OK;
}

static strata_err scale(const strata_args *a)
{
    const uint32_t *in = it_arg_u32(a, 0);
    uint32_t *out = it_arg_u32(a, 1);
    size_t n = it_arg_count(a, 0);
    if (n != it_arg_count(a, 1)) {
        strata_errmsg_set("scale: %zu inputs, %zu outputs", n,
                          it_arg_count(a, 1));
        return STRATA_EINVAL;
    }
    for (size_t i = 0; i < n; i++)
        out[i] = in[i] * (uint32_t)strata_args_scalar(a, 0) +
                 (uint32_t)strata_args_scalar(a, 1);
    return STRATA_OK;
}

static strata_err scale_kernel(strata_chip *chip, const strata_args *a)
{
    (void)chip;
    return scale(a);
}

static strata_err scale_sub(const strata_args *a)
{
    return scale(a);
}

static strata_err add_kernel(strata_chip *chip, const strata_args *a)
{
    (void)chip;
    const uint32_t *x = it_arg_u32(a, 0), *y = it_arg_u32(a, 1);
    uint32_t *z = it_arg_u32(a, 2);
    for (size_t i = 0; i < it_arg_count(a, 2); i++)
        z[i] = x[i] + y[i];
    return STRATA_OK;
}

static strata_err chip_id_kernel(strata_chip *chip, const strata_args *a)
{
    uint32_t *t = it_arg_u32(a, 0);
    for (size_t i = 0; i < it_arg_count(a, 0); i++)
        t[i] = (uint32_t)strata_chip_id(chip);
    return STRATA_OK;
}

static strata_err inc_kernel(strata_chip *chip, const strata_args *a)
{
    (void)chip;
    it_arg_u32(a, 0)[0] += 1;
    return STRATA_OK;
}

static strata_err wait_flag_kernel(strata_chip *chip, const strata_args *a)
{
    if (!testutil_wait_u32(it_arg_u32(a, 0), 1, IT_WAIT_S)) {
        strata_errmsg_set("wait_flag on chip %d: flag never set",
                          strata_chip_id(chip));
        return STRATA_ETIMEDOUT;
    }
    it_arg_u32(a, 1)[0] = 77;
    return STRATA_OK;
}

#define MAX_TRACKED 16
static strata_worker *tracked[MAX_TRACKED];

static void track(strata_worker *w)
{
    for (size_t i = 0; i < MAX_TRACKED; i++) {
        if (!tracked[i]) {
            tracked[i] = w;
            return;
        }
    }
}

strata_err it_worker_create(const strata_worker_config *cfg,
                            strata_worker **out)
{
    strata_worker *w = NULL;
    it_try(strata_worker_create(cfg, &w));
    track(w);
    *out = w;
    return STRATA_OK;
}

strata_err it_worker_start(const int *ids, size_t n, size_t subs,
                           strata_worker **out)
{
    strata_worker_config cfg;
    strata_worker *w = NULL;
    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = ids;
    cfg.num_chips = n;
    cfg.num_sub_workers = subs;
    cfg.startup_timeout_s = 30;
    it_try(it_worker_create(&cfg, &w));
    strata_err e = strata_worker_init(w);
    if (e != STRATA_OK) {
        strata_err d = it_worker_destroy(w);
        (void)d; /* the init error is the one to report */
        return e;
    }
    *out = w;
    return STRATA_OK;
}

strata_err it_worker_destroy(strata_worker *w)
{
    for (size_t i = 0; i < MAX_TRACKED; i++)
        if (tracked[i] == w)
            tracked[i] = NULL;
    return strata_worker_destroy(w);
}

int it_teardown(void **state)
{
    (void)state;
    for (size_t i = 0; i < MAX_TRACKED; i++) {
        if (!tracked[i])
            continue;
        print_message("teardown: destroying a worker the test left\n");
        strata_err e = it_worker_destroy(tracked[i]);
        if (e != STRATA_OK)
            print_message("teardown: destroy: %s (%s)\n", strata_errname(e),
                          strata_errmsg());
    }
    return 0;
}

int it_setup_kernels(void **state)
{
    (void)state;
    return it_kernels_register();
}

int it_kernels_register(void)
{
    it_register(kernel, "it.fill", fill_kernel, &it_k_fill);
    it_register(kernel, "it.scale", scale_kernel, &it_k_scale);
    it_register(kernel, "it.add", add_kernel, &it_k_add);
    it_register(kernel, "it.chip_id", chip_id_kernel, &it_k_chip_id);
    it_register(kernel, "it.inc", inc_kernel, &it_k_inc);
    it_register(kernel, "it.wait_flag", wait_flag_kernel, &it_k_wait_flag);
    it_register(sub, "it.scale_sub", scale_sub, &it_s_scale);
    return 0;
}

strata_err it_submit_fill(strata_orch *o, int chip, strata_buffer *b,
                          size_t off, size_t n, uint32_t base, uint32_t busy_us)
{
    strata_args *a = NULL;
    it_try(it_args1(b, off, n, STRATA_OUT, &a));
    strata_err e = strata_args_add_scalar(a, base);
    if (e == STRATA_OK)
        e = strata_args_add_scalar(a, busy_us);
    if (e == STRATA_OK)
        e = strata_orch_submit_next_level(o, it_k_fill, a, chip);
    strata_args_destroy(a);
    return e;
}

strata_err it_submit_scale(strata_orch *o, int chip, strata_buffer *in,
                           strata_buffer *out, size_t n, uint32_t mul,
                           uint32_t add)
{
    strata_args *a = NULL;
    it_try(it_args1(in, 0, n, STRATA_IN, &a));
    strata_err e = it_add_u32(a, out, 0, n, STRATA_OUT);
    if (e == STRATA_OK)
        e = strata_args_add_scalar(a, mul);
    if (e == STRATA_OK)
        e = strata_args_add_scalar(a, add);
    if (e == STRATA_OK)
        e = chip >= 0 ? strata_orch_submit_next_level(o, it_k_scale, a, chip)
                      : strata_orch_submit_sub(o, it_s_scale, a);
    strata_args_destroy(a);
    return e;
}

strata_err it_submit_wait_flag(strata_orch *o, int chip, strata_buffer *flag,
                               strata_buffer *out)
{
    strata_args *a = NULL;
    it_try(it_args1(flag, 0, 1, STRATA_NO_DEP, &a));
    strata_err e = it_add_u32(a, out, 0, 1, STRATA_OUT);
    if (e == STRATA_OK)
        e = strata_orch_submit_next_level(o, it_k_wait_flag, a, chip);
    strata_args_destroy(a);
    return e;
}

void it_fx_start(struct it_fx *f, size_t words)
{
    testutil_snapshot_take(&f->before);
    f->n = words;
    it_ok(it_worker_start(it_ids4, 4, 2, &f->w));
    for (size_t i = 0; i < 6; i++)
        it_ok(strata_worker_create_buffer(f->w, words * sizeof(uint32_t),
                                          &f->b[i]));
}

void it_fx_end(struct it_fx *f)
{
    it_ok(it_worker_destroy(f->w));
    testutil_assert_clean(&f->before);
}

uint32_t *it_fx_w(struct it_fx *f, size_t i)
{
    return it_u32(f->b[i]);
}
