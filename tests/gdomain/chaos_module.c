/*
 * The callables of the chaos test (see chaos_module.h). Built twice: as
 * the module its strata-node loads (without libstrata: strata_* resolve
 * from strata-node) and into the test, whose forked L3 node needs them.
 */
#include "chaos_module.h"

#include <string.h>
#include <time.h>

#define MAX_LOCAL 8

static strata_callable k_allreduce, k_read, s_work;

/* Work that takes a while without sleeping: a kill has time to land. */
static void busy_us(uint64_t us)
{
    struct timespec t0, t;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((uint64_t)(t.tv_sec - t0.tv_sec) * 1000000u +
                 (uint64_t)((t.tv_nsec - t0.tv_nsec) / 1000) <
             us);
}

static const strata_comm_context *context(strata_chip *chip,
                                          const strata_args *a)
{
    const strata_comm_context *cc =
        strata_chip_comm_context(chip, strata_args_scalar(a, 0));

    if (!cc)
        strata_errmsg_set("chip %d: no comm context", strata_chip_id(chip));
    else if (cc->window_size < CHAOS_WINDOW) {
        strata_errmsg_set("chip %d: a window of %llu bytes",
                          strata_chip_id(chip),
                          (unsigned long long)cc->window_size);
        return NULL;
    }
    return cc;
}

static volatile uint32_t *word(const strata_comm_context *cc, uint32_t r,
                               size_t off)
{
    return (volatile uint32_t *)((char *)cc->window_base[r] + off);
}

static strata_err allreduce_kernel(strata_chip *chip, const strata_args *a)
{
    const strata_comm_context *cc = context(chip, a);
    uint32_t seed = (uint32_t)strata_args_scalar(a, 2);
    uint64_t wait_ms = strata_args_scalar(a, 3);
    uint32_t *mine, *sum;
    strata_err e;

    if (!cc)
        return STRATA_ENOENT;
    busy_us(strata_args_scalar(a, 1));
    mine = (uint32_t *)((char *)cc->window_base[cc->rank] + CHAOS_OFF_DATA);
    for (uint32_t i = 0; i < CHAOS_N; i++)
        mine[i] = chaos_value(seed, cc->rank, i);
    for (uint32_t r = 0; r < cc->rank_count; r++)
        strata_signal_add(word(cc, r, CHAOS_OFF_FLAG), 1);
    e = strata_signal_wait(
        word(cc, cc->rank, CHAOS_OFF_FLAG), cc->rank_count,
        wait_ms == CHAOS_WAIT_FOREVER ? -1.0 : (double)wait_ms / 1e3);
    if (e != STRATA_OK) {
        strata_errmsg_set("chaos.k.allreduce: rank %u of %u (chip %d): the "
                          "other ranks did not all signal",
                          cc->rank, cc->rank_count, strata_chip_id(chip));
        return e;
    }
    sum = (uint32_t *)((char *)cc->window_base[cc->rank] + CHAOS_OFF_SUM);
    for (uint32_t i = 0; i < CHAOS_N; i++) {
        uint32_t s = 0;

        for (uint32_t r = 0; r < cc->rank_count; r++)
            s += ((const uint32_t *)((const char *)cc->window_base[r] +
                                     CHAOS_OFF_DATA))[i];
        sum[i] = s;
    }
    return STRATA_OK;
}

static strata_err read_kernel(strata_chip *chip, const strata_args *a)
{
    const strata_comm_context *cc = context(chip, a);

    if (!cc)
        return STRATA_ENOENT;
    if (strata_args_tensor_nbytes(a, 0) != CHAOS_N * 4) {
        strata_errmsg_set("chaos.k.read: a tensor of %zu bytes",
                          strata_args_tensor_nbytes(a, 0));
        return STRATA_EINVAL;
    }
    memcpy(strata_args_tensor_data(a, 0),
           (const char *)cc->window_base[cc->rank] + CHAOS_OFF_SUM,
           CHAOS_N * 4);
    return STRATA_OK;
}

static strata_err work_sub(const strata_args *a)
{
    uint32_t seed = (uint32_t)strata_args_scalar(a, 0);
    uint32_t *out = strata_args_tensor_data(a, 0);

    if (!out || strata_args_tensor_nbytes(a, 0) != CHAOS_SUB_N * 4) {
        strata_errmsg_set("chaos.s.work: no tensor of %d bytes",
                          CHAOS_SUB_N * 4);
        return STRATA_EINVAL;
    }
    busy_us(strata_args_scalar(a, 1));
    for (uint32_t i = 0; i < CHAOS_SUB_N; i++)
        out[i] = chaos_sub_value(seed, i);
    return STRATA_OK;
}

