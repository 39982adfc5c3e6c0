/* mpi_session.h. */
#include "mpi_session.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"
#include "mpi_launch.h"

#define PREFIX "MPIHX "
#define CLOSE_WAIT_S 30.0
#define KILL_WAIT_S 5.0

static void fifo_path(const struct mpi_session *s, int r, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/cmd.%d", s->dir, r);
}

/* Unlinks the FIFOs and their directory (idempotent). */
static void remove_dir(struct mpi_session *s)
{
    char path[128];

    if (s->dir[0] == '\0')
        return;
    for (int r = 0; r < s->np; r++) {
        fifo_path(s, r, path, sizeof(path));
        unlink(path);
    }
    rmdir(s->dir);
    s->dir[0] = '\0';
}

static void close_fifos(struct mpi_session *s)
{
    for (int r = 0; r < MPI_SESSION_MAX_RANKS; r++) {
        if (s->cmd_fd[r] >= 0)
            close(s->cmd_fd[r]);
        s->cmd_fd[r] = -1;
    }
}

/* The directory and one FIFO per rank, each held open read-write: a
 * FIFO's open then never blocks, and the ranks' reads see end-of-file
 * only when this process is gone. */
static int make_fifos(struct mpi_session *s, char *why, size_t why_cap)
{
    char path[128];

    snprintf(s->dir, sizeof(s->dir), "/tmp/strata-hx-XXXXXX");
    if (mkdtemp(s->dir) == NULL) {
        snprintf(why, why_cap, "mkdtemp: %s", strerror(errno));
        s->dir[0] = '\0';
        return -1;
    }
    for (int r = 0; r < s->np; r++) {
        fifo_path(s, r, path, sizeof(path));
        if (mkfifo(path, 0600) != 0 ||
            (s->cmd_fd[r] = open(path, O_RDWR | O_CLOEXEC)) < 0) {
            snprintf(why, why_cap, "FIFO %s: %s", path, strerror(errno));
            return -1;
        }
    }
    return 0;
}

/* mpirun's argument vector, bound like mpi_launch binds. */
static void build_argv(const char *helper, int np, int reps, const char *dir,
                       char *np_s, char *reps_s, const char **argv)
{
    int a = mpi_launch_prefix(np, np_s, argv);

    snprintf(reps_s, 16, "%d", reps);
    argv[a++] = helper;
    argv[a++] = "--reps";
    argv[a++] = reps_s;
    argv[a++] = "--cmd";
    argv[a++] = dir;
    argv[a] = NULL;
}

static int spawn(struct mpi_session *s, const char *helper, int reps, char *why,
                 size_t why_cap)
{
    const char *argv[20];
    char *exec_argv[20], np_s[16], reps_s[16];
    int out[2], null_fd;

    build_argv(helper, s->np, reps, s->dir, np_s, reps_s, argv);
    memcpy(exec_argv, argv, sizeof(exec_argv)); /* execvp's type, not const */
    if (pipe(out) != 0) {
        snprintf(why, why_cap, "pipe: %s", strerror(errno));
        return -1;
    }
    /* Chips forked later inherit the read end; exec'd programs do not. */
    fcntl(out[0], F_SETFD, FD_CLOEXEC);
    /* In a sanitizer build, Open MPI's own leaks would fail the helper at
     * exit. The child only execs: set it here, before the fork. */
    setenv("ASAN_OPTIONS", "detect_leaks=0", 0);
    fflush(stdout);
    fflush(stderr);
    s->pid = fork();
    if (s->pid == 0) {
        null_fd = open("/dev/null", O_RDONLY);
        if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(out[1], 1) < 0 ||
            dup2(out[1], 2) < 0)
            _exit(127);
        execvp(exec_argv[0], exec_argv);
        if (write(2, "cannot execute ", 15) > 0 &&
            write(2, exec_argv[0], strlen(exec_argv[0])) > 0)
            (void)write(2, "\n", 1);
        _exit(127);
    }
    close(out[1]);
    if (s->pid < 0) {
        snprintf(why, why_cap, "fork: %s", strerror(errno));
        s->pid = 0;
        close(out[0]);
        return -1;
    }
    s->out_fd = out[0];
    return 0;
}

