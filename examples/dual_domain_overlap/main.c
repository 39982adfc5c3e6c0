/*
 * dual_domain_overlap: one chip in two communication domains, both used in
 * the same run (and the same kernel).
 *
 *   domain "reduce": workers {1, 0, 2}   chip 1 = rank 0 (the root)
 *                    buffers "part" float32[N], "arrived" u32
 *   domain "bcast":  workers {1, 3}      chip 1 = rank 0 (the root)
 *                    buffers "result" float32[N], "ready" u32
 *
 * One group of four kernels, one per chip:
 *   chips 0, 1, 2 ("reduce" members) write their input into their "part"
 *     and add 1 to the root's "arrived";
 *   chip 1 (root of both) waits until "arrived" counts 3, sums the three
 *     parts into its "bcast" window's "result", and adds 1 to the "ready"
 *     word of every other "bcast" rank;
 *   chip 3 ("bcast" only) waits for its "ready", then reads the root's
 *     "result" out of the root's window.
 * Chip 1 reduces in one domain and broadcasts in the other with two
 * device_ctx values in one kernel; chip 3 gets the sum without ever being
 * in "reduce". The program checks chip 1's and chip 3's results against a
 * host reference.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strata/strata.h>

#define NUM_CHIPS 4
#define N 4096
#define SIGNAL_TIMEOUT_S 30

static const int chip_ids[NUM_CHIPS] = {0, 1, 2, 3};
static const int reduce_workers[3] = {1, 0, 2};
static const int bcast_workers[2] = {1, 3};

/* Byte offsets of the carved buffers, passed to the kernels. */
enum { PART, ARRIVED, RESULT, READY, NUM_OFFSETS };

struct dual {
    strata_buffer *in;  /* float[NUM_CHIPS][N]: chip c's input (not 3's) */
    strata_buffer *out; /* float[NUM_CHIPS][N]: what chip c ends up with */
    strata_callable kernel;
    strata_domain *reduce, *bcast;
};

static int fail(const char *what, strata_err err)
{
    fprintf(stderr, "dual_domain_overlap: FAILED: %s: %s (%s): %s\n", what,
            strata_errname(err), strata_strerror(err), strata_errmsg());
    return 1;
}

/* Exact in float32: small integers in quarters. */
static float input_value(int chip, size_t i)
{
    return (float)((chip + 1) * (int)(i % 512)) * 0.25f;
}

static void *at(const strata_comm_context *cc, uint32_t rank, uint64_t off)
{
    return (char *)cc->window_base[rank] + off;
}

/* Tensors: input row (IN), output row (OUT). Scalars: device_ctx in
 * "reduce" (0 if not a member), device_ctx in "bcast" (0 if not a member),
 * then the offsets PART, ARRIVED, RESULT, READY. */
