#include "redis/tls.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef BGI_HIREDIS_SSL
#include <arpa/inet.h>
#include <limits.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "common/sock.h"
#include "common/wait.h"
#include "redis/tls_ca.h"

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
  } else if (cfg->verify && (st = bgi_tls_load_default_cas(t->ctx, err)) != BG_OK) {
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

/* ---- the socket BIO: recv, and send with MSG_NOSIGNAL (common/sock.h) ------------------------------------------ */

static int bio_fd(BIO *b) { return (int)(intptr_t)BIO_get_data(b); }

static int bio_write(BIO *b, const char *p, int n) {
  ssize_t k;
  BIO_clear_retry_flags(b);
  do k = send(bio_fd(b), p, (size_t)n, BGI_MSG_NOSIGNAL);
  while (k < 0 && errno == EINTR);
  if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) BIO_set_retry_write(b);
  return (int)k;
}

static int bio_read(BIO *b, char *p, int n) {
  ssize_t k;
  BIO_clear_retry_flags(b);
  do k = recv(bio_fd(b), p, (size_t)n, 0);
  while (k < 0 && errno == EINTR);
  if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) BIO_set_retry_read(b);
  return (int)k;
}

static int bio_puts(BIO *b, const char *s) { return bio_write(b, s, (int)strlen(s)); }

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr) {
  (void)num;
  switch (cmd) {
    case BIO_CTRL_FLUSH: return 1;   /* nothing is buffered here */
    case BIO_C_GET_FD:
      if (ptr) *(int *)ptr = bio_fd(b);
      return bio_fd(b);
    default: return 0;
  }
}

static BIO_METHOD *bio_method;
static pthread_once_t bio_once = PTHREAD_ONCE_INIT;

static void bio_method_init(void) {
  BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR, "bloomguard socket");
  if (m && (!BIO_meth_set_write(m, bio_write) || !BIO_meth_set_read(m, bio_read) ||
            !BIO_meth_set_puts(m, bio_puts) || !BIO_meth_set_ctrl(m, bio_ctrl))) {
    BIO_meth_free(m);
    m = NULL;
  }
  bio_method = m;   /* kept for the life of the process */
}

static BIO *bio_new(int fd) {
  pthread_once(&bio_once, bio_method_init);
  BIO *b = bio_method ? BIO_new(bio_method) : NULL;
  if (b) {
    BIO_set_data(b, (void *)(intptr_t)fd);
    BIO_set_init(b, 1);
  }
  return b;
}

/* ---- the hiredis context's I/O through the SSL object ----------------------------------------- */

/* A TLS connection's state (the context's privctx). */
typedef struct tls_conn {
  SSL *ssl;
  int ssl_error;            /* SSL_get_error of the last failed read or write */
  unsigned long err_code;   /* OpenSSL's error queue then (SSL_ERROR_SSL) */
  int in_write;             /* that was a write */
  char name_shown[256];     /* the name checked, as a message may show it (during the handshake) */
} tls_conn;

/* A failed SSL call's SSL_get_error, with OpenSSL's error recorded for bgi_tls_failure. */
static int note_failure(tls_conn *tc, int r) {
  tc->ssl_error = SSL_get_error(tc->ssl, r);
  tc->err_code = ERR_peek_last_error();
  return tc->ssl_error;
}

/* The peer closed the connection (with or without a close_notify): no failure of TLS's own. */
static int is_eof(int ssl_error, unsigned long code, int saved_errno) {
  if (ssl_error == SSL_ERROR_ZERO_RETURN || (ssl_error == SSL_ERROR_SYSCALL && saved_errno == 0)) return 1;
#ifdef SSL_R_UNEXPECTED_EOF_WHILE_READING
  if (ssl_error == SSL_ERROR_SSL && ERR_GET_REASON(code) == SSL_R_UNEXPECTED_EOF_WHILE_READING) return 1;
#endif
  (void)code;
  return 0;
}

static ssize_t tls_read(redisContext *c, char *buf, size_t cap) {
  tls_conn *tc = c->privctx;
  ERR_clear_error();
  errno = 0;
  int r = SSL_read(tc->ssl, buf, cap > INT_MAX ? INT_MAX : (int)cap);
  if (r > 0) return r;
  int saved_errno = errno;
  int e = note_failure(tc, r);
  tc->in_write = 0;
  /* non-blocking: the caller polls and reads again */
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return 0;
  /* hiredis's words, as for a plain socket (bgi_tls_failure tells a TLS failure apart) */
  if (is_eof(e, tc->err_code, saved_errno)) {
    c->err = REDIS_ERR_EOF;
    snprintf(c->errstr, sizeof c->errstr, "%s", "Server closed the connection");
  } else {
    c->err = REDIS_ERR_IO;
    snprintf(c->errstr, sizeof c->errstr, "%s", e == SSL_ERROR_SSL ? "TLS error" : strerror(saved_errno));
  }
  return -1;
}

static void tls_free(void *privctx) {
  tls_conn *tc = privctx;
  if (!tc) return;
  SSL_free(tc->ssl);   /* no SSL_shutdown: it would write (close_notify) to a socket that may be dead */
  free(tc);
}

