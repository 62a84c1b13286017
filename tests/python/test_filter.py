"""Filter: every operation against the real server, item types, per-call timeouts and messages,
and bad input (wrong types, closed handles, broken keys) ending in clear exceptions."""
from __future__ import annotations

import array
import datetime
import math
import threading
import time

import pytest

import bloomguard
from lateness import Lateness


@pytest.fixture
def f(client, fname):
    flt = client.filter(fname)
    try:
        yield flt
    finally:
        if not flt.closed:
            flt.delete()
            flt.close()


def config_key(name: str) -> str:
    return name + ":config" if "{" in name else "{" + name + "}:config"


# --- the operations ------------------------------------------------------------------------------

def test_init_is_try_init(f, raw):
    assert f.init(1000, 0.01) is True
    assert f.init(1000, 0.01) is False
    assert f.init(50, 0.5) is False  # the existing config is kept
    assert f.info() == bloomguard.FilterInfo(9585, 7, 1000, 0.01)
    assert raw.hgetall(config_key(f.name))["size"] == "9585"


def test_add_contains(f):
    f.init(1000, 0.01)
    assert f.add("apple") is True
    assert f.add("apple") is False
    assert f.contains("apple") is True
    assert "apple" in f
    assert "pear" not in f
    assert f.contains("pear") is False


def test_add_many_contains_many(f):
    f.init(10000, 0.001)
    items = ["item-%d" % i for i in range(500)]
    assert f.add_many(items) == 500
    assert f.add_many(items) == 0
    assert f.contains_many(items) == [True] * 500
    others = ["other-%d" % i for i in range(500)]
    got = f.contains_many(others)
    assert isinstance(got, list) and all(type(x) is bool for x in got)
    assert sum(got) < 10  # fpp 0.001
    mixed = f.contains_many(x for pair in zip(items[:10], others[:10]) for x in pair)
    assert mixed[0::2] == [True] * 10


def test_batches_of_any_iterable_and_empty(f):
    f.init(1000, 0.01)
    assert f.add_many([]) == 0
    assert f.add_many(iter(())) == 0
    assert f.contains_many([]) == []
    assert f.add_many(("t1", "t2")) == 2
    assert f.add_many({"s1", "s2"}) == 2
    assert f.add_many(x for x in ["g1", "g2", "g1"]) == 2
    assert f.contains_many(map(str, ["t1", "s2", "g2"])) == [True, True, True]


def test_batch_larger_than_a_chunk(f):
    f.init(200000, 0.01)
    n = 70000  # more than the binding's 65,536 items per C call and the library's 16,384 per round trip
    assert f.add_many("big-%d" % i for i in range(n)) >= n - 5
    got = f.contains_many(["big-%d" % i for i in range(n)])
    assert len(got) == n and all(got)
    assert abs(f.count() - n) < n * 0.02


def test_item_types_are_the_same_bytes(f):
    f.init(1000, 0.01)
    assert f.add("héllo wörld ✓") is True
    utf8 = "héllo wörld ✓".encode("utf-8")
    assert utf8 in f
    assert bytearray(utf8) in f
    assert memoryview(utf8) in f
    assert memoryview(b"xx" + utf8 + b"yy")[2:-2] in f  # a slice: offset into the buffer
    f.add(memoryview(b"abcdef")[::2])  # a non-contiguous view: its bytes in order
    assert b"ace" in f
    ints = array.array("i", [1, 2, 3])
    f.add(memoryview(ints))  # a typed view is taken as its raw bytes
    assert ints.tobytes() in f
    assert f.contains_many([utf8, bytearray(utf8), memoryview(utf8), "héllo wörld ✓"]) == [True] * 4


def test_empty_item(f):
    f.init(100, 0.01)
    assert "" not in f
    assert f.add(b"") is True
    assert "" in f and b"" in f and bytearray() in f
    assert f.contains_many(["", b""]) == [True, True]


def test_count_and_info(f):
    f.init(1000, 0.01)
    assert f.count() == 0
    f.add_many(["a", "b", "c"])
    assert f.count() == 3
    info = f.info()
    assert isinstance(info, tuple) and info._fields == ("size", "hash_iterations", "expected_insertions",
                                                        "false_probability")
    assert (info.size, info.hash_iterations, info.expected_insertions, info.false_probability) == (9585, 7, 1000, 0.01)


def test_info_with_only_redisson_required_fields(f, raw):
    raw("HSET", config_key(f.name), "size", "100", "hashIterations", "3")
    assert f.info() == (100, 3, 0, 0.0)
    assert f.info().partitions == 0
    assert f.add("x") is True and "x" in f


