/* A strata-node session: one authenticated parent connection served by one
 * forked process that hosts an L3 worker. */
#ifndef WORKER_SESSION_H
#define WORKER_SESSION_H

#include <openssl/ssl.h>
#include <strata/strata.h>

/* Serves the accepted socket fd until the parent says GOODBYE or fails;
 * returns the process exit status. ctx NULL = plaintext (loopback only). */
int worker_session_main(int fd, SSL_CTX *ctx, const char *peer);

#endif
