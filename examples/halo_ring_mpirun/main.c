/*
 * halo_ring_mpirun: the periodic ring out_i = x_{i-1} + x_i + x_{i+1}
 * (x_i = i) as halo execution over the ranks of an Open MPI job that the
 * L4 launches itself (strata_worker_add_mpirun_worker_group), one sim
 * chip per rank, with the halo's mpi transport: the boundary rows travel
 * as MPI messages between the ranks' processes, not through shared
 * windows, so the ranks may be on different hosts.
 *
 * The handle is global (members = (rank's node, chip 0)); the forward and
 * the VJP (grad_out = 1, so every x_i gets 3) run in one orch fn of the
 * L4, and every row is checked. The halo kernels are part of the library:
 * the ranks need no module.
 *
 * Usage: halo_ring_mpirun [ranks [hostfile callback_host]]
 *   ranks          default 2 (all on this host, --oversubscribe)
 *   hostfile       run the ranks where it says (see README.md); the key
 *                  folder is then $HRM_KEY_DIR, which every host must see
 *   callback_host  this host's address as the ranks reach it
 * STRATA_RANK / MPIRUN override the strata-rank binary and the mpirun
 * built or found with this program. As root, set OMPI_ALLOW_RUN_AS_ROOT=1
 * and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strata/strata.h>

#ifndef HRM_RANK_PATH
#define HRM_RANK_PATH "strata-rank"
#endif
#ifndef HRM_MPIRUN
#define HRM_MPIRUN "mpirun"
#endif

#define NAME "halo_ring_mpirun"
#define MAX_RANKS 64
#define ROWS_PER_RANK 8

static const int chip0[1] = {0};

struct ring {
    strata_halo *halo;
    strata_buffer *x, *out, *grad_out, *grad_x;
};

static int fail(const char *what, strata_err err)
{
    fprintf(stderr, NAME ": FAILED: %s: %s (%s): %s\n", what,
            strata_errname(err), strata_strerror(err), strata_errmsg());
    return 1;
}

static const char *env_or(const char *name, const char *fallback)
{
    const char *v = getenv(name);

    return v && v[0] ? v : fallback;
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

/* Row i lists its sources i-1, i, i+1 (periodic). */
static void ring_csr(int64_t n, int64_t *row_ptr, int64_t *col)
{
    for (int64_t i = 0; i < n; i++) {
        row_ptr[i] = 3 * i;
        col[3 * i] = (i + n - 1) % n;
        col[3 * i + 1] = i;
        col[3 * i + 2] = (i + 1) % n;
    }
    row_ptr[n] = 3 * n;
}

static strata_err make_halo(strata_worker *w, const int *ids, size_t ranks,
                            struct ring *r)
{
    int64_t n = (int64_t)(ranks * ROWS_PER_RANK);
    int64_t *row_ptr = malloc((size_t)(n + 1) * sizeof(int64_t));
    int64_t *col = malloc((size_t)(3 * n) * sizeof(int64_t));
    strata_global_member members[MAX_RANKS];
    strata_csr_view csr = {0};
    strata_halo_spec spec;
    strata_err err;

    if (!row_ptr || !col) {
        free(row_ptr);
        free(col);
        return STRATA_ENOMEM;
    }
    ring_csr(n, row_ptr, col);
    csr.num_rows = (uint64_t)n;
    csr.num_entities = (uint64_t)n;
    csr.row_ptr = row_ptr;
    csr.col_idx = col;
    for (size_t k = 0; k < ranks; k++) {
        members[k].node_worker_id = ids[k];
        members[k].local_chip = 0;
    }
    strata_halo_spec_init(&spec);
    spec.csr = &csr;
    spec.members = members;
    spec.num_members = ranks;
    spec.transport = STRATA_HALO_TRANSPORT_MPI;
    err = strata_halo_create(w, &spec, &r->halo); /* copies the CSR */
    free(row_ptr);
    free(col);
    return err;
}

