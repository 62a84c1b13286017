"""The Python binding over TLS against real TLS-only redis-servers (tls_helpers.TlsRedisServer):
the right CA works; the wrong CA, an expired certificate and another name raise TlsError naming
the cause; tls_verify=False gets through; a client certificate where the server wants one."""
from __future__ import annotations

import pytest

import bloomguard
from tls_helpers import TlsRedisServer

pytestmark = pytest.mark.tls

needs_tls = pytest.mark.skipif("tls" not in bloomguard.features(), reason="a build without TLS (hiredis 0.14)")


@needs_tls
def test_tls_works_and_refuses():
    with TlsRedisServer() as s:
        with bloomguard.Client(s.url, tls_ca_file=s.path("ca.crt")) as c:
            f = c.filter("py-tls")
            f.init(1000, 0.01)
            f.add("a")
            assert f.contains("a") and not f.contains("b")
        with pytest.raises(bloomguard.TlsError, match="certificate was refused"):
            bloomguard.Client(s.url.replace("rediss://", "rediss://:S3cr3t@"), tls_ca_file=s.path("other-ca.crt"),
                              connect_at_open=True)
        with bloomguard.Client(s.url, tls_ca_file=s.path("other-ca.crt")) as c:  # refused by the first call
            with pytest.raises(bloomguard.TlsError, match="certificate was refused"):
                c.ping()
        with pytest.raises(bloomguard.TlsError, match="hostname mismatch"):
            bloomguard.Client(s.url, tls_ca_file=s.path("ca.crt"), tls_server_name="db.example", connect_at_open=True)
        with pytest.raises(bloomguard.TlsError, match="cannot read the CA file"):
            bloomguard.Client(s.url, tls_ca_file=s.path("missing.crt"))
        with bloomguard.Client(s.url, tls_verify=False) as c:
            c.ping()
    with TlsRedisServer(cert="expired") as s:
        with pytest.raises(bloomguard.TlsError, match="expired"):
            bloomguard.Client(s.url, tls_ca_file=s.path("ca.crt"), connect_at_open=True)


@needs_tls
def test_client_certificate():
    with TlsRedisServer(auth_clients=True) as s:
        with pytest.raises(bloomguard.TlsError, match="client certificate"):
            bloomguard.Client(s.url, tls_ca_file=s.path("ca.crt"), connect_at_open=True)
        with bloomguard.Client(s.url, tls_ca_file=s.path("ca.crt"), tls_cert_file=s.path("client.crt"),
                               tls_key_file=s.path("client.key")) as c:
            c.ping()


@needs_tls
def test_ssl_cert_file_names_the_store_when_no_ca_is_given(monkeypatch):
    """With no tls_ca_file, SSL_CERT_FILE is the trust store (a wheel's own OpenSSL does not know
    where this system keeps its CAs; the library looks in every distribution's place, and this
    variable overrides that). The control: without it the machine's store does not hold the test
    CA, so the passes come from the variable."""
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with TlsRedisServer() as s:
        with pytest.raises(bloomguard.TlsError, match="certificate was refused|found no CA certificates"):
            bloomguard.Client(s.url, connect_at_open=True)
        monkeypatch.setenv("SSL_CERT_FILE", s.path("ca.crt"))
        with bloomguard.Client(s.url, connect_at_open=True) as c:
            c.ping()
        monkeypatch.setenv("SSL_CERT_FILE", s.path("other-ca.crt"))
        with pytest.raises(bloomguard.TlsError, match="certificate was refused"):
            bloomguard.Client(s.url, connect_at_open=True)
        with bloomguard.Client(s.url, tls_ca_file=s.path("ca.crt"), connect_at_open=True) as c:  # the option wins
            c.ping()
        monkeypatch.setenv("SSL_CERT_FILE", s.path("missing.crt"))
        with pytest.raises(bloomguard.TlsError, match="cannot use SSL_CERT_FILE .*missing.crt"):
            bloomguard.Client(s.url)
        monkeypatch.delenv("SSL_CERT_FILE")
        monkeypatch.setenv("SSL_CERT_DIR", s.path("ca-dir"))
        with bloomguard.Client(s.url, connect_at_open=True) as c:
            c.ping()


def test_a_build_without_tls_says_so():
    if "tls" in bloomguard.features():
        pytest.skip("this build has TLS")
    with pytest.raises(bloomguard.NotSupported, match="has none"):
        bloomguard.Client("rediss://127.0.0.1:1")
