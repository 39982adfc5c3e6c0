/* The checks a domain's window and comm buffers pass, local and global
 * alike. */
#ifndef DOMAIN_BUFFERS_H
#define DOMAIN_BUFFERS_H

#include <stddef.h>
#include <strata/domain.h>

/* STRATA_EINVAL, as "<kind> '<name>': ...", when a buffer has no name (or
 * one of 64 bytes or more), two share a name, a dtype is unknown, count x
 * dtype size is not nbytes (or overflows), a buffer is empty, or all of
 * them need more than window_size bytes; also for buffers NULL with n >
 * 0. kind: "domain" or "global domain". */
strata_err domain_check_buffers(const char *kind, const char *name,
                                const strata_comm_buffer_spec *buffers,
                                size_t n, size_t window_size);

/* The most bytes one process maps of a domain: every member maps every
 * rank's window, so ranks x window_size must fit (64 TiB, half of what a
 * 47-bit address space gives a process). */
#define DOMAIN_MAP_MAX (1ull << 46)

/* STRATA_EINVAL, as "<kind> '<name>': ...", when window_size is 0 or
 * ranks (> 0) windows of it are more than DOMAIN_MAP_MAX bytes. */
strata_err domain_check_window(const char *kind, const char *name,
                               size_t window_size, size_t ranks);

#endif
