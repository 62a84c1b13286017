"""Events of a client (bloomguard/observe.h) in Python: the logger ``bloomguard`` and listeners.

Every :class:`~bloomguard.Client` installs the library's observer when it opens (the C callback
``bgpy_observe_gate`` -> ``bgpy_observe``, cffi ``extern "Python"``, declared in build_ffi.py).
The library calls it on the thread where the event happens - a query's, a lock's renewal thread,
the cluster map's refresher - with the GIL released; cffi takes the GIL for :func:`_on_event`,
which is kept small: it finds the client's :class:`Sink` (by a number, as the fallback does:
nothing is touched once the client is gone), makes an :class:`Event`, logs it and hands it to
the client's listeners. No exception leaves it (a listener's is logged at DEBUG and dropped).
The observer runs while the library may hold a lock of the connection concerned: listeners must
return quickly and must not call bloomguard.

Levels: WARNING for a breaker that opens, degraded answers, a failover, a lost connection or
lock, and a rotation that failed; INFO for the others (rotations begun, committed or aborted
when asked, the breaker half-open and closed, the cluster map loaded or changed). The messages
come from the library, which never puts a password in one; the records carry the event as
``record.bloomguard_event`` (an :class:`Event`).

At interpreter exit the gate is closed (``bgpy_observe_stop``), so that no library thread enters
Python while it finalizes.
"""
from __future__ import annotations

import atexit
import itertools
import logging
import threading
import weakref
from typing import Any, Callable, Dict, List

from ._call import park_callback_error
from ._ffi import cstr, ffi, lib

__all__ = ["Event", "EventListener", "Sink", "LOGGER", "EVENT_KINDS", "install"]

#: The library's logger.
LOGGER = logging.getLogger("bloomguard")
LOGGER.addHandler(logging.NullHandler())

#: BG_EVENT_* -> its name ("breaker_open", ...)
EVENT_KINDS: Dict[int, str] = {
    value: cstr(lib.bg_event_name(value))
    for value in (getattr(lib, n) for n in dir(lib) if n.startswith("BG_EVENT_") and n != "BG_EVENT_NVALUES")
}

_WARNING_KINDS = {"breaker_open", "degraded", "failover", "connection_lost", "lock_lost"}


class Event:
    """One event of a client (bloomguard/observe.h): ``kind`` (``"breaker_open"``, ``"degraded"``,
    ``"rotation_commit"``, ...), ``name`` (the filter or lock, ``""`` for the client's own:
    connections, the cluster map, a failover), ``message`` (for a human), and the values: ``status``
    (a BG_* status code: the failure, 0 when none), ``source`` (degraded: where the answer came
    from), ``count`` (breaker open: consecutive failures; degraded: answers since the last event;
    cluster map: slots that moved; connection lost: its round trips; lock lost: the fencing
    token), ``strategy``, ``items``, ``bytes`` (rotations), ``duration`` (seconds: a rotation's since
    its begin, how long the breaker was not closed, or its cooldown when it opens), ``first`` (the
    cluster map: the first one loaded)."""

    __slots__ = ("kind", "name", "message", "status", "source", "count", "strategy", "items", "bytes", "duration",
                 "first")

    def __init__(self, kind: str, name: str, message: str, status: int = 0, source: int = 0, count: int = 0,
                 strategy: int = 0, items: int = 0, bytes: int = 0, duration: float = 0.0, first: bool = False) -> None:
        self.kind = kind
        self.name = name
        self.message = message
        self.status = status
        self.source = source
        self.count = count
        self.strategy = strategy
        self.items = items
        self.bytes = bytes
        self.duration = duration
        self.first = first

    def __repr__(self) -> str:
        return "Event(%s)" % ", ".join("%s=%r" % (k, getattr(self, k)) for k in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Event) and all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    __hash__ = None  # type: ignore[assignment]

    @property
    def level(self) -> int:
        """The logging level it is logged at."""
        if self.kind in _WARNING_KINDS or (self.kind == "rotation_abort" and self.status != lib.BG_EABORTED):
            return logging.WARNING
        return logging.INFO


