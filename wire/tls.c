/* TLS contexts. The PSK is SHA-256 of the secret file's contents, so any
 * length of secret works and the key has a fixed size. The server records
 * the identity inside its callback: OpenSSL 3 does not keep a TLS 1.3
 * external PSK identity for later queries. */
#include "wire/tls.h"
#include "base/alloc.h"
#include "base/digest.h"
#include "base/err.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct psk {
    uint8_t key[32];
};

static int psk_index = -1;

const char *wire_tls_error(char *buf, size_t cap)
{
    unsigned long e = ERR_get_error();

    buf[0] = '\0';
    if (e)
        ERR_error_string_n(e, buf, cap);
    ERR_clear_error();
    return buf;
}

bool wire_addr_is_loopback(const char *host)
{
    struct in_addr a4;
    struct in6_addr a6;

    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&a6);
    return strcmp(host, "localhost") == 0;
}

static strata_err read_secret(const char *path, struct psk *out)
{
    uint8_t buf[4096];
    struct stat st;
    ssize_t n;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0)
        return base_fail(STRATA_EAUTH, "cannot open secret file %s: %s", path,
                         strerror(errno));
    if (fstat(fd, &st) != 0 || (st.st_mode & 077)) {
        close(fd);
        return base_fail(STRATA_EAUTH,
                         "secret file %s must be readable by its owner only "
                         "(chmod 600)",
                         path);
    }
    n = read(fd, buf, sizeof(buf));
    close(fd);
    if (n < 16)
        return base_fail(STRATA_EAUTH,
                         "secret file %s holds %zd bytes; at least 16 are "
                         "needed",
                         path, n);
    return base_sha256(buf, (size_t)n, out->key);
}

static SSL_SESSION *psk_session(SSL *ssl, const struct psk *p)
{
    static const unsigned char aes128gcm_sha256[] = {0x13, 0x01};
    const SSL_CIPHER *cipher = SSL_CIPHER_find(ssl, aes128gcm_sha256);
    SSL_SESSION *s = SSL_SESSION_new();

    if (!s || !cipher || !SSL_SESSION_set1_master_key(s, p->key, 32) ||
        !SSL_SESSION_set_cipher(s, cipher) ||
        !SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION)) {
        SSL_SESSION_free(s);
        return NULL;
    }
    return s;
}

static const struct psk *psk_of(SSL *ssl)
{
    return SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), psk_index);
}

static int client_psk(SSL *ssl, const EVP_MD *md, const unsigned char **id,
                      size_t *idlen, SSL_SESSION **sess)
{
    const struct psk *p = psk_of(ssl);

    (void)md;
    *sess = p ? psk_session(ssl, p) : NULL;
    if (!*sess)
        return 0;
    *id = (const unsigned char *)WIRE_TLS_PSK_IDENTITY;
    *idlen = strlen(WIRE_TLS_PSK_IDENTITY);
    return 1;
}

static int server_psk(SSL *ssl, const unsigned char *identity, size_t len,
                      SSL_SESSION **sess)
{
    *sess = NULL;
    if (len != strlen(WIRE_TLS_PSK_IDENTITY) ||
        memcmp(identity, WIRE_TLS_PSK_IDENTITY, len) != 0)
        return 1; /* unknown identity: no PSK, the handshake fails */
    *sess = psk_session(ssl, psk_of(ssl));
    return *sess ? 1 : 0;
}

static void free_psk(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx,
                     long argl, void *argp)
{
    (void)parent;
    (void)ad;
    (void)idx;
    (void)argl;
    (void)argp;
    if (ptr) {
        OPENSSL_cleanse(ptr, sizeof(struct psk));
        base_free(ptr);
    }
}

static int refuse_certificate(int preverified, X509_STORE_CTX *store)
{
    (void)preverified;
    X509_STORE_CTX_set_error(store, X509_V_ERR_APPLICATION_VERIFICATION);
    return 0;
}

