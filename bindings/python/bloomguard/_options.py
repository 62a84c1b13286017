"""Options: Python keyword arguments -> a bg_options object (bloomguard/options.h).

Three tables: :data:`OPTIONS` for :class:`~bloomguard.Client`, :data:`ROTATE_OPTIONS` for
:meth:`~bloomguard.Filter.rotate` and :data:`LOCK_OPTIONS` for :class:`~bloomguard.Lock`.
Durations are seconds (int, float or timedelta) in Python and milliseconds in C; the older
``*_ms`` keyword names (milliseconds) are deprecated aliases, kept for one release with a
DeprecationWarning (:func:`take_ms_alias`). Switches are bools in Python and 0/1 in C.
:class:`ClientOptions` types the client's keywords, so a type checker catches a misspelt one.
The library validates the ranges; this module only maps names and types, and asks the library
(bg_options_bounds) for the range to name when it refuses a value. Each table holds only its own
consumer's options: the library refuses an option set for another consumer (BG_ENOTSUP).
"""
from __future__ import annotations

import math
import numbers
import sys
import warnings
from datetime import timedelta
from typing import Any, Dict, Literal, Optional, Tuple, TypedDict, Union

from ._errors import InvalidArgument, error_for, strerror
from ._ffi import ffi, lib

__all__ = ["OPTIONS", "ROTATE_OPTIONS", "LOCK_OPTIONS", "ClientOptions", "RotateOptions", "Seconds", "build_options",
           "option_range", "seconds_to_ms", "take_ms_alias"]

#: A duration: seconds (int or float) or a timedelta.
Seconds = Union[float, timedelta]


class ClientOptions(TypedDict, total=False):
    """The keyword options of :class:`~bloomguard.Client` and :func:`bloomguard.aio.connect`
    (one key per entry of :data:`OPTIONS`; a test keeps the two in step)."""

    connect_timeout: Seconds
    command_timeout: Seconds
    pool_size: int
    db: int
    config_retries: int
    write_lock_wait: Seconds
    tracking: bool
    pipeline: bool
    pipeline_conns: int
    pipeline_spin_us: int
    connect_at_open: bool
    degraded_events_per_s: int
    histograms: bool
    native_max_bytes: int
    cluster: Union[bool, Literal["auto"]]
    wait_replicas: int
    wait_timeout: Seconds
    username: Optional[str]
    password: Optional[str]
    sentinel_username: Optional[str]
    sentinel_password: Optional[str]
    tls_ca_file: Optional[str]
    tls_ca_dir: Optional[str]
    tls_cert_file: Optional[str]
    tls_key_file: Optional[str]
    tls_server_name: Optional[str]
    tls_verify: bool
    client_name: Optional[str]


class RotateOptions(TypedDict, total=False):
    """The keyword options of :meth:`~bloomguard.Filter.rotate` (its asyncio twin takes them as
    ``**options``): :data:`ROTATE_OPTIONS` and the deprecated ``*_ms`` aliases."""

    lease: Optional[Seconds]
    wait: Optional[Seconds]
    staging_ttl: Optional[Seconds]
    threads: Optional[int]
    chunk_bytes: Optional[int]
    batch: Optional[int]
    nice: Optional[int]
    partitions: Optional[int]
    lease_ms: Optional[int]
    staging_ttl_ms: Optional[int]

