"""Ctrl-C is never lost to a handle's finalizer, and the interrupt tests do not depend on the
SIGINT disposition the suite inherited (conftest.sigint_raises)."""
from __future__ import annotations

import _thread
import gc
import signal
import sys
import threading
import time

import pytest

import bloomguard
from bloomguard import _handle


@pytest.mark.parametrize("kind, n", [("filter", 3000), ("lock", 3000), ("client", 200)])
def test_an_interrupt_during_finalizers_is_not_swallowed(sigint_raises, url, client, fname, kind, n):
    """Regression (issue 11, item 4): the finalizers were Python functions, and a KeyboardInterrupt
    landing in one was printed as "Exception ignored ..." and discarded. They are now the C close
    functions themselves: no Python code runs in them, so the interrupt reaches the program.

    The handles are dropped all at once while another thread interrupts the main thread: their
    finalizers run one after another, and the other thread runs (interrupt_main) when the GIL is
    released inside one of them, so the interrupt lands among them."""
    make = {"filter": lambda: client.filter(fname),
            "lock": lambda: client.lock(fname),
            "client": lambda: bloomguard.Client(url)}[kind]  # a client connects: fewer of them
    before = _handle.stats[kind + ".freed"]
    rounds = 3  # the interrupt lands among the finalizers most of the time: several rounds make a
    for _ in range(rounds):  # lost one all but certain to show before the fix
        handles = [make() for _ in range(n)]
        go = threading.Event()
        t = threading.Thread(target=lambda: (go.wait(10), _thread.interrupt_main()))
        t.start()
        unraisable = []
        old_hook = sys.unraisablehook
        sys.unraisablehook = unraisable.append
        raised = False
        try:
            try:
                go.set()
                del handles[:]  # every finalizer runs here
                t.join(10)
                deadline = time.monotonic() + 2
                while time.monotonic() < deadline:  # bounded: a pending interrupt is raised at once
                    time.sleep(0.01)
            except KeyboardInterrupt:
                raised = True
        finally:
            sys.unraisablehook = old_hook
            t.join(10)
        assert [u.exc_type for u in unraisable] == []
        assert raised, "the KeyboardInterrupt was lost"
    gc.collect()
    assert _handle.stats[kind + ".freed"] - before == rounds * n  # and every handle was freed, once


def test_the_fixture_installs_the_default_handler(sigint_raises):
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
