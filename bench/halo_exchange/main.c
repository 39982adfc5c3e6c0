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
 * rank's mean per exchange counts; median over repetitions. GB/s = bytes
 * a rank sends per exchange (blocks x B) / time per exchange.
 *
 * Pairing: this machine has phases of seconds where everything runs
 * several times slower, so the two sides of a point are measured back to
 * back, never at the same time (two cores): per round and rank count one
 * strata worker and one MPI job (bench_halo_exchange_mpi, mpi_helper.c,
 * under `mpirun --oversubscribe -np W`, driven point by point, see
 * mpi_session.h) stay up, and each point runs strata then MPI, or MPI
 * then strata (alternating), before the next point. ratio = MPI time /
 * strata time of the same round; reported: the median of the per-round
 * ratios, and per side the median time over rounds.
 *
 * Placement, both sides alike: not bound (MPI --bind-to none). With
 * STRATA_PIN=1 in the environment, strata binds a worker's chips one per
 * core where they fit (2 ranks) and the MPI ranks are bound the same way
 * (--bind-to core --map-by core); 4 ranks stay unbound on both sides.
 *
 * The last stdout line is one JSON object (see bench/CMakeLists.txt).
 * Usage: bench_halo_exchange [--quick] [--rounds K]
 * HX_CHUNK=bytes in the environment sets the halo mode's chunk (rounded
 * down to 8 bytes) in place of STRATA_HALO_CHUNK_BYTES_DEFAULT, for
 * trying sizes.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <strata/strata.h>

#include "bench_common.h"
#include "halo_exchange.h"
#include "machine_load.h"
#include "mpi_launch.h"
#include "mpi_session.h"
#include "stats.h"

#define MAX_CHIPS 4
#define MAX_BLOCKS 2
#define MAX_REPS 16
#define DATA_OFF 4096 /* signal words live below */
#define WAIT_S 60.0
#define MPI_START_S 60.0  /* until every rank is ready */
#define MPI_POINT_S 120.0 /* per point */

const int chip_counts[NUM_N] = {2, 4};
const size_t sizes[NUM_SIZES] = {
    (size_t)1 << 10,   (size_t)4 << 10, (size_t)16 << 10, (size_t)64 << 10,
    (size_t)256 << 10, (size_t)1 << 20, (size_t)4 << 20,  (size_t)16 << 20};
const char *const pat_names[NUM_PAT] = {"ring", "half"};
const char *const mode_names[NUM_MODE] = {"push", "halo"};

/* Control words, 64 bytes apart below DATA_OFF; ARRIVED_SLOT + j counts
 * the chunks of receiving slot j (halo mode). */
enum { ARRIVED = 0, CONSUMED = 1, BARRIER = 2, ARRIVED_SLOT = 3 };

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

/* Block j received (its 64-bit words summing to sum): checked against
 * the sender's fill, then its sender may overwrite it. */
static strata_err consumed(const strata_comm_context *cc, const struct nbrs *nb,
                           uint32_t j, size_t bytes, uint64_t sum)
{
    uint64_t want = fill_value(nb->from[j], nb->their_block[j]) *
                    (uint64_t)(bytes / sizeof(uint64_t));

    if (sum != want) {
        strata_errmsg_set("halo exchange: wrong data received");
        return STRATA_EINVAL;
    }
    strata_signal_add(ctrl(cc, nb->from[j], CONSUMED), 1);
    return STRATA_OK;
}

/* Bytes of chunk t of a block. */
static size_t chunk_len(size_t bytes, size_t chunk, size_t t)
{
    return bytes - t * chunk < chunk ? bytes - t * chunk : chunk;
}

static size_t chunk_bytes(void)
{
    static size_t b;

    if (!b) {
        const char *e = getenv("HX_CHUNK");

        /* Whole 64-bit words: the receiver sums a chunk word by word. */
        b = (e ? (size_t)strtoull(e, NULL, 0) : 0) / 8 * 8;
        if (!b)
            b = STRATA_HALO_CHUNK_BYTES_DEFAULT;
    }
    return b;
}

/* Packs chunk t of every block into this rank's own window and tells
 * each receiver (one counter per receiving slot, counting chunks). */