static redisContextFuncs tls_funcs;
static pthread_mutex_t funcs_mu = PTHREAD_MUTEX_INITIALIZER;
static int funcs_ready;

/* The TCP context's functions with reads through the SSL object (writes are bgi_tls_send's; the
 * context's own write function is never called: nothing goes through its output buffer). */
static const redisContextFuncs *funcs_for(const redisContext *ctx) {
  pthread_mutex_lock(&funcs_mu);
  if (!funcs_ready) {
    tls_funcs = *ctx->funcs;   /* close (the socket's) and the rest as they are */
    tls_funcs.read = tls_read;
    tls_funcs.free_privctx = tls_free;
    funcs_ready = 1;
  }
  pthread_mutex_unlock(&funcs_mu);
  return &tls_funcs;
}

ssize_t bgi_tls_send(redisContext *ctx, const char *p, size_t n) {
  tls_conn *tc = ctx->privctx;
  if (n == 0) return 0;
  ERR_clear_error();
  int r = SSL_write(tc->ssl, p, n > INT_MAX ? INT_MAX : (int)n);
  if (r > 0) return r;
  int e = note_failure(tc, r);
  tc->in_write = 1;
  return e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ ? 0 : -1;
}

int bgi_tls_buffered(redisContext *ctx) {
  tls_conn *tc = ctx->privctx;
  return tc && SSL_pending(tc->ssl) > 0;
}

/* Messages for OpenSSL's reasons that mean "a client certificate is wanted, or not this one". */
static int about_client_cert(int reason) {
  switch (reason) {
#ifdef SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
#endif
    case SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE:
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
      return 1;
    default:
      return 0;
  }
}

/* EOF or a reset (anywhere: during the handshake or after it) is the connection's end, BG_ECONN;
 * only a failure of TLS itself is BG_ETLS. 0 when it was the connection's end. */
static int tls_own_failure(int ssl_error, unsigned long code, const char *when, bgi_err *err) {
  if (ssl_error != SSL_ERROR_SSL) return BG_OK;
  int reason = ERR_GET_REASON(code);
#ifdef SSL_R_UNEXPECTED_EOF_WHILE_READING
  if (reason == SSL_R_UNEXPECTED_EOF_WHILE_READING) return BG_OK;
#endif
  const char *r = code ? ERR_reason_error_string(code) : NULL;
  if (about_client_cert(reason))
    return bgi_err_set(err, BG_ETLS, "TLS: the server refused the connection %s: %s (does the server require a client "
                       "certificate, BG_OPT_TLS_CERT_FILE / BG_OPT_TLS_KEY_FILE, or one from another CA?)", when, r);
  if (reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_PACKET_LENGTH_TOO_LONG)
    return bgi_err_set(err, BG_ETLS, "TLS: %s %s (is the port a TLS port?)", r ? r : "unknown error", when);
  return bgi_err_set(err, BG_ETLS, "TLS: %s %s", r ? r : "unknown error", when);
}

int bgi_tls_failure(redisContext *ctx, bgi_err *err) {
  tls_conn *tc = ctx->privctx;
  if (!tc) return BG_OK;
  int st = tls_own_failure(tc->ssl_error, tc->err_code, "after the handshake", err);
  if (st != BG_OK || !tc->in_write || tc->ssl_error != SSL_ERROR_SYSCALL) return st;
  /* a write that met a reset (a failed read left the SSL object unusable: not read again): the server may have said why before it closed (TLS 1.3 sends
   * certificate_required only when it reads the client's first records); its alert is still in
   * the socket ahead of the reset */
  char scratch[256];
  ERR_clear_error();
  int r = SSL_read(tc->ssl, scratch, sizeof scratch);
  if (r <= 0 && note_failure(tc, r) == SSL_ERROR_SSL) st = tls_own_failure(tc->ssl_error, tc->err_code, "after the handshake", err);
  ERR_clear_error();
  return st;
}

