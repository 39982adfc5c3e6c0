/* Shared body of the libFuzzer targets: decode, and for anything that
 * decodes, check the round trip. A decoded message must pack again (the
 * decoder accepts nothing the packer refuses), and the packed frame must
 * decode to a message that packs to the very same bytes (decoding loses
 * nothing). Any violation aborts, which libFuzzer reports as a crash. */
#ifndef FUZZ_COMMON_H
#define FUZZ_COMMON_H

#include "wire/msg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static inline void fuzz_check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz: %s: %s\n", what, strata_errmsg());
        abort();
    }
}

static inline void fuzz_roundtrip(const struct wire_msg *m)
{
    struct wire_buf a;
    struct wire_buf b;
    struct wire_msg again;

    wire_buf_init(&a);
    wire_buf_init(&b);
    fuzz_check(wire_msg_pack(m, &a) == STRATA_OK, "decoded message re-packs");
    fuzz_check(wire_frame_unpack(a.data, a.len, &again) == STRATA_OK,
               "re-packed frame decodes");
    fuzz_check(wire_msg_pack(&again, &b) == STRATA_OK,
               "second decode re-packs");
    fuzz_check(a.len == b.len && memcmp(a.data, b.data, a.len) == 0,
               "packing is stable across a round trip");
    wire_msg_free(&again);
    wire_buf_fini(&b);
    wire_buf_fini(&a);
}

/* The whole target for one message type's decoder. */
static inline int fuzz_body(unsigned type, const uint8_t *data, size_t size)
{
    struct wire_msg m;

    if (wire_msg_unpack(type, data, size, &m) != STRATA_OK)
        return 0;
    fuzz_check(m.type == type, "decoded type");
    fuzz_roundtrip(&m);
    wire_msg_free(&m);
    return 0;
}

#endif
