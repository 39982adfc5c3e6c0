/*
 * bench_halo_exchange_mpi: the MPI reference for bench_halo_exchange, run
 * by it under mpirun. By hand: `mpirun -np 2 bench_halo_exchange_mpi
 * --reps 5 1024:2000 1048576:96` (bytes per neighbour : iterations).
 *
 * For each size and each pattern (ring: neighbours r-1 and r+1, one block
 * of B bytes each way with each; half: the half-ring permutation, one
 * block to r+W/2 and one from r-W/2), a distributed-graph communicator
 * (MPI_Dist_graph_create_adjacent, no reordering) and
 * MPI_Neighbor_alltoallv of MPI_BYTE blocks from a contiguous send buffer
 * into a contiguous receive buffer, all touched beforehand. One exchange
 * is the same work as bench_halo_exchange's: pack (copy the blocks from a
 * source buffer into the send buffer), the call, and a read of every
 * received byte (a 64-bit sum, checked against the sender's fill value).
 * A few warm-up exchanges, then per repetition: MPI_Barrier, `iters`
 * exchanges back to back timed on every rank; the slowest rank's mean per
 * exchange counts; the median over repetitions is reported (us). The same
 * again for the bare call (no pack, no read: bare_us).
 *
 * One line per pattern and size on rank 0's stdout:
 *   MPIHX pattern=ring bytes=B np=N iters=I reps=R us=.. bare_us=.. ok=1
 *
 * With `--cmd DIR` instead of sizes (how bench_halo_exchange runs it, see
 * mpi_session.h), the helper serves points one at a time: rank r reads
 * lines from the named FIFO DIR/cmd.<r>, `point ring|half BYTES ITERS`
 * (one pattern, answered with one MPIHX line) or `quit`; end of file also
 * ends it. Once every rank has opened its FIFO, rank 0 prints
 * `MPIHX ready np=N`. Between points every rank sleeps in read(), never
 * in an MPI call: Open MPI's blocking calls poll, and the strata side is
 * measured meanwhile.
 */
#include <fcntl.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* GCC takes Open MPI's MPI_UNWEIGHTED sentinel for an empty array. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#pragma GCC diagnostic ignored "-Wstringop-overread"
#endif

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static uint64_t fill_value(int rank)
{
    return 0x100000001ull * (uint64_t)(0x1000 + rank);
}

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

/* Median of the slowest rank's mean per exchange over reps repetitions;
 * full: pack + call + read. ok is cleared on a wrong sum. */
static double timed(MPI_Comm g, int n, const int *from, size_t bytes, int iters,
                    int reps, int full, const unsigned char *src,
                    unsigned char *sendbuf, unsigned char *recvbuf,
                    const int *counts, const int *displs, double *per, int *ok)
{
    int rank;

    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int r = -1; r < reps; r++) {
        int it = r < 0 ? 2 + iters / 10 : iters; /* r < 0: warm-up */
        double t0, mine, worst;

        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (int i = 0; i < it; i++) {
            if (full)
                memcpy(sendbuf, src, (size_t)n * bytes);
            MPI_Neighbor_alltoallv(sendbuf, counts, displs, MPI_BYTE, recvbuf,
                                   counts, displs, MPI_BYTE, g);
            if (full)
                for (int k = 0; k < n; k++)
                    if (sum_block(recvbuf + k * bytes, bytes) !=
                        fill_value(from[k]) * (bytes / sizeof(uint64_t)))
                        *ok = 0;
        }
        mine = (MPI_Wtime() - t0) * 1e6 / it;
        MPI_Reduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (r >= 0)
            per[r] = worst;
    }
    if (rank != 0)
        return 0;
    qsort(per, (size_t)reps, sizeof(*per), cmp_double);
    return reps % 2 ? per[reps / 2] : (per[reps / 2 - 1] + per[reps / 2]) / 2;
}