#: A listener: called with each Event on the thread where it happened.
EventListener = Callable[[Event], Any]


class Sink:
    """Where one client's events go: the logger, and its listeners. Its id is the observer's userdata."""

    __slots__ = ("id", "listeners", "_lock", "__weakref__")

    def __init__(self) -> None:
        self.listeners: List[EventListener] = []
        self._lock = threading.Lock()
        self.id = 0
        _register(self)

    def add(self, fn: EventListener) -> None:
        if not callable(fn):
            raise TypeError("an event listener must be callable, not %s" % type(fn).__name__)
        with self._lock:
            self.listeners = self.listeners + [fn]

    def remove(self, fn: EventListener) -> None:
        with self._lock:
            self.listeners = [f for f in self.listeners if f != fn]

    def deliver(self, event: Event) -> None:
        if LOGGER.isEnabledFor(event.level):
            LOGGER.log(event.level, "%s", event.message, extra={"bloomguard_event": event})
        for fn in self.listeners:  # a copy-on-write list: no lock here
            try:
                fn(event)
            except Exception:  # a listener's failure must not reach the library
                LOGGER.debug("an event listener failed", exc_info=True)


# id -> weak reference to the Sink. Plain references, no callbacks, and no WeakValueDictionary
# (whose callbacks run Python code when a client is freed: no Python code runs in a finalizer,
# _handle.py); dead entries are dropped when sinks are made, the table rebuilt whole (a reader on
# another thread sees the old table or the new one).
_sinks: Dict[int, "weakref.ref[Sink]"] = {}
_prune_at = 64
_ids = itertools.count(1)
_ids_lock = threading.Lock()


def _register(sink: "Sink") -> None:
    global _sinks, _prune_at
    with _ids_lock:
        sink.id = next(_ids)
        table = dict(_sinks)
        table[sink.id] = weakref.ref(sink)
        if len(table) >= _prune_at:
            table = {k: r for k, r in table.items() if r() is not None}
            _prune_at = max(64, 2 * len(table))
        _sinks = table


def _event(kind: int, name: Any, values: Any, nvalues: int, message: Any) -> Event:
    v = [int(values[i]) for i in range(min(int(nvalues), lib.BG_EVENT_NVALUES))]
    return Event(
        kind=EVENT_KINDS.get(kind, "event_%d" % kind),
        name=cstr(name),
        message=cstr(message),
        status=v[lib.BG_EV_STATUS],
        source=v[lib.BG_EV_SOURCE],
        count=v[lib.BG_EV_COUNT],
        strategy=v[lib.BG_EV_STRATEGY],
        items=v[lib.BG_EV_ITEMS],
        bytes=v[lib.BG_EV_BYTES],
        duration=v[lib.BG_EV_DURATION_US] / 1e6,
        first=bool(v[lib.BG_EV_FIRST]),
    )


def _on_event(userdata: Any, kind: int, name: Any, values: Any, nvalues: int, message: Any) -> None:
    try:
        ref = _sinks.get(int(ffi.cast("uintptr_t", userdata)))
        sink = ref() if ref is not None else None
        if sink is not None:
            sink.deliver(_event(kind, name, values, nvalues, message))
    except Exception:  # nothing may cross into C
        pass
    except BaseException as exc:  # KeyboardInterrupt on the main thread: raised by its call once C returns
        park_callback_error(exc)


ffi.def_extern(name="bgpy_observe")(_on_event)


def install(cptr: Any) -> Sink:
    """A sink for the C client cptr, installed as its observer."""
    sink = Sink()
    st = lib.bg_client_set_observer(cptr, lib.bgpy_observe_gate, ffi.cast("void *", sink.id))
    if st != lib.BG_OK:  # pragma: no cover - out of memory
        from ._errors import error_for, strerror

        raise error_for(st, "bg_client_set_observer: %s" % strerror(st))
    return sink


@atexit.register
def _stop() -> None:
    lib.bgpy_observe_stop()
