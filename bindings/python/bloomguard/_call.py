"""Per-call objects (bloomguard/call.h): every network call goes through a bg_call of its own, so
its timeout is this call's and its failure message is exactly this call's (bg_call_errmsg), not
the shared handle's latest.

bg_call objects are kept in a small per-thread free list: a bg_call is never used by two calls at
once, and a nested call on the same thread (a fallback callback querying another filter) simply
takes another one.

Callbacks the library runs on the calling thread (the policy fallback) cannot raise through C: they
park their exception with :func:`park_callback_error` and decline; :func:`invoke` raises it once
the C call has returned (pygit2-style), in preference to the call's own status.

Ctrl-C during a wait. A C call runs with the GIL released, and CPython runs a signal's Python
handler only in the main thread, between two bytecodes: while the main thread waits inside the
library (a lock, another rotation, a write-locked filter, the policy's backoff) the handler
cannot run, and no other thread can see the signal. So every bg_call made on the main thread
carries an interrupt callback (bg_call_set_interrupt, ``bgpy_interrupt``) that the library
polls during its waits, every 50 ms at most: cffi takes the GIL back, the first bytecode of the
callback runs the pending handlers, and what one raises (KeyboardInterrupt for SIGINT, whatever
a handler of the application raises) is parked and cancels the wait; :func:`invoke` raises it
once C returns, the wait having left nothing behind (a cancelled lock waiter holds nothing and
withdrew its writer intent). Why not run the C call in a helper thread and wait for it from the
main thread: a per-thread lock's hold belongs to the OS thread that acquired it (bg_lock's
default owner), so it would be the helper's. A SIGINT that is ignored (a background job) runs no handler: the wait goes on.
Calls made on other threads carry no callback (no signal handler can run there).
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Dict, List, Optional, Tuple, cast

from ._answer import Source
from ._errors import BloomGuardError, InvalidArgument, error_for, strerror
from ._ffi import cstr, ffi, lib
from ._handle import Handle
from ._options import seconds_to_ms

__all__ = ["TimeoutArg", "invoke", "invoke_answer", "run_with_call", "run_or_raise", "timeout_ms", "park_callback_error",
           "take_callback_error", "SOURCES", "source_name"]

TimeoutArg = Optional[float]

_local = threading.local()
_MAX_FREE = 4
_MAIN_THREAD = threading.main_thread().ident

#: BG_SOURCE_* -> the name of an answer's source.
SOURCES: Dict[int, Source] = {
    lib.BG_SOURCE_NONE: "none",
    lib.BG_SOURCE_REDIS: "redis",
    lib.BG_SOURCE_SNAPSHOT: "snapshot",
    lib.BG_SOURCE_CALLBACK: "callback",
    lib.BG_SOURCE_ASSUMED_PRESENT: "assumed_present",
    lib.BG_SOURCE_ASSUMED_ABSENT: "assumed_absent",
}


def source_name(code: int) -> Source:
    """The name of a BG_SOURCE_* (one the library added since this binding was built: "source N")."""
    return SOURCES.get(code, cast(Source, "source %d" % code))


# How many parked exceptions await their call (any thread): the common case - none - costs each
# call one read of a module global instead of a thread-local lookup.
_parked = 0


def park_callback_error(exc: BaseException) -> None:
    """Called by a callback running inside a C call on this thread: ``exc`` is raised by that
    call once C returns (the first one parked wins). Every C call that may run such a callback
    goes through :func:`invoke`, which takes it, so none is left over for a later call; a call
    nested in the callback (another filter queried) takes only its own, parked before it returns."""
    global _parked
    if getattr(_local, "cb_error", None) is None:
        _local.cb_error = exc
        _parked += 1


_ONE = (0,)


def _on_interrupt(_userdata: Any) -> int:
    """bgpy_interrupt: polled by a waiting C call of the main thread, with the GIL. The pending
    signal handlers run at the interpreter's next check of its eval breaker: at this function's
    start (3.11+) and, on every version, at the backward jump of the loop below; one that raises
    lands in :func:`_interrupt_raised`."""
    for _ in _ONE:
        pass
    return 0


def _interrupt_raised(_exc_type: Any, exc: BaseException, _tb: Any) -> int:
    """cffi's onerror for bgpy_interrupt: a signal handler raised (KeyboardInterrupt): park it for
    :func:`invoke` and cancel the wait."""
    park_callback_error(exc)
    return 1


ffi.def_extern(name="bgpy_interrupt", error=1, onerror=_interrupt_raised)(_on_interrupt)


def _take_parked() -> Optional[BaseException]:
    global _parked
    exc: Optional[BaseException] = getattr(_local, "cb_error", None)
    if exc is not None:
        _local.cb_error = None
        _parked -= 1
    return exc


def take_callback_error() -> Optional[BaseException]:
    """The exception a callback parked on this thread, taken (None when there is none): for the
    callers that run callbacks outside :func:`invoke` (bloomguard.aio's poll)."""
    return _take_parked() if _parked else None


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
    if threading.get_ident() == _MAIN_THREAD:
        # the free list is per thread: this call stays on the main thread, where handlers run
        lib.bg_call_set_interrupt(out[0], lib.bgpy_interrupt, ffi.NULL)
    return ffi.gc(out[0], lib.bg_call_free)


def _give_back(call: Any) -> None:
    free = getattr(_local, "free", None)
    if free is not None and len(free) < _MAX_FREE:
        free.append(call)


def run_with_call(fn: Callable[[Any], int]) -> int:
    """``fn(call)`` with a bg_call of this thread's free list (on the main thread it carries the
    interrupt callback, so Ctrl-C cancels a wait inside fn's C call) for a call whose handle and
    errors the caller manages itself (rotations); returns fn's status, or raises the exception a
    signal handler (or a callback) parked meanwhile."""
    call = _take()
    try:
        st = fn(call)
        if _parked:
            parked = _take_parked()
            if parked is not None:
                raise parked
        return st
    finally:
        _give_back(call)


def failure(call: Any, st: int) -> BloomGuardError:
    """The exception for a failed call: this call's own message when the library recorded one."""
    msg = cstr(lib.bg_call_errmsg(call)) if lib.bg_call_status(call) == st else ""
    return error_for(st, msg)


def run_or_raise(fn: Callable[[Any], int]) -> None:
    """run_with_call for an open or a begin: a failure raises with that call's own message, read
    while the call is still this one's (there is no handle yet to carry it, or the handle is
    shared by other threads)."""
    raised: List[BloomGuardError] = []

    def on_call(call: Any) -> int:
        st = int(fn(call))
        if st != lib.BG_OK:
            raised.append(failure(call, st))
        return st

    run_with_call(on_call)
    if raised:
        err = raised.pop()
        try:
            raise err
        finally:
            # no cycle through this frame (the traceback holds it): it would keep the caller's
            # frames, and the handles in them, alive until the next garbage collection
            del err


def _run(handle: Handle, fn: Callable[..., int], timeout: TimeoutArg, answer: bool,
         args: Any) -> Tuple[int, str, Optional[BloomGuardError]]:
    ms = timeout_ms(timeout)
    ptr = handle.enter()
    try:
        call = _take()
        try:
            st = lib.bg_call_set_timeout_ms(call, ms)
            if st != lib.BG_OK:
                raise error_for(st, "timeout=%r is out of range: a timeout is more than 0 and at most 3600 seconds "
                                "(None: the client's command timeout)" % (timeout,))
            st = fn(ptr, call, *args)
            if _parked:
                parked = _take_parked()
                if parked is not None:
                    raise parked
            if st != lib.BG_OK:
                err = failure(call, st)
                if st == lib.BG_ETIMEOUT and timeout is not None:
                    err = error_for(st, "timed out after %g s: %s" % (ms / 1000.0, err.message))
                raise err
            if answer:
                msg = cstr(lib.bg_call_errmsg(call))
                degraded = lib.bg_call_degraded_status(call)
                return lib.bg_call_source(call), msg, error_for(degraded, msg) if degraded else None
            return 0, "", None
        finally:
            _give_back(call)
    finally:
        handle.leave()


def invoke(handle: Handle, fn: Callable[..., int], timeout: TimeoutArg, *args: Any) -> None:
    """Runs ``fn(ptr, call, *args)`` (a bg_*_ex function) on the handle with a fresh per-call
    object carrying ``timeout``; raises the mapped exception on failure (or the exception a
    callback raised during the call). The GIL is released for the C call."""
    _run(handle, fn, timeout, False, args)


def invoke_answer(handle: Handle, fn: Callable[..., int], timeout: TimeoutArg,
                  *args: Any) -> Tuple[int, str, Optional[BloomGuardError]]:
    """:func:`invoke` for a query: returns (BG_SOURCE_* of the answer, the message of the failure
    a degraded answer stands in for ("" when Redis answered), that failure as the exception it
    would have raised without a policy (None when Redis answered))."""
    return _run(handle, fn, timeout, True, args)
