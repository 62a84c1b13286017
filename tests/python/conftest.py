"""Fixtures: one real redis-server per session (free 127.0.0.1 port, stopped by pid), a RESP
connection to inspect it, a client and a unique filter name per test.

The tests import the *installed* bloomguard package (pip install . or pip install -e .).
"""
from __future__ import annotations

import itertools
import json
import os
import signal
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
VECTORS = ROOT / "tests" / "vectors"
sys.path.insert(0, str(HERE))

from redis_helpers import RedisServer  # noqa: E402

import bloomguard  # noqa: E402


def load_vectors(name: str) -> dict:
    with open(VECTORS / name, encoding="utf-8") as fh:
        return json.load(fh)


@pytest.fixture(scope="session")
def redis_server():
    server = RedisServer().start()
    try:
        yield server
    finally:
        server.cleanup()


@pytest.fixture
def raw(redis_server):
    """A RESP connection to the test server (GET, HGETALL, CLIENT PAUSE ...)."""
    conn = redis_server.resp()
    try:
        yield conn
    finally:
        try:
            conn("CLIENT", "UNPAUSE")
        except Exception:
            pass
        conn.close()


@pytest.fixture
def url(redis_server) -> str:
    return redis_server.url


@pytest.fixture
def client(redis_server):
    with bloomguard.Client(redis_server.url, command_timeout=5, connect_timeout=5) as c:
        yield c


_names = itertools.count()


@pytest.fixture
def fname(request) -> str:
    """A filter name no other test uses."""
    base = "".join(ch if ch.isalnum() else "_" for ch in request.node.name)[:60]
    return "pytest:%s:%d:%d" % (base, os.getpid(), next(_names))


@pytest.fixture
def sigint_raises():
    """SIGINT raises KeyboardInterrupt during the test, whatever disposition the suite inherited.

    Started in the background (``cmd &`` from a non-interactive shell, nohup, many CI runners) the
    interpreter inherits SIGINT as ignored and installs no handler; ``_thread.interrupt_main()``
    then does nothing and a test waiting for its KeyboardInterrupt would wait out its whole wait.
    The previous handler (or SIG_IGN) is put back afterwards."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


# skips are skips: in CI only the documented reasons may skip (skip_policy.py)
from skip_policy import pytest_make_collect_report, pytest_runtest_makereport  # noqa: E402,F401
