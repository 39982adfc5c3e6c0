/* A long-lived MPI reference job for bench_halo_exchange, driven point by
 * point so that each MPI measurement sits right beside the strata one it
 * is compared with.
 *
 * mpi_session_open starts `mpirun -np W bench_halo_exchange_mpi --reps R
 * --cmd DIR` once per rank count and round. Each rank reads its commands
 * from its own named FIFO DIR/cmd.<rank> in a blocking read(), so between
 * points no rank uses the CPU (Open MPI's blocking collectives busy-poll,
 * which would steal a core from the strata side). Rank 0 answers each
 * point with one `MPIHX ...` line on stdout, which mpirun forwards to us.
 * The FIFOs are unlinked, with their directory, as soon as every rank has
 * opened its own: the open descriptors keep them working and nothing is
 * left in /tmp if the bench is killed afterwards; if it is, the ranks read
 * end-of-file and exit. */
#ifndef BENCH_HX_MPI_SESSION_H
#define BENCH_HX_MPI_SESSION_H

#include <stddef.h>
#include <sys/types.h>

#define MPI_SESSION_MAX_RANKS 8
#define MPI_SESSION_TAIL 8
#define MPI_SESSION_LINE 1024

struct mpi_session {
    pid_t pid;  /* mpirun; 0 when none */
    int out_fd; /* mpirun's stdout and stderr; -1 when closed */
    int np;     /* ranks */
    int cmd_fd[MPI_SESSION_MAX_RANKS]; /* FIFO per rank, -1 when closed */
    char dir[64];                      /* FIFO directory; "" once removed */
    char buf[4 * MPI_SESSION_LINE];    /* unread output */
    size_t len;                        /* bytes in buf */
    char tail[MPI_SESSION_TAIL][MPI_SESSION_LINE]; /* other output lines */
    size_t ntail;
};

/* One point's answer: time per exchange (us), same work and bare call. */
struct mpi_session_result {
    double us, bare_us;
};

/* Starts the helper at path `helper` on np ranks (bound like strata's
 * chips, see mpi_launch_pinned) with `reps` repetitions per point, and
 * waits up to timeout_s for every rank to be ready. Returns 0, or -1 with
 * a one-line reason in why and nothing left running or on disk. */
int mpi_session_open(struct mpi_session *s, const char *helper, int np,
                     int reps, double timeout_s, char *why, size_t why_cap);

/* Measures one point (pattern "ring" or "half", bytes per neighbour,
 * iters exchanges per repetition) and waits up to timeout_s for its
 * answer. Returns 0 with *out filled, or -1 with a reason in why; after a
 * failure only mpi_session_close may be called. */
int mpi_session_point(struct mpi_session *s, const char *pattern, size_t bytes,
                      int iters, double timeout_s,
                      struct mpi_session_result *out, char *why,
                      size_t why_cap);

/* Tells the ranks to finish (or, with kill_now, terminates the job), waits
 * for mpirun and removes what open made. Returns 0 when the job exited
 * cleanly, else -1 with a reason in why (the job's last output lines go to
 * stderr). Safe on a closed or never-opened (zeroed, pid 0) session. */
int mpi_session_close(struct mpi_session *s, int kill_now, char *why,
                      size_t why_cap);

#endif
