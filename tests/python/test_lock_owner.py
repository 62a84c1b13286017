"""Who holds a bloomguard.Lock (lock owners, bg_lock_owner): by default the Lock object, whatever
thread calls it; an explicit LockOwner shared by several Locks; per_thread=True for the old meaning
(each thread its own holder). Each "it is refused" check is paired with its negative control."""
from __future__ import annotations

import threading
import time

import pytest

import bloomguard


def in_thread(fn, *args, **kwargs):
    """fn(*args) on another thread; returns its result or raises its exception."""
    box = {}

    def run():
        try:
            box["result"] = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: B902 - handed back to the caller
            box["error"] = exc

    t = threading.Thread(target=run)
    t.start()
    t.join(60)
    assert not t.is_alive()
    if "error" in box:
        raise box["error"]
    return box["result"]


@pytest.fixture
def clean(raw, fname):
    yield
    for name in (fname, fname + "-2"):
        raw("DEL", name + ":lock", "{%s:lock}:fence" % name, "{%s:lock}:readers" % name,
            "{%s:lock}:writers" % name)


def test_release_from_another_thread(client, fname, raw, clean):
    with client.lock(fname) as lock, client.lock(fname) as other:
        token = in_thread(lock.acquire)            # acquired in one thread
        assert raw.hgetall(lock.key) == {lock.holder_id: "1"}
        assert lock.held() == bloomguard.Hold("exclusive", 1, token, False)  # seen from this one
        with pytest.raises(bloomguard.Locked):
            other.acquire()                        # another Lock is another holder
        in_thread(lock.release)                    # released in a third
        assert raw("EXISTS", lock.key) == 0
        assert other.acquire() > token             # negative control: now free
        other.release()


def test_reentrancy_across_threads(client, fname, raw, clean):
    with client.lock(fname) as lock, client.lock(fname) as other:
        t1 = lock.acquire()
        t2 = in_thread(lock.acquire, "write")      # re-enters from another thread: same holder
        t3 = in_thread(lock.acquire, "read")
        assert t1 == t2 == t3
        assert lock.held().depth == 3 and raw.hgetall(lock.key) == {lock.holder_id: "3"}
        in_thread(lock.release)
        lock.release()
        assert lock.held().depth == 1
        with pytest.raises(bloomguard.Locked):
            other.acquire()                        # still held after two of three releases
        in_thread(lock.release)
        assert lock.held().depth == 0 and raw("EXISTS", lock.key) == 0
        other.acquire()                            # negative control
        other.release()
        with pytest.raises(bloomguard.InvalidArgument, match="this owner does not hold it"):
            lock.release()


def test_per_thread_keeps_holds_per_thread(client, fname, clean):
    with client.lock(fname, per_thread=True) as lock:
        lock.acquire()
        with pytest.raises(bloomguard.InvalidArgument, match="only the owner that acquired"):
            in_thread(lock.release)                # another thread is not the holder
        with pytest.raises(bloomguard.Locked):
            in_thread(lock.acquire)                # and is excluded like anyone else
        assert in_thread(lock.held).depth == 0
        assert lock.held().depth == 1
        lock.release()
        assert in_thread(lambda: (lock.acquire(), lock.release())[0]) > 0  # negative control
    # the default (not per-thread): the other thread re-enters instead of being excluded
    with client.lock(fname) as shared:
        shared.acquire()
        in_thread(shared.acquire)
        assert shared.held().depth == 2
        in_thread(shared.release)
        shared.release()


def test_one_owner_for_several_locks(client, fname, raw, clean):
    job = bloomguard.LockOwner()
    assert job.holds == 0 and job.seq > 0 and "LockOwner" in repr(job)
    a = client.lock(fname, owner=job)
    b = client.lock(fname + "-2", owner=job)
    assert a.owner is job and b.owner is job
    assert a.holder_id.endswith(":%d" % job.seq) and b.holder_id.endswith(":%d" % job.seq)
    a.acquire()
    b.acquire()
    assert job.holds == 2
    # released from another thread, each through its own Lock
    in_thread(a.release)
    in_thread(b.release)
    assert job.holds == 0 and raw("EXISTS", a.key, b.key) == 0
    # two Locks of one name are two holders even with one owner (the UUID is the handle's)
    c = client.lock(fname, owner=job)
    a.acquire()
    with pytest.raises(bloomguard.Locked):
        c.acquire()
    a.release()
    c.acquire()  # negative control
    c.release()
    for lk in (a, b, c):
        lk.close()
    with pytest.raises(bloomguard.InvalidArgument, match="exclude each other"):
        client.lock(fname, owner=job, per_thread=True)
    with pytest.raises(TypeError):
        client.lock(fname, owner="me")
    with pytest.raises(TypeError):
        client.lock(fname, per_thread=1)


def test_calls_of_one_lock_take_turns(client, fname, clean):
    """A release waits for the same Lock's acquire that is waiting for the lock (the library
    refuses overlapping calls of one owner; the binding makes them take turns)."""
    with client.lock(fname) as holder, client.lock(fname, poll_max=0.02) as lock:
        holder.acquire()
        result = {}

        def waiter():
            result["token"] = lock.acquire(wait=30)

        t = threading.Thread(target=waiter)
        t.start()
        time.sleep(0.2)  # the waiter is (very probably) in the C wait now
        released = threading.Event()

        def release_lock():
            lock.release()  # takes its turn after the acquire: then the hold is there
            released.set()

        r = threading.Thread(target=release_lock)
        r.start()
        time.sleep(0.1)
        assert not released.is_set()  # waits for the acquire's turn
        holder.release()
        t.join(30)
        r.join(30)
        assert not t.is_alive() and not r.is_alive() and released.is_set()
        assert result["token"] > 0 and lock.held().depth == 0


def test_filter_lock_per_thread_and_owner(client, fname, clean):
    with client.filter(fname) as f:
        with f.lock(per_thread=True) as pt:
            assert pt.per_thread
        job = bloomguard.LockOwner()
        with f.lock(owner=job) as lk:
            with lk.write():
                assert job.holds == 1
        assert job.holds == 0
