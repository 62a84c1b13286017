"""The cluster scenarios' side of a race (tests/race/README.md, "The cluster scenarios"): which
URL each worker gets, where the final bitmap is read, and the driver thread that migrates the
filter's slot (a partitioned filter: the slots of some of its partitions) back and forth between
two masters while the workers run.

A migration leg is scripted by hand, as tests/c/test_cluster.c does it: IMPORTING/MIGRATING,
the config key (a partition's meta) first, a pause (queries meet it on the target and the bitmap
on the source: TRYAGAIN, or ASK for a key already across), every other key of the slot, a short
pause (ASK), SETSLOT NODE everywhere (MOVED for whoever still asks the source). Then back.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, List, Optional

from cluster_helpers import N_SLOTS, ClusterError, RedisCluster

#: the pause after the config key moved, and after the rest moved, before SETSLOT NODE
CONFIG_PAUSE_S = 0.15
REST_PAUSE_S = 0.05
#: between two legs (the slot settled on one master: plain traffic, MOVED for stale maps)
SETTLED_PAUSE_S = 0.1


class ClusterTarget:
    """A RedisCluster as the race's server. Every worker gets the seed list of all six nodes
    (bloomguard's `redis://h1:p1,h2:p2,...`; Redisson's useClusterServers() with each one),
    except the c1 reader, which gets one node's URL - a replica's when there is one: any node
    will do for loading the slot map."""

    def __init__(self, cluster: RedisCluster) -> None:
        self.cluster = cluster
        self.url = cluster.seeds

    def worker_url(self, lang: str) -> str:
        if lang != "c1":
            return self.url
        replica = next((n for n in self.cluster.nodes if n.alive and not n.is_master), None)
        node = replica or self.cluster.nodes[0]
        return "redis://127.0.0.1:%d" % node.port

    def get(self, key: str) -> bytes:
        """GET on the master that owns the key's slot now (the migrator has stopped)."""
        owner = self.cluster.owner(self.cluster.slot(key))
        rep = self.cluster.cmd(owner, "GET", key)
        if isinstance(rep, Exception):
            raise ClusterError("GET %s on node %d: %s" % (key, owner, rep))
        return rep or b""

    def migrator(self, name: str, max_legs: int, min_legs: int, partitions: int = 0,
                 moved: int = 0, native: bool = False) -> "SlotMigrator":
        """The plain filter's slot; or, with partitions, the slots of `moved` of them; a native
        filter's slot, its key first."""
        if partitions:
            return SlotMigrator.of_partitions(self.cluster, partitions, migrated_partitions(partitions, moved),
                                              max_legs, min_legs)
        if native:
            return SlotMigrator(self.cluster, [self.cluster.slot(name)], lambda _slot: [name.encode()],
                                max_legs, min_legs)
        return SlotMigrator.of_filter(self.cluster, name, max_legs, min_legs)


def config_key(name: str) -> str:
    """Redisson's config key (README, "Redis layout")."""
    return name + ":config" if "{" in name else "{%s}:config" % name


def partition_slot(i: int, partitions: int) -> int:
    """Partition i's slot in a partitioned filter of P partitions: the middle of its 1/P of the
    16384 slots (docs/layout.md, "Partitioned filter"; the library's bgi_partition_slot)."""
    return (2 * i + 1) * N_SLOTS // (2 * partitions)


def migrated_partitions(partitions: int, how_many: int) -> List[int]:
    """how_many partitions spread evenly over 0..P-1, so over the masters' slot ranges."""
    return [j * partitions // how_many for j in range(how_many)]


class SlotMigrator(threading.Thread):
    """Migrates some slots, each between its master and another one, leg after leg, until
    finish() is called and at least min_legs are done, or max_legs are done (a bound in count).
    Every slot of a leg goes through each step before any goes to the next, so the pauses are
    shared. The keys first_keys(slot) names move first (those a query checks: a plain filter's
    config; a partition's meta). A failure of the cluster helper ends the thread and is raised by
    finish()."""

    def __init__(self, cluster: RedisCluster, slots: List[int], first_keys: Callable[[int], List[bytes]],
                 max_legs: int, min_legs: int) -> None:
        super().__init__(name="slot-migrator", daemon=True)
        self.cluster = cluster
        self.slots = slots
        self.first_keys = first_keys
        self.max_legs, self.min_legs = max_legs, min_legs
        self.legs = 0
        self.seconds: List[float] = []   # per leg, begin to end
        self.error: Optional[BaseException] = None
        self._finish = threading.Event()
        self._abort = threading.Event()
        homes = [cluster.owner(s) for s in slots]
        self.ends = [(cluster.other_master(h), h) for h in homes]  # there, then back

    @classmethod
    def of_filter(cls, cluster: RedisCluster, name: str, max_legs: int, min_legs: int) -> "SlotMigrator":
        """The slot of a plain filter: its config key first, then the rest."""
        return cls(cluster, [cluster.slot(name)], lambda _slot: [config_key(name).encode()], max_legs, min_legs)

    @classmethod
    def of_partitions(cls, cluster: RedisCluster, partitions: int, moved: List[int], max_legs: int,
                      min_legs: int) -> "SlotMigrator":
        """The slots of the partitions `moved` of a partitioned filter: each one's meta first
        (every generation's there), then the rest (its bitmap)."""
        def metas(slot: int) -> List[bytes]:
            keys = cluster.cmd(cluster.owner(slot), "CLUSTER", "GETKEYSINSLOT", slot, 100)
            if not isinstance(keys, list):
                raise ClusterError("GETKEYSINSLOT %d: %s" % (slot, keys))
            return [k for k in keys if k.endswith(b":m")]
        slots = [partition_slot(i, partitions) for i in moved]
        for slot in slots:  # else the slot formula here is not the library's: nothing would move
            if not metas(slot):
                raise ClusterError("no partition meta in slot %d of a filter of %d partitions" % (slot, partitions))
        return cls(cluster, slots, metas, max_legs, min_legs)

    def run(self) -> None:
        try:
            while (self.legs < self.max_legs and not self._abort.is_set()
                   and not (self._finish.is_set() and self.legs >= self.min_legs)):
                self._leg([end[self.legs % 2] for end in self.ends])
                self.legs += 1
                time.sleep(SETTLED_PAUSE_S)
        except BaseException as e:  # reported by finish(): a harness failure, not the library's
            self.error = e

    def _leg(self, to: List[int]) -> None:
        c, t0 = self.cluster, time.monotonic()
        moves = list(zip(self.slots, to))
        for slot, dst in moves:
            c.migrate_begin(slot, dst)
        for slot, dst in moves:
            for key in self.first_keys(slot):
                c.migrate_key(slot, dst, key)
        time.sleep(CONFIG_PAUSE_S)
        for slot, dst in moves:
            c.migrate_all_keys(slot, dst)
        time.sleep(REST_PAUSE_S)
        for slot, dst in moves:
            c.migrate_end(slot, dst)
        self.seconds.append(time.monotonic() - t0)

    def abandon(self, timeout: float) -> None:
        """Ends the thread after its current leg, raising nothing: the race already failed."""
        self._abort.set()
        self.join(timeout)

    def finish(self, timeout: float) -> None:
        """Asks for the last leg, waits for the thread; raises what stopped it early."""
        self._finish.set()
        self.join(timeout)
        if self.is_alive():
            raise ClusterError("the slot migrator did not finish within %.0f s (%d legs)" % (timeout, self.legs))
        if self.error is not None:
            raise ClusterError("the slot migrator failed after %d legs: %r" % (self.legs, self.error))
