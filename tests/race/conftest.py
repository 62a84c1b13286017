"""Fixtures of the race suite: one redis-server for the session (free 127.0.0.1 port, stopped
by pid), a 6-node Redis Cluster for the cluster scenarios (tests/python/cluster_helpers.py),
the workers' commands, and the tables printed at the end of the run."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import List

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
# the Python suite's redis-server and RESP helpers (appended: this suite's own modules come first)
sys.path.append(str(HERE.parent / "python"))

from cluster_helpers import RedisCluster  # noqa: E402
from redis_helpers import BloomServer, RedisServer, redisbloom_path  # noqa: E402
from workers import commands, languages  # noqa: E402

_tables: List[str] = []


def record_table(text: str) -> None:
    """Printed in the terminal summary, even with -q and for passing tests."""
    _tables.append(text)
    print(text)


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    if _tables:
        terminalreporter.section("cross-language race: counts per strategy and language")
        for t in _tables:
            terminalreporter.write_line(t)
            terminalreporter.write_line("")


@pytest.fixture(scope="session")
def redis_server():
    server = RedisServer().start()
    try:
        yield server
    finally:
        server.cleanup()


@pytest.fixture(scope="session")
def redisbloom_server():
    """A redis-server with RedisBloom loaded, for the native scenarios only (scripts/redisbloom.sh
    provides the pinned module; a module that cannot be had fails the suite, never skips it)."""
    server = BloomServer().start()
    try:
        yield server
    finally:
        server.cleanup()


@pytest.fixture(scope="session")
def redis_cluster():
    """A 6-node Redis Cluster (3 masters + 3 replicas) for the cluster scenarios only: started
    when the first of them runs (never for the standalone ones), stopped by pid at the end. Its
    nodes load RedisBloom, for cluster-native (the others do not use it)."""
    cluster = RedisCluster(["--loadmodule", redisbloom_path()]).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def langs() -> List[str]:
    return languages()


@pytest.fixture(scope="session")
def worker_commands(langs):
    try:
        return commands(langs)
    except RuntimeError as e:  # a requested language without its worker fails, never skips
        pytest.fail(str(e), pytrace=False)
