/*
 * An outside program that uses only the installed public header: an L3
 * worker with chips 0 and 1 and one sub worker runs one kernel per chip,
 * each writing its chip id into its own slot of an OUT tensor. ci/test
 * builds it against an installed strata, through pkg-config and through
 * find_package(strata), and expects "consumer: ok".
 */
#include <strata/strata.h>

#include <stdio.h>

#define NUM_CHIPS 2

struct job {
    strata_callable kernel;
    strata_buffer *out;
};

static strata_err write_chip_id(strata_chip *chip, const strata_args *args)
{
    int32_t *slot = strata_args_tensor_data(args, 0);

    if (slot == NULL || strata_args_tensor_nbytes(args, 0) != sizeof(*slot)) {
        strata_errmsg_set("chip %d: expected one int32 tensor",
                          strata_chip_id(chip));
        return STRATA_EINVAL;
    }
    *slot = strata_chip_id(chip);
    return STRATA_OK;
}

/* Submits one write_chip_id task per chip, each to its own 4-byte slot. */
static strata_err orch_fill(strata_orch *orch, const strata_args *unused,
                            void *user)
{
    const struct job *job = user;
    const size_t shape[1] = {1};
    strata_args *a = NULL;
    strata_err err;

    (void)unused;
    err = strata_args_create(&a);
    if (err != STRATA_OK)
        return err;
    for (int chip = 0; chip < NUM_CHIPS && err == STRATA_OK; chip++) {
        size_t offset = (size_t)chip * sizeof(int32_t);

        strata_args_clear(a);
        err = strata_args_add_tensor(a, job->out, offset, STRATA_I32, 1, shape,
                                     STRATA_OUT);
        if (err == STRATA_OK)
            err = strata_orch_submit_next_level(orch, job->kernel, a, chip);
    }
    strata_args_destroy(a);
    return err;
}

static int fail(const char *what, strata_err err)
{
    fprintf(stderr, "consumer: %s: %s (%s): %s\n", what, strata_errname(err),
            strata_strerror(err), strata_errmsg());
    return 1;
}

int main(void)
{
    static const int chip_ids[NUM_CHIPS] = {0, 1};
    strata_worker_config cfg;
    strata_worker *w = NULL;
    struct job job;
    const int32_t *got;
    strata_err err;
    int rc = 1;

    err = strata_register_kernel("consumer.write_chip_id", write_chip_id,
                                 &job.kernel);
    if (err != STRATA_OK)
        return fail("register kernel", err);

    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = chip_ids;
    cfg.num_chips = NUM_CHIPS;
    cfg.num_sub_workers = 1;
    err = strata_worker_create(&cfg, &w);
    if (err != STRATA_OK)
        return fail("create worker", err);
    err = strata_worker_create_buffer(w, NUM_CHIPS * sizeof(int32_t), &job.out);
    if (err != STRATA_OK) {
        rc = fail("create buffer", err);
        goto out_destroy;
    }
    err = strata_worker_init(w);
    if (err != STRATA_OK) {
        rc = fail("init worker", err);
        goto out_destroy;
    }
    err = strata_worker_run(w, orch_fill, NULL, &job);
    if (err != STRATA_OK) {
        rc = fail("run", err);
        goto out_destroy;
    }

    got = strata_buffer_data(job.out);
    rc = 0;
    for (int chip = 0; chip < NUM_CHIPS; chip++) {
        if (got[chip] != chip) {
            fprintf(stderr, "consumer: slot %d holds %d, want %d\n", chip,
                    (int)got[chip], chip);
            rc = 1;
        }
    }

out_destroy:
    /* Destroy also frees the buffer and reaps every child. */
    err = strata_worker_destroy(w);
    if (err != STRATA_OK)
        rc = fail("destroy worker", err);
    if (rc == 0)
        printf("consumer: ok\n");
    return rc;
}
