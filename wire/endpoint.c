/* wire/endpoint.h. */
#include "wire/endpoint.h"
#include "base/err.h"

#include <string.h>

strata_err wire_endpoint_split(const char *what, const char *endpoint,
                               char *host, size_t host_cap, int min_port,
                               int *port)
{
    const char *e = endpoint, *colon, *p;
    size_t hl;
    long v = 0;

    if (!e)
        return base_fail(STRATA_EINVAL, "%s: no endpoint", what);
    if (e[0] == '[') {
        const char *end = strchr(e, ']');

        if (!end || end[1] != ':')
            goto shape;
        hl = (size_t)(end - e - 1);
        colon = end + 1;
        e++;
    } else {
        colon = strrchr(e, ':');
        if (!colon)
            goto shape;
        hl = (size_t)(colon - e);
    }
    if (hl == 0 || hl >= host_cap)
        return base_fail(STRATA_EINVAL,
                         "%s '%s': the host is empty or longer than %zu bytes",
                         what, endpoint, host_cap - 1);
    p = colon + 1;
    if (!*p || strlen(p) > 5 || strspn(p, "0123456789") != strlen(p))
        return base_fail(STRATA_EINVAL,
                         "%s '%s': the port '%s' is not a number of 0..65535",
                         what, endpoint, p);
    for (; *p; p++)
        v = v * 10 + (*p - '0');
    if (v < min_port || v > 65535)
        return base_fail(STRATA_EINVAL,
                         "%s '%s': port %ld is outside %d..65535", what,
                         endpoint, v, min_port);
    memcpy(host, e, hl);
    host[hl] = '\0';
    *port = (int)v;
    return STRATA_OK;
shape:
    return base_fail(STRATA_EINVAL, "%s '%s': expected host:port or [v6]:port",
                     what, endpoint);
}
