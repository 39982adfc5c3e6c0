/* minimal: a complete strata program (the one in README.md). */
#include <stdio.h>
#include <strata/strata.h>

#define N 8

/* Kernels run in chip processes, subs in sub-worker processes. */
static strata_err fill(strata_chip *chip, const strata_args *args)
{
    float *x = strata_args_tensor_data(args, 0);
    (void)chip;
    for (int i = 0; i < N; i++)
        x[i] = (float)i;
    return STRATA_OK;
}

static strata_err twice(strata_chip *chip, const strata_args *args)
{
    float *x = strata_args_tensor_data(args, 0);
    (void)chip;
    for (int i = 0; i < N; i++)
        x[i] *= 2;
    return STRATA_OK;
}

static strata_err sum(const strata_args *args)
{
    const float *x = strata_args_tensor_data(args, 0);
    float *total = strata_args_tensor_data(args, 1);
    *total = 0;
    for (int i = 0; i < N; i++)
        *total += x[i];
    return STRATA_OK;
}

struct job {
    strata_buffer *x, *total;
    strata_callable fill, twice, sum;
};

/* Appends float32 elements [0, count) of buf to a, tagged. */
static strata_err add_f32(strata_args *a, strata_buffer *buf, size_t count,
                          strata_tag tag)
{
    const size_t shape[1] = {count};
    return strata_args_add_tensor(a, buf, 0, STRATA_F32, 1, shape, tag);
}

/* The orch fn submits three tasks and returns; strata orders them from the
 * tags: fill writes x, twice reads and writes x, sum reads x. */
static strata_err orch(strata_orch *o, const strata_args *unused, void *user)
{
    struct job *j = user;
    strata_args *a = NULL;
    strata_err err = strata_args_create(&a);
    (void)unused;
    if (err != STRATA_OK)
        return err;
    err = add_f32(a, j->x, N, STRATA_OUT);
    if (err == STRATA_OK)
        err = strata_orch_submit_next_level(o, j->fill, a, 0); /* chip 0 */
    strata_args_clear(a);
    if (err == STRATA_OK)
        err = add_f32(a, j->x, N, STRATA_INOUT);
    if (err == STRATA_OK)
        err = strata_orch_submit_next_level(o, j->twice, a, 1); /* chip 1 */
    strata_args_clear(a);
    if (err == STRATA_OK)
        err = add_f32(a, j->x, N, STRATA_IN);
    if (err == STRATA_OK)
        err = add_f32(a, j->total, 1, STRATA_OUT);
    if (err == STRATA_OK)
        err = strata_orch_submit_sub(o, j->sum, a); /* any sub worker */
    strata_args_destroy(a); /* submit copied the arguments */
    return err;
}

static strata_err setup_and_run(strata_worker *w, struct job *j)
{
    strata_err err = strata_register_kernel("fill", fill, &j->fill);
    if (err == STRATA_OK)
        err = strata_register_kernel("twice", twice, &j->twice);
    if (err == STRATA_OK)
        err = strata_register_sub("sum", sum, &j->sum);
    if (err == STRATA_OK)
        err = strata_worker_create_buffer(w, N * sizeof(float), &j->x);
    if (err == STRATA_OK)
        err = strata_worker_create_buffer(w, sizeof(float), &j->total);
    if (err == STRATA_OK)
        err = strata_worker_init(w); /* forks the chips and the sub */
    if (err == STRATA_OK)
        err = strata_worker_run(w, orch, NULL, j); /* returns at the fence */
    return err;
}

static int failed(const char *what, strata_err err)
{
    fprintf(stderr, "minimal: FAILED: %s: %s: %s\n", what, strata_strerror(err),
            strata_errmsg());
    return 1;
}

int main(void)
{
    static const int chips[] = {0, 1};
    strata_worker_config cfg;
    strata_worker *w = NULL;
    struct job j = {0};
    int rc = 0;

    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = chips;
    cfg.num_chips = 2;
    cfg.num_sub_workers = 1;
    strata_err err = strata_worker_create(&cfg, &w);
    if (err != STRATA_OK)
        return failed("create", err);
    err = setup_and_run(w, &j);
    if (err != STRATA_OK) {
        rc = failed("run", err); /* before the next strata call */
    } else {
        float total = *(float *)strata_buffer_data(j.total);
        printf("minimal: sum of 2*i for i < %d = %g\n", N, (double)total);
        if (total != 56.0f) {
            fprintf(stderr, "minimal: FAILED: expected 56\n");
            rc = 1;
        }
    }
    err = strata_worker_destroy(w); /* on every path; frees the buffers */
    if (err != STRATA_OK)
        rc = failed("destroy", err);
    if (rc == 0)
        printf("minimal: OK\n");
    return rc;
}
