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

/* What a tmpfs page costs is memory: a /dev/shm whose size limit is more
 * than the system has (a limit of all of RAM, no swap) would let the
 * kernel's OOM killer, not an error, end an allocation. Room is therefore
 * the smaller of the file system's free space and the memory available,
 * less a sixteenth of the latter left for everything else. */
static uint64_t mem_room(void)
{
    uint64_t avail = mem_available();

    return avail == 0 ? UINT64_MAX : avail - avail / 16;
}

static strata_err full(size_t size, const char *what, uint64_t free_bytes)
{
    uint64_t room = mem_room();

    if (free_bytes == UINT64_MAX || (room != UINT64_MAX && room < free_bytes))
        return base_fail(STRATA_ENOMEM,
                         "%s of %zu bytes: the system has %llu bytes of "
                         "memory available (the shared memory file system "
                         "(" SHM_DIR ") %s)",
                         what, size, (unsigned long long)mem_available(),
                         free_bytes == UINT64_MAX ? "has no size limit"
                                                  : "has more free than that");
    return base_fail(STRATA_ENOMEM,
                     "%s of %zu bytes: the shared memory file system "
                     "(" SHM_DIR ") has %llu bytes free",
                     what, size, (unsigned long long)free_bytes);
}

/* Whether size bytes fit in free_bytes (UINT64_MAX: no size limit) and in
 * the memory the system has available, when that is known. */
static bool fits(size_t size, uint64_t free_bytes)
{
    struct sysinfo si;
    uint64_t quick;

    if (size > free_bytes)
        return false;
    /* Free memory alone (one system call) settles most sizes; only a
     * large one reads /proc/meminfo for what the kernel could reclaim. */
    if (sysinfo(&si) == 0) {
        quick =
            ((uint64_t)si.freeram + si.bufferram + si.freeswap) * si.mem_unit;
        if (size <= quick - quick / 16)
            return true;
    }
    return size <= mem_room();
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
