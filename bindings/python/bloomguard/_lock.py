"""bloomguard.Lock: a distributed lock in Redis (bloomguard/lock.h).

Exclusive (wire-compatible with Redisson's RLock on ``NAME + ":lock"``), or reader/writer, with a
fencing token per hold, a renewed lease and a wait. The protocol is the C library's; this module
maps modes to names and seconds to milliseconds::

    with client.lock("products") as lock:           # the handle: closed at the end of the block
        with lock.write(wait=5) as token:           # acquired, released at the end of the block
            storage.write(data, fencing_token=token)

A hold belongs to the Python thread that acquired it (the library keys holds by OS thread, and a
Python thread is one): only that thread can release it, it may acquire again (reentrant), and two
Lock objects are two owners even in one thread. The GIL is released while an acquire waits.
"""
from __future__ import annotations

import math
import time
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, Dict, NamedTuple, Optional, Type, Union

from ._call import invoke
from ._errors import InvalidArgument, Locked, error_for
from ._ffi import cstr, ffi, lib
from ._handle import Handle
from ._options import LOCK_OPTIONS, build_options, seconds_to_ms

if TYPE_CHECKING:  # pragma: no cover
    from ._client import Client

__all__ = ["Lock", "Hold", "MODES"]

#: mode name -> BG_LOCK_*
MODES: Dict[str, int] = {
    "exclusive": lib.BG_LOCK_EXCLUSIVE,
    "read": lib.BG_LOCK_READ,
    "write": lib.BG_LOCK_WRITE,
}
_MODE_NAMES = {v: k for k, v in MODES.items()}

_BUF_SIZE = 1024
Seconds = Union[float, timedelta]

# A wait is made of bg_lock_acquire calls of at most this many ms, so that the interpreter runs
# its signal handlers (Ctrl-C) in between; the GIL is released inside each. Between two slices the
# waiter's writer intent stays recorded (it expires 2 s after its last renewal).
_WAIT_SLICE_MS = 1000
_MAX_WAIT_MS = 3600000  # bg_lock_acquire's limit


class Hold(NamedTuple):
    """What the calling thread holds through a :class:`Lock` (``Lock.held()``)."""

    #: "exclusive", "read" or "write" (the mode of the acquire that started the hold); None if nothing
    mode: Optional[str]
    #: how many acquires of the thread the hold counts (reentrancy; 0 if nothing is held)
    depth: int
    #: the hold's fencing token (0 if nothing is held)
    token: int
    #: True when the renewal thread found the hold gone (its lease ran out): release it
    lost: bool


def _mode_code(mode: str) -> int:
    if not isinstance(mode, str):
        raise TypeError("mode must be a str (%s), not %s" % (", ".join(MODES), type(mode).__name__))
    try:
        return MODES[mode]
    except KeyError:
        raise InvalidArgument("unknown lock mode %r (known: %s)" % (mode, ", ".join(MODES))) from None


class _Holding:
    """``with lock.hold(...) as token``: acquires on entry, releases on exit (same thread)."""

    __slots__ = ("_lock", "_mode", "_wait")

    def __init__(self, lock: "Lock", mode: str, wait: Seconds) -> None:
        _mode_code(mode)
        self._lock = lock
        self._mode = mode
        self._wait = wait

    def __enter__(self) -> int:
        return self._lock.acquire(self._mode, wait=self._wait)

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        if exc is None:
            self._lock.release()  # a lost hold raises Locked here: the block was not protected
            return
        try:
            self._lock.release()
        except BaseException as release_exc:  # the block's exception is the one that matters
            note = getattr(exc, "add_note", None)
            if note is not None:
                note("bloomguard: releasing the lock failed too (%r)" % (release_exc,))


