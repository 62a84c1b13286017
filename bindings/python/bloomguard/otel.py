"""OpenTelemetry metrics of a bloomguard Client (``pip install 'bloomguard[otel]'``)::

    from opentelemetry.sdk.metrics import MeterProvider
    import bloomguard.otel

    provider = MeterProvider(metric_readers=[reader])
    bloomguard.otel.instrument(client, provider)      # or the global provider

The numbers are the ones the C library keeps (bloomguard/observe.h): nothing runs in Python per
query; they are read when the provider's readers collect. Names follow OpenTelemetry's
database-client conventions, then bloomguard's own (attributes in brackets; every point has
``db.system.name`` = ``"redis"``, and per filter ``bloomguard.filter.name`` unless
``filter_names=False``, which sums every filter into one series):

- ``db.client.operation.duration`` histogram, s [``db.operation.name``: contains, add, init, count,
  info, delete, expire, persist; ``error.type`` for a failure: timeout, connection, ...]
- ``db.client.connection.count`` up-down counter [none: pooled, multiplexed and queue connections alike]
- ``bloomguard.answers`` counter [``bloomguard.answer.source``: redis, snapshot, callback,
  assumed_present, assumed_absent]
- ``bloomguard.rotations`` counter and ``bloomguard.rotation.duration`` histogram, s
  [``bloomguard.rotation.strategy``: swap, naive, locked; ``bloomguard.rotation.outcome``:
  committed, aborted, failed (with ``error.type``)]
- ``bloomguard.breaker.state`` gauge (0 closed, 1 open, 2 half-open)
- ``bloomguard.cluster.redirects`` counter [``bloomguard.redirect.type``: moved, ask]
- ``bloomguard.tracking.invalidations`` counter

The counters and gauges are observable instruments of the meter. The two histograms are kept
pre-aggregated in C, and the OpenTelemetry API has no instrument for a histogram aggregated
elsewhere: with the SDK's ``MeterProvider`` they are added to each of its readers' collections
(through the reader's collect callback, whose temporality they follow - cumulative, or delta
since that reader's previous collection), with ``min`` / ``max`` the edges of the lowest and
highest non-empty buckets (the library keeps no exact extremes). With another provider they are
not exported (a warning is logged once); the Prometheus collector (bloomguard.prometheus)
exports them too.

Counts belong to open filter handles (``client.open_filters()``): a handle closed takes its
counts with it.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Dict, Iterable, List, Optional, Tuple

from . import _metrics
from ._ffi import cstr, lib

__all__ = ["instrument", "Instrumentation"]

_LOG = logging.getLogger("bloomguard")

try:
    from opentelemetry import metrics as _otel_metrics
    from opentelemetry.metrics import CallbackOptions, Observation
except ImportError as exc:  # pragma: no cover - only without the extra
    raise ImportError("bloomguard.otel needs OpenTelemetry: pip install 'bloomguard[otel]' (or opentelemetry-api and "
                      "opentelemetry-sdk) (%s)" % exc) from exc


class Instrumentation:
    """What :func:`instrument` registered for one client; :meth:`close` stops its reporting."""

    def __init__(self, client: Any, filter_names: bool) -> None:
        self.client = _metrics.blocking_client(client)
        self.filter_names = filter_names
        self.closed = False
        self.start_ns = time.time_ns()
        self._lock = threading.Lock()
        self._snap: Optional[_metrics.Snapshot] = None
        self._fresh = False  # the snapshot is for the collection under way (SDK readers)

    def close(self) -> None:
        """Reports nothing more (the instruments stay registered with the meter, empty)."""
        self.closed = True

    # ---- one read of the library per collection ----

    def snapshot(self) -> Optional[_metrics.Snapshot]:
        if self.closed:
            return None
        with self._lock:
            if self._snap is None or not self._fresh:
                self._snap = _metrics.snapshot(self.client, self.filter_names)
            return self._snap

    def begin_collection(self) -> None:
        with self._lock:
            self._snap = _metrics.snapshot(self.client, self.filter_names) if not self.closed else None
            self._fresh = True

    def end_collection(self) -> None:
        with self._lock:
            self._fresh = False

    # ---- observable instruments' callbacks ----

    def _points(self, pick: Any) -> Iterable[Observation]:
        snap = self.snapshot()
        if snap is None:
            return []
        return [Observation(v, a) for a, v in pick(snap)]

    def connections(self, _options: CallbackOptions) -> Iterable[Observation]:
        return self._points(lambda s: [(_metrics.attributes(None), s.connections)])

    def answers(self, _options: CallbackOptions) -> Iterable[Observation]:
        return self._points(lambda s: [(_metrics.attributes(n, bloomguard__answer__source=src), v)
                                       for (n, src), v in s.answers.items()])

    def rotations(self, _options: CallbackOptions) -> Iterable[Observation]:
        return self._points(_metrics.rotation_counts)

    def breaker(self, _options: CallbackOptions) -> Iterable[Observation]:
        return self._points(lambda s: [(_metrics.attributes(n), v) for n, v in s.breaker.items()])

    def redirects(self, _options: CallbackOptions) -> Iterable[Observation]:
        return self._points(lambda s: [(_metrics.attributes(None, bloomguard__redirect__type=t), v)
                                       for t, v in s.redirects.items()])

    def invalidations(self, _options: CallbackOptions) -> Iterable[Observation]:
        return self._points(lambda s: [(_metrics.attributes(None), s.invalidations)])


def instrument(client: Any, meter_provider: Any = None, *, filter_names: bool = True) -> Instrumentation:
    """Reports ``client``'s metrics (a :class:`bloomguard.Client` or a ``bloomguard.aio.Client``)
    through ``meter_provider`` (default: the global one): see the module's docstring. ``filter_names=False`` leaves ``bloomguard.filter.name`` out (every filter
    summed into one series), for when filters are many. Returns the :class:`Instrumentation`."""
    provider = meter_provider if meter_provider is not None else _otel_metrics.get_meter_provider()
    version = cstr(lib.bg_version_string())
    meter = provider.get_meter("bloomguard", version)
    inst = Instrumentation(client, filter_names)
    meter.create_observable_up_down_counter("db.client.connection.count", [inst.connections], unit="{connection}",
                                            description="Connections to Redis open now.")
    meter.create_observable_counter("bloomguard.answers", [inst.answers], unit="{answer}",
                                    description="Query answers by where they came from.")
    meter.create_observable_counter("bloomguard.rotations", [inst.rotations], unit="{rotation}",
                                    description="Rotations by strategy and outcome.")
    meter.create_observable_gauge("bloomguard.breaker.state", [inst.breaker], unit="1",
                                  description="Circuit breaker: 0 closed, 1 open, 2 half-open.")
    meter.create_observable_counter("bloomguard.cluster.redirects", [inst.redirects], unit="{redirect}",
                                    description="Redis Cluster redirects followed.")
    meter.create_observable_counter("bloomguard.tracking.invalidations", [inst.invalidations],
                                    unit="{invalidation}", description="Invalidations pushed by the server.")
    if not _attach_histograms(provider, inst, version):
        _LOG.warning("bloomguard.otel: %s is not the OpenTelemetry SDK's MeterProvider: db.client.operation.duration "
                     "and bloomguard.rotation.duration are not exported through it", type(provider).__name__)
    return inst


# ---- the pre-aggregated histograms, added to an SDK reader's collections -------------------------

_HISTOGRAMS = [
    ("db.client.operation.duration", "Duration of bloomguard's operations on Redis.", "durations",
     _metrics.duration_attributes),
    ("bloomguard.rotation.duration", "Duration of rotations, begin to commit or abort.", "rotations",
     _metrics.rotation_attributes),
]


def _attach_histograms(provider: Any, inst: Instrumentation, version: str) -> bool:
    try:
        from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider
    except ImportError:
        return False
    if not isinstance(provider, SdkMeterProvider):
        return False
    for reader in getattr(provider, "_metric_readers", ()):
        _Hook(reader, provider, inst, version).install()
    return True


class _Hook:
    """Wraps one SDK reader's collect callback: the SDK's metrics, then bloomguard's histograms."""

    def __init__(self, reader: Any, provider: Any, inst: Instrumentation, version: str) -> None:
        from opentelemetry.sdk.metrics._internal.instrument import _Histogram
        from opentelemetry.sdk.metrics.export import AggregationTemporality

        self.reader = reader
        self.provider = provider
        self.inst = inst
        self.version = version
        self.delta = reader._instrument_class_temporality.get(_Histogram) == AggregationTemporality.DELTA
        self.last: Dict[Tuple[str, Any], _metrics.Histogram] = {}
        self.last_ns = inst.start_ns
        self.inner = reader._collect

    def install(self) -> None:
        self.reader._set_collect_callback(self.collect)

    def collect(self, reader: Any, timeout_millis: float = 10_000) -> Any:
        try:
            self.inst.begin_collection()
        except Exception:  # bloomguard's read must never break the SDK's collection
            _LOG.debug("bloomguard.otel: reading the library failed", exc_info=True)
        try:
            data = self.inner(reader, timeout_millis=timeout_millis) if self.inner else None
            try:
                return self.merge(data, self.inst.snapshot())
            except Exception:
                _LOG.debug("bloomguard.otel: the histograms could not be added", exc_info=True)
                return data
        finally:
            self.inst.end_collection()

    def merge(self, data: Any, snap: Optional[_metrics.Snapshot]) -> Any:
        from opentelemetry.sdk.metrics.export import MetricsData, ResourceMetrics, ScopeMetrics
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        if snap is None:
            return data
        metrics = self.metrics(snap)
        if not metrics:
            return data
        scope = ScopeMetrics(scope=InstrumentationScope("bloomguard.histograms", self.version), metrics=metrics,
                             schema_url="")
        if data is None or not data.resource_metrics:
            resource = self.provider._sdk_config.resource
            return MetricsData(resource_metrics=[ResourceMetrics(resource=resource, scope_metrics=[scope],
                                                                 schema_url="")])
        first = data.resource_metrics[0]
        merged = ResourceMetrics(resource=first.resource, scope_metrics=list(first.scope_metrics) + [scope],
                                 schema_url=first.schema_url)
        return MetricsData(resource_metrics=[merged] + list(data.resource_metrics[1:]))

    def metrics(self, snap: _metrics.Snapshot) -> List[Any]:
        from opentelemetry.sdk.metrics.export import (AggregationTemporality, Histogram, HistogramDataPoint,
                                                      Metric)

        now = time.time_ns()
        start = self.last_ns if self.delta else self.inst.start_ns
        out = []
        for name, description, field, attrs_of in _HISTOGRAMS:
            points = []
            for key, h in getattr(snap, field).items():
                if self.delta:
                    prev = self.last.get((field, key))
                    self.last[(field, key)] = h
                    if prev is not None:
                        h = _metrics.Histogram(h.bounds, tuple(a - b for a, b in zip(h.counts, prev.counts)),
                                               h.count - prev.count, h.sum - prev.sum)
                if h.count <= 0:
                    continue
                low, high = _edges(h)
                points.append(HistogramDataPoint(attributes=attrs_of(key), start_time_unix_nano=start,
                                                 time_unix_nano=now, count=h.count, sum=h.sum,
                                                 bucket_counts=list(h.counts), explicit_bounds=list(h.bounds),
                                                 min=low, max=high))
            if points:
                temporality = AggregationTemporality.DELTA if self.delta else AggregationTemporality.CUMULATIVE
                out.append(Metric(name=name, description=description, unit="s",
                                  data=Histogram(data_points=points, aggregation_temporality=temporality)))
        self.last_ns = now
        return out


def _edges(h: _metrics.Histogram) -> Tuple[float, float]:
    """The lower edge of the lowest non-empty bucket and the upper edge of the highest."""
    nonzero = [i for i, n in enumerate(h.counts) if n > 0]
    lo_i, hi_i = nonzero[0], nonzero[-1]
    low = h.bounds[lo_i - 1] if lo_i > 0 else 0.0
    high = h.bounds[hi_i] if hi_i < len(h.bounds) else h.bounds[-1] * 2
    return low, high
