/*
 * multi_chip: four sim chips, two ways of using them.
 *
 * 1. Independent tasks. The program fills a vector in 16 slices, one task
 *    per slice, spread round-robin over the four chips. The slices are
 *    disjoint, so no task waits for another and all chips work at once.
 *    Each task also records which chip ran it.
 * 2. A group task. One kernel on all four chips at once: every member
 *    publishes a value in a shared rendezvous buffer (tagged NO_DEP, so
 *    strata tracks no dependency on it), counts itself in with an atomic
 *    increment, waits (bounded) until every member has arrived, then sums
 *    what all members published. Kernels that wait on each other must be a
 *    group: strata launches a group only when all its chips are idle, so
 *    no member can be stuck behind a task that waits for it.
 */
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <strata/strata.h>

#define NUM_CHIPS 4
#define SLICES 16
#define SLICE_LEN 4096
#define RENDEZVOUS_TIMEOUT_S 10

static const int chip_ids[NUM_CHIPS] = {0, 1, 2, 3};

/* The group's shared meeting place (lives in a strata buffer). */
struct rendezvous {
    uint32_t arrived;         /* members that have published */
    uint32_t reserved;        /* keeps value 8-byte aligned */
    int64_t value[NUM_CHIPS]; /* what each member published */
};

struct multi {
    strata_buffer *out;    /* int64[SLICES * SLICE_LEN] */
    strata_buffer *ran_on; /* int32[SLICES]: chip that ran each slice */
    strata_buffer *meet;   /* struct rendezvous */
    strata_buffer *sums;   /* int64[NUM_CHIPS]: each member's total */
    strata_callable fill, gather;
};

static int fail(const char *what, strata_err err)
{
    fprintf(stderr, "multi_chip: FAILED: %s: %s (%s): %s\n", what,
            strata_errname(err), strata_strerror(err), strata_errmsg());
    return 1;
}

static int64_t expected_value(size_t slice, size_t i)
{
    return (int64_t)(slice * 1000000 + i * i);
}

/* Independent kernel: out[i] = slice * 1e6 + i * i over its slice, and the
 * chip id into its ran_on entry. Tensors: slice (OUT), ran_on entry (OUT);
 * scalar: slice index. */
static strata_err fill_kernel(strata_chip *chip, const strata_args *args)
{
    int64_t *out = strata_args_tensor_data(args, 0);
    int32_t *ran_on = strata_args_tensor_data(args, 1);
    size_t n = strata_args_tensor_nbytes(args, 0) / sizeof(int64_t);
    uint64_t slice = strata_args_scalar(args, 0);

    if (out == NULL || ran_on == NULL || strata_args_num_scalars(args) != 1) {
        strata_errmsg_set("fill: expected two tensors and one scalar");
        return STRATA_EINVAL;
    }
    for (size_t i = 0; i < n; i++)
        out[i] = expected_value(slice, i);
    *ran_on = strata_chip_id(chip);
    return STRATA_OK;
}

static double elapsed_s(const struct timespec *since)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - since->tv_sec) +
           (double)(now.tv_nsec - since->tv_nsec) / 1e9;
}

/* Group kernel. Tensors: the rendezvous (NO_DEP), this member's sum
 * (OUT); scalars: member rank, member count. */
static strata_err gather_kernel(strata_chip *chip, const strata_args *args)
{
    struct rendezvous *r = strata_args_tensor_data(args, 0);
    int64_t *sum = strata_args_tensor_data(args, 1);
    uint64_t rank = strata_args_scalar(args, 0);
    uint64_t members = strata_args_scalar(args, 1);
    struct timespec start;

    if (r == NULL || sum == NULL || members > NUM_CHIPS || rank >= members) {
        strata_errmsg_set("gather: bad arguments (rank %llu of %llu)",
                          (unsigned long long)rank,
                          (unsigned long long)members);
        return STRATA_EINVAL;
    }
    /* Publish, then count in: the release orders the value before the
     * count, so whoever sees the full count also sees every value. */
    r->value[rank] = 10 * (int64_t)(strata_chip_id(chip) + 1);
    __atomic_fetch_add(&r->arrived, 1, __ATOMIC_RELEASE);

    clock_gettime(CLOCK_MONOTONIC, &start);
    while (__atomic_load_n(&r->arrived, __ATOMIC_ACQUIRE) < members) {
        if (elapsed_s(&start) > RENDEZVOUS_TIMEOUT_S) {
            strata_errmsg_set("gather: chip %d waited %d s, only %u of %llu "
                              "members arrived",
                              strata_chip_id(chip), RENDEZVOUS_TIMEOUT_S,
                              __atomic_load_n(&r->arrived, __ATOMIC_ACQUIRE),
                              (unsigned long long)members);
            return STRATA_ETIMEDOUT;
        }
        sched_yield(); /* there may be fewer cores than members */
    }
    *sum = 0;
    for (uint64_t m = 0; m < members; m++)
        *sum += r->value[m];
    return STRATA_OK;
}