static void pack_chunk(const strata_comm_context *cc, const struct nbrs *nb,
                       const char *src, size_t bytes, size_t chunk, size_t t)
{
    size_t off = t * chunk;

    for (uint32_t k = 0; k < nb->nsend; k++) {
        memcpy(slot(cc, cc->rank, k, bytes) + off, src + k * bytes + off,
               chunk_len(bytes, chunk, t));
        strata_signal_add(
            ctrl(cc, nb->to[k], ARRIVED_SLOT + (int)nb->my_slot_at_peer[k]), 1);
    }
}

/* The halo scheme (strata_halo_forward's, graph/halo_exec_kernel.c): a
 * block goes over in chunks of STRATA_HALO_CHUNK_BYTES_DEFAULT; a rank
 * packs chunk t + 1 before it waits for and reads its peers' chunk t, so
 * a chunk is read while it is still in cache and packing overlaps
 * reading. */
static strata_err exchange_halo(const strata_comm_context *cc,
                                const struct nbrs *nb, const char *src,
                                size_t bytes, uint32_t g)
{
    size_t chunk = chunk_bytes();
    size_t nch = (bytes + chunk - 1) / chunk;
    uint64_t sums[MAX_BLOCKS] = {0};
    strata_err err = STRATA_OK;

    pack_chunk(cc, nb, src, bytes, chunk, 0);
    for (size_t t = 0; t < nch; t++) {
        if (t + 1 < nch)
            pack_chunk(cc, nb, src, bytes, chunk, t + 1);
        for (uint32_t j = 0; j < nb->nrecv; j++) {
            err = strata_signal_wait(ctrl(cc, cc->rank, ARRIVED_SLOT + (int)j),
                                     (uint32_t)((g - 1) * nch + t + 1), WAIT_S);
            if (err != STRATA_OK)
                return err;
            sums[j] += sum_block(
                slot(cc, nb->from[j], nb->their_block[j], bytes) + t * chunk,
                chunk_len(bytes, chunk, t));
        }
    }
    for (uint32_t j = 0; j < nb->nrecv && err == STRATA_OK; j++)
        err = consumed(cc, nb, j, bytes, sums[j]);
    return err;
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
    if (mode == 1)
        return exchange_halo(cc, nb, src, bytes, g);
    for (uint32_t k = 0; k < nb->nsend; k++) {
        memcpy(slot(cc, nb->to[k], nb->my_slot_at_peer[k], bytes),
               src + k * bytes, bytes);
        strata_signal_add(ctrl(cc, nb->to[k], ARRIVED), 1);
    }
    /* A sender sends g + 1 only after I consumed g, so g * nrecv
     * arrivals mean every block of generation g is in place. */
    err = strata_signal_wait(ctrl(cc, me, ARRIVED), g * nb->nrecv, WAIT_S);
    if (err != STRATA_OK)
        return err;
    for (uint32_t j = 0; j < nb->nrecv && err == STRATA_OK; j++)
        err = consumed(cc, nb, j, bytes,
                       sum_block(slot(cc, me, j, bytes), bytes));
    return err;
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
        t0 = bench_now_us();
        for (uint32_t i = 0; i < iters && err == STRATA_OK; i++)
            err = exchange(cc, &nb, mode, src, bytes, ++g);
        times[r] = (bench_now_us() - t0) / iters;
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

/* One rank count's strata side: a worker kept up for a round's points. */
struct rig {
    int ids[MAX_CHIPS];
    strata_worker *w;
    struct job j;
};

static int rig_open(struct rig *g, int ni, strata_callable kernel,
                    const struct options *opt)
{
    int n = chip_counts[ni];
    size_t stride = MAX_BLOCKS * sizes[NUM_SIZES - 1];
    strata_worker_config cfg;
    strata_err err;

    memset(g, 0, sizeof(*g));
    for (int i = 0; i < n; i++)
        g->ids[i] = i;
    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = g->ids;
    cfg.num_chips = (size_t)n;
    err = strata_worker_create(&cfg, &g->w);
    if (err == STRATA_OK)
        err = strata_worker_init(g->w);
    if (err == STRATA_OK)
        err = strata_worker_create_buffer(g->w, (size_t)n * stride, &g->j.send);
    if (err == STRATA_OK)
        err = strata_worker_create_buffer(
            g->w, (size_t)n * MAX_REPS * sizeof(double), &g->j.times);
    if (err != STRATA_OK) {
        report("worker setup", err);
        return -1;
    }
    g->j.workers = g->ids;
    g->j.n = (size_t)n;
    g->j.kernel = kernel;
    g->j.stride = stride;
    g->j.reps = opt->reps;
    return 0;
}

static int rig_close(struct rig *g)
{
    strata_err err = strata_worker_destroy(g->w);

    g->w = NULL;
    if (err != STRATA_OK) {
        report("worker destroy", err);
        return -1;
    }
    return 0;
}

/* Both strata modes of one point; the ranks' source blocks are refilled
 * for its size first. */
static int strata_point(struct rig *g, int p, int s, const struct options *opt,
                        struct point *pt)
{
    struct job *j = &g->j;
    strata_err err;

    j->bytes = sizes[s];
    j->pattern = p;
    j->iters = iters_for(opt, sizes[s]);
    pt->iters = j->iters;
    for (size_t r = 0; r < j->n; r++)
        for (uint32_t k = 0; k < MAX_BLOCKS; k++) {
            uint64_t *v = (uint64_t *)((char *)strata_buffer_data(j->send) +
                                       r * j->stride + k * sizes[s]);

            for (size_t i = 0; i < sizes[s] / sizeof(uint64_t); i++)
                v[i] = fill_value((uint32_t)r, k);
        }
    for (int m = 0; m < NUM_MODE; m++) {
        j->mode = m;
        err = strata_worker_run(g->w, bench_orch, NULL, j);
        if (err != STRATA_OK) {
            report("exchange run", err);
            return -1;
        }
        pt->us[m] = job_us(j);
    }
    return 0;
}

/* Starts the MPI side for rank count ni, unless it failed before or was
 * not built; on failure the reason goes to all->mpi_note. */
static bool mpi_start(int ni, const struct options *opt, struct results *all,
                      struct mpi_session *ms)
{
    char helper[4096], why[400];

    ms->pid = 0;
    if (all->mpi_note[0] != '\0')
        return false; /* it failed before: do not try again */
    if (!mpi_helper_path("bench_halo_exchange_mpi", helper, sizeof(helper))) {
        snprintf(all->mpi_note, sizeof(all->mpi_note),
                 "MPI reference helper bench_halo_exchange_mpi not found next "
                 "to this executable (built without MPI?)");
        return false;
    }
    if (mpi_session_open(ms, helper, chip_counts[ni], opt->reps, MPI_START_S,
                         why, sizeof(why)) != 0) {
        snprintf(all->mpi_note, sizeof(all->mpi_note),
                 "MPI reference not runnable: %s", why);
        return false;
    }
    return true;
}

/* The MPI side of one point; on failure the job is stopped and the
 * reason goes to all->mpi_note. */
static bool mpi_point(struct mpi_session *ms, int ni, int p, int s,
                      const struct options *opt, struct results *all,
                      struct point *pt)
{
    struct mpi_session_result r;
    char why[300], why2[200];

    if (mpi_session_point(ms, pat_names[p], sizes[s], iters_for(opt, sizes[s]),
                          MPI_POINT_S, &r, why, sizeof(why)) != 0) {
        snprintf(all->mpi_note, sizeof(all->mpi_note),
                 "MPI reference failed at %s %zu bytes on %d ranks: %s",
                 pat_names[p], sizes[s], chip_counts[ni], why);
        (void)mpi_session_close(ms, 1, why2, sizeof(why2));
        return false;
    }
    pt->mpi_us = r.us;
    pt->mpi_bare_us = r.bare_us;
    return true;
}

static void point_ratios(struct point *pt)
{
    bool m = pt->mpi_us > 0;

    for (int k = 0; k < NUM_MODE; k++)
        pt->ratio[k] = m ? pt->mpi_us / pt->us[k] : -1;
    pt->bare_ratio = m ? pt->mpi_bare_us / pt->us[HEAD_MODE] : -1;
}

/* One round of rank count ni: per point, strata and MPI back to back
 * (which one first alternates from point to point and round to round). */
static int bench_round(int ni, int round, strata_callable kernel,
                       const struct options *opt, struct results *all,
                       struct results *res)
{
    struct mpi_session ms;
    bool mpi = mpi_start(ni, opt, all, &ms);
    int rc = 0, order = round;
    struct point prime;
    struct rig g;
    char why[200];

    res->mpi_ok[ni] = mpi;
    /* An untimed first run settles the freshly forked chips (the MPI
     * helper warms up before each point likewise). */
    if (rig_open(&g, ni, kernel, opt) != 0 ||
        strata_point(&g, 0, 0, opt, &prime) != 0)
        rc = -1;
    for (int p = 0; p < NUM_PAT && rc == 0; p++)
        for (int s = 0; s < NUM_SIZES && rc == 0; s++, order++) {
            struct point *pt = &res->p[ni][p][s];

            pt->mpi_us = pt->mpi_bare_us = -1;
            if (mpi && order % 2 == 1)
                mpi = mpi_point(&ms, ni, p, s, opt, all, pt);
            if (strata_point(&g, p, s, opt, pt) != 0)
                rc = -1;
            if (mpi && order % 2 == 0 && rc == 0)
                mpi = mpi_point(&ms, ni, p, s, opt, all, pt);
            if (!mpi)
                pt->mpi_us = pt->mpi_bare_us = -1;
            point_ratios(pt);
        }
    if (g.w != NULL && rig_close(&g) != 0)
        rc = -1;
    if (mpi && mpi_session_close(&ms, rc != 0, why, sizeof(why)) != 0) {
        snprintf(all->mpi_note, sizeof(all->mpi_note),
                 "MPI reference did not end cleanly: %s", why);
        mpi = false;
    }
    res->mpi_ok[ni] = mpi;
    return rc;
}

/* The median over k rounds of the double at byte offset off of a point. */
static double median_of(const struct results *rounds, int k, int i, int p,
                        int s, size_t off)
{
    double v[MAX_ROUNDS];

    for (int q = 0; q < k; q++)
        memcpy(&v[q], (const char *)&rounds[q].p[i][p][s] + off, sizeof(v[q]));
    return stats_median(v, (size_t)k);
}

/* Per side the median time over rounds; ratios: the median of the
 * rounds' own (paired) ratios. */
static void combine_rounds(const struct results *rounds, int k,
                           struct results *out)
{
    for (int i = 0; i < NUM_N; i++) {
        out->mpi_ok[i] = true;
        for (int q = 0; q < k; q++)
            out->mpi_ok[i] = out->mpi_ok[i] && rounds[q].mpi_ok[i];
        for (int p = 0; p < NUM_PAT; p++)
            for (int s = 0; s < NUM_SIZES; s++) {
                struct point *o = &out->p[i][p][s];

                o->iters = rounds[0].p[i][p][s].iters;
                for (int m = 0; m < NUM_MODE; m++) {
                    size_t at = (size_t)m * sizeof(double);

                    o->us[m] = median_of(rounds, k, i, p, s,
                                         offsetof(struct point, us) + at);
                    o->ratio[m] = median_of(rounds, k, i, p, s,
                                            offsetof(struct point, ratio) + at);
                }
                o->mpi_us = median_of(rounds, k, i, p, s,
                                      offsetof(struct point, mpi_us));
                o->mpi_bare_us = median_of(rounds, k, i, p, s,
                                           offsetof(struct point, mpi_bare_us));
                o->bare_ratio = median_of(rounds, k, i, p, s,
                                          offsetof(struct point, bare_ratio));
            }
    }
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
        for (int i = 0; i < NUM_N; i++)
            if (bench_round(i, k, kernel, &opt, &res, &rounds[k]) != 0) {
                print_json(&opt, &res, "strata measurement failed");
                return 1;
            }
    combine_rounds(rounds, opt.rounds, &res);
    machine_load_sample(&load1);
    res.other_cpu_pct = machine_load_other_pct(&load0, &load1);
    print_summary(&opt, &res, rounds);
    print_json(&opt, &res, NULL);
    return 0;
}
