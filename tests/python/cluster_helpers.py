"""A real 6-node Redis Cluster (3 masters + 3 replicas) for the tests, and its topology changes.

The Python twin of tests/c/cluster_fixture.h: ``RedisCluster`` starts six ``redis-server``
processes (``$BG_REDIS_SERVER`` or the one on PATH) on random free loopback ports P, with P and
the bus port P+10000 both bind-tested free, in 20000..22767 so that the bus stays below the
kernel's ephemeral range (where other tests' free ports come from); ``redis-cli --cluster create``
(``$BG_REDIS_CLI``) joins them. Every node is stopped by its pid and the scratch directory is
removed. Standard library only; RESP through ``redis_helpers.Resp``.

    with RedisCluster() as c:
        i = c.owner(c.slot("{bf}:config"))
        c.migrate_begin(slot, to) ... c.migrate_end(slot, to)

Replica assignment is shuffled by ``--cluster create``: read ``c.nodes[i].is_master`` /
``.master`` (refreshed after every topology change), never assume. Failures raise ClusterError.
"""
from __future__ import annotations

import atexit
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Union

from redis_helpers import Resp, RespError
from server_proc import (cli_bin, die_with_parent, kill_proc, log_tail, pick_ports, server_bin, spawn,
                         start_retrying, stop_procs, wait_ping)

N_NODES = 6
# a NOREPLICAS answer (Valkey >= 8, see RedisCluster._ok) is met again at most this many times
NOREPLICAS_TRIES = 8
N_SLOTS = 16384
BUS_OFFSET = 10000
PORT_LO, PORT_HI = 20000, 29999


class ClusterError(RuntimeError):
    """The cluster could not be started, or did not reach the state asked for in time."""


@dataclass
class ClusterNode:
    port: int
    proc: Optional[subprocess.Popen] = None
    id: str = ""
    is_master: bool = False
    master: int = -1  # index of its master, -1 for a master

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc is not None else 0

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def _crc16(data: bytes) -> int:
    """CRC16-CCITT (XMODEM), the cluster's key hash (cluster spec, appendix A)."""
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


def key_slot(key: Union[str, bytes]) -> int:
    """The key's hash slot, with the {tag} rule (the first '{' and the next '}', if not empty)."""
    k = key.encode() if isinstance(key, str) else key
    s = k.find(b"{")
    if s >= 0:
        e = k.find(b"}", s + 1)
        if e > s + 1:
            k = k[s + 1:e]
    return _crc16(k) % N_SLOTS


