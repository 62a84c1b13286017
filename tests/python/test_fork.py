"""fork(): a Client and Filter made before ``os.fork()`` (or a ``multiprocessing`` child with the fork
start method) and used by both processes. Each process checks its own answers against known ones
(items added are present, items never added are absent: a filter sized for a false positive rate
of 1e-9); the parent queries from a thread while it forks and after the child ended.

Each scenario runs in a fresh interpreter (the script below), so the negative control can start one
with BG_TEST_FORK_UNDETECTED=1: the library then notices no fork and the child uses the sockets it
inherited, as before - the same harness must see wrong answers or failed calls there."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    r'''
    import json, multiprocessing, os, random, sys, threading, time
    import bloomguard

    url, name, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    N = 300
    present = ["in-%d" % i for i in range(N)]
    absent = ["out-%d" % i for i in range(N)]
    client = bloomguard.Client(url, command_timeout=1.0)
    f = client.filter(name)
    f.delete()
    f.init(100000, 1e-9)
    f.add_many(present)

    def rounds(n, seed):
        """n rounds of single queries and a batch, in an order of the seed's: each answer checked."""
        rng = random.Random(seed)
        t = {"ok": 0, "wrong": 0, "failed": 0, "first_err": ""}
        for _ in range(n):
            for _ in range(16):
                want = rng.random() < 0.5
                item = rng.choice(present if want else absent)
                try:
                    got = f.contains(item)
                except Exception as e:   # a crossed reply may fail in any way (the control)
                    t["failed"] += 1
                    t["first_err"] = t["first_err"] or repr(e)
                    continue
                t["ok" if got == want else "wrong"] += 1
            wants = [rng.random() < 0.5 for _ in range(16)]
            items = [rng.choice(present if w else absent) for w in wants]
            try:
                got = f.contains_many(items)
            except Exception as e:
                t["failed"] += 1
                t["first_err"] = t["first_err"] or repr(e)
                continue
            for g, w in zip(got, wants):
                t["ok" if g == w else "wrong"] += 1
        return t

    def merge(a, b):
        return {"ok": a["ok"] + b["ok"], "wrong": a["wrong"] + b["wrong"], "failed": a["failed"] + b["failed"],
                "first_err": a["first_err"] or b["first_err"]}

    def child_work(seed):
        """Two threads of the child's own, then its tally."""
        out = [None, None]
        def run(i):
            out[i] = rounds(40, seed + i)
        ts = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return merge(out[0], out[1])

    def mp_child(conn):
        conn.send(child_work(2000))
        conn.close()

    assert rounds(2, 1)["ok"] == 2 * 32   # the connections are up before the fork
    stop = threading.Event()
    parent = {"t": None}

    def parent_loop():
        t = {"ok": 0, "wrong": 0, "failed": 0, "first_err": ""}
        k = 0
        try:
            while not stop.is_set():
                t = merge(t, rounds(1, 5000 + k))
                k += 1
        finally:
            parent["t"] = t

    across = threading.Thread(target=parent_loop)
    if os.environ.get("BG_TEST_FORK_UNDETECTED") != "1":
        across.start()   # a thread of the parent is in its calls at the fork
        time.sleep(0.05)
    child = None
    if mode == "os.fork":
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                data = json.dumps(child_work(1000)).encode()
                os.write(w, data)
            finally:
                os._exit(0)
        os.close(w)
        if not across.is_alive():
            across.start()
        import select
        chunks = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            ready, _, _ = select.select([r], [], [], 1.0)
            if ready:
                b = os.read(r, 65536)
                if not b:
                    break
                chunks.append(b)
        os.close(r)
        if chunks:
            child = json.loads(b"".join(chunks))
        else:
            os.kill(pid, 9)
        os.waitpid(pid, 0)
    else:
        ctx = multiprocessing.get_context("fork")
        a, b = ctx.Pipe()
        p = ctx.Process(target=mp_child, args=(b,))
        p.start()
        if not across.is_alive():
            across.start()
        if a.poll(20):
            child = a.recv()
        p.join(5)
        if p.is_alive():
            p.kill()
            p.join()
    stop.set()
    across.join()
    after = rounds(10, 9000)   # and the parent still works once the child is gone
    print(json.dumps({"parent": merge(parent["t"], after), "child": child}))
    f.close()
    client.close()
    '''
)


def run_scenario(url: str, name: str, mode: str, undetected: bool) -> dict:
    env = dict(os.environ)
    env.pop("BG_TEST_FORK_UNDETECTED", None)
    if undetected:
        env["BG_TEST_FORK_UNDETECTED"] = "1"
    out = subprocess.run([sys.executable, "-c", SCRIPT, url, name, mode], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("mode", ["os.fork", "multiprocessing"])
def test_client_used_on_both_sides_of_a_fork(url, fname, mode):
    res = run_scenario(url, fname, mode, undetected=False)
    parent, child = res["parent"], res["child"]
    assert child is not None, "the child did not report"
    assert parent["wrong"] == 0 and parent["failed"] == 0, parent
    assert child["wrong"] == 0 and child["failed"] == 0, child
    assert child["ok"] == 2 * 40 * 32
    assert parent["ok"] >= 10 * 32


@pytest.mark.parametrize("mode", ["os.fork", "multiprocessing"])
def test_negative_control_fork_undetected(url, fname, mode):
    """Without the library noticing the fork, both processes share the sockets: the harness sees it."""
    res = run_scenario(url, fname, mode, undetected=True)
    print("control (%s): %s" % (mode, res))
    parent, child = res["parent"], res["child"]
    bad = parent["wrong"] + parent["failed"]
    if child is None:
        bad += 1   # the child hung on what it shared: seen too
    else:
        bad += child["wrong"] + child["failed"]
    assert bad > 0, res
