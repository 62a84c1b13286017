# TLS test infrastructure: a TLS-only redis-server (--port 0 --tls-port P) with the certificates of
# scripts/tls-certs.sh (tls_fixture.c), checked with `openssl s_client` only: right CA, other CA,
# expired, hostname mismatch, client certificates required. `ctest -L tls` runs every TLS test.
bg_add_test(test_tls_fixture SOURCES test_tls_fixture.c LABELS "redis;tls;fixture")
# The library over TLS: every connection kind, each refusal with its cause, client certificates, bad files.
bg_add_test(test_tls SOURCES test_tls.c LABELS "redis;tls")
