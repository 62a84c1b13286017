"""bloomguard.Lock against a real redis-server: exclusive / read / write holds, fencing tokens,
waits, reentrancy, ownership by thread and by handle, context managers, lost holds, and the
Redisson RLock layout on the wire. Every "it is excluded" check is paired with the release that
lets the same acquire through (the negative control)."""
from __future__ import annotations

import _thread
import threading
import time

import pytest

import bloomguard
from bloomguard import _handle


@pytest.fixture
def lock(client, fname, raw):
    with client.lock(fname) as lk:
        yield lk
    raw("DEL", fname + ":lock", "{%s:lock}:fence" % fname, "{%s:lock}:readers" % fname,
        "{%s:lock}:writers" % fname)


@pytest.fixture
def other(client, fname):
    """A second handle on the same lock: another owner, even in the same thread."""
    with client.lock(fname) as lk:
        yield lk


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


# --- the handle ------------------------------------------------------------------------------------

def test_key_holder_id_and_repr(client, lock, fname):
    assert lock.key == fname + ":lock"
    assert lock.name == fname
    uuid, seq = lock.holder_id.rsplit(":", 1)
    assert len(uuid) == 36 and seq.isdigit()
    # the Lock is its own owner: one holder id whatever the thread, its owner's number after the UUID
    assert not lock.per_thread and int(seq) == lock.owner.seq
    assert in_thread(lambda: lock.holder_id) == lock.holder_id
    # per_thread: one holder id per thread of a handle, one UUID per handle
    with client.lock(fname, per_thread=True) as pt:
        assert pt.per_thread and pt.owner is None
        pt_uuid = pt.holder_id.rsplit(":", 1)[0]
        other_id = in_thread(lambda: pt.holder_id)
        assert other_id.rsplit(":", 1)[0] == pt_uuid and other_id != pt.holder_id and pt_uuid != uuid
    assert "open" in repr(lock)


def test_closed_lock_raises(client, fname):
    lk = client.lock(fname)
    lk.close()
    lk.close()  # idempotent
    assert lk.closed
    with pytest.raises(bloomguard.Closed):
        lk.acquire()


def test_bad_arguments(client, lock):
    with pytest.raises(bloomguard.BadName):
        client.lock("a{}b")
    with pytest.raises(bloomguard.InvalidArgument, match="unknown lock mode"):
        lock.acquire("upgrade")
    with pytest.raises(TypeError):
        lock.acquire(1)
    with pytest.raises(bloomguard.InvalidArgument):
        lock.acquire(wait=-1)
    with pytest.raises(TypeError):
        client.lock("x", renew=1)
    with pytest.raises(bloomguard.InvalidArgument):
        client.lock("x", lease=0.001)  # below the library's 30 ms
    with pytest.raises(TypeError):
        client.lock(b"x")
    assert lock.held() == bloomguard.Hold(None, 0, 0, False)


def test_open_close_frees_every_handle(client, fname):
    before = _handle.stats["lock.freed"]
    for _ in range(20):
        with client.lock(fname) as lk:
            lk.acquire()
    assert _handle.stats["lock.freed"] - before == 20


# --- exclusive, read, write -----------------------------------------------------------------------

def test_exclusive_excludes_another_owner(lock, other, raw):
    token = lock.acquire()
    assert token > 0
    assert lock.held() == bloomguard.Hold("exclusive", 1, token, False)
    # the Redisson RLock layout: a hash field per holder with its count, a lease
    assert raw.hgetall(lock.key) == {lock.holder_id: "1"}
    assert 0 < raw("PTTL", lock.key) <= 30000
    with pytest.raises(bloomguard.Locked) as ei:
        other.acquire()
    assert lock.holder_id in str(ei.value)
    assert other.held().mode is None
    lock.release()
    assert raw("EXISTS", lock.key) == 0
    # negative control: the same acquire goes through once released
    assert other.acquire() > token
    other.release()


def test_readers_share_writers_exclude(client, fname, lock, other):
    with client.lock(fname) as writer:
        lock.acquire("read")
        other.acquire("read")  # readers share
        assert lock.held().mode == "read" and other.held().mode == "read"
        with pytest.raises(bloomguard.Locked):
            writer.acquire("write")
        with pytest.raises(bloomguard.Locked):
            writer.acquire("exclusive")
        lock.release()
        with pytest.raises(bloomguard.Locked):  # one reader still holds it
            writer.acquire("write")
        other.release()
        token = writer.acquire("write")  # negative control: free now
        assert writer.held() == bloomguard.Hold("write", 1, token, False)
        with pytest.raises(bloomguard.Locked):
            lock.acquire("read")  # a writer excludes readers
        with pytest.raises(bloomguard.Locked):
            lock.acquire("write")
        writer.release()
        lock.acquire("read")
        lock.release()


