/*
 * vector_add: a two-stage pipeline across two sim chips, ordered only by
 * the tags on its tensors.
 *
 *   stage 1, chip 0:  c = a + b   (IN a, IN b, OUT c)
 *   stage 2, chip 1:  d = 2 * c   (IN c, OUT d)
 *
 * The vectors are split into chunks and every stage submits one task per
 * chunk. Stage-2 task i reads exactly the bytes stage-1 task i writes, so
 * strata makes it wait for that task and no other: chip 1 can work on
 * chunk i while chip 0 computes chunk i + 1. Every task records when it ran
 * (in a NO_DEP buffer that creates no dependencies), so the program can
 * show the pipeline and check the order. The result is compared with a
 * host reference.
 *
 * Usage: vector_add [elements [chunks]]   (default 1048576 16)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <strata/strata.h>

#define RUNS 2 /* the first run is cold (children map the buffers) */

static const int chip_ids[2] = {0, 1};

/* One trace record per task, written by the task itself. */
struct span {
    uint64_t start_ns; /* CLOCK_MONOTONIC, the same clock in every process */
    uint64_t end_ns;
    int64_t chip;
};

struct pipeline {
    size_t n;      /* elements */
    size_t chunks; /* tasks per stage */
    strata_buffer *a, *b, *c, *d;
    strata_buffer *trace; /* struct span[2 * chunks]: stage 1, then stage 2 */
    strata_callable add, scale;
};

static int fail(const char *what, strata_err err)
{
    fprintf(stderr, "vector_add: FAILED: %s: %s (%s): %s\n", what,
            strata_errname(err), strata_strerror(err), strata_errmsg());
    return 1;
}

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Checks that tensor i is float32 and returns its element count. */
static size_t f32_count(const strata_args *args, size_t i)
{
    if (strata_args_tensor_dtype(args, i) != STRATA_F32)
        return 0;
    return strata_args_tensor_nbytes(args, i) / sizeof(float);
}

/* Records the task's span in the trace tensor (the last tensor) at the
 * index given by scalar 0. */
static strata_err trace_span(strata_chip *chip, const strata_args *args,
                             uint64_t start_ns)
{
    size_t last = strata_args_num_tensors(args) - 1;
    struct span *trace = strata_args_tensor_data(args, last);
    size_t slots = strata_args_tensor_nbytes(args, last) / sizeof(*trace);
    uint64_t index = strata_args_scalar(args, 0);

    if (trace == NULL || index >= slots) {
        strata_errmsg_set("trace index %llu outside the trace buffer",
                          (unsigned long long)index);
        return STRATA_EINVAL;
    }
    trace[index].start_ns = start_ns;
    trace[index].end_ns = now_ns();
    trace[index].chip = strata_chip_id(chip);
    return STRATA_OK;
}

/* Stage 1 kernel: c = a + b. Tensors: a (IN), b (IN), c (OUT), trace. */
static strata_err add_kernel(strata_chip *chip, const strata_args *args)
{
    uint64_t start = now_ns();
    size_t n = f32_count(args, 2);
    const float *a = strata_args_tensor_data(args, 0);
    const float *b = strata_args_tensor_data(args, 1);
    float *c = strata_args_tensor_data(args, 2);

    if (strata_args_num_tensors(args) != 4 || n == 0 ||
        f32_count(args, 0) != n || f32_count(args, 1) != n) {
        strata_errmsg_set("add: expected a, b, c of equal float32 length");
        return STRATA_EINVAL;
    }
    for (size_t i = 0; i < n; i++)
        c[i] = a[i] + b[i];
    return trace_span(chip, args, start);
}

/* Stage 2 kernel: d = factor * c. Tensors: c (IN), d (OUT), trace;
 * scalars: trace index, factor. */
static strata_err scale_kernel(strata_chip *chip, const strata_args *args)
{
    uint64_t start = now_ns();
    size_t n = f32_count(args, 1);
    const float *c = strata_args_tensor_data(args, 0);
    float *d = strata_args_tensor_data(args, 1);
    float factor = (float)strata_args_scalar(args, 1);

    if (strata_args_num_tensors(args) != 3 || n == 0 ||
        f32_count(args, 0) != n || strata_args_num_scalars(args) != 2) {
        strata_errmsg_set("scale: expected c, d of equal float32 length");
        return STRATA_EINVAL;
    }
    for (size_t i = 0; i < n; i++)
        d[i] = factor * c[i];
    return trace_span(chip, args, start);
}

/* Appends the float32 slice [first, first + count) of buf. */
static strata_err add_slice(strata_args *a, strata_buffer *buf, size_t first,
                            size_t count, strata_tag tag)
{
    const size_t shape[1] = {count};

    return strata_args_add_tensor(a, buf, first * sizeof(float), STRATA_F32, 1,
                                  shape, tag);
}

