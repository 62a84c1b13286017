"""bloomguard.Policy against a real redis-server: the settings object read back from the library,
each action of a chain on a real failure (a filter that does not exist: the "notinit" class;
a corrupt config), the Python fallback (its items, its thread, its exceptions, its token bucket),
the snapshot, answers with provenance, and the counters. Faults that need a stopped or paused
server are in test_policy_faults.py."""
from __future__ import annotations

import threading
import time

import pytest

import bloomguard
from bloomguard._policy import ACTIONS, FAILURE_CLASSES, SETTINGS
from bloomguard._stats import STATS
from bloomguard._ffi import lib

# short backoffs: tests that retry stay quick
QUICK = dict(backoff_base=0.002, backoff_max=0.005)


def items(prefix, n):
    return ["%s-%d" % (prefix, i) for i in range(n)]


class Database:
    """The source of truth behind the filter, as the fallback sees it: knows items starting with
    "k". Records every batch and the thread that asked."""

    def __init__(self, answer=True):
        self.calls = []
        self.answer = answer

    def __call__(self, batch):
        self.calls.append((threading.get_ident(), list(batch)))
        if not self.answer:
            return None  # declines
        return [item.startswith(b"k") for item in batch]


@pytest.fixture
def missing(client, fname):
    """A filter that was never initialized: every query fails with the "notinit" class."""
    with client.filter(fname) as f:
        yield f


@pytest.fixture
def ready(client, fname):
    with client.filter(fname) as f:
        f.init(5000, 0.01)
        yield f
        f.delete()


# --- the settings object ---------------------------------------------------------------------------

def test_defaults_are_the_librarys():
    p = bloomguard.Policy()
    assert set(p.chains) == {"notinit", "config", "locked", "connection", "timeout", "server", "corrupt", "other"}
    for cls in ("notinit", "config", "connection", "server"):
        assert p.chain(cls) == ("retry", "assume_present")
    for cls in ("locked", "timeout", "corrupt"):
        assert p.chain(cls) == ("assume_present",)
    assert p.chain("other") == ("error",)
    assert p.settings == dict(retry_count=2, backoff_base=0.01, backoff_max=0.1, jitter_pct=50,
                              breaker_threshold=5, breaker_cooldown=1, callback_rate=100, callback_burst=100,
                              snapshot_interval=0, snapshot_max_age=0, snapshot_chunk_bytes=1048576)
    assert p.fallback is None


def test_names_cover_the_header():
    assert set(ACTIONS) == {"retry", "snapshot", "callback", "assume_present", "assume_absent", "error"}
    assert len(FAILURE_CLASSES) == 8 and len(SETTINGS) == 11
    assert len(STATS) == 36
    assert STATS["tracked_reads"] == lib.BG_STAT_TRACKED_READS and STATS["tracked_stale"] == lib.BG_STAT_TRACKED_STALE
    assert STATS["cluster_moved"] == lib.BG_STAT_CLUSTER_MOVED and STATS["cluster_map_reloads"] == lib.BG_STAT_CLUSTER_MAP_RELOADS


def test_chains_and_settings_round_trip():
    db = Database()
    p = bloomguard.Policy(on_connection=["retry", "snapshot", "callback", "assume_present"], on_notinit="error",
                          fallback=db, retry_count=7, breaker_threshold=0, callback_rate=0, snapshot_max_age=5)
    assert p.chain("connection") == ("retry", "snapshot", "callback", "assume_present")
    assert p.chain("notinit") == ("error",)
    assert p.settings["retry_count"] == 7 and p.settings["breaker_threshold"] == 0
    assert p.fallback is db
    q = p.replace(retry_count=1, on_timeout=("assume_absent",))
    assert q.settings["retry_count"] == 1 and q.chain("timeout") == ("assume_absent",)
    assert q.chain("connection") == p.chain("connection") and q.fallback is db
    assert p.settings["retry_count"] == 7  # immutable: replace made a copy
    assert "on_connection=['retry', 'snapshot', 'callback', 'assume_present']" in repr(p)