def test_no_upgrade_from_read(lock):
    lock.acquire("read")
    with pytest.raises(bloomguard.InvalidArgument):
        lock.acquire("write")
    lock.release()
    lock.acquire("write")  # after the release it is fine
    lock.acquire("read")   # a writer may re-enter in any mode
    assert lock.held().depth == 2
    lock.release()
    lock.release()


def test_fencing_tokens_strictly_increase(lock, other):
    tokens = []
    for i in range(6):
        holder = (lock, other)[i % 2]
        mode = ("exclusive", "write", "read")[i % 3]
        tokens.append(holder.acquire(mode))
        holder.release()
    tokens.append(in_thread(lambda: (lock.acquire(), lock.release())[0]))
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens), tokens


# --- reentrancy and ownership ---------------------------------------------------------------------

def test_reentrancy(lock, other, raw):
    t1 = lock.acquire()
    t2 = lock.acquire("write")  # re-enters (counted as one more exclusive hold)
    assert t1 == t2
    assert lock.held().depth == 2 and raw.hgetall(lock.key) == {lock.holder_id: "2"}
    lock.release()
    assert lock.held().depth == 1
    with pytest.raises(bloomguard.Locked):  # still held after one release
        other.acquire()
    lock.release()
    assert lock.held().depth == 0
    other.acquire()  # negative control
    other.release()


def test_release_by_non_owner_fails(client, fname, other):
    """per_thread=True: the old meaning, each thread is its own holder."""
    lock = client.lock(fname, per_thread=True)
    with pytest.raises(bloomguard.InvalidArgument):
        lock.release()  # holds nothing
    lock.acquire()
    # another thread of the same handle is not the owner
    with pytest.raises(bloomguard.InvalidArgument, match="only the owner that acquired"):
        in_thread(lock.release)
    # nor is another handle in the same thread
    with pytest.raises(bloomguard.InvalidArgument):
        other.release()
    # and another thread of the same handle is excluded like anyone else
    with pytest.raises(bloomguard.Locked):
        in_thread(lock.acquire)
    assert lock.held().depth == 1  # the hold survived all of that
    lock.release()
    assert in_thread(lambda: (lock.acquire(), lock.release())[0]) > 0
    lock.close()


# --- waiting ---------------------------------------------------------------------------------------

def test_wait_timeout_raises_locked(lock, other):
    lock.acquire()
    with pytest.raises(bloomguard.Locked) as ei:
        other.acquire(wait=0.3)
    assert ei.value.code == bloomguard.Locked.status
    assert lock.holder_id in ei.value.message
    lock.release()


@pytest.mark.parametrize("subscribe", [True, False])
def test_waiter_gets_the_lock_when_released(client, fname, lock, subscribe):
    """A waiter in another thread (the GIL released while it waits in C) gets the lock once the
    holder releases; without the release the same wait ends in Locked."""
    with client.lock(fname, subscribe=subscribe, poll_max=0.02) as waiter:
        lock.acquire()
        with pytest.raises(bloomguard.Locked):  # negative control: nobody releases
            in_thread(waiter.acquire, wait=0.2)
        result = {}
        started = threading.Event()

        def wait_for_it():
            started.set()
            result["token"] = waiter.acquire(wait=30)
            result["held"] = waiter.held()
            waiter.release()

        t = threading.Thread(target=wait_for_it)
        t.start()
        assert started.wait(10)
        time.sleep(0.2)  # the waiter is (very probably) inside the C wait now; either way it must get it
        assert "token" not in result
        lock.release()  # needs the GIL while the other thread waits in C
        t.join(30)
        assert not t.is_alive()
        assert result["held"].mode == "exclusive" and result["token"] > 0


# --- context managers ------------------------------------------------------------------------------

