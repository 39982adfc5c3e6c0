/*
 * cuda_vector_add: z = x + y on CUDA chips. Each chip process owns a
 * device's primary context and a stream; the kernel (kernel.cu) copies its
 * slice to the device, adds on the device and copies back, all enqueued on
 * the chip's stream. The worker process never touches CUDA.
 *
 * Usage: cuda_vector_add [elements [chips]]   (default 1048576 1)
 * Chip i runs on device i; to put several chips on one GPU, map them:
 *   STRATA_CUDA_DEVICES=0=0,1=0 cuda_vector_add 1048576 2
 * Exits 77 (skipped) when there is no usable CUDA device.
 */
#include <stdio.h>
#include <stdlib.h>

#include <strata/strata.h>

#define MAX_CHIPS 16
#define EXIT_SKIPPED 77

strata_err cuda_vector_add_kernel(strata_chip *chip, const strata_args *args);

struct job {
    size_t n, chips;
    strata_buffer *x, *y, *z;
    strata_callable add;
};

static int fail(const char *what, strata_err err)
{
    fprintf(stderr, "cuda_vector_add: FAILED: %s: %s (%s): %s\n", what,
            strata_errname(err), strata_strerror(err), strata_errmsg());
    return 1;
}

static strata_err add_slice(strata_args *a, strata_buffer *b, size_t first,
                            size_t count, strata_tag tag)
{
    const size_t shape[1] = {count};

    return strata_args_add_tensor(a, b, first * sizeof(float), STRATA_F32, 1,
                                  shape, tag);
}

/* One task per chip, each on its own slice. */
static strata_err orch(strata_orch *o, const strata_args *unused, void *user)
{
    struct job *j = user;
    strata_args *a = NULL;
    strata_err err = strata_args_create(&a);
    size_t per = (j->n + j->chips - 1) / j->chips;

    (void)unused;
    for (size_t c = 0; !err && c < j->chips; c++) {
        size_t first = c * per;
        size_t count = first >= j->n ? 0 : j->n - first;

        count = count < per ? count : per;
        if (count == 0)
            break;
        strata_args_clear(a);
        err = add_slice(a, j->x, first, count, STRATA_IN);
        if (!err)
            err = add_slice(a, j->y, first, count, STRATA_IN);
        if (!err)
            err = add_slice(a, j->z, first, count, STRATA_OUT);
        if (!err)
            err = strata_orch_submit_next_level(o, j->add, a, (int)c);
    }
    strata_args_destroy(a);
    return err;
}

static strata_err setup(strata_worker *w, struct job *j)
{
    size_t bytes = j->n * sizeof(float);
    strata_err err = strata_register_kernel("cuda_vector_add",
                                            cuda_vector_add_kernel, &j->add);

    if (!err)
        err = strata_worker_create_buffer(w, bytes, &j->x);
    if (!err)
        err = strata_worker_create_buffer(w, bytes, &j->y);
    if (!err)
        err = strata_worker_create_buffer(w, bytes, &j->z);
    if (err)
        return err;
    for (size_t i = 0; i < j->n; i++) {
        ((float *)strata_buffer_data(j->x))[i] = (float)(i % 1000);
        ((float *)strata_buffer_data(j->y))[i] = (float)(2 * (i % 777));
    }
    return STRATA_OK;
}

static size_t check(const struct job *j)
{
    const float *z = strata_buffer_data(j->z);
    size_t bad = 0;

    for (size_t i = 0; i < j->n; i++)
        if (z[i] != (float)(i % 1000) + (float)(2 * (i % 777)))
            bad++;
    return bad;
}

int main(int argc, char **argv)
{
    static int ids[MAX_CHIPS];
    struct job j = {.n = argc > 1 ? strtoul(argv[1], NULL, 10) : 1u << 20,
                    .chips = argc > 2 ? strtoul(argv[2], NULL, 10) : 1};
    strata_worker_config cfg;
    strata_worker *w = NULL;
    strata_err err;
    int rc = 0;

    if (j.n == 0 || j.chips == 0 || j.chips > MAX_CHIPS) {
        fprintf(stderr, "usage: cuda_vector_add [elements [chips <= %d]]\n",
                MAX_CHIPS);
        return 2;
    }
    for (size_t c = 0; c < j.chips; c++)
        ids[c] = (int)c;
    strata_worker_config_init(&cfg, 3);
    cfg.platform = "cuda";
    cfg.chip_ids = ids;
    cfg.num_chips = j.chips;
    err = strata_worker_create(&cfg, &w);
    if (err)
        return fail("create", err);
    err = setup(w, &j);
    if (!err)
        err = strata_worker_init(w); /* forks the chips; each opens CUDA */
    if (err == STRATA_ENOTSUP) {
        printf("cuda_vector_add: SKIPPED (no usable CUDA device: %s)\n",
               strata_errmsg());
        rc = EXIT_SKIPPED;
    } else if (err) {
        rc = fail("init", err);
    } else if ((err = strata_worker_run(w, orch, NULL, &j)) != STRATA_OK) {
        rc = fail("run", err);
    } else if (check(&j) != 0) {
        fprintf(stderr, "cuda_vector_add: FAILED: %zu of %zu elements wrong\n",
                check(&j), j.n);
        rc = 1;
    } else {
        printf("cuda_vector_add: OK (%zu elements checked on %zu chips)\n", j.n,
               j.chips);
    }
    err = strata_worker_destroy(w);
    if (err && rc != 1)
        rc = fail("destroy", err);
    return rc;
}
