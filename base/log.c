/* Logging: the level is read from STRATA_LOG once per process. */
#include "base/log.h"

#include <stdarg.h>
#include <stdint.h>
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

/* Length of the well-formed UTF-8 sequence at p that encodes a printable
 * character (not a C1 control, U+2028 or U+2029, which some terminals and
 * log viewers take for controls or line ends), or 0. */
static size_t printable_utf8(const unsigned char *p)
{
    uint32_t cp;
    size_t n;

    if (p[0] >= 0x20 && p[0] < 0x7f)
        return 1;
    if (p[0] >= 0xc2 && p[0] <= 0xdf)
        n = 2, cp = p[0] & 0x1fu;
    else if (p[0] >= 0xe0 && p[0] <= 0xef)
        n = 3, cp = p[0] & 0x0fu;
    else if (p[0] >= 0xf0 && p[0] <= 0xf4)
        n = 4, cp = p[0] & 0x07u;
    else
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) /* the NUL ends it too */
            return 0;
        cp = cp << 6 | (p[i] & 0x3fu);
    }
    /* Overlong, surrogates, past U+10FFFF, controls and line breaks. */
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
        (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff || cp < 0xa0 ||
        cp == 0x2028 || cp == 0x2029)
        return 0;
    return n;
}

/* Copies the formatted text into out (cap bytes, room for a newline
 * left), every byte that is not part of a printable character written as
 * \xNN: a name a peer chose (a node's, a profile) cannot start a forged
 * line or move the terminal. */
static size_t copy_escaped(char *out, size_t cap, const char *text)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)text;
    size_t n = 0;

    while (*p) {
        size_t k = printable_utf8(p);

        if (k) {
            if (n + k >= cap)
                break;
            memcpy(out + n, p, k);
            n += k;
            p += k;
            continue;
        }
        if (n + 4 >= cap)
            break;
        out[n++] = '\\';
        out[n++] = 'x';
        out[n++] = hex[*p >> 4];
        out[n++] = hex[*p & 15];
        p++;
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
