"""bloomguard.Lock: a distributed lock in Redis (bloomguard/lock.h).

Exclusive (wire-compatible with Redisson's RLock on ``NAME + ":lock"``), or reader/writer, with a
fencing token per hold, a renewed lease and a wait. The protocol is the C library's; this module
maps modes to names and seconds to milliseconds::

    with client.lock("products") as lock:           # the handle: closed at the end of the block
        with lock.write(wait=5) as token:           # acquired, released at the end of the block
            storage.write(data, fencing_token=token)

Who holds it: by default the Lock object itself (one library lock owner, bg_lock_owner, made for
it), whatever thread calls it: a hold acquired in one thread may be released in another, and a
second acquire through the same Lock re-enters the hold (it does not exclude another thread using
that Lock: give each its own Lock for that). ``owner=LockOwner()`` makes several Lock objects
(one per lock name) one holder; ``per_thread=True`` keeps the old meaning: each thread is its own
holder (only the thread that acquired can release). Two Lock objects are two holders even with
one owner (the holder id's UUID is the handle's). The GIL is released while an acquire waits.
"""
from __future__ import annotations

import threading
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, Dict, Literal, NamedTuple, Optional, Type, Union

from ._call import invoke, run_or_raise
from ._errors import InvalidArgument, Locked, error_for
from ._ffi import cstr, ffi, lib
from ._handle import Handle
from ._options import LOCK_OPTIONS, Seconds, build_options, seconds_to_ms, take_ms_alias

if TYPE_CHECKING:  # pragma: no cover
    from ._client import Client

__all__ = ["Lock", "LockMode", "LockOwner", "Hold", "MODES"]

#: mode name -> BG_LOCK_*
#: A lock mode's name (a test keeps it in step with MODES).
LockMode = Literal["exclusive", "read", "write"]
MODES: Dict[str, int] = {
    "exclusive": lib.BG_LOCK_EXCLUSIVE,
    "read": lib.BG_LOCK_READ,
    "write": lib.BG_LOCK_WRITE,
}
_MODE_NAMES = {v: k for k, v in MODES.items()}

_BUF_SIZE = 1024



class LockOwner:
    """What a hold belongs to (bg_lock_owner): give one to several :class:`Lock` objects
    (``client.lock(name, owner=o)``) to make them one holder, e.g. a job that takes several locks
    in one thread and releases them in another. Its holder id on a Lock is ``"<UUID of the
    Lock>:<seq>"``. Freed when garbage-collected; a hold still held then stays held until its
    Lock is closed (which releases it)."""

    __slots__ = ("_ptr", "__weakref__")

    def __init__(self) -> None:
        out = ffi.new("bg_lock_owner **")
        st = lib.bg_lock_owner_new(out)
        if st != lib.BG_OK:  # pragma: no cover - out of memory
            raise error_for(st, "bg_lock_owner_new: out of memory")
        self._ptr = ffi.gc(out[0], lib.bg_lock_owner_free)

    @property
    def seq(self) -> int:
        """The owner's number (the part after the ':' of its holder ids), unique in the process."""
        return int(lib.bg_lock_owner_seq(self._ptr))

    @property
    def holds(self) -> int:
        """On how many Locks the owner holds (or is acquiring) the lock."""
        return int(lib.bg_lock_owner_holds(self._ptr))

    def __repr__(self) -> str:
        return "<bloomguard.LockOwner %d holds=%d>" % (self.seq, self.holds)


class Hold(NamedTuple):
    """What the Lock's holder holds through it (``Lock.held()``)."""

    #: "exclusive", "read" or "write" (the mode of the acquire that started the hold); None if nothing
    mode: Optional[str]
    #: how many acquires the hold counts (reentrancy; 0 if nothing is held)
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


