/* Network endpoints as users write them: "host:port" or "[v6]:port", one
 * reader for the L4's remote specs and strata-node's --listen. */
#ifndef WIRE_ENDPOINT_H
#define WIRE_ENDPOINT_H

#include <stddef.h>
#include <strata/strata.h>

/* Splits endpoint into host (a NUL-terminated copy in host_cap bytes,
 * brackets removed) and *port, a decimal number from min_port (0 lets the
 * system pick) to 65535. STRATA_EINVAL with "<what> '<endpoint>': ..."
 * naming the part that is wrong. */
strata_err wire_endpoint_split(const char *what, const char *endpoint,
                               char *host, size_t host_cap, int min_port,
                               int *port);

#endif
