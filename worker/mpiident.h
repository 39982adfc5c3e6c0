/* The identity record an MPI group's rank sends first on its TLS
 * connection to the L4 (docs/wire.md, "The rank identity record"): which
 * rank of which launch size it is, its pid and its host (boot id and
 * name). Written by strata-rank, read by the L4 (mpiaccept.c) from a peer
 * that holds the launch key but is otherwise untrusted. */
#ifndef WORKER_MPIIDENT_H
#define WORKER_MPIIDENT_H

#include "base/hostid.h"

#include <stddef.h>
#include <stdint.h>
#include <strata/strata.h>

#define MPI_IDENT_LEN 320
#define MPI_IDENT_MAGIC "STRATA-RANK"
#define MPI_IDENT_VERSION 2
#define MPI_IDENT_MAX_RANKS 4096

struct mpi_ident {
    uint32_t rank; /* < size */
    uint32_t size; /* 1..MPI_IDENT_MAX_RANKS */
    uint32_t pid;  /* 1..INT32_MAX */
    struct base_host_id host;
};

/* Fills rec (MPI_IDENT_LEN bytes, NUL-padded). STRATA_EINVAL when a field
 * does not fit the record's rules. */
strata_err mpi_ident_format(const struct mpi_ident *id,
                            char rec[MPI_IDENT_LEN]);
/* Parses the MPI_IDENT_LEN bytes of rec strictly: STRATA_EPROTO with a
 * message naming the field for anything else than what mpi_ident_format
 * writes. */
strata_err mpi_ident_parse(const char rec[MPI_IDENT_LEN],
                           struct mpi_ident *out);

#endif
