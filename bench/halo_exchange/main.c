/*
 * bench_halo_exchange: throughput of a halo exchange through a local
 * communication domain's windows, against MPI_Neighbor_alltoallv on as
 * many ranks with the same neighbours and sizes, in the same run.
 *
 * Why not strata_halo_forward itself: every forward call allocates a fresh
 * domain (zeroed windows), dispatches a group and computes rows, so its
 * time is not the exchange's. This bench runs the exchange the halo layer
 * runs, purpose-built: one kernel per rank, submitted as a group, moving
 * blocks through the windows with strata_signal_add / strata_signal_wait,
 * back to back in one domain.
 *
 * Patterns (B bytes per neighbour and block):
 * - ring: rank r sends one block to r-1 and one to r+1 (mod W), receives
 *   one from each (on 2 ranks both neighbours are the other rank, two
 *   blocks each way);
 * - half: the half-ring permutation, r sends one block to r+W/2 (mod W)
 *   and receives one from r-W/2: every source remote.
 *
  * One exchange, on every side, is the whole halo step with fresh data:
 * pack (copy each block from the rank's source field), move, and the
 * receiver reads every received byte once (a 64-bit sum, checked against
 * the sender's fill value, so every exchange is verified). Without the
 * read, data a sender wrote into a peer's window would never leave the
 * sender's cache and the numbers would be cache copies; without the pack,
 * MPI would resend an unchanged buffer. Two strata modes:
 * - push: the sender copies its block from its source straight into the
 *   receiver's window slot and signals; the receiver reads its own
 *   window.
 * - halo (what strata_halo_forward does): the sender copies its block into
 *   its own window and signals; the receiver reads it in place from the
 *   sender's window.
 * A sender writes a slot again only after every receiver signalled that it
 * consumed the previous block (a second counter), so one iteration is one
 * complete exchange, as one MPI_Neighbor_alltoallv call is. MPI, same
 * work: copy the blocks from a source buffer into the send buffer,
 * MPI_Neighbor_alltoallv, sum the receive buffer. The helper also times
 * the bare call (unchanged send buffer, nothing read), reported beside.

 *
 * Timing, both sides alike: warm-up iterations, then per repetition a
 * barrier and `iters` exchanges back to back on every rank; the slowest
 * rank's mean per exchange counts; median over repetitions, and (full
 * mode) median over rounds. GB/s = bytes a rank sends per exchange
 * (blocks x B) / time per exchange. ratio = MPI time / strata time.
 *
 * The MPI side: bench_halo_exchange_mpi (mpi_helper.c) under
 * `mpirun --oversubscribe -np W`, read over a pipe, run after the strata
 * side (never at the same time: two cores).
 *
 * Placement, both sides alike: not bound (MPI --bind-to none). With
 * STRATA_PIN=1 in the environment, strata binds a worker's chips one per
 * core where they fit (2 ranks) and the MPI ranks are bound the same way
 * (--bind-to core --map-by core); 4 ranks stay unbound on both sides.
 *
 * The last stdout line is one JSON object (see bench/CMakeLists.txt).
 * Usage: bench_halo_exchange [--quick] [--rounds K]
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <strata/strata.h>

#include "bench_common.h"
#include "machine_load.h"
#include "mpi_launch.h"
#include "stats.h"

#define NUM_N 2
#define NUM_SIZES 8
#define NUM_PAT 2
#define NUM_MODE 2
#define MAX_CHIPS 4
#define MAX_BLOCKS 2
#define MAX_REPS 16
#define MAX_ROUNDS 9
#define DATA_OFF 4096 /* signal words live below */
#define WAIT_S 60.0
#define MPI_TIMEOUT_S 240.0
#define HEAD_N 0    /* 2 ranks */
#define HEAD_P 0    /* ring */
#define HEAD_S 5    /* 1 MiB */
#define BIG_S 5     /* sizes from here on (>= 1 MiB) need 1.5x */
#define HEAD_MODE 1 /* halo */
#define TARGET_ALL 1.0
#define TARGET_BIG 1.5