/* src into dst of cap > 0 bytes, cut short if it must. */
static void copy_line(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);

    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* The next output line that starts with PREFIX into line (others are
 * kept in the tail); -1 with a reason on end of output or timeout. */
static int next_line(struct mpi_session *s, double timeout_s, char *line,
                     size_t cap, char *why, size_t why_cap)
{
    double deadline = bench_now_s() + timeout_s;

    for (;;) {
        char *nl = memchr(s->buf, '\n', s->len);
        struct pollfd pfd = {s->out_fd, POLLIN, 0};
        double left = deadline - bench_now_s();
        ssize_t n;

        if (nl != NULL) {
            size_t used = (size_t)(nl - s->buf) + 1;

            *nl = '\0';
            if (strncmp(s->buf, PREFIX, strlen(PREFIX)) == 0) {
                copy_line(line, cap, s->buf);
            } else {
                copy_line(s->tail[s->ntail % MPI_SESSION_TAIL],
                          MPI_SESSION_LINE, s->buf);
                s->ntail++;
                line[0] = '\0';
            }
            memmove(s->buf, s->buf + used, s->len - used);
            s->len -= used;
            if (line[0] != '\0')
                return 0;
            continue;
        }
        if (s->len == sizeof(s->buf)) /* an endless line: keep its end */
            s->len = 0;
        if (left <= 0) {
            snprintf(why, why_cap, "no answer from mpirun in %.0f s",
                     timeout_s);
            return -1;
        }
        if (poll(&pfd, 1, (int)(left * 1000) + 1) < 0 && errno != EINTR) {
            snprintf(why, why_cap, "poll: %s", strerror(errno));
            return -1;
        }
        if ((pfd.revents & (POLLIN | POLLHUP | POLLERR)) == 0)
            continue;
        n = read(s->out_fd, s->buf + s->len, sizeof(s->buf) - s->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            snprintf(why, why_cap, "mpirun -np %d ended early", s->np);
            return -1;
        }
        s->len += (size_t)n;
    }
}

int mpi_session_open(struct mpi_session *s, const char *helper, int np,
                     int reps, double timeout_s, char *why, size_t why_cap)
{
    char line[MPI_SESSION_LINE], want[64];

    line[0] = '\0';
    memset(s, 0, sizeof(*s));
    s->out_fd = -1;
    s->np = np;
    for (int r = 0; r < MPI_SESSION_MAX_RANKS; r++)
        s->cmd_fd[r] = -1;
    if (np < 1 || np > MPI_SESSION_MAX_RANKS) {
        snprintf(why, why_cap, "%d ranks: 1..%d supported", np,
                 MPI_SESSION_MAX_RANKS);
        return -1;
    }
    if (make_fifos(s, why, why_cap) != 0 ||
        spawn(s, helper, reps, why, why_cap) != 0) {
        close_fifos(s);
        remove_dir(s);
        return -1;
    }
    snprintf(want, sizeof(want), PREFIX "ready np=%d", np);
    if (next_line(s, timeout_s, line, sizeof(line), why, why_cap) != 0 ||
        strcmp(line, want) != 0) {
        char again[400];

        if (line[0] != '\0' && strcmp(line, want) != 0)
            snprintf(why, why_cap, "unexpected helper line: %.200s", line);
        mpi_session_close(s, 1, again, sizeof(again));
        return -1;
    }
    /* Every rank holds its FIFO open: the names are no longer needed. */
    remove_dir(s);
    return 0;
}

static int write_all(int fd, const char *msg, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, msg, len);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        msg += n;
        len -= (size_t)n;
    }
    return 0;
}

