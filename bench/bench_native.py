"""bench_native.py: bloomguard's native filter (kind="native", RedisBloom BF.*) against redis-py
sending BF.EXISTS / BF.MEXISTS to the same filter itself, on one redis-server with RedisBloom
loaded, in the same run. Groups (each row's ratio is bloomguard / that peer, the median of per-round
ratios; sides take turns within a round, the first rotating):

  blocking x1     f.contains(item)               vs  redis.Redis  r.bf().exists(name, item)
  blocking x100   f.contains_many(100 items)     vs  redis.Redis  r.bf().mexists(name, *100 items)
                                                 and a redis-py pipeline (transaction=False) of
                                                 100 BF.EXISTS
  aio x1          --tasks asyncio tasks, each awaiting one af.contains(item) after another
                                                 vs  redis.asyncio r.bf().exists (a blocking pool of
                                                 --redis-conns connections)
  aio x100        the same with af.contains_many(100)  vs  redis.asyncio r.bf().mexists and an
                                                 asyncio pipeline of 100 BF.EXISTS

Run by hand (see bench/README.md), not a test:

    bash bindings/python/ci.sh --co -q >/dev/null && build-python/venv/bin/pip install redis hiredis
    build-python/venv/bin/python bench/bench_native.py [--url URL] [--rounds N (5)] [--seconds S (1.0)]
        [--items N (100000)] [--tasks T (256)] [--redis-conns C (64)] [--groups blocking,aio]

Without --url it starts its own redis-server with RedisBloom (tests/python/redis_helpers.BloomServer:
$BG_REDISBLOOM or scripts/redisbloom.sh) on a free 127.0.0.1 port. Pin the server and this process
to different CPUs (taskset) for figures that mean something. Printed per side: items/s, client CPU
per item (getrusage) and the server's CPU per call and per item (INFO cpu). Items "p:%08d" are
added, "a:%08d" never are; queries alternate them; a present item answered absent aborts the run.
"""
from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Dict, List, Tuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))

import bloomguard  # noqa: E402
import bloomguard.aio as aio  # noqa: E402

BATCH = 100


def cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def server_cpu_s(resp: Any) -> float:
    info = resp("INFO", "cpu")
    info = info.decode() if isinstance(info, bytes) else info
    vals = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
    return float(vals["used_cpu_user"]) + float(vals["used_cpu_sys"])


def check(start: int, answers: List[Any]) -> None:
    """Query i is item i: even ones were added, so must answer present (no false negatives)."""
    for j, a in enumerate(answers):
        if (start + j) % 2 == 0 and not a:
            raise AssertionError("a present item (query %d) answered absent" % (start + j))


def run_sync(seconds: float, batch: int, n: int, one: Callable[[int], None]) -> Tuple[int, int]:
    """Calls one(start) (batch items from start) until the time is up: (calls, items)."""
    end = time.monotonic() + seconds
    calls, i = 0, 0
    while True:
        one(i)
        calls += 1
        i = (i + batch) % n
        if time.monotonic() >= end:
            return calls, calls * batch