static const int chip_counts[NUM_N] = {2, 4};
static const size_t sizes[NUM_SIZES] = {
    (size_t)1 << 10,   (size_t)4 << 10, (size_t)16 << 10, (size_t)64 << 10,
    (size_t)256 << 10, (size_t)1 << 20, (size_t)4 << 20,  (size_t)16 << 20};
static const char *const pat_names[NUM_PAT] = {"ring", "half"};
static const char *const mode_names[NUM_MODE] = {"push", "halo"};

enum { ARRIVED = 0, CONSUMED = 1, BARRIER = 2 };

struct options {
    bool quick;
    int rounds, reps, min_iters, max_iters;
    size_t budget; /* bytes per rank per repetition: sets iters */
};

struct point {
    int iters;
    double us[NUM_MODE]; /* strata, per exchange, slowest rank, median */
    double mpi_us;       /* < 0: none; same work */
    double mpi_bare_us;  /* the call alone */
};

struct results {
    struct point p[NUM_N][NUM_PAT][NUM_SIZES];
    bool mpi_ok[NUM_N];
    double other_cpu_pct;
    char mpi_note[512];
};

struct job {
    const int *workers;
    size_t n, bytes;
    int pattern, mode, iters, reps;
    strata_callable kernel;
    strata_buffer *send, *times;
    size_t stride; /* bytes between ranks' regions in send / recv */
};

static void report(const char *what, strata_err err)
{
    fprintf(stderr, "bench_halo_exchange: %s: %s (%s): %s\n", what,
            strata_errname(err), strata_strerror(err), strata_errmsg());
}

static double now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* The neighbours of rank r: blocks sent (to[k]) and received (from[j]),
 * and which send block of from[j] arrives as my block j. */
struct nbrs {
    uint32_t nsend, nrecv;
    uint32_t to[MAX_BLOCKS], from[MAX_BLOCKS], their_block[MAX_BLOCKS];
    uint32_t my_slot_at_peer[MAX_BLOCKS]; /* push: slot of block k at to[k] */
};

static void neighbours(int pattern, uint32_t r, uint32_t w, struct nbrs *nb)
{
    if (pattern == 0) { /* ring: block 0 to the left, 1 to the right */
        nb->nsend = nb->nrecv = 2;
        nb->to[0] = nb->from[0] = (r + w - 1) % w;
        nb->to[1] = nb->from[1] = (r + 1) % w;
        /* The left neighbour's block to its right is my block 0. */
        nb->their_block[0] = 1;
        nb->their_block[1] = 0;
        nb->my_slot_at_peer[0] = 1; /* I am my left neighbour's right */
        nb->my_slot_at_peer[1] = 0;
    } else { /* half-ring permutation */
        nb->nsend = nb->nrecv = 1;
        nb->to[0] = (r + w / 2) % w;
        nb->from[0] = (r + w - w / 2) % w;
        nb->their_block[0] = 0;
        nb->my_slot_at_peer[0] = 0;
    }
}

static uint64_t fill_value(uint32_t rank, uint32_t block)
{
    return 0x100000001ull * (0x1000u + rank * 16u + block);
}

/* The receiver's read of a block: a wrapping sum of its 64-bit words. */
static uint64_t sum_block(const void *p, size_t bytes)
{
    const uint64_t *restrict v = p;
    uint64_t a = 0, b = 0, c = 0, d = 0;
    size_t n = bytes / sizeof(uint64_t), i = 0;

    for (; i + 4 <= n; i += 4) {
        a += v[i];
        b += v[i + 1];
        c += v[i + 2];
        d += v[i + 3];
    }
    for (; i < n; i++)
        a += v[i];
    return a + b + c + d;
}

static volatile uint32_t *ctrl(const strata_comm_context *cc, uint32_t r,
                               int which)
{
    return (volatile uint32_t *)((char *)cc->window_base[r] + which * 64);
}

static char *slot(const strata_comm_context *cc, uint32_t r, uint32_t s,
                  size_t bytes)
{
    return (char *)cc->window_base[r] + DATA_OFF + s * bytes;
}

