"""Native handle ownership shared by every bloomguard object (client, filter; later lock, ...).

A :class:`Handle` owns one C pointer and frees it exactly once:

* explicitly, by ``close()``; when other threads are inside a call on the handle at that moment,
  the pointer is freed by the last of them on its way out, so closing never pulls memory from
  under a running C call;
* otherwise by ``ffi.gc`` when the Python object is garbage (a safety net only).

``stats`` counts opened and freed handles per kind; the tests use it to check that repeated
open/close frees every handle once.
"""
from __future__ import annotations

import threading
import collections
from typing import Any, Callable

from ._errors import Closed
from ._ffi import ffi

__all__ = ["Handle", "stats"]

#: "<kind>.opened" / "<kind>.freed" counters, for tests and debugging.
stats: "collections.Counter[str]" = collections.Counter()
_stats_lock = threading.Lock()


def _count(key: str) -> None:
    with _stats_lock:
        stats[key] += 1


def _destructor(free: Callable[[Any], None], kind: str) -> Callable[[Any], None]:
    def destroy(ptr: Any) -> None:
        free(ptr)
        _count(kind + ".freed")
    return destroy


class Handle:
    """One native handle, its in-flight users and its single release."""

    __slots__ = ("kind", "_ptr", "_lock", "_users", "_closing")

    def __init__(self, ptr: Any, free: Callable[[Any], None], kind: str) -> None:
        self.kind = kind
        self._lock = threading.Lock()
        self._users = 0
        self._closing = False
        self._ptr = ffi.gc(ptr, _destructor(free, kind))
        _count(kind + ".opened")

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

    def close(self) -> None:
        """Idempotent. Frees now, or when the calls in flight on other threads have returned."""
        with self._lock:
            if self._closing:
                return
            self._closing = True
            if self._users == 0:
                self._release_locked()

    def _release_locked(self) -> None:
        ptr, self._ptr = self._ptr, None
        if ptr is not None:
            ffi.release(ptr)  # runs the destructor now and disarms the gc one
