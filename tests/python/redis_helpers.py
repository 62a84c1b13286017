"""A real redis-server for the tests, and a tiny RESP client to look at what the binding wrote.

RedisServer starts ``redis-server`` (``$BG_REDIS_SERVER`` or the one on PATH) on a free
127.0.0.1 port with a unix socket, no persistence and DEBUG allowed from local connections, and
stops it by its pid. Resp speaks just enough RESP2 for GET / HGETALL / PTTL / CLIENT PAUSE.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from typing import Any, List, Optional, Sequence

from server_proc import free_port, kill_proc, server_bin, spawn, stop_proc, wait_ping  # noqa: F401 (free_port: re-exported)


class RespError(Exception):
    """An error reply from the server."""


class Resp:
    """One blocking RESP2 connection."""

    def __init__(self, host: str = "127.0.0.1", port: int = 6379, timeout: float = 10.0,
                 unix: Optional[str] = None) -> None:
        if unix:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(timeout)
            self.sock.connect(unix)
        else:
            self.sock = socket.create_connection((host, port), timeout=timeout)
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

    @staticmethod
    def encode(args: tuple) -> bytes:
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            if isinstance(a, str):
                a = a.encode("utf-8")
            elif isinstance(a, int):
                a = str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    def send(self, *args: Any) -> None:
        self.sock.sendall(self.encode(args))

    def __call__(self, *args: Any) -> Any:
        self.send(*args)
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
            if n < 0:
                return None
            data = self.rfile.read(n + 2)
            return data[:-2]
        if kind == b"*":
            n = int(body)
            if n < 0:
                return None
            items: List[Any] = []
            for _ in range(n):
                try:
                    items.append(self.read())
                except RespError as e:  # an error inside an array (EXEC): keep it as a value
                    items.append(e)
            return items
        raise ConnectionError("unexpected RESP type %r" % kind)

    def hgetall(self, key: str) -> dict:
        flat = self("HGETALL", key)
        return {flat[i].decode(): flat[i + 1].decode() for i in range(0, len(flat), 2)}


class RedisServer:
    """A redis-server of our own, on 127.0.0.1 only, stopped by pid."""

    def __init__(self, extra_args: Sequence[str] = ()) -> None:
        """``extra_args``: more ``--option value`` strings, given at every start (e.g. AOF with
        fsync always, so that a restart after :meth:`kill` has every acknowledged write)."""
        self.extra_args = list(extra_args)
        self.binary = server_bin()
        if not self.binary:
            raise RuntimeError("redis-server not found: install it (Debian: apt-get install redis-server) "
                               "or set BG_REDIS_SERVER")
        self.dir = tempfile.mkdtemp(prefix="bgpy-redis-")
        self.host = "127.0.0.1"
        self.port = 0
        self.unix = os.path.join(self.dir, "redis.sock")
        self.proc: Optional[subprocess.Popen] = None

    @property
    def url(self) -> str:
        return "redis://%s:%d" % (self.host, self.port)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, same_port: bool = False) -> "RedisServer":
        """Starts the server (again: on the same port and directory with ``same_port``)."""
        for _attempt in range(5):  # a port taken between free_port() and bind: try another
            if not same_port or not self.port:
                self.port = free_port()
            args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
                    "--unixsocket", self.unix, "--unixsocketperm", "700",
                    "--save", "", "--appendonly", "no", "--dir", self.dir,
                    "--logfile", "redis.log", "--enable-debug-command", "local"] + self.extra_args
            # no PR_SET_PDEATHSIG: a test may start a server from a thread that ends before it does
            self.proc = spawn(args, pdeathsig=False)
            if wait_ping(self.proc, self.port, 10):
                return self
            self.stop()
            if same_port:
                time.sleep(0.2)  # the port may still be held for a moment
        raise RuntimeError("could not start redis-server (see %s/redis.log)" % self.dir)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        stop_proc(proc, timeout=10)

    def kill(self) -> None:
        """kill -9 (a crash) and reap; port and directory stay for ``start(same_port=True)``."""
        proc, self.proc = self.proc, None
        kill_proc(proc)

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def resp(self, timeout: float = 10.0) -> Resp:
        return Resp(self.host, self.port, timeout=timeout)


def redisbloom_path() -> str:
    """The path of redisbloom.so for the native-filter tests: $BG_REDISBLOOM, else what
    scripts/redisbloom.sh prints (it installs the pinned wheel once). A module that cannot be had
    raises: those tests fail, never skip, without it."""
    path = os.environ.get("BG_REDISBLOOM", "")
    if not path:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        out = subprocess.run(["bash", os.path.join(root, "scripts", "redisbloom.sh")], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        if out.returncode != 0 or not out.stdout.strip():
            raise RuntimeError("scripts/redisbloom.sh gave no redisbloom.so (exit %d): %s" % (
                out.returncode, out.stderr.strip()[-500:]))
        path = out.stdout.strip()
        os.environ["BG_REDISBLOOM"] = path
    return path


class BloomServer(RedisServer):
    """A redis-server with RedisBloom loaded (--loadmodule redisbloom_path())."""

    def __init__(self, extra_args: Sequence[str] = ()) -> None:
        super().__init__(["--loadmodule", redisbloom_path()] + list(extra_args))
