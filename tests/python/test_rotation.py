"""Filter.rotate: rebuilding a live filter (swap / naive), as a context manager, with progress
callbacks, options and the concurrency rules, against the session redis-server.

The staging keys (NAME's "rotation", "next" and "delta", named like the config key) are looked
at with the raw RESP connection.
"""
from __future__ import annotations

import _thread
import gc
import threading
import time
from datetime import timedelta

import pytest

import bloomguard
from bloomguard import _handle, _rotation
from conftest import ROOT

OLD = (1000, 0.01)
NEW = (5000, 0.001)


def key(name: str, suffix: str) -> str:
    """A key of the filter named like its config key: NAME:suffix with a hash tag, else {NAME}:suffix."""
    return name + ":" + suffix if "{" in name else "{" + name + "}:" + suffix


STAGING = ("rotation", "next", "delta")


def staging(raw, name):
    """The staging keys that exist."""
    return [s for s in STAGING if raw("EXISTS", key(name, s)) == 1]


def items(prefix, n):
    return ["%s-%d" % (prefix, i) for i in range(n)]


@pytest.fixture
def f(client, fname):
    """A filter initialized with OLD and holding items("old", 300)."""
    flt = client.filter(fname)
    flt.init(*OLD)
    flt.add_many(items("old", 300))
    try:
        yield flt
    finally:
        if not flt.closed:
            flt.delete()
            flt.close()


def assert_config(raw, name, expected, fpp, fpp_text):
    size, k = bloomguard.optimal_params(expected, fpp)
    assert raw.hgetall(key(name, "config")) == {
        "size": str(size), "hashIterations": str(k), "expectedInsertions": str(expected),
        "falseProbability": fpp_text}


def absent_ratio(flt, its):
    return 1 - sum(flt.contains_many(its)) / len(its)


# --- swap and naive -------------------------------------------------------------------------------

def test_swap_to_new_parameters(f, raw):
    new = items("new", 2000)
    with f.rotate(*NEW) as rot:
        assert isinstance(rot, bloomguard.Rotation) and rot.state == "active"
        assert staging(raw, f.name) == ["rotation"]  # the lease; the live filter is untouched so far
        assert rot.add_many(new[:1500]) == 1500
        rot.add_many(x for x in new[1500:1999])  # any iterable
        rot.add(new[1999])
        assert rot.items == 2000 and rot.bytes_uploaded == 0  # built in memory: nothing sent yet
        assert f.info()[:2] == bloomguard.optimal_params(*OLD)
    assert rot.state == "committed"
    assert staging(raw, f.name) == []
    assert_config(raw, f.name, 5000, 0.001, "0.001")
    assert f.info() == bloomguard.FilterInfo(*bloomguard.optimal_params(*NEW), 5000, 0.001)
    assert all(f.contains_many(new))
    # rebuilt from what was fed, not merged with the old bits
    assert absent_ratio(f, items("old", 300)) > 0.95
    stats = rot.stats
    assert isinstance(stats, bloomguard.RotationStats)
    assert stats.items == 2000 and 0 < stats.bytes_uploaded <= (bloomguard.optimal_params(*NEW)[0] + 7) // 8
    assert stats.elapsed > 0 and (rot.items, rot.bytes_uploaded, rot.elapsed) == stats
    time.sleep(0.01)
    assert rot.stats == stats  # frozen once over


def test_swap_to_the_same_parameters(f):
    with f.rotate(*OLD) as rot:
        rot.add_many(items("old", 300))
    assert all(f.contains_many(items("old", 300)))
    assert f.info() == bloomguard.FilterInfo(*bloomguard.optimal_params(*OLD), *OLD)
    assert rot.strategy == "swap" and (rot.expected, rot.fpp) == OLD


def test_naive(f, raw):
    new = items("naive", 500)
    with f.rotate(2000, 0.02, strategy="naive", batch=64) as rot:
        # the live filter is already gone and re-created empty: what naive is kept to show
        assert f.info()[:2] == bloomguard.optimal_params(2000, 0.02)
        rot.add_many(new)
        assert all(f.contains_many(new))  # written straight into the live keys
    assert rot.state == "committed" and rot.strategy == "naive"
    assert rot.stats.items == 500 and rot.stats.bytes_uploaded == 0
    assert_config(raw, f.name, 2000, 0.02, "0.02")
    assert staging(raw, f.name) == []


