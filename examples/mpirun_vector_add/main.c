/*
 * mpirun_vector_add: one L4 worker whose L3 nodes are the ranks of an
 * Open MPI job it launches itself (strata_worker_add_mpirun_worker_group),
 * two sim chips each, one vector add split across them.
 *
 * At init the L4 runs mpirun, every rank (strata-rank) loads this
 * example's module, dials back over TLS 1.3 with a one-time key, and forks
 * its chips. The L4 orch fn gives each rank an equal share of c = a + b;
 * each rank's orch callable ("vadd.node", from the module) splits its
 * share over its chips. Inputs travel to the ranks with their tasks and
 * the shares of c come back into the same buffer; every element is checked
 * against a host reference. Destroy ends the MPI job.
 *
 * Usage: mpirun_vector_add [elements [ranks [hostfile callback_host]]]
 *   elements       default 1048576
 *   ranks          default 2 (all on this host, --oversubscribe)
 *   hostfile       run the ranks where it says (see README.md); the key
 *                  folder is then $MVA_KEY_DIR, which every host must see
 *   callback_host  this host's address as the ranks reach it
 * STRATA_RANK / MVA_MODULE / MPIRUN override the strata-rank binary, the
 * module and the mpirun built or found with this program. As root, set
 * OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strata/strata.h>

#include "kernels.h"

#ifndef MVA_RANK_PATH
#define MVA_RANK_PATH "strata-rank"
#endif
#ifndef MVA_MODULE_PATH
#define MVA_MODULE_PATH "libmpirun_vector_add_kernels.so"
#endif
#ifndef MVA_MPIRUN
#define MVA_MPIRUN "mpirun"
#endif

#define NAME "mpirun_vector_add"
#define MAX_RANKS 64
#define CHIPS 2 /* per rank */
#define START_DEADLINE_S 60

static const int chip_ids[CHIPS] = {0, 1};

