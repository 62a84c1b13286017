"""bloomguard.aio awaits without ``timeout=`` on a server that stalls (CLIENT PAUSE, SIGSTOP): each
operation ends at the client's command timeout with ``bloomguard.Timeout``, never a connection
error - single and batch queries and adds, the admin operations, a partitioned filter's fan-outs.

The bound is the command timeout + 50 ms from the await, plus how late the event loop ran a
2 ms sleep meanwhile (the completion is handed out by the same loop). Each stall has its control
(after it, the same operations answer with their known answers), and the negative control runs
the same harness on a client whose command timeout is three times the one the bound is computed
for - what an operation retried with fresh waits looked like: the harness must flag it. The
trickling reply is C's test (tests/c/test_queue_stall.c): aio runs over the same queue.
"""
from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import Any, Callable, Dict, List, Tuple

import pytest

import bloomguard
import bloomguard.aio as aio
from redis_helpers import RedisServer

CMD_TIMEOUT = 0.4
SLACK = 0.05
STALL_MS = 1500
PRESENT = ["present-%d" % i for i in range(40)]
ABSENT = ["absent-%d" % i for i in range(40)]


@pytest.fixture(scope="module")
def server():
    # a server of its own: SIGSTOP must not stall the session's
    s = RedisServer().start()
    try:
        yield s
    finally:
        s.cleanup()


def _ops(f, aux, gone, p) -> List[Tuple[str, Callable[[], Any], Callable[[Any], bool]]]:
    """(name, the await, its known answer's check) for every queue path."""
    def always(_: Any) -> bool:
        return True
    return [
        ("contains_many", lambda: f.contains_many(PRESENT), lambda r: r == [True] * len(PRESENT)),
        ("add_many", lambda: f.add_many(ABSENT), always),
        ("contains", lambda: f.contains(PRESENT[0]), lambda r: r is True),
        ("add", lambda: f.add(PRESENT[1]), lambda r: r is False),
        ("count", lambda: f.count(), always),
        ("info", lambda: f.info(), always),
        ("init", lambda: aux.init(100000, 0.001), lambda r: r is False),
        ("expire", lambda: aux.expire(3600), always),
        ("delete", lambda: gone.delete(), lambda r: r is False),
        ("partitioned contains", lambda: p.contains(PRESENT[2]), lambda r: r is True),
        ("partitioned contains_many", lambda: p.contains_many(PRESENT), lambda r: r == [True] * len(PRESENT)),
        ("partitioned add_many", lambda: p.add_many(ABSENT), always),
    ]


class LoopLateness:
    """How late the loop ran a 2 ms sleep: the worst since start()."""

    def __init__(self) -> None:
        self.worst = 0.0
        self.task: Any = None

    async def _run(self) -> None:
        while True:
            t0 = time.monotonic()
            await asyncio.sleep(0.002)
            self.worst = max(self.worst, time.monotonic() - t0 - 0.002)

    def start(self) -> None:
        self.worst = 0.0
        self.task = asyncio.ensure_future(self._run())

    async def stop(self) -> float:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        return self.worst


async def _timed(make: Callable[[], Any]) -> Tuple[Any, float]:
    t0 = time.monotonic()
    try:
        result = await make()
    except Exception as e:  # noqa: BLE001 - the outcome is what the test judges
        result = e
    return result, time.monotonic() - t0


async def _run_all(ops) -> List[Tuple[Any, float]]:
    tasks = []
    for _name, make, _check in ops:
        tasks.append(asyncio.ensure_future(_timed(make)))
        await asyncio.sleep(0.003)  # a FIFO of requests on each connection, as a busy service has
    return await asyncio.gather(*tasks)


def _through(server: RedisServer, stall: str, command_timeout: float) -> Dict[str, Any]:
    """One stall: the outcome of every operation, and the bound it was held to."""
    raw = server.resp()

    async def main():
        async with await aio.connect(server.url, command_timeout=command_timeout) as c:
            f, aux, gone, p = c.filter("stall"), c.filter("stall-aux"), c.filter("stall-gone"), c.filter("stall-p")
            for g in (f, aux, p):
                await g.delete()
            await f.init(100000, 0.001)
            await aux.init(100000, 0.001)
            await p.init(100000, 0.001, partitions=8)
            await f.add_many(PRESENT)
            await p.add_many(PRESENT)
            ops = _ops(f, aux, gone, p)
            # the control before: every connection the operations use is up, every answer known
            for (name, _m, check), (r, _t) in zip(ops, await _run_all(ops)):
                assert not isinstance(r, Exception) and check(r), (name, r)
            probe = LoopLateness()
            probe.start()
            if stall == "pause":
                raw("CLIENT", "PAUSE", str(STALL_MS), "ALL")
            else:
                os.kill(server.pid, signal.SIGSTOP)
            try:
                outcomes = await _run_all(ops)
            finally:
                if stall == "sigstop":
                    os.kill(server.pid, signal.SIGCONT)
            late = await probe.stop()
            while True:  # the stall is over once the server answers again
                try:
                    raw("PING")
                    break
                except Exception:  # noqa: BLE001
                    await asyncio.sleep(0.05)
            # the control after: the same client answers, with the known answers
            for (name, _m, check), (r, _t) in zip(ops, await _run_all(ops)):
                assert not isinstance(r, Exception) and check(r), (name, r)
            return [(name, r, t) for (name, _m, _c), (r, t) in zip(ops, outcomes)], late

    try:
        outcomes, late = asyncio.run(main())
    finally:
        raw.close()
    bound = CMD_TIMEOUT + SLACK + late
    broke = [(name, repr(r), round(t * 1000)) for name, r, t in outcomes
             if not isinstance(r, bloomguard.Timeout) or t > bound]
    return {"broke": broke, "bound": bound, "slowest": max(t for _n, _r, t in outcomes), "outcomes": outcomes}


@pytest.mark.parametrize("stall", ["pause", "sigstop"])
def test_each_await_ends_at_the_command_timeout(server, stall):
    got = _through(server, stall, CMD_TIMEOUT)
    assert not got["broke"], "bound %.0f ms: %r" % (got["bound"] * 1000, got["broke"])
    for name, r, _t in got["outcomes"]:
        assert "cannot connect" not in str(r), (name, r)


def test_negative_control_a_longer_wait_is_caught(server):
    got = _through(server, "pause", 3 * CMD_TIMEOUT)
    assert len(got["broke"]) == len(got["outcomes"]), got["broke"]
