/*
 * bench_domain_alloc_mpi: the MPI reference for bench_domain_alloc, run by
 * it under mpirun. Not meant to be started by hand (but it can be:
 * `mpirun -np 4 bench_domain_alloc_mpi --iters 200 --touch-iters 3 4096`).
 *
 * For each window size (bytes per rank) on the node's shared communicator:
 * - cycle: MPI_Barrier, then MPI_Win_allocate_shared + MPI_Win_free timed
 *   on every rank; the slowest rank's times count for the iteration
 *   (allocation alone, free alone, and both). Median over the iterations.
 * - touch (with --touch-iters > 0 and windows of 1 MiB or more): allocate,
 *   barrier, every rank memsets its own segment once (first touch) and
 *   once more (pages already present), barrier, free. The slowest rank's
 *   pass times and the wall time of the first pass over all ranks.
 *
 * One line per size on rank 0's stdout:
 *   MPIRES bytes=B np=N iters=I alloc_us=.. free_us=.. cycle_us=..
 *          touch_iters=T touch_ms=.. rewrite_ms=.. touch_wall_ms=..
 *          free_touched_us=..
 * (one line; touch fields are -1 when not measured).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WARMUP 5

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    if (n <= 0)
        return -1;
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The slowest rank's values of v[0..n) (element-wise max) on rank 0. */
static void max_to_root(double *v, int n, MPI_Comm comm)
{
    double out[4];

    MPI_Reduce(v, out, n, MPI_DOUBLE, MPI_MAX, 0, comm);
    memcpy(v, out, (size_t)n * sizeof(*v));
}

static int measure(MPI_Comm comm, size_t bytes, int iters, int touch_iters)
{
    double *alloc_us = calloc((size_t)iters, sizeof(double));
    double *free_us = calloc((size_t)iters, sizeof(double));
    double *cycle_us = calloc((size_t)iters, sizeof(double));
    double *touch_ms = calloc((size_t)touch_iters + 1, sizeof(double));
    double *rewrite_ms = calloc((size_t)touch_iters + 1, sizeof(double));
    double *wall_ms = calloc((size_t)touch_iters + 1, sizeof(double));
    double *free_t_us = calloc((size_t)touch_iters + 1, sizeof(double));
    int rank, np;

    if (!alloc_us || !free_us || !cycle_us || !touch_ms || !rewrite_ms ||
        !wall_ms || !free_t_us) {
        fprintf(stderr, "bench_domain_alloc_mpi: out of memory\n");
        MPI_Abort(comm, 1);
    }
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    for (int i = -WARMUP; i < iters; i++) {
        double t[3], v[3];
        void *base;
        MPI_Win win;

        MPI_Barrier(comm);
        t[0] = MPI_Wtime();
        MPI_Win_allocate_shared((MPI_Aint)bytes, 1, MPI_INFO_NULL, comm, &base,
                                &win);
        t[1] = MPI_Wtime();
        MPI_Win_free(&win);
        t[2] = MPI_Wtime();
        v[0] = (t[1] - t[0]) * 1e6;
        v[1] = (t[2] - t[1]) * 1e6;
        v[2] = (t[2] - t[0]) * 1e6;
        max_to_root(v, 3, comm);
        if (i >= 0) {
            alloc_us[i] = v[0];
            free_us[i] = v[1];
            cycle_us[i] = v[2];
        }
    }
    if (bytes < ((size_t)1 << 20))
        touch_iters = 0;
    for (int i = 0; i < touch_iters; i++) {
        double t[6], v[4], start_min, end_max;
        unsigned char *base;
        MPI_Win win;

        MPI_Win_allocate_shared((MPI_Aint)bytes, 1, MPI_INFO_NULL, comm, &base,
                                &win);
        MPI_Barrier(comm);
        t[0] = MPI_Wtime();
        memset(base, 0xa5, bytes);
        t[1] = MPI_Wtime();
        memset(base, 0x5a, bytes);
        t[2] = MPI_Wtime();
        if (base[bytes - 1] != 0x5a)
            MPI_Abort(comm, 2);
        MPI_Barrier(comm);
        t[3] = MPI_Wtime();
        MPI_Win_free(&win);
        t[4] = MPI_Wtime();
        v[0] = (t[1] - t[0]) * 1e3;
        v[1] = (t[2] - t[1]) * 1e3;
        v[2] = (t[4] - t[3]) * 1e6;
        v[3] = t[1]; /* latest end of the first pass */
        max_to_root(v, 4, comm);
        end_max = v[3];
        MPI_Reduce(&t[0], &start_min, 1, MPI_DOUBLE, MPI_MIN, 0, comm);
        touch_ms[i] = v[0];
        rewrite_ms[i] = v[1];
        free_t_us[i] = v[2];
        wall_ms[i] = (end_max - start_min) * 1e3;
    }
    if (rank == 0) {
        printf("MPIRES bytes=%zu np=%d iters=%d alloc_us=%.3f free_us=%.3f "
               "cycle_us=%.3f touch_iters=%d touch_ms=%.4f rewrite_ms=%.4f "
               "touch_wall_ms=%.4f free_touched_us=%.3f\n",
               bytes, np, iters, median(alloc_us, iters),
               median(free_us, iters), median(cycle_us, iters), touch_iters,
               median(touch_ms, touch_iters), median(rewrite_ms, touch_iters),
               median(wall_ms, touch_iters), median(free_t_us, touch_iters));
        fflush(stdout);
    }
    free(alloc_us);
    free(free_us);
    free(cycle_us);
    free(touch_ms);
    free(rewrite_ms);
    free(wall_ms);
    free(free_t_us);
    return 0;
}

int main(int argc, char **argv)
{
    int iters = 100, touch_iters = 0;
    MPI_Comm node;

    MPI_Init(&argc, &argv);
    /* Windows can only be shared inside one node. */
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                        &node);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc) {
            iters = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--touch-iters") == 0 && i + 1 < argc) {
            touch_iters = atoi(argv[++i]);
        } else {
            char *end;
            unsigned long long b = strtoull(argv[i], &end, 10);

            if (*end != '\0' || b == 0 || iters < 1 || touch_iters < 0) {
                fprintf(stderr, "bench_domain_alloc_mpi: bad argument %s\n",
                        argv[i]);
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
            measure(node, (size_t)b, iters, touch_iters);
        }
    }
    MPI_Comm_free(&node);
    MPI_Finalize();
    return 0;
}
