"""The cluster scenarios' side of a race (tests/race/README.md, "The cluster scenarios"): which
URL each worker gets, where the final bitmap is read, and the driver thread that migrates the
filter's slot back and forth between two masters while the workers run.

A migration leg is scripted by hand, as tests/c/test_cluster.c does it: IMPORTING/MIGRATING,
the config key first, a pause (queries meet the config on the target and the bitmap on the
source: TRYAGAIN, or ASK for a key already across), every other key of the slot, a short pause
(ASK), SETSLOT NODE everywhere (MOVED for whoever still asks the source). Then back.
"""
from __future__ import annotations

import threading
import time
from typing import List, Optional

from cluster_helpers import ClusterError, RedisCluster

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

    def migrator(self, name: str, max_legs: int, min_legs: int) -> "SlotMigrator":
        return SlotMigrator(self.cluster, name, max_legs, min_legs)


def config_key(name: str) -> str:
    """Redisson's config key (README, "Redis layout")."""
    return name + ":config" if "{" in name else "{%s}:config" % name


class SlotMigrator(threading.Thread):
    """Migrates the slot of filter `name` between its master and another one, leg after leg,
    until finish() is called and at least min_legs are done, or max_legs are done (a bound in
    count). A failure of the cluster helper ends the thread and is raised by finish()."""

    def __init__(self, cluster: RedisCluster, name: str, max_legs: int, min_legs: int) -> None:
        super().__init__(name="slot-migrator", daemon=True)
        self.cluster = cluster
        self.name_ = name
        self.slot = cluster.slot(name)
        self.max_legs, self.min_legs = max_legs, min_legs
        self.legs = 0
        self.seconds: List[float] = []   # per leg, begin to end
        self.error: Optional[BaseException] = None
        self._finish = threading.Event()
        self._abort = threading.Event()
        home = cluster.owner(self.slot)
        self.ends = (cluster.other_master(home), home)  # there, then back

    def run(self) -> None:
        try:
            while (self.legs < self.max_legs and not self._abort.is_set()
                   and not (self._finish.is_set() and self.legs >= self.min_legs)):
                self._leg(self.ends[self.legs % 2])
                self.legs += 1
                time.sleep(SETTLED_PAUSE_S)
        except BaseException as e:  # reported by finish(): a harness failure, not the library's
            self.error = e

    def _leg(self, to: int) -> None:
        c, t0 = self.cluster, time.monotonic()
        c.migrate_begin(self.slot, to)
        c.migrate_key(self.slot, to, config_key(self.name_))
        time.sleep(CONFIG_PAUSE_S)
        c.migrate_all_keys(self.slot, to)
        time.sleep(REST_PAUSE_S)
        c.migrate_end(self.slot, to)
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
