"""What operators see, through the binding, with real exporters in memory against a real server:
OpenTelemetry's InMemoryMetricReader (cumulative and delta), a prometheus_client registry's text
output parsed back, and the logger "bloomguard" - a real rotation, a real breaker trip (CLIENT
PAUSE), connections killed. The numbers are checked against what the test did (and against the C
library's own counters), never only against themselves; each has a control that would fail if
the export were empty or stale. No record ever holds the password of the client's URL."""
from __future__ import annotations

import logging
import time

import pytest

import bloomguard
from bloomguard import _metrics

otel_sdk = pytest.importorskip("opentelemetry.sdk.metrics")
from opentelemetry.sdk.metrics import Histogram as SdkHistogram  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader  # noqa: E402
from prometheus_client import CollectorRegistry, generate_latest  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

import bloomguard.otel  # noqa: E402
from bloomguard.prometheus import BloomguardCollector  # noqa: E402

PASSWORD = "obs-s3cret-Pw"
TIMEOUT = 0.2


def points(reader, name):
    """name's data points of the reader's collection now: [(attributes, point)]."""
    data = reader.get_metrics_data()
    out = []
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                if m.name == name:
                    out.extend((dict(p.attributes), p) for p in m.data.data_points)
    return out


def one(pts, **attrs):
    """The one point whose attributes include attrs."""
    found = [p for a, p in pts if all(a.get(k.replace("__", ".")) == v for k, v in attrs.items())]
    assert len(found) == 1, (attrs, pts)
    return found[0]


def pause(raw, ms):
    raw("CLIENT", "PAUSE", ms, "ALL")


def wait_out(raw):
    assert raw("PING") == "PONG"


@pytest.fixture
def secret_url(redis_server, raw):
    """The test server's URL with a user whose password must never show up anywhere."""
    raw("ACL", "SETUSER", "obsuser", "on", ">" + PASSWORD, "~*", "&*", "+@all")
    try:
        yield "redis://obsuser:%s@127.0.0.1:%d" % (PASSWORD, redis_server.port)
    finally:
        raw("ACL", "DELUSER", "obsuser")


def work(f, contains=10, adds=5):
    f.init(1000, 0.01)
    for i in range(adds):
        f.add("a%d" % i)
    for i in range(contains):
        assert ("a%d" % (i % adds)) in f


def test_otel_in_memory_reader(url, fname):
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    with bloomguard.Client(url) as client, client.filter(fname) as f:
        bloomguard.otel.instrument(client, provider)
        # the control: nothing done yet, no duration point
        assert points(reader, "db.client.operation.duration") == []
        work(f, contains=10, adds=5)
        with f.rotate(1000, 0.01) as rot:
            rot.add_many(["a%d" % i for i in range(5)])
        dur = points(reader, "db.client.operation.duration")
        contains = one(dur, db__operation__name="contains", bloomguard__filter__name=fname)
        assert contains.count == 10 == f.histogram("contains").count == f.stats()["queries"]
        assert sum(contains.bucket_counts) == 10 and len(contains.bucket_counts) == len(contains.explicit_bounds) + 1
        assert list(contains.explicit_bounds) == list(_metrics.BOUNDS) == list(f.histogram("contains").bounds)
        assert 0 < contains.sum < 10 and contains.min <= contains.max
        assert "error.type" not in dict(one_attrs(dur, "contains"))
        assert one(dur, db__operation__name="add").count == 5
        assert one(dur, db__operation__name="init").count == 1
        assert one(points(reader, "bloomguard.answers"), bloomguard__answer__source="redis").value == 10
        assert one(points(reader, "bloomguard.answers"), bloomguard__answer__source="assumed_present").value == 0
        rot_count = one(points(reader, "bloomguard.rotations"), bloomguard__rotation__strategy="swap",
                        bloomguard__rotation__outcome="committed")
        assert rot_count.value == 1
        rot_dur = one(points(reader, "bloomguard.rotation.duration"), bloomguard__rotation__strategy="swap")
        assert rot_dur.count == 1 and rot_dur.sum > 0
        conns = one(points(reader, "db.client.connection.count"), db__system__name="redis")
        assert conns.value == client.stats()["connections"] >= 1
        assert one(points(reader, "bloomguard.breaker.state"), bloomguard__filter__name=fname).value == 0
        # cumulative: a second collection after more queries counts them all
        for _ in range(3):
            assert "a0" in f
        assert one(points(reader, "db.client.operation.duration"), db__operation__name="contains").count == 13
    provider.shutdown()


