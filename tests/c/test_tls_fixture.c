/*
 * The TLS fixture's own tests, with no library code: `openssl s_client` (and the openssl CLI on the
 * files) proves that each server and each certificate of scripts/tls-certs.sh behaves as the
 * library's TLS tests will assume:
 *   the right CA verifies (CA file and hashed CA directory, hostname localhost and IP 127.0.0.1);
 *   the other CA fails; the expired certificate fails with "certificate has expired"; wrong-host
 *   fails the hostname check for localhost and 127.0.0.1; with --tls-auth-clients yes a connection
 *   without a client certificate is refused (the server logs "peer did not return a certificate"),
 *   one with client.crt works and one with other-client.crt (the other CA) is refused; the bad-input files are what they claim.
 * Each failure has its control: the same server answering when the one thing that should break it
 * is put right (the right CA, verification off, the name in the certificate, a client certificate,
 * auth-clients off), so a check that can never succeed would show up.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "tls_fixture.h"

#define OUT_CAP 16384

/* `openssl s_client -connect 127.0.0.1:P -quiet EXTRA...` sending PING and QUIT (QUIT makes the
 * server close, so s_client ends); 1 if the server answered +PONG. The output is in out. */
static int s_client(const bgt_tls_redis *r, const char *const *extra, char *out) {
  const char *argv[32];
  char connect[64];
  int n = 0, st;
  snprintf(connect, sizeof connect, "127.0.0.1:%d", r->port);
  argv[n++] = "openssl"; argv[n++] = "s_client";
  argv[n++] = "-connect"; argv[n++] = connect;
  argv[n++] = "-quiet";  /* implies -ign_eof: read until the server closes after QUIT */
  for (; extra && *extra && n < 31; extra++) argv[n++] = *extra;
  argv[n] = NULL;
  st = bgt_tls_run(argv, "PING\r\nQUIT\r\n", 10000, out, OUT_CAP);
  CHECK_MSG(st >= 0, "openssl s_client timed out or could not run: %s", out);
  return strstr(out, "+PONG") != NULL;
}

/* Prints the line of out that contains key (or the first line), to show what was seen. */
static void show(const char *what, const char *out, const char *key) {
  const char *p = key ? strstr(out, key) : NULL, *e;
  if (!p) p = out;
  while (p > out && p[-1] != '\n') p--;
  e = strchr(p, '\n');
  printf("  %-44s %.*s\n", what, e ? (int)(e - p) : (int)strlen(p), p);
}

/* The server's log (redis.log in its scratch directory) into out. */
static void server_log(const bgt_tls_redis *r, char *out) {
  char path[512];
  size_t n = 0;
  FILE *f;
  snprintf(path, sizeof path, "%s/redis.log", r->dir);
  out[0] = 0;
  f = fopen(path, "r");
  CHECK_MSG(f != NULL, "cannot open %s", path);
  if (!f) return;
  n = fread(out, 1, OUT_CAP - 1, f);
  out[n] = 0;
  fclose(f);
}

#define PATH(r, name) bgt_tls_path(r, name, (char[512]){0}, 512)

static void test_right_ca(void) {
  bgt_tls_redis r;
  char out[OUT_CAP], want[64];
  uint64_t t0 = bgt_now_ns();
  bgt_tls_redis_start(&r, NULL, 0);
  printf("  started in %.2f s (certificates included): %s\n", (double)(bgt_now_ns() - t0) / 1e9, r.url);
  snprintf(want, sizeof want, "rediss://127.0.0.1:%d", r.port);
  CHECK_EQ_STR(r.url, want);
  CHECK(r.pid > 0 && r.port > 0);
  CHECK(access(PATH(&r, "ca.crt"), R_OK) == 0);

  const char *host[] = {"-CAfile", PATH(&r, "ca.crt"), "-verify_return_error", "-verify_hostname", "localhost", NULL};
  CHECK_MSG(s_client(&r, host, out), "right CA, hostname localhost: %s", out);
  show("right CA, -verify_hostname localhost:", out, "+PONG");
  const char *ip[] = {"-CAfile", PATH(&r, "ca.crt"), "-verify_return_error", "-verify_ip", "127.0.0.1", NULL};
  CHECK_MSG(s_client(&r, ip, out), "right CA, IP 127.0.0.1: %s", out);
  const char *dir[] = {"-CApath", PATH(&r, "ca-dir"), "-verify_return_error", "-verify_hostname", "localhost", NULL};
  CHECK_MSG(s_client(&r, dir, out), "right CA as a hashed directory: %s", out);
  show("right CA directory (-CApath ca-dir):", out, "+PONG");
  bgt_tls_redis_stop(&r);
}

