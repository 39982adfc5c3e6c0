/*
 * halo_paged: the same halo forward twice on 4 sim chips, once from an
 * in-memory CSR and once from a .gfg store that every chip pages itself.
 *
 * The program builds a graph of 1000 rows (each row i takes 1..8 sources
 * from a fixed pseudo-random sequence, some of them far away, so every
 * rank has ghosts from several peers), saves it with strata_gfg_save into
 * a temporary directory, and creates two halo handles over chips 0..3:
 * one with spec.csr, one with spec.gfg_path. For the paged handle the
 * orchestrator derives the halo maps from each rank's rows of the store;
 * each chip's kernel opens the store and reads only its own rows with
 * strata_gfg_read_rows. Both runs compute a neighbour mean of 4 float64
 * features and must agree bit for bit (same rows, same order of
 * additions). The store and the directory are removed at the end.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <strata/strata.h>

#define N 1000
#define F 4
#define CHIPS 4
#define MAX_DEG 8

static const int chip_ids[CHIPS] = {0, 1, 2, 3};

struct paged {
    strata_halo *mem, *paged;
    strata_buffer *x, *out_mem, *out_paged;
};

static int fail(const char *what, strata_err err)
{
    fprintf(stderr, "halo_paged: FAILED: %s: %s (%s): %s\n", what,
            strata_errname(err), strata_strerror(err), strata_errmsg());
    return 1;
}

static uint64_t next(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

static void build_graph(int64_t *row_ptr, int64_t *col_idx)
{
    uint64_t s = 42;
    int64_t at = 0;

    for (int i = 0; i < N; i++) {
        int deg = 1 + (int)(next(&s) % MAX_DEG);

        row_ptr[i] = at;
        for (int k = 0; k < deg; k++) {
            /* Mostly near neighbours, sometimes anywhere. */
            uint64_t far = next(&s) % 4 == 0;
            int64_t j = far ? (int64_t)(next(&s) % N)
                            : (i + N + (int64_t)(next(&s) % 21) - 10) % N;
            col_idx[at++] = j;
        }
    }
    row_ptr[N] = at;
}

static strata_err paged_orch(strata_orch *o, const strata_args *unused,
                             void *user)
{
    struct paged *p = user;
    strata_err err;

    (void)unused;
    err = strata_halo_forward(o, p->mem, p->x, p->out_mem);
    if (err == STRATA_OK)
        err = strata_halo_forward(o, p->paged, p->x, p->out_paged);
    return err;
}

static int compare(const struct paged *p)
{
    const double *a = strata_buffer_data(p->out_mem);
    const double *b = strata_buffer_data(p->out_paged);
    strata_halo_rank_trace t;

    for (uint32_t r = 0; r < CHIPS; r++) {
        if (strata_halo_last_trace(p->paged, r, &t) != STRATA_OK)
            return fail("trace", STRATA_ESTATE);
        printf("halo_paged: rank %u paged rows %llu..%llu: %llu edges, %llu "
               "ghosts, %llu interior + %llu boundary rows\n",
               r, (unsigned long long)t.owned_begin,
               (unsigned long long)t.owned_end - 1, (unsigned long long)t.edges,
               (unsigned long long)t.ghosts,
               (unsigned long long)t.interior_rows,
               (unsigned long long)t.boundary_rows);
    }
    if (memcmp(a, b, sizeof(double) * N * F) != 0) {
        fprintf(stderr, "halo_paged: FAILED: paged result differs from the "
                        "in-memory one\n");
        return 1;
    }
    printf("halo_paged: out[0] = (%g, %g, %g, %g) in both runs\n", a[0], a[1],
           a[2], a[3]);
    return 0;
}

static int make_handles(strata_worker *w, struct paged *p,
                        const strata_csr_view *g, const char *store)
{
    strata_halo_spec spec;
    strata_err err;

    strata_halo_spec_init(&spec);
    spec.chips = chip_ids;
    spec.num_chips = CHIPS;
    spec.features = F;
    spec.dtype = STRATA_F64;
    spec.reducer = STRATA_HALO_MEAN;
    spec.csr = g;
    err = strata_halo_create(w, &spec, &p->mem);
    if (err != STRATA_OK)
        return fail("halo create (memory)", err);
    spec.csr = NULL;
    spec.gfg_path = store;
    err = strata_halo_create(w, &spec, &p->paged);
    if (err != STRATA_OK)
        return fail("halo create (paged)", err);
    return 0;
}

static int run(strata_worker *w, struct paged *p, const char *store)
{
    static int64_t row_ptr[N + 1];
    static int64_t col_idx[N * MAX_DEG];
    const strata_csr_view g = {N, N, row_ptr, col_idx};
    strata_buffer **bufs[3] = {&p->x, &p->out_mem, &p->out_paged};
    strata_err err = STRATA_OK;
    double *x;

    build_graph(row_ptr, col_idx);
    err = strata_gfg_save(store, &g, STRATA_I32);
    if (err != STRATA_OK)
        return fail("gfg save", err);
    printf("halo_paged: saved %d rows, %lld edges to %s\n", N,
           (long long)row_ptr[N], store);
    for (int b = 0; b < 3 && err == STRATA_OK; b++)
        err = strata_worker_create_buffer(w, N * F * sizeof(double), bufs[b]);
    if (err != STRATA_OK)
        return fail("create buffer", err);
    x = strata_buffer_data(p->x);
    for (int i = 0; i < N * F; i++)
        x[i] = (double)(i % 97) * 0.5 - 7.0;
    err = strata_worker_init(w);
    if (err != STRATA_OK)
        return fail("worker init", err);
    if (make_handles(w, p, &g, store) != 0)
        return 1;
    err = strata_worker_run(w, paged_orch, NULL, p);
    if (err != STRATA_OK)
        return fail("run", err);
    return compare(p);
}

static void remove_store(const char *dir, const char *store)
{
    const char *files[3] = {"manifest.json", "row_ptr.bin", "col_idx.bin"};
    char path[512];

    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "%s/%s", store, files[i]);
        unlink(path);
    }
    rmdir(store);
    rmdir(dir);
}

int main(void)
{
    char dir[] = "/tmp/halo_paged.XXXXXX";
    char store[64];
    strata_worker_config cfg;
    strata_worker *w = NULL;
    struct paged p = {0};
    strata_err err;
    int rc;

    if (!mkdtemp(dir)) {
        perror("halo_paged: FAILED: mkdtemp");
        return EXIT_FAILURE;
    }
    snprintf(store, sizeof(store), "%s/graph.gfg", dir);
    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = chip_ids;
    cfg.num_chips = CHIPS;
    err = strata_worker_create(&cfg, &w);
    if (err != STRATA_OK) {
        remove_store(dir, store);
        return fail("worker create", err);
    }
    rc = run(w, &p, store);
    if (strata_halo_destroy(p.mem) != STRATA_OK ||
        strata_halo_destroy(p.paged) != STRATA_OK)
        rc = fail("halo destroy", STRATA_ESTATE);
    err = strata_worker_destroy(w);
    if (err != STRATA_OK)
        rc = fail("worker destroy", err);
    remove_store(dir, store);
    if (rc != 0)
        return EXIT_FAILURE;
    printf("halo_paged: OK (paged == in-memory on %d chips)\n", CHIPS);
    return EXIT_SUCCESS;
}
