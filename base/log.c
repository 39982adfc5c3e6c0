/* Logging: the level is read from STRATA_LOG once per process. */
#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int level = -1;
static char role[32] = "l3";

static int parse_level(void)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    const char *env = getenv("STRATA_LOG");

    if (!env)
        return BASE_LOG_WARN;
    for (int i = 0; i < 4; i++)
        if (strcmp(env, names[i]) == 0)
            return i;
    return BASE_LOG_WARN;
}

int base_log_enabled(enum base_log_level lvl)
{
    int cur = __atomic_load_n(&level, __ATOMIC_RELAXED);

    if (cur < 0) {
        cur = parse_level();
        __atomic_store_n(&level, cur, __ATOMIC_RELAXED);
    }
    return (int)lvl <= cur;
}

void base_log_set_role(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(role, sizeof(role), fmt, ap);
    va_end(ap);
}

void base_log(enum base_log_level lvl, const char *fmt, ...)
{
    static const char *const tags[] = {"error", "warn", "info", "debug"};
    char line[1024];
    int n;
    va_list ap;

    n = snprintf(line, sizeof(line), "strata %s[%d] %s: ", role, (int)getpid(),
                 tags[lvl]);
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    va_end(ap);
    /* One write per line keeps lines from different processes whole. */
    n = (int)strlen(line);
    if (n > (int)sizeof(line) - 2)
        n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    if (write(STDERR_FILENO, line, (size_t)n) < 0)
        return;
}