static strata_err add_i64(strata_args *a, strata_buffer *buf, size_t first,
                          size_t count, strata_tag tag)
{
    const size_t shape[1] = {count};

    return strata_args_add_tensor(a, buf, first * sizeof(int64_t), STRATA_I64,
                                  1, shape, tag);
}

/* Run 1: SLICES independent fill tasks, round-robin over the chips. */
static strata_err independent_orch(strata_orch *o, const strata_args *unused,
                                   void *user)
{
    const struct multi *m = user;
    const size_t one[1] = {1};
    strata_args *a = NULL;
    strata_err err;

    (void)unused;
    err = strata_args_create(&a);
    for (size_t s = 0; s < SLICES && err == STRATA_OK; s++) {
        strata_args_clear(a);
        err = add_i64(a, m->out, s * SLICE_LEN, SLICE_LEN, STRATA_OUT);
        if (err == STRATA_OK)
            err = strata_args_add_tensor(a, m->ran_on, s * sizeof(int32_t),
                                         STRATA_I32, 1, one, STRATA_OUT);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(a, s);
        if (err == STRATA_OK)
            err = strata_orch_submit_next_level(o, m->fill, a,
                                                chip_ids[s % NUM_CHIPS]);
    }
    strata_args_destroy(a);
    return err;
}

/* Run 2: one group task over all chips, member i on chip_ids[i]. */
static strata_err group_orch(strata_orch *o, const strata_args *unused,
                             void *user)
{
    const struct multi *m = user;
    const size_t meet_shape[1] = {sizeof(struct rendezvous)};
    strata_args *member[NUM_CHIPS] = {NULL};
    strata_err err = STRATA_OK;

    (void)unused;
    for (size_t i = 0; i < NUM_CHIPS && err == STRATA_OK; i++) {
        err = strata_args_create(&member[i]);
        if (err == STRATA_OK)
            err = strata_args_add_tensor(member[i], m->meet, 0, STRATA_U8, 1,
                                         meet_shape, STRATA_NO_DEP);
        if (err == STRATA_OK)
            err = add_i64(member[i], m->sums, i, 1, STRATA_OUT);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(member[i], i);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(member[i], NUM_CHIPS);
    }
    if (err == STRATA_OK)
        err = strata_orch_submit_next_level_group(
            o, m->gather, (const strata_args *const *)member, chip_ids,
            NUM_CHIPS);
    for (size_t i = 0; i < NUM_CHIPS; i++)
        strata_args_destroy(member[i]);
    return err;
}

static int check_independent(const struct multi *m)
{
    const int64_t *out = strata_buffer_data(m->out);
    const int32_t *ran_on = strata_buffer_data(m->ran_on);
    size_t per_chip[NUM_CHIPS] = {0};
    size_t bad = 0;

    for (size_t s = 0; s < SLICES; s++) {
        int want = chip_ids[s % NUM_CHIPS];
        if (ran_on[s] != want) {
            fprintf(stderr, "multi_chip: slice %zu ran on chip %d, not %d\n", s,
                    (int)ran_on[s], want);
            bad++;
        } else {
            per_chip[s % NUM_CHIPS]++;
        }
        for (size_t i = 0; i < SLICE_LEN; i++)
            bad += out[s * SLICE_LEN + i] != expected_value(s, i);
    }
    if (bad != 0) {
        fprintf(stderr, "multi_chip: FAILED: %zu wrong values\n", bad);
        return 1;
    }
    printf("multi_chip: %d independent tasks ran:", SLICES);
    for (size_t c = 0; c < NUM_CHIPS; c++)
        printf(" chip %d: %zu", chip_ids[c], per_chip[c]);
    printf("; %d values checked\n", SLICES * SLICE_LEN);
    return 0;
}