static strata_err make_fields(strata_worker *w, size_t n, struct ring *r)
{
    strata_buffer **b[4] = {&r->x, &r->out, &r->grad_out, &r->grad_x};
    strata_err err = STRATA_OK;

    for (int i = 0; i < 4 && err == STRATA_OK; i++)
        err = strata_worker_create_buffer(w, n * sizeof(float), b[i]);
    if (err != STRATA_OK)
        return err;
    for (size_t i = 0; i < n; i++) {
        ((float *)strata_buffer_data(r->x))[i] = (float)i;
        ((float *)strata_buffer_data(r->grad_out))[i] = 1.0f;
    }
    return STRATA_OK;
}

static int check(const struct ring *r, size_t n)
{
    const float *out = strata_buffer_data(r->out);
    const float *gx = strata_buffer_data(r->grad_x);
    size_t bad = 0;

    for (size_t i = 0; i < n; i++) {
        float want = (float)((i + n - 1) % n) + (float)i + (float)((i + 1) % n);

        if ((out[i] != want || gx[i] != 3.0f) && bad++ < 5)
            fprintf(stderr, NAME ": row %zu: out %g (want %g), grad %g\n", i,
                    (double)out[i], (double)want, (double)gx[i]);
    }
    if (bad)
        fprintf(stderr, NAME ": FAILED: %zu of %zu rows wrong\n", bad, n);
    return bad != 0;
}

int main(int argc, char **argv)
{
    const char *local_args[1] = {"--oversubscribe"};
    strata_mpi_group_spec g = {0};
    strata_worker_config c4;
    strata_worker *w = NULL;
    struct ring r = {0};
    int ids[MAX_RANKS];
    size_t ranks = argc > 1 ? strtoul(argv[1], NULL, 10) : 2;
    strata_err err;
    int rc = 1;

    if (ranks < 2 || ranks > MAX_RANKS || argc == 3) {
        fprintf(stderr, "usage: %s [ranks [hostfile callback_host]]\n",
                argv[0]);
        return 2;
    }
    g.ranks = ranks;
    g.chip_ids = chip0;
    g.num_chips = 1;
    g.mpirun_path = env_or("MPIRUN", HRM_MPIRUN);
    g.rank_program = env_or("STRATA_RANK", HRM_RANK_PATH);
    if (argc > 3) { /* a real cluster */
        g.hostfile = argv[2];
        g.callback_host = argv[3];
        g.key_dir = getenv("HRM_KEY_DIR");
    } else { /* this host only */
        g.mpirun_args = local_args;
        g.num_mpirun_args = 1;
    }
    strata_worker_config_init(&c4, 4);
    c4.startup_timeout_s = 60;
    err = strata_worker_create(&c4, &w);
    if (err == STRATA_OK)
        err = strata_worker_add_mpirun_worker_group(w, &g, ids, MAX_RANKS);
    if (err == STRATA_OK)
        err = strata_worker_init(w);
    if (err != STRATA_OK) {
        rc = fail("starting the MPI group", err);
        goto out;
    }
    err = make_halo(w, ids, ranks, &r);
    if (err == STRATA_OK)
        err = make_fields(w, ranks * ROWS_PER_RANK, &r);
    if (err == STRATA_OK)
        err = strata_worker_run(w, ring_orch, NULL, &r);
    if (err != STRATA_OK) {
        rc = fail("halo forward and vjp", err);
        goto out;
    }
    rc = check(&r, ranks * ROWS_PER_RANK);
    if (rc == 0)
        printf(NAME ": OK (%zu rows on %zu ranks, forward and vjp over MPI)\n",
               ranks * ROWS_PER_RANK, ranks);
out:
    if (r.halo && (err = strata_halo_destroy(r.halo)) != STRATA_OK)
        rc = fail("halo destroy", err);
    /* Destroy releases the buffers and ends the MPI job. */
    err = strata_worker_destroy(w);
    if (err != STRATA_OK)
        rc = fail("destroy", err);
    return rc;
}
