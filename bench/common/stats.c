#include "stats.h"

#include <stdlib.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

double stats_median(double *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_double);
    if (n % 2 == 1)
        return v[n / 2];
    return (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

void stats_fit_line(const double *x, const double *y, const double *w, size_t n,
                    struct stats_line *out)
{
    double sw = 0, mx = 0, my = 0, sxx = 0, sxy = 0, syy = 0;

    for (size_t i = 0; i < n; i++) {
        double wi = w ? w[i] : 1.0;
        sw += wi;
        mx += wi * x[i];
        my += wi * y[i];
    }
    mx /= sw;
    my /= sw;
    for (size_t i = 0; i < n; i++) {
        double wi = w ? w[i] : 1.0;
        sxx += wi * (x[i] - mx) * (x[i] - mx);
        sxy += wi * (x[i] - mx) * (y[i] - my);
        syy += wi * (y[i] - my) * (y[i] - my);
    }
    out->slope = sxx > 0 ? sxy / sxx : 0;
    out->intercept = my - out->slope * mx;
    out->r2 = (sxx > 0 && syy > 0) ? (sxy * sxy) / (sxx * syy) : 1.0;
}