static int check_group(const struct multi *m)
{
    const struct rendezvous *r = strata_buffer_data(m->meet);
    const int64_t *sums = strata_buffer_data(m->sums);
    int64_t want = 0;
    int bad = r->arrived != NUM_CHIPS;

    for (size_t i = 0; i < NUM_CHIPS; i++)
        want += 10 * (int64_t)(chip_ids[i] + 1);
    for (size_t i = 0; i < NUM_CHIPS; i++) {
        if (sums[i] != want) {
            fprintf(stderr,
                    "multi_chip: member %zu (chip %d) summed %lld, "
                    "expected %lld\n",
                    i, chip_ids[i], (long long)sums[i], (long long)want);
            bad = 1;
        }
    }
    if (bad) {
        fprintf(stderr,
                "multi_chip: FAILED: group rendezvous (%u of %d "
                "arrived)\n",
                r->arrived, NUM_CHIPS);
        return 1;
    }
    printf("multi_chip: group of %d met at the rendezvous; every member "
           "summed %lld\n",
           NUM_CHIPS, (long long)want);
    return 0;
}

static int create_buffers(strata_worker *w, struct multi *m)
{
    strata_err err;

    err = strata_worker_create_buffer(w, SLICES * SLICE_LEN * sizeof(int64_t),
                                      &m->out);
    if (err == STRATA_OK)
        err = strata_worker_create_buffer(w, SLICES * sizeof(int32_t),
                                          &m->ran_on);
    if (err == STRATA_OK)
        err =
            strata_worker_create_buffer(w, sizeof(struct rendezvous), &m->meet);
    if (err == STRATA_OK)
        err = strata_worker_create_buffer(w, NUM_CHIPS * sizeof(int64_t),
                                          &m->sums);
    if (err != STRATA_OK)
        return fail("create buffer", err);
    return 0;
}

static int run(strata_worker *w, struct multi *m)
{
    strata_err err;

    err = strata_register_kernel("multi_chip.fill", fill_kernel, &m->fill);
    if (err != STRATA_OK)
        return fail("register fill", err);
    err =
        strata_register_kernel("multi_chip.gather", gather_kernel, &m->gather);
    if (err != STRATA_OK)
        return fail("register gather", err);
    if (create_buffers(w, m) != 0)
        return 1;

    err = strata_worker_init(w);
    if (err != STRATA_OK)
        return fail("worker init", err);
    printf("multi_chip: worker up: %zu chips, pids",
           strata_worker_num_chips(w));
    for (size_t c = 0; c < NUM_CHIPS; c++)
        printf(" %d", strata_worker_chip_pid(w, chip_ids[c]));
    printf("\n");

    err = strata_worker_run(w, independent_orch, NULL, m);
    if (err != STRATA_OK)
        return fail("independent run", err);
    if (check_independent(m) != 0)
        return 1;

    err = strata_worker_run(w, group_orch, NULL, m);
    if (err != STRATA_OK)
        return fail("group run", err);
    return check_group(m);
}

int main(void)
{
    strata_worker_config cfg;
    strata_worker *w = NULL;
    struct multi m = {0};
    strata_err err;
    int rc;

    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = chip_ids;
    cfg.num_chips = NUM_CHIPS;
    err = strata_worker_create(&cfg, &w);
    if (err != STRATA_OK)
        return fail("worker create", err);

    rc = run(w, &m);

    err = strata_worker_destroy(w);
    if (err != STRATA_OK)
        rc = fail("worker destroy", err);
    if (rc != 0)
        return EXIT_FAILURE;
    printf("multi_chip: OK (%d independent tasks on %d chips and a group "
           "of %d checked)\n",
           SLICES, NUM_CHIPS, NUM_CHIPS);
    return EXIT_SUCCESS;
}
