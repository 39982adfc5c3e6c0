/* Starting an MPI reference helper from a strata benchmark.
 *
 * A strata benchmark forks chip processes, so it never initializes MPI
 * itself. It runs a small helper executable under `mpirun` instead and
 * reads the helper's result lines through a pipe. Shared by
 * bench/domain_alloc and bench/allreduce. */
#ifndef BENCH_MPI_LAUNCH_H
#define BENCH_MPI_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>

/* Called for every stdout line of the job that starts with the prefix
 * given to mpi_launch (the newline removed). Nonzero stops reading and
 * fails the launch. */
typedef int (*mpi_line_fn)(const char *line, void *user);

/* The path of helper `name` next to the running executable (or
 * $BENCH_MPI_HELPER_DIR/name when that is set) in buf. False when the
 * helper is not there or was not built (the build had no MPI). */
bool mpi_helper_path(const char *name, char *buf, size_t cap);

/* True when STRATA_PIN asks strata to bind its chips one per CPU (it does
 * when they fit): mpi_launch then binds ranks that fit the same way. */
bool mpi_launch_pinned(void);

/* The mpirun command and its options for np ranks, as every bench runs
 * it (see mpi_launch), into argv[0..k); returns k. np_buf holds np's
 * digits for argv. */
#define MPI_LAUNCH_PREFIX_MAX 10
int mpi_launch_prefix(int np, char np_buf[16], const char **argv);

/* Runs `mpirun --oversubscribe --bind-to none -np np helper args` (with
 * `--bind-to core --map-by core` instead when mpi_launch_pinned() and np
 * ranks fit the online CPUs, --allow-run-as-root as root; $BENCH_MPIRUN
 * overrides the mpirun path),
 * killed after timeout_s, and passes each stdout line that starts with
 * prefix to fn. Returns 0 when the job exited 0 and fn accepted every
 * line; otherwise -1 with a one-line reason in why (the job's last output
 * lines go to stderr). */
int mpi_launch(const char *helper, int np, const char *args, double timeout_s,
               const char *prefix, mpi_line_fn fn, void *user, char *why,
               size_t why_cap);

#endif
