/* SHA-256 through OpenSSL's EVP interface. */
#include "base/digest.h"
#include "base/err.h"

#include <openssl/evp.h>

strata_err base_sha256(const void *data, size_t len, uint8_t out[32])
{
    unsigned int n = 0;

    if (EVP_Digest(data, len, out, &n, EVP_sha256(), NULL) != 1 || n != 32)
        return base_fail(STRATA_ESYS, "SHA-256 digest failed in OpenSSL");
    return STRATA_OK;
}
