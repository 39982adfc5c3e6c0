/*
 * allreduce: four sim chips sum their vectors through a communication
 * domain.
 *
 * The orch fn allocates a domain over chips {2, 0, 3, 1} (in that order,
 * so chip 2 is rank 0 and chip 1 is rank 3). Every member's window is
 * carved into two buffers: "vec" (the member's float32 vector) and "flag"
 * (one 32-bit signal word). One kernel runs on every member at once:
 *
 *   1. write my input vector into my window's "vec";
 *   2. strata_signal_add(+1) on the "flag" word of every rank (mine too):
 *      "my vector is there";
 *   3. strata_signal_wait on my own "flag" until it counts every rank;
 *   4. sum "vec" of every rank's window (rank order) into my output.
 *
 * The kernels wait on each other, so they are submitted as one group:
 * strata starts a group only when all its chips are idle, so no member
 * waits behind an unrelated task. Windows start zeroed, so a signal added
 * by a fast peer is never wiped. After the group, the orch fn reads one
 * member's "vec" back with strata_orch_copy_from, releases the domain, and
 * the program checks every member's result against a host reference.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strata/strata.h>

#define NUM_CHIPS 4
#define N 65536             /* floats per vector */
#define SIGNAL_TIMEOUT_S 30 /* bound on the in-kernel wait */

static const int chip_ids[NUM_CHIPS] = {0, 1, 2, 3};
/* Domain order: rank r is chip ranks[r]. */
static const int ranks[NUM_CHIPS] = {2, 0, 3, 1};

struct allreduce {
    strata_buffer *in;       /* float[NUM_CHIPS][N]: rank r's input */
    strata_buffer *out;      /* float[NUM_CHIPS][N]: rank r's result */
    strata_buffer *readback; /* float[N]: rank 3's "vec", copied back */
    strata_callable kernel;
    strata_domain *domain;
};

static int fail(const char *what, strata_err err)
{
    fprintf(stderr, "allreduce: FAILED: %s: %s (%s): %s\n", what,
            strata_errname(err), strata_strerror(err), strata_errmsg());
    return 1;
}

/* Small integers and quarters: every partial sum is exact in float32, so
 * the check can compare bit for bit. */
static float input_value(uint32_t rank, size_t i)
{
    return (float)((rank + 1) * (i % 1024)) * 0.25f;
}

/* Tensors: input (IN), output (OUT); scalars: device_ctx, byte offset of
 * "vec", byte offset of "flag". */
static strata_err allreduce_kernel(strata_chip *chip, const strata_args *args)
{
    const float *in = strata_args_tensor_data(args, 0);
    float *out = strata_args_tensor_data(args, 1);
    size_t n = strata_args_tensor_nbytes(args, 1) / sizeof(float);
    const strata_comm_context *cc =
        strata_chip_comm_context(chip, strata_args_scalar(args, 0));
    size_t vec_off = (size_t)strata_args_scalar(args, 1);
    size_t flag_off = (size_t)strata_args_scalar(args, 2);
    strata_err err;

    if (cc == NULL) {
        strata_errmsg_set("chip %d: not a member of the domain",
                          strata_chip_id(chip));
        return STRATA_ENOENT;
    }
    /* 1. My vector into my window. */
    memcpy((char *)cc->window_base[cc->rank] + vec_off, in, n * sizeof(float));
    /* 2. Tell every rank (myself included) that it is there. */
    for (uint32_t r = 0; r < cc->rank_count; r++)
        strata_signal_add(
            (volatile uint32_t *)((char *)cc->window_base[r] + flag_off), 1);
    /* 3. Wait until every rank has told me. */
    err = strata_signal_wait(
        (volatile uint32_t *)((char *)cc->window_base[cc->rank] + flag_off),
        cc->rank_count, SIGNAL_TIMEOUT_S);
    if (err != STRATA_OK)
        return err; /* the detail is already in strata_errmsg */
    /* 4. Sum every rank's vector, in rank order. */
    for (size_t i = 0; i < n; i++) {
        float sum = 0.0f;
        for (uint32_t r = 0; r < cc->rank_count; r++)
            sum += ((const float *)((const char *)cc->window_base[r] +
                                    vec_off))[i];
        out[i] = sum;
    }
    return STRATA_OK;
}

static strata_err add_f32(strata_args *a, strata_buffer *buf, size_t first,
                          size_t count, strata_tag tag)
{
    const size_t shape[1] = {count};

    return strata_args_add_tensor(a, buf, first * sizeof(float), STRATA_F32, 1,
                                  shape, tag);
}

static void print_context(int chip, const strata_chip_domain_ctx *c)
{
    printf("allreduce: chip %d is rank %u of %u; window %zu bytes at %#llx "
           "in its process;",
           chip, c->domain_rank, c->domain_size, c->actual_window_size,
           (unsigned long long)c->local_window_base);
    for (size_t b = 0; b < c->num_buffers; b++)
        printf(" %s @ %zu (%zu bytes)", c->buffers[b].name,
               c->buffers[b].offset, c->buffers[b].nbytes);
    printf("\n");
}