def test_delete(f, raw):
    assert f.delete() is False
    f.init(100, 0.01)
    f.add("x")
    assert raw("EXISTS", f.name, config_key(f.name)) == 2
    assert f.delete() is True
    assert raw("EXISTS", f.name, config_key(f.name)) == 0
    assert f.delete() is False


def test_expire_and_persist(f, raw):
    f.init(100, 0.01)
    f.add("x")
    assert f.expire(100) is True
    for key in (f.name, config_key(f.name)):
        assert 99000 < raw("PTTL", key) <= 100000
    assert f.expire(1.5) is True
    assert 1000 < raw("PTTL", f.name) <= 1500
    assert f.expire(datetime.timedelta(minutes=2)) is True
    assert 119000 < raw("PTTL", config_key(f.name)) <= 120000
    assert f.expire(0.0001) is True  # rounded up to 1 ms, never to 0
    time.sleep(0.05)
    assert raw("EXISTS", f.name, config_key(f.name)) == 0
    f.init(100, 0.01)
    assert f.persist() is False
    f.expire(60)
    assert f.persist() is True
    assert raw("PTTL", f.name) == -1 or raw("EXISTS", f.name) == 0
    assert raw("PTTL", config_key(f.name)) == -1


@pytest.mark.parametrize("seconds", [0, -1, -0.5])
def test_expire_rejects_non_positive(f, seconds):
    f.init(100, 0.01)
    with pytest.raises(bloomguard.InvalidArgument) as ei:
        f.expire(seconds)
    assert "positive" in ei.value.message


def test_expire_types(f):
    with pytest.raises(TypeError):
        f.expire("10")
    with pytest.raises(TypeError):
        f.expire(True)
    with pytest.raises(bloomguard.InvalidArgument):
        f.expire(math.inf)
    with pytest.raises(bloomguard.InvalidArgument):
        f.expire(math.nan)


def test_not_initialized(f):
    with pytest.raises(bloomguard.NotInitialized) as ei:
        f.contains("x")
    assert ei.value.code == bloomguard.NotInitialized.status
    assert f.name in ei.value.message and "not initialized" in ei.value.message
    for op in (lambda: f.add("x"), lambda: f.add_many(["x"]), lambda: f.contains_many(["x"]), f.count, f.info,
               lambda: "x" in f):
        with pytest.raises(bloomguard.NotInitialized):
            op()
    f.init(100, 0.01)
    f.add("x")
    f.delete()
    with pytest.raises(bloomguard.NotInitialized):
        f.contains("x")


def test_hash_tag_names(client, raw):
    name = "pytest{tagged}filter"
    raw("DEL", name, name + ":config")
    with client.filter(name) as f:
        try:
            assert f.init(100, 0.01) is True
            assert raw("EXISTS", name + ":config") == 1 and raw("EXISTS", "{" + name + "}:config") == 0
            f.add("x")
            assert "x" in f
        finally:
            f.delete()


def test_bad_names(client):
    with pytest.raises(bloomguard.BadName) as ei:
        client.filter("a{}b")
    assert "a{}b" in ei.value.message and isinstance(ei.value, ValueError)
    with pytest.raises(TypeError):
        client.filter(42)
    with pytest.raises(TypeError):
        client.filter(None)
    with pytest.raises(bloomguard.InvalidArgument):
        client.filter("nul\0name")


def test_name_and_repr(client, fname):
    with client.filter(fname) as f:
        assert f.name == fname and f.client is client
        assert repr(f) == "<bloomguard.Filter %r>" % fname
    assert repr(f).endswith("closed>")
    with client.filter(fname.encode()) as g:
        assert g.name == fname


def test_filter_constructor(client, fname):
    with bloomguard.Filter(client, fname) as f:
        assert f.name == fname and f.client is client
    with pytest.raises(TypeError, match="bloomguard.Client"):
        bloomguard.Filter("redis://127.0.0.1", fname)


def test_policy_must_be_a_policy(client, fname):
    with pytest.raises(TypeError, match="bloomguard.Policy"):
        client.filter(fname, policy=object())
    with client.filter(fname, policy=None) as f:
        assert f.policy is None
        with pytest.raises(TypeError, match="bloomguard.Policy"):
            f.policy = "fail-open"


# --- wrong types: TypeError before anything is sent ----------------------------------------------

