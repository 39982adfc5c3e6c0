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

/* Copies the formatted text into out (cap bytes, room for a newline
 * left), control characters written as \xNN: a name a peer chose (a
 * node's, a profile) cannot start a forged line or move the terminal. */
static size_t copy_escaped(char *out, size_t cap, const char *text)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;

    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        if (*p >= 0x20 && *p != 0x7f) {
            if (n + 1 >= cap)
                break;
            out[n++] = (char)*p;
            continue;
        }
        if (n + 4 >= cap)
            break;
        out[n++] = '\\';
        out[n++] = 'x';
        out[n++] = hex[*p >> 4];
        out[n++] = hex[*p & 15];
    }
    return n;
}

void base_log(enum base_log_level lvl, const char *fmt, ...)
{
    static const char *const tags[] = {"error", "warn", "info", "debug"};
    char text[1024], line[1024];
    int n;
    va_list ap;

    n = snprintf(line, sizeof(line), "strata %s[%d] %s: ", role, (int)getpid(),
                 tags[lvl]);
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    n += (int)copy_escaped(line + n, sizeof(line) - 1 - (size_t)n, text);
    /* One write per line keeps lines from different processes whole. */
    line[n++] = '\n';
    if (write(STDERR_FILENO, line, (size_t)n) < 0)
        return;
}
