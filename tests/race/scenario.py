"""One race: readers and adders in every language run while rotators in each language in turn
rotate one filter on one redis-server (or a Redis Cluster whose slot for the filter migrates
meanwhile: cluster_race.py); then the final filter is compared with a reference.

The files shared by the workers (all in the scenario's own directory):
  items.txt  base items: in the filter before the race and in every generation;
  db.txt     the "database": base items, then every item an adder is about to add (written
             BEFORE the add; rotators read it after their rotation began, as rotation.h asks);
  added.txt  items whose add returned OK (written AFTER the add; readers query them from then on).
Workers stop when the stop file appears (each also has a time cap).
"""
from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import bloomguard

from redis_helpers import RedisServer
from reference import bit_differences, first_difference, reference_bitmap
from workers import WRITERS, fault_command

#: pauses between two operations, in microseconds: enough readers' traffic to land inside every
#: rotation, without starving the rotators on a 2-core machine shared with builds
QUERY_PAUSE_US = {"c": 500, "c1": 500, "cfault": 500, "go": 500, "python": 0, "pyaio": 0, "java": 500, "jbg": 500}
ADD_PAUSE_US = 5000
ADD_CAP = 3000
#: caps for a worker that never sees the stop file, and for waiting on workers
WORKER_CAP_S = 240
#: the rotations of one scenario stop starting after this long (a bound on the suite's time on
#: a machine busy with other work, not an assertion: the table then says the run was cut short)
ROTATION_BUDGET_S = 90
#: a rotator still running this long after its own --duration is hung: the harness fails
HANG_S = 60
READY_TIMEOUT_S = 90
EXIT_TIMEOUT_S = 60


#: a slot migrator still running this long after the last rotation (its last leg) is hung
MIGRATOR_FINISH_S = 60


class HarnessError(Exception):
    """A worker failed to run (not the library misbehaving: that is what the counts show)."""


class Standalone:
    """One redis-server as the race's server: every worker gets its URL; no migrations."""

    def __init__(self, server: RedisServer) -> None:
        self.server = server
        self.url = server.url

    def worker_url(self, lang: str) -> str:
        return self.url

    def get(self, key: str) -> bytes:
        with self.server.resp() as r:
            return r("GET", key) or b""

    def migrator(self, name: str, max_legs: int, min_legs: int, partitions: int = 0, moved: int = 0,
                 native: bool = False) -> Any:
        raise HarnessError("a standalone server has no slots to migrate")


@dataclass
class Scenario:
    strategy: str            # swap | locked | naive
    params: str              # same: every rotation to (n, p) as created; resize: alternating n
    expected: List[int]
    fpp: float = 0.01
    base_items: int = 3000
    rounds: int = 8          # each round runs one rotator process per writing language, in turn
    per_process: int = 10    # rotations per rotator process (even: the alternation stays in step)
    hold_ms: int = 3         # rotator's pause between reading the database and committing
    cluster: bool = False    # on a Redis Cluster, the filter's slot migrating back and forth
    max_legs: int = 0        # cluster: migrations (one way) at most, and at least
    min_legs: int = 0
    fault_reader: bool = False  # cluster control: one more C reader, "cfault", following ASK wrongly
    partitions: int = 0      # a partitioned filter of P partitions (0: Redisson's layout); no Redisson reader
    moved_partitions: int = 0  # partitioned: the partitions whose slots migrate (spread over 0..P-1)
    rotate: bool = True      # False: no rotator runs; the migrator's min_legs set the race's length
    native: bool = False     # the server's own BF.* filter (RedisBloom loaded); no Redisson reader

    @property
    def kind(self) -> str:
        """The filter's kind, as Client.filter takes it."""
        return "native" if self.native else "redisson"

    @property
    def name(self) -> str:
        if self.native:
            return ("cluster-native-%s" if self.cluster else "native-%s") % self.strategy
        if self.partitions:
            return "cluster-partitioned" + ("-fault" if self.fault_reader else "")
        if self.fault_reader:
            return "cluster-fault"
        return ("cluster-%s" % self.strategy) if self.cluster else "%s-%s" % (self.strategy, self.params)


@dataclass
class Worker:
    lang: str
    role: str
    proc: subprocess.Popen
    out: Path
    err: Path

    def tail(self, n: int = 2000) -> str:
        return self.err.read_text(errors="replace")[-n:] if self.err.exists() else ""

    def counts(self) -> Dict:
        if self.proc.returncode != 0:
            raise HarnessError("%s %s worker exited with %s: %s" % (self.lang, self.role, self.proc.returncode,
                                                                   self.tail()))
        lines = [ln for ln in self.out.read_text().splitlines() if ln.startswith("{")]
        if not lines:
            raise HarnessError("%s %s worker printed no counts: %s" % (self.lang, self.role, self.tail()))
        return json.loads(lines[-1])


