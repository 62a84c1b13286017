"""A real Redis Sentinel deployment for the tests: 1 master + 1 replica + 3 sentinels, and its faults.

The Python twin of tests/c/sentinel_fixture.h: ``RedisSentinelSet`` starts two data nodes
(``$BG_REDIS_SERVER`` or the ``redis-server`` on PATH; node 1 a replica of node 0) and three
sentinels (``redis-server FILE --sentinel``, each with its own writable config file, which Sentinel
rewrites) monitoring them as "bgmaster", on random free loopback ports below the kernel's ephemeral
range (bind-tested; a port lost before the server binds it makes the start retry with new ports).
Every process is stopped by its pid, dies with the test process (PR_SET_PDEATHSIG), and the
scratch directory is removed. Standard library only; RESP through ``redis_helpers.Resp``.

    with RedisSentinelSet(data_password="pw", sentinel_password="spw") as s:
        m = s.master()                 # 0 at first; roles change on failover
        s.kill_data(m)
        s.wait_master(1 - m, 20)
        s.restart_data(m)              # back as a replica of the new master

down-after-milliseconds is 2000, not 1000: with 1000 a second failover in one set was followed by
a spurious third one (see DOWN_AFTER_MS in tests/c/sentinel_fixture.c). Failures raise SentinelError.
"""
from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
import time
import urllib.parse
from typing import Any, List, Optional

from redis_helpers import Resp, RespError
from server_proc import kill_proc, log_tail, pick_ports, server_bin, spawn, start_retrying, stop_procs

MASTER_NAME = "bgmaster"
DOWN_AFTER_MS = 2000
N_DATA, N_SENTINELS = 2, 3
PORT_LO, PORT_HI = 20000, 32767


class SentinelError(RuntimeError):
    """The set could not be started, or did not reach the state asked for in time."""


def _quote(v: str) -> str:
    """A config-file string in double quotes (sdssplitargs rules)."""
    out = []
    for ch in v:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 32 or ord(ch) == 127:
            out.append("\\x%02x" % ord(ch))
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _rewrite_safe(v: str) -> bool:
    """Sentinel 7.0 rewrites `sentinel auth-pass` unquoted: the value must read back as one token."""
    return bool(v) and not any(ord(ch) <= 32 or ch in "\"'\\" or ord(ch) == 127 for ch in v)


def _fields(flat: Any) -> dict:
    """A flat [k1, v1, k2, v2, ...] reply (SENTINEL MASTER / REPLICAS entries) as a dict of str."""
    if not isinstance(flat, list):
        return {}
    return {flat[i].decode(): flat[i + 1].decode() for i in range(0, len(flat) - 1, 2)
            if isinstance(flat[i], bytes) and isinstance(flat[i + 1], bytes)}


def _healthy(flags: Optional[str]) -> bool:
    return flags is not None and not any(f in flags for f in ("s_down", "o_down", "disconnected"))


