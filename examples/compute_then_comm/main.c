/*
 * compute_then_comm: a compute round, then a communication round, on one
 * global communication domain across two forked L3 nodes of two sim chips
 * each (four ranks).
 *
 *   compute round        each rank squares its quarter of x (y = x*x + 1)
 *                        straight into its own window; no rank looks at
 *                        another's window.
 *   barrier              the L4 orch fn closes a scope around the compute
 *                        round: strata_orch_scope_end returns once every
 *                        rank on both nodes has finished, so every window
 *                        holds its y.
 *   communication round  each rank reads every rank's window, in rank
 *                        order, through the domain's mappings: it gathers
 *                        the whole y (an allgather) and sums it (an
 *                        allreduce), into L4 buffers.
 *
 * Between the rounds the L4 also copies a few values out of rank 3's
 * window with strata_orch_copy_from_global_domain, a bounded control-plane
 * copy, to show what the compute round left there. The domain is released
 * in the same run and freed at its fence. The program checks every
 * gathered element and every sum against a host reference.
 *
 * Usage: compute_then_comm [elements]   (default 65536, a multiple of 4)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strata/strata.h>

#define NAME "compute_then_comm"
#define NODES 2
#define CHIPS 2 /* per node */
#define RANKS (NODES * CHIPS)
#define PEEK 4 /* values copied out of rank 3's window */

static const int chip_ids[CHIPS] = {0, 1};

struct job {
    size_t n;                /* elements of x */
    size_t slice;            /* elements per rank */
    strata_buffer *x;        /* f32[n] */
    strata_buffer *gathered; /* f32[RANKS][n]: what each rank assembled */
    strata_buffer *sums;     /* f64[RANKS]: what each rank summed */
    strata_callable node_compute, node_comm;
    strata_global_domain *domain;
    float peek[PEEK];
};

static strata_callable k_square, k_gather;

static int fail(const char *what, strata_err err)
{
    fprintf(stderr, NAME ": FAILED: %s: %s (%s): %s\n", what,
            strata_errname(err), strata_strerror(err), strata_errmsg());
    return 1;
}

/* Quarters of small integers: every square and every sum is exact. */
static float x_value(size_t i)
{
    return (float)(i % 251) * 0.25f;
}

static float y_of(float x)
{
    return x * x + 1.0f;
}

/* ---- kernels (on the chips) ------------------------------------------ */

/* Compute: t0 IN f32 = this rank's part of x; s0 device_ctx, s1 byte
 * offset of "y" in the window. Writes only its own window. */
static strata_err square_kernel(strata_chip *chip, const strata_args *a)
{
    const strata_comm_context *cc =
        strata_chip_comm_context(chip, strata_args_scalar(a, 0));
    const float *x = strata_args_tensor_data(a, 0);
    size_t n = strata_args_tensor_nbytes(a, 0) / sizeof(float);
    float *y;

    if (!cc) {
        strata_errmsg_set("chip %d: not a member", strata_chip_id(chip));
        return STRATA_ENOENT;
    }
    y = (float *)((char *)cc->window_base[cc->rank] + strata_args_scalar(a, 1));
    for (size_t i = 0; i < n; i++)
        y[i] = y_of(x[i]);
    return STRATA_OK;
}

/* Communication: t0 OUT f32[rank_count * slice] = every rank's y in rank
 * order, t1 OUT f64[1] = their sum; s0 device_ctx, s1 offset of "y",
 * s2 slice (elements per rank). Reads the peers' windows. */
static strata_err gather_kernel(strata_chip *chip, const strata_args *a)
{
    const strata_comm_context *cc =
        strata_chip_comm_context(chip, strata_args_scalar(a, 0));
    size_t off = (size_t)strata_args_scalar(a, 1);
    size_t slice = (size_t)strata_args_scalar(a, 2);
    float *all = strata_args_tensor_data(a, 0);
    double *sum = strata_args_tensor_data(a, 1);
    double s = 0.0;

    if (!cc || strata_args_tensor_nbytes(a, 0) !=
                   cc->rank_count * slice * sizeof(float)) {
        strata_errmsg_set("chip %d: no context or a bad output",
                          strata_chip_id(chip));
        return STRATA_EINVAL;
    }
    for (uint32_t r = 0; r < cc->rank_count; r++) {
        const float *y =
            (const float *)((const char *)cc->window_base[r] + off);

        memcpy(all + r * slice, y, slice * sizeof(float));
        for (size_t i = 0; i < slice; i++)
            s += y[i];
    }
    *sum = s;
    return STRATA_OK;
}

