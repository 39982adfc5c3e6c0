/*
 * domain_rank_map: two overlapping communication domains on four sim
 * chips, and what every member sees.
 *
 *   domain "trio": workers {0, 1, 2}   buffers "x" float32[256], "count" u32
 *   domain "pair": workers {3, 1}      buffers "msg" u8[100], "seq" u64[2]
 *
 * Chip 1 is in both (rank 1 of each), chip 3 is rank 0 of "pair" only.
 * The program prints every member's context as the orchestrator sees it
 * (strata_domain_context: rank, size, window, buffers with offsets), then
 * runs one kernel per (domain, member) that reports the same facts from
 * inside the chip (strata_chip_comm_context), and checks both views agree.
 * Asking for the context of a chip that is not a member is STRATA_ENOENT;
 * after release it is STRATA_ESTATE.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <strata/strata.h>

#define NUM_CHIPS 4
#define NUM_DOMAINS 2
#define MAX_MEMBERS 3

static const int chip_ids[NUM_CHIPS] = {0, 1, 2, 3};

struct dom_desc {
    const char *name;
    int workers[MAX_MEMBERS];
    size_t num_workers;
    strata_comm_buffer_spec buffers[2];
};

static const struct dom_desc domains[NUM_DOMAINS] = {
    {"trio",
     {0, 1, 2},
     3,
     {{"x", STRATA_F32, 256, 256 * 4}, {"count", STRATA_U32, 1, 4}}},
    {"pair",
     {3, 1},
     2,
     {{"msg", STRATA_U8, 100, 100}, {"seq", STRATA_U64, 2, 16}}},
};

/* What a kernel reports from inside its chip. */
struct seen {
    int32_t chip;
    uint32_t rank;
    uint32_t rank_count;
    uint32_t found;
    uint64_t window_size;
    uint64_t own_window; /* window_base[rank], as mapped in the chip */
};

struct rank_map {
    strata_buffer *seen; /* struct seen[NUM_DOMAINS][MAX_MEMBERS] */
    strata_callable whoami;
    strata_domain *d[NUM_DOMAINS];
    strata_chip_domain_ctx ctx[NUM_DOMAINS][MAX_MEMBERS];
    int errors;
};

static int fail(const char *what, strata_err err)
{
    fprintf(stderr, "domain_rank_map: FAILED: %s: %s (%s): %s\n", what,
            strata_errname(err), strata_strerror(err), strata_errmsg());
    return 1;
}

/* Tensor: struct seen (OUT, as bytes); scalar: device_ctx. */
static strata_err whoami_kernel(strata_chip *chip, const strata_args *args)
{
    struct seen *s = strata_args_tensor_data(args, 0);
    const strata_comm_context *cc =
        strata_chip_comm_context(chip, strata_args_scalar(args, 0));

    s->chip = strata_chip_id(chip);
    s->found = cc != NULL;
    if (cc != NULL) {
        s->rank = cc->rank;
        s->rank_count = cc->rank_count;
        s->window_size = cc->window_size;
        s->own_window = (uint64_t)(uintptr_t)cc->window_base[cc->rank];
    }
    return STRATA_OK;
}

static void print_context(const strata_chip_domain_ctx *c, int chip)
{
    printf("domain_rank_map:   chip %d: rank %u of %u, device_ctx %#llx, "
           "window %zu bytes at %#llx\n",
           chip, c->domain_rank, c->domain_size,
           (unsigned long long)c->device_ctx, c->actual_window_size,
           (unsigned long long)c->local_window_base);
    for (size_t b = 0; b < c->num_buffers; b++)
        printf("domain_rank_map:     buffer %-5s offset %4zu, %3zu bytes "
               "(%zu x %zu-byte elements)\n",
               c->buffers[b].name, c->buffers[b].offset, c->buffers[b].nbytes,
               c->buffers[b].count, strata_dtype_size(c->buffers[b].dtype));
}

