/*
 * Internal: TLS on every connection of a client (rediss:// and rediss-sentinel:// URLs, or
 * BG_OPT_TLS_*), with OpenSSL: the client's SSL_CTX (CA, client certificate) is made once at open,
 * and each connection gets an SSL object that checks the server's name (BG_OPT_TLS_SERVER_NAME,
 * else the host connected to: a DNS name or an IP address) unless verification is off.
 *
 * Why not hiredis's TLS part (redisInitiateSSL): it gives OpenSSL the socket with SSL_set_fd, whose
 * BIO writes with write(2), and a write to a connection the server has closed raises SIGPIPE,
 * which kills a host process that kept the default action (issue: a pooled connection killed by
 * CLIENT KILL, then written). Here the SSL object writes through a BIO of its own that sends with
 * MSG_NOSIGNAL (SO_NOSIGPIPE on macOS: common/sock.h), and the hiredis context reads through it
 * (its read function is replaced), so no byte of a TLS connection can raise SIGPIPE, whether
 * OpenSSL writes application data, a handshake message or an alert. The handshake runs on the non-blocking socket, every wait bounded
 * by the caller's absolute deadline.
 */
#ifndef BG_INTERNAL_TLS_H
#define BG_INTERNAL_TLS_H

#include <hiredis/hiredis.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"

typedef struct bgi_tls bgi_tls;

typedef struct bgi_tls_config {
  const char *ca_file, *ca_dir;      /* NULL both: the system's trust store, found as tls_ca.h says */
  const char *cert_file, *key_file;  /* a client certificate (both or neither) */
  const char *server_name;           /* SNI and the name checked; NULL: the host connected to */
  int verify;                        /* 0: no check at all (testing only) */
} bgi_tls_config;

/* 1 when this build has TLS. */
int bgi_tls_supported(void);

/* BG_OK, BG_ENOTSUP (a build without TLS), BG_ETLS (a file that cannot be read or used, a key
 * that does not match its certificate: the message names the file; no CA given and none found on
 * the system: the message lists the paths tried), BG_ENOMEM. */
int bgi_tls_new(bgi_tls **out, const bgi_tls_config *cfg, bgi_err *err);
void bgi_tls_free(bgi_tls *t);

/* Tests only: the system trust store's paths (tls_ca.h; OpenSSL's default included) are looked up
 * under root from the next bgi_tls_new on, so a test can lay out one distribution's store in a
 * scratch directory; NULL or "" is the real root. SSL_CERT_FILE / SSL_CERT_DIR are read as they are. */
void bgi_tls_fault_ca_root(const char *root);

/*
 * The handshake on a connected non-blocking context, each wait until deadline_ns and cancellable
 * (nothing of a call was sent yet); host is the host connected to, shown how a message may name it
 * (redis/url.h). Then the context reads and bgi_tls_send writes through the SSL object.
 * BG_ETLS for a failure of TLS itself, with the cause (certificate verify failed: expired, unknown
 * CA, hostname mismatch; an alert of the server's, e.g. a client certificate required); BG_ECONN
 * when the connection was closed or reset; BG_ETIMEOUT; BG_ECANCELED.
 */
int bgi_tls_connect(const bgi_tls *t, redisContext *ctx, const char *host, const char *shown, uint64_t deadline_ns,
                    bgi_err *err);

/*
 * The same handshake in non-blocking pieces (a submission queue's connections): bgi_tls_start sets
 * up the SSL object on the connected context (which owns it from then on: bgi_conn_drop frees it,
 * handshake done or not); bgi_tls_step moves the handshake on: BG_OK once done, 1 with *want
 * (POLLIN / POLLOUT) to wait for, or the failure as bgi_tls_connect gives it.
 */
int bgi_tls_start(const bgi_tls *t, redisContext *ctx, const char *host, const char *shown, bgi_err *err);
int bgi_tls_step(redisContext *ctx, short *want, bgi_err *err);

/* A TLS connection's write of p[0..n): the bytes taken (0: the socket is full, wait for POLLOUT
 * and call again with the same bytes at least), or -1 (failed: bgi_tls_failure says how). */
ssize_t bgi_tls_send(redisContext *ctx, const char *p, size_t n);
/* 1 when OpenSSL holds decrypted bytes the reader has not taken (poll would not show them). */
int bgi_tls_buffered(redisContext *ctx);
/* After a failed read or write on a TLS connection: BG_ETLS with OpenSSL's reason when TLS itself
 * failed (an alert of the server's, such as TLS 1.3's certificate_required), else BG_OK (the
 * connection was closed or reset: the caller's BG_ECONN). */
int bgi_tls_failure(redisContext *ctx, bgi_err *err);

#endif
