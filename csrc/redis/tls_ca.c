/* The trust store of a client that named no CA (the order and why: tls_ca.h). */
#include "redis/tls.h"

#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t root_mu = PTHREAD_MUTEX_INITIALIZER;
static char fault_root[256]; /* tests only (tls.h): "" is the real root */

void bgi_tls_fault_ca_root(const char *root) {
  pthread_mutex_lock(&root_mu);
  snprintf(fault_root, sizeof fault_root, "%s", root ? root : "");
  pthread_mutex_unlock(&root_mu);
}

#ifdef BGI_HIREDIS_SSL
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "redis/tls_ca.h"

static const char *const ca_files[] = {
    "/etc/ssl/certs/ca-certificates.crt",                 /* Debian, Ubuntu, Alpine, Arch, Gentoo */
    "/etc/pki/tls/certs/ca-bundle.crt",                   /* RHEL family, Fedora, Amazon Linux */
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",  /* RHEL 7 and later (the file the one above links to) */
    "/etc/ssl/ca-bundle.pem",                             /* openSUSE, SLES */
    "/etc/ssl/cert.pem",                                  /* Alpine, macOS, the BSDs */
};
static const char *const ca_dirs[] = {"/etc/ssl/certs", "/etc/pki/tls/certs"};

/* An environment variable that may pick the CAs trusted: not in a set-id program, whose caller's
 * environment must not choose whom it trusts (OpenSSL's own rule for these two), and not empty. */
static const char *env_path(const char *name) {
  if (getuid() != geteuid() || getgid() != getegid()) return NULL;
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

static int is_file(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int is_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* A directory OpenSSL can look CAs up in: one entry at least named by a subject hash
 * (HHHHHHHH.N, as c_rehash / openssl rehash make them); OpenSSL finds nothing by any other name. */
static int has_hashed_certs(const char *p) {
  DIR *d = opendir(p);
  int found = 0;
  if (!d) return 0;
  for (struct dirent *e; !found && (e = readdir(d)) != NULL;) {
    const char *n = e->d_name;
    int i = 0;
    while (i < 8 && isxdigit((unsigned char)n[i])) i++;
    found = i == 8 && n[8] == '.' && isdigit((unsigned char)n[9]);
  }
  closedir(d);
  return found;
}

/* OpenSSL's reason for the last failure, or the system's for a file that cannot be read. */
static const char *why_unusable(const char *path) {
  if (access(path, R_OK) != 0) return strerror(errno);
  unsigned long e = ERR_peek_last_error();
  const char *r = e ? ERR_reason_error_string(e) : NULL;
  return r ? r : "no certificate in it";
}

/* SSL_CERT_FILE and SSL_CERT_DIR (a ':'-separated list of directories, as OpenSSL reads it). */
static int load_from_env(SSL_CTX *ctx, const char *file, const char *dirs, bgi_err *err) {
  int st = BG_OK;
  if (file && SSL_CTX_load_verify_locations(ctx, file, NULL) != 1) {
    st = bgi_err_set(err, BG_ETLS, "TLS: cannot use SSL_CERT_FILE \"%.200s\" as the CAs to trust: %s (unset it to "
                     "use the system's, or name a PEM file)", file, why_unusable(file));
    goto done;
  }
  if (dirs) {
    /* OpenSSL takes any directory name without a look: one that is not there would trust nothing */
    for (const char *p = dirs; *p;) {
      size_t n = strcspn(p, ":");
      char one[PATH_MAX];
      if (n > 0 && n < sizeof one) {
        memcpy(one, p, n);
        one[n] = 0;
        if (!is_dir(one)) {
          st = bgi_err_set(err, BG_ETLS, "TLS: SSL_CERT_DIR names \"%.200s\", which is not a directory (unset it "
                           "to use the system's CAs)", one);
          goto done;
        }
      }
      p += n + (p[n] == ':');
    }
    if (SSL_CTX_load_verify_locations(ctx, NULL, dirs) != 1) {
      st = bgi_err_set(err, BG_ETLS, "TLS: cannot use SSL_CERT_DIR \"%.200s\"", dirs);
      goto done;
    }
  }
done:
  ERR_clear_error();
  return st;
}

/* Appends ", path" (or the first path) to the list of paths tried, as far as it fits. */
static void note_tried(char *list, size_t cap, const char *path, const char *mark) {
  size_t n = strlen(list);
  if (n + 1 < cap) snprintf(list + n, cap - n, "%s%s%s", n ? ", " : "", path, mark);
}

int bgi_tls_load_default_cas(SSL_CTX *ctx, bgi_err *err) {
  const char *env_file = env_path("SSL_CERT_FILE"), *env_dir = env_path("SSL_CERT_DIR");
  if (env_file || env_dir) return load_from_env(ctx, env_file, env_dir, err);

  char root[sizeof fault_root];
  pthread_mutex_lock(&root_mu);
  memcpy(root, fault_root, sizeof root);
  pthread_mutex_unlock(&root_mu);

  char path[PATH_MAX], tried[360] = "";
  /* OpenSSL's default last: where the OpenSSL this was built with keeps its CAs, right for the
   * system's own OpenSSL, and a build machine's guess for a copy linked in statically */
  const char *ossl_file = X509_get_default_cert_file(), *ossl_dir = X509_get_default_cert_dir();
  size_t nfiles = sizeof ca_files / sizeof ca_files[0], ndirs = sizeof ca_dirs / sizeof ca_dirs[0];
  for (size_t i = 0; i <= nfiles; i++) {
    const char *f = i < nfiles ? ca_files[i] : ossl_file;
    if (i == nfiles) /* skip it when it is one of the list's */
      for (size_t j = 0; f && j < nfiles; j++)
        if (strcmp(f, ca_files[j]) == 0) f = NULL;
    if (!f) continue;
    snprintf(path, sizeof path, "%s%s", root, f);
    if (!is_file(path)) {
      note_tried(tried, sizeof tried, f, "");
      continue;
    }
    ERR_clear_error();
    if (SSL_CTX_load_verify_locations(ctx, path, NULL) == 1) {
      ERR_clear_error();
      return BG_OK;
    }
    /* a file that is there but unusable (empty, not PEM, unreadable): the next may serve */
    note_tried(tried, sizeof tried, f, " (unusable)");
  }
  for (size_t i = 0; i <= ndirs; i++) {
    const char *d = i < ndirs ? ca_dirs[i] : ossl_dir;
    if (i == ndirs)
      for (size_t j = 0; d && j < ndirs; j++)
        if (strcmp(d, ca_dirs[j]) == 0) d = NULL;
    if (!d) continue;
    snprintf(path, sizeof path, "%s%s", root, d);
    if (has_hashed_certs(path) && SSL_CTX_load_verify_locations(ctx, NULL, path) == 1) {
      ERR_clear_error();
      return BG_OK;
    }
    note_tried(tried, sizeof tried, d, "/");
  }
  ERR_clear_error();
  /* the way out first: a long list may be cut at the message's end */
  return bgi_err_set(err, BG_ETLS, "TLS: found no CA certificates to trust: set SSL_CERT_FILE to a PEM file of them, "
                     "or give BG_OPT_TLS_CA_FILE (SSL_CERT_FILE and SSL_CERT_DIR are unset; looked in %s%s%s)", tried,
                     root[0] ? " under the test root " : "", root);
}

#endif