static int send_all(struct mpi_session *s, const char *cmd)
{
    for (int r = 0; r < s->np; r++)
        if (s->cmd_fd[r] < 0 || write_all(s->cmd_fd[r], cmd, strlen(cmd)) != 0)
            return -1;
    return 0;
}

int mpi_session_point(struct mpi_session *s, const char *pattern, size_t bytes,
                      int iters, double timeout_s,
                      struct mpi_session_result *out, char *why, size_t why_cap)
{
    char cmd[128], line[MPI_SESSION_LINE], pat[16];
    size_t got_bytes;
    int np, got_iters, reps, ok;

    snprintf(cmd, sizeof(cmd), "point %s %zu %d\n", pattern, bytes, iters);
    line[0] = '\0';
    if (send_all(s, cmd) != 0) {
        snprintf(why, why_cap, "write to the helper's FIFO: %s",
                 strerror(errno));
        return -1;
    }
    if (next_line(s, timeout_s, line, sizeof(line), why, why_cap) != 0)
        return -1;
    if (sscanf(line,
               PREFIX "pattern=%15s bytes=%zu np=%d iters=%d reps=%d us=%lf "
                      "bare_us=%lf ok=%d",
               pat, &got_bytes, &np, &got_iters, &reps, &out->us, &out->bare_us,
               &ok) != 8 ||
        strcmp(pat, pattern) != 0 || got_bytes != bytes || np != s->np ||
        got_iters != iters || ok != 1 || out->us <= 0 || out->bare_us <= 0) {
        snprintf(why, why_cap, "unexpected helper line: %.200s", line);
        return -1;
    }
    return 0;
}

/* Waits up to wait_s for mpirun to exit; its status, or -1 if it did not. */
static int reap(pid_t pid, double wait_s, int *status)
{
    double deadline = bench_now_s() + wait_s;

    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        struct timespec ts = {0, 20 * 1000 * 1000};

        if (r == pid)
            return 0;
        if (r < 0 && errno != EINTR)
            return -1;
        if (bench_now_s() >= deadline)
            return -1;
        nanosleep(&ts, NULL);
    }
}

/* Reads and keeps the rest of mpirun's output until it closes or wait_s
 * passed. */
static void drain(struct mpi_session *s, double wait_s)
{
    char line[MPI_SESSION_LINE], why[64];

    while (s->out_fd >= 0 &&
           next_line(s, wait_s, line, sizeof(line), why, sizeof(why)) == 0)
        ;
}

static void print_tail(const struct mpi_session *s)
{
    size_t first =
        s->ntail > MPI_SESSION_TAIL ? s->ntail - MPI_SESSION_TAIL : 0;

    fprintf(stderr, "mpirun output (last lines):\n");
    for (size_t i = first; i < s->ntail; i++)
        fprintf(stderr, "  | %s\n", s->tail[i % MPI_SESSION_TAIL]);
}

int mpi_session_close(struct mpi_session *s, int kill_now, char *why,
                      size_t why_cap)
{
    int status = 0, rc = 0;

    if (s->pid <= 0)
        return 0;
    if (kill_now || send_all(s, "quit\n") != 0) {
        kill(s->pid, SIGTERM);
        rc = -1;
    }
    close_fifos(s);
    drain(s, kill_now ? KILL_WAIT_S : CLOSE_WAIT_S);
    if (reap(s->pid, KILL_WAIT_S, &status) != 0) {
        kill(s->pid, SIGKILL);
        if (reap(s->pid, KILL_WAIT_S, &status) != 0)
            status = -1;
        snprintf(why, why_cap, "mpirun -np %d did not exit; killed", s->np);
        rc = -1;
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(why, why_cap, "mpirun -np %d exited with status %d", s->np,
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        rc = -1;
    } else if (rc != 0) {
        snprintf(why, why_cap, "mpirun -np %d stopped", s->np);
    }
    if (rc != 0)
        print_tail(s);
    close(s->out_fd);
    s->out_fd = -1;
    s->pid = 0;
    remove_dir(s);
    return rc;
}
