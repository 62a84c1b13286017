"""The Python worker of the cross-language race suite (tests/race/README.md), through the
bloomguard binding installed in the running interpreter; with --aio (language "pyaio") its
queries go through bloomguard.aio: AIO_TASKS asyncio tasks at once on one client, each doing the
query loop below.

Roles, as in the C worker (tests/race/c/race_worker.c):
  query   queries base items and items whose add already returned OK (read from the added file
          before they are queried), one at a time and in batches;
  add     appends each new item to the database file, adds it, and appends it to the added file
          only once the add returned OK;
  rotate  `count` rotations in a row, each reading the database file after the rotation began.

Prints one JSON line of counts; exits 2 only on a harness failure.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from typing import List, Tuple

import bloomguard

BATCH = 64


class Counts:
    def __init__(self) -> None:
        self.queries = self.checked = self.errors = self.false_negatives = 0
        self.adds = self.add_errors = self.rotations = self.rotation_errors = 0
        self.locked = 0  # of the errors: Locked (a LOCKED rewrite outlasted the lock wait)
        self.last_expected = 0
        self.tracked = 0  # queries that read the bits alone (tracked_reads)
        self.can_track = "tracking" in bloomguard.features()  # hiredis >= 1.0
        self.first_error = ""

    def started_partitioned(self, created: bool, partitions: int) -> None:
        """--partitions: whether this worker's tryInit created the filter, the P info() read."""
        self.init_created = int(created)
        self.partitions = partitions

    def note(self, what: str) -> None:
        if not self.first_error:
            self.first_error = what


def read_lines(path: str, offset: int) -> Tuple[List[bytes], int]:
    """Complete lines from offset on, and the offset past them (a line being written waits)."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        data = fh.read()
    end = data.rfind(b"\n") + 1
    return data[:end].split(b"\n")[:-1], offset + end


def append_line(fd: int, item: bytes) -> None:
    """One write() on an O_APPEND descriptor: lines of all workers never interleave."""
    line = item + b"\n"
    if os.write(fd, line) != len(line):
        raise OSError("short write")


class Stopper:
    def __init__(self, args: argparse.Namespace) -> None:
        self.stop_file = args.stop
        self.deadline = time.monotonic() + args.duration

    def __call__(self) -> bool:
        return time.monotonic() >= self.deadline or (self.stop_file is not None and os.path.exists(self.stop_file))


def touch(path: str) -> None:
    if path:
        with open(path, "ab"):
            pass


def run_query(args: argparse.Namespace, f: bloomguard.Filter, c: Counts) -> None:
    pool, _ = read_lines(args.items, 0)
    if not pool:
        raise SystemExit("race worker: no base items in %s" % args.items)
    added_off = 0
    refreshed = 0.0
    stop = Stopper(args)
    first = True
    while not stop():
        if time.monotonic() - refreshed > 0.02:  # items added meanwhile: checked from now on
            more, added_off = read_lines(args.added, added_off)
            pool.extend(more)
            refreshed = time.monotonic()
        item = random.choice(pool)
        c.queries += 1
        c.checked += 1
        try:
            if not f.contains(item):
                c.false_negatives += 1
                c.note("false negative: %s" % item.decode())
        except bloomguard.BloomGuardError as e:
            c.errors += 1
            c.locked += isinstance(e, bloomguard.Locked)
            c.note("contains: %r" % e)
        batch = random.choices(pool, k=BATCH)
        c.queries += 1
        c.checked += BATCH
        try:
            for it, present in zip(batch, f.contains_many(batch)):
                if not present:
                    c.false_negatives += 1
                    c.note("false negative: %s" % it.decode())
        except bloomguard.BloomGuardError as e:
            c.errors += 1
            c.locked += isinstance(e, bloomguard.Locked)
            c.note("contains_many: %r" % e)
        if first:
            touch(args.ready)
            first = False
        if args.pause_us:
            time.sleep(args.pause_us / 1e6)


AIO_TASKS = 32


def run_query_aio(args: argparse.Namespace, url: str, c: Counts) -> None:
    """The query role through bloomguard.aio: AIO_TASKS tasks share one client's queue."""
    import asyncio

    import bloomguard.aio

    pool, _ = read_lines(args.items, 0)
    if not pool:
        raise SystemExit("race worker: no base items in %s" % args.items)
    stop = Stopper(args)
    state = {"added_off": 0, "refreshed": 0.0, "first": True}

    def refresh() -> None:
        if time.monotonic() - state["refreshed"] > 0.02:
            more, state["added_off"] = read_lines(args.added, state["added_off"])
            pool.extend(more)
            state["refreshed"] = time.monotonic()

    async def task(af: "bloomguard.aio.Filter") -> None:
        while not stop():
            refresh()
            item = random.choice(pool)
            c.queries += 1
            c.checked += 1
            try:
                if not await af.contains(item):
                    c.false_negatives += 1
                    c.note("false negative: %s" % item.decode())
            except bloomguard.BloomGuardError as e:
                c.errors += 1
                c.locked += isinstance(e, bloomguard.Locked)
                c.note("aio contains: %r" % e)
            batch = random.choices(pool, k=BATCH)
            c.queries += 1
            c.checked += BATCH
            try:
                for it, present in zip(batch, await af.contains_many(batch)):
                    if not present:
                        c.false_negatives += 1
                        c.note("false negative: %s" % it.decode())
            except bloomguard.BloomGuardError as e:
                c.errors += 1
                c.locked += isinstance(e, bloomguard.Locked)
                c.note("aio contains_many: %r" % e)
            if state["first"]:
                touch(args.ready)
                state["first"] = False

    async def main() -> "dict[str, int]":
        # config retries: tests/race/README.md, "Config retries"
        async with await bloomguard.aio.connect(url, command_timeout=10, connect_timeout=10,
                                                write_lock_wait=10, config_retries=20) as client:
            af = client.filter(args.filter, kind=args.kind)
            if args.partitions:  # init_partitioned(), through the queue
                created = await af.init(args.expected[0], args.fpp, partitions=args.partitions)
                c.started_partitioned(created, (await af.info()).partitions)
            await asyncio.gather(*(task(af) for _ in range(AIO_TASKS)))
            return dict(af.stats())

    st = asyncio.run(main())
    c.tracked = st["tracked_reads"]
    c.aio_stats = st  # type: ignore[attr-defined]


