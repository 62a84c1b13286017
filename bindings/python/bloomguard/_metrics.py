"""What bloomguard.otel and bloomguard.prometheus export, read from the C library in one pass.

The library keeps every number (bloomguard/observe.h, stats.h): latency histograms per filter
handle, operation and outcome; counters of answers by source; the breaker's state; the client's
connections, redirects and tracking invalidations. :func:`snapshot` reads them for a client's open
filters (one C call per histogram, none per query) and sums the handles of one filter name (or of
all names, when names are left out for cardinality). Both exporters format the same snapshot, so
they agree.

Names (OpenTelemetry's database-client conventions, then bloomguard's own):
``db.client.operation.duration`` (histogram, s; ``db.system.name``, ``db.operation.name``,
``error.type`` for failures), ``db.client.connection.count``, ``bloomguard.answers`` (by
``bloomguard.answer.source``), ``bloomguard.rotations`` (``bloomguard.rotation.strategy``,
``bloomguard.rotation.outcome``), ``bloomguard.rotation.duration`` (histogram, s),
``bloomguard.breaker.state`` (0 closed, 1 open, 2 half-open), ``bloomguard.cluster.redirects``
(``bloomguard.redirect.type``: moved, ask), ``bloomguard.tracking.invalidations``; the filter as
``bloomguard.filter.name``.
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Tuple

from ._errors import error_for, strerror
from ._ffi import cstr, ffi, lib

__all__ = ["Histogram", "Snapshot", "snapshot", "read_histogram", "read_client_stats", "OPERATIONS", "OUTCOMES",
           "BOUNDS", "ROTATION_OPS"]

#: BG_OP_* -> name ("contains", ..., "rotate_locked")
OPERATIONS: Dict[int, str] = {op: cstr(lib.bg_op_name(op)) for op in range(1, lib.BG_OP_MAX + 1)}
#: BG_OUTCOME_* / BG_FAIL_* -> name ("ok", "timeout", ..., "aborted")
OUTCOMES: Dict[int, str] = {o: cstr(lib.bg_outcome_name(o)) for o in range(0, lib.BG_OUTCOME_MAX + 1)}
#: the rotation "operations" -> their strategy's name
ROTATION_OPS: Dict[int, str] = {lib.BG_OP_ROTATE_SWAP: "swap", lib.BG_OP_ROTATE_NAIVE: "naive",
                                lib.BG_OP_ROTATE_LOCKED: "locked"}
_OP_IDS = {name: op for op, name in OPERATIONS.items()}
_OUTCOME_IDS = {name: o for o, name in OUTCOMES.items()}

_SOURCES = [("redis", lib.BG_STAT_ANSWERS_REDIS), ("snapshot", lib.BG_STAT_ANSWERS_SNAPSHOT),
            ("callback", lib.BG_STAT_ANSWERS_CALLBACK), ("assumed_present", lib.BG_STAT_ANSWERS_ASSUMED_PRESENT),
            ("assumed_absent", lib.BG_STAT_ANSWERS_ASSUMED_ABSENT)]
_CLIENT_STATS = {name[len("BG_CLIENT_STAT_"):].lower(): getattr(lib, name)
                 for name in dir(lib) if name.startswith("BG_CLIENT_STAT_")}


class Histogram:
    """A latency histogram: ``bounds`` (upper bounds in seconds; bucket i counts durations d with
    bounds[i-1] < d <= bounds[i], the last bucket those longer than every bound), ``counts``
    (len(bounds) + 1), ``count`` and ``sum`` (seconds)."""

    __slots__ = ("bounds", "counts", "count", "sum")

    def __init__(self, bounds: Tuple[float, ...], counts: Tuple[int, ...], count: int, sum: float) -> None:
        self.bounds = bounds
        self.counts = counts
        self.count = count
        self.sum = sum

    def __repr__(self) -> str:
        return "Histogram(count=%d, sum=%r, counts=%r)" % (self.count, self.sum, self.counts)


#: the bounds of every histogram (seconds): 2^i microseconds (bloomguard/observe.h)
BOUNDS: Tuple[float, ...] = tuple(float(1 << i) / 1e6 for i in range(lib.BG_HIST_BUCKETS - 1))


def _read(fptr: Any, op: int, outcome: int, counts: Any, total: Any, total_sum: Any) -> Tuple[int, float]:
    st = lib.bg_filter_histogram(fptr, op, outcome, ffi.NULL, counts, lib.BG_HIST_BUCKETS, total, total_sum)
    if st != lib.BG_OK:  # pragma: no cover - a NULL handle or an unknown id
        raise error_for(st, "bg_filter_histogram(%d, %d): %s" % (op, outcome, strerror(st)))
    return int(total[0]), float(total_sum[0])


def read_histogram(fptr: Any, operation: str, outcome: str = "ok") -> Histogram:
    if operation not in _OP_IDS:
        raise ValueError("unknown operation %r (one of %s)" % (operation, ", ".join(_OP_IDS)))
    if outcome not in _OUTCOME_IDS:
        raise ValueError("unknown outcome %r (one of %s)" % (outcome, ", ".join(_OUTCOME_IDS)))
    bounds = ffi.new("double[]", lib.BG_HIST_BUCKETS - 1)
    counts = ffi.new("uint64_t[]", lib.BG_HIST_BUCKETS)
    total, total_sum = ffi.new("uint64_t *"), ffi.new("double *")
    st = lib.bg_filter_histogram(fptr, _OP_IDS[operation], _OUTCOME_IDS[outcome], bounds, counts,
                                 lib.BG_HIST_BUCKETS, total, total_sum)
    if st != lib.BG_OK:  # pragma: no cover
        raise error_for(st, "bg_filter_histogram: %s" % strerror(st))
    return Histogram(tuple(bounds), tuple(counts), int(total[0]), float(total_sum[0]))


def read_client_stats(cptr: Any) -> Dict[str, int]:
    out = ffi.new("int64_t *")
    result: Dict[str, int] = {}
    for name, stat in sorted(_CLIENT_STATS.items(), key=lambda kv: kv[1]):
        st = lib.bg_client_stat(cptr, stat, out)
        if st != lib.BG_OK:  # pragma: no cover
            raise error_for(st, "bg_client_stat(%s): %s" % (name, strerror(st)))
        result[name] = int(out[0])
    return result


# a histogram's key: (filter name or None, operation name, outcome name)
HistKey = Tuple[Optional[str], str, str]


class Snapshot(NamedTuple):
    """Every exported number of a client at one collection (see the module's docstring)."""

    durations: Dict[HistKey, Histogram]         # filter operations (db.client.operation.duration)
    rotations: Dict[HistKey, Histogram]         # (filter, strategy, outcome): bloomguard.rotation.duration
    answers: Dict[Tuple[Optional[str], str], int]
    breaker: Dict[Optional[str], int]           # the most open state among the name's handles
    connections: int
    redirects: Dict[str, int]                   # moved, ask
    invalidations: int


def _add(into: Dict[HistKey, Histogram], key: HistKey, counts: Any, count: int, total_sum: float) -> None:
    old = into.get(key)
    new_counts = tuple(int(counts[i]) for i in range(lib.BG_HIST_BUCKETS))
    if old is not None:
        new_counts = tuple(a + b for a, b in zip(old.counts, new_counts))
        count += old.count
        total_sum += old.sum
    into[key] = Histogram(BOUNDS, new_counts, count, total_sum)


def _filter_part(fptr: Any, name: Optional[str], snap: Snapshot, counts: Any, total: Any, total_sum: Any) -> None:
    for op, op_name in OPERATIONS.items():
        for outcome, outcome_name in OUTCOMES.items():
            count, s = _read(fptr, op, outcome, counts, total, total_sum)
            if not count:
                continue
            if op in ROTATION_OPS:
                _add(snap.rotations, (name, ROTATION_OPS[op], outcome_name), counts, count, s)
            else:
                _add(snap.durations, (name, op_name, outcome_name), counts, count, s)
    out = ffi.new("int64_t *")
    for source, stat in _SOURCES:
        lib.bg_filter_stat(fptr, stat, out)
        snap.answers[(name, source)] = snap.answers.get((name, source), 0) + int(out[0])
    lib.bg_filter_stat(fptr, lib.BG_STAT_BREAKER_STATE, out)
    state = int(out[0])
    # open (1) beats half-open (2) beats closed (0) when handles of one name disagree
    rank = {0: 0, 2: 1, 1: 2}
    if name not in snap.breaker or rank.get(state, 0) > rank.get(snap.breaker[name], 0):
        snap.breaker[name] = state


def blocking_client(client: Any) -> Any:
    """The bloomguard.Client of client (itself, or a bloomguard.aio.Client's underneath)."""
    from ._client import Client

    if isinstance(client, Client):
        return client
    inner = getattr(client, "sync", None)
    if isinstance(inner, Client):
        return inner
    raise TypeError("client must be a bloomguard.Client or a bloomguard.aio.Client, not %s" % type(client).__name__)


def snapshot(client: Any, filter_names: bool = True, filters: Optional[Iterable[Any]] = None) -> Snapshot:
    """Reads everything for client (a bloomguard.Client) and its open filters (or those given)."""
    snap = Snapshot({}, {}, {}, {}, 0, {"moved": 0, "ask": 0}, 0)
    counts = ffi.new("uint64_t[]", lib.BG_HIST_BUCKETS)
    total, total_sum = ffi.new("uint64_t *"), ffi.new("double *")
    for f in (client.open_filters() if filters is None else filters):
        try:
            fptr = f._handle.enter()
        except Exception:  # closed meanwhile
            continue
        try:
            _filter_part(fptr, f.name if filter_names else None, snap, counts, total, total_sum)
        finally:
            f._handle.leave()
    try:
        stats = client.stats()
    except Exception:  # the client was closed: its filters still count, the client's own read 0
        stats = {}
    redirects = {"moved": stats.get("cluster_moved", 0), "ask": stats.get("cluster_ask", 0)}
    return snap._replace(connections=stats.get("connections", 0), redirects=redirects,
                         invalidations=stats.get("tracking_invalidations", 0))


def rotation_outcome(outcome: str) -> Tuple[str, Optional[str]]:
    """bloomguard.rotation.outcome and error.type of a rotation histogram's outcome."""
    if outcome == "ok":
        return "committed", None
    if outcome == "aborted":
        return "aborted", None
    return "failed", outcome


def attributes(name: Optional[str], **more: Any) -> Dict[str, Any]:
    attrs: Dict[str, Any] = {"db.system.name": "redis"}
    if name is not None:
        attrs["bloomguard.filter.name"] = name
    attrs.update({k.replace("__", "."): v for k, v in more.items() if v is not None})
    return attrs


def duration_attributes(key: HistKey) -> Dict[str, Any]:
    name, op, outcome = key
    return attributes(name, db__operation__name=op, error__type=None if outcome == "ok" else outcome)


def rotation_attributes(key: HistKey) -> Dict[str, Any]:
    name, strategy, outcome = key
    result, error = rotation_outcome(outcome)
    return attributes(name, bloomguard__rotation__strategy=strategy, bloomguard__rotation__outcome=result,
                      error__type=error)


def rotation_counts(snap: Snapshot) -> List[Tuple[Dict[str, Any], int]]:
    """bloomguard.rotations: (attributes, count) per filter, strategy and outcome."""
    return [(rotation_attributes(k), h.count) for k, h in snap.rotations.items()]
