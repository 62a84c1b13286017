"""A TLS-only redis-server for the tests, with a fresh set of test certificates.

The Python twin of tests/c/tls_fixture.h: ``TlsRedisServer`` makes the certificates with
``scripts/tls-certs.sh`` (see that script for every file: ca.crt, other-ca.crt, ca-dir/,
server / wrong-host / expired / client / other-client .crt + .key, mismatched.key, garbage.crt,
unreadable.crt (mode 000: root still reads it), missing.crt (never created)) into ``certs/`` of a
scratch directory, starts ``redis-server --port 0 --tls-port P`` (``$BG_REDIS_SERVER`` or the one
on PATH) on a free 127.0.0.1 port presenting the chosen certificate, and waits until a TLS PING
answers (verification off for that check, client.crt offered, so the bad certificates start too).
The server is stopped by its pid, dies with the test process (PR_SET_PDEATHSIG), and the scratch
directory is removed. Standard library only (subprocess + ssl); no bloomguard code.

    with TlsRedisServer(cert="expired", auth_clients=True) as s:
        s.url                          # rediss://127.0.0.1:PORT
        s.path("ca.crt")               # <certs>/ca.crt
        s.ping(s.context(ca="ca.crt", cert="client.crt", key="client.key"))   # "PONG" or ssl.SSLError
"""
from __future__ import annotations

import atexit
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

from server_proc import free_port, server_bin, spawn, stop_proc

ROOT = Path(__file__).resolve().parents[2]
CERTS_SCRIPT = ROOT / "scripts" / "tls-certs.sh"
CERTS = ("server", "wrong-host", "expired")


class TlsServerError(RuntimeError):
    """The certificates could not be made or the server could not be started."""


def make_certs(directory: str) -> None:
    """Runs scripts/tls-certs.sh DIR; raises TlsServerError with its output if it fails."""
    try:
        res = subprocess.run(["bash", str(CERTS_SCRIPT), directory], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise TlsServerError("bash %s %s: %s" % (CERTS_SCRIPT, directory, e)) from e
    if res.returncode != 0:
        raise TlsServerError("bash %s %s failed (status %d): %s"
                             % (CERTS_SCRIPT, directory, res.returncode, res.stdout.decode(errors="replace")))


class TlsRedisServer:
    """A TLS-only redis-server of our own on 127.0.0.1, stopped by pid.

    cert: "server" (CN=localhost, SAN localhost + 127.0.0.1), "wrong-host" (SAN other.example only)
    or "expired" (validity ended in 2020), all signed by certs/ca.crt. auth_clients: the server
    requires a client certificate signed by ca.crt (--tls-auth-clients yes).
    """

    def __init__(self, cert: Optional[str] = None, auth_clients: bool = False) -> None:
        cert = cert or "server"
        if cert not in CERTS:
            raise ValueError("cert %r is none of %s" % (cert, ", ".join(CERTS)))
        self.binary = server_bin()
        if not self.binary:
            raise TlsServerError("redis-server not found: install it (Debian: apt-get install redis-server) "
                                 "or set BG_REDIS_SERVER")
        self.cert = cert
        self.auth_clients = auth_clients
        self.host = "127.0.0.1"
        self.port = 0
        self.dir = ""
        self.certs = ""
        self.proc: Optional[subprocess.Popen] = None

    @property
    def url(self) -> str:
        return "rediss://%s:%d" % (self.host, self.port)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def path(self, name: str) -> str:
        """<certs>/<name>, e.g. path("ca.crt")."""
        return os.path.join(self.certs, name)

    def __enter__(self) -> "TlsRedisServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> "TlsRedisServer":
        """Makes the certificates and starts the server; raises TlsServerError if it cannot."""
        self.dir = tempfile.mkdtemp(prefix="bgpy-tls-")
        self.certs = os.path.join(self.dir, "certs")
        atexit.register(self.stop)
        try:
            make_certs(self.certs)
            for _attempt in range(5):  # a port taken between free_port() and bind: try another
                if self._try_start():
                    return self
            raise TlsServerError("could not start a TLS redis-server: %s" % self._log_tail())
        except BaseException:
            self.stop()
            raise

    def _try_start(self) -> bool:
        self.port = free_port()
        # absolute paths: redis-server chdirs to --dir before it loads them
        args = [self.binary, "--port", "0", "--tls-port", str(self.port), "--bind", self.host,
                "--tls-cert-file", self.path(self.cert + ".crt"),
                "--tls-key-file", self.path(self.cert + ".key"),
                "--tls-ca-cert-file", self.path("ca.crt"),
                "--tls-auth-clients", "yes" if self.auth_clients else "no",
                "--save", "", "--appendonly", "no", "--dir", self.dir, "--logfile", "redis.log",
                "--enable-debug-command", "local"]
        self.proc = spawn(args)
        # verification off for readiness only: the wrong-host and expired servers must start too
        ready = self.context(ca=None, cert="client.crt", key="client.key", verify=False)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                if self.ping(ready, timeout=1) == "PONG":
                    return True
            except (OSError, ssl.SSLError):
                time.sleep(0.01)
        self._stop_process()
        return False

    def log(self) -> str:
        """The server's log (why it refused a connection: "peer did not return a certificate" ...)."""
        with open(os.path.join(self.dir, "redis.log"), encoding="utf-8", errors="replace") as fh:
            return fh.read()

    def _log_tail(self) -> str:
        try:
            with open(os.path.join(self.dir, "redis.log"), encoding="utf-8", errors="replace") as fh:
                return " | ".join(fh.read().splitlines()[-5:])
        except OSError as e:
            return "no log (%s)" % e

    def _stop_process(self) -> None:
        proc, self.proc = self.proc, None
        stop_proc(proc, timeout=5)

    def stop(self) -> None:
        """Stops the server by its pid and removes the scratch directory. Idempotent."""
        self._stop_process()
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = ""
        atexit.unregister(self.stop)

    # ---- connecting, with the ssl module only -----------------------------------------------------

    def context(self, ca: Optional[str] = "ca.crt", cert: Optional[str] = None, key: Optional[str] = None,
                verify: bool = True, check_hostname: bool = True, ca_dir: Optional[str] = None) -> ssl.SSLContext:
        """A client context; names are files of certs/ (ca=None: no CA loaded)."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        if not verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        else:
            ctx.check_hostname = check_hostname
        if ca or ca_dir:
            ctx.load_verify_locations(cafile=self.path(ca) if ca else None,
                                      capath=self.path(ca_dir) if ca_dir else None)
        if cert:
            ctx.load_cert_chain(self.path(cert), self.path(key) if key else None)
        return ctx

    def ping(self, ctx: ssl.SSLContext, server_hostname: Optional[str] = "localhost", timeout: float = 5.0) -> str:
        """PING over TLS; returns the reply line ("PONG"). Raises ssl.SSLError (verification: its
        subclass ssl.SSLCertVerificationError, with verify_message) or OSError."""
        with socket.create_connection((self.host, self.port), timeout=timeout) as raw:
            with ctx.wrap_socket(raw, server_hostname=server_hostname) as tls:
                tls.sendall(b"PING\r\n")
                line = b""
                while not line.endswith(b"\r\n"):
                    chunk = tls.recv(256)
                    if not chunk:
                        raise ConnectionError("connection closed by the server after %r" % line)
                    line += chunk
        return line.decode(errors="replace").rstrip("\r\n").lstrip("+")