# name -> (BG_OPT_* value, kind): "seconds" (-> ms), "int", "bool" (-> 0/1), "str", or "cluster"
# ("auto" / True / False -> BG_CLUSTER_AUTO / _ON / _OFF).
_CLUSTER_MODES = {"auto": lib.BG_CLUSTER_AUTO, True: lib.BG_CLUSTER_ON, False: lib.BG_CLUSTER_OFF}
OPTIONS: Dict[str, Tuple[int, str]] = {
    "connect_timeout": (lib.BG_OPT_CONNECT_TIMEOUT_MS, "seconds"),
    "command_timeout": (lib.BG_OPT_COMMAND_TIMEOUT_MS, "seconds"),
    "pool_size": (lib.BG_OPT_POOL_SIZE, "int"),
    "db": (lib.BG_OPT_DB, "int"),
    "config_retries": (lib.BG_OPT_CONFIG_RETRIES, "int"),
    "write_lock_wait": (lib.BG_OPT_WRITE_LOCK_WAIT_MS, "seconds"),
    "tracking": (lib.BG_OPT_TRACKING, "bool"),
    "pipeline": (lib.BG_OPT_PIPELINE, "bool"),
    "pipeline_conns": (lib.BG_OPT_PIPELINE_CONNS, "int"),
    "pipeline_spin_us": (lib.BG_OPT_PIPELINE_SPIN_US, "int"),
    "connect_at_open": (lib.BG_OPT_CONNECT_AT_OPEN, "bool"),
    "degraded_events_per_s": (lib.BG_OPT_DEGRADED_EVENTS_PER_S, "int"),
    "histograms": (lib.BG_OPT_HISTOGRAMS, "bool"),
    "native_max_bytes": (lib.BG_OPT_NATIVE_MAX_BYTES, "int"),
    "cluster": (lib.BG_OPT_CLUSTER, "cluster"),
    "wait_replicas": (lib.BG_OPT_WAIT_REPLICAS, "int"),
    "wait_timeout": (lib.BG_OPT_WAIT_TIMEOUT_MS, "seconds"),
    "username": (lib.BG_OPT_USERNAME, "str"),
    "password": (lib.BG_OPT_PASSWORD, "str"),
    "sentinel_username": (lib.BG_OPT_SENTINEL_USERNAME, "str"),
    "sentinel_password": (lib.BG_OPT_SENTINEL_PASSWORD, "str"),
    "tls_ca_file": (lib.BG_OPT_TLS_CA_FILE, "str"),
    "tls_ca_dir": (lib.BG_OPT_TLS_CA_DIR, "str"),
    "tls_cert_file": (lib.BG_OPT_TLS_CERT_FILE, "str"),
    "tls_key_file": (lib.BG_OPT_TLS_KEY_FILE, "str"),
    "tls_server_name": (lib.BG_OPT_TLS_SERVER_NAME, "str"),
    "tls_verify": (lib.BG_OPT_TLS_VERIFY, "bool"),
    "client_name": (lib.BG_OPT_CLIENT_NAME, "str"),
}

# Filter.rotate's keyword options (bg_rotation_begin): name -> (BG_OPT_ROTATE_* value, kind).
ROTATE_OPTIONS: Dict[str, Tuple[int, str]] = {
    "lease": (lib.BG_OPT_ROTATE_LEASE_MS, "seconds"),
    "wait": (lib.BG_OPT_ROTATE_WAIT_MS, "seconds"),
    "staging_ttl": (lib.BG_OPT_ROTATE_STAGING_TTL_MS, "seconds"),
    "threads": (lib.BG_OPT_ROTATE_THREADS, "int"),
    "chunk_bytes": (lib.BG_OPT_ROTATE_CHUNK_BYTES, "int"),
    "batch": (lib.BG_OPT_ROTATE_BATCH, "int"),
    "nice": (lib.BG_OPT_ROTATE_NICE, "int"),
    "partitions": (lib.BG_OPT_ROTATE_PARTITIONS, "int"),
}

# Lock's keyword options (bg_lock_open): name -> (BG_OPT_LOCK_* value, kind). renew and subscribe
# arrive here as 0/1 (Lock checks that they are bools).
LOCK_OPTIONS: Dict[str, Tuple[int, str]] = {
    "lease": (lib.BG_OPT_LOCK_LEASE_MS, "seconds"),
    "renew": (lib.BG_OPT_LOCK_RENEW, "int"),
    "subscribe": (lib.BG_OPT_LOCK_SUBSCRIBE, "int"),
    "poll_max": (lib.BG_OPT_LOCK_POLL_MAX_MS, "seconds"),
}


class _Millis(int):
    """A duration given through a deprecated ``*_ms`` alias: already whole milliseconds."""


def take_ms_alias(value: Any, old_value: Any, name: str, old: str) -> Any:
    """The value of the seconds-named option ``name``, or of its deprecated alias ``old`` (in
    milliseconds; warns). Giving both is a TypeError, as a repeated keyword would be."""
    if old_value is None:
        return value
    if value is not None:
        raise TypeError("%s and %s are the same option: pass only %s (seconds)" % (name, old, name))
    if isinstance(old_value, bool) or not isinstance(old_value, numbers.Integral):
        raise TypeError("%s must be an int of milliseconds, not %s" % (old, type(old_value).__name__))
    warnings.warn("%s is deprecated and will be removed in the next release: pass %s=%g (seconds)"
                  % (old, name, int(old_value) / 1000.0), DeprecationWarning, stacklevel=_user_frame())
    return _Millis(old_value)


