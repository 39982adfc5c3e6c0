/* How busy the rest of the machine was while a benchmark ran: the CPU time
 * every process used (from /proc/stat) minus this process's and its
 * reaped descendants' (getrusage). On a shared two-core machine a
 * concurrent build or test run skews every number; the benchmarks report
 * this share so that a reader can discard such runs. Shared by
 * bench/domain_alloc and bench/allreduce. */
#ifndef BENCH_MACHINE_LOAD_H
#define BENCH_MACHINE_LOAD_H

struct machine_load {
    unsigned long long busy, total; /* jiffies over all CPUs */
    double own_s;                   /* this process + reaped descendants */
};

/* A sample; fields are 0 where /proc/stat cannot be read. */
void machine_load_sample(struct machine_load *out);

/* Percent of the machine's CPU capacity (all CPUs) that other processes
 * used between two samples; -1 when unknown. */
double machine_load_other_pct(const struct machine_load *a,
                              const struct machine_load *b);

#endif
