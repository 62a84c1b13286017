"""Each failing call raises with its own message (its bg_call's, bg_call_errmsg), never another
thread's that landed on the handle's shared message slot (bg_filter_errmsg, bg_client_errmsg)
meanwhile: Filter.lock and Client.lock (bg_lock_open_filter_ex / bg_lock_open_ex), the Filter.policy
setter (bg_filter_set_policy_ex), Client.ping (bg_client_ping_ex).

Each case runs two threads per failure reason on one handle, and beside them threads making a plain
C call (no bg_call) that fails on the same handle for yet another reason and so writes its shared
slot - as any C caller of that handle may. Each case's negative control runs the binding's old code
(the plain call, then the handle's slot read back) and must see another thread's message there.
Filter.node reads its call's own message too, but only a cluster missing a master for the filter's
slot makes it fail: no case here.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, List, Sequence, Tuple

import pytest

import bloomguard
from bloomguard import _lock
from bloomguard._ffi import ffi, lib
from bloomguard._options import OPTIONS, ROTATE_OPTIONS, build_options
from redis_helpers import RedisServer

# (runs one failing call and returns its message, the text it must hold; "" for a writer of the
# shared slot in a case proper: its read of the slot is the old way, which the control checks)
Kind = Tuple[Callable[[], str], str]


def crossed_messages(kinds: Sequence[Kind], until_first: bool) -> List[str]:
    """Two threads per kind fail at once (for 4 s at most, 300 calls each unless ``until_first``,
    which stops at the first crossing); the messages that were not their own."""
    crossed: List[str] = []
    end = time.monotonic() + 4.0

    def failing(message: Callable[[], str], want: str) -> None:
        for _ in range(10 ** 6 if until_first else 300):
            if time.monotonic() > end or (until_first and crossed):
                return
            got = message()
            if want not in got:
                crossed.append("%s raised %r" % (want, got))

    threads = [threading.Thread(target=failing, args=k) for k in kinds for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return crossed


def raised(fn: Callable[[], object], exc_type: type) -> Callable[[], str]:
    """A kind's message function: fn must raise exc_type; its message."""
    def message() -> str:
        try:
            fn()
        except exc_type as e:
            return e.message
        raise AssertionError("%r did not raise %s" % (fn, exc_type.__name__))
    return message


def plain(handle, call: Callable[[object], int], status: int, errmsg_copy) -> Callable[[], str]:
    """A kind's message function for a plain C call (no bg_call) on the handle: it must fail with
    status; returns what the handle's shared slot holds right after - the binding's old read."""
    def message() -> str:
        ptr = handle.enter()
        try:
            st = call(ptr)
            assert st == status, "status %d, wanted %d" % (st, status)
            buf = ffi.new("char[]", 1024)
            errmsg_copy(ptr, buf, 1024)
            return ffi.string(buf).decode("utf-8", "replace")
        finally:
            handle.leave()
    return message


def check(kinds: Sequence[Kind], old_kinds: Sequence[Kind]) -> None:
    crossed = crossed_messages(kinds, until_first=False)
    assert not crossed, "%d calls raised another thread's message, e.g. %s" % (len(crossed), crossed[:3])
    # the negative control: the binding's old read of the shared slot sees others' messages
    assert crossed_messages(old_kinds, until_first=True), \
        "control: the handle's slot never held another thread's message in 4 s"


# --- Filter.lock / Client.lock ---------------------------------------------------------------------

def foreign_options(monkeypatch) -> None:
    """Lock opens the library refuses, each naming its option: the binding's own table holds only
    lock options, so Lock's build_options is made to build a client option (asked for with
    renew=) or a rotation option (subscribe=) instead (BG_ENOTSUP, 'BG_OPT_X is a client option')."""
    def build(given, table):
        if "renew" in given:
            return build_options({"pool_size": 2}, OPTIONS)
        if "subscribe" in given:
            return build_options({"threads": 2}, ROTATE_OPTIONS)
        return build_options(given, table)
    monkeypatch.setattr(_lock, "build_options", build)