def run_add(args: argparse.Namespace, f: bloomguard.Filter, c: Counts) -> None:
    db = os.open(args.db, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    added = os.open(args.added, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    touch(args.ready)
    stop = Stopper(args)
    try:
        for seq in range(args.count):
            if stop():
                break
            item = ("add-%s-%d" % (args.id, seq)).encode()
            append_line(db, item)  # the database first
            try:
                f.add(item)
            except bloomguard.BloomGuardError as e:
                c.add_errors += 1
                c.note("add: %r" % e)
            else:
                c.adds += 1
                append_line(added, item)
            if args.pause_us:
                time.sleep(args.pause_us / 1e6)
    finally:
        os.close(db)
        os.close(added)


def init_partitioned(args: argparse.Namespace, f: bloomguard.Filter, c: Counts) -> None:
    """--partitions: a service's start-up, Redisson's tryInit - of a partitioned filter, which keeps
    the config already there (the harness made it) - then info(), whose P the harness compares."""
    c.started_partitioned(f.init(args.expected[0], args.fpp, partitions=args.partitions), f.info().partitions)


def run_rotate(args: argparse.Namespace, f: bloomguard.Filter, c: Counts) -> None:
    touch(args.ready)
    stop = Stopper(args)
    for i in range(args.count):
        if stop():
            break
        expected = args.expected[i % len(args.expected)]
        try:
            with f.rotate(expected, args.fpp, args.strategy) as rot:
                items, _ = read_lines(args.db, 0)  # read after the rotation began, as rotation.h asks
                rot.add_many(items)
                if args.hold_ms:
                    time.sleep(args.hold_ms / 1000.0)  # adds and queries land meanwhile
        except bloomguard.BloomGuardError as e:
            c.rotation_errors += 1
            c.note("rotation: %r" % e)
            time.sleep(0.01)
        else:
            c.rotations += 1
            c.last_expected = expected


def parse_args(argv: List[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True)
    p.add_argument("--filter", required=True)
    p.add_argument("--role", required=True, choices=["query", "add", "rotate"])
    p.add_argument("--strategy", required=True, choices=["swap", "locked", "naive"])
    p.add_argument("--items", required=True)
    p.add_argument("--db", required=True)
    p.add_argument("--added", required=True)
    p.add_argument("--stop")
    p.add_argument("--ready")
    p.add_argument("--id", default="py")
    p.add_argument("--duration", type=float, default=60.0)
    p.add_argument("--count", type=int, default=1000000)
    p.add_argument("--expected", type=lambda s: [int(x) for x in s.split(",")], default=None)
    p.add_argument("--fpp", type=float, default=0.01)
    p.add_argument("--hold-ms", type=int, default=0)
    p.add_argument("--pause-us", type=int, default=0)
    p.add_argument("--partitions", type=int, default=0,
                   help="a partitioned filter's P: tryInit with the first --expected, --fpp and P at start")
    p.add_argument("--kind", choices=["redisson", "native"], default="redisson",
                   help="native: the server's own BF.* filter")
    p.add_argument("--aio", action="store_true", help="queries through bloomguard.aio (language pyaio)")
    args = p.parse_args(argv)
    if args.aio and args.role != "query":
        p.error("--aio is a reader's (role query)")
    if (args.role == "rotate" or args.partitions) and not args.expected:
        p.error("rotate and --partitions need --expected")
    return args


def main(argv: List[str]) -> int:
    args = parse_args(argv)
    c = Counts()
    if args.aio:
        run_query_aio(args, args.url, c)
        st = getattr(c, "aio_stats")
        delattr(c, "aio_stats")
        return report(args, "pyaio", c, st)
    # generous timeouts: the suite judges correctness, not latency on a loaded machine
    # and a query waits out a LOCKED rewrite for up to 10 s (the default 100 ms is for services)
    with bloomguard.Client(args.url, command_timeout=10, connect_timeout=10, write_lock_wait=10,
                           config_retries=20) as client:   # tests/race/README.md, "Config retries"
        with client.filter(args.filter, kind=args.kind) as f:
            if args.partitions:
                init_partitioned(args, f, c)
            {"query": run_query, "add": run_add, "rotate": run_rotate}[args.role](args, f, c)
            st = f.stats()  # the client's Redis Cluster counters (0 standalone)
            c.tracked = st["tracked_reads"]
    return report(args, "python", c, st)


def report(args: argparse.Namespace, lang: str, c: Counts, st: "dict[str, int]") -> int:
    cluster = {"cluster_moved": st["cluster_moved"], "cluster_ask": st["cluster_ask"],
               "cluster_busy": st["cluster_busy_retries"], "cluster_reloads": st["cluster_map_reloads"]}
    out = {"lang": lang, "role": args.role, "strategy": args.strategy}
    out.update(vars(c))
    out.update(cluster)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (OSError, bloomguard.BloomGuardError) as e:  # no file, no server at start: the harness failed
        print("race worker: %r" % e, file=sys.stderr)
        sys.exit(2)