/* Appends the whole trace buffer, untracked. */
static strata_err add_trace(strata_args *a, const struct pipeline *p)
{
    const size_t shape[1] = {strata_buffer_size(p->trace)};

    return strata_args_add_tensor(a, p->trace, 0, STRATA_U8, 1, shape,
                                  STRATA_NO_DEP);
}

static strata_err submit_stage1(strata_orch *o, const struct pipeline *p,
                                strata_args *a, size_t k, size_t first,
                                size_t count)
{
    strata_err err;

    strata_args_clear(a);
    err = add_slice(a, p->a, first, count, STRATA_IN);
    if (err == STRATA_OK)
        err = add_slice(a, p->b, first, count, STRATA_IN);
    if (err == STRATA_OK)
        err = add_slice(a, p->c, first, count, STRATA_OUT);
    if (err == STRATA_OK)
        err = add_trace(a, p);
    if (err == STRATA_OK)
        err = strata_args_add_scalar(a, k);
    if (err == STRATA_OK)
        err = strata_orch_submit_next_level(o, p->add, a, chip_ids[0]);
    return err;
}

static strata_err submit_stage2(strata_orch *o, const struct pipeline *p,
                                strata_args *a, size_t k, size_t first,
                                size_t count)
{
    strata_err err;

    strata_args_clear(a);
    err = add_slice(a, p->c, first, count, STRATA_IN);
    if (err == STRATA_OK)
        err = add_slice(a, p->d, first, count, STRATA_OUT);
    if (err == STRATA_OK)
        err = add_trace(a, p);
    if (err == STRATA_OK)
        err = strata_args_add_scalar(a, p->chunks + k);
    if (err == STRATA_OK)
        err = strata_args_add_scalar(a, 2); /* factor */
    if (err == STRATA_OK)
        err = strata_orch_submit_next_level(o, p->scale, a, chip_ids[1]);
    return err;
}

/* The orchestration. It submits all of stage 1, then all of stage 2, and
 * never waits: the order between the stages comes from the tags alone. */
static strata_err pipeline_orch(strata_orch *o, const strata_args *unused,
                                void *user)
{
    const struct pipeline *p = user;
    size_t per = (p->n + p->chunks - 1) / p->chunks;
    strata_args *a = NULL;
    strata_err err;

    (void)unused;
    err = strata_args_create(&a);
    for (size_t k = 0; k < p->chunks && err == STRATA_OK; k++)
        err = submit_stage1(o, p, a, k, k * per, per);
    for (size_t k = 0; k < p->chunks && err == STRATA_OK; k++)
        err = submit_stage2(o, p, a, k, k * per, per);
    strata_args_destroy(a);
    return err;
}

/* Compares d with the host reference 2 * (a + b); 0 when all match. */
static int check_result(const struct pipeline *p)
{
    const float *a = strata_buffer_data(p->a);
    const float *b = strata_buffer_data(p->b);
    const float *d = strata_buffer_data(p->d);
    size_t bad = 0;

    for (size_t i = 0; i < p->n; i++) {
        float want = 2.0f * (a[i] + b[i]);
        if (d[i] != want && bad++ < 5)
            fprintf(stderr, "vector_add: d[%zu] = %g, expected %g\n", i,
                    (double)d[i], (double)want);
    }
    if (bad != 0)
        fprintf(stderr, "vector_add: FAILED: %zu of %zu elements wrong\n", bad,
                p->n);
    return bad != 0;
}

/* Prints the per-chunk timeline and checks that every stage-2 task began
 * after the stage-1 task that produced its input ended. */
static int check_trace(const struct pipeline *p, uint64_t t0)
{
    const struct span *s = strata_buffer_data(p->trace);
    uint64_t stage1_end = 0;
    size_t overlapped = 0;
    int bad = 0;

    for (size_t k = 0; k < p->chunks; k++)
        if (s[k].end_ns > stage1_end)
            stage1_end = s[k].end_ns;
    printf("  chunk  stage 1 (chip %d) us      stage 2 (chip %d) us\n",
           chip_ids[0], chip_ids[1]);
    for (size_t k = 0; k < p->chunks; k++) {
        const struct span *s1 = &s[k], *s2 = &s[p->chunks + k];
        printf(
            "  %5zu  %8.1f .. %8.1f    %8.1f .. %8.1f\n", k,
            (double)(s1->start_ns - t0) / 1e3, (double)(s1->end_ns - t0) / 1e3,
            (double)(s2->start_ns - t0) / 1e3, (double)(s2->end_ns - t0) / 1e3);
        if (s1->chip != chip_ids[0] || s2->chip != chip_ids[1] ||
            s2->start_ns < s1->end_ns) {
            fprintf(stderr,
                    "vector_add: FAILED: chunk %zu ran out of order "
                    "or on the wrong chip\n",
                    k);
            bad = 1;
        }
        if (s2->start_ns < stage1_end)
            overlapped++;
    }
    if (bad)
        return 1;
    printf("vector_add: order held: each stage-2 task started after the "
           "stage-1 task it reads\n");
    printf("vector_add: pipelined: %zu of %zu stage-2 tasks started while "
           "stage 1 was still running\n",
           overlapped, p->chunks);
    return bad;
}

