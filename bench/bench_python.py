"""bench_python: what the Python binding adds to contains_many of 100 items, against the same call
made from C in the same run (issue 5: Python time <= 1.3x C time). Run by hand, not a test.

    bash bindings/python/ci.sh --co -q >/dev/null     # builds/installs the binding into build-python/venv
    cmake --build build-bench --target bench_c_batch  # the C side (Release build dir build-bench)
    build-python/venv/bin/python bench/bench_python.py [--url URL] [--rounds N (5)] [--seconds S (1.0)]
        [--slices N (10)] [--batch N (100)] [--c-bench PATH (build-bench/bench/bench_c_batch)]

Without --url it starts its own redis-server on a free 127.0.0.1 port (the Python tests' helper)
and stops it by pid at the end. It creates a filter (1,000,000 items, p = 0.01), adds 200,000
items and queries one fixed batch that alternates added and never-added items.

Sides, each on ONE connection (pool_size 1), all calling contains_many on the same batch:
  c      bench_c_batch: bg_filter_contains_many from a C program (a child process driven over a pipe)
  str    Python f.contains_many(batch) with the items as str (encoded to UTF-8 by the binding)
  bytes  Python f.contains_many(batch) with the items as bytes
Every round gives each side --seconds in total, cut into --slices slices taken in turn (c, str,
bytes, c, ...; the side that starts rotates), so all sides see the same background load. A side's
rate is its calls over the wall-clock time of its own slices. The ratio that decides is the median
over rounds of (Python seconds per call) / (C seconds per call). Client CPU per call is from
getrusage of each process (the C child's own, and this process' for the Python sides).
Exit status: 0 target met for both item types, 3 missed, 1 on errors.
"""
from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = 1.3

import bloomguard  # noqa: E402  (the installed binding, e.g. build-python/venv)


def cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


class CSide:
    """The bench_c_batch child: its own connection, running slices when asked."""

    def __init__(self, exe: str, url: str, name: str, items: list) -> None:
        self.proc = subprocess.Popen([exe, "--url", url, "--filter", name], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1)
        self._send("%d" % len(items))
        for it in items:
            self._send(it)

    def _send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def _ask(self, line: str) -> str:
        self._send(line)
        assert self.proc.stdout is not None
        reply = self.proc.stdout.readline().strip()
        if not reply or reply.startswith("error"):
            raise RuntimeError("bench_c_batch: %s" % (reply or "exited"))
        return reply

    def check(self) -> list:
        return [c == "1" for c in self._ask("check")]

    def run(self, seconds: float):
        calls, wall, cpu = self._ask("run %.6f" % seconds).split()
        return int(calls), float(wall), float(cpu)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self._send("quit")
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()  # our own child, by its Popen handle (pid)
                self.proc.wait(timeout=10)