/* ---- node callables (on each L3 node) ---------------------------------- */

/* This node's member chips (0..n-1 here) with their contexts. */
static strata_err local_members(strata_orch *o, uint64_t id, int *chips,
                                strata_chip_domain_ctx *ctx, size_t *n)
{
    strata_global_view *v = NULL;
    strata_err err = strata_orch_get_global_domain(o, id, &v);

    *n = 0;
    for (int c = 0; err == STRATA_OK && c < CHIPS; c++)
        if (strata_global_view_context(v, c, &ctx[*n]) == STRATA_OK)
            chips[(*n)++] = c;
    return err;
}

static size_t offset_of(const strata_chip_domain_ctx *ctx, const char *name)
{
    for (size_t i = 0; i < ctx->num_buffers; i++)
        if (strcmp(ctx->buffers[i].name, name) == 0)
            return ctx->buffers[i].offset;
    return 0;
}

/* Appends elements [first, first + count) of tensor i of args (the
 * parent's buffer, passed on by identity). */
static strata_err add_part(strata_args *a, const strata_args *args, size_t i,
                           strata_dtype dtype, size_t first, size_t count,
                           strata_tag tag)
{
    const size_t shape[1] = {count};
    size_t es = strata_dtype_size(dtype);

    return strata_args_add_tensor(
        a, strata_args_tensor_buffer(args, i),
        strata_args_tensor_offset(args, i) + first * es, dtype, 1, shape, tag);
}

/* t0 IN f32 = x for this node's ranks; s0 domain id, s1 slice. */
static strata_err node_compute(strata_orch *o, const strata_args *args,
                               void *user)
{
    strata_chip_domain_ctx ctx[CHIPS];
    int chips[CHIPS];
    size_t n = 0, slice = (size_t)strata_args_scalar(args, 1);
    strata_args *a = NULL;
    strata_err err;

    (void)user;
    err = local_members(o, strata_args_scalar(args, 0), chips, ctx, &n);
    if (err == STRATA_OK)
        err = strata_args_create(&a);
    for (size_t k = 0; err == STRATA_OK && k < n; k++) {
        strata_args_clear(a);
        err = add_part(a, args, 0, STRATA_F32, k * slice, slice, STRATA_IN);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(a, ctx[k].device_ctx);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(a, offset_of(&ctx[k], "y"));
        if (err == STRATA_OK)
            err = strata_orch_submit_next_level(o, k_square, a, chips[k]);
    }
    strata_args_destroy(a);
    return err;
}

/* t0 OUT f32 = gathered vectors of this node's ranks, t1 OUT f64 = their
 * sums; s0 domain id, s1 slice. */
static strata_err node_comm(strata_orch *o, const strata_args *args, void *user)
{
    strata_chip_domain_ctx ctx[CHIPS];
    int chips[CHIPS];
    size_t n = 0, slice = (size_t)strata_args_scalar(args, 1);
    size_t whole = slice * RANKS;
    strata_args *a = NULL;
    strata_err err;

    (void)user;
    err = local_members(o, strata_args_scalar(args, 0), chips, ctx, &n);
    if (err == STRATA_OK)
        err = strata_args_create(&a);
    for (size_t k = 0; err == STRATA_OK && k < n; k++) {
        strata_args_clear(a);
        err = add_part(a, args, 0, STRATA_F32, k * whole, whole, STRATA_OUT);
        if (err == STRATA_OK)
            err = add_part(a, args, 1, STRATA_F64, k, 1, STRATA_OUT);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(a, ctx[k].device_ctx);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(a, offset_of(&ctx[k], "y"));
        if (err == STRATA_OK)
            err = strata_args_add_scalar(a, slice);
        if (err == STRATA_OK)
            err = strata_orch_submit_next_level(o, k_gather, a, chips[k]);
    }
    strata_args_destroy(a);
    return err;
}

/* ---- the L4 orch fn ------------------------------------------------------ */

/* Node node's ranks are node * CHIPS + 0..CHIPS-1: its part of a
 * per-rank array of `per` elements of dtype. */