/* One exchange, generation g (1-based). */
static strata_err exchange(const strata_comm_context *cc, const struct nbrs *nb,
                           int mode, const char *src, size_t bytes, uint32_t g)
{
    uint32_t me = cc->rank;
    strata_err err;

    /* Every receiver consumed my blocks of generation g - 1. */
    err =
        strata_signal_wait(ctrl(cc, me, CONSUMED), (g - 1) * nb->nsend, WAIT_S);
    if (err != STRATA_OK)
        return err;
    for (uint32_t k = 0; k < nb->nsend; k++) {
        char *dst = mode == 0
                        ? slot(cc, nb->to[k], nb->my_slot_at_peer[k], bytes)
                        : slot(cc, me, k, bytes);

        memcpy(dst, src + k * bytes, bytes);
        strata_signal_add(ctrl(cc, nb->to[k], ARRIVED), 1);
    }
    /* A sender sends g + 1 only after I consumed g, so g * nrecv
     * arrivals mean every block of generation g is in place. */
    err = strata_signal_wait(ctrl(cc, me, ARRIVED), g * nb->nrecv, WAIT_S);
    if (err != STRATA_OK)
        return err;
    for (uint32_t j = 0; j < nb->nrecv; j++) {
        const char *in = mode == 0
                             ? slot(cc, me, j, bytes)
                             : slot(cc, nb->from[j], nb->their_block[j], bytes);
        uint64_t want = fill_value(nb->from[j], nb->their_block[j]) *
                        (uint64_t)(bytes / sizeof(uint64_t));

        if (sum_block(in, bytes) != want) {
            strata_errmsg_set("halo exchange: wrong data received");
            return STRATA_EINVAL;
        }
        strata_signal_add(ctrl(cc, nb->from[j], CONSUMED), 1);
    }
    return STRATA_OK;
}

static strata_err barrier(const strata_comm_context *cc, uint32_t b)
{
    for (uint32_t p = 0; p < cc->rank_count; p++)
        if (p != cc->rank)
            strata_signal_add(ctrl(cc, p, BARRIER), 1);
    return strata_signal_wait(ctrl(cc, cc->rank, BARRIER),
                              b * (cc->rank_count - 1), WAIT_S);
}

/* args: tensors src (IN), times (OUT, reps doubles); scalars
 * device_ctx, pattern, mode, iters, reps. */
static strata_err exchange_kernel(strata_chip *chip, const strata_args *args)
{
    const strata_comm_context *cc =
        strata_chip_comm_context(chip, strata_args_scalar(args, 0));
    const char *src = strata_args_tensor_data(args, 0);
    double *times = strata_args_tensor_data(args, 1);
    size_t bytes = strata_args_tensor_nbytes(args, 0) / MAX_BLOCKS;
    int pattern = (int)strata_args_scalar(args, 1);
    int mode = (int)strata_args_scalar(args, 2);
    uint32_t iters = (uint32_t)strata_args_scalar(args, 3);
    uint32_t reps = (uint32_t)strata_args_scalar(args, 4);
    uint32_t warm = 2 + iters / 10, g = 0;
    struct nbrs nb;
    strata_err err;

    if (cc == NULL || cc->rank_count < 2) {
        strata_errmsg_set("halo exchange: no domain context of 2+ ranks");
        return STRATA_ENOENT;
    }
    neighbours(pattern, cc->rank, cc->rank_count, &nb);
    err = barrier(cc, 1);
    for (uint32_t i = 0; i < warm && err == STRATA_OK; i++)
        err = exchange(cc, &nb, mode, src, bytes, ++g);
    for (uint32_t r = 0; r < reps && err == STRATA_OK; r++) {
        double t0;

        err = barrier(cc, r + 2);
        t0 = now_us();
        for (uint32_t i = 0; i < iters && err == STRATA_OK; i++)
            err = exchange(cc, &nb, mode, src, bytes, ++g);
        times[r] = (now_us() - t0) / iters;
    }
    return err;
}

