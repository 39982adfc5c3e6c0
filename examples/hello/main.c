/*
 * hello: the smallest tree strata builds. One L3 worker forks two sim chips
 * (ids 0 and 1) and one sub worker; a kernel on each chip and a sub task say
 * hello from their own processes. Each task also writes who it is into a
 * shared buffer, so the program can check that every one of them ran.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <strata/strata.h>

#define NUM_CHIPS 2
#define SUB_SLOT NUM_CHIPS /* the sub's entry follows the chips' */

static const int chip_ids[NUM_CHIPS] = {0, 1};

/* What the orch fn needs; passed through strata_worker_run's user pointer. */
struct hello {
    strata_buffer *who; /* int32[NUM_CHIPS + 1]: chip ids, then the sub's */
    strata_callable kernel;
    strata_callable sub;
};

static int fail(const char *what, strata_err err)
{
    fprintf(stderr, "hello: FAILED: %s: %s (%s): %s\n", what,
            strata_errname(err), strata_strerror(err), strata_errmsg());
    return 1;
}

/* Runs in chip process `chip`: says hello and records the chip id. */
static strata_err hello_kernel(strata_chip *chip, const strata_args *args)
{
    int32_t *slot = strata_args_tensor_data(args, 0);

    if (slot == NULL) {
        strata_errmsg_set("hello_kernel: expected one int32 tensor");
        return STRATA_EINVAL;
    }
    printf("hello from chip %d (pid %ld)\n", strata_chip_id(chip),
           (long)getpid());
    /* The kernel runs in a forked process: flush before the task ends so
     * the line is not lost or reordered with the parent's output. */
    fflush(stdout);
    *slot = strata_chip_id(chip);
    return STRATA_OK;
}

/* Runs in the sub worker process. */
static strata_err hello_sub(const strata_args *args)
{
    int32_t *slot = strata_args_tensor_data(args, 0);

    if (slot == NULL) {
        strata_errmsg_set("hello_sub: expected one int32 tensor");
        return STRATA_EINVAL;
    }
    printf("hello from sub worker (pid %ld)\n", (long)getpid());
    fflush(stdout);
    *slot = 1;
    return STRATA_OK;
}

/* Adds the int32 element `index` of h->who as the task's only (OUT) tensor. */
static strata_err add_slot(strata_args *a, const struct hello *h, size_t index)
{
    const size_t shape[1] = {1};

    strata_args_clear(a);
    return strata_args_add_tensor(a, h->who, index * sizeof(int32_t),
                                  STRATA_I32, 1, shape, STRATA_OUT);
}

/* The orchestration: one hello per chip and one on the sub worker. The
 * tasks write disjoint elements, so they do not depend on each other. */
static strata_err hello_orch(strata_orch *o, const strata_args *unused,
                             void *user)
{
    const struct hello *h = user;
    strata_args *a = NULL;
    strata_err err;

    (void)unused;
    err = strata_args_create(&a);
    if (err != STRATA_OK)
        return err;
    for (size_t i = 0; i < NUM_CHIPS && err == STRATA_OK; i++) {
        err = add_slot(a, h, i);
        if (err == STRATA_OK)
            err = strata_orch_submit_next_level(o, h->kernel, a, chip_ids[i]);
    }
    if (err == STRATA_OK)
        err = add_slot(a, h, SUB_SLOT);
    if (err == STRATA_OK)
        err = strata_orch_submit_sub(o, h->sub, a);
    strata_args_destroy(a);
    return err;
}

/* Checks that every chip wrote its id and the sub wrote 1. */
static int check(const struct hello *h)
{
    const int32_t *who = strata_buffer_data(h->who);
    int bad = 0;

    for (size_t i = 0; i < NUM_CHIPS; i++) {
        if (who[i] != chip_ids[i]) {
            fprintf(stderr, "hello: FAILED: chip %d wrote %d\n", chip_ids[i],
                    (int)who[i]);
            bad = 1;
        }
    }
    if (who[SUB_SLOT] != 1) {
        fprintf(stderr, "hello: FAILED: the sub worker did not answer\n");
        bad = 1;
    }
    return bad;
}

static int run(strata_worker *w, struct hello *h)
{
    strata_err err;
    int32_t *who;

    err = strata_register_kernel("hello.kernel", hello_kernel, &h->kernel);
    if (err != STRATA_OK)
        return fail("register kernel", err);
    err = strata_register_sub("hello.sub", hello_sub, &h->sub);
    if (err != STRATA_OK)
        return fail("register sub", err);
    err = strata_worker_create_buffer(w, (NUM_CHIPS + 1) * sizeof(int32_t),
                                      &h->who);
    if (err != STRATA_OK)
        return fail("create buffer", err);
    who = strata_buffer_data(h->who);
    for (size_t i = 0; i <= NUM_CHIPS; i++)
        who[i] = -1;

    /* Children are forked here; they inherit the registry above. */
    err = strata_worker_init(w);
    if (err != STRATA_OK)
        return fail("worker init", err);
    printf("hello: worker up: %zu chips (ids %d, %d), %zu sub worker\n",
           strata_worker_num_chips(w), chip_ids[0], chip_ids[1],
           strata_worker_num_sub_workers(w));
    fflush(stdout);

    err = strata_worker_run(w, hello_orch, NULL, h);
    if (err != STRATA_OK)
        return fail("run", err);
    return check(h);
}

int main(void)
{
    strata_worker_config cfg;
    strata_worker *w = NULL;
    struct hello h = {0};
    strata_err err;
    int rc;

    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = chip_ids;
    cfg.num_chips = NUM_CHIPS;
    cfg.num_sub_workers = 1;
    err = strata_worker_create(&cfg, &w);
    if (err != STRATA_OK)
        return fail("worker create", err);

    rc = run(w, &h);

    /* Destroy on every path: it reaps the children and frees the buffer. */
    err = strata_worker_destroy(w);
    if (err != STRATA_OK)
        rc = fail("worker destroy", err);
    if (rc != 0)
        return EXIT_FAILURE;
    printf("hello: OK (%d chips and 1 sub worker said hello)\n", NUM_CHIPS);
    return EXIT_SUCCESS;
}
