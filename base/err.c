/* Error codes, their names and text, and the thread-local detail message. */
#include "base/err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char errmsg[STRATA_ERRMSG_MAX];

const char *strata_strerror(strata_err err)
{
    switch (err) {
#define TEXT_(name, value, text)                                               \
    case name:                                                                 \
        return text;
        STRATA_ERRORS(TEXT_)
#undef TEXT_
    }
    return "unknown error";
}

const char *strata_errname(strata_err err)
{
    switch (err) {
#define NAME_(name, value, text)                                               \
    case name:                                                                 \
        return #name;
        STRATA_ERRORS(NAME_)
#undef NAME_
    }
    return "STRATA_E?";
}

const char *strata_errmsg(void)
{
    return errmsg;
}

/* Through a copy: a caller may pass strata_errmsg() itself as an
 * argument, to add context to the detail it replaces. */
STRATA_PRINTF(1, 0) static void vset(const char *fmt, va_list ap)
{
    char tmp[STRATA_ERRMSG_MAX];

    vsnprintf(tmp, sizeof(tmp), fmt, ap);
    memcpy(errmsg, tmp, sizeof(errmsg));
}

void strata_errmsg_set(const char *fmt, ...)
{
    va_list ap;

    if (!fmt) { /* no text: no message */
        errmsg[0] = '\0';
        return;
    }
    va_start(ap, fmt);
    vset(fmt, ap);
    va_end(ap);
}

void base_errmsg_clear(void)
{
    errmsg[0] = '\0';
}

strata_err base_fail(strata_err err, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vset(fmt, ap);
    va_end(ap);
    return err;
}

strata_err base_fail_errno(int errnum, const char *fmt, ...)
{
    va_list ap;
    size_t len;

    va_start(ap, fmt);
    vset(fmt, ap);
    va_end(ap);
    len = strlen(errmsg);
    snprintf(errmsg + len, sizeof(errmsg) - len, ": %s", strerror(errnum));
    return errnum == ENOMEM ? STRATA_ENOMEM : STRATA_ESYS;
}

strata_err base_fail_null(const char *fn, const char *arg)
{
    return base_fail(STRATA_EINVAL, "%s: %s is NULL", fn, arg);
}

void base_errmsg_prefix(const char *fmt, ...)
{
    char old[STRATA_ERRMSG_MAX];
    size_t len;
    va_list ap;

    memcpy(old, errmsg, sizeof(old));
    va_start(ap, fmt);
    vset(fmt, ap);
    va_end(ap);
    len = strlen(errmsg);
    snprintf(errmsg + len, sizeof(errmsg) - len, ": %s", old);
}