static strata_err bench_orch(strata_orch *o, const strata_args *unused,
                             void *user)
{
    struct job *j = user;
    strata_domain_spec spec = {"halo_exchange",
                               j->workers,
                               j->n,
                               DATA_OFF + MAX_BLOCKS * j->bytes,
                               NULL,
                               0};
    strata_args *a[MAX_CHIPS] = {0};
    strata_domain *d = NULL;
    strata_err err, end;

    (void)unused;
    err = strata_orch_allocate_domain(o, &spec, &d);
    for (size_t r = 0; r < j->n && err == STRATA_OK; r++) {
        size_t count = MAX_BLOCKS * j->bytes, nt = (size_t)j->reps;
        strata_chip_domain_ctx ctx;

        err = strata_domain_context(d, j->workers[r], &ctx);
        if (err == STRATA_OK)
            err = strata_args_create(&a[r]);
        if (err == STRATA_OK)
            err = strata_args_add_tensor(a[r], j->send, r * j->stride,
                                         STRATA_U8, 1, &count, STRATA_IN);

        if (err == STRATA_OK)
            err = strata_args_add_tensor(a[r], j->times,
                                         r * MAX_REPS * sizeof(double),
                                         STRATA_F64, 1, &nt, STRATA_OUT);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(a[r], ctx.device_ctx);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(a[r], (uint64_t)j->pattern);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(a[r], (uint64_t)j->mode);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(a[r], (uint64_t)j->iters);
        if (err == STRATA_OK)
            err = strata_args_add_scalar(a[r], (uint64_t)j->reps);
    }
    if (err == STRATA_OK) {
        err = strata_orch_scope_begin(o);
        if (err == STRATA_OK) {
            err = strata_orch_submit_next_level_group(
                o, j->kernel, (const strata_args *const *)a, j->workers, j->n);
            end = strata_orch_scope_end(o);
            err = err ? err : end;
        }
    }
    for (size_t r = 0; r < j->n; r++)
        strata_args_destroy(a[r]);
    if (d != NULL) {
        end = strata_domain_release(d);
        err = err ? err : end;
    }
    return err;
}

/* Slowest rank per repetition, median over repetitions. */
static double job_us(const struct job *j)
{
    const double *t = strata_buffer_data(j->times);
    double worst[MAX_REPS];

    for (int r = 0; r < j->reps; r++) {
        worst[r] = 0;
        for (size_t k = 0; k < j->n; k++)
            if (t[k * MAX_REPS + r] > worst[r])
                worst[r] = t[k * MAX_REPS + r];
    }
    return stats_median(worst, (size_t)j->reps);
}

static int iters_for(const struct options *opt, size_t bytes)
{
    size_t it = opt->budget / bytes;

    if (it < (size_t)opt->min_iters)
        it = (size_t)opt->min_iters;
    if (it > (size_t)opt->max_iters)
        it = (size_t)opt->max_iters;
    return (int)it;
}

static int bench_strata(int ni, strata_callable kernel,
                        const struct options *opt, struct results *res)
{
    int n = chip_counts[ni], ids[MAX_CHIPS];
    size_t stride = MAX_BLOCKS * sizes[NUM_SIZES - 1];
    strata_worker_config cfg;
    strata_worker *w = NULL;
    struct job j = {0};
    strata_err err;
    int rc = 1;

    for (int i = 0; i < n; i++)
        ids[i] = i;
    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = ids;
    cfg.num_chips = (size_t)n;
    err = strata_worker_create(&cfg, &w);
    if (err == STRATA_OK)
        err = strata_worker_init(w);
    if (err == STRATA_OK)
        err = strata_worker_create_buffer(w, (size_t)n * stride, &j.send);

    if (err == STRATA_OK)
        err = strata_worker_create_buffer(
            w, (size_t)n * MAX_REPS * sizeof(double), &j.times);
    if (err != STRATA_OK) {
        report("worker setup", err);
        goto out;
    }
    /* Every point refills the ranks' B-byte source blocks below. */

    j.workers = ids;
    j.n = (size_t)n;
    j.kernel = kernel;
    j.stride = stride;
    j.reps = opt->reps;
    for (int p = 0; p < NUM_PAT; p++)
        for (int s = 0; s < NUM_SIZES; s++) {
            struct point *pt = &res->p[ni][p][s];

            j.bytes = sizes[s];
            j.pattern = p;
            j.iters = iters_for(opt, sizes[s]);
            pt->iters = j.iters;
            for (int r = 0; r < n; r++)
                for (uint32_t k = 0; k < MAX_BLOCKS; k++) {
                    uint64_t *v =
                        (uint64_t *)((char *)strata_buffer_data(j.send) +
                                     r * stride + k * sizes[s]);

                    for (size_t i = 0; i < sizes[s] / sizeof(uint64_t); i++)
                        v[i] = fill_value((uint32_t)r, k);
                }
            for (int m = 0; m < NUM_MODE; m++) {
                j.mode = m;
                err = strata_worker_run(w, bench_orch, NULL, &j);
                if (err != STRATA_OK) {
                    report("exchange run", err);
                    goto out;
                }
                pt->us[m] = job_us(&j);
            }
        }
    rc = 0;
out:
    err = strata_worker_destroy(w);
    if (err != STRATA_OK) {
        report("worker destroy", err);
        rc = 1;
    }
    return rc;
}