@pytest.mark.parametrize("kwargs,exc", [
    (dict(on_connection=["retry", "pray"]), bloomguard.InvalidArgument),
    (dict(on_connection=[]), bloomguard.InvalidArgument),
    (dict(on_connection=["retry"] * 9), bloomguard.InvalidArgument),
    (dict(on_connection=[4]), TypeError),
    (dict(retry_count=101), bloomguard.InvalidArgument),
    (dict(breaker_cooldown=0), bloomguard.InvalidArgument),
    (dict(snapshot_interval=0.05), bloomguard.InvalidArgument),
    (dict(jitter_pct=0.5), TypeError),
    (dict(retry_count=True), TypeError),
    (dict(fallback="db"), TypeError),
    (dict(retries=3), TypeError),
])
def test_bad_policies(kwargs, exc):
    with pytest.raises(exc):
        bloomguard.Policy(**kwargs)


def test_replace_rejects_unknown_names():
    with pytest.raises(TypeError, match="unknown Policy argument"):
        bloomguard.Policy().replace(on_weather=["retry"])
    with pytest.raises(bloomguard.InvalidArgument, match="unknown failure class"):
        bloomguard.Policy().chain("weather")


# --- without a policy, and with the default one -----------------------------------------------------

def test_no_policy_raises_and_counts(missing):
    assert missing.policy is None
    with pytest.raises(bloomguard.NotInitialized):
        missing.query("a")
    with pytest.raises(bloomguard.NotInitialized):
        missing.contains("a")
    s = missing.stats()
    assert s["queries"] == 2 and s["query_errors"] == 2 and s["fail_notinit"] == 2 and s["retries"] == 0


def test_default_policy_fails_open_for_queries_only(missing):
    missing.policy = bloomguard.Policy(**QUICK)
    answer = missing.query("x")
    assert answer[:3] == ("x" and True, "assumed_present", answer.failure)
    assert isinstance(answer.error, bloomguard.NotInitialized) and answer.error.message == answer.failure
    assert answer.present and answer.degraded and bool(answer)
    assert "assumed present" in answer.failure and "not initialized" in answer.failure
    assert missing.contains_many(["a", "b"]) == [True, True]
    # an add is never assumed: retried, then raised
    with pytest.raises(bloomguard.NotInitialized):
        missing.add("a")
    s = missing.stats()
    assert s["answers_assumed_present"] == 2 and s["retries"] == 2 * 3 and s["add_errors"] == 1
    # initialized now: Redis answers, and says so
    missing.init(1000, 0.01)
    missing.add("a")
    assert missing.query("a")[:3] == (True, "redis", "")
    assert not missing.query("nope")  # Answer's truth value is `present`
    assert missing.query_many(["a", "nope"])[:3] == ([True, False], "redis", "")
    missing.delete()


def test_policy_property_and_constructor(client, fname):
    p = bloomguard.Policy(on_notinit="assume_absent")
    with client.filter(fname, policy=p) as f:
        assert f.policy is p
        assert f.query("a")[:3] == (False, "assumed_absent", f.query("a").failure)
        f.policy = None
        with pytest.raises(bloomguard.NotInitialized):
            f.query("a")
    with pytest.raises(bloomguard.Closed):
        f.policy = p


def test_snapshot_max_age_shorter_than_the_refresh_interval_is_refused(missing):
    """Settings that cannot work together (issue 11's audit): the filter refuses the policy with a
    message saying what to set, and keeps the one it had."""
    kept = bloomguard.Policy(on_notinit="assume_absent")
    missing.policy = kept
    with pytest.raises(bloomguard.InvalidArgument) as ei:
        missing.policy = bloomguard.Policy(snapshot_interval=60, snapshot_max_age=1)
    assert "BG_POLICY_SNAPSHOT_MAX_AGE_MS (1000 ms) is shorter than BG_POLICY_SNAPSHOT_INTERVAL_MS" in ei.value.message
    assert "at least the interval" in ei.value.message
    assert missing.policy is kept and missing.query("a").source == "assumed_absent"
    missing.policy = bloomguard.Policy(snapshot_interval=60, snapshot_max_age=60)
    missing.policy = None


# --- each action ------------------------------------------------------------------------------------

