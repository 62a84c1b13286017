"""Native handle ownership shared by every bloomguard object (client, filter, lock, rotation).

A :class:`Handle` owns one C pointer and frees it exactly once:

* explicitly, by ``close()``; when other threads are inside a call on the handle at that moment,
  the pointer is freed by the last of them on its way out, so closing never pulls memory from
  under a running C call;
* otherwise by ``ffi.gc`` when the Python object is garbage (a safety net only).

**No Python code runs in a finalizer.** ``ffi.gc`` is armed with the library's C close function
itself (``lib.bg_filter_close`` ...): a Python destructor could be interrupted by a signal, and a
KeyboardInterrupt raised inside a finalizer is printed as "Exception ignored ..." and lost (issue
11, item 4). What a Python destructor used to do is done without one:

* *Keeping what the native handle uses alive* (a rotation uses its filter's ``bg_filter`` and its
  progress callback's userdata until ``bg_rotation_free``): ``keep=`` objects are held by a
  module-level registry entry, next to a weak reference to the handle's own cdata. Being
  reachable from the module, they are never part of a garbage cycle, so the cyclic collector
  cannot finalize them before the handle (it finalizes a cycle's objects in no particular
  order). The entry is dropped when the handle is closed, or by the next :func:`_sweep` after
  the cdata is gone (sweeps run when handles are opened or closed and when :data:`stats` is read,
  never in a finalizer).
* *A filter closed while a rotation still uses it* (:meth:`Handle.pin`): its close drops the
  handle's own reference instead of freeing, and the native filter is closed by its cdata's C
  destructor when the rotation lets go of it.
* *Counting frees* (:data:`stats`): an explicit close counts at once; a handle freed by the
  garbage collector is counted by the first sweep that finds its weak reference dead.

Clients need nothing of this: the C library counts references from filters and locks to their
client (a filter keeps working after its client was closed), and locks copy what they need of a
filter when opened.

``stats`` counts opened and freed handles per kind; the tests use it to check that repeated
open/close frees every handle once.
"""
from __future__ import annotations

import itertools
import threading
import weakref
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from ._errors import Closed
from ._ffi import ffi

__all__ = ["Handle", "stats"]

_lock = threading.Lock()
_counts: Dict[str, int] = {}
# id -> (weak reference to the handle's gc cdata, kind, objects kept alive until that cdata is gone)
_live: Dict[int, Tuple["weakref.ref[Any]", str, Tuple[Any, ...]]] = {}
_ids = itertools.count()
_sweep_at = 64  # sweep when _live reaches this size (doubles with the live handles: amortized O(1))


def _bump(key: str) -> None:
    """Adds one to a counter; _lock held."""
    _counts[key] = _counts.get(key, 0) + 1


def _sweep() -> None:
    """Counts the handles the garbage collector freed and lets go of what they kept alive.

    Dropping a kept cdata may free it (its C destructor runs, no Python code) and so make another
    entry dead: repeat until a pass finds nothing (bounded by the number of entries)."""
    global _sweep_at
    for _ in range(len(_live) + 1):
        dropped: List[Tuple[Any, ...]] = []
        with _lock:
            for key in [k for k, (ref, _, _) in _live.items() if ref() is None]:
                _, kind, keep = _live.pop(key)
                _bump(kind + ".freed")
                if keep:
                    dropped.append(keep)
            _sweep_at = max(64, 2 * len(_live))
        if not dropped:
            return
        del dropped  # outside _lock: may close native handles


class _Stats(Mapping[str, int]):
    """Read-only "<kind>.opened" / "<kind>.freed" counters (0 for a key never counted); reading
    sweeps first, so the handles the garbage collector has freed are counted."""

    def __getitem__(self, key: str) -> int:
        _sweep()
        with _lock:
            return _counts.get(key, 0)

    def __iter__(self) -> Iterator[str]:
        _sweep()
        with _lock:
            return iter(list(_counts))

    def __len__(self) -> int:
        with _lock:
            return len(_counts)


#: "<kind>.opened" / "<kind>.freed" counters, for tests and debugging.
stats: Mapping[str, int] = _Stats()


class Handle:
    """One native handle, its in-flight users and its single release."""

    __slots__ = ("kind", "_ptr", "_lock", "_users", "_closing", "_pins", "_id", "_pinned")

    def __init__(self, ptr: Any, close: Any, kind: str, keep: Sequence[Any] = (),
                 pinned: Sequence["Handle"] = ()) -> None:
        """``close``: the library's C function freeing ``ptr`` (a ``lib`` function, never a Python
        one: it is the finalizer). ``keep``: objects that must stay alive until the native handle
        is freed (other handles' cdata from :meth:`pin`, callback userdata). ``pinned``: the
        handles those pins came from, unpinned when this one is closed."""
        self.kind = kind
        self._lock = threading.Lock()
        self._users = 0
        self._closing = False
        self._pins = 0
        self._pinned: Tuple[Handle, ...] = tuple(pinned)
        self._ptr = ffi.gc(ptr, close)
        self._id = next(_ids)
        with _lock:
            _live[self._id] = (weakref.ref(self._ptr), kind, tuple(keep))
            _bump(kind + ".opened")
            full = len(_live) >= _sweep_at
        if full:
            _sweep()

    @property
    def closed(self) -> bool:
        return self._closing

    def enter(self) -> Any:
        """The pointer, for one call; pair with :meth:`leave`. Raises :class:`Closed` once closed."""
        with self._lock:
            if self._closing:
                raise Closed("this %s is closed" % self.kind)
            self._users += 1
            return self._ptr

    def leave(self) -> None:
        with self._lock:
            self._users -= 1
            if self._closing and self._users == 0:
                self._release_locked()

    def pin(self) -> Any:
        """The gc cdata, for a native handle that uses this one until it is freed itself: give it
        as ``keep=`` (and this handle as ``pinned=``) to that handle's :class:`Handle`. While
        pinned, :meth:`close` does not free the native handle: its C destructor runs when the
        last pin lets go. Raises :class:`Closed` once closed."""
        with self._lock:
            if self._closing:
                raise Closed("this %s is closed" % self.kind)
            self._pins += 1
            return self._ptr

    def unpin(self) -> None:
        with self._lock:
            self._pins -= 1

    def close(self) -> None:
        """Idempotent. Frees now, or when the calls in flight on other threads have returned (or,
        while pinned, when the handles that pinned it are freed)."""
        with self._lock:
            if self._closing:
                return
            self._closing = True
            if self._users == 0:
                self._release_locked()

    def _release_locked(self) -> None:
        ptr, self._ptr = self._ptr, None
        if ptr is None:
            return
        if self._pins > 0:
            return  # only our reference goes: the pins hold the cdata, its C destructor frees it
        ffi.release(ptr)  # runs the C close now and disarms the gc one
        with _lock:
            entry = _live.pop(self._id, None)
            if entry is not None:
                _bump(self.kind + ".freed")
        for other in self._pinned:
            other.unpin()
        del entry  # lets go of what the native handle kept alive (may free a closed, pinned handle)
        if len(_live) >= _sweep_at:
            _sweep()
