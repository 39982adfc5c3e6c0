/*
 * bench_global_domain_mpi: the MPI reference for bench_global_domain, run
 * by it under mpirun. Not meant to be started by hand (but it can be:
 * `mpirun -np 4 bench_global_domain_mpi --iters 200 4096`).
 *
 * On MPI_COMM_WORLD, per iteration: MPI_Barrier, then MPI_Win_allocate of
 * `bytes` per rank + MPI_Win_free, timed on every rank; the slowest rank's
 * times count for the iteration (allocation alone, free alone, both).
 * Medians over the iterations, after 5 warm-up iterations. One line on
 * rank 0's stdout:
 *   MPIRES np=N bytes=B iters=I alloc_us=.. free_us=.. cycle_us=..
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
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    double *alloc_us, *free_us, *cycle_us;
    unsigned long long bytes = 0;
    int iters = 100, rank, np;

    MPI_Init(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
            iters = atoi(argv[++i]);
        else
            bytes = strtoull(argv[i], NULL, 10);
    }
    if (iters < 1 || bytes == 0) {
        fprintf(stderr, "usage: bench_global_domain_mpi [--iters N] BYTES\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    alloc_us = calloc((size_t)iters, sizeof(double));
    free_us = calloc((size_t)iters, sizeof(double));
    cycle_us = calloc((size_t)iters, sizeof(double));
    if (!alloc_us || !free_us || !cycle_us)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (int i = -WARMUP; i < iters; i++) {
        double t[3], v[3], m[3];
        void *base;
        MPI_Win win;

        MPI_Barrier(MPI_COMM_WORLD);
        t[0] = MPI_Wtime();
        MPI_Win_allocate((MPI_Aint)bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD,
                         &base, &win);
        t[1] = MPI_Wtime();
        MPI_Win_free(&win);
        t[2] = MPI_Wtime();
        v[0] = (t[1] - t[0]) * 1e6;
        v[1] = (t[2] - t[1]) * 1e6;
        v[2] = (t[2] - t[0]) * 1e6;
        MPI_Reduce(v, m, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (i >= 0) {
            alloc_us[i] = m[0];
            free_us[i] = m[1];
            cycle_us[i] = m[2];
        }
    }
    if (rank == 0) {
        printf("MPIRES np=%d bytes=%llu iters=%d alloc_us=%.3f free_us=%.3f "
               "cycle_us=%.3f\n",
               np, bytes, iters, median(alloc_us, iters),
               median(free_us, iters), median(cycle_us, iters));
        fflush(stdout);
    }
    free(alloc_us);
    free(free_us);
    free(cycle_us);
    MPI_Finalize();
    return 0;
}
