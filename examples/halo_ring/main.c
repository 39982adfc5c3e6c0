/*
 * halo_ring: the 8-node ring, out_i = x_{i-1} + x_i + x_{i+1} (periodic),
 * with x_i = i, run as halo execution on 2 and then on 4 sim chips.
 *
 * The graph is a CSR by destination: row i lists its sources i-1, i, i+1.
 * strata_halo_create splits the rows over the chips (rank r owns a block of
 * rows) and derives each rank's ghosts: on 2 chips rank 0 owns rows 0..3
 * and needs x_4 and x_7 from rank 1, rank 1 owns 4..7 and needs x_0 and
 * x_3. Inside the orch fn, strata_halo_forward allocates a local domain,
 * every rank packs the rows its peers need into its window, signals them,
 * computes the rows that need no ghost, waits, reads its ghosts straight
 * from the peers' windows and computes the rest. strata_halo_vjp runs the
 * reverse exchange for the gradient of sum(out) (grad_out = 1 everywhere):
 * each ghost's cotangent goes back to its owner and is added there, so
 * every x_i gets 3, across the rank boundary too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strata/strata.h>

#define N 8
#define MAX_CHIPS 4

static const int chip_ids[MAX_CHIPS] = {0, 1, 2, 3};

struct ring {
    strata_halo *halo;
    strata_buffer *x, *out, *grad_out, *grad_x;
};

static int fail(const char *what, strata_err err)
{
    fprintf(stderr, "halo_ring: FAILED: %s: %s (%s): %s\n", what,
            strata_errname(err), strata_strerror(err), strata_errmsg());
    return 1;
}

static strata_err ring_orch(strata_orch *o, const strata_args *unused,
                            void *user)
{
    struct ring *r = user;
    strata_err err;

    (void)unused;
    err = strata_halo_forward(o, r->halo, r->x, r->out);
    if (err == STRATA_OK)
        err = strata_halo_vjp(o, r->halo, r->grad_out, r->grad_x);
    return err;
}

static void print_rows(const char *label, const float *v, uint64_t b,
                       uint64_t e)
{
    printf(" %s [", label);
    for (uint64_t i = b; i < e; i++)
        printf("%s%g", i > b ? "," : "", (double)v[i]);
    printf("]");
}

/* Prints each rank's rows and checks them against the formula. */
static int report(const struct ring *r, size_t chips)
{
    const float *out = strata_buffer_data(r->out);
    const float *gx = strata_buffer_data(r->grad_x);
    int bad = 0;

    for (uint32_t rank = 0; rank < chips; rank++) {
        strata_halo_rank_trace t;

        if (strata_halo_last_trace(r->halo, rank, &t) != STRATA_OK)
            return fail("trace", STRATA_ESTATE);
        printf("halo_ring: %zu chips: rank %u (rows %llu..%llu, %llu "
               "ghosts):",
               chips, rank, (unsigned long long)t.owned_begin,
               (unsigned long long)t.owned_end - 1,
               (unsigned long long)t.ghosts);
        print_rows("out", out, t.owned_begin, t.owned_end);
        print_rows("grad", gx, t.owned_begin, t.owned_end);
        printf("\n");
    }
    for (int i = 0; i < N; i++) {
        float want = (float)((i + N - 1) % N + i + (i + 1) % N);

        if (out[i] != want || gx[i] != 3.0f) {
            fprintf(stderr,
                    "halo_ring: row %d: out %g (want %g), grad %g "
                    "(want 3)\n",
                    i, (double)out[i], (double)want, (double)gx[i]);
            bad = 1;
        }
    }
    if (bad)
        fprintf(stderr, "halo_ring: FAILED: wrong values on %zu chips\n",
                chips);
    return bad;
}

static int run_on(strata_worker *w, struct ring *r, const strata_csr_view *g,
                  size_t chips)
{
    strata_halo_spec spec;
    strata_err err;
    int rc;

    strata_halo_spec_init(&spec);
    spec.csr = g;
    spec.chips = chip_ids;
    spec.num_chips = chips;
    spec.features = 1;
    spec.dtype = STRATA_F32;
    spec.reducer = STRATA_HALO_SUM;
    err = strata_halo_create(w, &spec, &r->halo);
    if (err != STRATA_OK)
        return fail("halo create", err);
    memset(strata_buffer_data(r->out), 0, N * sizeof(float));
    memset(strata_buffer_data(r->grad_x), 0, N * sizeof(float));
    err = strata_worker_run(w, ring_orch, NULL, r);
    rc = err != STRATA_OK ? fail("run", err) : report(r, chips);
    err = strata_halo_destroy(r->halo);
    r->halo = NULL;
    if (err != STRATA_OK)
        rc = fail("halo destroy", err);
    return rc;
}

static int run(strata_worker *w, struct ring *r)
{
    int64_t row_ptr[N + 1];
    int64_t col_idx[3 * N];
    const strata_csr_view g = {N, N, row_ptr, col_idx};
    strata_buffer **bufs[4] = {&r->x, &r->out, &r->grad_out, &r->grad_x};
    float *x, *go;
    strata_err err = STRATA_OK;

    for (int i = 0; i < N; i++) {
        row_ptr[i] = 3 * i;
        col_idx[3 * i] = (i + N - 1) % N;
        col_idx[3 * i + 1] = i;
        col_idx[3 * i + 2] = (i + 1) % N;
    }
    row_ptr[N] = 3 * N;
    for (int b = 0; b < 4 && err == STRATA_OK; b++)
        err = strata_worker_create_buffer(w, N * sizeof(float), bufs[b]);
    if (err != STRATA_OK)
        return fail("create buffer", err);
    x = strata_buffer_data(r->x);
    go = strata_buffer_data(r->grad_out);
    for (int i = 0; i < N; i++) {
        x[i] = (float)i;
        go[i] = 1.0f; /* d sum(out) / d out */
    }
    err = strata_worker_init(w);
    if (err != STRATA_OK)
        return fail("worker init", err);
    if (run_on(w, r, &g, 2) != 0 || run_on(w, r, &g, 4) != 0)
        return 1;
    return 0;
}

int main(void)
{
    strata_worker_config cfg;
    strata_worker *w = NULL;
    struct ring r = {0};
    strata_err err;
    int rc;

    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = chip_ids;
    cfg.num_chips = MAX_CHIPS;
    err = strata_worker_create(&cfg, &w);
    if (err != STRATA_OK)
        return fail("worker create", err);
    rc = run(w, &r);
    err = strata_worker_destroy(w);
    if (err != STRATA_OK)
        rc = fail("worker destroy", err);
    if (rc != 0)
        return EXIT_FAILURE;
    printf("halo_ring: OK\n");
    return EXIT_SUCCESS;
}