def one_attrs(pts, op):
    return [a for a, p in pts if a.get("db.operation.name") == op][0]


def test_otel_delta_and_no_filter_names(url, fname):
    reader = InMemoryMetricReader(preferred_temporality={SdkHistogram: AggregationTemporality.DELTA})
    provider = MeterProvider(metric_readers=[reader])
    with bloomguard.Client(url) as client, client.filter(fname) as f, client.filter(fname + "-b") as g:
        bloomguard.otel.instrument(client, provider, filter_names=False)
        work(f, contains=4, adds=2)
        work(g, contains=6, adds=2)
        dur = points(reader, "db.client.operation.duration")
        c = one(dur, db__operation__name="contains")
        assert c.count == 10  # both filters in one series
        assert all("bloomguard.filter.name" not in a for a, _ in dur)
        assert all("bloomguard.filter.name" not in a for a, _ in points(reader, "bloomguard.answers"))
        # delta: the next collection holds only what happened since
        assert "a0" in f
        c2 = one(points(reader, "db.client.operation.duration"), db__operation__name="contains")
        assert c2.count == 1 and c2.start_time_unix_nano >= c.time_unix_nano
        assert [p for a, p in points(reader, "db.client.operation.duration")
                if a.get("db.operation.name") == "add"] == []  # no adds since: no point
    provider.shutdown()


def test_breaker_trip_events_metrics_and_no_password(secret_url, fname, raw, caplog):
    """A real trip (CLIENT PAUSE longer than the timeout): the breaker's events in the log and to a
    listener, its state in both exporters, the timeouts in the histograms; then connections
    killed. The client's URL carries a password: no record, event or metric holds it."""
    caplog.set_level(logging.INFO, logger="bloomguard")
    heard = []
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    registry = CollectorRegistry()
    with bloomguard.Client(secret_url, command_timeout=TIMEOUT) as client, client.filter(fname) as f:
        client.on_event(heard.append)
        bloomguard.otel.instrument(client, provider)
        registry.register(BloomguardCollector(client))
        f.init(1000, 0.01)
        f.policy = bloomguard.Policy(on_timeout="assume_present", breaker_threshold=2, breaker_cooldown=0.3)
        assert "x" not in f
        pause(raw, 1500)
        for _ in range(4):
            assert f.query("x").source == "assumed_present"
        assert one(points(reader, "bloomguard.breaker.state"), bloomguard__filter__name=fname).value == 1
        prom = parse(registry)
        assert prom[("bloomguard_breaker_state", (("bloomguard_filter_name", fname), ("db_system_name", "redis")))] == 1
        wait_out(raw)
        time.sleep(0.35)  # the cooldown: the next query is the probe
        assert f.query("x").source == "redis"
        assert one(points(reader, "bloomguard.breaker.state"), bloomguard__filter__name=fname).value == 0
        # degraded answers are answers: 6 contains, all "ok"
        assert [p.count for a, p in points(reader, "db.client.operation.duration")
                if a.get("db.operation.name") == "contains"] == [6]
        kinds = [e.kind for e in heard]
        assert kinds.index("breaker_open") < kinds.index("breaker_half_open") < kinds.index("breaker_closed")
        opened = heard[kinds.index("breaker_open")]
        assert opened.name == fname and opened.status == bloomguard._ffi.lib.BG_ETIMEOUT and opened.count == 2
        assert "degraded" in kinds
        recs = {r.bloomguard_event.kind: r for r in caplog.records if hasattr(r, "bloomguard_event")}
        assert recs["breaker_open"].levelno == logging.WARNING and fname in recs["breaker_open"].getMessage()
        assert recs["breaker_closed"].levelno == logging.INFO
        assert recs["degraded"].levelno == logging.WARNING
        # answers by source: 1 + 1 from Redis, 4 assumed
        answers = {a["bloomguard.answer.source"]: p.value for a, p in points(reader, "bloomguard.answers")}
        assert answers["redis"] == 2 and answers["assumed_present"] == 4
        # the server drops the connections: logged, counted
        raw("CLIENT", "KILL", "USER", "obsuser")
        for _ in range(3):
            assert f.query("x").source == "redis"
        assert client.stats()["connections_lost"] >= 1
        lost = [r for r in caplog.records if getattr(r, "bloomguard_event", None) and
                r.bloomguard_event.kind == "connection_lost"]
        assert lost and lost[0].levelno == logging.WARNING and "127.0.0.1" in lost[0].getMessage()
        # a rotation: INFO
        with f.rotate(1000, 0.01) as rot:
            rot.add("x")
        assert {"rotation_begin", "rotation_commit"} <= {e.kind for e in heard}
        text = generate_latest(registry).decode()
        data = reader.get_metrics_data().to_json()
    everything = [r.getMessage() + repr(r.__dict__) for r in caplog.records] + [repr(e) for e in heard] + [text, data]
    assert len(heard) >= 6
    assert not [s for s in everything if PASSWORD in s]
    # the control: the password is findable where it is (so the search above can see it)
    assert PASSWORD in secret_url
    provider.shutdown()


