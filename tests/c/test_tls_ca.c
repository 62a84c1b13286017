/*
 * The trust store of a client that names no CA (csrc/redis/tls_ca.h), against a real TLS-only
 * redis-server (tests/c/tls_fixture.h). Each distribution's layout is laid out in a scratch root
 * (bgi_tls_fault_ca_root) with the test CA in that one place only, and a rediss:// client with no
 * CA option verifies the server: Debian/Ubuntu, RHEL (both files), SUSE, Alpine, a hashed
 * directory. SSL_CERT_FILE / SSL_CERT_DIR are honoured and replace the probe. Nothing found: BG_ETLS
 * at open, the message listing the paths tried and how to name one.
 * Negative controls: the CA in a path nobody probes (and in a directory without hashed names) is
 * not found; the first file found wins (another CA there is refused, even if a later one holds the
 * right CA); the real root's store does not hold the test CA (so every pass above came from the
 * layout); SSL_CERT_FILE naming another CA is refused.
 */
#include <bloomguard.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "redis/tls.h"
#include "tls_fixture.h"

static bgt_tls_redis good;
static char scratch[64];   /* every case's root is a directory inside it */

/* A fresh root for one case: <scratch>/<name>, the probe looking there. */
static const char *new_root(const char *name, char *buf, size_t cap) {
  snprintf(buf, cap, "%s/%s", scratch, name);
  CHECK_MSG(mkdir(buf, 0755) == 0, "mkdir %s", buf);
  bgi_tls_fault_ca_root(buf);
  return buf;
}

/* mkdir -p of path's parent directories. */
static void make_parents(const char *path) {
  char p[512];
  snprintf(p, sizeof p, "%s", path);
  for (char *s = p + 1; (s = strchr(s, '/')) != NULL; s++) {
    *s = 0;
    mkdir(p, 0755);   /* EEXIST is fine; a real failure shows when the copy fails */
    *s = '/';
  }
}

static void copy_file(const char *from, const char *to) {
  FILE *in = fopen(from, "rb");
  CHECK_MSG(in != NULL, "open %s", from);
  make_parents(to);
  FILE *out = fopen(to, "wb");
  CHECK_MSG(out != NULL, "create %s", to);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0) CHECK(fwrite(buf, 1, n, out) == n);
  fclose(in);
  CHECK(fclose(out) == 0);
}

/* The fixture's certificate `cert` (e.g. "ca.crt") placed at root + rel. */
static void place(const char *root, const char *cert, const char *rel) {
  char from[400], to[512];
  snprintf(to, sizeof to, "%s%s", root, rel);
  copy_file(bgt_tls_path(&good, cert, from, sizeof from), to);
}

/* Every hashed file of the fixture's ca-dir/ (HHHHHHHH.0 for ca.crt) copied into root + rel. */
static void place_hashed_dir(const char *root, const char *rel) {
  char dir[400], to[700], from[700];
  bgt_tls_path(&good, "ca-dir", dir, sizeof dir);
  DIR *d = opendir(dir);
  CHECK_MSG(d != NULL, "open %s", dir);
  int copied = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    snprintf(from, sizeof from, "%s/%s", dir, e->d_name);
    snprintf(to, sizeof to, "%s%s/%s", root, rel, e->d_name);
    copy_file(from, to);
    copied++;
  }
  closedir(d);
  CHECK_MSG(copied > 0, "%s is empty", dir);
}

/* Opens a rediss:// client with no CA option (BG_OPT_CONNECT_AT_OPEN: the handshake happens here)
 * and pings; the status, msg the message. */
static int connect_no_ca(char *msg, size_t cap) {
  bg_options *o = NULL;
  bg_client *c = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_CONNECT_TIMEOUT_MS, 2000));
  CHECK_OK(bg_options_set_int(o, BG_OPT_CONNECT_AT_OPEN, 1));
  msg[0] = 0;
  int st = bgt_client_open(&c, good.url, o, msg, cap);
  bg_options_free(o);
  if (st == BG_OK) {
    st = bg_client_ping(c);
    if (st != BG_OK) snprintf(msg, cap, "%s", bg_client_errmsg(c));
    bg_client_close(c);
  } else {
    CHECK(c == NULL);
  }
  return st;
}

static void verifies(const char *what) {
  char msg[600];
  int st = connect_no_ca(msg, sizeof msg);
  CHECK_MSG(st == BG_OK, "%s: %s: %s", what, bg_strerror(st), msg);
  printf("    %s: verified\n", what);
}

/* Refused at the handshake: a store was found, and it does not hold the server's CA. */
static void refused(const char *what) {
  char msg[600];
  int st = connect_no_ca(msg, sizeof msg);
  printf("    %s: %s\n", what, msg);
  CHECK_STATUS(st, BG_ETLS);
  CHECK_CONTAINS(msg, "certificate was refused");
}

