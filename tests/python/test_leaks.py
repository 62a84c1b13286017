"""Handles are freed exactly once, by close() or (safety net) by the garbage collector, and
repeated open/close leaks neither native memory (RSS) nor Python memory (tracemalloc)."""
from __future__ import annotations

import gc
import os
import threading
import tracemalloc

import pytest

import bloomguard
from bloomguard import _handle


def counts():
    s = _handle.stats
    return {k: s[k] for k in ("client.opened", "client.freed", "filter.opened", "filter.freed")}


def delta(before):
    now = counts()
    return {k: now[k] - before[k] for k in now}


def rss_kb() -> int:
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") // 1024


def cycle(url, name, ops=True):
    c = bloomguard.Client(url)
    f = c.filter(name)
    if ops:
        f.contains_many(["a", "b"])
        try:
            f.expire(-1)
        except bloomguard.InvalidArgument:
            pass
    f.close()
    c.close()


@pytest.fixture
def initialized(client, fname):
    with client.filter(fname) as f:
        f.init(1000, 0.01)
        f.add("a")
    yield fname
    with client.filter(fname) as f:
        f.delete()


def test_close_frees_each_handle_once(url, initialized):
    before = counts()
    for _ in range(100):
        cycle(url, initialized)
    assert delta(before) == {"client.opened": 100, "client.freed": 100, "filter.opened": 100, "filter.freed": 100}


def test_double_close_frees_once(url, initialized):
    before = counts()
    c = bloomguard.Client(url)
    f = c.filter(initialized)
    for _ in range(3):
        f.close()
        c.close()
    with c:
        pass
    with f:
        pass
    del f, c
    gc.collect()
    assert delta(before) == {"client.opened": 1, "client.freed": 1, "filter.opened": 1, "filter.freed": 1}


def test_gc_is_the_safety_net(url, initialized):
    before = counts()
    c = bloomguard.Client(url)
    f = c.filter(initialized)
    assert "a" in f
    del c, f
    gc.collect()
    assert delta(before) == {"client.opened": 1, "client.freed": 1, "filter.opened": 1, "filter.freed": 1}


def test_client_closed_before_its_filters(url, initialized):
    before = counts()
    for _ in range(50):
        c = bloomguard.Client(url)
        fs = [c.filter(initialized) for _ in range(3)]
        c.close()
        assert all("a" in f for f in fs)
        for f in fs:
            f.close()
    assert delta(before) == {"client.opened": 50, "client.freed": 50, "filter.opened": 150, "filter.freed": 150}


def test_no_native_growth_over_many_cycles(url, initialized):
    for _ in range(300):  # warm up allocator pools, caches, the script SHA ...
        cycle(url, initialized)
    gc.collect()
    start = rss_kb()
    for _ in range(3000):
        cycle(url, initialized)
    gc.collect()
    grown = rss_kb() - start
    # a leaked client (pool, connection buffers, hiredis context) costs kilobytes: 3000 of them
    # would be tens of MB
    assert grown < 3 * 1024, "RSS grew by %d kB over 3000 open/use/close cycles" % grown


def test_no_python_growth_over_many_cycles(url, initialized):
    for _ in range(200):
        cycle(url, initialized)
    gc.collect()
    tracemalloc.start()
    try:
        snap1 = tracemalloc.take_snapshot()
        for _ in range(1000):
            cycle(url, initialized)
        gc.collect()
        snap2 = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    filters = [tracemalloc.Filter(False, tracemalloc.__file__)]
    stats = snap2.filter_traces(filters).compare_to(snap1.filter_traces(filters), "filename")
    grown = sum(s.size_diff for s in stats)
    assert grown < 64 * 1024, "Python memory grew by %d bytes: %s" % (grown, stats[:5])


def test_threads_leave_no_call_objects_behind(url, initialized):
    with bloomguard.Client(url) as c, c.filter(initialized) as f:
        def one():
            assert "a" in f

        def run(n):
            for _ in range(n):
                t = threading.Thread(target=one)
                t.start()
                t.join(10)

        run(200)
        gc.collect()
        start = rss_kb()
        run(2000)
        gc.collect()
        grown = rss_kb() - start
    assert grown < 3 * 1024, "RSS grew by %d kB over 2000 short-lived threads" % grown


# --- locks and policies ------------------------------------------------------------------------------

def lock_and_policy_cycle(client, name):
    with client.lock(name) as lk, lk.write():
        pass
    p = bloomguard.Policy(on_notinit="callback", fallback=lambda b: [True] * len(b))
    with client.filter(name + ":missing", policy=p) as f:
        assert f.query("x").source == "callback"


def test_locks_and_policies_are_freed(client, fname):
    from bloomguard import _fallback

    s = _handle.stats
    before = (s["lock.opened"], s["lock.freed"], len(_fallback._registry))
    for _ in range(100):
        lock_and_policy_cycle(client, fname)
    gc.collect()
    assert (s["lock.opened"] - before[0], s["lock.freed"] - before[1]) == (100, 100)
    assert len(_fallback._registry) == before[2]  # every dropped policy's fallback is unregistered
    for _ in range(200):  # warm up
        lock_and_policy_cycle(client, fname)
    gc.collect()
    start = rss_kb()
    for _ in range(1000):
        lock_and_policy_cycle(client, fname)
    gc.collect()
    grown = rss_kb() - start
    # a leaked lock (renewal thread stack, holder ids) or policy costs kilobytes: 1000 of them, megabytes
    assert grown < 3 * 1024, "RSS grew by %d kB over 1000 lock + policy cycles" % grown