static strata_err setup_psk(SSL_CTX *ctx, const char *file, bool server)
{
    struct psk *p = base_calloc(1, sizeof(*p));
    strata_err err;

    if (!p)
        return base_fail(STRATA_ENOMEM, "out of memory for the PSK");
    err = read_secret(file, p);
    if (err || !SSL_CTX_set_ex_data(ctx, psk_index, p)) {
        base_free(p);
        return err ? err : base_fail(STRATA_ENOMEM, "SSL_CTX_set_ex_data");
    }
    /* The PSK is bound to one hash: offer only the suite that uses it, or
     * a server preferring SHA-384 would skip the PSK and ask for a
     * certificate. */
    if (SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256") != 1)
        return base_fail(STRATA_EAUTH, "cannot restrict TLS 1.3 suites");
    if (server) {
        SSL_CTX_set_psk_find_session_callback(ctx, server_psk);
    } else {
        SSL_CTX_set_psk_use_session_callback(ctx, client_psk);
        /* A server that takes the key sends no certificate. One that
         * does has skipped the key: whatever signed it, it has not proved
         * it knows the secret, so the handshake fails here, before a
         * strata frame goes out. */
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, refuse_certificate);
    }
    return STRATA_OK;
}

static strata_err setup_certs(SSL_CTX *ctx, const struct wire_tls_cfg *cfg)
{
    char why[256];

    if (SSL_CTX_use_certificate_chain_file(ctx, cfg->cert_file) != 1)
        return base_fail(STRATA_EAUTH, "certificate %s: %s", cfg->cert_file,
                         wire_tls_error(why, sizeof(why)));
    if (SSL_CTX_use_PrivateKey_file(ctx, cfg->key_file, SSL_FILETYPE_PEM) !=
            1 ||
        SSL_CTX_check_private_key(ctx) != 1)
        return base_fail(STRATA_EAUTH, "key %s: %s", cfg->key_file,
                         wire_tls_error(why, sizeof(why)));
    if (SSL_CTX_load_verify_locations(ctx, cfg->ca_file, NULL) != 1)
        return base_fail(STRATA_EAUTH, "CA %s: %s", cfg->ca_file,
                         wire_tls_error(why, sizeof(why)));
    /* Both sides prove membership of the cluster CA. */
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                       NULL);
    return STRATA_OK;
}

static strata_err check_mode(const struct wire_tls_cfg *cfg)
{
    bool psk = cfg->secret_file != NULL;
    bool cert = cfg->cert_file || cfg->key_file || cfg->ca_file;

    if (cfg->insecure && (psk || cert))
        return base_fail(STRATA_EINVAL,
                         "insecure mode takes no secret or certificate");
    if (!cfg->insecure && psk == cert)
        return base_fail(STRATA_EINVAL,
                         "give either a secret file or a certificate, key "
                         "and CA (or insecure, on loopback)");
    if (cert && (!cfg->cert_file || !cfg->key_file || !cfg->ca_file))
        return base_fail(STRATA_EINVAL,
                         "certificate mode needs a certificate, a key and a "
                         "CA file");
    return STRATA_OK;
}

strata_err wire_tls_ctx_create(const struct wire_tls_cfg *cfg, bool server,
                               SSL_CTX **out)
{
    strata_err err = check_mode(cfg);
    SSL_CTX *ctx;

    if (err)
        return err;
    if (cfg->insecure) {
        *out = NULL;
        return STRATA_OK;
    }
    if (psk_index < 0)
        psk_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, free_psk);
    ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
    if (!ctx || psk_index < 0) {
        SSL_CTX_free(ctx);
        return base_fail(STRATA_ENOMEM, "SSL_CTX_new failed");
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
    if (cfg->secret_file)
        err = setup_psk(ctx, cfg->secret_file, server);
    else
        err = setup_certs(ctx, cfg);
    if (err) {
        SSL_CTX_free(ctx);
        return err;
    }
    *out = ctx;
    return STRATA_OK;
}

void wire_tls_ctx_free(SSL_CTX *ctx)
{
    SSL_CTX_free(ctx);
}
