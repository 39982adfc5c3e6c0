/* The cuda plug-in's per-chip state, shared by its backend ops
 * (cuda_backend.c) and its device windows (cuda_window.c). */
#ifndef CUDA_CUDA_CHIP_H
#define CUDA_CUDA_CHIP_H

#include "cuda_driver.h"

struct cuda_win;

struct cuda_chip {
    const struct cuda_driver *d;
    int chip_id;
    int ordinal;      /* among the visible devices */
    bool from_config; /* device_ordinals gave it */
    CUdevice dev;
    CUcontext ctx; /* the device's primary context, retained */
    CUstream stream;
    CUevent done; /* recorded after each task's work */
    uint32_t comm_rank, comm_size;
    uint64_t launches;
    struct cuda_win *wins; /* device windows, newest first */
};

/* The host's table, from strata_cuda_plugin_open. */
extern const struct cuda_plugin_host *cuda_host_table;
/* The tier runtime's memory (cuda_mem.c). */
extern const struct cuda_plugin_mem cuda_mem_ops;
/* STRATA_ESTATE when a parent of this process set the tier runtime's CUDA
 * memory up before forking it (CUDA does not survive fork). */
strata_err cuda_mem_forked_check(void);

/* Records "device N: call failed: NAME (code): text"; the strata code. */
strata_err cuda_chip_fail(const struct cuda_chip *c, CUresult r,
                          const char *call);

/* cuda_window.c: the cuda-ipc window ops (chip_backend.h). */
strata_err cuda_window_prepare(void *state, const struct chip_window_req *req,
                               struct chip_window_desc *desc_out);
strata_err cuda_window_import(void *state, uint64_t alloc_id,
                              const struct chip_window_desc *table, uint32_t n,
                              struct chip_window_import_out *out);
strata_err cuda_window_release(void *state, uint64_t alloc_id);
void *cuda_window_local(void *state, uint64_t alloc_id, size_t *size_out);
const struct strata_comm_context *cuda_comm_context(void *state,
                                                    uint64_t device_ctx);
/* At chip shutdown: every window, newest first. */
void cuda_windows_release_all(struct cuda_chip *c);

#endif
