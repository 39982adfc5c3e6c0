/* Device memory: buffers that live on one chip of a level-3 worker (on a
 * cuda chip, memory of its GPU; on sim, memory of the chip process), named
 * in task arguments like host buffers. See docs/cuda.md, "Device
 * buffers".
 *
 * A device buffer is a strata_buffer: strata_args_add_tensor names it
 * (dependencies are inferred from tags, buffer identity and byte ranges,
 * as for host buffers), strata_buffer_write / strata_buffer_read fill and
 * drain it from host memory, strata_buffer_release frees it, and
 * strata_buffer_data is NULL for it. Inside a kernel on its chip,
 * strata_args_tensor_data gives the device address. */
#ifndef STRATA_DEVICE_H
#define STRATA_DEVICE_H

#include <strata/strata.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Allocates nbytes (> 0) of zeroed device memory on chip chip_id of w (a
 * level-3 worker, after strata_worker_init). Only tasks on that chip may
 * name it: a submit to any other chip or to the sub queue is
 * STRATA_EINVAL. strata_buffer_release frees it on the chip (STRATA_ESTATE,
 * buffer kept, while an unfinished task names it); a worker's device
 * buffers go with it at strata_worker_destroy. STRATA_EINVAL for a NULL
 * argument, nbytes 0, a worker above level 3 or no such chip;
 * STRATA_ESTATE before strata_worker_init; STRATA_EPEER when the chip is
 * dead; the backend's error (STRATA_ENOMEM, naming the chip's device) when
 * the device cannot hold it. Any thread but a kernel's. */
STRATA_API STRATA_MUST_CHECK strata_err strata_worker_create_device_buffer(
    strata_worker *w, int chip_id, size_t nbytes, strata_buffer **out);

/* The chip a device buffer lives on; -1 for any other buffer (or NULL). */
STRATA_API int strata_buffer_chip(const strata_buffer *b);

/* Copies nbytes from src at src_offset to dst at dst_offset, where each is
 * a host buffer or a device buffer of o's worker, at least one of them a
 * device buffer: host to device, device to host, device to device on one
 * chip, or across two chips of the worker (staged through host memory).
 * Ordered like a task that reads src's bytes (STRATA_IN) and writes
 * dst's (STRATA_OUT): after every earlier task of this run that writes
 * those bytes (or reads dst's), before every later one. Returns when the
 * bytes have arrived. nbytes 0 is a no-op. STRATA_EINVAL for a NULL
 * argument, a range outside its buffer, two host buffers, a remote
 * buffer, a buffer of another worker, overlapping ranges of one buffer;
 * STRATA_ESTATE once o's orch fn returned; STRATA_EPEER when a chip died.
 * Only inside an orch fn, on its thread. */
STRATA_API STRATA_MUST_CHECK strata_err strata_orch_buffer_copy(
    strata_orch *o, strata_buffer *dst, size_t dst_offset,
    const strata_buffer *src, size_t src_offset, size_t nbytes);

#ifdef __cplusplus
}
#endif

#endif
