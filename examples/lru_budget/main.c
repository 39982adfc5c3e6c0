/*
 * lru_budget: a pipeline over more data than its memory budget holds, the
 * reference's execution(memory={"ram": ...}, eviction="lru").
 *
 * Sixteen float32 buffers of 1 MiB go through two stages on two sim chips
 * under a 4 MiB ram budget, with least-recently-used spill to a directory:
 *
 *   stage 1, chip 0:  x[i] = 2 * x[i]   (INOUT)
 *   stage 2, chip 1:  x[i] = x[i] + 1   (INOUT, after stage 1 of x[i])
 *
 * Creating the buffers already spills (only four fit), filling them on the
 * host restores each in turn; every task's buffer is restored before the
 * task is planned, while the buffers of finished tasks spill to make room.
 * The program checks every element (2 * i + 1 in buffer i) and prints the
 * worker's memory report: the ram peak never passes the budget.
 *
 * Usage: lru_budget [spill_dir]   (default: a new directory under $TMPDIR
 * or /tmp, removed at the end)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <strata/strata.h>
#include <strata/tier.h>

#define NBUF 16
#define BUF_BYTES ((size_t)1 << 20)
#define BUDGET "ram = 4 MiB"
#define BUDGET_BYTES ((uint64_t)4 << 20)

static const int chip_ids[2] = {0, 1};

struct pipeline {
    strata_buffer *x[NBUF];
    strata_callable scale, add_one;
};

static int fail(const char *what, strata_err err)
{
    fprintf(stderr, "lru_budget: FAILED: %s: %s (%s): %s\n", what,
            strata_errname(err), strata_strerror(err), strata_errmsg());
    return 1;
}

static strata_err scale_kernel(strata_chip *chip, const strata_args *args)
{
    float *x = strata_args_tensor_data(args, 0);
    size_t n = strata_args_tensor_nbytes(args, 0) / sizeof(float);

    (void)chip;
    for (size_t i = 0; i < n; i++)
        x[i] *= 2.0f;
    return STRATA_OK;
}

static strata_err add_one_kernel(strata_chip *chip, const strata_args *args)
{
    float *x = strata_args_tensor_data(args, 0);
    size_t n = strata_args_tensor_nbytes(args, 0) / sizeof(float);

    (void)chip;
    for (size_t i = 0; i < n; i++)
        x[i] += 1.0f;
    return STRATA_OK;
}

static strata_err submit(strata_orch *o, strata_args *a, strata_buffer *x,
                         strata_callable c, int chip)
{
    const size_t shape[1] = {BUF_BYTES / sizeof(float)};
    strata_err err;

    strata_args_clear(a);
    err = strata_args_add_tensor(a, x, 0, STRATA_F32, 1, shape, STRATA_INOUT);
    if (err == STRATA_OK)
        err = strata_orch_submit_next_level(o, c, a, chip);
    return err;
}

/* Both stages of every buffer, submitted without waiting: the tags order
 * stage 2 of x[i] after stage 1 of x[i]; the budget decides what is
 * resident meanwhile. */
static strata_err pipeline_orch(strata_orch *o, const strata_args *unused,
                                void *user)
{
    const struct pipeline *p = user;
    strata_args *a = NULL;
    strata_err err;

    (void)unused;
    err = strata_args_create(&a);
    for (int i = 0; err == STRATA_OK && i < NBUF; i++) {
        err = submit(o, a, p->x[i], p->scale, chip_ids[0]);
        if (err == STRATA_OK)
            err = submit(o, a, p->x[i], p->add_one, chip_ids[1]);
    }
    strata_args_destroy(a);
    return err;
}

