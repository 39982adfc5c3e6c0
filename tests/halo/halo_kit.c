/* Helpers shared by the halo execution tests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "halo_kit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hk_env_start(struct hk_env *env, size_t cap)
{
    static const int ids[HK_CHIPS] = {0, 1, 2, 3, 4, 5, 6, 7};
    strata_buffer **bufs[4] = {&env->x, &env->out, &env->grad_out,
                               &env->grad_x};
    strata_worker_config cfg;

    memset(env, 0, sizeof(*env));
    env->cap = cap;
    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = ids;
    cfg.num_chips = HK_CHIPS;
    assert_int_equal(strata_worker_create(&cfg, &env->w), STRATA_OK);
    for (int i = 0; i < 4; i++)
        assert_int_equal(strata_worker_create_buffer(env->w, cap, bufs[i]),
                         STRATA_OK);
    assert_int_equal(strata_worker_init(env->w), STRATA_OK);
}

void hk_env_stop(struct hk_env *env)
{
    if (env->w)
        assert_int_equal(strata_worker_destroy(env->w), STRATA_OK);
    env->w = NULL;
}

void hk_fill(strata_buffer *buf, strata_dtype dtype, uint64_t n, size_t f,
             uint64_t seed)
{
    uint64_t s = seed * 2654435761u + 1;

    for (size_t i = 0; i < n * f; i++) {
        double v = (double)(int)(gh_rand(&s) % 33) * 0.25 - 4.0;

        if (dtype == STRATA_F32)
            ((float *)strata_buffer_data(buf))[i] = (float)v;
        else
            ((double *)strata_buffer_data(buf))[i] = v;
    }
}

double hk_get(strata_buffer *buf, strata_dtype dtype, size_t i)
{
    if (dtype == STRATA_F32)
        return ((const float *)strata_buffer_data(buf))[i];
    return ((const double *)strata_buffer_data(buf))[i];
}

void hk_reference(const struct gh_graph *g, strata_halo_reducer reducer,
                  double (*weight)(int64_t dst, int64_t src), bool vjp,
                  const double *in, size_t f, double *ref)
{
    memset(ref, 0, g->n * f * sizeof(double));
    for (uint64_t i = 0; i < g->n; i++) {
        int64_t deg = g->row_ptr[i + 1] - g->row_ptr[i];

        for (int64_t k = g->row_ptr[i]; k < g->row_ptr[i + 1]; k++) {
            int64_t j = g->col_idx[k];
            double w = 1.0;

            if (weight)
                w = weight((int64_t)i, j);
            else if (reducer == STRATA_HALO_MEAN)
                w = 1.0 / (double)deg;
            for (size_t c = 0; c < f; c++) {
                if (vjp)
                    ref[j * f + c] += w * in[i * f + c];
                else
                    ref[i * f + c] += w * in[j * f + c];
            }
        }
    }
}

struct call {
    strata_halo *h;
    struct hk_env *env;
    bool vjp;
};

static strata_err call_orch(strata_orch *o, const strata_args *a, void *user)
{
    struct call *c = user;

    (void)a;
    if (c->vjp)
        return strata_halo_vjp(o, c->h, c->env->grad_out, c->env->grad_x);
    return strata_halo_forward(o, c->h, c->env->x, c->env->out);
}

strata_err hk_call(struct hk_env *env, strata_halo *h, bool vjp)
{
    struct call c = {h, env, vjp};

    return strata_worker_run(env->w, call_orch, NULL, &c);
}

void hk_expect_close(strata_buffer *buf, strata_dtype dtype, const double *ref,
                     size_t count, const char *label)
{
    double tol = dtype == STRATA_F32 ? 1e-4 : 1e-10;

    for (size_t i = 0; i < count; i++) {
        double got = hk_get(buf, dtype, i);

        if (fabs(got - ref[i]) > tol * (1.0 + fabs(ref[i])))
            fail_msg("%s: element %zu = %.17g, reference %.17g", label, i, got,
                     ref[i]);
    }
}
