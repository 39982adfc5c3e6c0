/* SHA-256, the callable digest. */
#ifndef BASE_DIGEST_H
#define BASE_DIGEST_H

#include <stddef.h>
#include <stdint.h>
#include <strata/strata.h>

strata_err base_sha256(const void *data, size_t len, uint8_t out[32]);

#endif
