/*
 * TLS against real TLS-only redis-servers (tests/c/tls_fixture.h, certificates made at test time by
 * scripts/tls-certs.sh): the right CA works for every kind of connection (pooled ones and a lock
 * waiter's subscription); the wrong CA, an expired certificate, another name each fail within the
 * connect timeout with BG_ETLS and a message naming the cause; verification off works; a server
 * that wants a client certificate gets one; unusable files are named; no password in any message.
 * A build without hiredis's TLS part says BG_ENOTSUP.
 */
#include <bloomguard.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "filters.h"
#include "harness.h"
#include "lateness.h"
#include "items.h"
#include "load.h"
#include "tls_fixture.h"

static bgt_tls_redis good;

/* Opens url with the TLS options given (NULL: unset), reaching the server at open
 * (BG_OPT_CONNECT_AT_OPEN); the status, and msg. */
static int open_tls(bg_client **out, const char *url, const bgt_tls_redis *r, const char *ca, const char *cert,
                    const char *key, const char *name, int verify, char *msg, size_t cap) {
  bg_options *o = NULL;
  char path[400];
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_CONNECT_TIMEOUT_MS, 2000));
  CHECK_OK(bg_options_set_int(o, BG_OPT_CONNECT_AT_OPEN, 1));
  if (ca) CHECK_OK(bg_options_set_str(o, BG_OPT_TLS_CA_FILE, bgt_tls_path(r, ca, path, sizeof path)));
  if (cert) CHECK_OK(bg_options_set_str(o, BG_OPT_TLS_CERT_FILE, bgt_tls_path(r, cert, path, sizeof path)));
  if (key) CHECK_OK(bg_options_set_str(o, BG_OPT_TLS_KEY_FILE, bgt_tls_path(r, key, path, sizeof path)));
  if (name) CHECK_OK(bg_options_set_str(o, BG_OPT_TLS_SERVER_NAME, name));
  if (!verify) CHECK_OK(bg_options_set_int(o, BG_OPT_TLS_VERIFY, 0));
  *out = NULL;
  msg[0] = 0;
  int st = bgt_client_open(out, url, o, msg, cap);
  bg_options_free(o);
  return st;
}

static void test_the_right_ca_works_everywhere(void) {
  bg_client *c = NULL;
  char msg[512];
  CHECK_MSG(open_tls(&c, good.url, &good, "ca.crt", NULL, NULL, NULL, 1, msg, sizeof msg) == BG_OK, "%s", msg);
  items it = make_items("tls", 300);
  bg_filter *f = bgt_fresh_filter(c, "tls-filter", 10000, 0.01, &it);
  CHECK_EQ_INT(bgt_count_present(f, &it), it.n);
  bg_rotation *r = NULL;
  CHECK_OK(bg_rotation_begin(&r, f, 10000, 0.01, BG_ROTATE_SWAP, NULL));
  CHECK_OK(bg_rotation_add_many(r, PTRS(it), it.len, it.n));
  CHECK_OK(bg_rotation_commit(r));
  bg_rotation_free(r);
  CHECK_EQ_INT(bgt_count_present(f, &it), it.n);
  /* a lock waiter's own connection (SUBSCRIBE) is TLS too: it is woken by the release */
  bg_lock *a = NULL, *b = NULL;
  CHECK_OK(bg_lock_open(&a, c, "tls-lock", NULL));
  CHECK_OK(bg_lock_open(&b, c, "tls-lock", NULL));
  CHECK_OK(bg_lock_acquire(a, BG_LOCK_EXCLUSIVE, 0, NULL));
  pthread_t t;
  bgt_waiter w = {b, 5000, -1, 0};
  pthread_create(&t, NULL, bgt_waiter_main, &w);
  sleep_ms(300);
  uint64_t released = bgt_now_ns();
  CHECK_OK(bg_lock_release(a));
  pthread_join(t, NULL);
  CHECK_OK(w.st);
  double ms = (double)(w.got_ns - released) / 1e6;
  printf("    the TLS waiter acquired %.1f ms after the release\n", ms);
  /* before its once-a-second recheck, unless the machine held it back */
  CHECK_MSG(ms < 600 + bgt_lateness_ms(ms), "the waiter took %.1f ms: it was not woken through its subscription", ms);
  bg_lock_close(a);
  bg_lock_close(b);
  /* the name check takes the URL's host: localhost (DNS) and 127.0.0.1 (IP) are both in the SAN */
  char url[160];
  snprintf(url, sizeof url, "rediss://localhost:%d", good.port);
  bg_client *c2 = NULL;
  CHECK_MSG(open_tls(&c2, url, &good, "ca.crt", NULL, NULL, NULL, 1, msg, sizeof msg) == BG_OK, "%s", msg);
  bg_client_close(c2);
  /* a redis:// URL with a TLS option speaks TLS too */
  snprintf(url, sizeof url, "redis://127.0.0.1:%d", good.port);
  CHECK_MSG(open_tls(&c2, url, &good, "ca.crt", NULL, NULL, NULL, 1, msg, sizeof msg) == BG_OK, "%s", msg);
  bg_client_close(c2);
  bg_filter_close(f);
  bg_client_close(c);
  items_free(&it);
}