static int fill_and_run(strata_worker *w, struct pipeline *p)
{
    strata_err err;

    for (int i = 0; i < NBUF; i++) {
        err = strata_worker_create_buffer(w, BUF_BYTES, &p->x[i]);
        if (err != STRATA_OK)
            return fail("create buffer", err);
    }
    /* Filling touches each buffer in turn: each comes back from its file
     * (a spilled one) while the least recently used others go out. */
    for (int i = 0; i < NBUF; i++) {
        float *x = strata_buffer_data(p->x[i]);

        if (!x)
            return fail("buffer data", STRATA_EIO);
        for (size_t k = 0; k < BUF_BYTES / sizeof(float); k++)
            x[k] = (float)i;
    }
    err = strata_worker_init(w);
    if (err != STRATA_OK)
        return fail("worker init", err);
    err = strata_worker_run(w, pipeline_orch, NULL, p);
    if (err != STRATA_OK)
        return fail("run", err);
    return 0;
}

static int check(struct pipeline *p)
{
    for (int i = 0; i < NBUF; i++) {
        const float *x = strata_buffer_data(p->x[i]);
        const float want = 2.0f * (float)i + 1.0f;

        if (!x)
            return fail("buffer data", STRATA_EIO);
        for (size_t k = 0; k < BUF_BYTES / sizeof(float); k++) {
            if (x[k] != want) {
                fprintf(stderr,
                        "lru_budget: FAILED: buffer %d element %zu is %g, "
                        "expected %g\n",
                        i, k, (double)x[k], (double)want);
                return 1;
            }
        }
    }
    return 0;
}

static int report(strata_worker *w, strata_tier_report *r)
{
    char json[1024];
    size_t len;
    strata_err err = strata_worker_memory_report(w, r);

    if (err == STRATA_OK)
        err = strata_tier_report_json(r, json, sizeof(json), &len);
    if (err != STRATA_OK)
        return fail("memory report", err);
    printf("lru_budget: memory report %s\n", json);
    if (r->tiers[STRATA_TIER_RAM].peak > BUDGET_BYTES) {
        fprintf(stderr, "lru_budget: FAILED: ram peak %llu over the budget\n",
                (unsigned long long)r->tiers[STRATA_TIER_RAM].peak);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    strata_worker_config cfg;
    strata_worker *w = NULL;
    struct pipeline p = {0};
    strata_tier_report r;
    char made[256] = "";
    const char *dir = argc > 1 ? argv[1] : NULL;
    strata_err err;
    int rc;

    if (!dir) {
        const char *tmp = getenv("TMPDIR");

        snprintf(made, sizeof(made), "%s/strata-lru-budget-XXXXXX",
                 tmp && tmp[0] ? tmp : "/tmp");
        if (!mkdtemp(made)) {
            perror("lru_budget: FAILED: mkdtemp");
            return 1;
        }
        dir = made;
    }
    err = strata_register_kernel("lru_budget.scale", scale_kernel, &p.scale);
    if (err == STRATA_OK)
        err = strata_register_kernel("lru_budget.add_one", add_one_kernel,
                                     &p.add_one);
    if (err != STRATA_OK)
        return fail("register", err);
    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = chip_ids;
    cfg.num_chips = 2;
    cfg.budgets = BUDGET;
    cfg.spill_dir = dir;
    cfg.eviction = STRATA_EVICT_LRU;
    err = strata_worker_create(&cfg, &w);
    if (err != STRATA_OK)
        return fail("worker create", err);
    printf("lru_budget: %d buffers of %zu MiB under \"%s\", spilling to %s\n",
           NBUF, BUF_BYTES >> 20, BUDGET, dir);
    rc = fill_and_run(w, &p);
    if (rc == 0)
        rc = check(&p);
    if (rc == 0)
        rc = report(w, &r);
    err = strata_worker_destroy(w);
    if (rc == 0 && err != STRATA_OK)
        rc = fail("worker destroy", err);
    if (made[0])
        rmdir(made);
    if (rc == 0)
        printf("lru_budget: OK (%llu spills, %llu restores)\n",
               (unsigned long long)r.spills, (unsigned long long)r.restores);
    return rc;
}
