#!/usr/bin/env bash
# Generates the TLS tests' certificates in DIR (created if missing; files there are overwritten):
#   bash scripts/tls-certs.sh DIR
# All keys are EC P-256 (fast to make: the whole set takes a fraction of a second). Validity 10 years
# unless said otherwise. Nothing here is secret: a fresh set is made per test run.
#
#   ca.crt / ca.key                 the test CA (CN=bloomguard-test-ca): what the tests trust
#   other-ca.crt / other-ca.key     a second, unrelated CA: "the wrong CA"
#   ca-dir/, other-ca-dir/          each CA alone in a hashed directory (openssl rehash), for CA_DIR options
#   server.crt / server.key         signed by ca; CN=localhost, SAN DNS:localhost, IP:127.0.0.1
#                                   (EKU serverAuth + clientAuth, so Redis can also present it as a client)
#   wrong-host.crt / .key           signed by ca; CN and SAN DNS:other.example only: a hostname mismatch
#                                   for 127.0.0.1 and localhost
#   expired.crt / expired.key       signed by ca for localhost + 127.0.0.1, valid 2020-01-01..2020-01-02 only
#   client.crt / client.key         signed by ca; CN=bloomguard-test-client (EKU clientAuth)
#   other-client.crt / .key         a client certificate signed by other-ca (a server trusting ca refuses it)
#   mismatched.key                  a valid key that does NOT belong to client.crt
#   garbage.crt, garbage.key        files that exist but hold no PEM at all
#   unreadable.crt                  a copy of client.crt with mode 000 (root can still read it: tests
#                                   running as root should use missing.crt for "cannot be read")
#   missing.crt                     never created: a path that does not exist
# Needs the openssl CLI (Debian: apt-get install openssl; scripts/deps.sh installs it).
set -euo pipefail

if [ $# -ne 1 ] || [ -z "$1" ]; then
  echo "usage: $0 DIR" >&2
  exit 2
fi
command -v openssl >/dev/null 2>&1 || { echo "$0: the openssl CLI is missing (Debian: apt-get install openssl)" >&2; exit 1; }
dir=$1
mkdir -p "$dir"
cd "$dir"
umask 077  # keys readable by their owner only; certificates are chmod'ed 644 below

# openssl's own config (OPENSSL_CONF) would add its default extensions; this one is all there is.
# `openssl ca` is used for every leaf because it can back-date (-startdate/-enddate): OpenSSL 3.0's
# x509/req have no -not_before/-not_after (those came in 3.4).
db=.ca-db
rm -rf "$db" missing.crt
mkdir "$db"
: > "$db/index.txt"
echo 1000 > "$db/serial"
cat > "$db/openssl.cnf" <<EOF
[ req ]
distinguished_name = req_dn
prompt = no
[ req_dn ]
CN = unused
[ ca ]
default_ca = test_ca
[ test_ca ]
database = $db/index.txt
serial = $db/serial
new_certs_dir = $db
certificate = ca.crt
private_key = ca.key
default_md = sha256
default_days = 3650
policy = policy_any
unique_subject = no
email_in_dn = no
copy_extensions = none
[ other_ca ]
database = $db/index.txt
serial = $db/serial
new_certs_dir = $db
certificate = other-ca.crt
private_key = other-ca.key
default_md = sha256
default_days = 3650
policy = policy_any
unique_subject = no
email_in_dn = no
copy_extensions = none
[ policy_any ]
commonName = supplied
[ ca_ext ]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[ server_ext ]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth, clientAuth
subjectAltName = DNS:localhost, IP:127.0.0.1
authorityKeyIdentifier = keyid
[ wrong_host_ext ]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth, clientAuth
subjectAltName = DNS:other.example
authorityKeyIdentifier = keyid
[ client_ext ]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
authorityKeyIdentifier = keyid
EOF
export OPENSSL_CONF=$db/openssl.cnf
newkey=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)

make_ca() {  # name CN
  openssl req -x509 "${newkey[@]}" -keyout "$1.key" -out "$1.crt" -days 3650 -sha256 \
    -subj "/CN=$2" -extensions ca_ext -config "$OPENSSL_CONF" 2>/dev/null
}

# leaf NAME CN EXT_SECTION CA_SECTION [extra openssl ca args...]
leaf() {
  local name=$1 cn=$2 ext=$3 ca=$4
  shift 4
  openssl req -new "${newkey[@]}" -keyout "$name.key" -out "$db/$name.csr" -subj "/CN=$cn" \
    -config "$OPENSSL_CONF" 2>/dev/null
  openssl ca -batch -notext -config "$OPENSSL_CONF" -name "$ca" -extensions "$ext" \
    -in "$db/$name.csr" -out "$name.crt" "$@" 2>"$db/$name.err" \
    || { cat "$db/$name.err" >&2; echo "$0: signing $name.crt failed" >&2; exit 1; }
}

make_ca ca bloomguard-test-ca
make_ca other-ca bloomguard-other-ca
leaf server localhost server_ext test_ca
leaf wrong-host other.example wrong_host_ext test_ca
leaf expired localhost server_ext test_ca -startdate 20200101000000Z -enddate 20200102000000Z
leaf client bloomguard-test-client client_ext test_ca
leaf other-client bloomguard-other-client client_ext other_ca
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out mismatched.key 2>/dev/null

echo "this is not a PEM certificate" > garbage.crt
echo "this is not a PEM key" > garbage.key
rm -f unreadable.crt
cp client.crt unreadable.crt

for c in ca other-ca; do
  rm -rf "$c-dir"
  mkdir "$c-dir"
  cp "$c.crt" "$c-dir/"
  openssl rehash "$c-dir" 2>/dev/null \
    || ln -s "$c.crt" "$c-dir/$(openssl x509 -noout -subject_hash -in "$c.crt").0"
done

chmod 644 ./*.crt garbage.key ca-dir/*.crt other-ca-dir/*.crt
chmod 755 ca-dir other-ca-dir
chmod 000 unreadable.crt
rm -rf "$db"
