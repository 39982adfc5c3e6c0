/* libFuzzer target: the frame header, then the body of whatever type the
 * header names (the path a connection's reader takes). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct wire_frame_header h;
    uint8_t again[WIRE_FRAME_HEADER_SIZE];
    struct wire_msg m;

    if (wire_frame_header_unpack(data, size, &h) != STRATA_OK)
        return 0;
    wire_frame_header_pack(&h, again);
    fuzz_check(memcmp(again, data, sizeof(again)) == 0,
               "header packs back to its bytes");
    fuzz_check(h.body_len <= wire_frame_max_body(h.type), "body_len capped");
    if (size - WIRE_FRAME_HEADER_SIZE < h.body_len)
        return 0;
    if (wire_frame_unpack(data, WIRE_FRAME_HEADER_SIZE + h.body_len, &m) !=
        STRATA_OK)
        return 0;
    fuzz_check(m.type == h.type, "decoded type");
    fuzz_roundtrip(&m);
    wire_msg_free(&m);
    return 0;
}
