"""A service whose Bloom filter is rebuilt every hour - compressed here to twice a second - while
asyncio tasks keep asking it, with bloomguard.aio (no thread held per lookup).

The filter stands in front of a "database" (a set of user ids): a lookup asks the filter first and
reads the database only when the filter says "maybe", so a false "absent" (a false negative) would
report a real user as missing. 64 lookup tasks ask for ids that exist and ids that do not; a
writer task creates users (the row first, then the filter: a rebuild that read the database
before the row was there began before the add, so the add reaches the new generation too); a
rebuild task rotates the filter from the database again and again (its steps run in the loop's default executor, the loop keeps
answering). Exits 1 unless there were 0 errors, 0 false negatives and at least 2 rebuilds.

    python asyncio_service.py [URL] [SECONDS] [swap|naive]
"""
import asyncio
import random
import sys

import bloomguard
import bloomguard.aio

URL = sys.argv[1] if len(sys.argv) > 1 else "redis://127.0.0.1:6379"
SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 else 5.0
STRATEGY = sys.argv[3] if len(sys.argv) > 3 else "swap"  # "naive": delete + re-add, which this catches
FILTER = "example:py-asyncio:users"
EXPECTED, FPP = 100_000, 0.001
TASKS = 64
REBUILD_EVERY = 0.5  # seconds: the hourly rebuild, compressed

database = {f"user:{i}" for i in range(0, 40_000, 2)}  # even ids exist, odd ones do not
created = 0  # users user:new:0 .. created-1 exist: row inserted, filter told
stats = {"lookups": 0, "database_reads": 0, "errors": 0, "false_negatives": 0, "rebuilds": 0, "added": 0}


async def rebuild(f):
    """The hourly job: read the source of truth after the rotation began, then commit (swap: one atomic step)."""
    async with f.rotate(EXPECTED, FPP, strategy=STRATEGY, wait=5) as rot:
        await rot.add_many(list(database))


async def rebuilder(f, stop):
    while True:
        try:
            await asyncio.wait_for(stop.wait(), REBUILD_EVERY)
            return
        except asyncio.TimeoutError:
            pass
        try:
            await rebuild(f)
            stats["rebuilds"] += 1
        except bloomguard.BloomGuardError as e:
            print("rebuild failed:", e, file=sys.stderr)
            stats["errors"] += 1


def pick(rnd):
    """An id to look up, and whether that user exists (known before the lookup)."""
    if created and rnd.random() < 0.25:
        return f"user:new:{rnd.randrange(created)}", True
    i = rnd.randrange(80_000)
    return f"user:{i}", i < 40_000 and i % 2 == 0


async def lookups(f, stop, seed):
    rnd = random.Random(seed)
    while not stop.is_set():
        user, exists = pick(rnd)
        try:
            maybe = await f.contains(user, timeout=2.0)
        except bloomguard.BloomGuardError as e:
            print("lookup failed:", e, file=sys.stderr)
            stats["errors"] += 1
            continue
        stats["lookups"] += 1
        stats["database_reads"] += maybe
        stats["false_negatives"] += exists and not maybe


async def writer(f, stop):
    global created
    while not stop.is_set():
        user = f"user:new:{created}"
        database.add(user)  # the row first, then the filter
        try:
            await f.add(user)
        except bloomguard.BloomGuardError as e:
            print("add failed:", e, file=sys.stderr)
            stats["errors"] += 1
            return
        created += 1
        stats["added"] += 1
        await asyncio.sleep(0.002)


async def main():
    async with await bloomguard.aio.connect(URL, command_timeout=2.0) as client:
        f = client.filter(FILTER)
        await f.delete()
        await rebuild(f)  # the first build, before the service answers
        stop = asyncio.Event()
        tasks = [asyncio.create_task(rebuilder(f, stop)), asyncio.create_task(writer(f, stop))]
        tasks += [asyncio.create_task(lookups(f, stop, i)) for i in range(TASKS)]
        loop = asyncio.get_running_loop()
        end = loop.time() + SECONDS
        while loop.time() < end or (stats["rebuilds"] < 2 and loop.time() < end + 30):
            await asyncio.sleep(0.05)  # SECONDS, and at least 2 rebuilds (a loaded machine is slower)
        stop.set()
        await asyncio.gather(*tasks)
        # every user created during the rebuilds is in the filter after them
        new = sorted(u for u in database if u.startswith("user:new:"))
        if new:
            stats["false_negatives"] += (await f.contains_many(new)).count(False)
        await f.delete()
    print(" ".join(f"{k}={v}" for k, v in stats.items()))
    return stats["errors"] == 0 and stats["false_negatives"] == 0 and stats["rebuilds"] >= 2 and stats["lookups"] > 0


if __name__ == "__main__":
    sys.exit(0 if asyncio.run(main()) else 1)