struct mpi_parse {
    struct point (*rows)[NUM_SIZES];
    int np;
};

static int on_mpi_line(const char *line, void *user)
{
    struct mpi_parse *mp = user;
    char pat[16];
    size_t bytes;
    int np, iters, reps, ok;
    double us, bare_us;

    if (sscanf(line,
               "MPIHX pattern=%15s bytes=%zu np=%d iters=%d reps=%d us=%lf "
               "bare_us=%lf ok=%d",
               pat, &bytes, &np, &iters, &reps, &us, &bare_us, &ok) != 8 ||
        np != mp->np || ok != 1)
        return -1;
    for (int p = 0; p < NUM_PAT; p++)
        for (int s = 0; s < NUM_SIZES; s++)
            if (strcmp(pat, pat_names[p]) == 0 && sizes[s] == bytes) {
                mp->rows[p][s].mpi_us = us;
                mp->rows[p][s].mpi_bare_us = bare_us;

                return 0;
            }
    return -1;
}

static void bench_mpi(int ni, const struct options *opt, struct results *all,
                      struct results *res)
{
    char helper[4096], args[512], why[400];
    struct mpi_parse mp = {res->p[ni], chip_counts[ni]};
    size_t len;

    res->mpi_ok[ni] = false;
    for (int p = 0; p < NUM_PAT; p++)
        for (int s = 0; s < NUM_SIZES; s++)
            res->p[ni][p][s].mpi_us = res->p[ni][p][s].mpi_bare_us = -1;
    if (all->mpi_note[0] != '\0')
        return; /* it failed before: do not try again */
    if (!mpi_helper_path("bench_halo_exchange_mpi", helper, sizeof(helper))) {
        snprintf(all->mpi_note, sizeof(all->mpi_note),
                 "MPI reference helper bench_halo_exchange_mpi not found next "
                 "to this executable (built without MPI?)");
        return;
    }
    len = (size_t)snprintf(args, sizeof(args), "--reps %d", opt->reps);
    for (int s = 0; s < NUM_SIZES && len < sizeof(args); s++)
        len += (size_t)snprintf(args + len, sizeof(args) - len, " %zu:%d",
                                sizes[s], iters_for(opt, sizes[s]));
    if (mpi_launch(helper, chip_counts[ni], args, MPI_TIMEOUT_S, "MPIHX",
                   on_mpi_line, &mp, why, sizeof(why)) != 0) {
        snprintf(all->mpi_note, sizeof(all->mpi_note),
                 "MPI reference not runnable: %s", why);
        return;
    }
    for (int p = 0; p < NUM_PAT; p++)
        for (int s = 0; s < NUM_SIZES; s++)
            if (res->p[ni][p][s].mpi_us <= 0) {
                snprintf(all->mpi_note, sizeof(all->mpi_note),
                         "MPI helper gave no %s result for %zu bytes on %d "
                         "ranks",
                         pat_names[p], sizes[s], chip_counts[ni]);
                return;
            }
    res->mpi_ok[ni] = true;
}

static void combine_rounds(const struct results *rounds, int k,
                           struct results *out)
{
    double v[MAX_ROUNDS];