@pytest.mark.parametrize("bad", [1, 1.5, None, ["x"], ("x",), object(), array.array("b", [1]), True])
def test_bad_item_types(f, bad):
    f.init(100, 0.01)
    with pytest.raises(TypeError, match="bytes, bytearray, memoryview or str"):
        f.add(bad)
    with pytest.raises(TypeError, match="bytes, bytearray, memoryview or str"):
        f.contains(bad)
    with pytest.raises(TypeError):
        bad in f  # noqa: B015
    with pytest.raises(TypeError, match="bytes, bytearray, memoryview or str"):
        f.add_many(["ok", bad])
    with pytest.raises(TypeError, match="bytes, bytearray, memoryview or str"):
        f.contains_many(["ok", bad])
    assert "ok" not in f  # the batch with a bad item was not sent


@pytest.mark.parametrize("single", ["abc", b"abc", bytearray(b"abc"), memoryview(b"abc")])
def test_batch_of_a_single_item_is_refused(f, single):
    with pytest.raises(TypeError, match="single"):
        f.add_many(single)
    with pytest.raises(TypeError, match="single"):
        f.contains_many(single)


@pytest.mark.parametrize("bad", [1, None, object()])
def test_batch_not_iterable(f, bad):
    with pytest.raises(TypeError, match="iterable"):
        f.add_many(bad)
    with pytest.raises(TypeError, match="iterable"):
        f.contains_many(bad)


def test_unencodable_str(f):
    f.init(100, 0.01)
    with pytest.raises(UnicodeEncodeError):
        f.add("lone surrogate \ud800")
    with pytest.raises(UnicodeEncodeError):
        f.add_many(["ok", "lone surrogate \ud800"])  # the all-str fast path of a batch
    assert "ok" not in f


def test_batch_paths_give_the_same_bytes(f):
    """A batch of str, of bytes, of mixed types or from a generator: the same items (the all-str and
    all-bytes lists skip the per-item conversion call)."""
    class Text(str):
        def encode(self, *a, **k):  # never used: items are UTF-8 whatever a subclass says
            return b"wrong"

    f.init(1000, 0.01)
    f.add_many(["s1", Text("s2")])
    f.add_many((b"b1", b"b2"))
    f.add_many(x for x in ["g1", b"g2", bytearray(b"g3"), memoryview(b"g4")])
    assert f.contains_many([b"s1", b"s2", "b1", "b2", b"g1", "g2", "g3", "g4"]) == [True] * 8
    assert f.contains_many([b"wrong"]) == [False]


@pytest.mark.parametrize("expected,fpp,exc", [
    (1.5, 0.01, TypeError), ("100", 0.01, TypeError), (True, 0.01, TypeError), (None, 0.01, TypeError),
    (100, "0.01", TypeError), (100, None, TypeError), (100, False, TypeError),
    (2**63, 0.01, bloomguard.InvalidArgument), (-(2**63) - 1, 0.01, bloomguard.InvalidArgument),
])
def test_init_argument_types(f, expected, fpp, exc):
    with pytest.raises(exc):
        f.init(expected, fpp)


def test_init_accepts_int_fpp(f):
    assert f.init(10, 0) is True  # p == 0 is Double.MIN_VALUE, as in Redisson
    assert f.info()[:2] == bloomguard.optimal_params(10, 0.0)


# --- per-call timeout and message ----------------------------------------------------------------

def test_timeout_keyword(f, raw):
    f.init(100, 0.01)
    assert f.contains("x", timeout=2) is False
    assert f.add("x", timeout=0.5) is True
    assert f.count(timeout=1.0) == 1
    for bad in (0, -1, math.nan, math.inf):
        with pytest.raises(bloomguard.InvalidArgument):
            f.contains("x", timeout=bad)
    with pytest.raises(bloomguard.InvalidArgument, match="at most 3600 seconds"):
        f.contains("x", timeout=3601)
    with pytest.raises(TypeError):
        f.contains("x", timeout="1")
    with Lateness() as late:
        raw("CLIENT", "PAUSE", 1500)
        t0 = time.monotonic()
        with pytest.raises(bloomguard.Timeout) as ei:
            f.contains("x", timeout=0.2)
        elapsed = time.monotonic() - t0
        raw("CLIENT", "UNPAUSE")
        assert 0.15 <= elapsed <= 0.2 + 0.05 + late.worst_since(t0), elapsed
    assert isinstance(ei.value, TimeoutError) and ei.value.code == bloomguard.Timeout.status
    assert ei.value.message
    assert f.contains("x") is True  # the client recovers