/* No store at all: BG_ETLS at open, every path tried named, and how to name one. */
static void none_found(const char *what, const char *root) {
  char msg[600];
  int st = connect_no_ca(msg, sizeof msg);
  printf("    %s: %s\n", what, msg);
  CHECK_STATUS(st, BG_ETLS);
  CHECK_CONTAINS(msg, "found no CA certificates to trust");
  static const char *const paths[] = {"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt",
                                      "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", "/etc/ssl/ca-bundle.pem",
                                      "/etc/ssl/cert.pem", "/etc/ssl/certs/", "/etc/pki/tls/certs/"};
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) CHECK_CONTAINS(msg, paths[i]);
  CHECK_CONTAINS(msg, "set SSL_CERT_FILE");
  CHECK_CONTAINS(msg, "BG_OPT_TLS_CA_FILE");
  CHECK_CONTAINS(msg, root);
}

static void test_each_distributions_layout_verifies(void) {
  static const struct { const char *name, *path; } layouts[] = {
      {"debian", "/etc/ssl/certs/ca-certificates.crt"},
      {"rhel", "/etc/pki/tls/certs/ca-bundle.crt"},
      {"rhel-extracted", "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem"},
      {"suse", "/etc/ssl/ca-bundle.pem"},
      {"alpine", "/etc/ssl/cert.pem"},
  };
  char root[200];
  for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
    new_root(layouts[i].name, root, sizeof root);
    place(root, "ca.crt", layouts[i].path);
    verifies(layouts[i].path);
  }
  /* SLES 10/11: only a hashed directory */
  new_root("hashed-dir", root, sizeof root);
  place_hashed_dir(root, "/etc/ssl/certs");
  verifies("/etc/ssl/certs/<hash>.0");
  new_root("hashed-dir-rhel", root, sizeof root);
  place_hashed_dir(root, "/etc/pki/tls/certs");
  verifies("/etc/pki/tls/certs/<hash>.0");
  /* a file that is there but holds no certificate is passed over */
  new_root("garbage-first", root, sizeof root);
  place(root, "garbage.crt", "/etc/ssl/certs/ca-certificates.crt");
  place(root, "ca.crt", "/etc/ssl/ca-bundle.pem");
  verifies("an unusable Debian bundle, then SUSE's");
}

static void test_the_first_file_found_wins(void) {
  char root[200];
  new_root("first-wins", root, sizeof root);
  place(root, "other-ca.crt", "/etc/ssl/certs/ca-certificates.crt");
  place(root, "ca.crt", "/etc/ssl/ca-bundle.pem");
  refused("another CA in Debian's file, the right one in SUSE's");
  /* the harness can fail the layouts: the same file with the right CA passes */
  place(root, "ca.crt", "/etc/ssl/certs/ca-certificates.crt");
  verifies("then the right CA in Debian's file");
}

static void test_nothing_found_says_where_it_looked(void) {
  char root[200];
  none_found("an empty root", new_root("empty", root, sizeof root));
  /* negative controls: the CA where no distribution keeps its bundle */
  new_root("unprobed", root, sizeof root);
  place(root, "ca.crt", "/usr/local/share/ca-certificates/test-ca.crt");
  place(root, "ca.crt", "/etc/ca-certificates.crt");
  place(root, "ca.crt", "/etc/pki/tls/cert.pem");
  none_found("the CA only in unprobed paths", root);
  /* a directory of certificates not named by their hash (OpenSSL could not look them up) */
  new_root("unhashed-dir", root, sizeof root);
  place(root, "ca.crt", "/etc/ssl/certs/test-ca.pem");
  none_found("the CA in /etc/ssl/certs without a hashed name", root);
  /* verification off needs no store */
  new_root("no-verify", root, sizeof root);
  bg_options *o = NULL;
  bg_client *c = NULL;
  char msg[600];
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_TLS_VERIFY, 0));
  CHECK_OK(bg_options_set_int(o, BG_OPT_CONNECT_AT_OPEN, 1));
  CHECK_MSG(bgt_client_open(&c, good.url, o, msg, sizeof msg) == BG_OK, "%s", msg);
  bg_client_close(c);
  bg_options_free(o);
}

