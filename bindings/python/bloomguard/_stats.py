"""A filter's counters (bg_filter_stat, BG_STAT_* of bloomguard/stats.h), by name.

Names are the C names in lower case without ``BG_STAT_``: ``queries``, ``answers_redis``,
``answers_snapshot``, ..., ``breaker_state``, ``snapshot_age_ms``, ``fail_notinit``,
``fail_connection``, ... Counted with or without a policy, since the handle was opened.
"""
from __future__ import annotations

from typing import Any, Dict

from ._errors import error_for, strerror
from ._ffi import ffi, lib

__all__ = ["STATS", "BREAKER_STATES", "read_stats", "read_stat"]

#: counter name -> BG_STAT_*
STATS: Dict[str, int] = {name[len("BG_STAT_"):].lower(): value for value, name in
                         sorted((getattr(lib, n), n) for n in dir(lib) if n.startswith("BG_STAT_"))}

#: BG_BREAKER_* -> its name
BREAKER_STATES: Dict[int, str] = {
    lib.BG_BREAKER_CLOSED: "closed",
    lib.BG_BREAKER_OPEN: "open",
    lib.BG_BREAKER_HALF_OPEN: "half_open",
}


def read_stat(fptr: Any, stat: int) -> int:
    out = ffi.new("int64_t *")
    st = lib.bg_filter_stat(fptr, stat, out)
    if st != lib.BG_OK:  # pragma: no cover - only for an unknown counter or a NULL handle
        raise error_for(st, "bg_filter_stat(%d): %s" % (stat, strerror(st)))
    return int(out[0])


def read_stats(fptr: Any) -> Dict[str, int]:
    """Every counter of the filter handle, in BG_STAT_* order."""
    out = ffi.new("int64_t *")
    result: Dict[str, int] = {}
    for name, stat in STATS.items():
        st = lib.bg_filter_stat(fptr, stat, out)
        if st != lib.BG_OK:  # pragma: no cover
            raise error_for(st, "bg_filter_stat(%s): %s" % (name, strerror(st)))
        result[name] = int(out[0])
    return result
