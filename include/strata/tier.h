/*
 * strata tiered memory: named, versioned physical instances on the tiers
 * device, host-pinned, ram and nvme, per-tier budgets, transfers between
 * instances with completions, and a memory report. See docs/tiers.md.
 *
 * The conventions of <strata/strata.h> hold: fallible calls return
 * strata_err with the detail in strata_errmsg(), outputs are written only
 * on STRATA_OK, and NULL is a no-op for the functions that end an object.
 * Every function here may be called from any thread.
 */
#ifndef STRATA_TIER_H
#define STRATA_TIER_H

#include <strata/strata.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct strata_tier_runtime strata_tier_runtime;
typedef struct strata_instance strata_instance;
typedef struct strata_transfer_handle strata_transfer_handle;

/* The allocatable tiers, fastest first. The numbers index the arrays of
 * strata_tier_report. */
typedef enum strata_tier {
    STRATA_TIER_DEVICE = 0,      /* GPU memory ("hbm"); the CUDA backend */
    STRATA_TIER_HOST_PINNED = 1, /* page-locked host memory ("pinned_ram") */
    STRATA_TIER_RAM = 2,         /* ordinary host memory ("host") */
    STRATA_TIER_NVME = 3,        /* files in the runtime's directory ("ssd") */
} strata_tier;
#define STRATA_TIER_COUNT 4

/* Canonical name of a tier ("device", "host-pinned", "ram", "nvme"); NULL
 * for a value outside strata_tier. */
STRATA_API const char *strata_tier_name(strata_tier tier);

/* Resolves a tier name or alias: device (hbm), host-pinned (pinned_ram),
 * ram (host), nvme (ssd). STRATA_EINVAL for "register", "shared" and
 * "remote" (known tiers that no runtime allocates: kernel-owned or
 * transport-owned storage) and for an unknown name, each with its reason. */
STRATA_API STRATA_MUST_CHECK strata_err strata_tier_parse(const char *name,
                                                          strata_tier *out);

/* Parses a byte count: a non-negative decimal integer, optionally followed
 * by one IEC unit B, KiB, MiB, GiB or TiB ("16 GiB" -> 17179869184), with
 * optional whitespace before, between and after. STRATA_EINVAL, with the
 * reason, for an empty text, a sign, a fraction or exponent, a boolean, an
 * SI unit (kB, KB, MB, GB, TB: 1000-based, refused), an unknown unit or a
 * value past 2^64 - 1. */
STRATA_API STRATA_MUST_CHECK strata_err strata_parse_bytes(const char *text,
                                                           uint64_t *out);

typedef struct strata_tier_config {
    /* Directory that holds nvme instances, one file each (created and
     * removed by the runtime), named after the creating process's pid and
     * start time. Creating a runtime removes the files there of processes
     * that are gone (killed before they could). NULL: nvme allocations
     * are refused. */
    const char *nvme_dir;
    /* Budgets "tier=size,tier=size" ("ram=16GiB, nvme=1TiB"); sizes as
     * strata_parse_bytes reads them; tiers as strata_tier_parse, each at
     * most once (an alias counts as its tier); one trailing comma is
     * allowed. NULL or "": every tier unlimited. */
    const char *budgets;
    /* Threads of the I/O pool that moves bytes, 1..64; 0 = 2. */
    unsigned io_threads;
} strata_tier_config;

/* Fills cfg with the defaults (no nvme directory, no budgets, 2 threads). */
STRATA_API void strata_tier_config_init(strata_tier_config *cfg);

/* Creates a runtime from cfg (copied). STRATA_EINVAL for a bad budget
 * string or io_threads, or an nvme_dir that is not a writable directory;
 * STRATA_ESYS when a pool thread cannot start. The runtime belongs to this
 * process: in a process forked from it, every call on it, its instances
 * and its transfer handles fails with STRATA_ESTATE and touches nothing. */
STRATA_API STRATA_MUST_CHECK strata_err strata_tier_runtime_create(
    const strata_tier_config *cfg, strata_tier_runtime **out);

/* Waits for every transfer, closes every instance (nvme files removed),
 * stops the pool and frees rt. Transfer handles stay valid until freed.
 * Not while another thread still uses rt. */
