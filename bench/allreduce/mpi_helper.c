/*
 * bench_allreduce_mpi: the MPI reference for bench_allreduce, run by it
 * under mpirun. By hand: `mpirun -np 2 bench_allreduce_mpi --reps 5
 * 4096:1000 1048576:64` (bytes per rank : iterations per repetition).
 *
 * For each size: float vectors (bytes / 4 elements), MPI_Allreduce with
 * MPI_SUM from a send into a receive buffer, both touched beforehand. A
 * few warm-up calls, then per repetition: MPI_Barrier, `iters` calls back
 * to back timed on every rank; the slowest rank's mean per call counts for
 * the repetition; the median over repetitions is reported. The result is
 * checked against the exact sum once.
 *
 * One line per size on rank 0's stdout:
 *   MPIAR bytes=B np=N iters=I reps=R us=.. min_us=.. ok=1
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* The same inputs as bench_allreduce: small integers, exact in float. */
static float input_value(size_t i, int rank)
{
    return (float)(i % 997) + (float)rank;
}

static void measure(size_t bytes, int iters, int reps)
{
    size_t count = bytes / sizeof(float);
    float *in = malloc(count * sizeof(float));
    float *out = malloc(count * sizeof(float));
    double *per = calloc((size_t)reps, sizeof(double));
    int rank, np, ok = 1, all_ok;

    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (!in || !out || !per) {
        fprintf(stderr, "bench_allreduce_mpi: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < count; i++) {
        in[i] = input_value(i, rank);
        out[i] = 0;
    }
    MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (size_t i = 0; i < count && ok; i++) {
        float want = (float)np * (float)(i % 997) + (float)(np * (np - 1) / 2);

        ok = out[i] == want;
    }
    for (int i = 0; i < 2 + iters / 10; i++)
        MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (int r = 0; r < reps; r++) {
        double t0, mine, worst;

        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (int i = 0; i < iters; i++)
            MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM,
                          MPI_COMM_WORLD);
        mine = (MPI_Wtime() - t0) * 1e6 / iters;
        MPI_Reduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        per[r] = worst;
    }
    MPI_Reduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        qsort(per, (size_t)reps, sizeof(*per), cmp_double);
        printf("MPIAR bytes=%zu np=%d iters=%d reps=%d us=%.4f min_us=%.4f "
               "ok=%d\n",
               bytes, np, iters, reps,
               reps % 2 ? per[reps / 2]
                        : (per[reps / 2 - 1] + per[reps / 2]) / 2,
               per[0], all_ok);
        fflush(stdout);
    }
    free(in);
    free(out);
    free(per);
}

int main(int argc, char **argv)
{
    int reps = 5;

    MPI_Init(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        unsigned long long bytes;
        int iters, used = 0;

        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            reps = atoi(argv[++i]);
            continue;
        }
        if (sscanf(argv[i], "%llu:%d%n", &bytes, &iters, &used) != 2 ||
            argv[i][used] != '\0' || bytes == 0 || bytes % sizeof(float) ||
            bytes / sizeof(float) > 0x7fffffffull || iters < 1 || reps < 1) {
            fprintf(stderr, "bench_allreduce_mpi: bad argument %s\n", argv[i]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        measure((size_t)bytes, iters, reps);
    }
    MPI_Finalize();
    return 0;
}