static strata_err add_node_part(strata_args *a, strata_buffer *b, int node,
                                size_t per, strata_dtype dtype, strata_tag tag)
{
    const size_t shape[1] = {CHIPS * per};

    return strata_args_add_tensor(
        a, b, (size_t)node * CHIPS * per * strata_dtype_size(dtype), dtype, 1,
        shape, tag);
}

static strata_err round_on_nodes(strata_orch *o, struct job *j, bool comm)
{
    uint64_t id = strata_global_domain_id(j->domain);
    strata_args *a = NULL;
    strata_err err = strata_args_create(&a);

    for (int node = 0; node < NODES && err == STRATA_OK; node++) {
        strata_args_clear(a);
        if (!comm) {
            err = add_node_part(a, j->x, node, j->slice, STRATA_F32, STRATA_IN);
        } else {
            err = add_node_part(a, j->gathered, node, j->n, STRATA_F32,
                                STRATA_OUT);
            if (err == STRATA_OK)
                err =
                    add_node_part(a, j->sums, node, 1, STRATA_F64, STRATA_OUT);
        }
        if (err == STRATA_OK)
            err = strata_args_add_scalar(a, id);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(a, j->slice);
        if (err == STRATA_OK)
            err = strata_orch_submit_next_level(
                o, comm ? j->node_comm : j->node_compute, a, node);
    }
    strata_args_destroy(a);
    return err;
}

static strata_err l4_orch(strata_orch *o, const strata_args *unused, void *user)
{
    struct job *j = user;
    static const strata_global_member members[RANKS] = {
        {0, 0}, {0, 1}, {1, 0}, {1, 1}};
    strata_comm_buffer_spec y = {"y", STRATA_F32, j->slice,
                                 j->slice * sizeof(float)};
    strata_global_domain_spec spec = {
        .name = "ctc",
        .members = members,
        .num_members = RANKS,
        .window_size = j->slice * sizeof(float),
        .buffers = &y,
        .num_buffers = 1,
    };
    strata_err err;

    (void)unused;
    err = strata_orch_allocate_global_domain(o, &spec, &j->domain);
    if (err != STRATA_OK)
        return err;
    /* Compute round, closed by a scope: the barrier between the rounds. */
    err = strata_orch_scope_begin(o);
    if (err == STRATA_OK)
        err = round_on_nodes(o, j, false);
    if (err == STRATA_OK)
        err = strata_orch_scope_end(o);
    else if (strata_orch_scope_end(o) != STRATA_OK)
        fprintf(stderr, NAME ": %s\n", strata_errmsg());
    /* What the compute round left in rank 3's window. */
    if (err == STRATA_OK)
        err = strata_orch_copy_from_global_domain(o, j->domain, RANKS - 1, "y",
                                                  0, j->peek, sizeof(j->peek));
    /* Communication round: reads through the peers' windows. */
    if (err == STRATA_OK)
        err = round_on_nodes(o, j, true);
    /* Freed at this run's fence, after the communication round. */
    if (strata_global_domain_release(j->domain) != STRATA_OK && !err)
        err = STRATA_ESTATE;
    return err;
}

/* ---- main ------------------------------------------------------------------
 */

static int check(const struct job *j)
{
    const float *g = strata_buffer_data(j->gathered);
    const double *s = strata_buffer_data(j->sums);
    double want_sum = 0.0;
    size_t bad = 0;

    for (size_t i = 0; i < j->n; i++)
        want_sum += y_of(x_value(i));
    for (size_t k = 0; k < PEEK; k++)
        if (j->peek[k] != y_of(x_value((RANKS - 1) * j->slice + k)))
            bad++;
    for (size_t r = 0; r < RANKS; r++) {
        for (size_t i = 0; i < j->n; i++) {
            float want = y_of(x_value(i));

            if (g[r * j->n + i] != want && bad++ < 3)
                fprintf(stderr,
                        NAME ": rank %zu gathered y[%zu] = %g, want "
                             "%g\n",
                        r, i, (double)g[r * j->n + i], (double)want);
        }
        printf("  rank %zu (node %zu chip %zu): gathered %zu elements, sum "
               "%.2f %s\n",
               r, r / CHIPS, r % CHIPS, j->n, s[r],
               s[r] == want_sum ? "ok" : "WRONG");
        bad += s[r] != want_sum;
    }
    if (bad != 0)
        fprintf(stderr, NAME ": FAILED: %zu wrong values\n", bad);
    return bad != 0;
}

