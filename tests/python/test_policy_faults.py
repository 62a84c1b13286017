"""The policy engine through the binding under real faults: a paused server (the timeout class)
opening the circuit breaker, a stopped and restarted server (the connection class: snapshot
answers, the breaker, the probe after the restart), and a NAIVE rebuild running in a thread while
queries with a Python fallback keep answering. Each has its negative control: the breaker off,
no policy. No assertion is about elapsed time: the breaker is observed through its counters."""
from __future__ import annotations

import threading
import time

import pytest

import bloomguard
from redis_helpers import RedisServer

TIMEOUT = 0.2  # the client's command timeout in these tests (s)


def items(prefix, n):
    return ["%s-%d" % (prefix, i) for i in range(n)]


@pytest.fixture
def fast_client(url):
    with bloomguard.Client(url, command_timeout=TIMEOUT, pool_size=2) as c:
        yield c


# --- CLIENT PAUSE: the timeout class and the breaker -------------------------------------------------

PAUSE_MS = 3500  # each phase below needs a few command timeouts (~0.8 s): room for a loaded machine


def pause(raw):
    """Pauses every client for PAUSE_MS. (Redis 7.0 postpones CLIENT UNPAUSE itself under a
    pause ALL, so a pause is waited out, never cut short: see wait_out.)"""
    raw("CLIENT", "PAUSE", PAUSE_MS, "ALL")


def wait_out(raw):
    """Returns once the pause is over: a PING is postponed until then."""
    assert raw("PING") == "PONG"


def test_breaker_opens_under_client_pause(fast_client, fname, raw):
    known = items("pause", 50)
    with fast_client.filter(fname) as f:
        f.init(1000, 0.01)
        f.add_many(known)
        f.policy = bloomguard.Policy(on_timeout="assume_present", breaker_threshold=2, breaker_cooldown=60)
        pause(raw)
        answers = [f.query_many(known[:5]) for _ in range(5)]
        assert all(a.present == [True] * 5 and a.source == "assumed_present" for a in answers)
        s = f.stats()
        # two timeouts paid, then the breaker answers at once without sending anything
        assert s["fail_timeout"] == 2 and s["breaker_trips"] == 1 and s["breaker_rejected"] == 3
        assert f.breaker_state == "open"
        assert "did not answer" in answers[0].failure
        # an add is never assumed: it fails at once with the status that opened the breaker
        with pytest.raises(bloomguard.Timeout):
            f.add("during-pause")
        wait_out(raw)

        # negative control 1: the breaker off - every query pays (and counts) the timeout
        f.policy = f.policy.replace(breaker_threshold=0)
        assert f.breaker_state == "closed"
        pause(raw)
        for _ in range(3):
            assert f.query(known[0]).source == "assumed_present"
        s2 = f.stats()
        assert s2["fail_timeout"] == s["fail_timeout"] + 3 and s2["breaker_rejected"] == s["breaker_rejected"] + 1
        assert s2["breaker_trips"] == 1 and f.breaker_state == "closed"
        # negative control 2: no policy - the plain timeout
        f.policy = None
        with pytest.raises(bloomguard.Timeout):
            f.query(known[0])
        wait_out(raw)
        assert f.query_many(known)[:3] == (([True] * len(known)), "redis", "")
        f.delete()


def test_breaker_probe_closes_it_after_the_pause(fast_client, fname, raw):
    with fast_client.filter(fname) as f:
        f.init(1000, 0.01)
        f.add("a")
        f.policy = bloomguard.Policy(on_timeout="assume_present", breaker_threshold=2, breaker_cooldown=0.3)
        pause(raw)
        f.query("a")
        f.query("a")
        assert f.breaker_state == "open"
        wait_out(raw)
        time.sleep(0.4)  # past the cooldown (counted from the second failure): the next call is the probe
        assert f.query("a")[:3] == (True, "redis", "")
        assert f.stats()["breaker_probes"] == 1 and f.breaker_state == "closed"
        f.delete()


# --- a stopped server: the connection class -----------------------------------------------------------

@pytest.fixture
def own_server():
    """A redis-server of this test's own, to stop and restart."""
    server = RedisServer().start()
    try:
        yield server
    finally:
        server.cleanup()


def test_stopped_server_snapshot_and_breaker(own_server):
    known, unknown = items("known", 300), items("unknown", 300)
    with bloomguard.Client(own_server.url, command_timeout=0.5, connect_timeout=0.5, pool_size=2) as c:
        f = c.filter("stopped")
        plain = c.filter("stopped")
        f.init(2000, 0.01)
        f.add_many(known)
        want = f.contains_many(known + unknown)
        f.snapshot()
        f.policy = bloomguard.Policy(on_connection=["snapshot", "assume_present"], breaker_threshold=3,
                                     breaker_cooldown=60)
        own_server.stop()
        for _ in range(8):
            got = f.query_many(known + unknown)
            assert got.source == "snapshot" and got.present == want
        s = f.stats()
        assert s["fail_connection"] == 3 and s["breaker_trips"] == 1 and s["breaker_rejected"] == 5
        assert s["answers_snapshot"] == 8 and f.breaker_state == "open"
        with pytest.raises(bloomguard.ConnectionError):
            f.add("while-down")  # never assumed
        # negative control: the same queries on a handle without a policy fail
        with pytest.raises(bloomguard.ConnectionError):
            plain.contains_many(known)
        # negative control: without the snapshot in the chain, the absent items come back "present"
        f.policy = f.policy.replace(on_connection=["assume_present"])
        got = f.query_many(known + unknown)
        assert got.source == "assumed_present" and got.present != want and all(got.present)

        # restarted (empty: no persistence): after the cooldown the probe reaches the server and
        # closes the breaker, whatever the server answers
        f.policy = f.policy.replace(breaker_cooldown=0.2)
        for _ in range(3):
            f.query("x")
        assert f.breaker_state == "open"
        own_server.start(same_port=True)
        time.sleep(0.3)
        answer = f.query("x")
        assert f.breaker_state == "closed" and f.stats()["breaker_probes"] >= 1
        assert answer.source == "assumed_present" and "not initialized" in answer.failure
        f.close()
        plain.close()


