/* bench_common.h. */
#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int bench_parse_rounds(int argc, char **argv, const char *name, int max_rounds,
                       bool *quick, int *rounds)
{
    *quick = false;
    *rounds = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            *quick = true;
        } else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
            *rounds = atoi(argv[++i]);
            if (*rounds < 1 || *rounds > max_rounds) {
                fprintf(stderr, "%s: rounds 1..%d\n", name, max_rounds);
                return -1;
            }
        } else {
            fprintf(stderr, "usage: %s [--quick] [--rounds K]\n", name);
            return -1;
        }
    }
    return 0;
}

void bench_print_load(double other_cpu_pct)
{
    if (other_cpu_pct >= 0)
        printf("other processes used %.1f %% of the machine's CPU "
               "meanwhile%s\n",
               other_cpu_pct,
               other_cpu_pct > 5 ? " (WARNING: numbers skewed)" : "");
}

void bench_json_num(const char *key, double v, bool comma)
{
    if (v < 0)
        printf("\"%s\":null", key);
    else
        printf("\"%s\":%.4f", key, v);
    if (comma)
        printf(",");
}

void bench_json_end(const char *note, const char *error)
{
    if (note && note[0] != '\0')
        printf(",\"note\":\"%s\"", note);
    if (error != NULL)
        printf(",\"error\":\"%s\"", error);
    printf("}\n");
    fflush(stdout);
}

double bench_now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double bench_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}
