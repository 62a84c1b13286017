"""The Python binding against a real Redis Cluster (cluster_helpers.RedisCluster): URLs of one node
or several seeds, filters on every master, the cluster counters, and queries/adds from threads
while the filter's slot is migrated by hand (ASK, TRYAGAIN, MOVED) - 0 errors, 0 false negatives,
0 lost adds. The routing itself is C's (tests/c/test_cluster.c has the negative control)."""
from __future__ import annotations

import threading
import time
from typing import Callable

import pytest

import bloomguard
from cluster_helpers import RedisCluster, key_slot

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def cluster():
    with RedisCluster() as c:
        yield c


def name_on(c: RedisCluster, master: int, prefix: str) -> str:
    for i in range(100000):
        name = "%s-%d" % (prefix, i)
        if c.owner(key_slot(name)) == master:
            return name
    raise AssertionError("no name for master %d" % master)


def masters(c: RedisCluster):
    return [i for i, n in enumerate(c.nodes) if n.is_master and n.alive]


def test_filters_on_every_master(cluster):
    c = cluster
    items = ["item-%d" % i for i in range(200)]
    for url in (c.url, c.seeds):
        with bloomguard.Client(url) as client:
            for m in masters(c):
                f = client.filter(name_on(c, m, "py-spread"))
                f.delete()
                f.init(1000, 0.01)
                f.add_many(items)
                assert all(f.contains_many(items))
                assert f.node() == ("127.0.0.1:%d" % c.nodes[m].port, key_slot(f.name))
                assert f.info().size == 9585
                assert f.delete()
                assert f.stats()["cluster_moved"] == 0


def test_a_db_other_than_0_is_refused(cluster):
    with pytest.raises(bloomguard.InvalidArgument, match="only db 0"):
        bloomguard.Client(cluster.url + "/2", connect_at_open=True)
    with bloomguard.Client(cluster.url + "/2") as client:  # opening connects nothing: the first call says it
        with pytest.raises(bloomguard.InvalidArgument, match="only db 0"):
            client.ping()


def test_bad_urls(cluster):
    c = cluster
    with pytest.raises(bloomguard.BadURL, match="only a Redis Cluster takes"):
        bloomguard.Client(c.seeds, cluster=False)
    with pytest.raises(TypeError):
        bloomguard.Client(c.url, cluster="yes")
    with pytest.raises(bloomguard.BadURL, match="seed 2 of 2"):
        bloomguard.Client("redis://127.0.0.1:%d,127.0.0.1:0" % c.nodes[0].port)
    # the first seed unreachable: the next one is used
    with bloomguard.Client("redis://127.0.0.1:1,127.0.0.1:%d" % c.nodes[1].port) as client:
        client.ping()


def test_threads_through_a_migration(cluster):
    c = cluster
    src = masters(c)[0]
    dst = c.other_master(src)
    name = name_on(c, src, "py-migr")
    slot = key_slot(name)
    present = ["p-%d" % i for i in range(2000)]
    client = bloomguard.Client(c.url)
    f = client.filter(name)
    f.delete()
    f.init(10000, 0.01)
    f.add_many(present)
    stop = threading.Event()
    errors, false_negatives, acked = [], [0], []

    def reader(seed: int) -> None:
        g = client.filter(name)
        i = seed
        while not stop.is_set():
            batch = present[i % 1900:i % 1900 + 1 + i % 64]
            i += 37
            try:
                got = g.contains_many(batch, timeout=3.0)
            except bloomguard.BloomGuardError as e:
                errors.append(repr(e))
                continue
            false_negatives[0] += sum(1 for x in got if not x)

    def adder() -> None:
        g = client.filter(name)
        i = 0
        while not stop.is_set():
            item = "ack-%d" % i
            i += 1
            try:
                g.add(item, timeout=3.0)
            except bloomguard.BloomGuardError as e:
                errors.append(repr(e))
                continue
            acked.append(item)
            time.sleep(0.002)

    def counters() -> tuple:
        st = f.stats()
        return st["cluster_ask"], st["cluster_busy_retries"], st["cluster_moved"], st["cluster_map_reloads"]

    def redirected(before: tuple, which: Callable[[tuple, tuple], bool], what: str) -> None:
        """Waits (bounded) until the threads' calls met the migration's state since before (taken
        before the step that makes it): the event, not a time."""
        end = time.monotonic() + 15
        while not which(before, counters()):
            assert time.monotonic() < end, "the threads' calls never met %s in 15 s: %s" % (what, counters())
            time.sleep(0.005)

    threads = [threading.Thread(target=reader, args=(s,)) for s in range(2)] + [threading.Thread(target=adder)]
    for t in threads:
        t.start()
    try:
        for to in (dst, src):
            c.migrate_begin(slot, to)
            before = counters()
            c.migrate_key(slot, to, "{%s}:config" % name)
            # the config there, the bitmap here: Redis 7.0 answers ASK per queued command, Valkey
            # TRYAGAIN for the whole EXEC (and the adds' steps TRYAGAIN on both)
            redirected(before, lambda a, b: b[0] > a[0] or b[1] > a[1], "the half-moved slot (ASK or TRYAGAIN)")
            before = counters()
            c.migrate_all_keys(slot, to)
            # every key there, the slot still the source's: ASK on any server
            redirected(before, lambda a, b: b[0] > a[0], "ASK with every key moved")
            before = counters()
            c.migrate_end(slot, to)
            # MOVED, or the map reloaded first (its refresher, or a reload an ASK asked for, may
            # learn the new owner before any call meets MOVED: a Valkey run met that)
            redirected(before, lambda a, b: b[2] > a[2] or b[3] > a[3], "MOVED (or a map reload)")
    finally:
        stop.set()
        for t in threads:
            t.join()
    st = f.stats()
    assert errors == []
    assert false_negatives[0] == 0
    assert acked and all(f.contains_many(acked))
    assert st["cluster_ask"] > 0 and st["cluster_moved"] > 0 and st["cluster_busy_retries"] > 0
    f.delete()
    client.close()
