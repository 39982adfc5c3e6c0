/* Error helpers shared by every module: set the thread-local detail once,
 * where a failure is first seen, and propagate the code. */
#ifndef BASE_ERR_H
#define BASE_ERR_H

#include <strata/strata.h>

/* Records fmt as the thread's detail and returns err, so a failure site can
 * write `return base_fail(STRATA_EINVAL, "chip %d unknown", id);`. */
strata_err base_fail(strata_err err, const char *fmt, ...) STRATA_PRINTF(2, 3);
/* Like base_fail for a failed system call: appends ": <strerror(errnum)>"
 * and maps errnum (ENOMEM -> STRATA_ENOMEM, else STRATA_ESYS). */
strata_err base_fail_errno(int errnum, const char *fmt, ...)
    STRATA_PRINTF(2, 3);
/* STRATA_EINVAL "fn: arg is NULL": how a public function refuses a NULL
 * where it needs an object (docs/errors.md). */
strata_err base_fail_null(const char *fn, const char *arg);
/* Clears the thread's detail. */
void base_errmsg_clear(void);
/* Prepends "prefix: " to the thread's detail (context added by a caller). */
void base_errmsg_prefix(const char *fmt, ...) STRATA_PRINTF(1, 2);

#endif