class _NoTurn:
    """The turn of a per-thread Lock: none is needed (each thread is its own owner)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


_NO_TURN = _NoTurn()


class _Holding:
    """``with lock.hold(...) as token``: acquires on entry, releases on exit."""

    __slots__ = ("_lock", "_mode", "_wait")

    def __init__(self, lock: "Lock", mode: LockMode, wait: Seconds) -> None:
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

    Options (None: the library's default; durations in seconds): ``lease`` (30, as Redisson's
    watchdog), ``renew`` (True: a background thread renews held locks every third of the lease;
    False: a hold ends when its lease runs out), ``subscribe`` (True: waiters listen on the unlock
    channel; False: poll only), ``poll_max`` (longest sleep between two polls; 0.1).
    ``lease_ms`` and ``poll_max_ms`` (milliseconds) are deprecated aliases of ``lease`` and
    ``poll_max``.

    Who holds it: by default this Lock object (its own :class:`LockOwner`), from whatever thread
    it is called: acquire in one thread, release in another; its calls that change the hold take
    turns (an acquire waiting for the lock makes the same Lock's release wait for it). ``owner``:
    that owner instead (shared by several Locks). ``per_thread=True``: each calling thread is its
    own holder, as an RLock belongs to a Java thread (only the thread that acquired can release;
    threads sharing the Lock exclude each other).

    Close it with :meth:`close` or a ``with`` block: that releases every hold still held through it.
    """

    __slots__ = ("_handle", "_name", "_client", "_owner", "_owner_ptr", "_turn", "__weakref__")

    def __init__(self, client: "Client", name: str, *, lease: Optional[Seconds] = None,
                 renew: Optional[bool] = None, subscribe: Optional[bool] = None,
                 poll_max: Optional[Seconds] = None, per_thread: bool = False,
                 owner: Optional[LockOwner] = None, lease_ms: Optional[int] = None,
                 poll_max_ms: Optional[int] = None, _filter: Any = None) -> None:
        if not isinstance(name, str):
            raise TypeError("lock name must be a str, not %s" % type(name).__name__)
        if "\0" in name:
            raise InvalidArgument("lock name must not contain NUL characters")
        chandle = getattr(client, "_handle", None)
        if not isinstance(chandle, Handle) or chandle.kind != "client":
            raise TypeError("client must be a bloomguard.Client, not %s" % type(client).__name__)
        if not isinstance(per_thread, bool):
            raise TypeError("per_thread must be a bool, not %s" % type(per_thread).__name__)
        if owner is not None and not isinstance(owner, LockOwner):
            raise TypeError("owner must be a bloomguard.LockOwner, not %s" % type(owner).__name__)
        if per_thread and owner is not None:
            raise InvalidArgument("per_thread=True and owner= exclude each other: a per-thread "
                                  "lock's holder is the calling thread")
        given: Dict[str, Any] = {"lease": take_ms_alias(lease, lease_ms, "lease", "lease_ms"),
                                 "poll_max": take_ms_alias(poll_max, poll_max_ms, "poll_max", "poll_max_ms")}
        for flag, value in (("renew", renew), ("subscribe", subscribe)):
            if value is not None:
                if not isinstance(value, bool):
                    raise TypeError("%s must be a bool, not %s" % (flag, type(value).__name__))
                given[flag] = int(value)
        opts = build_options({k: v for k, v in given.items() if v is not None}, LOCK_OPTIONS)
        # Filter.lock(): the filter's own lock, opened through the filter handle
        parent = _filter._handle if _filter is not None else chandle
        cptr = parent.enter()
        try:
            out = ffi.new("bg_lock **")
            copts = opts if opts is not None else ffi.NULL
            # a failure raises with its open's own message: the client's (or the filter's) shared
            # slot may hold another thread's failure on that handle meanwhile
            if _filter is not None:
                run_or_raise(lambda call: lib.bg_lock_open_filter_ex(out, call, cptr, copts))
            else:
                cname = name.encode("utf-8")
                run_or_raise(lambda call: lib.bg_lock_open_ex(out, call, cptr, cname, copts))
            self._handle = Handle(out[0], lib.bg_lock_close, "lock")
        finally:
            parent.leave()
            if opts is not None:
                ffi.release(opts)
        self._name = name
        self._client = client
        # NULL: the calling thread's default owner (per_thread); else the Lock's own or the given
        self._owner = None if per_thread else (owner if owner is not None else LockOwner())
        self._owner_ptr = ffi.NULL if self._owner is None else self._owner._ptr
        # the library refuses overlapping calls of one owner on one lock: they take turns here
        self._turn = None if per_thread else threading.Lock()

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
    def per_thread(self) -> bool:
        """True when each calling thread is its own holder (``per_thread=True``)."""
        return self._owner is None

    @property
    def owner(self) -> Optional[LockOwner]:
        """The holder of this Lock's holds (None with ``per_thread=True``: the calling thread)."""
        return self._owner

    @property
    def holder_id(self) -> str:
        """The holder id ``"<UUID>:<seq>"`` (the hash field while it holds; Redisson's RLock puts
        ``"<UUID>:<thread id>"`` there, the same layout): the owner's, or with ``per_thread=True``
        the calling thread's."""
        ptr = self._handle.enter()
        try:
            buf = ffi.new("char[]", _BUF_SIZE)
            lib.bg_lock_holder_id_owner(ptr, self._owner_ptr, buf, _BUF_SIZE)
            return cstr(buf)
        finally:
            self._handle.leave()

    # --- operations ---------------------------------------------------------------------------

    def acquire(self, mode: LockMode = "exclusive", *, wait: Seconds = 0) -> int:
        """Acquires the lock for its holder (see :class:`Lock`) in ``mode`` (``"exclusive"``, ``"read"``,
        ``"write"``), waiting up to ``wait`` seconds (0: one try; at most 3600), and returns the
        hold's fencing token (strictly increasing across holds; a reentrant acquire returns the
        token of the hold it re-enters).

        Raises :class:`~bloomguard.Locked` when still taken after ``wait`` (the message names the
        holder and its lease) or when the holder's hold was lost, :class:`~bloomguard.InvalidArgument`
        for an upgrade from ``"read"``. The GIL is released while it waits; Ctrl-C (or another
        signal whose handler raises) cancels the wait within 50 ms and raises KeyboardInterrupt
        (or the handler's exception), the thread holding nothing and no writer intent left behind
        (bg_call_set_interrupt, see bloomguard._call)."""
        code = _mode_code(mode)
        wait_ms = seconds_to_ms(wait, "wait")
        token = ffi.new("uint64_t *")
        with self._taking_turns():
            return self._acquire_turn(code, wait_ms, token)

    def _taking_turns(self) -> Any:
        return self._turn if self._turn is not None else _NO_TURN

    def _acquire_turn(self, code: int, wait_ms: int, token: Any) -> int:
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
                self._release()
            raise

    def _acquire(self, code: int, wait_ms: int, depth: int, token: Any) -> None:
        # one call whatever the wait: a signal cancels it (the call's interrupt callback)
        invoke(self._handle, lib.bg_lock_acquire_owner_ex, None, self._owner_ptr, code, wait_ms, token)

    def release(self) -> None:
        """Releases one acquire of the holder (from any thread, unless ``per_thread``); the last
        one ends the hold and wakes waiters.

        Raises :class:`~bloomguard.InvalidArgument` when the holder holds nothing through this
        Lock (with ``per_thread=True``: e.g. another thread acquired it), :class:`~bloomguard.Locked`
        when the hold was lost meanwhile (the lease ran out; nothing is held then)."""
        with self._taking_turns():
            self._release()

    def _release(self) -> None:
        invoke(self._handle, lib.bg_lock_release_owner_ex, None, self._owner_ptr)

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
        """What the holder (the owner, or with ``per_thread=True`` the calling thread) holds
        through this Lock (no round trip)."""
        mode = ffi.new("int *")
        count = ffi.new("uint32_t *")
        token = ffi.new("uint64_t *")
        ptr = self._handle.enter()
        try:
            st = lib.bg_lock_held_owner_ex(ptr, ffi.NULL, self._owner_ptr, mode, count, token)
        finally:
            self._handle.leave()
        if st not in (lib.BG_OK, lib.BG_ELOCKED):  # pragma: no cover - only for a NULL handle
            raise error_for(st, "")
        return Hold(_MODE_NAMES.get(mode[0]), int(count[0]), int(token[0]), st == lib.BG_ELOCKED)

    def hold(self, mode: LockMode = "exclusive", *, wait: Seconds = 0) -> _Holding:
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
        """Releases every hold still held through this Lock (any holder's) and frees it. Idempotent."""
        self._handle.close()

    def __enter__(self) -> "Lock":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.close()

    def __repr__(self) -> str:
        return "<bloomguard.Lock %r %s>" % (self._name, "closed" if self.closed else "open")

