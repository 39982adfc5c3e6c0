/* What bench_halo_exchange's measurement (main.c) and its report
 * (report.c: the human summary and the JSON line) share. */
#ifndef BENCH_HALO_EXCHANGE_H
#define BENCH_HALO_EXCHANGE_H

#include <stdbool.h>
#include <stddef.h>

#define NUM_N 2
#define NUM_SIZES 8
#define NUM_PAT 2
#define NUM_MODE 2
#define MAX_ROUNDS 9
#define HEAD_N 0    /* 2 ranks */
#define HEAD_P 0    /* ring */
#define HEAD_S 5    /* 1 MiB */
#define BIG_S 5     /* sizes from here on (>= 1 MiB) need 1.5x */
#define HEAD_MODE 1 /* halo */
#define TARGET_ALL 1.0
#define TARGET_BIG 1.5

extern const int chip_counts[NUM_N];
extern const size_t sizes[NUM_SIZES];
extern const char *const pat_names[NUM_PAT];
extern const char *const mode_names[NUM_MODE];

struct options {
    bool quick;
    int rounds, reps, min_iters, max_iters;
    size_t budget; /* bytes per rank per repetition: sets iters */
};

struct point {
    int iters;
    double us[NUM_MODE];    /* strata, per exchange, slowest rank, median */
    double mpi_us;          /* < 0: none; same work */
    double mpi_bare_us;     /* the call alone */
    double ratio[NUM_MODE]; /* mpi_us / us[m]: this round's, or the median
                               of the rounds'; < 0: none */
    double bare_ratio;      /* mpi_bare_us / us[halo], likewise */
};

struct results {
    struct point p[NUM_N][NUM_PAT][NUM_SIZES];
    bool mpi_ok[NUM_N];
    double other_cpu_pct;
    char mpi_note[512];
};

/* The summary table, the per-round lines (several rounds) and notes. */
void print_summary(const struct options *opt, const struct results *r,
                   const struct results *rounds);

/* The JSON line (last on stdout); error: NULL, or why the run stopped. */
void print_json(const struct options *opt, const struct results *r,
                const char *error);

#endif