    for (int i = 0; i < NUM_N; i++) {
        out->mpi_ok[i] = true;
        for (int q = 0; q < k; q++)
            out->mpi_ok[i] = out->mpi_ok[i] && rounds[q].mpi_ok[i];
        for (int p = 0; p < NUM_PAT; p++)
            for (int s = 0; s < NUM_SIZES; s++) {
                struct point *o = &out->p[i][p][s];

                o->iters = rounds[0].p[i][p][s].iters;
                for (int m = 0; m < NUM_MODE; m++) {
                    for (int q = 0; q < k; q++)
                        v[q] = rounds[q].p[i][p][s].us[m];
                    o->us[m] = stats_median(v, (size_t)k);
                }
                for (int q = 0; q < k; q++)
                    v[q] = rounds[q].p[i][p][s].mpi_us;
                o->mpi_us = stats_median(v, (size_t)k);
                for (int q = 0; q < k; q++)
                    v[q] = rounds[q].p[i][p][s].mpi_bare_us;
                o->mpi_bare_us = stats_median(v, (size_t)k);
            }
    }
}

static const char *size_name(size_t b)
{
    static char buf[4][24];
    static int next;
    char *out = buf[next++ % 4];

    if (b >= ((size_t)1 << 20))
        snprintf(out, 24, "%zu MiB", b >> 20);
    else
        snprintf(out, 24, "%zu KiB", b >> 10);
    return out;
}

static int blocks_of(int pattern)
{
    return pattern == 0 ? 2 : 1;
}

/* GB/s (1e9 bytes) a rank sends per exchange; -1 for none. */
static double gbps(int pattern, size_t bytes, double us)
{
    return us > 0 ? (double)blocks_of(pattern) * (double)bytes / (us * 1e3)
                  : -1;
}

static double target_for(int s)
{
    return s >= BIG_S ? TARGET_BIG : TARGET_ALL;
}

/* Whether mode m meets the targets at every point. */
static bool mode_passes(const struct results *r, int m, double *min_all,
                        double *min_big)
{
    bool ok = r->mpi_ok[0] && r->mpi_ok[1];

    *min_all = *min_big = 1e30;
    for (int i = 0; i < NUM_N; i++)
        for (int p = 0; p < NUM_PAT; p++)
            for (int s = 0; s < NUM_SIZES; s++) {
                const struct point *pt = &r->p[i][p][s];
                double ratio = pt->mpi_us / pt->us[m];

                if (s < BIG_S && ratio < *min_all)
                    *min_all = ratio;
                if (s >= BIG_S && ratio < *min_big)
                    *min_big = ratio;
                ok = ok && ratio >= target_for(s);
            }
    return ok;
}

