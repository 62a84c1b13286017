"""The transport from Python, against real redis-servers:

- SIGPIPE: Python ignores it at start-up, but a program may restore the default action (a CLI that
  wants to die quietly in a pipeline does); then a big call meeting a connection the server closed
  (CLIENT KILL, or redis.conf ``timeout 1`` with no fault at all) must not kill the process. Each
  case runs in a child Python with SIG_DFL; the negative control is a child writing to such a
  connection with a plain socket, which dies of SIGPIPE.
- A client made while the server is down: opening connects nothing; a filter with the default
  policy answers from it meanwhile, one without raises ConnectionError; the same client answers
  from Redis once the server is back.
"""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

import bloomguard
from redis_helpers import RedisServer

CHILD = textwrap.dedent("""
    import signal, sys, time
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.path.insert(0, {here!r})
    import bloomguard
    from redis_helpers import Resp
    url, port, case = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    items = ["sigpipe-%d" % i for i in range(20000)]  # a call of about 3 MB: several writes
    with bloomguard.Client(url, pipeline=(case != "pooled")) as c:
        f = c.filter("py-sigpipe-" + case)
        f.delete()
        f.init(100000, 0.01)
        f.add_many(items)
        assert all(f.contains_many(items))
        if case == "idle":
            # waits for the event: the server closed every bloomguard connection (bounded: 10 s)
            for _ in range(500):
                with Resp(port=port) as r:
                    if b"name=bloomguard" not in r("CLIENT", "LIST"):
                        break
                time.sleep(0.02)
            else:
                sys.exit(4)
        else:
            with Resp(port=port) as r:
                r("CLIENT", "KILL", "TYPE", "normal")
        got = f.query_many(items)
        assert all(got.present) and got.source == "redis", got.source
    sys.exit(0)
""")

CONTROL = textwrap.dedent("""
    import signal, socket, sys
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.path.insert(0, {here!r})
    from redis_helpers import Resp
    port = int(sys.argv[1])
    blob = b"x" * (8 << 20)
    for _ in range(20):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"PING\\r\\n"); s.recv(64)
        with Resp(port=port) as r:
            r("CLIENT", "KILL", "TYPE", "normal")
        try:
            s.sendall(b"*3\\r\\n$3\\r\\nSET\\r\\n$1\\r\\nk\\r\\n$%d\\r\\n" % len(blob) + blob + b"\\r\\n")
        except OSError:
            pass
        s.close()
    sys.exit(0)
""")


def run_child(script: str, *args: str) -> subprocess.CompletedProcess:
    here = str(__import__("pathlib").Path(__file__).resolve().parent)
    return subprocess.run([sys.executable, "-c", script.format(here=here), *args], capture_output=True,
                          text=True, timeout=120)


def test_negative_control_an_unguarded_writer_dies(redis_server):
    p = run_child(CONTROL, str(redis_server.port))
    assert p.returncode == -signal.SIGPIPE, (p.returncode, p.stderr[-500:])


@pytest.mark.parametrize("case", ["pooled", "bulk"])
def test_no_sigpipe_after_client_kill(redis_server, case):
    p = run_child(CHILD, redis_server.url, str(redis_server.port), case)
    assert p.returncode == 0, (p.returncode, p.stderr[-800:])


def test_no_sigpipe_after_the_idle_timeout():
    server = RedisServer(extra_args=["--timeout", "1"]).start()
    try:
        for case in ("idle",):
            p = run_child(CHILD, server.url, str(server.port), case)
            assert p.returncode == 0, (p.returncode, p.stderr[-800:])
    finally:
        server.cleanup()


def test_a_client_made_during_an_outage():
    server = RedisServer()
    server.start()
    server.kill()  # down; its port is kept for the restart
    try:
        with pytest.raises(bloomguard.ConnectionError):  # the control: reaching it at open fails
            bloomguard.Client(server.url, connect_at_open=True)
        with bloomguard.Client(server.url) as c:
            guarded, plain = c.filter("py-outage"), c.filter("py-outage")
            guarded.policy = bloomguard.Policy()  # the defaults: retry, then assume present
            got = guarded.query_many(["a"])
            assert got.source == "assumed_present" and got.present == [True]
            with pytest.raises(bloomguard.ConnectionError):
                plain.contains("a")
            server.start(same_port=True)
            plain.init(1000, 0.01)
            plain.add("a")
            assert plain.contains("a")
            deadline = time.monotonic() + 5  # the guarded one once its breaker lets a call through
            while True:
                got = guarded.query_many(["a"])
                if got.source == "redis" or time.monotonic() > deadline:
                    break
                time.sleep(0.02)
            assert got.source == "redis" and got.present == [True]
    finally:
        server.cleanup()