static strata_err build(struct job *j, strata_worker **out)
{
    strata_worker_config c4, c3;
    strata_worker *w = NULL;
    strata_err err;
    int id;

    strata_worker_config_init(&c4, 4);
    err = strata_worker_create(&c4, &w);
    if (err != STRATA_OK)
        return err;
    *out = w;
    strata_worker_config_init(&c3, 3);
    c3.chip_ids = chip_ids;
    c3.num_chips = CHIPS;
    for (int node = 0; node < NODES && err == STRATA_OK; node++) {
        strata_worker *n = NULL;

        err = strata_worker_create(&c3, &n);
        if (err == STRATA_OK) {
            err = strata_worker_add_worker(w, n, &id);
            if (err != STRATA_OK && strata_worker_destroy(n) != STRATA_OK)
                fprintf(stderr, NAME ": %s\n", strata_errmsg());
        }
    }
    if (err == STRATA_OK)
        err = strata_worker_init(w);
    if (err == STRATA_OK)
        err = strata_worker_create_buffer(w, j->n * sizeof(float), &j->x);
    if (err == STRATA_OK)
        err = strata_worker_create_buffer(w, RANKS * j->n * sizeof(float),
                                          &j->gathered);
    if (err == STRATA_OK)
        err = strata_worker_create_buffer(w, RANKS * sizeof(double), &j->sums);
    return err;
}

int main(int argc, char **argv)
{
    struct job j;
    strata_worker *w = NULL;
    strata_err err;
    int rc = 1;

    memset(&j, 0, sizeof(j));
    j.n = 65536;
    if (argc > 1)
        j.n = strtoull(argv[1], NULL, 0);
    if (argc > 2 || j.n < RANKS || j.n % RANKS || j.n > ((size_t)1 << 24)) {
        fprintf(stderr,
                "usage: " NAME " [elements]   (a multiple of %d, "
                "up to 2^24)\n",
                RANKS);
        return 2;
    }
    j.slice = j.n / RANKS;
    /* Registered before init: the forked nodes inherit them. */
    err = strata_register_kernel("ctc.square", square_kernel, &k_square);
    if (err == STRATA_OK)
        err = strata_register_kernel("ctc.gather", gather_kernel, &k_gather);
    if (err == STRATA_OK)
        err = strata_register_orch("ctc.node_compute", node_compute,
                                   &j.node_compute);
    if (err == STRATA_OK)
        err = strata_register_orch("ctc.node_comm", node_comm, &j.node_comm);
    if (err != STRATA_OK)
        return fail("register", err);
    err = build(&j, &w);
    if (err != STRATA_OK) {
        rc = fail("build the L4 with two forked nodes", err);
        goto out;
    }
    for (size_t i = 0; i < j.n; i++)
        ((float *)strata_buffer_data(j.x))[i] = x_value(i);
    printf(NAME ": %zu float32 elements over 4 ranks on 2 forked L3 nodes, "
                "%zu per rank\n",
           j.n, j.slice);
    err = strata_worker_run(w, l4_orch, NULL, &j);
    if (err != STRATA_OK) {
        rc = fail("run", err);
        goto out;
    }
    printf(NAME ": compute round left y = x*x + 1 in the windows (rank 3's "
                "first values: %g %g %g %g)\n",
           (double)j.peek[0], (double)j.peek[1], (double)j.peek[2],
           (double)j.peek[3]);
    printf(NAME ": communication round: every rank gathered and summed all "
                "four windows\n");
    if (check(&j) != 0)
        goto out;
    if (!strata_global_domain_freed(j.domain)) {
        fprintf(stderr, NAME ": FAILED: the domain was not freed at the "
                             "run's fence\n");
        goto out;
    }
    rc = 0;
out:
    if (w != NULL && (err = strata_worker_destroy(w)) != STRATA_OK)
        rc = fail("destroy", err);
    if (rc != 0)
        return EXIT_FAILURE;
    printf(NAME ": OK (%d ranks x %zu elements gathered and summed)\n", RANKS,
           j.n);
    return EXIT_SUCCESS;
}
