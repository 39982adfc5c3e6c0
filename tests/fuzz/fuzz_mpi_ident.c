/* libFuzzer target: the rank identity record parser (worker/mpiident.c),
 * which the L4 runs on the first MPI_IDENT_LEN bytes a rank sends after
 * its TLS handshake. Input: the record (shorter inputs are NUL-padded,
 * longer ones cut). Checks: what parses formats back to the very same
 * bytes (the parser takes one spelling only), and a refusal has a
 * message. */
#include "base/err.h"
#include "mpiident.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char rec[MPI_IDENT_LEN] = {0}, again[MPI_IDENT_LEN];
    struct mpi_ident id;

    memcpy(rec, data, size < sizeof(rec) ? size : sizeof(rec));
    if (mpi_ident_parse(rec, &id) != STRATA_OK) {
        if (!strata_errmsg()[0])
            abort();
        return 0;
    }
    if (id.rank >= id.size || id.pid == 0 || !id.host.boot[0] ||
        !id.host.name[0])
        abort();
    if (mpi_ident_format(&id, again) != STRATA_OK ||
        memcmp(rec, again, sizeof(rec)) != 0)
        abort();
    return 0;
}