/* Each refusal: BG_ETLS, the cause named, within the connect timeout, no password in the message. */
static void refused(const char *cert, const char *ca, const char *name, const char *cause) {
  bgt_tls_redis r;
  bgt_tls_redis_start(&r, cert, 0);
  char url[200], msg[512];
  snprintf(url, sizeof url, "rediss://:S3cr3tPw@127.0.0.1:%d", r.port);
  bg_client *c = NULL;
  uint64_t t0 = bgt_now_ns();
  int st = open_tls(&c, url, &r, ca, NULL, NULL, name, 1, msg, sizeof msg);
  double ms = (double)(bgt_now_ns() - t0) / 1e6;
  printf("    %s server, CA %s: %s (%.0f ms)\n", cert, ca, msg, ms);
  CHECK_STATUS(st, BG_ETLS);
  CHECK(c == NULL);
  CHECK_CONTAINS(msg, cause);
  CHECK_MSG(!strstr(msg, "S3cr3tPw"), "password in: %s", msg);
  CHECK_MSG(ms < 2000, "took %.0f ms, longer than the connect timeout", ms);
  /* opened connecting nothing: the first call is refused the same way */
  char path[400];
  bg_options *o = NULL;
  bg_call *call = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_str(o, BG_OPT_TLS_CA_FILE, bgt_tls_path(&r, ca, path, sizeof path)));
  if (name) CHECK_OK(bg_options_set_str(o, BG_OPT_TLS_SERVER_NAME, name));
  CHECK_OK(bg_call_new(&call));
  CHECK_OK(bgt_client_open(&c, url, o, msg, sizeof msg));
  CHECK_STATUS(bg_client_ping_ex(c, call), BG_ETLS);
  CHECK_CONTAINS(bg_call_errmsg(call), cause);
  CHECK_MSG(!strstr(bg_call_errmsg(call), "S3cr3tPw"), "password in: %s", bg_call_errmsg(call));
  bg_client_close(c);
  bg_call_free(call);
  bg_options_free(o);
  /* the control: verification off gets through to the same server (the password is refused: no
   * password is set there, so AUTH fails with an error, not a TLS one) */
  snprintf(url, sizeof url, "rediss://127.0.0.1:%d", r.port);
  CHECK_OK(open_tls(&c, url, &r, ca, NULL, NULL, NULL, 0, msg, sizeof msg));
  CHECK_OK(bg_client_ping(c));
  bg_client_close(c);
  bgt_tls_redis_stop(&r);
}

static void test_the_wrong_ca_is_refused(void) { refused("server", "other-ca.crt", NULL, "certificate was refused"); }
static void test_an_expired_certificate_is_refused(void) { refused("expired", "ca.crt", NULL, "expired"); }
static void test_another_name_is_refused(void) { refused("wrong-host", "ca.crt", NULL, "mismatch (it is not for 127.0.0.1"); }
static void test_the_server_name_option_is_checked(void) {
  refused("server", "ca.crt", "db.example", "hostname mismatch (it is not for db.example");
}

