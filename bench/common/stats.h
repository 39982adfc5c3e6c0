/* Small statistics helpers for bench_dispatch. */
#ifndef BENCH_STATS_H
#define BENCH_STATS_H

#include <stddef.h>

struct stats_line {
    double intercept;
    double slope;
    double r2; /* (weighted) coefficient of determination */
};

/* Median of v[0..n) (n > 0); reorders v. */
double stats_median(double *v, size_t n);

/* Least-squares line y = intercept + slope * x through n >= 2 points,
 * minimizing sum(w[i] * residual[i]^2); w == NULL weighs all points 1. */
void stats_fit_line(const double *x, const double *y, const double *w, size_t n,
                    struct stats_line *out);

#endif