static void test_other_ca(void) {
  bgt_tls_redis r;
  char out[OUT_CAP];
  bgt_tls_redis_start(&r, "server", 0);
  const char *other[] = {"-CAfile", PATH(&r, "other-ca.crt"), "-verify_return_error", "-verify_hostname", "localhost", NULL};
  CHECK_MSG(!s_client(&r, other, out), "the other CA must not verify: %s", out);
  CHECK_CONTAINS(out, "certificate verify failed");
  show("other CA:", out, "verify error");
  const char *other_dir[] = {"-CApath", PATH(&r, "other-ca-dir"), "-verify_return_error", NULL};
  CHECK_MSG(!s_client(&r, other_dir, out), "the other CA's directory must not verify: %s", out);
  CHECK_CONTAINS(out, "certificate verify failed");
  /* control: the same server, the right CA */
  const char *right[] = {"-CAfile", PATH(&r, "ca.crt"), "-verify_return_error", NULL};
  CHECK_MSG(s_client(&r, right, out), "control (right CA): %s", out);
  bgt_tls_redis_stop(&r);
}

static void test_expired(void) {
  bgt_tls_redis r;
  char out[OUT_CAP];
  bgt_tls_redis_start(&r, "expired", 0);
  const char *verify[] = {"-CAfile", PATH(&r, "ca.crt"), "-verify_return_error", "-verify_hostname", "localhost", NULL};
  CHECK_MSG(!s_client(&r, verify, out), "an expired certificate must not verify: %s", out);
  CHECK_CONTAINS(out, "certificate has expired");
  show("expired:", out, "certificate has expired");
  /* control: verification off (no -verify_return_error), the server answers: only the date is wrong */
  const char *noverify[] = {"-CAfile", PATH(&r, "ca.crt"), "-verify_hostname", "localhost", NULL};
  CHECK_MSG(s_client(&r, noverify, out), "control (verification not enforced): %s", out);
  CHECK_CONTAINS(out, "certificate has expired");
  bgt_tls_redis_stop(&r);
}

static void test_wrong_host(void) {
  bgt_tls_redis r;
  char out[OUT_CAP];
  bgt_tls_redis_start(&r, "wrong-host", 0);
  const char *host[] = {"-CAfile", PATH(&r, "ca.crt"), "-verify_return_error", "-verify_hostname", "localhost", NULL};
  CHECK_MSG(!s_client(&r, host, out), "wrong-host must fail for localhost: %s", out);
  CHECK_CONTAINS(out, "hostname mismatch");
  show("wrong-host, -verify_hostname localhost:", out, "mismatch");
  const char *ip[] = {"-CAfile", PATH(&r, "ca.crt"), "-verify_return_error", "-verify_ip", "127.0.0.1", NULL};
  CHECK_MSG(!s_client(&r, ip, out), "wrong-host must fail for 127.0.0.1: %s", out);
  CHECK_CONTAINS(out, "IP address mismatch");
  show("wrong-host, -verify_ip 127.0.0.1:", out, "mismatch");
  /* controls: the chain is good (no name check), and the name in the certificate passes */
  const char *chain[] = {"-CAfile", PATH(&r, "ca.crt"), "-verify_return_error", NULL};
  CHECK_MSG(s_client(&r, chain, out), "control (chain only): %s", out);
  const char *named[] = {"-CAfile", PATH(&r, "ca.crt"), "-verify_return_error", "-verify_hostname", "other.example", NULL};
  CHECK_MSG(s_client(&r, named, out), "control (other.example): %s", out);
  bgt_tls_redis_stop(&r);
}

static void test_auth_clients(void) {
  bgt_tls_redis r;
  char out[OUT_CAP];
  bgt_tls_redis_start(&r, NULL, 1);
  const char *none[] = {"-CAfile", PATH(&r, "ca.crt"), "-verify_return_error", NULL};
  CHECK_MSG(!s_client(&r, none, out), "no client certificate must be refused: %s", out);
  /* TLS 1.3: the client's handshake ends before the server checks, so the client may read the
   * "certificate required" alert or only the close; the server's log says why, every time */
  show("auth-clients yes, no client certificate:", out, "alert");
  server_log(&r, out);
  CHECK_CONTAINS(out, "peer did not return a certificate");
  const char *good[] = {"-CAfile", PATH(&r, "ca.crt"), "-verify_return_error",
                        "-cert", PATH(&r, "client.crt"), "-key", PATH(&r, "client.key"), NULL};
  CHECK_MSG(s_client(&r, good, out), "client.crt must be accepted: %s", out);
  show("auth-clients yes, client.crt:", out, "+PONG");
  const char *other[] = {"-CAfile", PATH(&r, "ca.crt"), "-verify_return_error",
                         "-cert", PATH(&r, "other-client.crt"), "-key", PATH(&r, "other-client.key"), NULL};
  CHECK_MSG(!s_client(&r, other, out), "a client certificate of the other CA must be refused: %s", out);
  show("auth-clients yes, other-client.crt:", out, "alert");
  server_log(&r, out);
  CHECK_CONTAINS(out, "certificate verify failed");
  bgt_tls_redis_stop(&r);

  /* control: auth-clients no takes a connection without a client certificate */
  bgt_tls_redis_start(&r, NULL, 0);
  const char *none0[] = {"-CAfile", PATH(&r, "ca.crt"), "-verify_return_error", NULL};
  CHECK_MSG(s_client(&r, none0, out), "control (auth-clients no): %s", out);
  bgt_tls_redis_stop(&r);
}

