/* The rank identity record (worker/mpiident.h):
 *   "STRATA-RANK 2 <rank> <size> <pid> <boot_id> <host>"
 * then NUL bytes up to MPI_IDENT_LEN. Numbers are decimal without sign or
 * leading zeros; fields are separated by one space. */
#include "mpiident.h"

#include "base/err.h"

#include <stdio.h>
#include <string.h>

/* A host name as a record carries it: 1..255 bytes of letters, digits,
 * '.', '-' and '_'. */
static bool host_name_valid(const char *s, size_t n)
{
    if (n == 0 || n >= BASE_HOST_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];

        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
              (c >= 'A' && c <= 'Z') || c == '.' || c == '-' || c == '_'))
            return false;
    }
    return true;
}

strata_err mpi_ident_format(const struct mpi_ident *id, char rec[MPI_IDENT_LEN])
{
    int n;

    if (id->size < 1 || id->size > MPI_IDENT_MAX_RANKS ||
        id->rank >= id->size || id->pid < 1 || id->pid > INT32_MAX ||
        !base_boot_id_valid(id->host.boot) ||
        !host_name_valid(id->host.name, strlen(id->host.name)))
        return base_fail(STRATA_EINVAL,
                         "rank identity: rank %u of %u, pid %u, boot id '%s', "
                         "host '%s' do not fit the record",
                         id->rank, id->size, id->pid, id->host.boot,
                         id->host.name);
    memset(rec, 0, MPI_IDENT_LEN);
    n = snprintf(rec, MPI_IDENT_LEN, MPI_IDENT_MAGIC " %d %u %u %u %s %s",
                 MPI_IDENT_VERSION, id->rank, id->size, id->pid, id->host.boot,
                 id->host.name);
    if (n < 0 || n >= MPI_IDENT_LEN)
        return base_fail(STRATA_EINVAL, "rank identity: too long");
    return STRATA_OK;
}

/* The next field of the text at *pos: up to a space or the end. */
static const char *field(const char *text, size_t *pos, size_t *len)
{
    const char *start = text + *pos;
    const char *sp = strchr(start, ' ');

    *len = sp ? (size_t)(sp - start) : strlen(start);
    *pos += *len + (sp ? 1 : 0);
    return start;
}

/* A decimal in 0..max without sign or leading zeros. */
static bool number(const char *s, size_t n, uint64_t max, uint32_t *out)
{
    uint64_t v = 0;

    if (n == 0 || n > 10 || (n > 1 && s[0] == '0'))
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v > max)
        return false;
    *out = (uint32_t)v;
    return true;
}

static strata_err bad(const char *what)
{
    return base_fail(STRATA_EPROTO, "rank identity: %s", what);
}

strata_err mpi_ident_parse(const char rec[MPI_IDENT_LEN], struct mpi_ident *out)
{
    const char *text = rec, *f;
    size_t end = 0, pos = 0, n;
    uint32_t version;

    memset(out, 0, sizeof(*out));
    while (end < MPI_IDENT_LEN && rec[end])
        end++;
    if (end == MPI_IDENT_LEN)
        return bad("no NUL ends the text");
    for (size_t i = end; i < MPI_IDENT_LEN; i++)
        if (rec[i])
            return bad("bytes after the text's NUL");
    f = field(text, &pos, &n);
    if (n != strlen(MPI_IDENT_MAGIC) || memcmp(f, MPI_IDENT_MAGIC, n) != 0)
        return bad("not a strata rank");
    f = field(text, &pos, &n);
    if (!number(f, n, UINT32_MAX, &version) || version != MPI_IDENT_VERSION)
        return bad("a record version this L4 does not read");
    f = field(text, &pos, &n);
    if (!number(f, n, MPI_IDENT_MAX_RANKS - 1, &out->rank))
        return bad("field 'rank' is not a rank");
    f = field(text, &pos, &n);
    if (!number(f, n, MPI_IDENT_MAX_RANKS, &out->size) || out->size < 1 ||
        out->rank >= out->size)
        return bad("field 'size' is not a size above the rank");
    f = field(text, &pos, &n);
    if (!number(f, n, INT32_MAX, &out->pid) || out->pid < 1)
        return bad("field 'pid' is not a process id");
    f = field(text, &pos, &n);
    if (n == 0 || n >= sizeof(out->host.boot))
        return bad("field 'boot_id' is not a boot id");
    memcpy(out->host.boot, f, n);
    if (!base_boot_id_valid(out->host.boot))
        return bad("field 'boot_id' is not a boot id");
    f = field(text, &pos, &n);
    if (!host_name_valid(f, n) || f[n] != '\0')
        return bad("field 'host' is not a host name");
    memcpy(out->host.name, f, n);
    return STRATA_OK;
}
