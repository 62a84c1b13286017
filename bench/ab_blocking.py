#!/usr/bin/env python3
"""Blocking calls, one build against another, in one run.

bench_contains (batch 1, 100, 1000) and bench_threads (T = 8, 64) of two Release builds (an older
commit's and this one's) run in turn against the same redis-server, alternating which goes first,
so both see the same background load. Each benchmark already reports its own ratio against a raw
hiredis baseline measured in the same slices; the comparison is new ratio / old ratio per pair of
adjacent runs (median over pairs), and the rates themselves beside it.

    bench/ab_blocking.py OLD_BUILD NEW_BUILD [--pairs 3] [--server-cpu 0] [--client-cpu 1]

OLD_BUILD and NEW_BUILD are build directories holding bench/bench_contains and bench/bench_threads
(e.g. a worktree of the older commit built with -DCMAKE_BUILD_TYPE=Release). Starts its own
redis-server (pinned to --server-cpu) on a free port; the benchmarks run pinned to --client-cpu.
"""
import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import time

CONTAINS = re.compile(r"^(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)x", re.M)   # batch raw bg ratio
THREADS_T = re.compile(r"^T = (\d+) threads", re.M)
THREADS_RATIO = re.compile(r"ratio bg / raw \(median of rounds\): ([\d.]+)x")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(cpu):
    port = free_port()
    proc = subprocess.Popen(["taskset", "-c", str(cpu), "redis-server", "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), 0.1).close()
            return proc, f"redis://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    sys.exit("redis-server did not start")


def run(build, name, args, cpu):
    out = subprocess.run(["taskset", "-c", str(cpu), os.path.join(build, "bench", name)] + args,
                         capture_output=True, text=True, timeout=600)
    if out.returncode not in (0, 3):   # 3: a benchmark's own target missed, still figures
        sys.exit(f"{build}/bench/{name} exited {out.returncode}: {out.stderr[-2000:]}")
    return out.stdout


def contains_figures(text):
    return {f"contains batch {m[0]}": (float(m[3]), float(m[2])) for m in CONTAINS.findall(text)}


def threads_figures(text):
    figs = {}
    parts = THREADS_T.split(text)
    for t, body in zip(parts[1::2], parts[2::2]):
        ratio = THREADS_RATIO.search(body)
        rows = [line.split() for line in body.splitlines() if line.strip().startswith("bg")]
        rate = float(rows[0][-5]) if rows else float("nan")
        figs[f"threads T={t}"] = (float(ratio.group(1)) if ratio else float("nan"), rate)
    return figs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    a = ap.parse_args()
    if not 1 <= a.pairs <= 10:
        sys.exit("--pairs: 1..10")
    server, url = start_server(a.server_cpu)
    results = {"old": [], "new": []}
    try:
        for p in range(a.pairs):
            order = ["old", "new"] if p % 2 == 0 else ["new", "old"]
            for side in order:
                build = a.old if side == "old" else a.new
                figs = contains_figures(run(build, "bench_contains", ["--url", url, "--rounds", "3"], a.client_cpu))
                figs.update(threads_figures(run(build, "bench_threads", ["--url", url, "--rounds", "5",
                                                                         "--seconds", "0.5"], a.client_cpu)))
                results[side].append(figs)
                print(f"pair {p + 1} {side}: " + ", ".join(f"{k} {v[0]:.3f}x" for k, v in figs.items()), flush=True)
    finally:
        server.terminate()
        server.wait()
    print(f"\n{'case':<22} {'old vs raw':>11} {'new vs raw':>11} {'new/old':>8} {'old bg/s':>11} {'new bg/s':>11}")
    worst = None
    for case in results["new"][0]:
        o = [r[case] for r in results["old"]]
        n = [r[case] for r in results["new"]]
        rel = statistics.median(nn[0] / oo[0] for nn, oo in zip(n, o))
        worst = rel if worst is None else min(worst, rel)
        print(f"{case:<22} {statistics.median(x[0] for x in o):>10.3f}x {statistics.median(x[0] for x in n):>10.3f}x "
              f"{rel:>7.3f}x {statistics.median(x[1] for x in o):>11.0f} {statistics.median(x[1] for x in n):>11.0f}")
    print(f"\nnew/old = median over the {a.pairs} pairs of (new's ratio to its raw baseline) / (old's); lowest: {worst:.3f}x")


if __name__ == "__main__":
    main()
