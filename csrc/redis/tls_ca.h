/*
 * Internal: the CAs a TLS client trusts when the caller named none (no BG_OPT_TLS_CA_FILE /
 * BG_OPT_TLS_CA_DIR). OpenSSL's own default (X509_get_default_cert_file: OPENSSLDIR/cert.pem) is
 * the build machine's layout baked into libcrypto; a wheel or a static program carries the
 * OpenSSL of the machine it was built on, so on a distribution that keeps its CAs elsewhere
 * (RHEL's /etc/pki, SUSE's /etc/ssl/ca-bundle.pem) that default finds nothing and every server
 * certificate is refused as "unable to get local issuer certificate". So the store is found
 * here, as Go's crypto/x509 does on Linux:
 *
 *   1. SSL_CERT_FILE and/or SSL_CERT_DIR, when either is set (not for a set-id program): those
 *      and nothing else; one that cannot be used is BG_ETLS naming the variable.
 *   2. else the first of these files that exists and loads:
 *        /etc/ssl/certs/ca-certificates.crt                  Debian, Ubuntu, Alpine, Arch, Gentoo
 *        /etc/pki/tls/certs/ca-bundle.crt                    RHEL, CentOS, Fedora, Rocky, Amazon Linux
 *        /etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem   RHEL 7 and later
 *        /etc/ssl/ca-bundle.pem                              openSUSE, SLES
 *        /etc/ssl/cert.pem                                   Alpine, macOS, the BSDs
 *      then the first directory holding hashed certificates (c_rehash names, HHHHHHHH.N), which is
 *      the only kind OpenSSL can look up: /etc/ssl/certs, /etc/pki/tls/certs;
 *      then OpenSSL's own default file and directory (right when it is the system's OpenSSL).
 *   3. none: BG_ETLS at open, the message listing every path tried and how to name one.
 */
#ifndef BG_INTERNAL_TLS_CA_H
#define BG_INTERNAL_TLS_CA_H

#include <openssl/ssl.h>

#include "common/err.h"

/* Loads the trust store described above into ctx: BG_OK, or BG_ETLS with the message. */
int bgi_tls_load_default_cas(SSL_CTX *ctx, bgi_err *err);

#endif
