/* libFuzzer target: the TRACE body decoder (a node's trace records). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_body(WIRE_MSG_TRACE, data, size);
}