def test_callback_gets_the_items_and_answers(missing):
    db = Database()
    missing.policy = bloomguard.Policy(on_notinit=["callback", "assume_absent"], fallback=db)
    got = missing.query_many(["k1", b"u1", "k2", "", bytearray(b"k\x00")])
    assert got.present == [True, False, True, False, True]
    assert got.source == "callback" and "not initialized" in got.failure
    assert db.calls == [(threading.get_ident(), [b"k1", b"u1", b"k2", b"", b"k\x00"])]
    assert missing.query("k9")[:3] == (True, "callback", got.failure)
    s = missing.stats()
    assert s["callback_calls"] == 2 and s["answers_callback"] == 2


def test_callback_declining_hands_over(missing):
    db = Database(answer=False)
    missing.policy = bloomguard.Policy(on_notinit=["callback", "assume_absent"], fallback=db)
    assert missing.query_many(["k1", "u1"])[:3] == ([False, False], "assumed_absent", missing.query("k").failure)
    assert len(db.calls) == 2
    assert missing.stats()["callback_declined"] == 2
    # without a fallback the callback action cannot answer at all: it hands over too
    missing.policy = bloomguard.Policy(on_notinit=["callback", "assume_present"])
    assert missing.query("k1").source == "assumed_present"


def test_error_action_and_a_chain_that_runs_out(missing):
    missing.policy = bloomguard.Policy(on_notinit="error")
    with pytest.raises(bloomguard.NotInitialized):
        missing.query("a")
    missing.policy = bloomguard.Policy(on_notinit=["callback", "snapshot"], fallback=Database(answer=False))
    with pytest.raises(bloomguard.NotInitialized):  # nothing could answer: the failure
        missing.query("a")


def test_retry_outlasts_a_missing_filter(client, missing):
    """A retried add lands once another handle initializes the filter; negative control: with
    no retries the same add fails."""
    missing.policy = bloomguard.Policy(retry_count=0)
    with pytest.raises(bloomguard.NotInitialized):
        missing.add("late")
    missing.policy = bloomguard.Policy(retry_count=100, backoff_base=0.02, backoff_max=0.02)
    with client.filter(missing.name) as other:
        timer = threading.Timer(0.1, other.init, (1000, 0.01))
        timer.start()
        assert missing.add("late") is True
        timer.join()
        assert other.query("late")[:3] == (True, "redis", "")
        assert missing.stats()["retries"] >= 1
        other.delete()


def test_corrupt_class(client, fname, raw):
    with client.filter(fname, policy=bloomguard.Policy(on_corrupt=["retry", "assume_absent"], **QUICK)) as f:
        raw("HSET", "{%s}:config" % fname, "size", "12x", "hashIterations", "3")
        a = f.query("a")
        assert a.source == "assumed_absent" and 'size "12x"' in a.failure
        s = f.stats()
        assert s["fail_corrupt"] == 3 and s["retries"] == 2
        f.policy = None
        with pytest.raises(bloomguard.Corrupt):
            f.query("a")
        raw("DEL", "{%s}:config" % fname)


# --- the fallback, the Python side ------------------------------------------------------------------

def test_fallback_exception_reaches_the_caller(missing):
    boom = KeyError("the database is down too")

    def failing(batch):
        raise boom

    missing.policy = bloomguard.Policy(on_notinit=["callback", "assume_present"], fallback=failing)
    for call in (lambda: missing.query("a"), lambda: missing.contains("a"), lambda: missing.query_many(["a", "b"]),
                 lambda: missing.contains_many(["a"])):
        with pytest.raises(KeyError) as ei:
            call()
        assert ei.value is boom  # the very object, with its traceback through the fallback
        assert any(tb.name == "failing" for tb in ei.traceback)
    # the next call is clean again: nothing is left parked
    missing.policy = bloomguard.Policy(on_notinit="assume_absent")
    assert missing.query("a").source == "assumed_absent"


def test_fallback_base_exception_is_kept(missing):
    def interrupted(batch):
        raise KeyboardInterrupt

    missing.policy = bloomguard.Policy(on_notinit=["callback", "error"], fallback=interrupted)
    with pytest.raises(KeyboardInterrupt):  # rather than the chain's NotInitialized
        missing.query("a")