def py_slice(f, batch: list, seconds: float):
    contains_many = f.contains_many
    calls = 0
    c0, t0 = cpu_s(), time.perf_counter()
    while True:
        contains_many(batch)
        calls += 1
        t1 = time.perf_counter()
        if t1 - t0 >= seconds:
            return calls, t1 - t0, cpu_s() - c0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=1.0, help="per side per round")
    ap.add_argument("--slices", type=int, default=10)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--c-bench", default=str(ROOT / "build-bench" / "bench" / "bench_c_batch"))
    a = ap.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # keeps the table after the per-round lines on a terminal
    if not (1 <= a.rounds <= 51 and 0.01 < a.seconds <= 30 and 1 <= a.slices <= 1000 and 1 <= a.batch <= 16384):
        ap.error("out of range")
    if not os.access(a.c_bench, os.X_OK):
        ap.error("%s not found: cmake --build build-bench --target bench_c_batch" % a.c_bench)

    server = None
    url = a.url
    if not url:
        sys.path.insert(0, str(ROOT / "tests" / "python"))
        from redis_helpers import RedisServer  # the Python tests' helper: free port, stopped by pid
        server = RedisServer().start()
        url = server.url
    name = "bloomguard-bench:python:%d" % os.getpid()
    client = bloomguard.Client(url, pool_size=1)
    f = client.filter(name)
    c_side = None
    try:
        f.delete()
        f.init(1_000_000, 0.01)
        f.add_many("p:%08d" % i for i in range(200_000))
        batch_str = ["%s:%08d" % ("a" if i % 2 else "p", i // 2) for i in range(a.batch)]
        batch_bytes = [s.encode() for s in batch_str]
        c_side = CSide(a.c_bench, url, name, batch_str)
        got_c, got_s, got_b = c_side.check(), f.contains_many(batch_str), f.contains_many(batch_bytes)
        if got_c != got_s or got_s != got_b or not all(got_s[i] for i in range(0, a.batch, 2)):
            raise RuntimeError("the sides disagree, or an added item is absent")

        sides = [("c", lambda s: c_side.run(s)), ("str", lambda s: py_slice(f, batch_str, s)),
                 ("bytes", lambda s: py_slice(f, batch_bytes, s))]
        for _, fn in sides:  # warm-up
            fn(0.1)
        print("bench_python: contains_many of %d items, one connection per side; server %s%s"
              % (a.batch, url, " (started by the benchmark)" if server else ""))
        print("bloomguard %s, Python %s, %d rounds x %.2f s per side, %d interleaved slices"
              % (bloomguard.version(), platform.python_version(), a.rounds, a.seconds, a.slices))
        rate = {n: [] for n, _ in sides}
        cpu = {n: [] for n, _ in sides}
        for rd in range(a.rounds):
            acc = {n: [0, 0.0, 0.0] for n, _ in sides}
            for s in range(a.slices):
                for j in range(len(sides)):
                    n, fn = sides[(j + s + rd) % len(sides)]
                    calls, wall, c = fn(a.seconds / a.slices)
                    acc[n][0] += calls
                    acc[n][1] += wall
                    acc[n][2] += c
            for n, (calls, wall, c) in acc.items():
                rate[n].append(calls / wall)
                cpu[n].append(c * 1e6 / calls)
            print("  round %d: c %.0f calls/s, str %.0f, bytes %.0f  (Python/C time: str %.3fx, bytes %.3fx)"
                  % (rd + 1, rate["c"][-1], rate["str"][-1], rate["bytes"][-1], rate["c"][-1] / rate["str"][-1],
                     rate["c"][-1] / rate["bytes"][-1]), file=sys.stderr)

        print("\n%-6s %10s %10s %12s %14s %14s" % ("side", "calls/s", "us/call", "items/s", "client CPU us",
                                                  "Py/C time"))
        ok = True
        for n, _ in sides:
            m = statistics.median(rate[n])
            ratios = [rc / rn for rc, rn in zip(rate["c"], rate[n])]
            r = statistics.median(ratios)
            verdict = "" if n == "c" else ("  target <= %.1fx: %s (rounds %s)" % (
                TARGET, "met" if r <= TARGET else "MISSED", ", ".join("%.3f" % x for x in ratios)))
            ok = ok and r <= TARGET
            print("%-6s %10.0f %10.1f %12.0f %14.1f %13.3fx%s" % (n, m, 1e6 / m, m * a.batch,
                                                                 statistics.median(cpu[n]), r, verdict))
        print("Py/C time = median over rounds of (Python s/call) / (C s/call); client CPU = medians per call")
        # hiredis >= 1.0 (the default build) and Redis >= 6: the Python calls read the bits alone
        st = f.stats()
        print("Python side: %d of %d calls tracked (BITFIELD_RO alone; library features: %s)"
              % (st["tracked_reads"], st["queries"], ", ".join(sorted(bloomguard.features())) or "none"))
        if "tracking" in bloomguard.features() and st["tracked_reads"] == 0:
            print("the library can track, but no call was tracked", file=sys.stderr)
            ok = False
        return 0 if ok else 3
    finally:
        if c_side:
            c_side.close()
        try:
            f.delete()
        finally:
            f.close()
            client.close()
            if server:
                server.cleanup()


if __name__ == "__main__":
    sys.exit(main())
