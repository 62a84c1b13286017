"""bloomguard.aio: what an operation in flight keeps alive, and what a close waits for.

A filter closed (or an ``async with client.filter(...)`` left) while its operations are in flight:
they complete with their answers (the C operation holds the filter until it ends; closing it once
freed the filter under them and killed the interpreter). A client closed while the first operation
waits for a server that never answers returns at once.
"""
from __future__ import annotations

import asyncio
import socket
import time
from typing import Any, List

import bloomguard
import bloomguard.aio as aio
from lateness import Lateness

ITEMS = [b"item-%d" % i for i in range(200)]
ABSENT = [b"absent-%d" % i for i in range(200)]


async def _filled(c: aio.Client, name: str) -> aio.Filter:
    f = c.filter(name)
    await f.delete()
    await f.init(100_000, 1e-9)
    await f.add_many(ITEMS)
    return f


def _tasks(f: aio.Filter) -> List["asyncio.Task[Any]"]:
    """40 operations of every item-taking kind; each one's expected answer is checked by _check."""
    tasks: List["asyncio.Task[Any]"] = []
    for i in range(10):
        tasks.append(asyncio.ensure_future(f.contains_many(ITEMS[i * 20:(i + 1) * 20])))
        tasks.append(asyncio.ensure_future(f.contains(ITEMS[i])))
        tasks.append(asyncio.ensure_future(f.contains(ABSENT[i])))
        tasks.append(asyncio.ensure_future(f.add(ITEMS[i])))
    return tasks


def _check(results: List[Any]) -> None:
    for i in range(10):
        many, present, absent, added = results[4 * i:4 * i + 4]
        assert many == [True] * 20
        assert present is True
        assert absent is False
        assert added is False  # already in the filter: no new bit


def test_closing_a_filter_with_operations_in_flight(url, fname, raw):
    async def main() -> None:
        async with await aio.connect(url) as c:
            for round_ in range(6):
                f = await _filled(c, "%s:%d" % (fname, round_))
                raw("CLIENT", "PAUSE", "200", "ALL")  # holds every reply: all 40 are in flight at the close
                tasks = _tasks(f)
                await asyncio.sleep(0)  # they submit
                assert not any(t.done() for t in tasks)
                assert len(c._pending) == len(tasks)
                f.close()
                _check(await asyncio.gather(*tasks))
                assert f.sync.closed
    asyncio.run(main())


def test_leaving_async_with_filter_with_operations_in_flight(url, fname, raw):
    async def main() -> None:
        c = await aio.connect(url)
        try:
            await _filled(c, fname)
            raw("CLIENT", "PAUSE", "200", "ALL")
            async with c.filter(fname) as f:
                tasks = _tasks(f)
                await asyncio.sleep(0)
                assert len(c._pending) == len(tasks)
            _check(await asyncio.gather(*tasks))
        finally:
            await c.close()
    asyncio.run(main())


def test_a_fallback_still_answers_for_a_closed_filter(url, fname, raw):
    """The policy's fallback of a filter closed (and dropped) with a query in flight still answers it."""
    async def main() -> bool:
        c = await aio.connect(url, command_timeout=5)
        try:
            policy = bloomguard.Policy(on_timeout=["callback", "error"], fallback=lambda items: [True] * len(items))
            f = c.filter(fname, policy=policy)
            await f.init(1000, 0.01)
            del policy
            raw("CLIENT", "PAUSE", "400", "ALL")
            op = asyncio.ensure_future(f.query(b"never-added", timeout=0.1))
            await asyncio.sleep(0)
            f.close()
            del f
            answer = await op
            assert answer.source == "callback", answer
            return answer.present
        finally:
            await c.close()
    assert asyncio.run(main()) is True


def test_close_does_not_wait_for_a_server_that_never_answers():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)  # never accepted: every connect completes, nothing ever answers
    url = "redis://127.0.0.1:%d" % listener.getsockname()[1]

    async def main() -> float:
        c = await aio.connect(url, connect_timeout=2, command_timeout=2)
        f = c.filter("silent")
        op = asyncio.ensure_future(f.contains("x"))
        await asyncio.sleep(0.1)
        assert not op.done()  # waiting for the server
        t0 = time.monotonic()
        await c.close()
        took = time.monotonic() - t0
        try:
            await op
        except bloomguard.Closed:
            pass
        return took

    with Lateness() as late:
        t_start = time.monotonic()
        took = asyncio.run(main())
        bound = 0.05 + late.worst_since(t_start)
    listener.close()
    assert took <= bound, "close took %.0f ms (bound %.0f ms)" % (took * 1e3, bound * 1e3)