def test_context_managers(lock, other, raw):
    with lock.write(wait=1) as token:
        assert isinstance(token, int) and token > 0
        assert lock.held() == bloomguard.Hold("write", 1, token, False)
        with pytest.raises(bloomguard.Locked):
            other.acquire()
    assert lock.held().mode is None and raw("EXISTS", lock.key) == 0
    with lock.read() as t1, other.read() as t2:
        assert t1 != t2
    with lock.exclusive() as t3, lock.hold("write") as t4:  # reentrant
        assert t3 == t4 and lock.held().depth == 2
    assert lock.held().depth == 0
    # the block's exception propagates and the hold is released
    with pytest.raises(KeyError):
        with lock.hold("exclusive"):
            raise KeyError("inside")
    assert lock.held().mode is None
    other.acquire()
    other.release()
    with pytest.raises(bloomguard.InvalidArgument):
        lock.hold("sideways")


def test_close_releases_every_hold(client, fname, other, raw):
    lk = client.lock(fname)
    lk.acquire()
    with pytest.raises(bloomguard.Locked):
        other.acquire()
    lk.close()
    assert raw("EXISTS", fname + ":lock") == 0
    other.acquire()
    other.release()


# --- the lease ---------------------------------------------------------------------------------------

def test_lost_hold_is_reported(client, fname, other):
    """Without renewal a hold ends with its lease: another owner gets the lock, and the first
    owner's release says the hold was lost. Negative control: before the lease runs out the same
    owner is refused. (Renewal itself is timing-bound: tests/c/test_lock.c covers it.)"""
    with client.lock(fname, lease=1, renew=False) as short:
        short.acquire()
        with pytest.raises(bloomguard.Locked):
            other.acquire()  # still within the lease
        token = other.acquire(wait=10)  # the lease runs out within the wait
        with pytest.raises(bloomguard.Locked):
            short.release()
        assert short.held().mode is None
        other.release()
        # the context manager raises it on exit when the block itself went fine
        with pytest.raises(bloomguard.Locked):
            with short.exclusive():
                assert other.acquire(wait=10) > token
        other.release()


def test_a_long_wait_is_interruptible(sigint_raises, lock, other):
    """Ctrl-C (SIGINT) during wait= cancels the library's wait (the call's interrupt callback),
    and the interrupted waiter holds nothing. The wait is short (5 s) so that a lost interrupt
    fails the test quickly: acquire then raises Locked instead (test_cancel.py times it)."""
    lock.acquire()
    timer = threading.Timer(0.3, _thread.interrupt_main)
    t0 = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            other.acquire(wait=5)
    finally:
        timer.join()
    assert time.monotonic() - t0 < 4.5  # at the interrupt, not at the end of the wait
    assert other.held().mode is None
    lock.release()
    assert other.acquire(wait=1.5) > 0  # the same call objects acquire again
    other.release()


def test_a_wait_still_times_out_with_the_holder(lock, other):
    lock.acquire()
    with pytest.raises(bloomguard.Locked) as ei:
        other.acquire(wait=1.2)
    assert lock.holder_id in ei.value.message
    with pytest.raises(bloomguard.InvalidArgument):
        other.acquire(wait=3601)  # beyond the library's limit: its own error
    lock.release()


# --- retiring a name ------------------------------------------------------------------------------

def test_retire_deletes_the_fence_only_when_free(lock, other, fname, raw):
    fence = "{%s:lock}:fence" % fname
    token = lock.acquire("write")
    for retirer in (other, lock):  # held: refused, even through the holder's own handle
        with pytest.raises(bloomguard.Locked) as ei:
            retirer.retire()
        assert "not retired" in ei.value.message and lock.holder_id in ei.value.message
    assert int(raw("GET", fence)) == token
    lock.release()
    other.acquire("read")
    with pytest.raises(bloomguard.Locked):
        lock.retire()
    other.release()
    assert other.retire() is True
    assert raw("EXISTS", fence) == 0
    assert other.retire() is False  # nothing left
    assert lock.acquire() == 1  # a retired name's tokens restart (see Lock.retire)
    lock.release()


def test_filter_delete_keeps_the_write_lock_fence(client, fname, raw):
    fence = "{%s}:lock:fence" % fname
    with client.filter(fname) as f, f.lock() as lk:
        f.init(1000, 0.01)
        with lk.write() as t1:
            pass
        f.delete()
        assert raw("EXISTS", fence) == 1  # a writer holding t1 must keep losing to later writers
        f.init(1000, 0.01)
        with lk.write() as t2:
            assert t2 > t1
        f.delete()
        assert lk.retire() is True
        assert raw("EXISTS", fence) == 0
