/* libFuzzer target: the HEALTH_REPLY body decoder. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_body(WIRE_MSG_HEALTH_REPLY, data, size);
}