static void print_summary(const struct options *opt, const struct results *r,
                          const struct results *rounds)
{
    printf("bench_halo_exchange (%s, %d round%s): time per exchange (us) and "
           "GB/s a rank sends\n(blocks x bytes per neighbour / time); "
           "slowest rank, medians; an exchange = pack + move + receiver reads\n"
           "every byte, on both sides. ratio = MPI time / strata time. push = "
           "sender copies\ninto the receiver's window; halo = sender copies "
           "into its own window, receiver\nreads it there (strata_halo_"
           "forward's scheme). bare = MPI call alone. Target:\nratio >= %.1f "
           "everywhere, >= %.1f at >= 1 MiB.\n",
           opt->quick ? "quick" : "full", opt->rounds,
           opt->rounds > 1 ? "s" : "", TARGET_ALL, TARGET_BIG);
    printf("  %5s %4s %7s %5s | %9s %7s %6s | %9s %7s %6s | %9s %7s | %9s "
           "%7s\n",
           "ranks", "pat", "B/nbr", "iters", "push us", "GB/s", "ratio",
           "halo us", "GB/s", "ratio", "MPI us", "GB/s", "bare us", "GB/s");
    for (int i = 0; i < NUM_N; i++)
        for (int p = 0; p < NUM_PAT; p++)
            for (int s = 0; s < NUM_SIZES; s++) {
                const struct point *pt = &r->p[i][p][s];
                bool m = r->mpi_ok[i];

                printf("  %5d %4s %7s %5d |", chip_counts[i], pat_names[p],
                       size_name(sizes[s]), pt->iters);
                for (int k = 0; k < NUM_MODE; k++) {
                    printf(" %9.2f %7.2f ", pt->us[k],
                           gbps(p, sizes[s], pt->us[k]));
                    if (m)
                        printf("%5.2f%s|", pt->mpi_us / pt->us[k],
                               pt->mpi_us / pt->us[k] >= target_for(s) ? " "
                                                                       : "!");
                    else
                        printf("%6s |", "-");
                }
                if (m)
                    printf(" %9.2f %7.2f | %9.2f %7.2f\n", pt->mpi_us,
                           gbps(p, sizes[s], pt->mpi_us), pt->mpi_bare_us,
                           gbps(p, sizes[s], pt->mpi_bare_us));
                else
                    printf(" %9s %7s | %9s %7s\n", "-", "-", "-", "-");
            }
    printf("! = below target. %s\n",
           "4 ranks oversubscribe the 2 cores (both sides).");
    printf("placement: %s\n",
           mpi_launch_pinned()
               ? "2 ranks pinned one per core, both sides (STRATA_PIN=1; MPI "
                 "--bind-to core); 4 ranks not bound"
               : "not bound, both sides (MPI --bind-to none; STRATA_PIN=1 "
                 "binds 2 ranks)");
    if (opt->rounds > 1) {
        printf("push / halo / MPI time by round (us):\n");
        for (int i = 0; i < NUM_N; i++)
            for (int p = 0; p < NUM_PAT; p++)
                for (int s = 0; s < NUM_SIZES; s++) {
                    printf("  %d %s %7s:", chip_counts[i], pat_names[p],
                           size_name(sizes[s]));
                    for (int k = 0; k < opt->rounds; k++)
                        printf(" %.1f/%.1f/%.1f", rounds[k].p[i][p][s].us[0],
                               rounds[k].p[i][p][s].us[1],
                               rounds[k].p[i][p][s].mpi_us);
                    printf("\n");
                }
    }
    bench_print_load(r->other_cpu_pct);
    if (r->mpi_note[0] != '\0')
        printf("NOTE: %s; reference is null and pass is false\n", r->mpi_note);
}

