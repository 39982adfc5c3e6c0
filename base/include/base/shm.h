/* Space in the shared memory file system (/dev/shm) for segments we
 * create: checked and reserved at creation, so that running out is an
 * error there and not a SIGBUS when a far page is first touched. */
#ifndef BASE_SHM_H
#define BASE_SHM_H

#include <stddef.h>
#include <stdint.h>
#include <strata/strata.h>

/* Bytes /dev/shm has free now (what fstatvfs/statvfs reports available);
 * UINT64_MAX for a file system without a size limit (tmpfs size=0 reports
 * no blocks) or one that cannot be asked. fd: a segment of it, or -1 to
 * ask about /dev/shm itself. */
uint64_t base_shm_free_bytes(int fd);

/* STRATA_ENOMEM naming what and both sizes when size bytes do not fit in
 * the space /dev/shm has free now; STRATA_OK otherwise (nothing taken). A
 * file system without a size limit is checked against the memory the
 * system has available. */
strata_err base_shm_check(size_t size, const char *what);

/* Sizes fd (a segment) to at least size bytes and gives its first size
 * bytes pages now (posix_fallocate, retried on EINTR): STRATA_ENOMEM
 * naming what, the size and the free space when /dev/shm or memory runs
 * out (checked first, so nothing is taken for what cannot fit); STRATA_ESYS
 * for another failure. Contents are unchanged (a new segment still reads
 * as zeros). On failure the caller unlinks the segment, which returns
 * whatever was taken. */
strata_err base_shm_reserve(int fd, size_t size, const char *what);

#endif
