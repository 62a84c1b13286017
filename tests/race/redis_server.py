"""A redis-server of the suite's own and a tiny RESP client to read what the workers wrote.

A trimmed copy of tests/python/redis_helpers.py (copied, not imported: the two suites run
separately): ``redis-server`` ($BG_REDIS_SERVER or the one on PATH) on a free 127.0.0.1 port,
no persistence, stopped by its pid.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import Any, List, Optional


class RespError(Exception):
    """An error reply from the server."""


class Resp:
    """One blocking RESP2 connection."""

    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.rfile = self.sock.makefile("rb")

    def close(self) -> None:
        try:
            self.rfile.close()
        finally:
            self.sock.close()

    def __enter__(self) -> "Resp":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __call__(self, *args: Any) -> Any:
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a.encode() if isinstance(a, str) else str(a).encode() if isinstance(a, int) else a
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))
        return self.read()

    def read(self) -> Any:
        line = self.rfile.readline()
        if not line.endswith(b"\r\n"):
            raise ConnectionError("connection closed by the server")
        kind, body = line[:1], line[1:-2]
        if kind == b"+":
            return body.decode()
        if kind == b"-":
            raise RespError(body.decode())
        if kind == b":":
            return int(body)
        if kind == b"$":
            n = int(body)
            return None if n < 0 else self.rfile.read(n + 2)[:-2]
        if kind == b"*":
            n = int(body)
            items: List[Any] = []
            for _ in range(max(n, 0)):
                items.append(self.read())
            return None if n < 0 else items
        raise ConnectionError("unexpected RESP type %r" % kind)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """A redis-server on 127.0.0.1 only, stopped by its pid."""

    def __init__(self) -> None:
        self.binary = os.environ.get("BG_REDIS_SERVER") or shutil.which("redis-server")
        if not self.binary:
            raise RuntimeError("redis-server not found: install it (Debian: apt-get install redis-server) "
                               "or set BG_REDIS_SERVER")
        self.dir = tempfile.mkdtemp(prefix="bgrace-redis-")
        self.port = 0
        self.proc: Optional[subprocess.Popen] = None

    @property
    def url(self) -> str:
        return "redis://127.0.0.1:%d" % self.port

    def start(self) -> "RedisServer":
        for _attempt in range(5):  # a port taken between free_port() and bind: try another
            self.port = free_port()
            args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                    "--appendonly", "no", "--dir", self.dir, "--logfile", "redis.log"]
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    with Resp(self.port, timeout=1) as r:
                        if r("PING") == "PONG":
                            return self
                except (OSError, RespError):
                    time.sleep(0.02)
            self.stop()
        raise RuntimeError("could not start redis-server (see %s/redis.log)" % self.dir)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def resp(self) -> Resp:
        return Resp(self.port)