static void measure(int pattern, size_t bytes, int iters, int reps)
{
    int rank, np, n, ok = 1, all_ok;
    int nbr[2], counts[2], displs[2];
    double *per = calloc((size_t)reps, sizeof(double));
    unsigned char *sendbuf, *recvbuf, *src;
    int from[2];
    double us, bare_us;
    MPI_Comm g;

    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (pattern == 0) {
        n = 2;
        nbr[0] = (rank + np - 1) % np;
        nbr[1] = (rank + 1) % np;
    } else {
        n = 1;
        nbr[0] = (rank + np / 2) % np;
    }
    {
        int in[2] = {nbr[0], nbr[1]};

        if (pattern == 1)
            in[0] = (rank + np - np / 2) % np;
        from[0] = in[0];
        from[1] = in[1];
        MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, n, in, MPI_UNWEIGHTED, n,
                                       nbr, MPI_UNWEIGHTED, MPI_INFO_NULL, 0,
                                       &g);
    }
    sendbuf = malloc(2 * bytes);
    recvbuf = malloc(2 * bytes);
    src = malloc(2 * bytes);
    if (!per || !sendbuf || !recvbuf || !src) {
        fprintf(stderr, "bench_halo_exchange_mpi: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int k = 0; k < 2; k++) {
        counts[k] = (int)bytes;
        displs[k] = (int)(k * bytes);
    }
    for (size_t i = 0; i < 2 * bytes / sizeof(uint64_t); i++)
        ((uint64_t *)src)[i] = fill_value(rank);
    memcpy(sendbuf, src, 2 * bytes);
    memset(recvbuf, 0, 2 * bytes);
    us = timed(g, n, from, bytes, iters, reps, 1, src, sendbuf, recvbuf, counts,
               displs, per, &ok);
    bare_us = timed(g, n, from, bytes, iters, reps, 0, src, sendbuf, recvbuf,
                    counts, displs, per, &ok);
    MPI_Reduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("MPIHX pattern=%s bytes=%zu np=%d iters=%d reps=%d us=%.4f "
               "bare_us=%.4f ok=%d\n",
               pattern == 0 ? "ring" : "half", bytes, np, iters, reps, us,
               bare_us, all_ok);
        fflush(stdout);
    }
    MPI_Comm_free(&g);
    free(sendbuf);
    free(recvbuf);
    free(src);
    free(per);
}

static void bad_input(const char *what)
{
    fprintf(stderr, "bench_halo_exchange_mpi: bad %s\n", what);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

static int size_ok(unsigned long long bytes)
{
    return bytes > 0 && bytes <= 0x3fffffffull && bytes % 8 == 0;
}

/* Points read from this rank's FIFO in dir until `quit` or end of file. */
static void serve(const char *dir, int reps)
{
    char path[4096], line[256], pat[16];
    int rank, np, fd;
    FILE *in = NULL;

    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    snprintf(path, sizeof(path), "%s/cmd.%d", dir, rank);
    /* Non-blocking open: with the bench gone (no writer) a plain open
     * would wait for one forever; reads then block again, and see end of
     * file once the bench is gone. */
    fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0 || fcntl(fd, F_SETFL, 0) != 0 || (in = fdopen(fd, "r")) == NULL)
        bad_input("--cmd directory: no FIFO for this rank");
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        printf("MPIHX ready np=%d\n", np);
        fflush(stdout);
    }
    while (fgets(line, sizeof(line), in) != NULL &&
           strcmp(line, "quit\n") != 0) {
        unsigned long long bytes;
        int iters, p;

        if (sscanf(line, "point %15s %llu %d", pat, &bytes, &iters) != 3 ||
            !size_ok(bytes) || iters < 1)
            bad_input("command");
        p = strcmp(pat, "ring") == 0 ? 0 : strcmp(pat, "half") == 0 ? 1 : -1;
        if (p < 0)
            bad_input("pattern");
        measure(p, (size_t)bytes, iters, reps);
    }
    fclose(in);
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
        if (reps < 1)
            bad_input("--reps");
        if (strcmp(argv[i], "--cmd") == 0 && i + 1 < argc) {
            serve(argv[++i], reps);
            continue;
        }
        if (sscanf(argv[i], "%llu:%d%n", &bytes, &iters, &used) != 2 ||
            argv[i][used] != '\0' || !size_ok(bytes) || iters < 1)
            bad_input("argument");
        for (int p = 0; p < 2; p++)
            measure(p, (size_t)bytes, iters, reps);
    }
    MPI_Finalize();
    return 0;
}