@pytest.mark.parametrize("result,exc", [
    ([True], ValueError),          # one answer for two items
    ([True, False, True], ValueError),
    (True, TypeError),             # a bare bool: ambiguous (decline? all present?)
    ("yy", TypeError),
    (42, TypeError),
])
def test_fallback_bad_results(missing, result, exc):
    missing.policy = bloomguard.Policy(on_notinit=["callback", "assume_present"], fallback=lambda b: result)
    with pytest.raises(exc):
        missing.query_many(["a", "b"])


def test_fallback_results_may_be_any_sequence(missing):
    missing.policy = bloomguard.Policy(on_notinit="callback", fallback=lambda b: (1, 0, b"", "x"))
    assert missing.contains_many(["a", "b", "c", "d"]) == [True, False, False, True]


def test_fallback_runs_on_each_querying_thread(missing):
    """The library calls the fallback on the thread making the query (it holds no lock then):
    four threads querying at once each see their own calls, and each their own exception."""
    db = Database()
    missing.policy = bloomguard.Policy(on_notinit="callback", callback_rate=0, fallback=db)
    idents, errors = {}, []

    def worker(i):
        idents[i] = threading.get_ident()
        try:
            for j in range(25):
                assert missing.contains_many(["k%d" % j, "u%d" % j]) == [True, False]
        except BaseException as exc:  # noqa: B902
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert len(db.calls) == 100
    assert {ident for ident, _ in db.calls} == set(idents.values())


def test_fallback_may_query_another_filter(client, ready):
    """A fallback asking another filter (not the same one): nested C calls on one thread, and an
    exception of the inner call still reaches the outer caller."""
    missing = client.filter(ready.name + ":missing")
    ready.add("k-inner")
    missing.policy = bloomguard.Policy(on_notinit="callback", fallback=lambda b: ready.contains_many(b))
    assert missing.query_many(["k-inner", "other"])[:3] == ([True, False], "callback",
                                                        missing.query("k-inner").failure)
    with client.filter(ready.name + ":absent") as absent:
        missing.policy = bloomguard.Policy(on_notinit="callback", fallback=lambda b: absent.contains_many(b))
        with pytest.raises(bloomguard.NotInitialized) as ei:
            missing.query("x")
        assert absent.name in ei.value.message  # the inner filter's failure, not the outer one's


def test_dropped_policy_releases_its_fallback(missing):
    import gc
    import weakref

    class Db(Database):
        pass

    db = Db()
    ref = weakref.ref(db)
    missing.policy = bloomguard.Policy(on_notinit="callback", fallback=db)
    del db
    assert missing.query("k").source == "callback"
    missing.policy = None
    gc.collect()
    assert ref() is not None  # kept for queries that started with it, until the next replacement
    missing.policy = None
    gc.collect()
    assert ref() is None


# --- the token bucket ---------------------------------------------------------------------------------

def test_token_bucket_refuses_beyond_the_burst(missing):
    """callback_rate=1/s, burst 3: of 20 quick queries only the burst (plus what refilled meanwhile)
    reach the fallback, the rest are refused and hand over. Negative control: rate 0 (unlimited)
    calls it for every query."""
    db = Database()
    missing.policy = bloomguard.Policy(on_notinit=["callback", "assume_absent"], fallback=db, callback_rate=1,
                                       callback_burst=3)
    t0 = time.monotonic()
    sources = [missing.query("k%d" % i).source for i in range(20)]
    elapsed = time.monotonic() - t0
    s = missing.stats()
    allowed = 3 + int(elapsed * 1) + 1
    assert 3 <= s["callback_calls"] <= allowed
    assert s["callback_calls"] + s["callback_refused"] == 20
    assert sources.count("callback") == s["callback_calls"] and sources.count("assumed_absent") == s["callback_refused"]
    assert len(db.calls) == s["callback_calls"]
    missing.policy = missing.policy.replace(callback_rate=0)
    for i in range(20):
        assert missing.query("k%d" % i).source == "callback"
    assert missing.stats()["callback_refused"] == s["callback_refused"]


# --- the snapshot --------------------------------------------------------------------------------------