async def run_async(seconds: float, batch: int, n: int, tasks: int,
                    one: Callable[[int], Awaitable[None]]) -> Tuple[int, int]:
    """`tasks` tasks, each awaiting one(start) after another until the time is up: (calls, items)."""
    end = time.monotonic() + seconds
    calls = 0

    async def task(seed: int) -> None:
        nonlocal calls
        i = (seed * 7919 * batch) % n
        while time.monotonic() < end:
            await one(i)
            i = (i + batch * tasks) % n
            calls += 1
    await asyncio.gather(*(task(t) for t in range(tasks)))
    return calls, calls * batch


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--items", type=int, default=100000, help="items added (a multiple of 100)")
    ap.add_argument("--tasks", type=int, default=256)
    ap.add_argument("--redis-conns", type=int, default=64)
    ap.add_argument("--groups", default="blocking,aio")
    args = ap.parse_args()
    if not (1 <= args.rounds <= 21 and 0 < args.seconds <= 60 and args.items >= BATCH and args.items % BATCH == 0
            and 1 <= args.tasks <= 10000 and args.redis_conns >= 1):
        ap.error("--rounds 1..21, --seconds 0..60, --items a multiple of 100, --tasks 1..10000")
    try:
        import redis  # type: ignore
        import redis.asyncio as redis_asyncio  # type: ignore
    except ImportError:
        print("bench_native.py needs redis (and hiredis): pip install redis hiredis", file=sys.stderr)
        return 1
    server = None
    url = args.url
    if not url:
        from redis_helpers import BloomServer
        server = BloomServer().start()
        url = server.url
    host, port = url[len("redis://"):].split(":")
    from redis_helpers import Resp
    resp = Resp(host, int(port))
    name = "bloomguard-bench:native-py"
    n = 2 * args.items
    items = ["%s:%08d" % ("a" if i % 2 else "p", i // 2) for i in range(n)]
    try:
        with bloomguard.Client(url) as sync:
            f = sync.filter(name, kind="native")
            f.delete()
            f.init(1000000 if args.items <= 1000000 else args.items, 0.01)
            for s in range(0, args.items * 2, 2000):
                f.add_many(items[s:s + 2000:2])
            r = redis.Redis(host=host, port=int(port))
            rbf = r.bf()
            c = await aio.connect(url)
            af = c.filter(name, kind="native")
            pool = redis_asyncio.BlockingConnectionPool(host=host, port=int(port), max_connections=args.redis_conns)
            ar = redis_asyncio.Redis(connection_pool=pool)
            arbf = ar.bf()

            # ---- the sides: each takes a start index and checks its answers ----
            def bg1(i: int) -> None:
                check(i, [f.contains(items[i])])

            def bg100(i: int) -> None:
                check(i, f.contains_many(items[i:i + BATCH]))

            def rp1(i: int) -> None:
                check(i, [rbf.exists(name, items[i])])

            def rp100(i: int) -> None:
                check(i, rbf.mexists(name, *items[i:i + BATCH]))

            def rppipe(i: int) -> None:
                p = r.pipeline(transaction=False)
                for it in items[i:i + BATCH]:
                    p.execute_command("BF.EXISTS", name, it)
                check(i, p.execute())

            async def abg1(i: int) -> None:
                check(i, [await af.contains(items[i])])

            async def abg100(i: int) -> None:
                check(i, await af.contains_many(items[i:i + BATCH]))

            async def arp1(i: int) -> None:
                check(i, [await arbf.exists(name, items[i])])

            async def arp100(i: int) -> None:
                check(i, await arbf.mexists(name, *items[i:i + BATCH]))

            async def arppipe(i: int) -> None:
                p = ar.pipeline(transaction=False)
                for it in items[i:i + BATCH]:
                    p.execute_command("BF.EXISTS", name, it)
                check(i, await p.execute())

            # group name -> (batch, async?, sides; the first side is bloomguard, the rest its peers)
            groups: Dict[str, Tuple[int, bool, Dict[str, Any]]] = {}
            if "blocking" in args.groups:
                groups["blocking x1"] = (1, False, {"bloomguard": bg1, "redis-py BF.EXISTS": rp1})
                groups["blocking x100"] = (BATCH, False, {"bloomguard": bg100, "redis-py BF.MEXISTS": rp100,
                                                          "redis-py pipe BF.EXISTS": rppipe})
            if "aio" in args.groups:
                groups["aio x1"] = (1, True, {"bloomguard.aio": abg1, "redis.asyncio BF.EXISTS": arp1})
                groups["aio x100"] = (BATCH, True, {"bloomguard.aio": abg100, "redis.asyncio BF.MEXISTS": arp100,
                                                    "redis.asyncio pipe BF.EXISTS": arppipe})

            print("bench_native.py: server %s%s; native filter %s, %d items added; %d rounds x %.2f s per side; "
                  "aio: %d tasks, redis.asyncio pool of %d" % (url, " (started here, RedisBloom loaded)" if server else "",
                                                                name, args.items, args.rounds, args.seconds,
                                                                args.tasks, args.redis_conns))
            print("%-14s %-30s %12s %12s %12s %12s %10s" % ("group", "side", "items/s", "client us/it", "srv us/call",
                                                             "srv us/it", "bg / side"))
            for gname, (batch, is_async, sides) in groups.items():
                names = list(sides)
                rate: Dict[str, List[float]] = {s: [] for s in names}
                cli: Dict[str, List[float]] = {s: [] for s in names}
                srv_call: Dict[str, List[float]] = {s: [] for s in names}
                srv_item: Dict[str, List[float]] = {s: [] for s in names}
                ratio: Dict[str, List[float]] = {s: [] for s in names[1:]}
                for rnd in range(-1, args.rounds):  # round -1: a short warm-up, not counted
                    order = names[rnd % len(names):] + names[:rnd % len(names)]
                    got: Dict[str, float] = {}
                    secs = 0.1 if rnd < 0 else args.seconds
                    for s in order:
                        s0, c0, t0 = server_cpu_s(resp), cpu_s(), time.monotonic()
                        if is_async:
                            calls, done = await run_async(secs, batch, n, args.tasks, sides[s])
                        else:
                            calls, done = run_sync(secs, batch, n, sides[s])
                        wall = time.monotonic() - t0
                        c1, s1 = cpu_s(), server_cpu_s(resp)
                        if rnd < 0:
                            continue
                        got[s] = done / wall
                        rate[s].append(got[s])
                        cli[s].append((c1 - c0) * 1e6 / done)
                        srv_call[s].append((s1 - s0) * 1e6 / calls)
                        srv_item[s].append((s1 - s0) * 1e6 / done)
                    if rnd >= 0:
                        for s in names[1:]:
                            ratio[s].append(got[names[0]] / got[s])
                med = statistics.median
                for s in names:
                    rs = "" if s == names[0] else "%.3fx" % med(ratio[s])
                    print("%-14s %-30s %12.0f %12.3f %12.3f %12.4f %10s" % (gname, s, med(rate[s]), med(cli[s]),
                                                                            med(srv_call[s]), med(srv_item[s]), rs))
            print("bg / side: bloomguard's items/s over the peer's (median of per-round ratios)")
            await c.close()
            await ar.aclose() if hasattr(ar, "aclose") else await ar.close()
            f.delete()
            r.close()
    finally:
        resp.close()
        if server is not None:
            server.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
