"""The TLS fixture's own tests (tls_helpers.TlsRedisServer), with the ssl module only: the right CA
verifies (file and hashed directory, localhost and 127.0.0.1), the other CA fails, the expired
certificate fails with "certificate has expired", wrong-host fails the hostname check, and with
auth_clients a connection without a client certificate is refused while client.crt works; the
bad-input files are what they claim; stop leaves nothing. Each failure has its control (the same
server answering once the one broken thing is put right). Select with ``-m tls`` or this file's name."""
from __future__ import annotations

import os
import ssl
import stat

import pytest

from tls_helpers import TlsRedisServer

pytestmark = pytest.mark.tls


@pytest.fixture(scope="module")
def plain():
    with TlsRedisServer() as s:
        yield s


def test_right_ca(plain):
    assert plain.url == "rediss://127.0.0.1:%d" % plain.port
    assert plain.ping(plain.context()) == "PONG"
    assert plain.ping(plain.context(), server_hostname="127.0.0.1") == "PONG"  # the IP SAN
    assert plain.ping(plain.context(ca=None, ca_dir="ca-dir")) == "PONG"


def test_other_ca(plain):
    with pytest.raises(ssl.SSLCertVerificationError) as e:
        plain.ping(plain.context(ca="other-ca.crt"))
    print(e.value.verify_message)
    with pytest.raises(ssl.SSLCertVerificationError):
        plain.ping(plain.context(ca=None, ca_dir="other-ca-dir"))
    assert plain.ping(plain.context(ca="ca.crt")) == "PONG"  # control


def test_expired():
    with TlsRedisServer(cert="expired") as s:
        with pytest.raises(ssl.SSLCertVerificationError) as e:
            s.ping(s.context())
        assert e.value.verify_message == "certificate has expired"
        assert s.ping(s.context(verify=False)) == "PONG"  # control: only the date is wrong


def test_wrong_host():
    with TlsRedisServer(cert="wrong-host") as s:
        for name in ("localhost", "127.0.0.1"):
            with pytest.raises(ssl.SSLCertVerificationError) as e:
                s.ping(s.context(), server_hostname=name)
            assert "mismatch" in e.value.verify_message, e.value.verify_message
            print(name, e.value.verify_message)
        # controls: the chain is good, and the name in the certificate passes
        assert s.ping(s.context(check_hostname=False)) == "PONG"
        assert s.ping(s.context(), server_hostname="other.example") == "PONG"


def test_auth_clients(plain):
    with TlsRedisServer(auth_clients=True) as s:
        with pytest.raises((ssl.SSLError, ConnectionError)) as e:
            s.ping(s.context())
        # TLS 1.3: the handshake completes before the server checks; what the client then reads is
        # the "certificate required" alert or, if the close wins the race, an EOF or a reset
        print("no client certificate:", e.value)
        assert "peer did not return a certificate" in s.log()
        assert s.ping(s.context(cert="client.crt", key="client.key")) == "PONG"
        with pytest.raises((ssl.SSLError, ConnectionError)):
            s.ping(s.context(cert="other-client.crt", key="other-client.key"))
        assert "certificate verify failed" in s.log()
    assert plain.ping(plain.context()) == "PONG"  # control: auth_clients off needs none


def test_bad_files(plain):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    with pytest.raises(ssl.SSLError):
        ctx.load_verify_locations(cafile=plain.path("garbage.crt"))
    with pytest.raises(ssl.SSLError):
        ctx.load_cert_chain(plain.path("client.crt"), plain.path("mismatched.key"))
    ctx.load_cert_chain(plain.path("client.crt"), plain.path("client.key"))  # control
    with pytest.raises(FileNotFoundError):
        ctx.load_verify_locations(cafile=plain.path("missing.crt"))
    assert stat.S_IMODE(os.stat(plain.path("unreadable.crt")).st_mode) == 0


def test_stop_leaves_nothing():
    s = TlsRedisServer().start()
    pid, d = s.pid, s.dir
    s.stop()
    assert not os.path.exists(d)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    s.stop()  # idempotent


def test_bad_cert_name():
    with pytest.raises(ValueError):
        TlsRedisServer(cert="nope")