static void test_client_certificates(void) {
  bgt_tls_redis r;
  bgt_tls_redis_start(&r, "server", 1);
  bg_client *c = NULL;
  char msg[512];
  /* without one: refused - at the handshake (TLS 1.2) or when the server reads the first command
   * (TLS 1.3 finishes the client's side first) */
  int st = open_tls(&c, r.url, &r, "ca.crt", NULL, NULL, NULL, 1, msg, sizeof msg);
  printf("    no client certificate: %s: %s\n", bg_strerror(st), msg);
  CHECK_STATUS(st, BG_ETLS);
  CHECK_CONTAINS(msg, "client certificate");
  CHECK(c == NULL);
  /* from the wrong CA: refused */
  st = open_tls(&c, r.url, &r, "ca.crt", "other-client.crt", "other-client.key", NULL, 1, msg, sizeof msg);
  CHECK_STATUS(st, BG_ETLS);
  /* the right one works */
  st = open_tls(&c, r.url, &r, "ca.crt", "client.crt", "client.key", NULL, 1, msg, sizeof msg);
  CHECK_MSG(st == BG_OK, "%s", msg);
  CHECK_OK(bg_client_ping(c));
  bg_client_close(c);
  bgt_tls_redis_stop(&r);
}

static void test_unusable_files_are_named(void) {
  bg_client *c = NULL;
  char msg[512];
  CHECK_STATUS(open_tls(&c, good.url, &good, "missing.crt", NULL, NULL, NULL, 1, msg, sizeof msg), BG_ETLS);
  CHECK_CONTAINS(msg, "cannot read the CA file (BG_OPT_TLS_CA_FILE)");
  CHECK_CONTAINS(msg, "missing.crt");
  CHECK_STATUS(open_tls(&c, good.url, &good, "garbage.crt", NULL, NULL, NULL, 1, msg, sizeof msg), BG_ETLS);
  CHECK_CONTAINS(msg, "cannot use the CA file");
  CHECK_STATUS(open_tls(&c, good.url, &good, "ca.crt", "client.crt", "mismatched.key", NULL, 1, msg, sizeof msg),
               BG_ETLS);
  CHECK_CONTAINS(msg, "does not match the certificate");
  CHECK_STATUS(open_tls(&c, good.url, &good, "ca.crt", "client.crt", NULL, NULL, 1, msg, sizeof msg), BG_ETLS);
  CHECK_CONTAINS(msg, "needs both BG_OPT_TLS_CERT_FILE and BG_OPT_TLS_KEY_FILE");
  CHECK_STATUS(open_tls(&c, good.url, &good, "ca.crt", "garbage.crt", "client.key", NULL, 1, msg, sizeof msg), BG_ETLS);
  CHECK_CONTAINS(msg, "client certificate (BG_OPT_TLS_CERT_FILE)");
  /* plain TCP to a TLS port: a connection error, not a hang or a crash */
  char url[160];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d", good.port);
  bg_options *o = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_COMMAND_TIMEOUT_MS, 500));
  CHECK_OK(bg_options_set_int(o, BG_OPT_CONNECT_AT_OPEN, 1));
  int st = bgt_client_open(&c, url, o, msg, sizeof msg);
  bg_options_free(o);
  CHECK(st == BG_ECONN || st == BG_ETIMEOUT);
}

#ifdef BGT_HAVE_OPENSSL
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

/* A TLS server that completes the handshake, then closes the connection without a word (what a
 * server restarting, a CLIENT KILL or a proxy's timeout looks like right after the handshake). */
typedef struct closing_server {
  int lfd, port, accepted;
  SSL_CTX *ctx;
  pthread_t thr;
} closing_server;

static void *closing_main(void *arg) {
  closing_server *s = arg;
  for (;;) {
    int fd = accept(s->lfd, NULL, NULL);
    if (fd < 0) return NULL;
    SSL *ssl = SSL_new(s->ctx);
    SSL_set_fd(ssl, fd);
    if (SSL_accept(ssl) == 1) s->accepted++;
    SSL_free(ssl);   /* no close_notify: the connection just ends */
    close(fd);
  }
}

