/* Sim windows: private to sim/. */
#ifndef SIM_WINDOW_H
#define SIM_WINDOW_H

#include "wire/chip_backend.h"

struct sim_window;

struct sim_state {
    uint64_t launches;
    uint32_t comm_rank;
    uint32_t comm_size;
    bool comm_ready;
    struct sim_window *windows; /* live windows of this chip */
};

strata_err sim_window_prepare(void *state, const struct chip_window_req *req,
                              struct chip_window_desc *desc_out);
strata_err sim_window_import(void *state, uint64_t alloc_id,
                             const struct chip_window_desc *table, uint32_t n,
                             struct chip_window_import_out *out);
strata_err sim_window_release(void *state, uint64_t alloc_id);
void *sim_window_local(void *state, uint64_t alloc_id, size_t *size_out);
const struct strata_comm_context *sim_comm_context(void *state,
                                                   uint64_t device_ctx);
void sim_windows_release_all(struct sim_state *s);
/* Windows the worker makes (chip_backend.h: host_window_create ...). */
uint64_t sim_window_mapping_size(uint64_t window_size);
strata_err sim_host_window_create(const struct chip_window_req *req,
                                  uint64_t *device_ctx_out);
void sim_host_window_unlink(const struct chip_window_req *req);
void sim_host_window_name(const struct chip_window_req *req, char *out,
                          size_t cap);
strata_err sim_window_adopt(void *state, const struct chip_window_req *req,
                            uint64_t base, uint64_t mapping_size);

#endif