STRATA_API STRATA_MUST_CHECK strata_err
strata_tier_runtime_destroy(strata_tier_runtime *rt);

/* Sets tier's budget from bytes_or_iec (as strata_parse_bytes reads it);
 * NULL removes it (unlimited). A budget below the live bytes is allowed:
 * allocations on that tier then fail until enough is closed.
 * STRATA_EINVAL for a bad tier or size. */
STRATA_API STRATA_MUST_CHECK strata_err strata_tier_set_budget(
    strata_tier_runtime *rt, const char *tier, const char *bytes_or_iec);

/* Allocates an instance of capacity bytes (> 0) for the logical value
 * (name, version) on tier (a name or alias). ram instances are zeroed host
 * memory; nvme instances are sparse files in the runtime's nvme_dir;
 * device and host-pinned instances are CUDA memory (cuMemAlloc,
 * cuMemHostAlloc, not zeroed) on the first visible device, through the
 * CUDA plug-in, which the first such allocation loads into this process
 * (do it after strata_worker_init of any cuda worker: CUDA does not
 * survive fork). Checks, in order: arguments (STRATA_EINVAL: NULL, a name
 * empty or over 255 bytes, capacity 0 or over 2^62, a bad tier), the
 * tier's backend (STRATA_ENOTSUP naming the tier and the reason: device
 * and host-pinned need the CUDA plug-in, a driver and a device; nvme needs
 * nvme_dir), the budget (STRATA_EBUDGET naming tier,
 * budget and live bytes: the allocation would make live bytes exceed the
 * budget; equal is allowed), then the storage (STRATA_ENOMEM, STRATA_ESYS;
 * a CUDA allocation's error). A failed allocation changes nothing in the
 * runtime, except that the first device or host-pinned attempt that finds
 * the plug-in and a driver has initialised CUDA in this process, even when
 * a later check fails. The runtime owns the instance. */
STRATA_API STRATA_MUST_CHECK strata_err strata_instance_allocate(
    strata_tier_runtime *rt, const char *name, uint64_t version,
    const char *tier, uint64_t capacity, strata_instance **out);

/* Closes inst: waits for every unfinished transfer that names it (its
 * readers first of all), then releases its bytes (budget, memory, file).
 * The handle stays valid, and closed, until the runtime is destroyed:
 * closing it again is STRATA_ESTATE. NULL is a no-op. */
STRATA_API STRATA_MUST_CHECK strata_err
strata_instance_close(strata_instance *inst);

/* The live instance of name with the highest version, on tier when tier is
 * not NULL; among several of that version, the latest allocated.
 * STRATA_ENOENT when there is none; STRATA_EINVAL for a bad tier. */
STRATA_API STRATA_MUST_CHECK strata_err
strata_tier_latest(strata_tier_runtime *rt, const char *name, const char *tier,
                   strata_instance **out);

/* Accessors; neutral values (NULL, 0, -1, false) for NULL. */
/* The instance's name, as given to strata_instance_allocate. */
STRATA_API const char *strata_instance_name(const strata_instance *inst);
/* The instance's version, as given to strata_instance_allocate. */
STRATA_API uint64_t strata_instance_version(const strata_instance *inst);
/* The instance's capacity in bytes. */
STRATA_API uint64_t strata_instance_capacity(const strata_instance *inst);
/* The instance's tier, a strata_tier value. */
STRATA_API int strata_instance_tier(const strata_instance *inst);
/* Whether strata_instance_close has been called on the instance. */
STRATA_API bool strata_instance_closed(const strata_instance *inst);
/* Host address of a ram or host-pinned instance (NULL for others, or
 * closed). Touch it only while no transfer naming inst is unfinished; use
 * strata_instance_write/_read to be ordered after them. */
STRATA_API void *strata_instance_data(strata_instance *inst);

/* Copies n bytes from src into inst at offset (write), or from inst into
 * dst (read), after the unfinished transfers that write inst (and, for a
 * write, those that read it). Any tier: host memory, a file, or device
 * memory (a copy on the tier's CUDA stream). STRATA_EINVAL for NULL or
 * bytes outside the capacity, STRATA_ESTATE when closed, STRATA_EIO for a
 * failed file access or device copy (the CUDA error named). */
