/* TLS 1.3 contexts for node connections: mutual authentication by a
 * cluster pre-shared key (TLS 1.3 external PSK derived from a secret file)
 * or by certificates from a cluster CA. Plaintext only when asked, and the
 * callers allow that on loopback only. */
#ifndef WIRE_TLS_H
#define WIRE_TLS_H

#include <openssl/ssl.h>
#include <strata/strata.h>

struct wire_tls_cfg {
    const char *secret_file; /* PSK mode */
    const char *cert_file;   /* certificate mode: own certificate, */
    const char *key_file;    /* its key, */
    const char *ca_file;     /* and the CA that signs every peer */
    bool insecure;           /* no TLS at all */
};

/* The PSK identity both sides use. */
#define WIRE_TLS_PSK_IDENTITY "strata-cluster-psk-v1"

/* Builds a TLS 1.3-only context for a server (accepting) or client side.
 * *out is NULL in insecure mode. STRATA_EINVAL for a config that names no
 * mode or two, STRATA_EAUTH for an unusable secret or certificate (the
 * message names the file and the OpenSSL reason). */
strata_err wire_tls_ctx_create(const struct wire_tls_cfg *cfg, bool server,
                               SSL_CTX **out);
void wire_tls_ctx_free(SSL_CTX *ctx);
/* The last OpenSSL error of this thread as text ("" when none). */
const char *wire_tls_error(char *buf, size_t cap);
/* True for 127.0.0.0/8 and ::1 addresses, in text form. */
bool wire_addr_is_loopback(const char *host);

#endif
