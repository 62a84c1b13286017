"""bloomguard: Redisson-compatible Bloom filters in Redis, rebuilt live without reader errors.

A thin cffi binding of the bloomguard C library::

    import bloomguard

    with bloomguard.Client("redis://127.0.0.1:6379", command_timeout=0.5) as client:
        f = client.filter("products")
        f.init(1_000_000, 0.01)          # Redisson's tryInit
        f.add("sku-42")
        "sku-42" in f                    # True
        f.contains_many(["sku-42", "sku-43"], timeout=0.2)
        with f.rotate(2_000_000, 0.01) as rot:   # rebuild live: commit on success, abort on error
            rot.add_many(["sku-42", "sku-43"])

        # what a query answers when Redis cannot, and where each answer came from
        policy = bloomguard.Policy(on_connection=["retry", "callback", "assume_present"],
                                   fallback=lambda items: [db_has(i) for i in items])
        g = client.filter("users", policy=policy)
        g.query("u-1")                   # Answer(present=True, source='callback', failure='...')

        with client.lock("products") as lock, lock.write(wait=5) as token:
            ...                          # token: the fencing token of this hold

Modules, one per concept of the C API: ``_client`` (Client), ``_filter`` (Filter), ``_hash``
(hash128, indexes, optimal_params), ``_errors`` (the exception per status code), ``_options``,
``_call`` (per-call objects: timeout and message of one call), ``_handle`` (native handle
ownership), ``_rotation`` (Rotation: ``Filter.rotate``, rebuilding a live filter), ``_lock``
(Lock), ``_policy`` (Policy), ``_fallback`` (the policy's Python fallback behind the C callback),
``_answer`` (Answer, Answers: answers with provenance), ``_stats`` (a filter's counters), ``_events``
(Event: the client's events, logged to ``logging.getLogger("bloomguard")``), ``_metrics`` (what
``bloomguard.otel`` and ``bloomguard.prometheus`` export: the C library's histograms and counters).
"""
from __future__ import annotations

from ._answer import Answer, Answers, Source
from ._client import Client
from ._events import Event
from ._errors import (
    Aborted,
    AuthError,
    BadName,
    BadParams,
    BadURL,
    BloomGuardError,
    Cancelled,
    TlsError,
    Full,
    Closed,
    ConfigChanged,
    ConnectionError,
    Corrupt,
    InvalidArgument,
    Locked,
    NotInitialized,
    NotSupported,
    OutOfMemory,
    ProtocolError,
    RotationInProgress,
    ServerError,
    Timeout,
    WrongType,
    error_for,
    strerror,
)
from ._ffi import cstr as _cstr
from ._ffi import lib as _lib
from ._filter import Filter, FilterInfo, FilterKind, NativeInfo
from ._lock import Hold, Lock, LockMode, LockOwner
from ._policy import Policy
from ._rotation import Rotation, RotationStats, Strategy
from ._options import ClientOptions, RotateOptions, Seconds
from ._hash import MAX_HASH_ITERATIONS, MAX_SIZE, hash128, hash_impl, indexes, optimal_params

#: Version of the C library compiled into this module (bg_version_string()).
__version__: str = _cstr(_lib.bg_version_string())


def version() -> str:
    """The C library's version string (bg_version_string)."""
    return _cstr(_lib.bg_version_string())


def features() -> frozenset[str]:
    """What the C library in this module was built to do (bg_features()): ``"tracking"`` when it
    has hiredis >= 1.0, so queries can take the tracked path (given Redis >= 6 and
    ``tracking=True``); ``"tls"`` when it was built with TLS (OpenSSL), as the wheel is."""
    mask = _lib.bg_features()
    names = [("tracking", _lib.BG_FEATURE_TRACKING), ("tls", _lib.BG_FEATURE_TLS)]
    return frozenset(name for name, bit in names if mask & bit)


__all__ = [
    "Client", "Event", "Filter", "FilterInfo", "NativeInfo", "Rotation", "RotationStats", "Lock", "LockOwner", "Hold", "Policy", "Answer", "Answers",
    "hash128", "indexes", "optimal_params", "hash_impl", "MAX_SIZE", "MAX_HASH_ITERATIONS",
    "version", "__version__", "features", "error_for", "strerror",
    "BloomGuardError", "InvalidArgument", "OutOfMemory", "BadURL", "BadName", "BadParams",
    "NotSupported", "ConnectionError", "Timeout", "AuthError", "ServerError", "ProtocolError",
    "NotInitialized", "ConfigChanged", "Corrupt", "WrongType", "Locked", "RotationInProgress",
    "Aborted", "Closed", "Cancelled", "TlsError", "Full",
    "ClientOptions", "RotateOptions", "Seconds", "Strategy", "Source", "FilterKind", "LockMode",
]

# Public classes present themselves (and pickle) as bloomguard.X, not bloomguard._module.X.
for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type):
        _obj.__module__ = __name__
del _name, _obj
