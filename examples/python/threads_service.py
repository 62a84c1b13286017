"""A service whose Bloom filter is rebuilt every hour - compressed here to twice a second - while
threads keep asking it, with the blocking API.

The filter stands in front of a "database" (a set of user ids): a lookup asks the filter first and
reads the database only when the filter says "maybe", so a false "absent" (a false negative) would
report a real user as missing. Reader threads look up ids that exist and ids that do not; a writer
thread creates users (the row first, then the filter: a rebuild that read the database before the
row was there began before the add, so the add reaches the new generation too); a background
thread rebuilds the filter from the database with a swap rotation, again and again. Exits 1
unless there were 0 errors, 0 false negatives and at least 2 rebuilds.

    python threads_service.py [URL] [SECONDS] [swap|naive]
"""
import random
import sys
import threading
import time

import bloomguard

URL = sys.argv[1] if len(sys.argv) > 1 else "redis://127.0.0.1:6379"
SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 else 5.0
STRATEGY = sys.argv[3] if len(sys.argv) > 3 else "swap"  # "naive": delete + re-add, which this catches
FILTER = "example:py-threads:users"
EXPECTED, FPP = 100_000, 0.001
READERS = 4
REBUILD_EVERY = 0.5  # seconds: the hourly rebuild, compressed

database = {f"user:{i}" for i in range(0, 40_000, 2)}  # even ids exist, odd ones do not
db_lock = threading.Lock()
created = [0]  # users user:new:0 .. created[0]-1 exist: row inserted, filter told
stats = {"lookups": 0, "database_reads": 0, "errors": 0, "false_negatives": 0, "rebuilds": 0, "added": 0}
stats_lock = threading.Lock()
stop = threading.Event()


def count(**delta):
    with stats_lock:
        for key, n in delta.items():
            stats[key] += n


def rebuild(f):
    """The hourly job: read the source of truth after the rotation began, then commit (swap: one atomic step)."""
    with f.rotate(EXPECTED, FPP, strategy=STRATEGY, wait=5) as rot:
        with db_lock:
            ids = list(database)
        rot.add_many(ids)  # hashed in C with the GIL released; uploaded at the commit


def rebuilder(f):
    while not stop.wait(REBUILD_EVERY):
        try:
            rebuild(f)
            count(rebuilds=1)
        except bloomguard.BloomGuardError as e:
            print("rebuild failed:", e, file=sys.stderr)
            count(errors=1)


def pick(rnd):
    """An id to look up, and whether that user exists (known before the lookup)."""
    if created[0] and rnd.random() < 0.25:
        return f"user:new:{rnd.randrange(created[0])}", True
    i = rnd.randrange(80_000)
    return f"user:{i}", i < 40_000 and i % 2 == 0


def reader(f, seed):
    rnd = random.Random(seed)
    while not stop.is_set():
        user, exists = pick(rnd)
        try:
            maybe = f.contains(user)
        except bloomguard.BloomGuardError as e:
            print("lookup failed:", e, file=sys.stderr)
            count(lookups=1, errors=1)
            continue
        count(lookups=1, database_reads=int(maybe), false_negatives=int(exists and not maybe))


def writer(f):
    n = 0
    while not stop.wait(0.002):
        user = f"user:new:{n}"
        with db_lock:
            database.add(user)  # the row first, then the filter
        try:
            f.add(user)
        except bloomguard.BloomGuardError as e:
            print("add failed:", e, file=sys.stderr)
            count(errors=1)
            break
        n += 1
        created[0] = n
        count(added=1)


def main():
    with bloomguard.Client(URL, command_timeout=2.0) as client, client.filter(FILTER) as f:
        f.delete()
        rebuild(f)  # the first build, before the service answers
        threads = [threading.Thread(target=rebuilder, args=(f,)), threading.Thread(target=writer, args=(f,))]
        threads += [threading.Thread(target=reader, args=(f, i)) for i in range(READERS)]
        for t in threads:
            t.start()
        end = time.monotonic() + SECONDS
        while time.monotonic() < end or (stats["rebuilds"] < 2 and time.monotonic() < end + 30):
            time.sleep(0.05)  # SECONDS, and at least 2 rebuilds (a loaded machine is slower)
        stop.set()
        for t in threads:
            t.join()
        # every user created during the rebuilds is in the filter after them
        with db_lock:
            new = sorted(u for u in database if u.startswith("user:new:"))
        missing = new and f.contains_many(new).count(False)
        count(false_negatives=missing or 0)
        f.delete()
    print(" ".join(f"{k}={v}" for k, v in stats.items()))
    ok = stats["errors"] == 0 and stats["false_negatives"] == 0 and stats["rebuilds"] >= 2 and stats["lookups"] > 0
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