def test_empty_rotation(f):
    with f.rotate(*NEW) as rot:
        assert rot.add_many([]) == 0
    assert rot.state == "committed" and f.info()[2:] == NEW
    assert absent_ratio(f, items("old", 300)) == 1


def test_item_types(f):
    with f.rotate(*NEW) as rot:
        rot.add(b"\x00raw")
        rot.add_many(["str", bytearray(b"ba"), memoryview(b"mv")])
        with pytest.raises(TypeError):
            rot.add(42)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            rot.add_many("not a list of items")
    assert f.contains_many([b"\x00raw", b"str", "ba", "mv"]) == [True] * 4


def test_explicit_commit_and_abort(f, raw):
    rot = f.rotate(*NEW)
    rot.add("x")
    rot.commit()
    assert rot.state == "committed" and "x" in f
    with pytest.raises(bloomguard.Closed, match="is over .committed."):
        rot.add("y")
    with pytest.raises(bloomguard.Closed):
        rot.commit()
    rot.abort()  # over: nothing to do

    rot = f.rotate(*OLD)
    rot.add("y")
    assert staging(raw, f.name) == ["rotation"]
    rot.abort()
    rot.abort()
    assert rot.state == "aborted" and staging(raw, f.name) == []
    assert f.info()[2:] == NEW and "x" in f

    with f.rotate(*OLD) as rot:  # committing or aborting inside the block: the exit does nothing more
        rot.abort()
    assert rot.state == "aborted" and f.info()[2:] == NEW


# --- aborting ---------------------------------------------------------------------------------------

def test_exception_in_the_block_aborts(f, raw):
    boom = KeyError("source of truth went away")
    with pytest.raises(KeyError) as ei:
        with f.rotate(*NEW) as rot:
            rot.add_many(items("new", 100))
            f.add("during")  # recorded in the delta
            assert sorted(staging(raw, f.name)) == ["delta", "rotation"]
            raise boom
    assert ei.value is boom
    assert rot.state == "aborted"
    assert staging(raw, f.name) == []  # removed at once, not left to their TTL
    assert_config(raw, f.name, 1000, 0.01, "0.01")
    assert all(f.contains_many(items("old", 300) + ["during"]))


def test_keyboard_interrupt_in_the_block_aborts(f, raw):
    with pytest.raises(KeyboardInterrupt):
        with f.rotate(*NEW) as rot:
            raise KeyboardInterrupt
    assert rot.state == "aborted" and staging(raw, f.name) == []


def test_failing_commit_raises_the_mapped_exception(f, raw):
    """The lease is lost (deleted under the rotator): the commit raises RotationInProgress and the
    live filter is untouched."""
    with pytest.raises(bloomguard.RotationInProgress) as ei:
        with f.rotate(*NEW) as rot:
            rot.add_many(items("new", 10))
            raw("DEL", key(f.name, "rotation"))
    assert "lease" in ei.value.message and f.name in ei.value.message
    assert rot.state == "failed"
    assert staging(raw, f.name) == []
    assert f.info()[2:] == OLD and all(f.contains_many(items("old", 300)))


# --- progress -------------------------------------------------------------------------------------

def test_progress_phases(f):
    calls = []

    def progress(phase, n, done, total):
        calls.append((phase, n, done, total))
        assert isinstance(phase, str) and all(isinstance(v, int) for v in (n, done, total))

    # 200,000 items at p=0.001: a 360 KB bitmap, uploaded in 4 KiB chunks
    with f.rotate(200000, 0.001, progress=progress, chunk_bytes=4096) as rot:
        rot.add_many(items("p", 100000))
        assert calls and calls[0][0] == "building" and calls[-1][1] == 100000
        rot.add_many(items("q", 1000))
    phases = [c[0] for c in calls]
    order = [p for i, p in enumerate(phases) if i == 0 or phases[i - 1] != p]
    assert order == ["building", "uploading", "committing", "done"], order
    uploads = [c for c in calls if c[0] == "uploading"]
    total = uploads[-1][3]
    assert len(uploads) > 10 and total > 4096
    assert [c[2] for c in uploads] == sorted(c[2] for c in uploads)
    assert uploads[-1][2] == total
    assert calls[-1][1] == 101000 == rot.stats.items
    assert rot.state == "committed"


