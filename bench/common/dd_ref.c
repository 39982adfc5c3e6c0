/* dd_ref.h: dd in a child, its output thrown away, timed from fork to
 * reaping. */
#include "dd_ref.h"

#include "bench_common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static double run_dd(char *const argv[])
{
    double t0 = bench_now_s();
    int status;
    pid_t pid = fork();

    if (pid < 0)
        return -1;
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);

        if (null >= 0) {
            dup2(null, 1);
            dup2(null, 2);
        }
        execvp("dd", argv);
        _exit(127);
    }
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return -1;
    return bench_now_s() - t0;
}

double dd_ref_write(const char *path, unsigned mib)
{
    char of[700], count[32], dd[] = "dd", in[] = "if=/dev/zero", bs[] = "bs=1M",
                             flag[] = "oflag=direct", conv[] = "conv=notrunc";

    snprintf(of, sizeof(of), "of=%s", path);
    snprintf(count, sizeof(count), "count=%u", mib);
    return run_dd((char *[]){dd, in, of, bs, count, flag, conv, NULL});
}

double dd_ref_read(const char *path, unsigned mib)
{
    char in[700], count[32], dd[] = "dd", of[] = "of=/dev/null", bs[] = "bs=1M",
                             flag[] = "iflag=direct";

    snprintf(in, sizeof(in), "if=%s", path);
    snprintf(count, sizeof(count), "count=%u", mib);
    return run_dd((char *[]){dd, in, of, bs, count, flag, NULL});
}