static strata_err allreduce_orch(strata_orch *o, const strata_args *unused,
                                 void *user)
{
    struct allreduce *ar = user;
    const strata_comm_buffer_spec buffers[2] = {
        {"vec", STRATA_F32, N, N * sizeof(float)},
        {"flag", STRATA_U32, 1, sizeof(uint32_t)},
    };
    const strata_domain_spec spec = {
        .name = "allreduce",
        .workers = ranks,
        .num_workers = NUM_CHIPS,
        .window_size = N * sizeof(float) + 64,
        .buffers = buffers,
        .num_buffers = 2,
    };
    strata_args *member[NUM_CHIPS] = {NULL};
    strata_chip_domain_ctx ctx;
    strata_err err;

    (void)unused;
    err = strata_orch_allocate_domain(o, &spec, &ar->domain);
    if (err != STRATA_OK)
        return err;
    for (size_t r = 0; r < NUM_CHIPS && err == STRATA_OK; r++) {
        err = strata_domain_context(ar->domain, ranks[r], &ctx);
        if (err != STRATA_OK)
            break;
        print_context(ranks[r], &ctx);
        err = strata_args_create(&member[r]);
        if (err == STRATA_OK)
            err = add_f32(member[r], ar->in, r * N, N, STRATA_IN);
        if (err == STRATA_OK)
            err = add_f32(member[r], ar->out, r * N, N, STRATA_OUT);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(member[r], ctx.device_ctx);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(member[r], ctx.buffers[0].offset);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(member[r], ctx.buffers[1].offset);
    }
    if (err == STRATA_OK)
        err = strata_orch_submit_next_level_group(
            o, ar->kernel, (const strata_args *const *)member, ranks,
            NUM_CHIPS);
    for (size_t r = 0; r < NUM_CHIPS; r++)
        strata_args_destroy(member[r]);
    /* Ordered after the group on chip ranks[3]: what rank 3 published. */
    if (err == STRATA_OK)
        err = strata_orch_copy_from(o, ar->domain, ranks[3], "vec", 0,
                                    ar->readback, 0, N * sizeof(float));
    /* The windows are freed after the run's fence. */
    if (err == STRATA_OK)
        err = strata_domain_release(ar->domain);
    return err;
}

static int check(const struct allreduce *ar)
{
    const float *out = strata_buffer_data(ar->out);
    const float *back = strata_buffer_data(ar->readback);
    size_t bad = 0;

    for (size_t i = 0; i < N; i++) {
        float want = 0.0f;
        for (uint32_t r = 0; r < NUM_CHIPS; r++)
            want += input_value(r, i);
        for (size_t r = 0; r < NUM_CHIPS; r++) {
            if (out[r * N + i] != want && bad++ < 5)
                fprintf(stderr,
                        "allreduce: rank %zu (chip %d) [%zu] = %g, "
                        "expected %g\n",
                        r, ranks[r], i, (double)out[r * N + i], (double)want);
        }
        if (back[i] != input_value(3, i) && bad++ < 5)
            fprintf(stderr,
                    "allreduce: rank 3's window [%zu] = %g, "
                    "expected %g\n",
                    i, (double)back[i], (double)input_value(3, i));
    }
    if (bad != 0) {
        fprintf(stderr, "allreduce: FAILED: %zu wrong values\n", bad);
        return 1;
    }
    printf("allreduce: every rank holds the sum of %d vectors of %d floats; "
           "first values %g %g %g %g\n",
           NUM_CHIPS, N, (double)out[0], (double)out[1], (double)out[2],
           (double)out[3]);
    printf("allreduce: rank 3's window read back with "
           "strata_orch_copy_from matches its input\n");
    return 0;
}

static int run(strata_worker *w, struct allreduce *ar)
{
    strata_err err;
    float *in;

    err =
        strata_register_kernel("allreduce.sum", allreduce_kernel, &ar->kernel);
    if (err != STRATA_OK)
        return fail("register kernel", err);
    err =
        strata_worker_create_buffer(w, NUM_CHIPS * N * sizeof(float), &ar->in);
    if (err == STRATA_OK)
        err = strata_worker_create_buffer(w, NUM_CHIPS * N * sizeof(float),
                                          &ar->out);
    if (err == STRATA_OK)
        err = strata_worker_create_buffer(w, N * sizeof(float), &ar->readback);
    if (err != STRATA_OK)
        return fail("create buffer", err);
    in = strata_buffer_data(ar->in);
    for (uint32_t r = 0; r < NUM_CHIPS; r++)
        for (size_t i = 0; i < N; i++)
            in[r * N + i] = input_value(r, i);

    err = strata_worker_init(w);
    if (err != STRATA_OK)
        return fail("worker init", err);
    err = strata_worker_run(w, allreduce_orch, NULL, ar);
    if (err != STRATA_OK)
        return fail("run", err);
    printf("allreduce: after the run: released %s, freed %s\n",
           strata_domain_released(ar->domain) ? "yes" : "no",
           strata_domain_freed(ar->domain) ? "yes" : "no");
    if (!strata_domain_freed(ar->domain)) {
        fprintf(stderr, "allreduce: FAILED: domain not freed at the fence\n");
        return 1;
    }
    return check(ar);
}

int main(void)
{
    strata_worker_config cfg;
    strata_worker *w = NULL;
    struct allreduce ar = {0};
    strata_err err;
    int rc;

    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = chip_ids;
    cfg.num_chips = NUM_CHIPS;
    err = strata_worker_create(&cfg, &w);
    if (err != STRATA_OK)
        return fail("worker create", err);

    rc = run(w, &ar);

    err = strata_worker_destroy(w);
    if (err != STRATA_OK)
        rc = fail("worker destroy", err);
    if (rc != 0)
        return EXIT_FAILURE;
    printf("allreduce: OK (%d ranks x %d floats checked)\n", NUM_CHIPS, N);
    return EXIT_SUCCESS;
}