static strata_err rank_map_orch(strata_orch *o, const strata_args *unused,
                                void *user)
{
    struct rank_map *m = user;
    const size_t shape[1] = {sizeof(struct seen)};
    strata_chip_domain_ctx c;
    strata_err err;

    (void)unused;
    for (size_t d = 0; d < NUM_DOMAINS; d++) {
        const struct dom_desc *dd = &domains[d];
        const strata_domain_spec spec = {
            .name = dd->name,
            .workers = dd->workers,
            .num_workers = dd->num_workers,
            .window_size = 4096,
            .buffers = dd->buffers,
            .num_buffers = 2,
        };
        err = strata_orch_allocate_domain(o, &spec, &m->d[d]);
        if (err != STRATA_OK)
            return err;
        printf("domain_rank_map: domain \"%s\", workers {", dd->name);
        for (size_t r = 0; r < dd->num_workers; r++)
            printf("%s%d", r ? ", " : "", dd->workers[r]);
        printf("}\n");
        for (size_t r = 0; r < dd->num_workers; r++) {
            err = strata_domain_context(m->d[d], dd->workers[r], &m->ctx[d][r]);
            if (err != STRATA_OK)
                return err;
            print_context(&m->ctx[d][r], dd->workers[r]);
        }
    }

    /* Chips outside a domain have no context in it. */
    for (size_t d = 0; d < NUM_DOMAINS; d++) {
        for (size_t i = 0; i < NUM_CHIPS; i++) {
            int chip = chip_ids[i];
            bool member = false;
            for (size_t r = 0; r < domains[d].num_workers; r++)
                member = member || domains[d].workers[r] == chip;
            if (member)
                continue;
            err = strata_domain_context(m->d[d], chip, &c);
            printf("domain_rank_map: context of chip %d in \"%s\": %s (%s)\n",
                   chip, domains[d].name, strata_errname(err), strata_errmsg());
            if (err != STRATA_ENOENT)
                m->errors++;
        }
    }

    /* One kernel per (domain, member), each reporting what it sees. The
     * kernels do not wait on each other, so they are ordinary tasks. */
    for (size_t d = 0; d < NUM_DOMAINS; d++) {
        for (size_t r = 0; r < domains[d].num_workers; r++) {
            strata_args *a = NULL;
            err = strata_args_create(&a);
            if (err != STRATA_OK)
                return err;
            err = strata_args_add_tensor(
                a, m->seen, (d * MAX_MEMBERS + r) * sizeof(struct seen),
                STRATA_U8, 1, shape, STRATA_OUT);
            if (err == STRATA_OK)
                err = strata_args_add_scalar(a, m->ctx[d][r].device_ctx);
            if (err == STRATA_OK)
                err = strata_orch_submit_next_level(o, m->whoami, a,
                                                    domains[d].workers[r]);
            strata_args_destroy(a);
            if (err != STRATA_OK)
                return err;
        }
    }

    err = strata_domain_release(m->d[0]);
    if (err != STRATA_OK)
        return err;
    err = strata_domain_context(m->d[0], 0, &c);
    printf("domain_rank_map: context of chip 0 in \"trio\" after release: "
           "%s (%s)\n",
           strata_errname(err), strata_errmsg());
    if (err != STRATA_ESTATE)
        m->errors++;
    /* "pair" is not released: the run's fence frees it. */
    return STRATA_OK;
}

static int check(struct rank_map *m)
{
    const struct seen *seen = strata_buffer_data(m->seen);

    for (size_t d = 0; d < NUM_DOMAINS; d++) {
        for (size_t r = 0; r < domains[d].num_workers; r++) {
            const struct seen *s = &seen[d * MAX_MEMBERS + r];
            const strata_chip_domain_ctx *c = &m->ctx[d][r];
            bool ok = s->found && s->chip == domains[d].workers[r] &&
                      s->rank == r && c->domain_rank == r &&
                      s->rank_count == domains[d].num_workers &&
                      s->window_size == c->actual_window_size &&
                      s->own_window == c->local_window_base;
            printf("domain_rank_map: in \"%s\", chip %d's kernel sees rank "
                   "%u of %u, own window at %#llx: %s\n",
                   domains[d].name, (int)s->chip, s->rank, s->rank_count,
                   (unsigned long long)s->own_window,
                   ok ? "matches" : "MISMATCH");
            if (!ok)
                m->errors++;
        }
    }
    for (size_t d = 0; d < NUM_DOMAINS; d++) {
        if (!strata_domain_freed(m->d[d])) {
            fprintf(stderr, "domain_rank_map: \"%s\" not freed\n",
                    domains[d].name);
            m->errors++;
        }
    }
    if (m->errors != 0) {
        fprintf(stderr, "domain_rank_map: FAILED: %d wrong answers\n",
                m->errors);
        return 1;
    }
    return 0;
}

static int run(strata_worker *w, struct rank_map *m)
{
    strata_err err;

    err = strata_register_kernel("domain_rank_map.whoami", whoami_kernel,
                                 &m->whoami);
    if (err != STRATA_OK)
        return fail("register kernel", err);
    err = strata_worker_create_buffer(
        w, NUM_DOMAINS * MAX_MEMBERS * sizeof(struct seen), &m->seen);
    if (err != STRATA_OK)
        return fail("create buffer", err);
    err = strata_worker_init(w);
    if (err != STRATA_OK)
        return fail("worker init", err);
    err = strata_worker_run(w, rank_map_orch, NULL, m);
    if (err != STRATA_OK)
        return fail("run", err);
    return check(m);
}

int main(void)
{
    strata_worker_config cfg;
    strata_worker *w = NULL;
    struct rank_map m = {0};
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
    printf("domain_rank_map: OK (2 overlapping domains, 5 member contexts "
           "checked from both sides)\n");
    return EXIT_SUCCESS;
}