def test_snapshot_answers_like_redis(ready):
    inside, outside = items("in", 1000), items("out", 1000)
    ready.add_many(inside)
    want = ready.contains_many(inside + outside)
    assert ready.stats()["snapshot_bytes"] == 0 and ready.stats()["snapshot_age_ms"] == -1
    ready.snapshot()
    s = ready.stats()
    assert s["snapshot_refreshes"] == 1 and s["snapshot_bytes"] == (47925 + 7) // 8 and s["snapshot_age_ms"] >= 0
    ready.policy = bloomguard.Policy(on_notinit=["snapshot", "error"], snapshot_chunk_bytes=4096)
    ready.delete()
    got = ready.query_many(inside + outside)
    assert got.source == "snapshot" and got.present == want
    assert all(got.present[:1000])
    # too old a snapshot is not used
    ready.policy = ready.policy.replace(snapshot_max_age=0.001)
    time.sleep(0.01)
    with pytest.raises(bloomguard.NotInitialized):
        ready.query("in-1")
    ready.init(5000, 0.01)  # for the fixture's delete


def test_snapshot_of_a_missing_filter_fails(missing):
    with pytest.raises(bloomguard.NotInitialized):
        missing.snapshot()
    assert missing.stats()["snapshot_failures"] == 1


def test_snapshot_refused_during_a_rotation(ready, raw):
    ready.add("a")
    ready.snapshot()
    raw("HSET", "{%s}:rotation" % ready.name, "token", "someone")
    try:
        with pytest.raises(bloomguard.RotationInProgress):
            ready.snapshot()
    finally:
        raw("DEL", "{%s}:rotation" % ready.name)
    assert ready.stats()["snapshot_bytes"] > 0  # the one held is kept


def test_background_snapshot_refresh(ready):
    ready.policy = bloomguard.Policy(snapshot_interval=0.1)
    deadline = time.monotonic() + 10
    while ready.stats()["snapshot_refreshes"] < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert ready.stats()["snapshot_refreshes"] >= 2
    ready.policy = None  # stops the refresher
    seen = ready.stats()["snapshot_refreshes"]
    time.sleep(0.35)
    assert ready.stats()["snapshot_refreshes"] == seen


# --- counters ---------------------------------------------------------------------------------------------

def test_stats_count_calls(ready):
    ready.add_many(["a", "b"])
    ready.add("c")
    ready.contains("a")
    ready.contains_many(["a", "z"])
    ready.query("b")
    s = ready.stats()
    assert list(s) == list(STATS)
    assert s["adds"] == 2 and s["queries"] == 3 and s["answers_redis"] == 3
    assert s["query_errors"] == 0 and s["breaker_state"] == lib.BG_BREAKER_CLOSED
    assert ready.breaker_state == "closed"
    assert all(s[k] == 0 for k in s if k.startswith("fail_"))
    with ready.rotate(5000, 0.01) as rot:
        rot.add_many(["a", "b", "c"])
    assert ready.stats()["rotations"] == 1
    assert ready.query_many(["a", "b", "c"])[:3] == ([True] * 3, "redis", "")


def test_policies_replaced_while_threads_query(missing):
    """Policies with fallbacks are replaced (and the old ones dropped) while three threads query:
    a query that started with a dropped policy finds its fallback unregistered and declines - the
    chain then assumes present - and never reaches freed memory; every query answers."""
    stop = threading.Event()
    sources, errors = [], []

    def worker():
        while not stop.is_set():
            try:
                sources.append(missing.query("k").source)
            except BaseException as exc:  # noqa: B902
                errors.append(exc)
                return

    missing.policy = bloomguard.Policy(on_notinit="assume_present")
    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for i in range(300):
            missing.policy = bloomguard.Policy(on_notinit=["callback", "assume_present"], callback_rate=0,
                                               fallback=lambda b, i=i: [True] * len(b))
            if i % 50 == 0:
                time.sleep(0.01)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not errors, errors[:3]
    assert sources and set(sources) <= {"callback", "assumed_present"}
    assert "callback" in sources
    print("sources: %d callback, %d assumed_present" % (sources.count("callback"), sources.count("assumed_present")))