def parse(registry):
    """The registry's text output parsed back: {(sample name, sorted labels): value}."""
    out = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            # an empty label is an absent one (Prometheus's rule)
            out[(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if v != "")))] = s.value
    return out


def test_prometheus_text_output(url, fname):
    registry = CollectorRegistry()
    with bloomguard.Client(url) as client, client.filter(fname) as f:
        registry.register(BloomguardCollector(client))
        work(f, contains=7, adds=3)
        missing = client.filter(fname + "-missing")
        with pytest.raises(bloomguard.NotInitialized):
            missing.count()
        with f.rotate(1000, 0.01, strategy="locked") as rot:
            rot.add("a1")
        rot2 = f.rotate(1000, 0.01)
        rot2.abort()
        prom = parse(registry)
        base = (("bloomguard_filter_name", fname), ("db_system_name", "redis"))

        def op_labels(op, error=""):
            return tuple(sorted(base + (("db_operation_name", op), ("error_type", error)))) if error else \
                tuple(sorted(base + (("db_operation_name", op),)))

        assert prom[("db_client_operation_duration_seconds_count", op_labels("contains"))] == 7
        assert prom[("db_client_operation_duration_seconds_bucket", op_labels("contains") + (("le", "+Inf"),))] == 7
        assert prom[("db_client_operation_duration_seconds_count", op_labels("add"))] == 3
        miss = tuple(sorted((("bloomguard_filter_name", fname + "-missing"), ("db_system_name", "redis"),
                             ("db_operation_name", "count"), ("error_type", "not_initialized"))))
        assert prom[("db_client_operation_duration_seconds_count", miss)] == 1
        # cumulative buckets never decrease and end at the count
        buckets = sorted((float(dict(k[1])["le"]), v) for k, v in prom.items()
                         if k[0] == "db_client_operation_duration_seconds_bucket" and
                         dict(k[1]).get("db_operation_name") == "contains" and
                         dict(k[1]).get("bloomguard_filter_name") == fname)
        assert [v for _, v in buckets] == sorted(v for _, v in buckets) and buckets[-1][1] == 7
        assert prom[("bloomguard_answers_total", tuple(sorted(base + (("bloomguard_answer_source", "redis"),))))] == 7
        rot_base = base + (("bloomguard_rotation_strategy", "locked"), ("bloomguard_rotation_outcome", "committed"))
        assert prom[("bloomguard_rotations_total", tuple(sorted(rot_base)))] == 1
        aborted = base + (("bloomguard_rotation_strategy", "swap"), ("bloomguard_rotation_outcome", "aborted"))
        assert prom[("bloomguard_rotations_total", tuple(sorted(aborted)))] == 1
        assert prom[("bloomguard_rotation_duration_seconds_count", tuple(sorted(rot_base)))] == 1
        assert prom[("db_client_connection_count", (("db_system_name", "redis"),))] >= 1
        assert prom[("bloomguard_cluster_redirects_total",
                     (("bloomguard_redirect_type", "moved"), ("db_system_name", "redis")))] == 0
        # the filter closed: its series go (counts belong to open handles)
        missing.close()
        assert not [k for k in parse(registry) if dict(k[1]).get("bloomguard_filter_name") == fname + "-missing"]


