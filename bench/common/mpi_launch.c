#include "mpi_launch.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef BENCH_MPIEXEC
#define BENCH_MPIEXEC "mpirun"
#endif

#define TAIL_LINES 8
#define LINE_MAX_LEN 1024

bool mpi_helper_path(const char *name, char *buf, size_t cap)
{
    const char *dir = getenv("BENCH_MPI_HELPER_DIR");
    char self[PATH_MAX];
    int n;

    if (dir != NULL && dir[0] != '\0') {
        n = snprintf(buf, cap, "%s/%s", dir, name);
    } else {
        ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
        char *slash;

        if (len <= 0)
            return false;
        self[len] = '\0';
        slash = strrchr(self, '/');
        if (slash == NULL)
            return false;
        *slash = '\0';
        n = snprintf(buf, cap, "%s/%s", self, name);
    }
    return n > 0 && (size_t)n < cap && access(buf, X_OK) == 0;
}

/* A path goes into a shell command inside single quotes. */
static bool shell_safe(const char *s)
{
    return strchr(s, '\'') == NULL;
}

bool mpi_launch_pinned(void)
{
    const char *env = getenv("STRATA_PIN");

    return env && env[0] && strcmp(env, "0") != 0;
}

int mpi_launch_prefix(int np, char np_buf[16], const char **argv)
{
    const char *mpirun = getenv("BENCH_MPIRUN");
    int a = 0;

    if (mpirun == NULL || mpirun[0] == '\0')
        mpirun = BENCH_MPIEXEC;
    snprintf(np_buf, 16, "%d", np);
    argv[a++] = mpirun;
    argv[a++] = "--oversubscribe";
    /* Bound like strata's chips: --bind-to none unless STRATA_PIN binds
     * them one per core, in order, which it does when they fit; then rank
     * r goes to core r the same way. */
    argv[a++] = "--bind-to";
    if (mpi_launch_pinned() && np <= sysconf(_SC_NPROCESSORS_ONLN)) {
        argv[a++] = "core";
        argv[a++] = "--map-by";
        argv[a++] = "core";
    } else {
        argv[a++] = "none";
    }
    if (geteuid() == 0)
        argv[a++] = "--allow-run-as-root";
    argv[a++] = "-np";
    argv[a++] = np_buf;
    return a;
}

int mpi_launch(const char *helper, int np, const char *args, double timeout_s,
               const char *prefix, mpi_line_fn fn, void *user, char *why,
               size_t why_cap)
{
    const char *pre[MPI_LAUNCH_PREFIX_MAX];
    char cmd[4096], opts[256] = "", np_s[16], line[LINE_MAX_LEN];
    char tail[TAIL_LINES][LINE_MAX_LEN];
    size_t ntail = 0, plen = strlen(prefix);
    int status, stopped = 0, k = mpi_launch_prefix(np, np_s, pre);
    FILE *p;

    if (!shell_safe(pre[0]) || !shell_safe(helper)) {
        snprintf(why, why_cap, "a quote in the mpirun or helper path");
        return -1;
    }
    for (int i = 1; i < k; i++) { /* plain words: no quoting needed */
        strncat(opts, pre[i], sizeof(opts) - strlen(opts) - 1);
        strncat(opts, " ", sizeof(opts) - strlen(opts) - 1);
    }
    /* stderr joins stdout so that a failure can be shown. `timeout`
     * (coreutils) bounds a job that hangs; without it the job runs
     * unbounded. In a sanitizer build, Open MPI's own leaks would fail
     * the helper at exit. */
    snprintf(cmd, sizeof(cmd),
             "if command -v timeout >/dev/null 2>&1; then "
             "T='timeout -k 5 %d'; else T=; fi; "
             "export ASAN_OPTIONS=\"${ASAN_OPTIONS:-detect_leaks=0}\"; "
             "exec $T '%s' %s'%s' %s 2>&1 </dev/null",
             (int)(timeout_s + 0.5), pre[0], opts, helper, args);
    fflush(stdout);
    fflush(stderr);
    p = popen(cmd, "r");
    if (p == NULL) {
        snprintf(why, why_cap, "popen of mpirun failed");
        return -1;
    }
    while (fgets(line, sizeof(line), p) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, prefix, plen) == 0) {
            if (!stopped && fn(line, user) != 0) {
                stopped = 1;
                snprintf(why, why_cap, "unparseable helper line: %.200s", line);
            }
            continue;
        }
        snprintf(tail[ntail % TAIL_LINES], LINE_MAX_LEN, "%s", line);
        ntail++;
    }
    status = pclose(p);
    if (stopped == 0 &&
        (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
        int code = status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;

        snprintf(why, why_cap, "mpirun -np %d exited with status %d%s", np,
                 code, code == 124 || code == 137 ? " (timed out)" : "");
        stopped = 1;
    }
    if (stopped) {
        size_t first = ntail > TAIL_LINES ? ntail - TAIL_LINES : 0;

        fprintf(stderr, "mpirun output (last lines):\n");
        for (size_t i = first; i < ntail; i++)
            fprintf(stderr, "  | %s\n", tail[i % TAIL_LINES]);
        return -1;
    }
    return 0;
}