@dataclass
class Outcome:
    scenario: Scenario
    counts: List[Dict] = field(default_factory=list)   # one per worker process
    planned_rotations: int = 0
    cut_short: bool = False   # the rotation budget ran out before every round was run
    last_expected: int = 0
    final_size: int = 0
    final_k: int = 0
    final_partitions: int = 0  # partitioned: the final filter's P (its bitmap is not compared)
    final_capacity: int = 0   # native: BF.INFO's capacity (its bits are the server's: not compared)
    bitmap_equal: Optional[bool] = None
    bitmap_diff: str = ""
    extra_bits: int = 0       # set in the live bitmap, in no item's indexes
    lost_bits: int = 0        # of the reference, not set in the live bitmap
    db_items: int = 0
    missing: int = 0          # db items the final filter says are absent
    seconds: float = 0.0
    legs: int = 0             # cluster: slot migrations done (one way)
    leg_seconds: List[float] = field(default_factory=list)

    def by_lang(self, role: Optional[str] = None) -> Dict[str, Dict[str, int]]:
        """language -> summed counts (of one role, or all)."""
        out: Dict[str, Dict[str, int]] = {}
        for c in self.counts:
            if role is not None and c["role"] != role:
                continue
            row = out.setdefault(c["lang"], {})
            for k, v in c.items():
                if isinstance(v, int) and k not in ("last_expected", "partitions"):
                    row[k] = row.get(k, 0) + v
        return out

    def first_errors(self) -> List[str]:
        return ["%s %s: %s" % (c["lang"], c["role"], c["first_error"]) for c in self.counts if c["first_error"]]


def race_languages(scenario: Scenario, langs: List[str]) -> List[str]:
    """The languages whose workers run: Redisson cannot read a partitioned filter (its contains
    answers false, as for any name without its config), nor a native one, so no Java reader there;
    nor does bloomguard's Java binding (no partitioned or native filters), so no jbg reader."""
    return [lang for lang in langs
            if not ((scenario.partitions or scenario.native) and lang in ("java", "jbg"))]