/* This node's member chips (ids in order) and their contexts. */
static strata_err members(strata_orch *o, uint64_t id, int *chips,
                          strata_chip_domain_ctx *ctx, size_t *n)
{
    size_t num = strata_worker_num_chips(strata_orch_worker(o));
    strata_global_view *v = NULL;
    strata_err err = strata_orch_get_global_domain(o, id, &v);

    *n = 0;
    for (int c = 0; err == STRATA_OK && (size_t)c < num && *n < MAX_LOCAL;
         c++) {
        if (strata_global_view_context(v, c, &ctx[*n]) != STRATA_OK)
            continue; /* not a member */
        chips[(*n)++] = c;
    }
    return err;
}

static strata_err compute_orch(strata_orch *o, const strata_args *args,
                               void *user)
{
    strata_chip_domain_ctx ctx[MAX_LOCAL];
    strata_args *a[MAX_LOCAL] = {0};
    strata_args *s = NULL;
    const size_t shape[1] = {CHAOS_SUB_N};
    int chips[MAX_LOCAL];
    size_t n = 0;
    strata_err err;

    (void)user;
    err = members(o, strata_args_scalar(args, 0), chips, ctx, &n);
    for (size_t k = 0; err == STRATA_OK && k < n; k++) {
        if (ctx[k].num_buffers != 3 ||
            ctx[k].buffers[0].offset != CHAOS_OFF_DATA ||
            ctx[k].buffers[1].offset != CHAOS_OFF_SUM ||
            ctx[k].buffers[2].offset != CHAOS_OFF_FLAG) {
            strata_errmsg_set("chaos.o.compute: chip %d: the buffers are not "
                              "carved as chaos_module.h says",
                              chips[k]);
            err = STRATA_EINVAL;
            break;
        }
        err = strata_args_create(&a[k]);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(a[k], ctx[k].device_ctx);
        for (size_t i = 1; err == STRATA_OK && i < 4; i++)
            err = strata_args_add_scalar(a[k], strata_args_scalar(args, i));
    }
    if (err == STRATA_OK)
        err = strata_orch_submit_next_level_group(
            o, k_allreduce, (const strata_args *const *)a, chips, n);
    if (err == STRATA_OK)
        err = strata_args_create(&s);
    if (err == STRATA_OK)
        err = strata_args_add_tensor(s, strata_args_tensor_buffer(args, 0),
                                     strata_args_tensor_offset(args, 0),
                                     STRATA_U32, 1, shape, STRATA_OUT);
    if (err == STRATA_OK)
        err = strata_args_add_scalar(s, strata_args_scalar(args, 2));
    if (err == STRATA_OK)
        err = strata_args_add_scalar(s, strata_args_scalar(args, 1));
    if (err == STRATA_OK)
        err = strata_orch_submit_sub(o, s_work, s);
    strata_args_destroy(s);
    for (size_t k = 0; k < n; k++)
        strata_args_destroy(a[k]);
    return err;
}

static strata_err read_orch(strata_orch *o, const strata_args *args, void *user)
{
    strata_chip_domain_ctx ctx[MAX_LOCAL];
    int chips[MAX_LOCAL];
    const size_t shape[1] = {CHAOS_N};
    strata_args *a = NULL;
    size_t n = 0;
    strata_err err;

    (void)user;
    err = members(o, strata_args_scalar(args, 0), chips, ctx, &n);
    if (err == STRATA_OK &&
        strata_args_tensor_nbytes(args, 0) != n * CHAOS_N * 4) {
        strata_errmsg_set("chaos.o.read: the output holds %zu bytes, not %zu",
                          strata_args_tensor_nbytes(args, 0), n * CHAOS_N * 4);
        err = STRATA_EINVAL;
    }
    if (err == STRATA_OK)
        err = strata_args_create(&a);
    for (size_t k = 0; err == STRATA_OK && k < n; k++) {
        strata_args_clear(a);
        err = strata_args_add_tensor(a, strata_args_tensor_buffer(args, 0),
                                     strata_args_tensor_offset(args, 0) +
                                         k * CHAOS_N * 4,
                                     STRATA_U32, 1, shape, STRATA_OUT);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(a, ctx[k].device_ctx);
        if (err == STRATA_OK)
            err = strata_orch_submit_next_level(o, k_read, a, chips[k]);
    }
    strata_args_destroy(a);
    return err;
}

strata_err strata_module_init(void)
{
    strata_callable c;
    strata_err err = strata_register_kernel(CHAOS_K_ALLREDUCE, allreduce_kernel,
                                            &k_allreduce);

    if (err == STRATA_OK)
        err = strata_register_kernel(CHAOS_K_READ, read_kernel, &k_read);
    if (err == STRATA_OK)
        err = strata_register_sub(CHAOS_S_WORK, work_sub, &s_work);
    if (err == STRATA_OK)
        err = strata_register_orch(CHAOS_O_COMPUTE, compute_orch, &c);
    if (err == STRATA_OK)
        err = strata_register_orch(CHAOS_O_READ, read_orch, &c);
    return err;
}