def test_tracking_invalidations_counted(url, fname, raw):
    registry = CollectorRegistry()
    if "tracking" not in bloomguard.features():
        pytest.skip("built without tracking (hiredis < 1.0)")
    with bloomguard.Client(url) as client, client.filter(fname) as f:
        registry.register(BloomguardCollector(client))
        f.init(1000, 0.01)
        assert "x" not in f
        assert "x" not in f  # tracked now
        before = client.stats()["tracking_invalidations"]
        raw("HSET", "{%s}:config" % fname, "extra", "1")  # a change to the config: the server pushes
        assert "x" not in f
        after = client.stats()["tracking_invalidations"]
        assert after > before
        prom = parse(registry)
        assert prom[("bloomguard_tracking_invalidations_total", (("db_system_name", "redis"),))] == after


def test_listener_failures_are_contained(url, fname):
    got = []

    def bad(event):
        raise RuntimeError("listener bug")

    with bloomguard.Client(url) as client, client.filter(fname) as f:
        client.on_event(bad)
        client.on_event(got.append)
        rot = f.rotate(1000, 0.01)
        rot.abort()
        assert [e.kind for e in got] == ["rotation_begin", "rotation_abort"]
        assert got[1].status == bloomguard._ffi.lib.BG_EABORTED and got[1].strategy == 1
        client.remove_event_listener(got.append)
        f.rotate(1000, 0.01).abort()
        assert len(got) == 2


def test_metrics_cost_no_python_per_query(url, fname, monkeypatch):
    """The exporters read the library at collection: 500 queries run no bloomguard Python code
    beyond the call itself (counted, not timed)."""
    calls = {"snapshot": 0, "event": 0}
    real_snapshot = _metrics.snapshot

    def counting(*a, **k):
        calls["snapshot"] += 1
        return real_snapshot(*a, **k)

    monkeypatch.setattr(_metrics, "snapshot", counting)
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    with bloomguard.Client(url) as client, client.filter(fname) as f:
        client.on_event(lambda e: calls.__setitem__("event", calls["event"] + 1))
        bloomguard.otel.instrument(client, provider)
        f.init(1000, 0.01)
        for _ in range(500):
            assert "x" not in f
        assert calls == {"snapshot": 0, "event": 0}
        assert one(points(reader, "db.client.operation.duration"), db__operation__name="contains").count == 500
        assert calls["snapshot"] == 1  # one read of the library for the whole collection
    provider.shutdown()


def test_aio_client_submitted_operations(url, fname):
    """The submission queue's operations are counted where the blocking ones are: an aio client's
    contains in its histogram, exported by the collector given the aio client itself."""
    import asyncio

    import bloomguard.aio

    async def main():
        async with await bloomguard.aio.connect(url) as client:
            registry = CollectorRegistry()
            registry.register(BloomguardCollector(client))
            f = client.filter(fname)
            await f.init(1000, 0.01)
            await asyncio.gather(*(f.contains("x%d" % i) for i in range(20)))
            prom = parse(registry)
            key = tuple(sorted((("bloomguard_filter_name", fname), ("db_system_name", "redis"),
                                ("db_operation_name", "contains"))))
            assert prom[("db_client_operation_duration_seconds_count", key)] == 20
            init_key = tuple(sorted((("bloomguard_filter_name", fname), ("db_system_name", "redis"),
                                     ("db_operation_name", "init"))))
            assert prom[("db_client_operation_duration_seconds_count", init_key)] == 1
            await f.delete()

    asyncio.run(main())
    with pytest.raises(TypeError):
        BloomguardCollector(object())
