"""The asyncio twins of the blocking API against a real redis-server: connect used both ways,
the client's ping / stats / events / open filters, a filter's persist, node, snapshot, histogram,
breaker state and lock, a rotation's figures, and an awaited lock's holds - each answer checked
against what the blocking API says of the same server."""
from __future__ import annotations

import asyncio

import pytest

import bloomguard
import bloomguard.aio as aio


def test_connect_without_await_is_a_context_manager(url, fname):
    async def main() -> bool:
        async with aio.connect(url) as c:
            f = c.filter(fname)
            await f.init(1000, 0.01)
            await f.add("a")
            got = await f.contains("a")
        assert c.closed
        c2 = await aio.connect(url)  # the awaited form keeps working
        try:
            assert await c2.filter(fname).contains("a") is True
        finally:
            await c2.close()
        async with await aio.connect(url) as c3:  # and so does the old spelling
            assert await c3.filter(fname).delete() is True
        return got
    assert asyncio.run(main()) is True


def test_the_client_constructor_needs_a_running_loop(url):
    with pytest.raises(RuntimeError, match="running event loop"):
        aio.Client(url)

    async def main() -> None:
        c = aio.Client(url, command_timeout=2)
        try:
            await c.ping()
        finally:
            await c.close()
        with pytest.raises(bloomguard.InvalidArgument, match="connect_at_open"):
            aio.Client(url, connect_at_open=True)
    asyncio.run(main())


def test_client_twins(url, fname):
    async def main() -> None:
        async with aio.connect(url) as c:
            await c.ping()
            events = []
            listener = c.on_event(events.append)
            f = c.filter(fname)
            await f.init(1000, 0.01)
            assert f.sync in c.open_filters()
            assert c.stats()["connections"] >= 1
            c.remove_event_listener(listener)
            f.close()
            assert f.closed and f.sync not in c.open_filters()
    asyncio.run(main())


def test_filter_twins(url, fname, raw):
    async def main() -> None:
        async with aio.connect(url) as c:
            f = c.filter(fname, policy=bloomguard.Policy(on_connection=["snapshot", "error"]))
            await f.init(1000, 0.01)
            await f.add_many(["a", "b"])
            assert await f.expire(100) is True
            assert raw("PTTL", fname) > 0
            assert await f.persist() is True
            assert raw("PTTL", fname) == -1
            assert await f.persist() is False  # nothing to remove now
            addr, slot = await f.node()
            assert addr.endswith(":%d" % int(url.rsplit(":", 1)[1])) and slot == f.sync.node()[1]
            await f.snapshot()
            assert f.stats()["snapshot_bytes"] > 0
            h = f.histogram("contains")
            assert h.count >= 0 and f.histogram("add").count >= 1
            assert f.breaker_state == f.sync.breaker_state == "closed"
            async with f.lock() as lock:
                assert lock.key == "{%s}:lock" % fname or lock.key.endswith(":lock")
                async with lock.write(wait=1) as token:
                    assert token > 0 and lock.held().mode == "write"
                assert lock.held().mode is None
            await f.delete()
    asyncio.run(main())


def test_rotation_twins(url, fname):
    async def main() -> None:
        async with aio.connect(url) as c:
            f = c.filter(fname)
            await f.init(1000, 0.01)
            rot = f.rotate(2000, 0.01)
            assert (rot.name, rot.strategy, rot.expected, rot.fpp, rot.state) == (fname, "swap", 2000, 0.01, "pending")
            async with rot:
                assert rot.state == "active"
                assert await rot.add_many(["x", "y", "z"]) == 3
                await rot.add("w")
                assert rot.items == 4
            assert rot.state == "committed"
            assert rot.stats.items == 4 and rot.bytes_uploaded > 0 and rot.elapsed > 0
            assert await f.contains_many(["x", "y", "z", "w"]) == [True] * 4
            await f.delete()
    asyncio.run(main())


def test_lock_twins(url, fname):
    async def main() -> None:
        async with aio.connect(url) as c:
            async with c.lock(fname) as a, c.lock(fname) as b:
                assert a.name == fname and a.key == fname + ":lock" and not a.per_thread
                t1 = await a.acquire("exclusive")
                with pytest.raises(bloomguard.Locked):
                    await b.acquire("exclusive", wait=0)
                assert a.held().mode == "exclusive" and a.held().token == t1
                # the holder is the Lock object: another task releases the hold
                await asyncio.get_running_loop().create_task(a.release())
                async with b.exclusive(wait=1) as t2:
                    assert t2 > t1
                async with a.read(wait=1), b.read(wait=1):
                    assert a.held().mode == b.held().mode == "read"
                assert await a.retire() is True
            assert a.closed and b.closed
    asyncio.run(main())