static void print_json(const struct options *opt, const struct results *r,
                       const char *error)
{
    const struct point *h = &r->p[HEAD_N][HEAD_P][HEAD_S];
    bool mpi = error == NULL && r->mpi_ok[0] && r->mpi_ok[1];
    double s_bw = error ? -1 : gbps(HEAD_P, sizes[HEAD_S], h->us[HEAD_MODE]);
    double m_bw = mpi ? gbps(HEAD_P, sizes[HEAD_S], h->mpi_us) : -1;
    double min_all[NUM_MODE] = {-1, -1}, min_big[NUM_MODE] = {-1, -1};
    bool pass[NUM_MODE] = {false, false};

    for (int m = 0; m < NUM_MODE && mpi; m++)
        pass[m] = mode_passes(r, m, &min_all[m], &min_big[m]);
    printf("{\"bench\":\"halo_exchange\",\"metric\":\"GBps_ring_1MiB_per_"
           "neighbour_2ranks_halo\",\"unit\":\"GB/s\",");
    bench_json_num("strata", s_bw, true);
    printf("\"reference_name\":\"MPI_Neighbor_alltoallv_ring_2ranks_"
           "OpenMPI\",");
    bench_json_num("reference", m_bw, true);
    bench_json_num("ratio", mpi ? s_bw / m_bw : -1, true);
    bench_json_num("target", mpi ? TARGET_BIG * m_bw : -1, true);
    printf("\"pass\":%s,", pass[HEAD_MODE] ? "true" : "false");
    printf("\"target_rule\":\"ratio >= 1.0 at every size, >= 1.5 at >= 1 MiB, "
           "both patterns, 2 and 4 ranks\",");
    for (int m = 0; m < NUM_MODE; m++) {
        char key[48];

        snprintf(key, sizeof(key), "min_ratio_below_1MiB_%s", mode_names[m]);
        bench_json_num(key, min_all[m], true);
        snprintf(key, sizeof(key), "min_ratio_from_1MiB_%s", mode_names[m]);
        bench_json_num(key, min_big[m], true);
        printf("\"pass_%s\":%s,", mode_names[m], pass[m] ? "true" : "false");
    }
    printf("\"points\":[");
    for (int i = 0; i < NUM_N; i++)
        for (int p = 0; p < NUM_PAT; p++)
            for (int s = 0; s < NUM_SIZES; s++) {
                const struct point *pt = &r->p[i][p][s];
                bool m = mpi && r->mpi_ok[i];

                printf("%s{\"ranks\":%d,\"pattern\":\"%s\",\"bytes_per_"
                       "neighbour\":%zu,\"iters\":%d,",
                       i + p + s ? "," : "", chip_counts[i], pat_names[p],
                       sizes[s], pt->iters);
                for (int k = 0; k < NUM_MODE; k++) {
                    char key[32];

                    snprintf(key, sizeof(key), "%s_us", mode_names[k]);
                    bench_json_num(key, pt->us[k], true);
                    snprintf(key, sizeof(key), "%s_GBps", mode_names[k]);
                    bench_json_num(key, gbps(p, sizes[s], pt->us[k]), true);
                    snprintf(key, sizeof(key), "%s_ratio", mode_names[k]);
                    bench_json_num(key, m ? pt->mpi_us / pt->us[k] : -1, true);
                }
                bench_json_num("mpi_us", m ? pt->mpi_us : -1, true);
                bench_json_num("mpi_GBps",
                               m ? gbps(p, sizes[s], pt->mpi_us) : -1, true);
                bench_json_num("mpi_bare_us", m ? pt->mpi_bare_us : -1, true);
                bench_json_num("ratio_halo_vs_bare",
                               m ? pt->mpi_bare_us / pt->us[1] : -1, false);
                printf("}");
            }
    printf("],");
    bench_json_num("other_cpu_pct", r->other_cpu_pct, true);
    printf("\"rounds\":%d,\"reps\":%d,\"quick\":%s,\"pinned\":%s", opt->rounds,
           opt->reps, opt->quick ? "true" : "false",
           mpi_launch_pinned() ? "true" : "false");
    if (r->mpi_note[0] != '\0')
        printf(",\"note\":\"%s\"", r->mpi_note);
    if (error != NULL)
        printf(",\"error\":\"%s\"", error);
    printf("}\n");
    fflush(stdout);
}

static int parse_options(int argc, char **argv, struct options *opt)
{
    memset(opt, 0, sizeof(*opt));
    if (bench_parse_rounds(argc, argv, "bench_halo_exchange", MAX_ROUNDS,
                           &opt->quick, &opt->rounds) != 0)
        return -1;
    if (opt->rounds == 0)
        opt->rounds = opt->quick ? 1 : 3;
    opt->budget = opt->quick ? (size_t)16 << 20 : (size_t)96 << 20;
    opt->min_iters = opt->quick ? 2 : 4;
    opt->max_iters = opt->quick ? 400 : 2000;
    opt->reps = opt->quick ? 3 : 5;
    return 0;
}

int main(int argc, char **argv)
{
    static struct results res, rounds[MAX_ROUNDS];
    struct machine_load load0, load1;
    struct options opt;
    strata_callable kernel;
    strata_err err;

    if (parse_options(argc, argv, &opt) != 0)
        return 2;
    res.other_cpu_pct = -1;
    err =
        strata_register_kernel("bench.halo_exchange", exchange_kernel, &kernel);
    if (err != STRATA_OK) {
        report("register", err);
        print_json(&opt, &res, "kernel registration failed");
        return 1;
    }
    machine_load_sample(&load0);
    for (int k = 0; k < opt.rounds; k++)
        for (int i = 0; i < NUM_N; i++) {
            if (bench_strata(i, kernel, &opt, &rounds[k]) != 0) {
                print_json(&opt, &res, "strata measurement failed");
                return 1;
            }
            bench_mpi(i, &opt, &res, &rounds[k]);
        }
    combine_rounds(rounds, opt.rounds, &res);
    machine_load_sample(&load1);
    res.other_cpu_pct = machine_load_other_pct(&load0, &load1);
    print_summary(&opt, &res, rounds);
    print_json(&opt, &res, NULL);
    return 0;
}