struct job {
    size_t n;
    size_t ranks;
    const int *ids;            /* node id of each rank */
    strata_callable node_orch; /* "vadd.node", by name */
    strata_buffer *a, *b, *c, *who;
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

static strata_err add_slice(strata_args *a, strata_buffer *buf, size_t first,
                            size_t count, strata_tag tag)
{
    const size_t shape[1] = {count};

    return strata_args_add_tensor(a, buf, first * sizeof(float), STRATA_F32, 1,
                                  shape, tag);
}

/* The L4 orchestration: an equal share of the vector to each rank. */
static strata_err l4_orch(strata_orch *o, const strata_args *unused, void *user)
{
    const struct job *j = user;
    const size_t who_shape[1] = {CHIPS * sizeof(struct vadd_who)};
    strata_args *a = NULL;
    strata_err err;

    (void)unused;
    err = strata_args_create(&a);
    for (size_t r = 0; r < j->ranks && err == STRATA_OK; r++) {
        size_t first = j->n * r / j->ranks;
        size_t count = j->n * (r + 1) / j->ranks - first;

        strata_args_clear(a);
        err = add_slice(a, j->a, first, count, STRATA_IN);
        if (err == STRATA_OK)
            err = add_slice(a, j->b, first, count, STRATA_IN);
        if (err == STRATA_OK)
            err = add_slice(a, j->c, first, count, STRATA_OUT);
        if (err == STRATA_OK)
            err = strata_args_add_tensor(a, j->who, r * who_shape[0], STRATA_U8,
                                         1, who_shape, STRATA_NO_DEP);
        if (err == STRATA_OK)
            err = strata_orch_submit_next_level(o, j->node_orch, a, j->ids[r]);
    }
    strata_args_destroy(a);
    return err;
}

static void fill_inputs(const struct job *j)
{
    float *a = strata_buffer_data(j->a);
    float *b = strata_buffer_data(j->b);
    float *c = strata_buffer_data(j->c);

    /* Small integers: every sum is exact in float32. */
    for (size_t i = 0; i < j->n; i++) {
        a[i] = (float)(i % 4096);
        b[i] = (float)((i / 4096) % 4096);
        c[i] = -1.0f;
    }
}

static int check(const struct job *j)
{
    const float *a = strata_buffer_data(j->a);
    const float *b = strata_buffer_data(j->b);
    const float *c = strata_buffer_data(j->c);
    const struct vadd_who *who = strata_buffer_data(j->who);
    size_t bad = 0;

    for (size_t i = 0; i < j->n; i++)
        if (c[i] != a[i] + b[i] && bad++ < 5)
            fprintf(stderr, NAME ": c[%zu] = %g, expected %g\n", i,
                    (double)c[i], (double)(a[i] + b[i]));
    if (bad != 0) {
        fprintf(stderr, NAME ": FAILED: %zu of %zu elements wrong\n", bad,
                j->n);
        return 1;
    }
    printf("  rank  chip  pid      elements\n");
    for (size_t r = 0; r < j->ranks; r++)
        for (int chip = 0; chip < CHIPS; chip++) {
            const struct vadd_who *w = &who[r * CHIPS + (size_t)chip];

            printf("  %4zu  %4lld  %-7lld  %8lld\n", r, (long long)w->chip,
                   (long long)w->pid, (long long)w->elements);
        }
    return 0;
}

static strata_err make_buffers(strata_worker *w, struct job *j)
{
    strata_err err =
        strata_worker_create_buffer(w, j->n * sizeof(float), &j->a);

    if (err == STRATA_OK)
        err = strata_worker_create_buffer(w, j->n * sizeof(float), &j->b);
    if (err == STRATA_OK)
        err = strata_worker_create_buffer(w, j->n * sizeof(float), &j->c);
    if (err == STRATA_OK)
        err = strata_worker_create_buffer(
            w, j->ranks * CHIPS * sizeof(struct vadd_who), &j->who);
    return err;
}

int main(int argc, char **argv)
{
    const char *modules[1] = {env_or("MVA_MODULE", MVA_MODULE_PATH)};
    const char *local_args[1] = {"--oversubscribe"};
    strata_mpi_group_spec g = {0};
    strata_worker_config c4;
    strata_worker *w = NULL;
    int ids[MAX_RANKS];
    struct job j = {.n = argc > 1 ? strtoul(argv[1], NULL, 10) : 1u << 20,
                    .ranks = argc > 2 ? strtoul(argv[2], NULL, 10) : 2,
                    .ids = ids};
    strata_err err;
    int rc = 1;

    if (j.n == 0 || j.ranks == 0 || j.ranks > MAX_RANKS || argc == 4) {
        fprintf(stderr,
                "usage: %s [elements [ranks [hostfile callback_host]]]\n",
                argv[0]);
        return 2;
    }
    g.ranks = j.ranks;
    g.chip_ids = chip_ids;
    g.num_chips = CHIPS;
    g.mpirun_path = env_or("MPIRUN", MVA_MPIRUN);
    g.rank_program = env_or("STRATA_RANK", MVA_RANK_PATH);
    g.modules = modules;
    g.num_modules = 1;
    if (argc > 4) { /* a real cluster */
        g.hostfile = argv[3];
        g.callback_host = argv[4];
        g.key_dir = getenv("MVA_KEY_DIR");
    } else { /* this host only, however many cores it has */
        g.mpirun_args = local_args;
        g.num_mpirun_args = 1;
    }
    strata_worker_config_init(&c4, 4);
    c4.startup_timeout_s = START_DEADLINE_S;
    err = strata_module_init();
    if (err == STRATA_OK)
        err = strata_callable_by_name(STRATA_CALLABLE_ORCH, VADD_NODE_ORCH,
                                      &j.node_orch);
    if (err == STRATA_OK)
        err = strata_worker_create(&c4, &w);
    if (err == STRATA_OK)
        err = strata_worker_add_mpirun_worker_group(w, &g, ids, MAX_RANKS);
    if (err == STRATA_OK)
        err = strata_worker_init(w);
    if (err != STRATA_OK) {
        rc = fail("starting the MPI group", err);
        goto out;
    }
    err = make_buffers(w, &j);
    if (err != STRATA_OK) {
        rc = fail("buffers", err);
        goto out;
    }
    fill_inputs(&j);
    err = strata_worker_run(w, l4_orch, NULL, &j);
    if (err != STRATA_OK) {
        rc = fail("run", err);
        goto out;
    }
    rc = check(&j);
    if (rc == 0)
        printf(NAME ": OK (%zu elements checked on %zu ranks)\n", j.n, j.ranks);
out:
    /* Destroy releases the buffers, says GOODBYE to the ranks and ends
     * the MPI job. */
    err = strata_worker_destroy(w);
    if (err != STRATA_OK)
        rc = fail("destroy", err);
    return rc;
}