int bgi_tls_start(const bgi_tls *t, redisContext *ctx, const char *host, const char *shown, bgi_err *err) {
  const char *name = t->server_name ? t->server_name : host;
  tls_conn *tc = calloc(1, sizeof *tc);
  int st = BG_OK;
  if (!tc) return bgi_err_set(err, BG_ENOMEM, "out of memory");
  /* the name checked, in a message: the option's, or an IP address; a name of the URL by its place */
  snprintf(tc->name_shown, sizeof tc->name_shown, "%s", t->server_name || is_ip(host) ? name : shown);
  ERR_clear_error();
  SSL *ssl = tc->ssl = SSL_new(t->ctx);
  BIO *bio = ssl ? bio_new(ctx->fd) : NULL;
  if (!bio) {
    st = bgi_err_set(err, BG_ENOMEM, "TLS: cannot create a connection: %s", ssl_reason());
    goto fail;
  }
  SSL_set_bio(ssl, bio, bio);   /* ssl owns it */
  /* a write may be taken record by record, and retried from a buffer that moved (the multiplexed
   * connection's queue) */
  SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  /* SNI takes DNS names only; the name check takes either */
  if (!is_ip(name)) SSL_set_tlsext_host_name(ssl, name);
  if (t->verify) {
    X509_VERIFY_PARAM *p = SSL_get0_param(ssl);
    X509_VERIFY_PARAM_set_hostflags(p, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    if (is_ip(name) ? X509_VERIFY_PARAM_set1_ip_asc(p, name) != 1 : X509_VERIFY_PARAM_set1_host(p, name, 0) != 1) {
      st = bgi_err_set(err, BG_ETLS, "TLS: cannot check the server's name \"%.200s\"", tc->name_shown);
      goto fail;
    }
  }
  SSL_set_connect_state(ssl);
  ERR_clear_error();
  /* the context owns it from now on (freed with the context, handshake done or not) */
  ctx->privctx = tc;
  ctx->funcs = funcs_for(ctx);
  return BG_OK;
fail:
  ERR_clear_error();
  tls_free(tc);
  return st;
}

int bgi_tls_step(redisContext *ctx, short *want, bgi_err *err) {
  tls_conn *tc = ctx->privctx;
  int st;
  ERR_clear_error();
  errno = 0;
  int r = SSL_do_handshake(tc->ssl);
  if (r == 1) {
    ERR_clear_error();
    return BG_OK;
  }
  int e = note_failure(tc, r);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
    *want = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
    ERR_clear_error();
    return 1;
  }
  long verify = SSL_get_verify_result(tc->ssl);
  int name_err = verify == X509_V_ERR_HOSTNAME_MISMATCH || verify == X509_V_ERR_IP_ADDRESS_MISMATCH;
  if (verify != X509_V_OK)
    st = bgi_err_set(err, BG_ETLS, "TLS: the server's certificate was refused: %s%s%.200s%s",
                     X509_verify_cert_error_string(verify), name_err ? " (it is not for " : "",
                     name_err ? tc->name_shown : "", name_err ? "; BG_OPT_TLS_SERVER_NAME names the one to expect)" : "");
  else if ((st = tls_own_failure(e, tc->err_code, "during the handshake", err)) == BG_OK)
    st = bgi_err_set(err, BG_ECONN, "the server closed the connection during the TLS handshake%s%s",
                     e == SSL_ERROR_SYSCALL && errno ? ": " : "", e == SSL_ERROR_SYSCALL && errno ? strerror(errno) : "");
  ERR_clear_error();
  return st;
}

int bgi_tls_connect(const bgi_tls *t, redisContext *ctx, const char *host, const char *shown, uint64_t deadline_ns,
                    bgi_err *err) {
  int st = bgi_tls_start(t, ctx, host, shown, err);
  short want = 0;
  while (st == BG_OK && (st = bgi_tls_step(ctx, &want, err)) == 1) {
    int w = bgi_poll_until(ctx->fd, want, deadline_ns, 1, NULL);
    if (w == 1) st = BG_OK;
    else if (w == BG_ECANCELED) st = bgi_cancel_err(err, "the TLS handshake");
    else if (w == 0) st = bgi_err_set(err, BG_ETIMEOUT, "TLS: the handshake did not finish in time");
    else st = bgi_err_set(err, BG_ECONN, "TLS: poll failed: %s", strerror(errno));
  }
  return st;
}

#else

int bgi_tls_supported(void) { return 0; }

int bgi_tls_new(bgi_tls **out, const bgi_tls_config *cfg, bgi_err *err) {
  (void)cfg;
  *out = NULL;
  /* no C names: a binding's user reads this too (the Go binding's bloomguard_notls build) */
  return bgi_err_set(err, BG_ENOTSUP, "TLS was asked for (a rediss:// URL or a TLS option), but this build of "
                     "bloomguard has none: it is built against a hiredis without its TLS part (e.g. Debian's 0.14; "
                     "CMake's default hiredis has it) or, in Go, with the bloomguard_notls tag");
}

void bgi_tls_free(bgi_tls *t) { (void)t; }

int bgi_tls_connect(const bgi_tls *t, redisContext *ctx, const char *host, const char *shown, uint64_t deadline_ns,
                    bgi_err *err) {
  (void)t, (void)ctx, (void)host, (void)shown, (void)deadline_ns;
  return bgi_err_set(err, BG_ENOTSUP, "TLS is not available in this build");
}

int bgi_tls_start(const bgi_tls *t, redisContext *ctx, const char *host, const char *shown, bgi_err *err) {
  (void)t, (void)ctx, (void)host, (void)shown;
  return bgi_err_set(err, BG_ENOTSUP, "TLS is not available in this build");
}

int bgi_tls_step(redisContext *ctx, short *want, bgi_err *err) {
  (void)ctx, (void)want;
  return bgi_err_set(err, BG_ENOTSUP, "TLS is not available in this build");
}

ssize_t bgi_tls_send(redisContext *ctx, const char *p, size_t n) {
  (void)ctx, (void)p, (void)n;
  errno = ENOTSUP;
  return -1;
}

int bgi_tls_buffered(redisContext *ctx) {
  (void)ctx;
  return 0;
}

int bgi_tls_failure(redisContext *ctx, bgi_err *err) {
  (void)ctx, (void)err;
  return BG_OK;
}

#endif
