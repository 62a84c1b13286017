/*
 * Internal: TLS on every connection of a client (rediss:// and rediss-sentinel:// URLs, or
 * BG_OPT_TLS_*), through hiredis's TLS part (ssl.c) and OpenSSL, so that every byte goes
 * through hiredis: the client's SSL_CTX (CA, client certificate) is made once at open, and
 * each connection gets an SSL object that checks the server's name (BG_OPT_TLS_SERVER_NAME, else
 * the host connected to: a DNS name or an IP address) unless verification is off.
 */
#ifndef BG_INTERNAL_TLS_H
#define BG_INTERNAL_TLS_H

#include <hiredis/hiredis.h>

#include "common/err.h"

typedef struct bgi_tls bgi_tls;

typedef struct bgi_tls_config {
  const char *ca_file, *ca_dir;      /* NULL both: the system's default trust store */
  const char *cert_file, *key_file;  /* a client certificate (both or neither) */
  const char *server_name;           /* SNI and the name checked; NULL: the host connected to */
  int verify;                        /* 0: no check at all (testing only) */
} bgi_tls_config;

/* 1 when this build has hiredis's TLS part. */
int bgi_tls_supported(void);

/* BG_OK, BG_ENOTSUP (a build without TLS), BG_ETLS (a file that cannot be read or used, a key
 * that does not match its certificate: the message names the file), BG_ENOMEM. */
int bgi_tls_new(bgi_tls **out, const bgi_tls_config *cfg, bgi_err *err);
void bgi_tls_free(bgi_tls *t);

/* The handshake on a connected blocking context (bounded by its socket timeouts); host is the
 * host connected to. BG_ETLS with the cause (certificate verify failed: expired, unknown CA,
 * hostname mismatch; no client certificate; ...), BG_ETIMEOUT, BG_ECONN. */
int bgi_tls_connect(const bgi_tls *t, redisContext *ctx, const char *host, bgi_err *err);

#endif