def test_filter_lock_opens_raise_their_own_message(client, fname, monkeypatch):
    foreign_options(monkeypatch)
    with client.filter(fname) as f:
        db = build_options({"db": 1}, OPTIONS)
        writer = plain(f._handle, lambda p: lib.bg_lock_open_filter(ffi.new("bg_lock **"), p, db), lib.BG_ENOTSUP,
                       lib.bg_filter_errmsg_copy)
        # the library names the option by its macro, the exception by its keyword
        kinds = [(raised(lambda: f.lock(renew=True), bloomguard.NotSupported), "pool_size is a client option"),
                 (raised(lambda: f.lock(subscribe=True), bloomguard.NotSupported), "threads is a rotation option"),
                 (writer, "")]
        pool = build_options({"pool_size": 2}, OPTIONS)
        threads = build_options({"threads": 2}, ROTATE_OPTIONS)
        old = [(plain(f._handle, lambda p: lib.bg_lock_open_filter(ffi.new("bg_lock **"), p, pool),
                      lib.BG_ENOTSUP, lib.bg_filter_errmsg_copy), "BG_OPT_POOL_SIZE"),
               (plain(f._handle, lambda p: lib.bg_lock_open_filter(ffi.new("bg_lock **"), p, threads),
                      lib.BG_ENOTSUP, lib.bg_filter_errmsg_copy), "BG_OPT_ROTATE_THREADS"),
               (writer, "BG_OPT_DB")]
        check(kinds, old)


def bad_lock_open(name: bytes) -> Callable[[object], int]:
    return lambda p: lib.bg_lock_open(ffi.new("bg_lock **"), p, name, ffi.NULL)


def test_client_lock_opens_raise_their_own_message(client, monkeypatch):
    """Bad names ('{}' splits the lock's keys across cluster slots: BG_EBADNAME, naming the name)
    and a refused option, at once on one client."""
    foreign_options(monkeypatch)
    writer = plain(client._handle, bad_lock_open(b"w{}"), lib.BG_EBADNAME, lib.bg_client_errmsg_copy)
    kinds = [(raised(lambda: client.lock("a{}"), bloomguard.BadName), '"a{}"'),
             (raised(lambda: client.lock("b{"), bloomguard.BadName), '"b{"'),
             (raised(lambda: client.lock("c", renew=True), bloomguard.NotSupported), "pool_size is a client option"),
             (writer, "")]
    old = [(plain(client._handle, bad_lock_open(b"a{}"), lib.BG_EBADNAME, lib.bg_client_errmsg_copy), '"a{}"'),
           (plain(client._handle, bad_lock_open(b"b{"), lib.BG_EBADNAME, lib.bg_client_errmsg_copy), '"b{"'),
           (writer, '"w{}"')]
    check(kinds, old)


# --- Filter.policy ---------------------------------------------------------------------------------

def test_policy_setters_raise_their_own_message(client, fname):
    """Policies the filter refuses (a snapshot max age shorter than the refresh interval), each
    naming its own figures."""
    with client.filter(fname) as f:
        bad = {age: bloomguard.Policy(snapshot_interval=(age + 1000) / 1000, snapshot_max_age=age / 1000)
               for age in (1000, 3000, 6000)}

        def set_policy(age: int) -> None:
            f.policy = bad[age]

        writer = plain(f._handle, lambda p: lib.bg_filter_set_policy(p, bad[6000]._c), lib.BG_EINVAL,
                       lib.bg_filter_errmsg_copy)
        kinds = [(raised(lambda: set_policy(1000), bloomguard.InvalidArgument), "(1000 ms)"),
                 (raised(lambda: set_policy(3000), bloomguard.InvalidArgument), "(3000 ms)"),
                 (writer, "")]
        old = [(plain(f._handle, lambda p, age=age: lib.bg_filter_set_policy(p, bad[age]._c), lib.BG_EINVAL,
                      lib.bg_filter_errmsg_copy), "(%d ms)" % age) for age in (1000, 3000, 6000)]
        check(kinds, old)
        assert f.policy is None


# --- Client.ping -----------------------------------------------------------------------------------

@pytest.fixture
def dead_client():
    """A client whose server is gone: its pings fail (BG_ECONN)."""
    server = RedisServer().start()
    try:
        c = bloomguard.Client(server.url, connect_timeout=2, command_timeout=2)
        server.stop()
        try:
            yield c
        finally:
            c.close()
    finally:
        server.cleanup()


def test_pings_raise_their_own_message(dead_client):
    """Pings failing (no server) while lock opens fail on the same client."""
    c = dead_client
    with pytest.raises(bloomguard.BloomGuardError) as ei:
        c.ping()
    ping_says = ei.value.message
    assert ping_says and '"' not in ping_says, ping_says   # no lock name: the kinds below tell apart
    status = ei.value.code
    writer = plain(c._handle, bad_lock_open(b"w{}"), lib.BG_EBADNAME, lib.bg_client_errmsg_copy)
    kinds = [(raised(c.ping, type(ei.value)), ping_says),
             (raised(lambda: c.lock("a{}"), bloomguard.BadName), '"a{}"'),
             (writer, "")]
    old = [(plain(c._handle, lib.bg_client_ping, status, lib.bg_client_errmsg_copy), ping_says),
           (writer, '"w{}"')]
    check(kinds, old)