class RedisSentinelSet:
    """Two redis-server data nodes and three sentinels of our own, on 127.0.0.1 only."""

    def __init__(self, data_password: Optional[str] = None, sentinel_password: Optional[str] = None) -> None:
        self.server = server_bin()
        if not self.server:
            raise SentinelError("redis-server not found: install it (Debian: apt-get install redis-server) "
                                "or set BG_REDIS_SERVER")
        if data_password is not None and not _rewrite_safe(data_password):
            raise SentinelError("data_password must not contain spaces, quotes, backslashes or control characters: "
                                "Redis 7.0 Sentinel rewrites `sentinel auth-pass` unquoted into its config file")
        self.data_password = data_password
        self.sentinel_password = sentinel_password
        self.master_name = MASTER_NAME
        self.dir = ""
        self.data_ports: List[int] = [0] * N_DATA
        self.sentinel_ports: List[int] = [0] * N_SENTINELS
        self.data_procs: List[Optional[subprocess.Popen]] = [None] * N_DATA
        self.sentinel_procs: List[Optional[subprocess.Popen]] = [None] * N_SENTINELS

    # ---- start / stop ---------------------------------------------------------------------

    @property
    def url(self) -> str:
        """redis-sentinel://[:data_password@]127.0.0.1:S0,...#bgmaster (Lettuce's form, as the library
        reads it: the userinfo is the data nodes'; the sentinels' password is the client's
        sentinel_password option)."""
        auth = ":%s@" % urllib.parse.quote(self.data_password, safe="") if self.data_password else ""
        return "redis-sentinel://%s%s#%s" % (auth, ",".join("127.0.0.1:%d" % p for p in self.sentinel_ports),
                                             MASTER_NAME)

    @property
    def data_pids(self) -> List[int]:
        """0 while killed."""
        return [p.pid if p is not None and p.poll() is None else 0 for p in self.data_procs]

    @property
    def sentinel_pids(self) -> List[int]:
        return [p.pid if p is not None and p.poll() is None else 0 for p in self.sentinel_procs]

    def __enter__(self) -> "RedisSentinelSet":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> "RedisSentinelSet":
        """Starts the five processes; waits until all 3 sentinels report the master, its replica
        (no s_down) and the other 2 sentinels, and the replica's link is up (~2-3 s)."""
        self.dir = tempfile.mkdtemp(prefix="bgpy-sentinel-")
        atexit.register(self.stop)
        last = start_retrying(self._try_start, self._stop_all, self.dir, SentinelError)
        if last is None:
            return self
        self.stop()
        raise SentinelError("could not start 2 data nodes + 3 sentinels: " + last)

    def _pick_ports(self) -> List[int]:
        return pick_ports(N_DATA + N_SENTINELS, PORT_LO, PORT_HI, error=SentinelError)

    def _spawn_data(self, i: int, replica_of: int = 0) -> None:
        d = os.path.join(self.dir, "data%d" % i)
        os.makedirs(d, exist_ok=True)
        args = [self.server, "--port", str(self.data_ports[i]), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--repl-diskless-sync-delay", "0", "--dir", d,
                "--logfile", os.path.join(d, "log"), "--daemonize", "no"]
        if self.data_password is not None:
            args += ["--requirepass", self.data_password, "--masterauth", self.data_password]
        if replica_of:
            args += ["--replicaof", "127.0.0.1", str(replica_of)]
        self.data_procs[i] = spawn(args)

    def _conf(self, i: int) -> str:
        return os.path.join(self.dir, "sentinel%d" % i, "sentinel.conf")

    def _write_conf(self, i: int) -> None:
        d = os.path.join(self.dir, "sentinel%d" % i)
        os.makedirs(d, exist_ok=True)
        lines = ["port %d" % self.sentinel_ports[i], "bind 127.0.0.1", "daemonize no", "dir " + _quote(d),
                 'logfile "log"', "sentinel resolve-hostnames no"]
        if self.sentinel_password is not None:
            lines.append("requirepass " + _quote(self.sentinel_password))
        lines += ["sentinel monitor %s 127.0.0.1 %d 2" % (MASTER_NAME, self.data_ports[0]),
                  "sentinel down-after-milliseconds %s %d" % (MASTER_NAME, DOWN_AFTER_MS),
                  "sentinel failover-timeout %s 5000" % MASTER_NAME]
        if self.data_password is not None:
            lines.append("sentinel auth-pass %s %s" % (MASTER_NAME, _quote(self.data_password)))
        fd = os.open(self._conf(i), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # it holds the passwords
        with os.fdopen(fd, "w") as fh:
            fh.write("\n".join(lines) + "\n")

    def _spawn_sentinel(self, i: int) -> None:
        self.sentinel_procs[i] = spawn([self.server, self._conf(i), "--sentinel"])

    def _log_tail(self, name: str) -> str:
        return log_tail(os.path.join(self.dir, name, "log"))

    def _wait_own(self, proc: Optional[subprocess.Popen], port: int, pw: Optional[str], what: str,
                  timeout: float = 10.0) -> None:
        """Until proc answers on port as itself (INFO server's process_id), so that a port someone
        else took between the bind test and our bind is never mistaken for ours."""
        deadline = time.monotonic() + timeout
        want = b"process_id:%d\r" % proc.pid if proc else b"-"
        while time.monotonic() < deadline and proc is not None and proc.poll() is None:
            try:
                if want in self._cmd(port, pw, "INFO", "server"):
                    return
            except (OSError, RespError, TypeError):
                pass
            time.sleep(0.02)
        raise SentinelError("%s (port %d) did not start (port taken?): %s" % (what, port, self._log_tail(what.replace(" ", ""))))

    def _try_start(self) -> None:
        ports = self._pick_ports()
        self.data_ports, self.sentinel_ports = ports[:N_DATA], ports[N_DATA:]
        # the replica's link up before any sentinel looks: a sentinel learns the replicas from the
        # master's INFO, asked at connect and then only every 10 s
        for i in range(N_DATA):  # the replica after the master answers: else its first connect
            # fails and it retries only a second later
            self._spawn_data(i, self.data_ports[0] if i else 0)
            self._wait_own(self.data_procs[i], self.data_ports[i], self.data_password, "data %d" % i)
        self._wait(lambda: self._link_up(1, 0), 10, "start (replica link)")
        for i in range(N_SENTINELS):
            self._write_conf(i)
            self._spawn_sentinel(i)
        for i in range(N_SENTINELS):
            self._wait_own(self.sentinel_procs[i], self.sentinel_ports[i], self.sentinel_password, "sentinel %d" % i)
        self._wait(lambda: self._settled(None), 15, "start")

    def _stop_all(self) -> None:
        stop_procs(self.sentinel_procs + self.data_procs)
        self.data_procs = [None] * N_DATA
        self.sentinel_procs = [None] * N_SENTINELS

    def stop(self) -> None:
        """Stops every process by its pid and removes the directory. Idempotent."""
        self._stop_all()
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = ""
        atexit.unregister(self.stop)

    # ---- looking ---------------------------------------------------------------------------

    @staticmethod
    def _cmd(port: int, pw: Optional[str], *args: Any) -> Any:
        with Resp("127.0.0.1", port, timeout=5) as r:
            if pw is not None:
                r("AUTH", pw)
            return r(*args)

    def data_resp(self, i: int, timeout: float = 5.0) -> Resp:
        """A raw RESP connection to data node i, AUTHed if the set has a data password."""
        r = Resp("127.0.0.1", self.data_ports[i], timeout=timeout)
        if self.data_password is not None:
            r("AUTH", self.data_password)
        return r

    def sentinel_resp(self, i: int, timeout: float = 5.0) -> Resp:
        """A raw RESP connection to sentinel i, AUTHed if the set has a sentinel password."""
        r = Resp("127.0.0.1", self.sentinel_ports[i], timeout=timeout)
        if self.sentinel_password is not None:
            r("AUTH", self.sentinel_password)
        return r

    def data_cmd(self, i: int, *args: Any) -> Any:
        """One command on a fresh (AUTHed) connection to data node i. An error reply is *returned*
        as a RespError; a node that cannot be reached raises OSError."""
        try:
            return self._cmd(self.data_ports[i], self.data_password, *args)
        except RespError as e:
            return e

    def sentinel_cmd(self, i: int, *args: Any) -> Any:
        """The same on sentinel i."""
        try:
            return self._cmd(self.sentinel_ports[i], self.sentinel_password, *args)
        except RespError as e:
            return e

    def _data_live(self, i: int) -> bool:
        return self.data_pids[i] > 0

    def _sentinel_live(self, i: int) -> bool:
        return self.sentinel_pids[i] > 0

    def _names(self, i: int) -> int:
        """The data node sentinel i names as master, -1 if none or not ours."""
        try:
            rep = self.sentinel_cmd(i, "SENTINEL", "get-master-addr-by-name", MASTER_NAME)
        except OSError:
            return -1
        if isinstance(rep, list) and len(rep) == 2:
            port = int(rep[1])
            return self.data_ports.index(port) if port in self.data_ports else -1
        return -1

    def master(self) -> int:
        """Index (0/1) of the data node the sentinels call master now (get-master-addr-by-name on
        the first live sentinel that answers), -1 on failure."""
        for i in range(N_SENTINELS):
            if self._sentinel_live(i):
                m = self._names(i)
                if m >= 0:
                    return m
        return -1

    def _role(self, i: int) -> Any:
        try:
            return self.data_cmd(i, "ROLE")
        except OSError:
            return None

    def _link_up(self, i: int, m: int) -> str:
        try:
            info = self.data_cmd(i, "INFO", "replication")
        except OSError as e:
            return "data node %d: %s" % (i, e)
        if isinstance(info, bytes) and b"master_link_status:up" in info and \
                (b"master_port:%d\r" % self.data_ports[m]) in info:
            return ""
        return "data node %d: no link up to data node %d yet" % (i, m)

    def _sentinel_ready(self, i: int, m: int) -> str:
        """'' if sentinel i reports data node m as master, every live other data node as a
        healthy replica and the other 2 sentinels (the live ones healthy); else the reason."""
        try:
            mi = _fields(self.sentinel_cmd(i, "SENTINEL", "master", MASTER_NAME))
            replicas = self.sentinel_cmd(i, "SENTINEL", "replicas", MASTER_NAME)
            sentinels = self.sentinel_cmd(i, "SENTINEL", "sentinels", MASTER_NAME)
        except OSError as e:
            return "sentinel %d: %s" % (i, e)
        if mi.get("port") != str(self.data_ports[m]) or mi.get("flags") != "master":
            return "sentinel %d: master is port %s (%s), not data node %d" % (i, mi.get("port"), mi.get("flags"), m)
        if mi.get("num-other-sentinels") != str(N_SENTINELS - 1):
            return "sentinel %d: num-other-sentinels %s" % (i, mi.get("num-other-sentinels"))
        for j in range(N_DATA):
            if j != m and self._data_live(j) and not any(
                    f.get("port") == str(self.data_ports[j]) and _healthy(f.get("flags"))
                    for f in map(_fields, replicas if isinstance(replicas, list) else [])):
                return "sentinel %d: does not list data node %d as a healthy replica" % (i, j)
        for j in range(N_SENTINELS):
            if j != i and self._sentinel_live(j) and not any(
                    f.get("port") == str(self.sentinel_ports[j]) and _healthy(f.get("flags"))
                    for f in map(_fields, sentinels if isinstance(sentinels, list) else [])):
                return "sentinel %d: does not see sentinel %d up" % (i, j)
        return ""

    def _settled(self, only: Optional[int]) -> str:
        masters = [i for i in range(N_DATA) if self._data_live(i) and
                   isinstance(self._role(i), list) and self._role(i)[0] == b"master"]
        if len(masters) != 1:
            return "no single live data node says ROLE master"
        m = masters[0]
        for j in range(N_DATA):
            if j != m and self._data_live(j):
                why = self._link_up(j, m)
                if why:
                    return why
        for i in range(N_SENTINELS):
            if only is not None and i != only:
                continue
            if not self._sentinel_live(i):
                if i == only:
                    return "sentinel %d exited" % i
                continue
            why = self._sentinel_ready(i, m)
            if why:
                return why
        return ""

    def _wait(self, check: Any, timeout: float, what: str, period: float = 0.05) -> None:
        deadline = time.monotonic() + timeout
        while True:
            why = check()
            if not why:
                return
            if time.monotonic() >= deadline:
                raise SentinelError("%s: not after %ss: %s" % (what, timeout, why))
            time.sleep(period)

    def wait_master(self, node: int, timeout: float = 20.0) -> None:
        """Until every live sentinel names data node `node` as master and its ROLE says master."""
        if not 0 <= node < N_DATA:
            raise SentinelError("wait_master: no data node %d" % node)

        def check() -> str:
            live = [i for i in range(N_SENTINELS) if self._sentinel_live(i)]
            if not live:
                return "no live sentinel"
            for i in live:
                if self._names(i) != node:
                    return "sentinel %d names data node %d" % (i, self._names(i))
            role = self._role(node) if self._data_live(node) else None
            if not (isinstance(role, list) and role[0] == b"master"):
                return "data node %d: ROLE is not master" % node
            return ""
        self._wait(check, timeout, "wait_master %d" % node, 0.02)

    # ---- faults ----------------------------------------------------------------------------

    @staticmethod
    def _kill(proc: Optional[subprocess.Popen]) -> None:
        kill_proc(proc)

    def kill_data(self, i: int) -> None:
        """kill -9 and reap; the node keeps its port."""
        self._kill(self.data_procs[i])
        self.data_procs[i] = None

    def kill_sentinel(self, i: int) -> None:
        """kill -9 and reap; the sentinel keeps its port and its (rewritten) config file."""
        self._kill(self.sentinel_procs[i])
        self.sentinel_procs[i] = None

    def _respawn(self, spawn: Any, procs: list, i: int, port: int, pw: Optional[str], what: str) -> None:
        for attempt in range(5):  # the port may be held for a moment after kill -9
            spawn()
            try:
                self._wait_own(procs[i], port, pw, what)
                return
            except SentinelError:
                self._kill(procs[i])
                procs[i] = None
                if attempt == 4:
                    raise
                time.sleep(0.2)

    def restart_data(self, i: int) -> None:
        """Starts data node i again on its port, as a replica of the master the sentinels name now
        (or as master if they still name it); waits until its link is up and every live sentinel
        lists it healthy."""
        if not 0 <= i < N_DATA or self._data_live(i):
            raise SentinelError("restart_data: data node %d is not a killed node" % i)
        m = self.master()
        if m < 0:
            raise SentinelError("restart_data: no live sentinel names one of our data nodes as master")
        self._respawn(lambda: self._spawn_data(i, 0 if m == i else self.data_ports[m]), self.data_procs, i,
                      self.data_ports[i], self.data_password, "data %d" % i)
        if m != i:
            self._wait(lambda: self._link_up(i, m), 15, "restart_data (link)")
        self._wait(lambda: self._settled(None), 15, "restart_data")

    def restart_sentinel(self, i: int) -> None:
        """Starts sentinel i again with its config file; waits until it reports the current
        master, its replica and the other 2 sentinels."""
        if not 0 <= i < N_SENTINELS or self._sentinel_live(i):
            raise SentinelError("restart_sentinel: sentinel %d is not a killed one" % i)
        self._respawn(lambda: self._spawn_sentinel(i), self.sentinel_procs, i, self.sentinel_ports[i],
                      self.sentinel_password, "sentinel %d" % i)
        self._wait(lambda: self._settled(i), 15, "restart_sentinel")
