/* libFuzzer target: the HEALTH body decoder. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_body(WIRE_MSG_HEALTH, data, size);
}
