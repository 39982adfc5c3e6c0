/* Pieces every benchmark prints or parses the same way (bench/common). */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <stdbool.h>

/* Parses [--quick] [--rounds K] (1 <= K <= max_rounds); *rounds is 0 when
 * not given. Prints the usage to stderr and returns -1 on anything else. */
int bench_parse_rounds(int argc, char **argv, const char *name, int max_rounds,
                       bool *quick, int *rounds);
/* "other processes used N % of the machine's CPU meanwhile", with a
 * warning above 5 %; nothing for a negative value (not measured). */
void bench_print_load(double other_cpu_pct);
/* "key":v, or "key":null for a negative v; a comma after when asked. */
void bench_json_num(const char *key, double v, bool comma);
/* Ends the JSON line: ,"note":.. when note is not empty, ,"error":.. when
 * error is not NULL, then the closing brace; flushes stdout. */
void bench_json_end(const char *note, const char *error);
/* Monotonic seconds, and microseconds. */
double bench_now_s(void);
double bench_now_us(void);

#endif