static void test_ssl_cert_file_and_dir_are_honoured(void) {
  char root[200], path[400], msg[600];
  new_root("env", root, sizeof root);   /* empty: only the variables can find the CA */
  setenv("SSL_CERT_FILE", bgt_tls_path(&good, "ca.crt", path, sizeof path), 1);
  verifies("SSL_CERT_FILE=ca.crt");
  setenv("SSL_CERT_FILE", bgt_tls_path(&good, "other-ca.crt", path, sizeof path), 1);
  refused("SSL_CERT_FILE=other-ca.crt");
  /* it replaces the probe: the right CA in Debian's file is not read */
  place(root, "ca.crt", "/etc/ssl/certs/ca-certificates.crt");
  refused("SSL_CERT_FILE=other-ca.crt, the right CA in Debian's file");
  /* BG_OPT_TLS_CA_FILE beats the variable */
  bg_options *o = NULL;
  bg_client *c = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_str(o, BG_OPT_TLS_CA_FILE, bgt_tls_path(&good, "ca.crt", path, sizeof path)));
  CHECK_OK(bg_options_set_int(o, BG_OPT_CONNECT_AT_OPEN, 1));
  CHECK_MSG(bgt_client_open(&c, good.url, o, msg, sizeof msg) == BG_OK, "%s", msg);
  bg_client_close(c);
  bg_options_free(o);
  setenv("SSL_CERT_FILE", bgt_tls_path(&good, "missing.crt", path, sizeof path), 1);
  CHECK_STATUS(connect_no_ca(msg, sizeof msg), BG_ETLS);
  printf("    SSL_CERT_FILE=missing.crt: %s\n", msg);
  CHECK_CONTAINS(msg, "cannot use SSL_CERT_FILE");
  CHECK_CONTAINS(msg, "missing.crt");
  setenv("SSL_CERT_FILE", bgt_tls_path(&good, "garbage.crt", path, sizeof path), 1);
  CHECK_STATUS(connect_no_ca(msg, sizeof msg), BG_ETLS);
  CHECK_CONTAINS(msg, "cannot use SSL_CERT_FILE");
  unsetenv("SSL_CERT_FILE");
  verifies("SSL_CERT_FILE unset again: Debian's file");

  new_root("env-dir", root, sizeof root);
  setenv("SSL_CERT_DIR", bgt_tls_path(&good, "ca-dir", path, sizeof path), 1);
  verifies("SSL_CERT_DIR=ca-dir");
  setenv("SSL_CERT_DIR", bgt_tls_path(&good, "other-ca-dir", path, sizeof path), 1);
  refused("SSL_CERT_DIR=other-ca-dir");
  char list[900], one[400];
  snprintf(list, sizeof list, "%s:%s", bgt_tls_path(&good, "other-ca-dir", one, sizeof one),
           bgt_tls_path(&good, "ca-dir", path, sizeof path));
  setenv("SSL_CERT_DIR", list, 1);
  verifies("SSL_CERT_DIR=other-ca-dir:ca-dir");
  setenv("SSL_CERT_DIR", bgt_tls_path(&good, "missing.crt", path, sizeof path), 1);
  CHECK_STATUS(connect_no_ca(msg, sizeof msg), BG_ETLS);
  printf("    SSL_CERT_DIR=missing.crt: %s\n", msg);
  CHECK_CONTAINS(msg, "SSL_CERT_DIR names");
  unsetenv("SSL_CERT_DIR");
  none_found("SSL_CERT_DIR unset again", root);
}

/* The control of every pass above: the machine's own store (the real root) does not hold the test
 * CA, so a layout's pass came from the file the case placed. */
static void test_the_real_store_does_not_hold_the_test_ca(void) {
  bgi_tls_fault_ca_root(NULL);
  char msg[600];
  int st = connect_no_ca(msg, sizeof msg);
  printf("    the machine's store: %s\n", st == BG_OK ? "verified (!)" : msg);
  CHECK_STATUS(st, BG_ETLS);
}

int main(int argc, char **argv) {
  /* the variables of whoever runs the test would replace the probe */
  unsetenv("SSL_CERT_FILE");
  unsetenv("SSL_CERT_DIR");
  if (!(bg_features() & BG_FEATURE_TLS)) {
    printf("SKIP: this build has no TLS\n");
    return BGT_SKIP;
  }
  bgt_tls_redis_start(&good, "server", 0);
  snprintf(scratch, sizeof scratch, "/tmp/bgt-ca-XXXXXX");
  if (!mkdtemp(scratch)) {
    perror("mkdtemp");
    return 2;
  }
  static const bgt_case cases[] = {
      BGT_CASE(test_each_distributions_layout_verifies),
      BGT_CASE(test_the_first_file_found_wins),
      BGT_CASE(test_nothing_found_says_where_it_looked),
      BGT_CASE(test_ssl_cert_file_and_dir_are_honoured),
      BGT_CASE(test_the_real_store_does_not_hold_the_test_ca),
  };
  int rc = bgt_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
  bgi_tls_fault_ca_root(NULL);
  bgt_tls_redis_stop(&good);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", scratch);
  return rc;
}
