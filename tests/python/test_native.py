"""Native filters (BF.*) through the Python binding, blocking and asyncio, against redis-server
7.0 with RedisBloom 2.8.2 loaded (redis_helpers.BloomServer)."""
from __future__ import annotations

import asyncio
import itertools

import pytest

import bloomguard
from bloomguard import aio
from redis_helpers import BloomServer

_names = itertools.count()


@pytest.fixture(scope="module")
def bloom():
    server = BloomServer().start()
    try:
        yield server
    finally:
        server.cleanup()


@pytest.fixture
def bclient(bloom):
    with bloomguard.Client(bloom.url, command_timeout=5) as c:
        yield c


@pytest.fixture
def name():
    return "pynat-%d" % next(_names)


def strict():
    """Every failure raises (what the step itself said)."""
    return bloomguard.Policy(on_notinit="error", on_corrupt="error", on_other="error")


def test_native_filter_blocking(bclient, bloom, name):
    f = bclient.filter(name, kind="native")
    assert f.kind == "native"
    assert f.init(1000, 0.01, expansion=4) is True
    assert f.init(1000, 0.01) is False
    with bloom.resp() as r:
        assert r("TYPE", name) == "MBbloom--"
    assert f.add("apple") is True
    assert f.add("apple") is False
    assert f.contains("apple") and not f.contains("pear")
    items = ["i%d" % i for i in range(3000)]
    new = f.add_many(items[:1500])
    assert 1400 <= new <= 1500
    answers = f.contains_many(items)
    assert all(answers[:1500]) and sum(answers[1500:]) < 150
    assert f.count() == 1 + new
    info = f.info()
    assert info.kind == "native" and info.partitions == 0 and info.expected_insertions > 1000
    ni = f.native_info()
    assert ni.expansion == 4 and ni.items == 1 + new and ni.filters >= 2
    assert f.delete() is True
    assert bclient.filter(name + "-plain").info  # a plain handle is still the default


def test_native_missing_and_other_kind(bclient, name):
    f = bclient.filter(name, kind="native", policy=strict())
    with pytest.raises(bloomguard.NotInitialized):
        f.contains("x")
    with pytest.raises(bloomguard.NotInitialized):
        f.add("x")
    plain = bclient.filter(name)
    plain.init(100, 0.01)
    with pytest.raises(bloomguard.WrongType, match="Redisson-layout filter"):
        f.contains("x")
    other = bclient.filter(name + "-n", kind="native")
    other.init(100, 0.01)
    rplain = bclient.filter(name + "-n", policy=strict())
    with pytest.raises(bloomguard.WrongType, match="is a native Bloom filter"):
        rplain.contains("x")
    with pytest.raises(bloomguard.InvalidArgument, match="kind must be"):
        bclient.filter(name, kind="bf")


def test_native_full_and_sizes(bclient, name):
    f = bclient.filter(name, kind="native", policy=strict())
    f.init(10, 0.01, expansion=0)
    with pytest.raises(bloomguard.Full, match="item 10 of this call and the 4 after it were not added"):
        f.add_many(["f%d" % i for i in range(15)])
    with pytest.raises(bloomguard.BadParams, match="native_max_bytes"):
        bclient.filter(name + "-huge", kind="native").init(10**11, 1e-6)
    with pytest.raises(bloomguard.InvalidArgument, match="expansion is for a native filter"):
        bclient.filter(name + "-p").init(100, 0.01, expansion=2)


def test_native_rotation(bclient, name):
    f = bclient.filter(name, kind="native", policy=strict())
    f.init(1000, 0.01)
    f.add_many(["old%d" % i for i in range(500)])
    with f.rotate(2000, 0.01) as rot:
        f.add("during")
        rot.add_many(["new%d" % i for i in range(1500)])
    assert all(f.contains_many(["new%d" % i for i in range(1500)]))
    assert f.contains("during")
    assert f.native_info().capacity == 2000


def test_native_aio(bloom, name):
    async def run():
        async with aio.connect(bloom.url, command_timeout=5) as c:
            f = c.filter(name, kind="native")
            assert f.kind == "native"
            assert await f.init(10, 0.01, expansion=0) is True
            assert await f.add("a") is True
            assert await f.contains("a") is True
            assert await f.contains_many(["a", "b"]) == [True, False]
            info = await f.info()
            assert info.kind == "native" and info.expected_insertions == 10
            assert await f.count() == 1
            with pytest.raises(bloomguard.Full):
                await f.add_many(["x%d" % i for i in range(20)])
            g = c.filter(name + "-missing", kind="native", policy=strict())
            with pytest.raises(bloomguard.NotInitialized):
                await g.contains("a")
    asyncio.run(run())


def _calls(r, cmd):
    """calls=N of one command in INFO commandstats (0 when never called)."""
    info = r("INFO", "commandstats")
    info = info.decode() if isinstance(info, bytes) else info
    key = "cmdstat_%s:calls=" % cmd
    at = info.find(key)
    return int(info[at + len(key):].split(",", 1)[0]) if at >= 0 else 0


def test_native_tracked_read(bloom, name):
    """Once the server tracks the key, a query sends BF.MEXISTS alone (no EVALSHA, one BF.MEXISTS
    each, blocking and asyncio); a DEL between two queries is NotInitialized, never False."""
    n = 40
    with bloomguard.Client(bloom.url, command_timeout=5) as c, bloom.resp() as r:
        f = c.filter(name, kind="native", policy=strict())
        f.init(1000, 0.01)
        f.add("a")
        r("CONFIG", "RESETSTAT")
        assert all(f.contains("a") for _ in range(n))
        s = f.stats()
        assert _calls(r, "evalsha") == 0 and _calls(r, "bf.mexists") == n
        assert s["tracked_reads"] >= n - 2 and _calls(r, "type") == n - s["tracked_reads"]
        r("DEL", name)
        with pytest.raises(bloomguard.NotInitialized):
            f.contains("a")
        assert f.stats()["tracked_stale"] == s["tracked_stale"] + 1

    async def run():
        async with aio.connect(bloom.url, command_timeout=5) as c:
            g = c.filter(name + "-aio", kind="native")
            await g.init(1000, 0.01)
            await g.add("a")
            with bloom.resp() as r:
                r("CONFIG", "RESETSTAT")
                for _ in range(n):
                    assert await g.contains("a") is True
                assert _calls(r, "evalsha") == 0 and _calls(r, "bf.mexists") == n
                assert g.stats()["tracked_reads"] >= n - 2
    asyncio.run(run())