/* The bad-input files, checked with the openssl CLI (one server's certs directory is enough). */
static void test_bad_files(void) {
  bgt_tls_redis r;
  char out[OUT_CAP], pub_cert[OUT_CAP], pub_key[OUT_CAP];
  struct stat sb;
  bgt_tls_redis_start(&r, NULL, 0);

  const char *garbage[] = {"openssl", "x509", "-noout", "-in", PATH(&r, "garbage.crt"), NULL};
  CHECK(stat(PATH(&r, "garbage.crt"), &sb) == 0 && sb.st_size > 0);
  CHECK_MSG(bgt_tls_run(garbage, NULL, 10000, out, sizeof out) != 0, "garbage.crt parsed: %s", out);
  const char *client[] = {"openssl", "x509", "-noout", "-in", PATH(&r, "client.crt"), NULL};
  CHECK_MSG(bgt_tls_run(client, NULL, 10000, out, sizeof out) == 0, "control (client.crt): %s", out);

  CHECK(stat(PATH(&r, "unreadable.crt"), &sb) == 0 && (sb.st_mode & 0777) == 0);
  CHECK(stat(PATH(&r, "missing.crt"), &sb) != 0 && errno == ENOENT);

  /* mismatched.key is a valid key, not client.crt's: compare the public keys */
  const char *cert_pub[] = {"openssl", "x509", "-noout", "-pubkey", "-in", PATH(&r, "client.crt"), NULL};
  const char *key_pub[] = {"openssl", "pkey", "-pubout", "-in", PATH(&r, "client.key"), NULL};
  const char *bad_pub[] = {"openssl", "pkey", "-pubout", "-in", PATH(&r, "mismatched.key"), NULL};
  CHECK_EQ_INT(bgt_tls_run(cert_pub, NULL, 10000, pub_cert, sizeof pub_cert), 0);
  CHECK_EQ_INT(bgt_tls_run(key_pub, NULL, 10000, pub_key, sizeof pub_key), 0);
  CHECK_MSG(strcmp(pub_cert, pub_key) == 0, "control: client.key belongs to client.crt");
  CHECK_EQ_INT(bgt_tls_run(bad_pub, NULL, 10000, pub_key, sizeof pub_key), 0);
  CHECK_CONTAINS(pub_key, "BEGIN PUBLIC KEY");
  CHECK_MSG(strcmp(pub_cert, pub_key) != 0, "mismatched.key matches client.crt");
  /* and s_client refuses the pair, as a TLS client library should */
  const char *pair[] = {"-CAfile", PATH(&r, "ca.crt"), "-cert", PATH(&r, "client.crt"),
                        "-key", PATH(&r, "mismatched.key"), NULL};
  CHECK_MSG(!s_client(&r, pair, out), "client.crt with mismatched.key: %s", out);
  CHECK_CONTAINS(out, "key values mismatch");
  show("client.crt + mismatched.key:", out, "mismatch");
  bgt_tls_redis_stop(&r);
}

/* stop leaves nothing: the process is gone (reaped, the port closed), the directory removed */
static void test_stop(void) {
  bgt_tls_redis r;
  char dir[256], out[OUT_CAP];
  struct stat sb;
  pid_t pid;
  bgt_tls_redis_start(&r, NULL, 0);
  pid = r.pid;
  snprintf(dir, sizeof dir, "%s", r.dir);
  CHECK(stat(dir, &sb) == 0);
  bgt_tls_redis_stop(&r);
  CHECK_EQ_INT(r.pid, 0);
  CHECK(kill(pid, 0) != 0 && errno == ESRCH);
  CHECK(stat(dir, &sb) != 0 && errno == ENOENT);
  const char *none[] = {NULL};
  CHECK(!s_client(&r, none, out));  /* r.port kept: nothing answers there now */
  bgt_tls_redis_stop(&r);  /* idempotent */
}

/* an unknown certificate name is a test bug: exit 2 with a message (in a child, so we see it) */
static void test_bad_cert_name(void) {
  int st = 0;
  pid_t pid = fork();
  if (pid == 0) {
    bgt_tls_redis r;
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 2);
    bgt_tls_redis_start(&r, "nope", 0);
    _exit(0);
  }
  CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2);
}

BGT_RUN(BGT_CASE(test_right_ca), BGT_CASE(test_other_ca), BGT_CASE(test_expired), BGT_CASE(test_wrong_host),
        BGT_CASE(test_auth_clients), BGT_CASE(test_bad_files), BGT_CASE(test_stop), BGT_CASE(test_bad_cert_name))
