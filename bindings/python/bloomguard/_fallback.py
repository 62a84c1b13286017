"""The policy fallback: a Python callable behind the C library's ``bg_fallback_fn``.

The library calls ``bgpy_fallback`` (cffi ``extern "Python"``, declared in build_ffi.py) on the
thread making the query, with the GIL released by that query's C call; cffi takes the GIL back for
the Python function. The C side copies a policy's (fn, userdata) into every filter it is given to,
and may still call it from a query that started before the filter's policy was replaced. So the
userdata is not a pointer to a Python object but a number looked up in :data:`_registry` (weak
references): a lookup that finds nothing (the policy is gone) declines, it never touches freed
memory. (A Filter keeps its previous policy alive until the next replacement, so only a query
that outlives two replacements can meet that.)

The user's function gets the batch as ``list[bytes]`` and returns one truthy/falsy answer per
item, or None to decline (the chain moves on). An exception it raises cannot cross C: it is parked
for the calling thread (``_call.park_callback_error``), the callback declines, and the query
raises that exception once the C call has returned.
"""
from __future__ import annotations

import itertools
import threading
import weakref
from typing import Any, Callable, List, Optional, Sequence

from ._call import park_callback_error
from ._ffi import ffi, lib

__all__ = ["FallbackFn", "Fallback"]

#: fallback(items) -> one answer per item (truthy = present), or None to decline.
FallbackFn = Callable[[List[bytes]], Optional[Sequence[Any]]]

_registry: "weakref.WeakValueDictionary[int, Fallback]" = weakref.WeakValueDictionary()
_ids = itertools.count(1)
_ids_lock = threading.Lock()


class Fallback:
    """One registered fallback function; its id is the userdata the C library passes back."""

    __slots__ = ("fn", "id", "__weakref__")

    def __init__(self, fn: FallbackFn) -> None:
        if not callable(fn):
            raise TypeError("fallback must be a callable (or None), not %s" % type(fn).__name__)
        self.fn = fn
        with _ids_lock:
            self.id = next(_ids)
        _registry[self.id] = self

    @property
    def userdata(self) -> Any:
        return ffi.cast("void *", self.id)

    def answer(self, items: Any, lens: Any, n: int, present: Any) -> int:
        """Runs the user's function for one batch; 0 when it answered (present[] written)."""
        try:
            batch = [ffi.unpack(ffi.cast("const char *", items[i]), lens[i]) if lens[i] else b""
                     for i in range(n)]
            result = self.fn(batch)
            if result is None:
                return 1  # declined
            if isinstance(result, (bool, str, bytes)) or not hasattr(result, "__len__"):
                raise TypeError("a fallback must return a sequence with one answer per item (or None to "
                                "decline), not %s" % type(result).__name__)
            if len(result) != n:
                raise ValueError("the fallback returned %d answers for %d items" % (len(result), n))
            ffi.memmove(present, bytes(1 if x else 0 for x in result), n)
            return 0
        except BaseException as exc:  # KeyboardInterrupt too: it must reach the caller, not be lost in C
            park_callback_error(exc)
            return 1


def _on_fallback(userdata: Any, items: Any, lens: Any, n: int, present: Any) -> int:
    fallback = _registry.get(int(ffi.cast("uintptr_t", userdata)))
    if fallback is None:  # its policy was dropped while a query that started with it ran
        return 1
    return fallback.answer(items, lens, n, present)


# error=1: should anything escape _on_fallback itself, the fallback declines.
ffi.def_extern(name="bgpy_fallback", error=1)(_on_fallback)

#: The C function pointer given to bg_policy_set_fallback.
C_FALLBACK = lib.bgpy_fallback