class Race:
    def __init__(self, scenario: Scenario, server: Any, commands: Dict[str, List[str]],
                 langs: List[str], workdir: Path) -> None:
        """server: a Standalone, or a cluster_race.ClusterTarget (url, worker_url(lang), get(key),
        migrator(name, max_legs, min_legs))."""
        self.s = scenario
        self.server = server
        self.commands = commands
        self.langs = race_languages(scenario, langs)
        self.writers = [lang for lang in WRITERS if lang in self.langs]
        self.dir = workdir
        self.filter = "race:%s:%d" % (scenario.name, os.getpid())
        self.items = workdir / "items.txt"
        self.db = workdir / "db.txt"
        self.added = workdir / "added.txt"
        self.stop = workdir / "stop"
        self.running: List[Worker] = []
        self.seq = 0

    # --- processes --------------------------------------------------------------------------

    def _spawn(self, lang: str, role: str, extra: List[str]) -> Worker:
        self.seq += 1
        tag = "%02d-%s-%s" % (self.seq, lang, role)
        out, err = self.dir / (tag + ".out"), self.dir / (tag + ".err")
        command = fault_command() if lang == "cfault" else self.commands[lang]
        args = command + [
            "--url", self.server.worker_url(lang), "--filter", self.filter, "--role", role, "--strategy", self.s.strategy,
            "--items", str(self.items), "--db", str(self.db), "--added", str(self.added),
            "--stop", str(self.stop)] + extra
        if self.s.native:
            args += ["--kind", "native"]
        if self.s.partitions:  # every worker tryInits the partitioned filter at start (README)
            args += ["--partitions", str(self.s.partitions)]
            if role != "rotate":  # a rotator has them already
                args += ["--expected", str(self.s.expected[0]), "--fpp", repr(self.s.fpp)]
        with open(out, "wb") as o, open(err, "wb") as e:
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=o, stderr=e)
        return Worker(lang, role, proc, out, err)

    def _kill_all(self) -> None:
        for w in self.running:
            if w.proc.poll() is None:
                w.proc.kill()  # our own child, by its pid
                w.proc.wait(timeout=10)

    # --- the race ---------------------------------------------------------------------------

    def run(self) -> Outcome:
        t0 = time.monotonic()
        out = Outcome(self.s)
        base = [b"base-%d" % i for i in range(self.s.base_items)]
        self.items.write_bytes(b"".join(i + b"\n" for i in base))
        self.db.write_bytes(self.items.read_bytes())
        self.added.write_bytes(b"")
        with bloomguard.Client(self.server.url, command_timeout=10) as client, \
                client.filter(self.filter, kind=self.s.kind) as f:
            f.init(self.s.expected[0], self.s.fpp, partitions=self.s.partitions)
            f.add_many(base)
        migrator = None
        try:
            self._start_background()
            if self.s.cluster:  # every worker is running: the slot starts moving
                migrator = self.server.migrator(self.filter, self.s.max_legs, self.s.min_legs,
                                                self.s.partitions, self.s.moved_partitions, self.s.native)
                migrator.start()
            if self.s.rotate:
                out.planned_rotations, out.last_expected = self._rotate_in_turn(out)
            else:  # the migrator's min_legs, under the readers' and adders' traffic, are the race
                out.last_expected = self.s.expected[0]
            if migrator is not None:
                migrator.finish(MIGRATOR_FINISH_S)  # its last leg (or the minimum) under traffic
                out.legs, out.leg_seconds = migrator.legs, migrator.seconds
            time.sleep(0.3)  # readers query the final generation too
            self.stop.touch()
            deadline = time.monotonic() + EXIT_TIMEOUT_S
            for w in self.running:
                try:
                    w.proc.wait(timeout=max(1.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    raise HarnessError("%s %s worker did not stop within %d s of the stop file: %s"
                                       % (w.lang, w.role, EXIT_TIMEOUT_S, w.tail())) from None
                out.counts.append(w.counts())
        finally:
            if migrator is not None and migrator.is_alive():  # a failure elsewhere: let it end
                migrator.abandon(MIGRATOR_FINISH_S)
            self._kill_all()
        self._check_final(out)
        out.seconds = time.monotonic() - t0
        return out

    def _start_background(self) -> None:
        ready: List[Tuple[Worker, Path]] = []
        for lang in self.langs + (["cfault"] if self.s.fault_reader else []):
            r = self.dir / ("ready-query-" + lang)
            w = self._spawn(lang, "query", ["--ready", str(r), "--duration", str(WORKER_CAP_S),
                                            "--pause-us", str(QUERY_PAUSE_US[lang])])
            ready.append((w, r))
        for lang in self.writers:
            r = self.dir / ("ready-add-" + lang)
            w = self._spawn(lang, "add", ["--ready", str(r), "--duration", str(WORKER_CAP_S), "--id", lang,
                                          "--count", str(ADD_CAP), "--pause-us", str(ADD_PAUSE_US)])
            ready.append((w, r))
        self.running = [w for w, _ in ready]
        deadline = time.monotonic() + READY_TIMEOUT_S
        for w, r in ready:  # every reader has queried once (JVM start-up included) before rotating
            while not r.exists():
                if w.proc.poll() is not None:
                    raise HarnessError("%s %s worker exited with %s before it was ready: %s"
                                       % (w.lang, w.role, w.proc.returncode, w.tail()))
                if time.monotonic() > deadline:
                    raise HarnessError("%s %s worker not ready within %d s: %s"
                                       % (w.lang, w.role, READY_TIMEOUT_S, w.tail()))
                time.sleep(0.02)

    def _rotate_in_turn(self, out: Outcome) -> Tuple[int, int]:
        """Rotator processes in turn, one per writing language per round; returns the rotations
        planned for the processes started and the last rotation's expected insertions."""
        planned, last = 0, 0
        deadline = time.monotonic() + ROTATION_BUDGET_S
        for _ in range(self.s.rounds):
            for lang in self.writers:
                left = deadline - time.monotonic()
                if left <= 1:
                    out.cut_short = True
                    return planned, last
                w = self._spawn(lang, "rotate", [
                    "--count", str(self.s.per_process), "--duration", "%.1f" % left,
                    "--expected", ",".join(map(str, self.s.expected)), "--fpp", repr(self.s.fpp),
                    "--hold-ms", str(self.s.hold_ms)])
                try:
                    w.proc.wait(timeout=left + HANG_S)
                except subprocess.TimeoutExpired:
                    w.proc.kill()
                    w.proc.wait()
                    raise HarnessError("%s rotator hung (%d s past its duration): %s"
                                       % (lang, HANG_S, w.tail())) from None
                c = w.counts()
                out.counts.append(c)
                planned += self.s.per_process
                if c["rotations"]:
                    last = c["last_expected"]
        return planned, last

    def _check_final(self, out: Outcome) -> None:
        """The filter's last generation against a reference built from every item the database
        ever held (base + every add attempted): swap and locked must match it byte for byte. A
        partitioned filter: its config, and a query of every database item (the reference is a
        plain filter's bitmap)."""
        db_items = [ln for ln in self.db.read_bytes().split(b"\n") if ln]
        out.db_items = len(db_items)
        with bloomguard.Client(self.server.url, command_timeout=10) as client, \
                client.filter(self.filter, kind=self.s.kind) as f:
            if self.s.native:  # the server's bits: every database item queried, and BF.INFO
                try:
                    out.final_capacity = f.native_info().capacity
                except bloomguard.NotInitialized:
                    return  # a naive rebuild caught between delete and reserve: reported
                out.missing = sum(1 for p in f.contains_many(db_items) if not p)
                return
            try:
                info = f.info()
            except bloomguard.NotInitialized:
                return  # a naive rotation may have been caught between delete and init: reported
            out.final_size, out.final_k = info.size, info.hash_iterations
            out.final_partitions = info.partitions
            out.missing = sum(1 for p in f.contains_many(db_items) if not p)
        if self.s.partitions:  # the reference bitmap is a plain filter's: the queries above judge
            return
        live = self.server.get(self.filter).rstrip(b"\0")
        want = reference_bitmap(db_items, out.final_size, out.final_k)
        out.bitmap_equal = live == want
        if not out.bitmap_equal:
            out.bitmap_diff = first_difference(live, want)
            out.extra_bits, out.lost_bits = bit_differences(live, want)
