#include "redis/tls.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef BGI_HIREDIS_SSL
#include <arpa/inet.h>
#include <hiredis/hiredis_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

struct bgi_tls {
  SSL_CTX *ctx;
  char *server_name;
  int verify;
};

int bgi_tls_supported(void) { return 1; }

/* The reason of the last OpenSSL error ("" if none), for messages. */
static const char *ssl_reason(void) {
  unsigned long e = ERR_peek_last_error();
  const char *r = e ? ERR_reason_error_string(e) : NULL;
  return r ? r : "";
}

/* Why a file OpenSSL could not load is unusable: unreadable (the system's words) or not PEM. */
static int file_error(const char *what, const char *path, bgi_err *err) {
  int st;
  if (access(path, R_OK) != 0)
    st = bgi_err_set(err, BG_ETLS, "TLS: cannot read the %s \"%.200s\": %s", what, path, strerror(errno));
  else
    st = bgi_err_set(err, BG_ETLS, "TLS: cannot use the %s \"%.200s\": %s", what, path, ssl_reason());
  ERR_clear_error();
  return st;
}

int bgi_tls_new(bgi_tls **out, const bgi_tls_config *cfg, bgi_err *err) {
  bgi_tls *t = calloc(1, sizeof *t);
  int st = BG_OK;
  *out = NULL;
  if (!t) return bgi_err_set(err, BG_ENOMEM, "out of memory");
  t->verify = cfg->verify;
  ERR_clear_error();
  if (!(t->ctx = SSL_CTX_new(TLS_client_method()))) {
    st = bgi_err_set(err, BG_ENOMEM, "TLS: cannot create a context: %s", ssl_reason());
    goto fail;
  }
  SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(t->ctx, cfg->verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
  if (cfg->ca_file || cfg->ca_dir) {
    if (SSL_CTX_load_verify_locations(t->ctx, cfg->ca_file, cfg->ca_dir) != 1) {
      st = file_error(cfg->ca_file ? "CA file (BG_OPT_TLS_CA_FILE)" : "CA directory (BG_OPT_TLS_CA_DIR)",
                      cfg->ca_file ? cfg->ca_file : cfg->ca_dir, err);
      goto fail;
    }
  } else if (cfg->verify && SSL_CTX_set_default_verify_paths(t->ctx) != 1) {
    st = bgi_err_set(err, BG_ETLS, "TLS: the system's trust store cannot be loaded (give BG_OPT_TLS_CA_FILE): %s",
                     ssl_reason());
    goto fail;
  }
  if ((cfg->cert_file != NULL) != (cfg->key_file != NULL)) {
    st = bgi_err_set(err, BG_ETLS, "TLS: a client certificate needs both BG_OPT_TLS_CERT_FILE and BG_OPT_TLS_KEY_FILE");
    goto fail;
  }
  if (cfg->cert_file) {
    if (SSL_CTX_use_certificate_chain_file(t->ctx, cfg->cert_file) != 1) {
      st = file_error("client certificate (BG_OPT_TLS_CERT_FILE)", cfg->cert_file, err);
      goto fail;
    }
    if (SSL_CTX_use_PrivateKey_file(t->ctx, cfg->key_file, SSL_FILETYPE_PEM) != 1 &&
        ERR_GET_REASON(ERR_peek_last_error()) != X509_R_KEY_VALUES_MISMATCH) {
      st = file_error("client key (BG_OPT_TLS_KEY_FILE)", cfg->key_file, err);
      goto fail;
    }
    if (SSL_CTX_check_private_key(t->ctx) != 1) {
      st = bgi_err_set(err, BG_ETLS, "TLS: the client key \"%.200s\" does not match the certificate \"%.200s\"",
                       cfg->key_file, cfg->cert_file);
      goto fail;
    }
  }
  if (cfg->server_name && !(t->server_name = strdup(cfg->server_name))) {
    st = bgi_err_set(err, BG_ENOMEM, "out of memory");
    goto fail;
  }
  ERR_clear_error();
  *out = t;
  return BG_OK;
fail:
  ERR_clear_error();
  bgi_tls_free(t);
  return st;
}

void bgi_tls_free(bgi_tls *t) {
  if (!t) return;
  if (t->ctx) SSL_CTX_free(t->ctx);
  free(t->server_name);
  free(t);
}

static int is_ip(const char *host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

int bgi_tls_connect(const bgi_tls *t, redisContext *ctx, const char *host, bgi_err *err) {
  const char *name = t->server_name ? t->server_name : host;
  ERR_clear_error();
  SSL *ssl = SSL_new(t->ctx);
  if (!ssl) return bgi_err_set(err, BG_ENOMEM, "TLS: cannot create a connection: %s", ssl_reason());
  /* SNI takes DNS names only; the name check takes either */
  if (!is_ip(name)) SSL_set_tlsext_host_name(ssl, name);
  if (t->verify) {
    X509_VERIFY_PARAM *p = SSL_get0_param(ssl);
    X509_VERIFY_PARAM_set_hostflags(p, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    if (is_ip(name) ? X509_VERIFY_PARAM_set1_ip_asc(p, name) != 1 : X509_VERIFY_PARAM_set1_host(p, name, 0) != 1) {
      SSL_free(ssl);
      return bgi_err_set(err, BG_ETLS, "TLS: cannot check the server's name \"%.200s\"", name);
    }
  }
  errno = 0;
  if (redisInitiateSSL(ctx, ssl) == REDIS_OK) return BG_OK;   /* hiredis owns ssl now */
  long verify = SSL_get_verify_result(ssl);
  int st;
  int name_err = verify == X509_V_ERR_HOSTNAME_MISMATCH || verify == X509_V_ERR_IP_ADDRESS_MISMATCH;
  if (verify != X509_V_OK)
    st = bgi_err_set(err, BG_ETLS, "TLS: the server's certificate was refused: %s%s%.200s%s",
                     X509_verify_cert_error_string(verify), name_err ? " (it is not for " : "", name_err ? name : "",
                     name_err ? "; BG_OPT_TLS_SERVER_NAME names the one to expect)" : "");
  else if (errno == EAGAIN || errno == EWOULDBLOCK)
    st = bgi_err_set(err, BG_ETIMEOUT, "TLS: the handshake did not finish in time");
  else
    st = bgi_err_set(err, BG_ETLS, "TLS: the handshake failed: %s (is the port a TLS port? a client certificate "
                     "required: BG_OPT_TLS_CERT_FILE / BG_OPT_TLS_KEY_FILE)", ctx->errstr);
  SSL_free(ssl);
  ERR_clear_error();
  return st;
}

#else

int bgi_tls_supported(void) { return 0; }

int bgi_tls_new(bgi_tls **out, const bgi_tls_config *cfg, bgi_err *err) {
  (void)cfg;
  *out = NULL;
  return bgi_err_set(err, BG_ENOTSUP, "TLS was asked for (rediss:// or BG_OPT_TLS_*), but this build of bloomguard "
                     "has none: it is built against a hiredis without its TLS part (e.g. Debian's 0.14); build with "
                     "the default BG_HIREDIS=auto or vendored");
}

void bgi_tls_free(bgi_tls *t) { (void)t; }

int bgi_tls_connect(const bgi_tls *t, redisContext *ctx, const char *host, bgi_err *err) {
  (void)t, (void)ctx, (void)host;
  return bgi_err_set(err, BG_ENOTSUP, "TLS is not available in this build");
}

#endif
