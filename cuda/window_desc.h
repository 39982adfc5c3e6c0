/* The cuda-ipc window descriptor: what a member of a domain on cuda chips
 * exports (in chip_window_desc.handle) so that its peers can import its
 * window. Pure code, no CUDA header: built everywhere, unit tested and
 * fuzzed without a GPU (tests/cuda/test_cuda_window_desc.c,
 * tests/fuzz/fuzz_cuda_window.c).
 *
 * Layout of the 64-byte handle, little-endian:
 *   0  u32 magic  "SCW1" (0x31574353)
 *   4  u8  kind   1: POSIX fd (cuda-ipc); 2: fabric (refused, see below)
 *   5  u8[3]      zero
 *   8  i32 pid    the exporting chip process, > 0
 *  12  i32 fd     the shareable fd in that process, >= 0
 *  16  i32 ordinal  its device, >= 0
 *  20  u32        zero
 *  24  u64 granularity  cuMemGetAllocationGranularity, a power of two
 *                       from 512 B to 1 GiB
 *  32  u64 alloc_size   a nonzero multiple of granularity
 *  40  u8[24]     zero
 * The descriptor's profile is "cuda-ipc", its mapping_size equals
 * alloc_size. */
#ifndef CUDA_WINDOW_DESC_H
#define CUDA_WINDOW_DESC_H

#include "wire/chip_backend.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CUDA_WINDOW_MAGIC 0x31574353u /* "SCW1" */
#define CUDA_WINDOW_KIND_FD 1u
#define CUDA_WINDOW_KIND_FABRIC 2u
#define CUDA_WINDOW_PROFILE "cuda-ipc"
#define CUDA_WINDOW_HANDLE_LEN 40 /* bytes used of CHIP_WINDOW_HANDLE_MAX */

struct cuda_window_handle {
    uint8_t kind;
    int32_t pid;
    int32_t fd;
    int32_t ordinal;
    uint64_t granularity;
    uint64_t alloc_size;
};

/* Fills desc (profile, handle, mapping_size = alloc_size) for rank of
 * rank_count. False, with the reason in why, when h is not one decode
 * would accept. */
bool cuda_window_desc_encode(const struct cuda_window_handle *h, uint32_t rank,
                             uint32_t rank_count, struct chip_window_desc *desc,
                             char *why, size_t cap);

/* Strictly checks desc as the entry for rank of a table of rank_count and
 * decodes its handle. False, with the reason in why ("rank 2's window
 * descriptor: ..."), for any field out of place: version, rank, count,
 * profile, magic, kind (a fabric handle says that profile is refused),
 * nonzero padding, pid, fd, ordinal, granularity, sizes. */
bool cuda_window_desc_decode(const struct chip_window_desc *desc, uint32_t rank,
                             uint32_t rank_count,
                             struct cuda_window_handle *out, char *why,
                             size_t cap);

/* The window of window_size bytes rounded up to granularity (a power of
 * two); 0 when it would overflow or either is 0. */
uint64_t cuda_window_round(uint64_t window_size, uint64_t granularity);

#endif
