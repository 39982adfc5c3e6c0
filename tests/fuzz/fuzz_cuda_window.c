/* libFuzzer target: cuda_window_desc_decode, the cuda-ipc window
 * descriptor a chip reads from each peer of a domain on cuda chips
 * (cuda/window_desc.h). Input: u32 rank, u32 rank_count (little-endian),
 * then the chip_window_desc bytes (short inputs are zero-padded). What
 * decodes must encode back to the very same descriptor, and its handle
 * must be one the exporter could have written. */
#include "window_desc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_cuda_window: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct chip_window_desc d, again;
    struct cuda_window_handle h;
    uint32_t rank = 0, count = 0;
    char why[160];

    if (size < 8)
        return 0;
    memcpy(&rank, data, 4);
    memcpy(&count, data + 4, 4);
    memset(&d, 0, sizeof(d));
    memcpy(&d, data + 8, size - 8 < sizeof(d) ? size - 8 : sizeof(d));
    if (!cuda_window_desc_decode(&d, rank, count, &h, why, sizeof(why))) {
        check(strstr(why, "window descriptor: ") != NULL, "a reason");
        return 0;
    }
    check(rank < count, "rank inside the count");
    check(h.kind == CUDA_WINDOW_KIND_FD && h.pid > 0 && h.fd >= 0 &&
              h.ordinal >= 0,
          "a decoded handle is an fd handle of a live-looking process");
    check(h.alloc_size && h.alloc_size % h.granularity == 0 &&
              d.mapping_size == h.alloc_size,
          "sizes agree");
    check(cuda_window_desc_encode(&h, rank, count, &again, why, sizeof(why)),
          "what decodes encodes");
    check(memcmp(&again, &d, sizeof(d)) == 0,
          "encoding gives back the descriptor");
    return 0;
}