static void fill_inputs(const struct pipeline *p)
{
    float *a = strata_buffer_data(p->a);
    float *b = strata_buffer_data(p->b);

    /* Small integers, so every sum and product is exact in float32. */
    for (size_t i = 0; i < p->n; i++) {
        a[i] = (float)(i % 1024);
        b[i] = (float)((i / 1024) % 1024);
    }
}

static int create_buffers(strata_worker *w, struct pipeline *p)
{
    strata_buffer **bufs[4] = {&p->a, &p->b, &p->c, &p->d};
    strata_err err;

    for (size_t i = 0; i < 4; i++) {
        err = strata_worker_create_buffer(w, p->n * sizeof(float), bufs[i]);
        if (err != STRATA_OK)
            return fail("create vector buffer", err);
    }
    err = strata_worker_create_buffer(w, 2 * p->chunks * sizeof(struct span),
                                      &p->trace);
    if (err != STRATA_OK)
        return fail("create trace buffer", err);
    return 0;
}

/* One run of the pipeline, timed and checked. */
static int run_once(strata_worker *w, struct pipeline *p, int index)
{
    uint64_t t0, t1;
    strata_err err;

    memset(strata_buffer_data(p->d), 0, p->n * sizeof(float));
    t0 = now_ns();
    err = strata_worker_run(w, pipeline_orch, NULL, p);
    t1 = now_ns();
    if (err != STRATA_OK)
        return fail("run", err);
    printf("vector_add: run %d (%s): %zu tasks in %.3f ms\n", index,
           index == 1 ? "cold" : "warm", 2 * p->chunks,
           (double)(t1 - t0) / 1e6);
    if (check_result(p) != 0)
        return 1;
    if (index == RUNS)
        return check_trace(p, t0);
    return 0;
}

static int run(strata_worker *w, struct pipeline *p)
{
    strata_err err;

    err = strata_register_kernel("vector_add.add", add_kernel, &p->add);
    if (err != STRATA_OK)
        return fail("register add", err);
    err = strata_register_kernel("vector_add.scale", scale_kernel, &p->scale);
    if (err != STRATA_OK)
        return fail("register scale", err);
    if (create_buffers(w, p) != 0)
        return 1;
    fill_inputs(p);

    err = strata_worker_init(w);
    if (err != STRATA_OK)
        return fail("worker init", err);
    printf("vector_add: %zu float32 elements, %zu chunks of %zu\n", p->n,
           p->chunks, p->n / p->chunks);
    printf("vector_add: stage 1 on chip %d (pid %d): c = a + b, %zu tasks\n",
           chip_ids[0], strata_worker_chip_pid(w, chip_ids[0]), p->chunks);
    printf("vector_add: stage 2 on chip %d (pid %d): d = 2 * c, %zu tasks\n",
           chip_ids[1], strata_worker_chip_pid(w, chip_ids[1]), p->chunks);

    for (int i = 1; i <= RUNS; i++)
        if (run_once(w, p, i) != 0)
            return 1;
    return 0;
}

static int parse_args(int argc, char **argv, struct pipeline *p)
{
    p->n = (size_t)1 << 20;
    p->chunks = 16;
    if (argc > 1)
        p->n = strtoull(argv[1], NULL, 0);
    if (argc > 2)
        p->chunks = strtoull(argv[2], NULL, 0);
    if (argc > 3 || p->n == 0 || p->chunks == 0 || p->n % p->chunks != 0 ||
        p->chunks > 4096) {
        fprintf(stderr, "usage: vector_add [elements [chunks]]\n"
                        "  chunks (1..4096) must divide elements\n");
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    strata_worker_config cfg;
    strata_worker *w = NULL;
    struct pipeline p = {0};
    strata_err err;
    int rc;

    if (parse_args(argc, argv, &p) != 0)
        return 2;
    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = chip_ids;
    cfg.num_chips = 2;
    err = strata_worker_create(&cfg, &w);
    if (err != STRATA_OK)
        return fail("worker create", err);

    rc = run(w, &p);

    /* Destroy on every path: it reaps the chips and frees the buffers. */
    err = strata_worker_destroy(w);
    if (err != STRATA_OK)
        rc = fail("worker destroy", err);
    if (rc != 0)
        return EXIT_FAILURE;
    printf("vector_add: OK (%zu elements checked)\n", p.n);
    return EXIT_SUCCESS;
}