STRATA_API STRATA_MUST_CHECK strata_err strata_instance_write(
    strata_instance *inst, uint64_t offset, const void *src, size_t n);
/* The read half of strata_instance_write: n bytes at offset into dst. */
STRATA_API STRATA_MUST_CHECK strata_err strata_instance_read(
    strata_instance *inst, uint64_t offset, void *dst, size_t n);

/* Starts copying src's bytes into dst (same runtime). Preconditions, each
 * checked in this order with its own message: neither is closed
 * (STRATA_ESTATE), they are distinct (STRATA_EINVAL), same name and version
 * (STRATA_EINVAL), same capacity (STRATA_EINVAL). The copy runs after every
 * unfinished transfer that writes src (read after write) or writes or
 * reads dst (write after write, write after read), in 1 MiB chunks on the
 * I/O pool. A transfer whose source's writer failed fails too. */
STRATA_API STRATA_MUST_CHECK strata_err
strata_transfer(strata_tier_runtime *rt, strata_instance *src,
                strata_instance *dst, strata_transfer_handle **out);

/* True once the transfer has finished, well or not (false for NULL). */
STRATA_API bool strata_transfer_ready(const strata_transfer_handle *t);

/* Waits up to timeout_s seconds for the transfer and returns its result.
 * A negative timeout, INFINITY, or one of 1e9 s or more waits without a
 * deadline (the thread sleeps until the transfer finishes); 0 only looks;
 * NaN is STRATA_EINVAL. The result: STRATA_OK, or the failure (STRATA_EIO
 * naming the file, chunk and OS error for a failed read or write, or the
 * CUDA error of a failed device copy). A failed
 * transfer leaves dst without valid data and its file's blocks returned to the
 * file system. STRATA_ETIMEDOUT leaves it going; wait again. */
STRATA_API STRATA_MUST_CHECK strata_err
strata_transfer_wait(strata_transfer_handle *t, double timeout_s);

/* Frees a handle; an unfinished transfer goes on. NULL is a no-op. */
STRATA_API void strata_transfer_free(strata_transfer_handle *t);

/* Bytes per tier: live (allocated and not closed), peak (the most live at
 * once), budget (UINT64_MAX: none). */
typedef struct strata_tier_usage {
    uint64_t live;
    uint64_t peak;
    uint64_t budget;
    uint64_t instances; /* live instances */
} strata_tier_usage;

typedef struct strata_tier_report {
    strata_tier_usage tiers[STRATA_TIER_COUNT]; /* indexed by strata_tier */
    /* Bytes copied by finished transfers, [from][to]. */
    uint64_t moved[STRATA_TIER_COUNT][STRATA_TIER_COUNT];
    uint64_t transfers_done;   /* finished well */
    uint64_t transfers_failed; /* finished with an error */
    uint64_t spills;           /* LRU spills (worker budgets) */
    uint64_t restores;         /* restores of spilled buffers */
} strata_tier_report;

/* A snapshot of rt's accounting. STRATA_EINVAL for NULL. */
STRATA_API STRATA_MUST_CHECK strata_err
strata_tier_report_get(strata_tier_runtime *rt, strata_tier_report *out);

/* Writes r as one JSON object (no newline, schema
 * "strata.tier-report.v1") into buf (cap bytes, NUL included); *len_out
 * gets the length without the NUL. buf NULL with cap 0 only measures.
 * STRATA_ENOMEM, naming the size needed, when cap is too small. A budget
 * of UINT64_MAX is written as null. */
STRATA_API STRATA_MUST_CHECK strata_err strata_tier_report_json(
    const strata_tier_report *r, char *buf, size_t cap, size_t *len_out);

/* The memory accounting of a worker's budgets (strata_worker_config
 * budgets): its host buffers on ram. STRATA_EINVAL for NULL. */
STRATA_API STRATA_MUST_CHECK strata_err
strata_worker_memory_report(strata_worker *w, strata_tier_report *out);

#ifdef __cplusplus
}
#endif

#endif