class RedisCluster:
    """Six redis-server processes of our own, in cluster mode, on 127.0.0.1 only."""

    def __init__(self, extra_args: Sequence[str] = ()) -> None:
        """extra_args: more redis-server arguments for every node (e.g. --loadmodule)."""
        self.extra_args = list(extra_args)
        self.server = server_bin()
        self.cli = cli_bin()
        if not self.server or not self.cli:
            raise ClusterError("redis-server and redis-cli not found: install them (Debian: apt-get install "
                               "redis-server) or set BG_REDIS_SERVER / BG_REDIS_CLI")
        self.dir = ""
        self.nodes: List[ClusterNode] = []
        self.noreplicas = 0   # NOREPLICAS answers waited out or coped with (see _ok)

    # ---- start / stop ---------------------------------------------------------------------

    @property
    def url(self) -> str:
        return "redis://127.0.0.1:%d" % self.nodes[0].port

    @property
    def seeds(self) -> str:
        return "redis://" + ",".join("127.0.0.1:%d" % n.port for n in self.nodes)

    def __enter__(self) -> "RedisCluster":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> "RedisCluster":
        self.dir = tempfile.mkdtemp(prefix="bgpy-cluster-")
        atexit.register(self.stop)
        last = start_retrying(self._try_start, self._stop_nodes, self.dir, ClusterError)
        if last is None:
            return self
        self.stop()
        raise ClusterError("could not start a 6-node cluster: " + last)

    def _pick_ports(self) -> List[int]:
        return pick_ports(N_NODES, PORT_LO, PORT_HI, BUS_OFFSET, error=ClusterError)

    def _spawn(self, node: ClusterNode) -> None:
        d = os.path.join(self.dir, str(node.port))
        os.makedirs(d, exist_ok=True)
        args = [self.server, "--port", str(node.port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
                "--cluster-config-file", os.path.join(d, "nodes.conf"), "--cluster-node-timeout", "2000",
                "--repl-diskless-sync-delay", "0", "--save", "", "--appendonly", "no", "--dir", d,
                "--logfile", os.path.join(d, "log"), "--daemonize", "no"] + self.extra_args
        node.proc = spawn(args)

    def _wait_ping(self, i: int, timeout: float = 10.0) -> None:
        node = self.nodes[i]
        if node.proc is None or not wait_ping(node.proc, node.port, timeout):
            raise ClusterError("node on port %d did not start (port taken?): %s" % (node.port, self._log_tail(i)))

    def _log_tail(self, i: int) -> str:
        return log_tail(os.path.join(self.dir, str(self.nodes[i].port), "log"))

    def _run_cli(self, args: Sequence[str], timeout: float) -> None:
        try:
            p = subprocess.run([self.cli, *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=timeout, preexec_fn=die_with_parent)
        except subprocess.TimeoutExpired as e:
            raise ClusterError("redis-cli %s did not finish in %ss" % (" ".join(args[:2]), timeout)) from e
        if p.returncode != 0:
            raise ClusterError("redis-cli %s failed (%d): %s" % (" ".join(args[:2]), p.returncode,
                                                                p.stdout.decode(errors="replace")[-1500:]))

    def _try_start(self) -> None:
        self.nodes = [ClusterNode(port=p) for p in self._pick_ports()]
        for n in self.nodes:
            self._spawn(n)
        for i in range(N_NODES):
            self._wait_ping(i)
        self._run_cli(["--cluster", "create", *("127.0.0.1:%d" % n.port for n in self.nodes),
                       "--cluster-replicas", "1", "--cluster-yes"], timeout=30)
        self.wait_ok(20)
        self.refresh()

    def _stop_nodes(self) -> None:
        stop_procs(n.proc for n in self.nodes)
        for n in self.nodes:
            n.proc = None

    def stop(self) -> None:
        """Stops every node by its pid and removes the directory. Idempotent."""
        self._stop_nodes()
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = ""
        atexit.unregister(self.stop)

    # ---- looking ---------------------------------------------------------------------------

    def resp(self, i: int, timeout: float = 5.0) -> Resp:
        """A raw RESP connection to node i (for ASKING + command on one connection)."""
        return Resp("127.0.0.1", self.nodes[i].port, timeout=timeout)

    def cmd(self, i: int, *args: Any) -> Any:
        """One command on a fresh connection to node i. An error reply is *returned* as a RespError
        (str(e) is e.g. "MOVED 866 127.0.0.1:20001"); a node that cannot be reached raises OSError."""
        with self.resp(i) as r:
            try:
                return r(*args)
            except RespError as e:
                return e

    slot = staticmethod(key_slot)

    def _live(self, i: int) -> bool:
        return 0 <= i < len(self.nodes) and self.nodes[i].alive

    def _index(self, port: int) -> int:
        for i, n in enumerate(self.nodes):
            if n.port == port:
                return i
        return -1

    def _slots(self) -> list:
        for i in range(len(self.nodes)):
            if self._live(i):
                rep = self.cmd(i, "CLUSTER", "SLOTS")
                if isinstance(rep, list):
                    return rep
        raise ClusterError("no live node answered CLUSTER SLOTS")

    def owner(self, slot: int) -> int:
        """Index of the node that owns slot (CLUSTER SLOTS of a live node), -1 if none."""
        for r in self._slots():
            if r[0] <= slot <= r[1]:
                return self._index(r[2][1])
        return -1

    def other_master(self, i: int) -> int:
        return next((j for j, n in enumerate(self.nodes) if j != i and n.alive and n.is_master), -1)

    def replica_of(self, master: int) -> int:
        return next((j for j, n in enumerate(self.nodes) if n.alive and not n.is_master and n.master == master), -1)

    def refresh(self) -> None:
        """Re-reads ids, roles and masters: one live node's CLUSTER NODES for everyone (the dead
        nodes), then each live node's own "myself" line (another node's view may lag by gossip)."""
        masters = {i: (self.nodes[n.master].id if n.master >= 0 else "") for i, n in enumerate(self.nodes)}
        have_view = False
        for only_myself in (False, True):
            for i in range(len(self.nodes)):
                if not self._live(i) or (not only_myself and have_view):
                    continue
                text = self.cmd(i, "CLUSTER", "NODES")
                if isinstance(text, RespError):
                    continue
                have_view = True
                for line in text.decode().splitlines():
                    f = line.split()
                    if len(f) < 8 or (only_myself and "myself" not in f[2]):
                        continue
                    j = self._index(int(f[1].split("@")[0].rsplit(":", 1)[1]))
                    if j < 0:
                        continue
                    self.nodes[j].id = f[0]
                    self.nodes[j].is_master = "master" in f[2].split(",")
                    masters[j] = "" if self.nodes[j].is_master else f[3]
        if not have_view:
            raise ClusterError("refresh: no live node answered CLUSTER NODES")
        ids = {n.id: j for j, n in enumerate(self.nodes)}
        for j, n in enumerate(self.nodes):
            n.master = -1 if n.is_master else ids.get(masters[j], -1)

    def _role_ok(self, i: int) -> bool:
        role = self.cmd(i, "ROLE")
        return isinstance(role, list) and (role[0] == b"master" or (role[0] == b"slave" and role[3] == b"connected"))

    def _roles_view(self, i: int) -> Union[str, List[Any]]:
        """Node i's view of the live nodes' roles ([(index, master index or -1)]), or the reason it
        is not usable (a live node missing or flagged fail). Nodes learn a replica's role by gossip,
        ~1 s after --cluster create; until then a master ignores its replica's CLUSTER FAILOVER."""
        text = self.cmd(i, "CLUSTER", "NODES")
        if isinstance(text, RespError):
            return "node %d: CLUSTER NODES: %s" % (i, text)
        ids, roles = {}, {}
        for line in text.decode().splitlines():
            f = line.split()
            if len(f) < 8:
                continue
            j = self._index(int(f[1].split("@")[0].rsplit(":", 1)[1]))
            ids[f[0]] = j
            if self._live(j):
                if "fail" in f[2]:
                    return "node %d flags live node %d %s" % (i, j, f[2])
                roles[j] = f[3] if "slave" in f[2].split(",") else "-"
        view = []
        for j in range(len(self.nodes)):
            if self._live(j):
                if j not in roles:
                    return "node %d does not list live node %d" % (i, j)
                view.append((j, -1 if roles[j] == "-" else ids.get(roles[j], -2)))
        return view

    def _agreed(self) -> str:
        """'' if every live node is ok and they agree on roles and one slot -> master map, else
        the reason. The replica lists in CLUSTER SLOTS are not compared: a replica is left out
        while its gossiped replication offset is 0, up to 10 s on an idle new cluster."""
        first = first_roles = None
        for i, n in enumerate(self.nodes):
            if not n.alive:
                continue
            info = self.cmd(i, "CLUSTER", "INFO")
            if isinstance(info, RespError) or b"cluster_state:ok" not in info:
                return "node %d (port %d) is not cluster_state:ok" % (i, n.port)
            roles = self._roles_view(i)
            if isinstance(roles, str):
                return roles
            if first_roles is None:
                first_roles = roles
            elif roles != first_roles:
                return "nodes disagree on roles: %s vs node %d %s" % (first_roles, i, roles)
            slots = self.cmd(i, "CLUSTER", "SLOTS")
            if not isinstance(slots, list):
                return "node %d: CLUSTER SLOTS answered %s" % (i, slots)
            covered, canon = 0, []
            for r in sorted(slots, key=lambda r: r[0]):
                for node in r[2:]:
                    if not self._live(self._index(node[1])):
                        return "node %d lists a dead node (port %d) for slots %d-%d" % (i, node[1], r[0], r[1])
                covered += r[1] - r[0] + 1
                canon.append((r[0], r[1], r[2][1]))
            if covered != N_SLOTS:
                return "node %d: CLUSTER SLOTS covers %d of %d slots" % (i, covered, N_SLOTS)
            if first is None:
                first = canon
            elif canon != first:
                return "nodes disagree on CLUSTER SLOTS: %s vs node %d %s" % (first, i, canon)
        if first is None:
            return "no live node"
        for i, n in enumerate(self.nodes):
            if n.alive and not self._role_ok(i):
                return "node %d (port %d): ROLE is neither master nor a connected replica" % (i, n.port)
        return ""

    def wait_ok(self, timeout: float = 20.0) -> None:
        """Waits until every live node says cluster_state:ok, all agree on who is a replica of whom
        (CLUSTER NODES, no live node flagged fail) and give the same slot -> master map covering
        all slots with live masters and listing no dead node, and every live replica's link is up.
        Raises ClusterError with the last reason otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                why = self._agreed()
            except OSError as e:  # a node went away between the checks
                why = "connection: %s" % e
            if not why:
                return
            if time.monotonic() >= deadline:
                raise ClusterError("not ok after %ss: %s" % (timeout, why))
            time.sleep(0.05)

    # ---- topology changes ------------------------------------------------------------------

    def _ok(self, i: int, *args: Any) -> None:
        """A command that must answer OK. NOREPLICAS is waited out (NOREPLICAS_TRIES): Valkey >= 8
        replicates CLUSTER SETSLOT to the shard's replicas first and answers NOREPLICAS, having done
        nothing, when one has not acknowledged it within 2 s (stalled, busy, re-syncing)."""
        for _ in range(NOREPLICAS_TRIES):
            rep = self.cmd(i, *args)
            if not (isinstance(rep, RespError) and str(rep).startswith("NOREPLICAS")):
                break
            self.noreplicas += 1
        if rep != "OK":
            raise ClusterError("%s on node %d (port %d): %s" % (" ".join(map(str, args)), i, self.nodes[i].port, rep))

    def _need_live(self, i: int, what: str) -> None:
        if not self._live(i):
            raise ClusterError("%s: node %d is not a live node" % (what, i))

    def migrate_begin(self, slot: int, to: int) -> None:
        """IMPORTING on to, then MIGRATING on the owner."""
        src = self.owner(slot)
        self._need_live(to, "migrate_begin")
        self._need_live(src, "migrate_begin (owner)")
        if src == to:
            raise ClusterError("migrate_begin: node %d already owns slot %d" % (to, slot))
        self._ok(to, "CLUSTER", "SETSLOT", slot, "IMPORTING", self.nodes[src].id)
        self._ok(src, "CLUSTER", "SETSLOT", slot, "MIGRATING", self.nodes[to].id)

    def _migrate(self, src: int, to: int, keys: Sequence[Union[str, bytes]]) -> None:
        rep = self.cmd(src, "MIGRATE", "127.0.0.1", self.nodes[to].port, "", 0, 5000, "KEYS", *keys)
        if rep not in ("OK", "NOKEY"):
            raise ClusterError("MIGRATE from node %d to node %d: %s" % (src, to, rep))

    def migrate_key(self, slot: int, to: int, key: Union[str, bytes]) -> None:
        """MIGRATE one key (binary-safe; NOKEY is fine)."""
        src = self.owner(slot)
        self._need_live(src, "migrate_key (owner)")
        self._migrate(src, to, [key])

    def migrate_all_keys(self, slot: int, to: int) -> None:
        src = self.owner(slot)
        self._need_live(src, "migrate_all_keys (owner)")
        for _ in range(100000):  # 100 keys a round
            keys = self.cmd(src, "CLUSTER", "GETKEYSINSLOT", slot, 100)
            if not isinstance(keys, list):
                raise ClusterError("GETKEYSINSLOT %d on node %d: %s" % (slot, src, keys))
            if not keys:
                return
            self._migrate(src, to, keys)
        raise ClusterError("slot %d never emptied" % slot)

    def migrate_end(self, slot: int, to: int) -> None:
        """SETSLOT NODE on to, then the source, then the other masters; waits for one map."""
        src = self.owner(slot)
        self._need_live(to, "migrate_end")
        self._ok(to, "CLUSTER", "SETSLOT", slot, "NODE", self.nodes[to].id)
        if src != to and self._live(src):
            self._ok(src, "CLUSTER", "SETSLOT", slot, "NODE", self.nodes[to].id)
        for i, n in enumerate(self.nodes):  # replicas refuse SETSLOT and follow their masters
            if i not in (to, src) and n.alive and n.is_master:
                self._ok(i, "CLUSTER", "SETSLOT", slot, "NODE", self.nodes[to].id)
        self.wait_ok(10)

    def move_slot(self, slot: int, to: int) -> None:
        self.migrate_begin(slot, to)
        self.migrate_all_keys(slot, to)
        self.migrate_end(slot, to)

    def slot_count(self, i: int) -> int:
        """Slots the map (CLUSTER SLOTS of a live node) gives node i."""
        return sum(r[1] - r[0] + 1 for r in self._slots() if self._index(r[2][1]) == i)

    def reshard(self, src: int, to: int, nslots: int) -> None:
        """redis-cli --cluster reshard ... --cluster-yes, then one map and a refresh. redis-cli 7 gives
        up on NOREPLICAS (see _ok): the slot it was moving is closed (_fix_open_slots) and the slots
        still to move are moved by another run."""
        self._need_live(src, "reshard")
        self._need_live(to, "reshard")
        had = self.slot_count(to)
        for tries in range(NOREPLICAS_TRIES):
            left = nslots - (self.slot_count(to) - had)
            if left <= 0:
                break
            try:
                self._run_cli(["--cluster", "reshard", "127.0.0.1:%d" % self.nodes[src].port,
                               "--cluster-from", self.nodes[src].id, "--cluster-to", self.nodes[to].id,
                               "--cluster-slots", str(left), "--cluster-yes"], timeout=60)
                break
            except ClusterError as e:
                if "NOREPLICAS" not in str(e) or tries == NOREPLICAS_TRIES - 1:
                    raise
                self.noreplicas += 1
                self._fix_open_slots(src)
        self.wait_ok(10)
        self.refresh()

    def _fix_open_slots(self, i: int) -> None:
        """redis-cli --cluster fix closes the open slot on the masters; Valkey >= 8 also replicated its
        IMPORTING / MIGRATING state to the replicas, which fix does not look at: SETSLOT NODE <owner> on
        a replica's master closes it there."""
        for tries in range(NOREPLICAS_TRIES):
            try:
                self._run_cli(["--cluster", "fix", "127.0.0.1:%d" % self.nodes[i].port, "--cluster-yes"],
                              timeout=60)
                break
            except ClusterError as e:
                if "NOREPLICAS" not in str(e) or tries == NOREPLICAS_TRIES - 1:
                    raise
                self.noreplicas += 1
        for j, n in enumerate(self.nodes):
            if not n.alive or n.is_master or n.master < 0:
                continue
            text = self.cmd(j, "CLUSTER", "NODES")
            mine = next((line for line in text.decode().splitlines() if "myself" in line), "")
            for slot in re.findall(r"\[(\d+)-[<>]-", mine):
                owner = self.owner(int(slot))
                self._ok(n.master, "CLUSTER", "SETSLOT", int(slot), "NODE", self.nodes[owner].id)
        self.wait_ok(10)

    def failover(self, replica: int) -> None:
        """CLUSTER FAILOVER on the replica; waits until it is master and the map agrees."""
        self._need_live(replica, "failover")
        role = self.cmd(replica, "ROLE")
        if not (isinstance(role, list) and role[0] == b"slave" and role[3] == b"connected"):
            raise ClusterError("failover: node %d is not a connected replica" % replica)
        self._ok(replica, "CLUSTER", "FAILOVER")
        deadline = time.monotonic() + 15
        while self.cmd(replica, "ROLE")[0] != b"master":
            if time.monotonic() >= deadline:
                raise ClusterError("failover: node %d did not become master within 15 s" % replica)
            time.sleep(0.01)
        self.wait_ok(20)
        self.refresh()

    def kill(self, i: int) -> None:
        """kill -9 and reap; the node keeps its port and directory for restart."""
        n = self.nodes[i]
        proc, n.proc = n.proc, None
        kill_proc(proc)

    def restart(self, i: int) -> None:
        """Starts the node again on its port with its nodes.conf; waits until the cluster is ok
        with it back (a replica with its link up); refreshes."""
        if self._live(i):
            raise ClusterError("restart: node %d is running" % i)
        for attempt in range(5):  # the port may be held for a moment after kill -9
            self._spawn(self.nodes[i])
            try:
                self._wait_ping(i)
                break
            except ClusterError:
                self.kill(i)
                if attempt == 4:
                    raise
                time.sleep(0.2)
        self.wait_ok(20)
        self.refresh()