static void closing_start(closing_server *s, const bgt_tls_redis *r) {
  char cert[400], key[400];
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t alen = sizeof a;
  memset(s, 0, sizeof *s);
  s->ctx = SSL_CTX_new(TLS_server_method());
  CHECK(SSL_CTX_use_certificate_chain_file(s->ctx, bgt_tls_path(r, "server.crt", cert, sizeof cert)) == 1);
  CHECK(SSL_CTX_use_PrivateKey_file(s->ctx, bgt_tls_path(r, "server.key", key, sizeof key), SSL_FILETYPE_PEM) == 1);
  s->lfd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(bind(s->lfd, (struct sockaddr *)&a, sizeof a) == 0 && listen(s->lfd, 16) == 0);
  CHECK(getsockname(s->lfd, (struct sockaddr *)&a, &alen) == 0);
  s->port = ntohs(a.sin_port);
  pthread_create(&s->thr, NULL, closing_main, s);
}

static void closing_stop(closing_server *s) {
  shutdown(s->lfd, SHUT_RDWR);
  close(s->lfd);
  pthread_join(s->thr, NULL);
  SSL_CTX_free(s->ctx);
}

/* A connection closed after the TLS handshake, during bloomguard's own (AUTH, HELLO, ...), is the
 * connection's end (BG_ECONN, which the degrade policy answers as a connection failure), not a
 * TLS failure: TLS did its part. The control: the certificate refusal stays BG_ETLS. */
static void test_closed_after_the_handshake_is_a_connection_error(void) {
  closing_server s;
  closing_start(&s, &good);
  char url[160], msg[512];
  snprintf(url, sizeof url, "rediss://127.0.0.1:%d", s.port);
  bg_client *c = NULL;
  int st = open_tls(&c, url, &good, "ca.crt", NULL, NULL, NULL, 1, msg, sizeof msg);
  printf("    closed after the handshake: %s: %s\n", bg_strerror(st), msg);
  CHECK_STATUS(st, BG_ECONN);
  CHECK(s.accepted >= 1);   /* the handshake itself was done */
  if (c) bg_client_close(c);
  st = open_tls(&c, url, &good, "other-ca.crt", NULL, NULL, NULL, 1, msg, sizeof msg);
  CHECK_STATUS(st, BG_ETLS);
  closing_stop(&s);
}
#endif

static void test_a_build_without_tls_says_so(void) {
  if (bg_features() & BG_FEATURE_TLS) return;
  bg_client *c = NULL;
  char msg[512];
  CHECK_STATUS(bgt_client_open(&c, good.url, NULL, msg, sizeof msg), BG_ENOTSUP);
  CHECK_CONTAINS(msg, "this build of bloomguard has none");
}

int main(int argc, char **argv) {
  bgt_tls_redis_start(&good, "server", 0);
  bgt_lateness_start();
  int rc;
  if (!(bg_features() & BG_FEATURE_TLS)) {
    /* hiredis 0.14: only the refusal can be tested */
    static const bgt_case cases[] = {BGT_CASE(test_a_build_without_tls_says_so)};
    rc = bgt_main(argc, argv, cases, 1);
  } else {
    static const bgt_case cases[] = {
        BGT_CASE(test_the_right_ca_works_everywhere),
        BGT_CASE(test_the_wrong_ca_is_refused),
        BGT_CASE(test_an_expired_certificate_is_refused),
        BGT_CASE(test_another_name_is_refused),
        BGT_CASE(test_the_server_name_option_is_checked),
        BGT_CASE(test_client_certificates),
        BGT_CASE(test_unusable_files_are_named),
#ifdef BGT_HAVE_OPENSSL
        BGT_CASE(test_closed_after_the_handshake_is_a_connection_error),
#endif
    };
    rc = bgt_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
  }
  bgt_tls_redis_stop(&good);
  return rc;
}