def _user_frame() -> int:
    """warnings.warn's stacklevel of the first caller outside this package (its level 1 is the
    caller of _user_frame)."""
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith("bloomguard"):
        frame, level = frame.f_back, level + 1
    return level


def seconds_to_ms(value: Any, what: str) -> int:
    """Seconds (int, float or timedelta) to whole milliseconds, rounded up so that a positive
    duration never becomes 0. Range checks are the library's; this rejects only non-numbers,
    NaN and infinities."""
    if isinstance(value, _Millis):
        return int(value)
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError("%s must be a number of seconds (int or float), not %s" % (what, type(value).__name__))
    if isinstance(value, numbers.Integral):
        return int(value) * 1000
    value = float(value)
    if not math.isfinite(value):
        raise InvalidArgument("%s must be a finite number of seconds, got %r" % (what, value))
    # round(.., 6) first: 0.1 * 1000 is 100.00000000000001 in binary floating point.
    return int(math.ceil(round(value * 1000.0, 6)))


def _set(opts: Any, table: Dict[str, Tuple[int, str]], name: str, value: Any) -> None:
    option, kind = table[name]
    if kind == "str":
        if value is None:
            st = lib.bg_options_set_str(opts, option, ffi.NULL)
        else:
            if not isinstance(value, str):
                raise TypeError("option %s must be a str, not %s" % (name, type(value).__name__))
            if "\0" in value:
                raise InvalidArgument("option %s must not contain NUL characters" % name)
            st = lib.bg_options_set_str(opts, option, value.encode("utf-8"))
        shown = "***" if name in ("password", "sentinel_password") else repr(value)
    else:
        if kind == "seconds":
            ms = seconds_to_ms(value, name)
        elif kind == "cluster":
            if not isinstance(value, (bool, str)) or value not in _CLUSTER_MODES:
                raise TypeError("option %s must be \"auto\", True or False, not %r" % (name, value))
            ms = _CLUSTER_MODES[value]
        elif kind == "bool":
            if not isinstance(value, bool):
                raise TypeError("option %s must be a bool, not %s" % (name, type(value).__name__))
            ms = int(value)
        elif isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError("option %s must be an int, not %s" % (name, type(value).__name__))
        else:
            ms = int(value)
        if not -(2**63) <= ms < 2**63:
            raise InvalidArgument("option %s=%r is out of range" % (name, value))
        st = lib.bg_options_set_int(opts, option, ms)
        shown = repr(value)
    if st != lib.BG_OK:
        raise error_for(st, "option %s=%s: %s%s" % (name, shown, strerror(st), option_range(option, kind, st)))


def option_range(option: int, kind: str, st: int = -1) -> str:
    """"; must be LO..HI" (in the Python unit) from the library's table for an integer option the
    library refused as out of range (st BG_EINVAL); "" otherwise."""
    if st != lib.BG_EINVAL or kind in ("str", "bool", "cluster"):
        return ""
    lo, hi = ffi.new("int64_t *"), ffi.new("int64_t *")
    if lib.bg_options_bounds(option, lo, hi) != lib.BG_OK:  # pragma: no cover - every int option has one
        return ""
    if kind == "seconds":
        return "; must be %g..%g seconds" % (lo[0] / 1000.0, hi[0] / 1000.0)
    return "; must be %d..%d" % (lo[0], hi[0])


def build_options(options: Dict[str, Any],
                  table: Optional[Dict[str, Tuple[int, str]]] = None) -> Optional[Any]:
    """A bg_options (freed automatically when garbage) for the given keyword options, or None when
    there are none. ``table`` is :data:`OPTIONS` (the default), :data:`ROTATE_OPTIONS` or
    :data:`LOCK_OPTIONS`. Unknown
    names raise TypeError, like an unexpected keyword argument."""
    if table is None:
        table = OPTIONS
    unknown = sorted(set(options) - set(table))
    if unknown:
        raise TypeError("unknown option%s %s (known: %s)" % (
            "s" if len(unknown) > 1 else "", ", ".join(unknown), ", ".join(sorted(table))))
    if not options:
        return None
    out = ffi.new("bg_options **")
    st = lib.bg_options_new(out)
    if st != lib.BG_OK:
        raise error_for(st, "bg_options_new: %s" % strerror(st))
    opts = ffi.gc(out[0], lib.bg_options_free)
    for name, value in options.items():
        _set(opts, table, name, value)
    return opts