class Lock:
    """A lock handle for the Redis key ``name + ":lock"`` on a :class:`Client`
    (``client.lock(name)``; no I/O until the first acquire).

    Options (None: the library's default): ``lease_ms`` (30000, as Redisson's watchdog),
    ``renew`` (True: a background thread renews held locks every third of the lease; False: a
    hold ends when its lease runs out), ``subscribe`` (True: waiters listen on the unlock channel;
    False: poll only), ``poll_max_ms`` (longest sleep between two polls; 100).

    Share it between threads freely: each thread acquires and releases for itself. Close it with
    :meth:`close` or a ``with`` block: that releases every hold still held through it.
    """

    __slots__ = ("_handle", "_name", "_client", "__weakref__")

    def __init__(self, client: "Client", name: str, *, lease_ms: Optional[int] = None,
                 renew: Optional[bool] = None, subscribe: Optional[bool] = None,
                 poll_max_ms: Optional[int] = None, _filter: Any = None) -> None:
        if not isinstance(name, str):
            raise TypeError("lock name must be a str, not %s" % type(name).__name__)
        if "\0" in name:
            raise InvalidArgument("lock name must not contain NUL characters")
        chandle = getattr(client, "_handle", None)
        if not isinstance(chandle, Handle) or chandle.kind != "client":
            raise TypeError("client must be a bloomguard.Client, not %s" % type(client).__name__)
        given: Dict[str, Any] = {"lease_ms": lease_ms, "poll_max_ms": poll_max_ms}
        for flag, value in (("renew", renew), ("subscribe", subscribe)):
            if value is not None:
                if not isinstance(value, bool):
                    raise TypeError("%s must be a bool, not %s" % (flag, type(value).__name__))
                given[flag] = int(value)
        opts = build_options({k: v for k, v in given.items() if v is not None}, LOCK_OPTIONS)
        # Filter.lock(): the filter's own lock, opened through the filter handle
        owner = _filter._handle if _filter is not None else chandle
        cptr = owner.enter()
        try:
            out = ffi.new("bg_lock **")
            copts = opts if opts is not None else ffi.NULL
            if _filter is not None:
                st = lib.bg_lock_open_filter(out, cptr, copts)
            else:
                st = lib.bg_lock_open(out, cptr, name.encode("utf-8"), copts)
            if st != lib.BG_OK:  # the message is on the client (or the filter)
                buf = ffi.new("char[]", _BUF_SIZE)
                (lib.bg_filter_errmsg_copy if _filter is not None else lib.bg_client_errmsg_copy)(cptr, buf, _BUF_SIZE)
                raise error_for(st, cstr(buf))
            self._handle = Handle(out[0], lib.bg_lock_close, "lock")
        finally:
            owner.leave()
            if opts is not None:
                ffi.release(opts)
        self._name = name
        self._client = client

    # --- properties ---------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The name given (the key is ``name + ":lock"``)."""
        return self._name

    @property
    def client(self) -> "Client":
        """The client this lock was opened on."""
        return self._client

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._handle.closed

    @property
    def key(self) -> str:
        """The lock's Redis key: ``name + ":lock"`` (what Redisson's ``getLock`` is given)."""
        ptr = self._handle.enter()
        try:
            return cstr(lib.bg_lock_key(ptr))
        finally:
            self._handle.leave()

    @property
    def holder_id(self) -> str:
        """The calling thread's holder id ``"<UUID>:<thread id>"`` (the hash field while it holds)."""
        ptr = self._handle.enter()
        try:
            buf = ffi.new("char[]", _BUF_SIZE)
            lib.bg_lock_holder_id(ptr, buf, _BUF_SIZE)
            return cstr(buf)
        finally:
            self._handle.leave()

    # --- operations ---------------------------------------------------------------------------

    def acquire(self, mode: str = "exclusive", *, wait: Seconds = 0) -> int:
        """Acquires the lock for the calling thread in ``mode`` (``"exclusive"``, ``"read"``,
        ``"write"``), waiting up to ``wait`` seconds (0: one try; at most 3600), and returns the
        hold's fencing token (strictly increasing across holds; a reentrant acquire returns the
        token of the hold it re-enters).

        Raises :class:`~bloomguard.Locked` when still taken after ``wait`` (the message names the
        holder and its lease) or when this thread's hold was lost, :class:`~bloomguard.InvalidArgument`
        for an upgrade from ``"read"``. The GIL is released while it waits; the wait is made in
        slices of 1 s, so Ctrl-C (and other signals) are handled meanwhile."""
        code = _mode_code(mode)
        wait_ms = seconds_to_ms(wait, "wait")
        token = ffi.new("uint64_t *")
        depth = self.held().depth
        try:
            self._acquire(code, wait_ms, depth, token)
            return int(token[0])
        except Locked:
            raise
        except BaseException:
            # a signal (Ctrl-C) is raised at the first bytecode after the C call, which may have
            # succeeded: never leave the caller a hold it does not know about
            if self.held().depth > depth:
                self.release()
            raise

    def _acquire(self, code: int, wait_ms: int, depth: int, token: Any) -> None:
        if wait_ms <= _WAIT_SLICE_MS or wait_ms > _MAX_WAIT_MS or depth > 0:
            # one call: a short wait, one the library will reject, or a reentrant acquire (no wait)
            invoke(self._handle, lib.bg_lock_acquire_ex, None, code, wait_ms, token)
            return
        deadline = time.monotonic() + wait_ms / 1000.0
        while True:
            left_ms = max(0, math.ceil((deadline - time.monotonic()) * 1000.0))
            try:
                invoke(self._handle, lib.bg_lock_acquire_ex, None, code, min(left_ms, _WAIT_SLICE_MS), token)
                return
            except Locked:
                if left_ms <= _WAIT_SLICE_MS:
                    raise  # the last slice: its message names the holder

    def release(self) -> None:
        """Releases one acquire of the calling thread; the last one ends the hold and wakes waiters.

        Raises :class:`~bloomguard.InvalidArgument` when this thread holds nothing through this
        Lock (e.g. another thread acquired it), :class:`~bloomguard.Locked` when the hold was lost
        meanwhile (the lease ran out; the thread then holds nothing)."""
        invoke(self._handle, lib.bg_lock_release_ex, None)

    def retire(self) -> bool:
        """Retires the lock's name: deletes its fence counter (and its readers / writers keys) -
        only when nobody holds the lock (in any mode, from any process, Redisson's RLock
        included) and no writer waits, checked and deleted in one server-side step. Returns True
        if a fence key existed. Raises :class:`~bloomguard.Locked` (naming a holder) otherwise;
        nothing is deleted then.

        The fence key otherwise lives forever, on purpose: it keeps fencing tokens from going
        backwards. After ``retire()`` the name's tokens restart from 1, so retire only a name that
        will not be locked again while tokens drawn from it may still be checked."""
        deleted = ffi.new("int *")
        invoke(self._handle, lib.bg_lock_retire_ex, None, deleted)
        return bool(deleted[0])

    def held(self) -> Hold:
        """What the calling thread holds through this Lock (no round trip)."""
        mode = ffi.new("int *")
        count = ffi.new("uint32_t *")
        token = ffi.new("uint64_t *")
        ptr = self._handle.enter()
        try:
            st = lib.bg_lock_held(ptr, mode, count, token)
        finally:
            self._handle.leave()
        if st not in (lib.BG_OK, lib.BG_ELOCKED):  # pragma: no cover - only for a NULL handle
            raise error_for(st, "")
        return Hold(_MODE_NAMES.get(mode[0]), int(count[0]), int(token[0]), st == lib.BG_ELOCKED)

    def hold(self, mode: str = "exclusive", *, wait: Seconds = 0) -> _Holding:
        """A context manager: ``with lock.hold("write", wait=5) as token:`` acquires on entry
        (returning the fencing token) and releases on exit. A release that fails after a block
        that ended normally raises (:class:`~bloomguard.Locked`: the hold was lost meanwhile)."""
        return _Holding(self, mode, wait)

    def exclusive(self, *, wait: Seconds = 0) -> _Holding:
        """``hold("exclusive", wait=wait)``: the Redisson-RLock-compatible hold."""
        return _Holding(self, "exclusive", wait)

    def read(self, *, wait: Seconds = 0) -> _Holding:
        """``hold("read", wait=wait)``: shared with other readers."""
        return _Holding(self, "read", wait)

    def write(self, *, wait: Seconds = 0) -> _Holding:
        """``hold("write", wait=wait)``: excludes readers and writers (and Redisson RLock holders)."""
        return _Holding(self, "write", wait)

    def close(self) -> None:
        """Releases every hold still held through this Lock (any thread's), stops its renewal
        thread and frees it. Idempotent."""
        self._handle.close()

    def __enter__(self) -> "Lock":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.close()

    def __repr__(self) -> str:
        return "<bloomguard.Lock %r %s>" % (self._name, "closed" if self.closed else "open")