def test_every_network_method_takes_timeout(f, raw):
    """Each method answers with timeout= given, and with the server paused the timeout is what
    ends it: Timeout after the timeout (not before: it did wait for the server), within it plus
    50 ms and what the machine imposed meanwhile (the client's own command timeout is 5 s)."""
    assert f.init(100, 0.01, timeout=1) is True
    assert f.add("a", timeout=1) is True
    assert f.add_many(["b"], timeout=1) == 1
    assert f.contains("a", timeout=1) is True
    assert f.contains_many(["a", "zz"], timeout=1) == [True, False]
    assert f.count(timeout=1) == 2
    assert f.info(timeout=1).expected_insertions == 100
    assert f.expire(10, timeout=1) is True
    assert f.persist(timeout=1) is True
    calls = {
        "init": lambda: f.init(100, 0.01, timeout=0.2), "add": lambda: f.add("c", timeout=0.2),
        "add_many": lambda: f.add_many(["d"], timeout=0.2), "contains": lambda: f.contains("a", timeout=0.2),
        "contains_many": lambda: f.contains_many(["a"], timeout=0.2), "count": lambda: f.count(timeout=0.2),
        "info": lambda: f.info(timeout=0.2), "expire": lambda: f.expire(10, timeout=0.2),
        "persist": lambda: f.persist(timeout=0.2), "delete": lambda: f.delete(timeout=0.2),
    }
    with Lateness() as late:
        for name, call in calls.items():
            raw("CLIENT", "PAUSE", 1500, "ALL")
            t0 = time.monotonic()
            with pytest.raises(bloomguard.Timeout):
                call()
            elapsed = time.monotonic() - t0
            raw("CLIENT", "UNPAUSE")
            bound = 0.2 + 0.05 + late.worst_since(t0)
            assert 0.15 <= elapsed <= bound, (name, elapsed, bound)
    assert f.delete(timeout=1) is True


