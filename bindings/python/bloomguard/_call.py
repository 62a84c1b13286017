"""Per-call objects (bloomguard/call.h): every network call goes through a bg_call of its own, so
its timeout is this call's and its failure message is exactly this call's (bg_call_errmsg), not
the shared handle's latest.

bg_call objects are kept in a small per-thread free list: a bg_call is never used by two calls at
once, and a nested call on the same thread (a future callback) simply takes another one.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Optional

from ._errors import BloomGuardError, InvalidArgument, error_for, strerror
from ._ffi import cstr, ffi, lib
from ._handle import Handle
from ._options import seconds_to_ms

__all__ = ["TimeoutArg", "invoke", "timeout_ms"]

TimeoutArg = Optional[float]

_local = threading.local()
_MAX_FREE = 4


def timeout_ms(timeout: TimeoutArg) -> int:
    """A per-call ``timeout=`` (seconds) in ms; None -> 0, the client's command timeout."""
    if timeout is None:
        return 0
    ms = seconds_to_ms(timeout, "timeout")
    if ms <= 0:
        raise InvalidArgument("timeout must be positive (or None for the client's command timeout), got %r"
                              % (timeout,))
    return ms


def _take() -> Any:
    free = getattr(_local, "free", None)
    if free is None:
        free = _local.free = []
    if free:
        return free.pop()
    out = ffi.new("bg_call **")
    st = lib.bg_call_new(out)
    if st != lib.BG_OK:
        raise error_for(st, "bg_call_new: %s" % strerror(st))
    return ffi.gc(out[0], lib.bg_call_free)


def _give_back(call: Any) -> None:
    free = getattr(_local, "free", None)
    if free is not None and len(free) < _MAX_FREE:
        free.append(call)


def failure(call: Any, st: int) -> BloomGuardError:
    """The exception for a failed call: this call's own message when the library recorded one."""
    msg = cstr(lib.bg_call_errmsg(call)) if lib.bg_call_status(call) == st else ""
    return error_for(st, msg)


def invoke(handle: Handle, fn: Callable[..., int], timeout: TimeoutArg, *args: Any) -> None:
    """Runs ``fn(ptr, call, *args)`` (a bg_*_ex function) on the handle with a fresh per-call
    object carrying ``timeout``; raises the mapped exception on failure. The GIL is released
    for the C call."""
    ms = timeout_ms(timeout)
    ptr = handle.enter()
    try:
        call = _take()
        try:
            st = lib.bg_call_set_timeout_ms(call, ms)
            if st != lib.BG_OK:
                raise error_for(st, "timeout=%r (%d ms) rejected by bg_call_set_timeout_ms: %s"
                                % (timeout, ms, strerror(st)))
            st = fn(ptr, call, *args)
            if st != lib.BG_OK:
                raise failure(call, st)
        finally:
            _give_back(call)
    finally:
        handle.leave()
