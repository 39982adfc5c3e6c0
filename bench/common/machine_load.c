#include "machine_load.h"

#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

static double tv_s(struct timeval tv)
{
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

void machine_load_sample(struct machine_load *out)
{
    unsigned long long v[8] = {0};
    struct rusage self, kids;
    FILE *f = fopen("/proc/stat", "r");

    out->busy = out->total = 0;
    if (f != NULL) {
        /* cpu user nice system idle iowait irq softirq steal */
        if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
                   &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) == 8) {
            out->busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
            out->total = out->busy + v[3] + v[4];
        }
        fclose(f);
    }
    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &kids);
    out->own_s = tv_s(self.ru_utime) + tv_s(self.ru_stime) +
                 tv_s(kids.ru_utime) + tv_s(kids.ru_stime);
}

double machine_load_other_pct(const struct machine_load *a,
                              const struct machine_load *b)
{
    double hz = (double)sysconf(_SC_CLK_TCK), other;

    if (a->total == 0 || b->total <= a->total || hz <= 0)
        return -1;
    other = (double)(b->busy - a->busy) - (b->own_s - a->own_s) * hz;
    if (other < 0)
        other = 0;
    return 100.0 * other / (double)(b->total - a->total);
}
