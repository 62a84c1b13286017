"""bench_aio: 1,000 asyncio tasks, each awaiting one single-item contains after another, through
bloomguard.aio - against the peers an asyncio service would use instead, on the same server in
the same run:

  aio        bloomguard.aio: f.contains(item)
  redis      redis.asyncio (hiredis parser) sending the raw BITFIELD_RO of the same k bits of the same
             item (indexes from bloomguard.indexes): what Redis does for bloomguard on a tracked
             connection, without the config check
  executor   the blocking f.contains(item) in loop.run_in_executor (the default thread pool):
             what services write today without an asyncio API

Run by hand (see bench/README.md), not a test:

    build-python/venv/bin/pip install redis hiredis
    build-python/venv/bin/python bench/bench_aio.py [--url URL] [--tasks N (1000)] [--rounds N (5)]
        [--seconds S (1.0)]

Without --url it starts its own redis-server on a free 127.0.0.1 port (the Python tests' helper).
Pin the server and this process to different CPUs (taskset) for figures that mean something.
Sides take turns within each round (the first rotates); the ratios are medians of per-round
ratios. Printed per side: queries/s, client CPU per query (getrusage) and the server's (INFO cpu).
"""
from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))

import bloomguard  # noqa: E402
import bloomguard.aio as aio  # noqa: E402

NAME = "bloomguard-bench:aio"
ITEMS = 4000   # even: added; odd: never added


def cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def server_cpu_s(resp: Any) -> float:
    info = resp("INFO", "cpu")
    info = info.decode() if isinstance(info, bytes) else info
    vals = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
    return float(vals["used_cpu_user"]) + float(vals["used_cpu_sys"])


async def drive(tasks: int, seconds: float, one: Callable[[int], Any]) -> int:
    """`tasks` tasks, each awaiting one(i) after another until the time is up: queries done."""
    end = time.monotonic() + seconds
    done = 0

    async def task(seed: int) -> None:
        nonlocal done
        i = seed
        while time.monotonic() < end:
            await one(i % ITEMS)
            i += 7919
            done += 1
    await asyncio.gather(*(task(t) for t in range(tasks)))
    return done


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url")
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--redis-conns", type=int, default=64)
    args = ap.parse_args()
    try:
        import redis.asyncio as redis_asyncio  # type: ignore
    except ImportError:
        print("bench_aio needs redis (and hiredis): pip install redis hiredis", file=sys.stderr)
        return 1
    server = None
    url = args.url
    if not url:
        from redis_helpers import RedisServer
        server = RedisServer().start()
        url = server.url
    host, port = url[len("redis://"):].split(":")
    from redis_helpers import Resp
    resp = Resp(host, int(port))
    try:
        items = ["item-%d" % i for i in range(ITEMS)]
        with bloomguard.Client(url) as sync:
            f = sync.filter(NAME)
            f.delete()
            f.init(ITEMS, 0.001)
            f.add_many(items[0::2])
            info = f.info()
            idx = [bloomguard.indexes(it, info.size, info.hash_iterations) for it in items]
            raw_args = [["BITFIELD_RO", NAME] + [a for o in ix for a in ("GET", "u1", str(o))] for ix in idx]

            c = await aio.connect(url)
            af = c.filter(NAME)
            # the peer at its best here: a blocking pool of --redis-conns connections (the default
            # pool would open one connection per task in flight)
            pool = redis_asyncio.BlockingConnectionPool(host=host, port=int(port), max_connections=args.redis_conns)
            r = redis_asyncio.Redis(connection_pool=pool)
            loop = asyncio.get_running_loop()

            async def aio_one(i: int) -> None:
                if await af.contains(items[i]) != (i % 2 == 0):
                    raise AssertionError("wrong answer")

            async def redis_one(i: int) -> None:
                bits = await r.execute_command(*raw_args[i])
                if all(b == 1 for b in bits) != (i % 2 == 0):
                    raise AssertionError("wrong answer")

            async def executor_one(i: int) -> None:
                if await loop.run_in_executor(None, f.contains, items[i]) != (i % 2 == 0):
                    raise AssertionError("wrong answer")

            sides: Dict[str, Callable[[int], Any]] = {"aio": aio_one, "redis": redis_one, "executor": executor_one}
            names = list(sides)
            rates: Dict[str, List[float]] = {n: [] for n in names}
            cpu: Dict[str, List[float]] = {n: [] for n in names}
            srv: Dict[str, List[float]] = {n: [] for n in names}
            ratios: Dict[str, List[float]] = {"redis": [], "executor": []}
            for rnd in range(args.rounds):
                order = names[rnd % len(names):] + names[:rnd % len(names)]
                got: Dict[str, float] = {}
                for n in order:
                    s0, c0, t0 = server_cpu_s(resp), cpu_s(), time.monotonic()
                    done = await drive(args.tasks, args.seconds, sides[n])
                    wall = time.monotonic() - t0
                    got[n] = done / wall
                    rates[n].append(got[n])
                    cpu[n].append((cpu_s() - c0) * 1e6 / done)
                    srv[n].append((server_cpu_s(resp) - s0) * 1e6 / done)
                for other in ratios:
                    ratios[other].append(got["aio"] / got[other])
            print("%d asyncio tasks, one single-item contains per await; %d rounds of %.1f s" %
                  (args.tasks, args.rounds, args.seconds))
            print("%-9s %12s %14s %14s %16s" % ("side", "queries/s", "client us/q", "server us/q", "aio / side"))
            for n in names:
                ratio = "" if n == "aio" else "%.2fx" % statistics.median(ratios[n])
                print("%-9s %12.0f %14.1f %14.2f %16s" % (n, statistics.median(rates[n]), statistics.median(cpu[n]),
                                                          statistics.median(srv[n]), ratio))
            await c.close()
            await r.aclose() if hasattr(r, "aclose") else await r.close()
    finally:
        resp.close()
        if server is not None:
            server.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
