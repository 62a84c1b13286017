"""A prometheus_client collector for a bloomguard Client (``pip install prometheus-client``)::

    from prometheus_client import REGISTRY
    from bloomguard.prometheus import BloomguardCollector

    REGISTRY.register(BloomguardCollector(client))

Each scrape reads the numbers the C library keeps (no Python runs per query) for the client's
open filters: the OpenTelemetry names with dots made underscores and Prometheus's unit and
``_total`` suffixes - ``db_client_operation_duration_seconds`` (histogram; labels
``db_system_name``, ``db_operation_name``, ``error_type``), ``db_client_connection_count``,
``bloomguard_answers_total`` (``bloomguard_answer_source``), ``bloomguard_rotations_total``,
``bloomguard_rotation_duration_seconds`` (``bloomguard_rotation_strategy``,
``bloomguard_rotation_outcome``), ``bloomguard_breaker_state``,
``bloomguard_cluster_redirects_total`` (``bloomguard_redirect_type``),
``bloomguard_tracking_invalidations_total``; the filter as ``bloomguard_filter_name``
(``filter_names=False`` leaves it out, summing every filter). Counters are per open handle: a
filter closed takes its counts with it (Prometheus sees a reset).
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, List, Tuple

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from . import _metrics

__all__ = ["BloomguardCollector"]


def _label(key: str) -> str:
    return key.replace(".", "_")


def _buckets(h: _metrics.Histogram) -> List[Tuple[str, float]]:
    """Cumulative buckets as Prometheus wants them ("+Inf" last)."""
    out, running = [], 0
    for bound, n in zip(h.bounds, h.counts):
        running += n
        out.append(("%.9g" % bound, float(running)))
    out.append(("+Inf", float(running + h.counts[-1])))
    return out


class BloomguardCollector(Collector):
    """Collects a client's metrics at each scrape (see the module's docstring)."""

    def __init__(self, client: Any, *, filter_names: bool = True) -> None:
        self.client = _metrics.blocking_client(client)  # a bloomguard.Client, or an aio one's underneath
        self.filter_names = filter_names

    def describe(self) -> List[Any]:
        return []  # no fixed set of series: they follow the open filters (checked at each scrape)

    def collect(self) -> Iterator[Any]:
        snap = _metrics.snapshot(self.client, self.filter_names)
        yield from self._histograms("db_client_operation_duration_seconds",
                                    "Duration of bloomguard's operations on Redis.", snap.durations,
                                    _metrics.duration_attributes)
        yield from self._histograms("bloomguard_rotation_duration_seconds",
                                    "Duration of rotations, begin to commit or abort.", snap.rotations,
                                    _metrics.rotation_attributes)
        yield self._one(GaugeMetricFamily, "db_client_connection_count", "Connections to Redis open now.",
                        [(_metrics.attributes(None), snap.connections)])
        yield self._one(CounterMetricFamily, "bloomguard_answers", "Query answers by where they came from.",
                        [(_metrics.attributes(n, bloomguard__answer__source=src), v)
                         for (n, src), v in snap.answers.items()])
        yield self._one(CounterMetricFamily, "bloomguard_rotations", "Rotations by strategy and outcome.",
                        _metrics.rotation_counts(snap))
        yield self._one(GaugeMetricFamily, "bloomguard_breaker_state",
                        "Circuit breaker: 0 closed, 1 open, 2 half-open.",
                        [(_metrics.attributes(n), v) for n, v in snap.breaker.items()])
        yield self._one(CounterMetricFamily, "bloomguard_cluster_redirects", "Redis Cluster redirects followed.",
                        [(_metrics.attributes(None, bloomguard__redirect__type=t), v)
                         for t, v in snap.redirects.items()])
        yield self._one(CounterMetricFamily, "bloomguard_tracking_invalidations",
                        "Invalidations pushed by the server (client tracking).",
                        [(_metrics.attributes(None), snap.invalidations)])

    @staticmethod
    def _one(kind: Any, name: str, doc: str, points: List[Tuple[Dict[str, Any], int]]) -> Any:
        # one label set per family: a label some points lack is "" on them (absent, to Prometheus)
        keys = sorted({k for attrs, _ in points for k in attrs})
        family = kind(name, doc, labels=[_label(k) for k in keys])
        for attrs, value in points:
            family.add_metric([str(attrs.get(k, "")) for k in keys], value)
        return family

    @staticmethod
    def _histograms(name: str, doc: str, hists: Dict[Any, _metrics.Histogram], attrs_of: Any) -> Iterator[Any]:
        # a family has one label set: histograms with and without error_type go to one family with
        # error_type "" for successes (Prometheus treats an empty label as absent)
        points = [(attrs_of(k), h) for k, h in hists.items()]
        keys = sorted({k for attrs, _ in points for k in attrs})
        family = HistogramMetricFamily(name, doc, labels=[_label(k) for k in keys])
        for attrs, h in points:
            family.add_metric([str(attrs.get(k, "")) for k in keys], _buckets(h), h.sum)
        yield family
