/* Space in /dev/shm: checked before and reserved at segment creation. */
#include "base/shm.h"
#include "base/err.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/statvfs.h>
#include <sys/sysinfo.h>

#define SHM_DIR "/dev/shm"

uint64_t base_shm_free_bytes(int fd)
{
    struct statvfs vfs;

    if ((fd >= 0 ? fstatvfs(fd, &vfs) : statvfs(SHM_DIR, &vfs)) != 0 ||
        vfs.f_frsize == 0 || vfs.f_blocks == 0)
        return UINT64_MAX;
    return (uint64_t)vfs.f_bavail * vfs.f_frsize;
}

/* MemAvailable plus free swap: what a tmpfs without a size limit can still
 * take before the system runs out; 0 when unknown. */
static uint64_t mem_available(void)
{
    unsigned long long kib, avail = 0, swap = 0;
    char line[128];
    FILE *f = fopen("/proc/meminfo", "re");
    struct sysinfo si;

    if (f) {
        while (fgets(line, sizeof(line), f)) {
            if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
                avail = kib << 10;
            else if (sscanf(line, "SwapFree: %llu kB", &kib) == 1)
                swap = kib << 10;
        }
        fclose(f);
        if (avail)
            return avail + swap;
    }
    if (sysinfo(&si) != 0)
        return 0;
    return ((uint64_t)si.freeram + si.bufferram + si.freeswap) * si.mem_unit;
}

static strata_err full(size_t size, const char *what, uint64_t free_bytes)
{
    if (free_bytes == UINT64_MAX)
        return base_fail(STRATA_ENOMEM,
                         "%s of %zu bytes: the shared memory file system "
                         "(" SHM_DIR ") has no size limit and the system has "
                         "%llu bytes of memory available",
                         what, size, (unsigned long long)mem_available());
    return base_fail(STRATA_ENOMEM,
                     "%s of %zu bytes: the shared memory file system "
                     "(" SHM_DIR ") has %llu bytes free",
                     what, size, (unsigned long long)free_bytes);
}

/* Whether size bytes fit in free_bytes (UINT64_MAX: in the memory the
 * system has available, when that is known). */
static bool fits(size_t size, uint64_t free_bytes)
{
    uint64_t avail;

    if (free_bytes != UINT64_MAX)
        return size <= free_bytes;
    avail = mem_available();
    return avail == 0 || size <= avail;
}

strata_err base_shm_check(size_t size, const char *what)
{
    uint64_t free_bytes = base_shm_free_bytes(-1);

    if (fits(size, free_bytes))
        return STRATA_OK;
    return full(size, what, free_bytes);
}

strata_err base_shm_reserve(int fd, size_t size, const char *what)
{
    uint64_t free_bytes = base_shm_free_bytes(fd);
    int rc;

    if (size == 0)
        return STRATA_OK;
    if (size > (size_t)INT64_MAX)
        return full(size, what, free_bytes);
    /* What cannot fit now is refused before any page is taken: without a
     * size limit the kernel would take pages until the system ran out of
     * memory, and with one it takes what is free before it gives up. */
    if (!fits(size, free_bytes))
        return full(size, what, free_bytes);
    do
        rc = posix_fallocate(fd, 0, (off_t)size);
    while (rc == EINTR);
    if (rc == 0)
        return STRATA_OK;
    if (rc == ENOSPC || rc == ENOMEM || rc == EFBIG)
        return full(size, what, base_shm_free_bytes(fd));
    return base_fail_errno(rc, "posix_fallocate of %s (%zu bytes)", what, size);
}
