"""Ctrl-C during a wait inside the library: the call's interrupt callback lets the
SIGINT handler run while the main thread waits in C with the GIL released, and the wait is
cancelled: KeyboardInterrupt within 150 ms of the signal (plus what the machine imposed meanwhile:
lateness.py), for a lock, a rotation waiting for
another one, a query waiting out a write lock and a policy backoff - nothing left behind. Each
with its control: the same wait without a signal takes its full time. The signal comes from
another thread, as _thread.interrupt_main() and as a real os.kill(SIGINT) (the sigint_raises
fixture installs the default handler whatever the suite inherited)."""
from __future__ import annotations

import _thread
import os
import signal
import threading
import time

import pytest

import bloomguard
from lateness import Lateness

CANCEL_RETURN = 0.150
CANCEL_AFTER = 0.3
CONTROL_WAIT = 0.6


def _kill_sigint() -> None:
    os.kill(os.getpid(), signal.SIGINT)


SENDERS = {"interrupt_main": _thread.interrupt_main, "os.kill": _kill_sigint}


def interrupted_within(send, fn) -> float:
    """Runs fn on the main thread while another thread sends SIGINT CANCEL_AFTER later; fn must
    raise KeyboardInterrupt. Returns the time from the signal to the raise."""
    sent = []

    def fire():
        sent.append(time.monotonic())
        send()

    timer = threading.Timer(CANCEL_AFTER, fire)
    with Lateness() as late:
        timer.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                fn()
            back = time.monotonic()
        finally:
            timer.join()
        assert sent, "returned before the signal"
        took = back - sent[0]
        bound = CANCEL_RETURN + late.worst_since(sent[0])
    assert took <= bound, "KeyboardInterrupt %.3f s after the signal (at most %.3f)" % (took, bound)
    return took


@pytest.fixture
def locks(client, fname, raw):
    with client.lock(fname) as holder, client.lock(fname) as waiter:
        yield holder, waiter
    raw("DEL", fname + ":lock", "{%s:lock}:fence" % fname, "{%s:lock}:readers" % fname,
        "{%s:lock}:writers" % fname)


@pytest.mark.parametrize("sender", sorted(SENDERS))
def test_lock_wait(sigint_raises, locks, fname, raw, sender):
    holder, waiter = locks
    holder.acquire()
    t0 = time.monotonic()
    with pytest.raises(bloomguard.Locked):
        waiter.acquire("write", wait=CONTROL_WAIT)  # control: the full wait
    assert time.monotonic() - t0 >= CONTROL_WAIT
    interrupted_within(SENDERS[sender], lambda: waiter.acquire("write", wait=60))
    assert waiter.held().mode is None
    assert raw("ZCARD", "{%s:lock}:writers" % fname) == 0  # the writer intent was withdrawn
    holder.release()
    assert waiter.acquire(wait=1) > 0  # the call objects are usable again
    waiter.release()


def test_rotation_wait(sigint_raises, client, fname):
    f = client.filter(fname)
    f.init(1000, 0.01)
    with f.rotate(1000, 0.01) as rot:
        t0 = time.monotonic()
        with pytest.raises(bloomguard.RotationInProgress):
            f.rotate(1000, 0.01, wait=CONTROL_WAIT)
        assert time.monotonic() - t0 >= CONTROL_WAIT
        interrupted_within(_thread.interrupt_main, lambda: f.rotate(1000, 0.01, wait=60))
        rot.add("x")
    assert rot.state == "committed"
    with f.rotate(1000, 0.01) as again:  # the cancelled waiter took no lease
        again.add("y")
    f.delete()


def test_write_lock_wait(sigint_raises, redis_server, client, fname):
    f = client.filter(fname)
    f.init(1000, 0.01)
    with bloomguard.Client(redis_server.url, write_lock_wait=3600) as patient:
        pf = patient.filter(fname)
        with f.lock() as wl:
            wl.acquire("write")
            t0 = time.monotonic()
            with pytest.raises(bloomguard.Locked):
                pf.contains("x", timeout=CONTROL_WAIT)  # control: the call's timeout ends it
            assert time.monotonic() - t0 >= CONTROL_WAIT - 0.1
            interrupted_within(_thread.interrupt_main, lambda: pf.contains("x"))
            wl.release()
        assert "x" not in pf
    f.delete()


def test_policy_backoff(sigint_raises, client, fname):
    def guarded(base_ms):
        policy = bloomguard.Policy(on_notinit=["retry", "error"], retry_count=1, jitter_pct=0,
                                   backoff_base=base_ms / 1000, backoff_max=60)
        return client.filter(fname, policy=policy)  # never initialized: BG_ENOTINIT, retried

    t0 = time.monotonic()
    with pytest.raises(bloomguard.NotInitialized):
        guarded(int(CONTROL_WAIT * 1000)).contains("x")
    assert time.monotonic() - t0 >= CONTROL_WAIT
    f = guarded(60000)
    interrupted_within(_thread.interrupt_main, lambda: f.contains("x"))


def test_an_ignored_sigint_does_not_cancel(locks):
    """SIG_IGN (a background job): no handler runs, so the wait is not cancelled."""
    holder, waiter = locks
    holder.acquire()
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        timer = threading.Timer(0.1, _kill_sigint)
        timer.start()
        t0 = time.monotonic()
        with pytest.raises(bloomguard.Locked):
            waiter.acquire(wait=0.5)
        timer.join()
        assert time.monotonic() - t0 >= 0.5
    finally:
        signal.signal(signal.SIGINT, old)
    holder.release()


def test_a_handler_exception_cancels_too(locks):
    """Any exception a signal handler raises ends the wait and is raised as it is."""
    class Stop(Exception):
        pass

    def handler(signum, frame):
        raise Stop()

    holder, waiter = locks
    holder.acquire()
    old = signal.signal(signal.SIGUSR1, handler)
    try:
        timer = threading.Timer(CANCEL_AFTER, lambda: os.kill(os.getpid(), signal.SIGUSR1))
        timer.start()
        t0 = time.monotonic()
        with pytest.raises(Stop):
            waiter.acquire(wait=60)
        timer.join()
        assert time.monotonic() - t0 < CANCEL_AFTER + CANCEL_RETURN
    finally:
        signal.signal(signal.SIGUSR1, old)
    assert waiter.held().mode is None
    holder.release()


def test_cancelled_status_maps():
    assert bloomguard.error_for(-20).__class__ is bloomguard.Cancelled
    assert bloomguard.strerror(-20) == "cancelled"