static strata_err dual_kernel(strata_chip *chip, const strata_args *args)
{
    const float *in = strata_args_tensor_data(args, 0);
    float *out = strata_args_tensor_data(args, 1);
    const strata_comm_context *red =
        strata_chip_comm_context(chip, strata_args_scalar(args, 0));
    const strata_comm_context *bc =
        strata_chip_comm_context(chip, strata_args_scalar(args, 1));
    uint64_t off[NUM_OFFSETS];
    strata_err err;

    for (size_t i = 0; i < NUM_OFFSETS; i++)
        off[i] = strata_args_scalar(args, 2 + i);
    if (red == NULL && bc == NULL) {
        strata_errmsg_set("chip %d is in neither domain", strata_chip_id(chip));
        return STRATA_ENOENT;
    }
    if (red != NULL) {
        /* Contribute my part and tell the root (rank 0 of "reduce"). */
        memcpy(at(red, red->rank, off[PART]), in, N * sizeof(float));
        strata_signal_add(at(red, 0, off[ARRIVED]), 1);
    }
    if (red != NULL && red->rank == 0) {
        float *result;
        /* The root: reduce, then broadcast through the other domain. */
        if (bc == NULL || bc->rank != 0) {
            strata_errmsg_set("the reduce root must be the bcast root");
            return STRATA_EINVAL;
        }
        err = strata_signal_wait(at(red, 0, off[ARRIVED]), red->rank_count,
                                 SIGNAL_TIMEOUT_S);
        if (err != STRATA_OK)
            return err;
        result = at(bc, 0, off[RESULT]);
        for (size_t i = 0; i < N; i++) {
            float sum = 0.0f;
            for (uint32_t r = 0; r < red->rank_count; r++)
                sum += ((const float *)at(red, r, off[PART]))[i];
            result[i] = sum;
        }
        memcpy(out, result, N * sizeof(float));
        for (uint32_t r = 1; r < bc->rank_count; r++)
            strata_signal_add(at(bc, r, off[READY]), 1);
    } else if (bc != NULL) {
        /* A "bcast" leaf: wait for the root, read its result. */
        err = strata_signal_wait(at(bc, bc->rank, off[READY]), 1,
                                 SIGNAL_TIMEOUT_S);
        if (err != STRATA_OK)
            return err;
        memcpy(out, at(bc, 0, off[RESULT]), N * sizeof(float));
    }
    return STRATA_OK;
}

static strata_err alloc_domains(strata_orch *o, struct dual *d)
{
    const strata_comm_buffer_spec reduce_bufs[2] = {
        {"part", STRATA_F32, N, N * sizeof(float)},
        {"arrived", STRATA_U32, 1, sizeof(uint32_t)},
    };
    const strata_comm_buffer_spec bcast_bufs[2] = {
        {"result", STRATA_F32, N, N * sizeof(float)},
        {"ready", STRATA_U32, 1, sizeof(uint32_t)},
    };
    const strata_domain_spec reduce = {
        "reduce", reduce_workers, 3, N * sizeof(float) + 4, reduce_bufs, 2};
    const strata_domain_spec bcast = {
        "bcast", bcast_workers, 2, N * sizeof(float) + 4, bcast_bufs, 2};
    strata_err err;

    err = strata_orch_allocate_domain(o, &reduce, &d->reduce);
    if (err == STRATA_OK)
        err = strata_orch_allocate_domain(o, &bcast, &d->bcast);
    return err;
}

/* device_ctx of chip in d, or 0 (and the buffer offsets) when a member. */
static uint64_t member_ctx(const strata_domain *d, int chip, uint64_t *off0,
                           uint64_t *off1)
{
    strata_chip_domain_ctx c;

    if (strata_domain_context(d, chip, &c) != STRATA_OK)
        return 0; /* STRATA_ENOENT: not a member */
    *off0 = c.buffers[0].offset;
    *off1 = c.buffers[1].offset;
    printf("dual_domain_overlap: chip %d is rank %u of %u in \"%s\"\n", chip,
           c.domain_rank, c.domain_size, c.name);
    return c.device_ctx;
}

static strata_err dual_orch(strata_orch *o, const strata_args *unused,
                            void *user)
{
    struct dual *d = user;
    const size_t shape[1] = {N};
    strata_args *a[NUM_CHIPS] = {NULL};
    strata_err err;

    (void)unused;
    err = alloc_domains(o, d);
    for (size_t i = 0; i < NUM_CHIPS && err == STRATA_OK; i++) {
        int chip = chip_ids[i];
        uint64_t off[NUM_OFFSETS] = {0};
        uint64_t red = member_ctx(d->reduce, chip, &off[PART], &off[ARRIVED]);
        uint64_t bc = member_ctx(d->bcast, chip, &off[RESULT], &off[READY]);

        err = strata_args_create(&a[i]);
        if (err == STRATA_OK)
            err = strata_args_add_tensor(a[i], d->in, i * N * sizeof(float),
                                         STRATA_F32, 1, shape, STRATA_IN);
        if (err == STRATA_OK)
            err = strata_args_add_tensor(a[i], d->out, i * N * sizeof(float),
                                         STRATA_F32, 1, shape, STRATA_OUT);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(a[i], red);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(a[i], bc);
        for (size_t k = 0; k < NUM_OFFSETS && err == STRATA_OK; k++)
            err = strata_args_add_scalar(a[i], off[k]);
    }
    /* The kernels wait on each other: one group over all four chips. */
    if (err == STRATA_OK)
        err = strata_orch_submit_next_level_group(
            o, d->kernel, (const strata_args *const *)a, chip_ids, NUM_CHIPS);
    for (size_t i = 0; i < NUM_CHIPS; i++)
        strata_args_destroy(a[i]);
    /* Both domains are left to the fence, which frees them. */
    return err;
}