# --- a NAIVE rebuild in a thread ------------------------------------------------------------------------

def _naive_race(client, name, known, guarded, plain, max_rotations=300, max_seconds=30.0):
    """Naive rotations of the filter in one thread while two threads query ``known`` (all added),
    one through ``guarded``, one through ``plain``; until both have met the rebuild's window (the
    fallback answered, a plain query failed) or the bounds are reached. Returns the figures."""
    stop = threading.Event()
    figures = {"rotations": 0, "guarded_errors": [], "plain_errors": [], "guarded_queries": 0,
               "plain_queries": 0}

    def rotate():
        with client.filter(name) as rotator:
            deadline = time.monotonic() + max_seconds
            for _ in range(max_rotations):
                if stop.is_set() or time.monotonic() > deadline:
                    break
                with rotator.rotate(2000, 0.01, strategy="naive", batch=50) as rot:
                    rot.add_many(known)
                figures["rotations"] += 1
                if figures["plain_errors"] and guarded.stats()["answers_callback"] > 0:
                    break
        stop.set()

    def query(handle, key):
        for i in range(1_000_000):
            if stop.is_set():
                break
            try:
                handle.contains_many(known[(i * 20) % len(known):][:20])
            except bloomguard.BloomGuardError as exc:
                figures[key + "_errors"].append(exc)
            figures[key + "_queries"] += 1

    threads = [threading.Thread(target=rotate), threading.Thread(target=query, args=(guarded, "guarded")),
               threading.Thread(target=query, args=(plain, "plain"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max_seconds + 30)
    assert not any(t.is_alive() for t in threads)
    return figures


def test_naive_rotation_with_a_python_fallback_answers_without_errors(client, fname):
    known = items("truth", 400)
    database = set(known)
    asked = []

    def fallback(batch):
        asked.append(len(batch))
        return [item.decode() in database for item in batch]

    policy = bloomguard.Policy(on_notinit=["callback", "assume_present"], on_config=["retry", "callback"],
                               callback_rate=0, fallback=fallback, **{"backoff_base": 0.001, "backoff_max": 0.002})
    with client.filter(fname) as setup:
        setup.init(2000, 0.01)
        setup.add_many(known)
    with client.filter(fname, policy=policy) as guarded, client.filter(fname) as plain:
        figures = _naive_race(client, fname, known, guarded, plain)
        stats = guarded.stats()
        print("naive rotations: %d; guarded: %d queries, %d answered by the fallback, %d errors; "
              "plain: %d queries, %d errors"
              % (figures["rotations"], figures["guarded_queries"], stats["answers_callback"],
                 len(figures["guarded_errors"]), figures["plain_queries"], len(figures["plain_errors"])))
        assert figures["guarded_errors"] == []
        # the guarded handle did meet the rebuild's window, and the fallback answered it
        assert stats["answers_callback"] > 0 and asked
        # negative control: without a policy the very same race is seen as errors
        assert figures["plain_errors"], ("the plain handle never failed over %d naive rotations: "
                                         "the harness proves nothing" % figures["rotations"])
        assert all(isinstance(e, (bloomguard.NotInitialized, bloomguard.ConfigChanged))
                   for e in figures["plain_errors"]), figures["plain_errors"][:3]
        guarded.delete()


# --- a LOCKED rebuild: the locked class ---------------------------------------------------------------

def test_locked_rotation_queries_degrade_to_the_fallback(client, fname):
    """While a LOCKED rotation rewrites the bitmap in place (its progress callback reports an
    uploaded chunk: the filter's write lock is held), queries wait briefly and fail with the locked
    class: a policy's fallback answers them; negative control: a handle without a policy raises
    Locked. After the commit Redis answers again, with every item."""
    known = items("locked", 300)
    seen = {}
    with client.filter(fname) as f, client.filter(fname, policy=bloomguard.Policy(
            on_locked=["callback", "error"], fallback=lambda b: [x.startswith(b"locked") for x in b])) as guarded:
        f.init(20000, 0.01)
        f.add_many(known)

        def progress(phase, n, done, total):
            if phase == "uploading" and done > 0 and not seen:
                seen["guarded"] = guarded.query_many(known[:10])
                try:
                    f.contains_many(known[:10])
                except bloomguard.BloomGuardError as exc:
                    seen["plain"] = exc

        with f.rotate(20000, 0.01, strategy="locked", progress=progress, chunk_bytes=4096) as rot:
            rot.add_many(known)
        assert rot.state == "committed"
        assert seen["guarded"][:3] == ([True] * 10, "callback", seen["guarded"].failure)
        assert isinstance(seen["guarded"].error, bloomguard.Locked)
        assert guarded.stats()["fail_locked"] >= 1
        assert isinstance(seen.get("plain"), bloomguard.Locked), seen
        assert guarded.query_many(known)[:3] == ([True] * len(known), "redis", "")
        f.delete()