def test_progress_naive_phases(f):
    phases = []
    with f.rotate(*NEW, strategy="naive", progress=lambda ph, n, d, t: phases.append((ph, n, t))) as rot:
        rot.add_many(items("n", 50))
    assert phases[0] == ("building", 50, 0) and phases[-1] == ("done", 50, 0)
    assert {p[0] for p in phases} == {"building", "done"}


def test_progress_can_read_stats(f):
    seen = []
    with f.rotate(*NEW, progress=lambda ph, n, d, t: seen.append((ph, rot.stats.items == n))) as rot:
        rot.add_many(items("s", 10))
    assert seen and all(ok for _, ok in seen)


def test_progress_returning_true_aborts_the_commit(f, raw):
    def progress(phase, n, done, total):
        return phase == "uploading"

    with pytest.raises(bloomguard.Aborted) as ei:
        with f.rotate(*NEW, progress=progress) as rot:
            rot.add_many(items("new", 100))
    assert ei.value.code == bloomguard.Aborted.status and "progress callback" in ei.value.message
    assert rot.state == "failed"
    assert staging(raw, f.name) == []
    assert_config(raw, f.name, 1000, 0.01, "0.01")


def test_progress_returning_true_aborts_add_many(f, raw):
    with pytest.raises(bloomguard.Aborted):
        with f.rotate(*NEW, progress=lambda *a: True) as rot:
            rot.add_many(items("new", 10))
    assert rot.state == "failed" and staging(raw, f.name) == []


@pytest.mark.parametrize("phase", ["building", "uploading", "committing"])
def test_progress_raising_aborts_and_reraises_the_same_object(f, raw, phase):
    boom = ValueError("stop at " + phase)
    calls = []

    def progress(ph, n, done, total):
        calls.append(ph)
        if ph == phase:
            raise boom

    with pytest.raises(ValueError) as ei:
        with f.rotate(*NEW, progress=progress) as rot:
            rot.add_many(items("new", 100))
    assert ei.value is boom
    assert calls[-1] == phase and calls.count(phase) == 1  # not called again once it raised
    assert rot.state == "failed"
    assert staging(raw, f.name) == []
    assert_config(raw, f.name, 1000, 0.01, "0.01")
    assert all(f.contains_many(items("old", 300)))


def test_progress_raising_outside_a_with_block(f, raw):
    boom = RuntimeError("no")
    rot = f.rotate(*NEW, progress=lambda *a: (_ for _ in ()).throw(boom))
    with pytest.raises(RuntimeError) as ei:
        rot.add_many(["a"])
    assert ei.value is boom and rot.state == "failed"
    with pytest.raises(bloomguard.InvalidArgument, match="already over"):
        rot.commit()  # the library ended it
    assert staging(raw, f.name) == []


def test_progress_base_exception_is_kept(f, raw):
    class Stop(BaseException):
        pass

    with pytest.raises(Stop):
        with f.rotate(*NEW, progress=lambda *a: (_ for _ in ()).throw(Stop())) as rot:
            rot.add_many(["a"])
    assert staging(raw, f.name) == []


def test_progress_raising_in_the_done_phase(f):
    """The "done" phase comes after the swap: the commit stands, the exception still reaches the caller."""
    boom = LookupError("late")

    def progress(ph, *a):
        if ph == "done":
            raise boom

    with pytest.raises(LookupError) as ei:
        with f.rotate(*NEW, progress=progress) as rot:
            rot.add("x")
    assert ei.value is boom
    assert rot.state == "committed" and f.info()[2:] == NEW and "x" in f


def test_progress_bad_return_value(f):
    with pytest.raises(TypeError, match="progress callback must return"):
        with f.rotate(*NEW, progress=lambda *a: "yes") as rot:
            rot.add("x")
    assert rot.state == "failed" and f.info()[2:] == OLD


