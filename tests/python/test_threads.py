"""Threads: the GIL is released while a call waits on the network, and clients and filters are
shared between threads safely (closing included)."""
from __future__ import annotations

import threading
import time

import pytest

import bloomguard
from bloomguard import _handle

PAUSE_MS = 800


@pytest.fixture
def ready(client, fname):
    f = client.filter(fname)
    f.init(10000, 0.01)
    f.add("x")
    assert "x" in f  # the config is cached: a query is one round trip
    try:
        yield f
    finally:
        if not f.closed:
            f.delete()
            f.close()


def test_python_runs_while_a_call_waits(ready, raw):
    """While one thread is inside a C call (server paused), another runs Python code."""
    raw("CLIENT", "PAUSE", PAUSE_MS)
    result = {}
    calling = threading.Event()

    def query():
        calling.set()
        result["present"] = ready.contains("x")

    t = threading.Thread(target=query)
    t.start()
    assert calling.wait(5)
    time.sleep(0.1)  # now inside the C call, waiting for the server
    assert t.is_alive()
    spins, deadline = 0, time.monotonic() + 0.2
    while time.monotonic() < deadline:  # pure Python: needs the GIL
        spins += 1
    assert t.is_alive(), "the call returned before the pause ended?"
    assert spins > 1000
    t.join(10)
    assert result == {"present": True}


def test_two_threads_overlap_against_a_paused_server(ready, raw):
    raw("CLIENT", "PAUSE", PAUSE_MS)
    paused_at = time.monotonic()
    spans = {}

    def query(i):
        start = time.monotonic()
        present = ready.contains("x")
        spans[i] = (start, time.monotonic(), present)

    threads = [threading.Thread(target=query, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    (s0, e0, p0), (s1, e1, p1) = spans[0], spans[1]
    assert p0 and p1
    # both were waiting in C at the same time, and both waited for the pause
    assert max(s0, s1) < min(e0, e1)
    assert min(e0, e1) - paused_at > PAUSE_MS / 1000 * 0.7
    assert max(e0, e1) - paused_at < PAUSE_MS / 1000 * 1.8


def test_threads_share_one_client(client, fname):
    shared = client.filter(fname)
    shared.init(100000, 0.001)
    errors = []

    def work(tid):
        try:
            mine = ["t%d-%d" % (tid, i) for i in range(300)]
            for item in mine[:100]:
                shared.add(item)
            shared.add_many(mine[100:])
            assert all(shared.contains_many(mine))
            assert all(item in shared for item in mine[:50])
            with client.filter("%s:own:%d" % (fname, tid)) as own:
                own.init(1000, 0.01)
                own.add_many(mine)
                assert own.contains_many(mine) == [True] * len(mine)
                own.delete()
        except Exception as e:  # pragma: no cover - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert abs(shared.count() - 8 * 300) < 50
    shared.delete()
    shared.close()


def test_close_while_a_call_is_in_flight(ready, raw):
    """close() on another thread never frees the handle under a running call: the call finishes,
    the handle is freed once it has returned, and later calls raise Closed."""
    freed = _handle.stats["filter.freed"]
    raw("CLIENT", "PAUSE", PAUSE_MS)
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("present", ready.contains("x")))
    t.start()
    time.sleep(0.1)
    ready.close()
    assert ready.closed
    assert _handle.stats["filter.freed"] == freed  # still in use by the thread
    t.join(10)
    assert result == {"present": True}
    assert _handle.stats["filter.freed"] == freed + 1
    with pytest.raises(bloomguard.Closed):
        ready.contains("x")


def test_close_client_while_threads_use_it(url, fname):
    c = bloomguard.Client(url)
    with c.filter(fname) as f:
        f.init(1000, 0.01)
    outcomes = {"ok": 0, "closed": 0}
    errors = []
    lock = threading.Lock()
    stop = time.monotonic() + 0.6

    def work():
        while time.monotonic() < stop:
            try:
                with c.filter(fname) as g:
                    g.add("y")
                    assert "y" in g
                with lock:
                    outcomes["ok"] += 1
            except bloomguard.Closed:
                with lock:
                    outcomes["closed"] += 1
                time.sleep(0.01)
            except Exception as e:  # pragma: no cover
                errors.append(repr(e))
                return

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    c.close()
    for t in threads:
        t.join(10)
    assert not errors, errors
    assert outcomes["ok"] > 0 and outcomes["closed"] > 0
    with bloomguard.Client(url) as c2, c2.filter(fname) as g:
        g.delete()


def test_many_threads_each_with_a_call_object(ready):
    """bg_call objects are per thread; threads that end leave nothing behind (see test_leaks)."""
    results = []

    def one():
        results.append(ready.contains("x", timeout=2))

    for _round in range(5):
        threads = [threading.Thread(target=one) for _ in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
    assert results == [True] * 100