static int check(const struct dual *d)
{
    const float *out = strata_buffer_data(d->out);
    static const int receivers[2] = {1, 3};
    size_t bad = 0;

    for (size_t i = 0; i < N; i++) {
        float want = 0.0f;
        for (size_t r = 0; r < 3; r++) /* rank order, as the root sums */
            want += input_value(reduce_workers[r], i);
        for (size_t k = 0; k < 2; k++) {
            float got = out[(size_t)receivers[k] * N + i];
            if (got != want && bad++ < 5)
                fprintf(stderr,
                        "dual_domain_overlap: chip %d [%zu] = %g, "
                        "expected %g\n",
                        receivers[k], i, (double)got, (double)want);
        }
    }
    if (bad != 0) {
        fprintf(stderr, "dual_domain_overlap: FAILED: %zu wrong values\n", bad);
        return 1;
    }
    if (!strata_domain_freed(d->reduce) || !strata_domain_freed(d->bcast)) {
        fprintf(stderr, "dual_domain_overlap: FAILED: a domain was not "
                        "freed at the fence\n");
        return 1;
    }
    printf("dual_domain_overlap: chip 1 reduced chips 1, 0, 2 in \"reduce\" "
           "and broadcast the sum to chip 3 in \"bcast\"; %d values checked "
           "on chips 1 and 3\n",
           N);
    return 0;
}

static int run(strata_worker *w, struct dual *d)
{
    strata_err err;
    float *in;

    err = strata_register_kernel("dual_domain_overlap.reduce_bcast",
                                 dual_kernel, &d->kernel);
    if (err != STRATA_OK)
        return fail("register kernel", err);
    err = strata_worker_create_buffer(w, NUM_CHIPS * N * sizeof(float), &d->in);
    if (err == STRATA_OK)
        err = strata_worker_create_buffer(w, NUM_CHIPS * N * sizeof(float),
                                          &d->out);
    if (err != STRATA_OK)
        return fail("create buffer", err);
    in = strata_buffer_data(d->in);
    for (int c = 0; c < 3; c++) /* chip 3 has no input */
        for (size_t i = 0; i < N; i++)
            in[(size_t)c * N + i] = input_value(c, i);
    err = strata_worker_init(w);
    if (err != STRATA_OK)
        return fail("worker init", err);
    err = strata_worker_run(w, dual_orch, NULL, d);
    if (err != STRATA_OK)
        return fail("run", err);
    return check(d);
}

int main(void)
{
    strata_worker_config cfg;
    strata_worker *w = NULL;
    struct dual d = {0};
    strata_err err;
    int rc;

    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = chip_ids;
    cfg.num_chips = NUM_CHIPS;
    err = strata_worker_create(&cfg, &w);
    if (err != STRATA_OK)
        return fail("worker create", err);

    rc = run(w, &d);

    err = strata_worker_destroy(w);
    if (err != STRATA_OK)
        rc = fail("worker destroy", err);
    if (rc != 0)
        return EXIT_FAILURE;
    printf("dual_domain_overlap: OK (chip 1 in 2 domains, reduce + broadcast "
           "checked)\n");
    return EXIT_SUCCESS;
}