def test_progress_must_be_callable(f, raw):
    with pytest.raises(TypeError, match="progress"):
        f.rotate(*NEW, progress=42)  # type: ignore[arg-type]
    assert staging(raw, f.name) == []


def test_progress_cannot_drive_its_own_rotation(f, raw):
    def progress(ph, *a):
        if ph == "building":
            rot.add("again")

    with pytest.raises(RuntimeError, match="own progress callback"):
        with f.rotate(*NEW, progress=progress) as rot:
            rot.add("x")
    assert staging(raw, f.name) == [] and f.info()[2:] == OLD


# --- concurrency --------------------------------------------------------------------------------

def test_adds_from_another_thread_are_kept(client, f):
    """Items added through bloomguard while the rotation runs - before and during the upload - are
    present after the commit, though never fed to the rotation."""
    other = client.filter(f.name)  # its own handle and cached config
    assert "old-0" in other
    during_build, during_upload = items("t1", 200), items("t2", 200)
    uploading, added = threading.Event(), threading.Event()
    errors = []

    def adder():
        try:
            other.add_many(during_build)
            assert uploading.wait(30)
            for it in during_upload:
                other.add(it)
            f.add("same-handle")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            added.set()

    def progress(ph, *a):
        if ph == "uploading" and not uploading.is_set():
            uploading.set()
            assert added.wait(30)  # the commit waits (GIL released) while the other thread adds

    with f.rotate(*NEW, progress=progress, chunk_bytes=4096) as rot:
        t = threading.Thread(target=adder)
        t.start()
        rot.add_many(items("fed", 1000))
    t.join(30)
    assert not errors, errors
    assert rot.state == "committed" and f.info()[2:] == NEW
    assert all(f.contains_many(items("fed", 1000) + during_build + during_upload + ["same-handle"]))
    assert all(other.contains_many(during_build + during_upload))
    other.close()


def test_rotation_in_progress(client, f, raw):
    with f.rotate(*NEW) as rot:
        with pytest.raises(bloomguard.RotationInProgress) as ei:
            f.rotate(*OLD)
        assert ei.value.code == bloomguard.RotationInProgress.status
        assert "in progress" in ei.value.message and f.name in ei.value.message
        with client.filter(f.name) as g:  # another handle: same answer
            with pytest.raises(bloomguard.RotationInProgress):
                g.rotate(*OLD, strategy="swap")
        t0 = time.monotonic()
        with pytest.raises(bloomguard.RotationInProgress):
            f.rotate(*OLD, wait=0.3)
        assert time.monotonic() - t0 >= 0.25
        rot.add("x")
    assert rot.state == "committed" and "x" in f and staging(raw, f.name) == []


#: begins of one filter failing for reasons of their own: (expected, fpp), the exception, its text
BEGIN_FAILURES = [
    ((OLD[0], OLD[1]), bloomguard.RotationInProgress, "in progress"),  # another rotation holds it
    ((OLD[0], 2.0), bloomguard.BadParams, "can't be greater than 1"),
    ((0, OLD[1]), bloomguard.BadParams, "expected insertions must be positive"),
]


def begin_message(f, args, exc_type):
    """The message Filter.rotate raises with."""
    try:
        f.rotate(*args).abort()
    except exc_type as e:
        return e.message
    raise AssertionError("%r did not raise %s" % (args, exc_type.__name__))


def slot_message(f, args, exc_type):
    """The negative control: what the binding used to raise with - the filter's shared slot read
    after bg_rotation_begin_ex returned."""
    from bloomguard._call import run_with_call
    from bloomguard._ffi import ffi, lib
    ptr = f._handle.enter()
    try:
        out = ffi.new("bg_rotation **")
        st = run_with_call(lambda call: lib.bg_rotation_begin_ex(out, call, ptr, args[0], args[1],
                                                                 lib.BG_ROTATE_SWAP, ffi.NULL))
        assert st == exc_type.status, "%r: status %d" % (args, st)
        buf = ffi.new("char[]", 1024)
        lib.bg_filter_errmsg_copy(ptr, buf, 1024)
        return ffi.string(buf).decode("utf-8", "replace")
    finally:
        f._handle.leave()