def test_message_is_this_calls_own(client, fname):
    """Two threads fail differently on one shared handle: each exception carries its own message
    (bg_call_errmsg), never the other thread's."""
    f = client.filter(fname)
    errors = []
    stop = time.monotonic() + 1.0

    def not_init():
        while time.monotonic() < stop:
            try:
                f.contains("x")
            except bloomguard.NotInitialized as e:
                if "not initialized" not in e.message:
                    errors.append(("contains", e.message))

    def bad_ttl():
        while time.monotonic() < stop:
            try:
                f.expire(-1)
            except bloomguard.InvalidArgument as e:
                if "ttl" not in e.message or "not initialized" in e.message:
                    errors.append(("expire", e.message))

    threads = [threading.Thread(target=not_init), threading.Thread(target=bad_ttl)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    f.close()
    assert not errors, errors[:5]


# --- broken keys ---------------------------------------------------------------------------------

def test_corrupt_config(f, raw):
    raw("HSET", config_key(f.name), "size", "not-a-number", "hashIterations", "3")
    with pytest.raises(bloomguard.Corrupt) as ei:
        f.contains("x")
    assert "not-a-number" in ei.value.message


def test_wrong_type(f, raw):
    f.init(100, 0.01)
    raw("DEL", f.name)
    raw("LPUSH", f.name, "a list")
    with pytest.raises(bloomguard.WrongType) as ei:
        f.add("x")
    assert isinstance(ei.value, bloomguard.Corrupt) and ei.value.message
    with pytest.raises(bloomguard.WrongType):
        f.contains("x")
    raw("DEL", f.name, config_key(f.name))
    raw("SET", config_key(f.name), "a string")
    with pytest.raises(bloomguard.WrongType):
        f.contains("x")


# --- closed handles ------------------------------------------------------------------------------

def test_closed_filter(client, fname):
    f = client.filter(fname)
    f.close()
    f.close()  # idempotent
    assert f.closed
    for op in (lambda: f.init(10, 0.1), lambda: f.add("x"), lambda: f.add_many(["x"]), lambda: f.contains("x"),
               lambda: "x" in f, lambda: f.contains_many(["x"]), f.count, f.info, f.delete, lambda: f.expire(1),
               f.persist):
        with pytest.raises(bloomguard.Closed, match="closed"):
            op()
    assert f.name == fname  # still readable


def test_context_manager_closes(client, fname):
    with client.filter(fname) as f:
        f.init(10, 0.1)
        f.delete()
    assert f.closed
    with pytest.raises(bloomguard.Closed):
        f.count()


def test_config_change_is_retried_transparently(client, fname, raw):
    """Another client rebuilt the filter with other parameters: the call follows the new config."""
    f = client.filter(fname)
    try:
        f.init(1000, 0.01)
        f.add("x")  # the handle now caches size 9585 / k 7
        with bloomguard.Client(client_url(raw)) as other, other.filter(fname) as g:
            g.delete()
            g.init(50, 0.1)
            g.add("y")
        assert "y" in f and f.info()[:2] == (239, 3)
        assert f.add("z") is True and "z" in f
    finally:
        f.delete()
        f.close()


def test_config_changed_when_retries_are_exhausted(url, fname):
    with bloomguard.Client(url, config_retries=0) as c, c.filter(fname) as f, \
            bloomguard.Client(url) as other, other.filter(fname) as g:
        try:
            f.init(1000, 0.01)
            assert "x" not in f  # caches the config
            g.delete()
            g.init(50, 0.1)
            with pytest.raises(bloomguard.ConfigChanged) as ei:
                f.contains("x")
            assert ei.value.code == bloomguard.ConfigChanged.status and f.name in ei.value.message
            assert "x" not in f  # the next call starts from the new config
        finally:
            g.delete()


def test_server_error(f, raw):
    f.init(1000, 0.01)
    raw("CONFIG", "SET", "maxmemory", "1")
    try:
        with pytest.raises(bloomguard.ServerError) as ei:
            f.add("x")
        assert "OOM" in ei.value.message
    finally:
        raw("CONFIG", "SET", "maxmemory", "0")
    assert f.add("x") is True


def client_url(raw) -> str:
    host, port = raw.sock.getpeername()[:2]
    return "redis://%s:%d" % (host, port)


# --- partitioned filters ---------------------------------------------------------------------------

def test_partitioned_keyword(f, raw):
    with pytest.raises(bloomguard.InvalidArgument, match="partitions must be from 1 to 16384"):
        f.init(1000, 0.01, partitions=16385)
    with pytest.raises(bloomguard.BadParams, match="use at least 2 partitions"):
        f.init(600_000_000, 0.01, partitions=1)
    with pytest.raises(TypeError):
        f.init(1000, 0.01, partitions="4")
    assert f.init(100_000, 0.01, partitions=8) is True
    assert f.init(100_000, 0.01, partitions=8) is False
    info = f.info()
    assert (info.partitions, info.hash_iterations, info.expected_insertions) == (8, 7, 100_000)
    assert info.size >= 958_506
    size, k, n, p = info  # still the four fields of a tuple
    assert "partitions=8" in repr(info)
    # nothing Redisson reads: it says "not initialized"
    config = raw.hgetall(config_key(f.name))
    assert "size" not in config and "hashIterations" not in config and config["bgKind"] == "partitioned"
    items = ["p-%d" % i for i in range(3000)]
    assert f.add_many(items) > 2990
    assert f.contains_many(items) == [True] * 3000
    assert f.add("one") is True and f.contains("one") is True
    assert abs(f.count() - 3001) < 100
    # the degrade policy's local snapshot copies the partitions
    f.policy = bloomguard.Policy(on_connection=["snapshot", "assume_present"])
    f.snapshot()
    assert f.stats()["snapshot_bytes"] == 8 * ((info.size // 8 + 7) // 8)
    assert f.contains("one") is True
    f.policy = None
    assert f.delete() is True
    with pytest.raises(bloomguard.NotInitialized):
        f.contains("one")


def test_partitioned_rotation(f):
    """A partitioned filter rotated to other n and P: the new items answer, info names the new P;
    a plain filter refuses ``partitions``; a locked rotation rewrites it in place (same geometry)."""
    assert f.init(20_000, 0.01, partitions=4) is True
    f.add_many(["old-%d" % i for i in range(1000)])
    new = ["new-%d" % i for i in range(3000)]
    with f.rotate(40_000, 0.01, partitions=8) as rot:
        rot.add_many(new)
    assert all(f.contains_many(new))
    assert sum(f.contains_many(["old-%d" % i for i in range(1000)])) < 50
    info = f.info()
    assert (info.partitions, info.expected_insertions) == (8, 40_000)
    # locked: in place, so the partitions' geometry stays
    with pytest.raises(bloomguard.BadParams, match="keep \\(n, p\\) or use BG_ROTATE_SWAP"):
        f.rotate(20_000, 0.01, strategy="locked")
    again = ["again-%d" % i for i in range(2000)]
    with f.rotate(40_000, 0.01, strategy="locked") as rot:
        rot.add_many(again)
    assert all(f.contains_many(again))
    assert sum(f.contains_many(new)) < 150
    assert f.info().partitions == 8
    f.delete()
    f.init(1000, 0.01)
    with pytest.raises(bloomguard.InvalidArgument, match="partitions is for a partitioned filter"):
        f.rotate(1000, 0.01, partitions=4)