def crossed_begin_messages(f, message, until_first):
    """Two threads per kind of BEGIN_FAILURES begin at once (for 4 s at most, 400 begins each unless
    ``until_first``) while another rotation holds the filter; the messages that were not their own."""
    crossed = []
    end = time.monotonic() + 4.0

    def begin_failing(args, exc_type, want):
        for _ in range(10 ** 6 if until_first else 400):
            if time.monotonic() > end or (until_first and crossed):
                return
            got = message(f, args, exc_type)
            if want not in got:
                crossed.append("%s raised %r" % (want, got))

    with f.rotate(*NEW):
        threads = [threading.Thread(target=begin_failing, args=k) for k in BEGIN_FAILURES for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return crossed


def test_concurrent_begins_each_raise_their_own_message(f):
    """Each failed begin raises with its own message (its call's), never another thread's that
    landed on the filter's shared message slot meanwhile."""
    crossed = crossed_begin_messages(f, begin_message, until_first=False)
    assert not crossed, "%d begins raised another begin's message, e.g. %s" % (len(crossed), crossed[:3])
    # the negative control: the filter's slot, read back after each begin, holds others' messages
    assert crossed_begin_messages(f, slot_message, until_first=True), \
        "control: the filter's slot never held another thread's message in 4 s"


@pytest.mark.parametrize("wait", [10, 10.0, timedelta(seconds=10)])
def test_wait_for_the_other_rotation(url, f, wait):
    first = f.rotate(*NEW)
    first.add("first")
    result = {}

    def second():
        with bloomguard.Client(url) as c, c.filter(f.name) as g:
            t0 = time.monotonic()
            with g.rotate(*OLD, wait=wait) as rot:
                result["waited"] = time.monotonic() - t0
                result["config"] = g.info()[2:]
                rot.add("second")

    t = threading.Thread(target=second)
    t.start()
    time.sleep(0.4)
    assert t.is_alive() and not result  # still waiting for the lease
    first.commit()
    t.join(30)
    assert result["waited"] >= 0.35 and result["config"] == NEW  # began after the first committed
    assert f.info()[2:] == OLD and "second" in f


def test_a_long_wait_is_interruptible(sigint_raises, f):
    """Ctrl-C (SIGINT) during wait= cancels the library's wait (the call's interrupt callback).
    The wait is short (5 s) so that a lost interrupt fails the test quickly (RotationInProgress)."""
    with f.rotate(*NEW) as rot:
        timer = threading.Timer(0.3, _thread.interrupt_main)
        t0 = time.monotonic()
        timer.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                f.rotate(*OLD, wait=5)
        finally:
            timer.join()
        assert 0.25 <= time.monotonic() - t0 < 4.5
        rot.add("x")
    assert rot.state == "committed"


def test_rotation_object_serializes_its_callers(f):
    with f.rotate(*NEW) as rot:
        ts = [threading.Thread(target=rot.add_many, args=(items("th%d" % i, 5000),)) for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(30)
        assert rot.items == 20000
    assert all(f.contains_many(items("th3", 5000)))


def test_add_many_is_one_c_call_per_batch(f, monkeypatch):
    """add_many hands a list to the library in one call (hashed there on all cores); larger
    iterables go in batches of ROTATE_CHUNK items."""
    calls = []
    real_lib = _rotation.lib

    class Counting:
        def __getattr__(self, name):
            real = getattr(real_lib, name)
            if name != "bg_rotation_add_many":
                return real

            def counted(r, ptrs, lens, n):
                calls.append(n)
                return real(r, ptrs, lens, n)
            return counted

    with f.rotate(*NEW) as rot:
        monkeypatch.setattr(_rotation, "lib", Counting())
        try:
            rot.add_many(items("one", 100000))
            assert calls == [100000]
            monkeypatch.setattr(_rotation, "ROTATE_CHUNK", 1000)
            rot.add_many(iter(items("gen", 2500)))
            assert calls == [100000, 1000, 1000, 500]
        finally:
            monkeypatch.setattr(_rotation, "lib", real_lib)
    assert rot.items == 102500 and "gen-2499" in f


# --- other parameters and readers that cached the old config --------------------------------------

def test_other_parameters_are_followed_by_cached_handles(url, client, f):
    """Handles that cached the old size/k (same client, another client) answer for the new
    generation at once: the library follows the config change transparently."""
    same_client = client.filter(f.name)
    with bloomguard.Client(url) as c2:
        elsewhere = c2.filter(f.name)
        for h in (same_client, elsewhere):
            assert all(h.contains_many(items("old", 300)))  # config cached
        fed = items("fed", 3000)
        with f.rotate(*NEW) as rot:
            rot.add_many(fed)
        for h in (same_client, elsewhere):
            assert all(h.contains_many(fed))
            assert h.info() == bloomguard.FilterInfo(*bloomguard.optimal_params(*NEW), *NEW)
            assert absent_ratio(h, items("old", 300)) > 0.95
        assert elsewhere.add("later") is True
        assert "later" in f and "later" in same_client
        elsewhere.close()
    same_client.close()


# --- arguments and options ----------------------------------------------------------------------

def test_locked_rotation_rewrites_in_place(url, fname, raw):
    """The "locked" strategy: the same result as a swap, nothing left behind, and readers of
    another client wait for the write lock rather than fail."""
    with bloomguard.Client(url, write_lock_wait=10) as patient:
        f = patient.filter(fname)
        f.init(3000, 0.01)
        f.add_many(items("old", 3000))
        errors: list = []
        stop = threading.Event()

        def reader() -> None:
            while not stop.is_set():
                try:
                    if not all(f.contains_many(items("keep", 50))):
                        errors.append("false negative")
                except bloomguard.BloomGuardError as e:  # pragma: no cover - the failure case
                    errors.append(e)
        f.add_many(items("keep", 50))
        t = threading.Thread(target=reader)
        t.start()
        try:
            for n in (3000, 6000, 3000):
                with f.rotate(n, 0.01, strategy="locked", chunk_bytes=4096) as rot:
                    rot.add_many(items("keep", 50))
                    rot.add_many(items("new", 2000))
        finally:
            stop.set()
            t.join()
        assert errors == []
        assert all(f.contains_many(items("new", 2000)))
        assert staging(raw, f.name) == []
        assert raw("EXISTS", key(f.name, "lock")) == 0


def test_filter_lock_write_hold_makes_queries_wait(url, fname):
    with bloomguard.Client(url, write_lock_wait=0.05) as c:
        f = c.filter(fname)
        f.init(1000, 0.01)
        f.add("x")
        with f.lock() as lock:
            assert lock.key == "{%s}:lock" % fname
            with lock.exclusive():
                assert "x" in f  # exclusive holds are not rebuilds
            with lock.write():
                with pytest.raises(bloomguard.Locked, match="write-locked"):
                    "x" in f
                f.policy = bloomguard.Policy()
                answer = f.query("x")
                assert answer.present and answer.source == "assumed_present"
                assert isinstance(answer.error, bloomguard.Locked)
            assert f.query("x").source == "redis" and f.query("x").error is None


@pytest.mark.parametrize("strategy,exc", [("SWAP", bloomguard.InvalidArgument), ("", bloomguard.InvalidArgument),
                                          (1, TypeError), (None, TypeError)])
def test_bad_strategy(f, strategy, exc):
    with pytest.raises(exc, match="strategy"):
        f.rotate(*NEW, strategy=strategy)


@pytest.mark.parametrize("kw,exc", [
    ({"lease": 0.005}, bloomguard.InvalidArgument),
    ({"wait": -1}, bloomguard.InvalidArgument),
    ({"staging_ttl": 0.01}, bloomguard.InvalidArgument),
    ({"threads": 0}, bloomguard.InvalidArgument),
    ({"threads": 1000}, bloomguard.InvalidArgument),
    ({"chunk_bytes": 1}, bloomguard.InvalidArgument),
    ({"batch": 0}, bloomguard.InvalidArgument),
    ({"threads": 2.5}, TypeError),
    ({"wait": "1"}, TypeError),
    ({"lease": True}, TypeError),
])
def test_bad_options(f, raw, kw, exc):
    with pytest.raises(exc, match=next(iter(kw))):
        f.rotate(*NEW, **kw)
    assert staging(raw, f.name) == []


def test_unknown_option(f):
    with pytest.raises(TypeError):
        f.rotate(*NEW, lease_seconds=1000)  # type: ignore[call-arg]


def test_options_are_applied(f, raw):
    with f.rotate(*NEW, lease=2, staging_ttl=4, threads=1, chunk_bytes=4096, wait=0) as rot:
        assert 0 < raw("PTTL", key(f.name, "rotation")) <= 2000
        rot.add_many(items("o", 1000))
        f.add("delta-item")
        assert 2000 < raw("PTTL", key(f.name, "delta")) <= 4000
    assert all(f.contains_many(items("o", 1000) + ["delta-item"]))


@pytest.mark.parametrize("expected,fpp,exc", [(100, 2.0, bloomguard.BadParams), (0, 0.01, bloomguard.BadParams),
                                              ("100", 0.01, TypeError), (100, "0.01", TypeError),
                                              (2**70, 0.01, bloomguard.InvalidArgument)])
def test_bad_parameters(f, raw, expected, fpp, exc):
    with pytest.raises(exc):
        f.rotate(expected, fpp)
    assert staging(raw, f.name) == []


@pytest.mark.parametrize("strategy", ["swap", "naive"])
def test_rotating_a_filter_without_config_creates_it(client, fname, raw, strategy):
    with client.filter(fname) as g:
        with pytest.raises(bloomguard.NotInitialized):
            g.info()
        with g.rotate(*NEW, strategy=strategy) as rot:
            rot.add("x")
        assert g.info()[2:] == NEW and "x" in g
        g.delete()
    assert staging(raw, fname) == []


def test_repr_and_public_names(f):
    with f.rotate(*NEW) as rot:
        assert repr(rot) == "<bloomguard.Rotation %r swap to (5000, 0.001) active>" % f.name
        assert rot.name == f.name
    assert repr(rot).endswith("committed>")
    assert bloomguard.Rotation.__module__ == "bloomguard"
    assert "Rotation" in bloomguard.__all__ and "RotationStats" in bloomguard.__all__


# --- handles --------------------------------------------------------------------------------------

def rotation_counts():
    s = _handle.stats
    return s["rotation.opened"], s["rotation.freed"]


def test_every_rotation_is_freed(f):
    opened, freed = rotation_counts()
    with f.rotate(*NEW) as rot:
        rot.add("a")
    with pytest.raises(ZeroDivisionError):
        with f.rotate(*OLD):
            1 / 0
    rot = f.rotate(*OLD)
    rot.abort()
    with pytest.raises(bloomguard.RotationInProgress):
        with f.rotate(*OLD):
            f.rotate(*OLD)
    assert rotation_counts() == (opened + 4, freed + 4)


def test_gc_aborts_a_forgotten_rotation(f, raw):
    opened, freed = rotation_counts()
    rot = f.rotate(*NEW)
    rot.add("x")
    del rot
    gc.collect()
    assert rotation_counts() == (opened + 1, freed + 1)
    assert staging(raw, f.name) == []  # bg_rotation_free aborted it
    with f.rotate(*NEW) as rot:  # and the lease is free again
        rot.add("y")


def test_gc_frees_a_rotation_before_its_filter_in_a_cycle(client, fname, raw):
    """A filter and its forgotten rotation in one garbage cycle (a traceback's frame holds both,
    say): the collector finalizes a cycle's objects in no set order, yet bg_rotation_free (which
    aborts, through the filter) must run before bg_filter_close. The rotation's handle keeps the
    filter's cdata in a registry outside the cycle (bloomguard._handle), so it always does."""
    with client.filter(fname) as g:
        g.init(*OLD)
    opened, freed = rotation_counts()
    filters_freed = _handle.stats["filter.freed"]
    for _ in range(20):
        flt = client.filter(fname)
        rot = flt.rotate(*NEW)
        rot.add("x")
        cycle = [flt, rot]
        cycle.append(cycle)
        del flt, rot, cycle
        gc.collect()
        assert staging(raw, fname) == []  # aborted, through the filter, before it was closed
    assert rotation_counts() == (opened + 20, freed + 20)
    assert _handle.stats["filter.freed"] == filters_freed + 20
    with client.filter(fname) as g:
        assert g.info()[2:] == OLD
        g.delete()


def test_closing_the_filter_during_a_rotation(client, fname, raw):
    """The rotation keeps the native filter alive until it is over."""
    flt = client.filter(fname)
    flt.init(*OLD)
    freed = _handle.stats["filter.freed"]
    with flt.rotate(*NEW) as rot:
        rot.add("x")
        flt.close()
        assert flt.closed and _handle.stats["filter.freed"] == freed
        with pytest.raises(bloomguard.Closed):
            flt.rotate(*NEW)
    assert _handle.stats["filter.freed"] == freed + 1
    with client.filter(fname) as g:
        assert g.info()[2:] == NEW and "x" in g
        g.delete()


# --- keys that expire or vanish under a rotation (issue 11) ---------------------------------------

def test_a_stall_before_the_commit_longer_than_the_staging_ttl_keeps_every_item(client, fname):
    """lease 60 s, staging TTL 2 s, the rotator stalled 3 s before committing (a slow progress
    callback; a GC pause or SIGSTOP does the same): every item is there after the commit. Before
    the fix the staging bitmap expired and the commit installed an empty generation (0 of 1000)."""
    flt = client.filter(fname)
    flt.init(1000, 0.01)
    old = items("old", 1000)
    flt.add_many(old)
    stalled = []

    def progress(phase, *a):
        if phase == "committing" and not stalled:
            stalled.append(phase)
            time.sleep(3)

    with flt.rotate(1000, 0.01, progress=progress, lease=60, staging_ttl=2) as rot:
        rot.add_many(old)
    assert stalled and rot.state == "committed"
    assert sum(flt.contains_many(old)) == 1000
    flt.delete()
    flt.close()


@pytest.mark.parametrize("strategy", ["swap", "locked"])
def test_an_add_then_a_commit_later_than_the_staging_ttl_keeps_the_add(url, client, fname, raw, strategy):
    """rotate(10000, 0.01, lease 30 s, staging TTL 1 s), another client adds an item, the rotator
    commits 2 s later: the item is there. Before the fix the delta expired after the staging TTL
    though the lease was still held."""
    flt = client.filter(fname)
    flt.init(10000, 0.01)
    with bloomguard.Client(url) as other_client, other_client.filter(fname) as other:
        with flt.rotate(10000, 0.01, strategy=strategy, lease=30, staging_ttl=1) as rot:
            rot.add_many(items("fed", 500))
            other.add("late")
            assert raw("EXISTS", key(fname, "delta")) == 1
            time.sleep(2)
        assert rot.state == "committed"
        assert "late" in flt and "late" in other
    assert all(flt.contains_many(items("fed", 500)))
    flt.delete()
    flt.close()


@pytest.mark.parametrize("fault", ["DEL", "PEXPIRE"])
def test_the_staging_bitmap_lost_during_the_upload_makes_the_commit_refuse(f, raw, fault):
    """The staging bitmap deleted (or expired) between two upload chunks: the commit refuses with
    ServerError, the live filter keeps its old generation and config, nothing of the rotation stays."""
    injected = []

    def progress(phase, n, done, total):
        if phase == "uploading" and done > 0 and not injected:
            found = raw("KEYS", key(f.name, "next:*"))
            assert len(found) == 1
            if fault == "DEL":
                injected.append(raw("DEL", found[0]))
            else:
                injected.append(raw("PEXPIRE", found[0], 1))
                time.sleep(0.02)

    with pytest.raises(bloomguard.ServerError) as ei:
        with f.rotate(100000, 0.01, progress=progress, chunk_bytes=4096) as rot:
            rot.add_many(items("old", 300) + items("new", 20000))
    assert injected == [1], injected
    assert "staging bitmap" in ei.value.message and "the live filter is unchanged" in ei.value.message
    assert rot.state == "failed"
    assert f.info()[2:] == OLD and all(f.contains_many(items("old", 300)))
    assert staging(raw, f.name) == [] and raw("KEYS", key(f.name, "next:*")) == []
