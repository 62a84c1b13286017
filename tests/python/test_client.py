"""Client: URLs, options, errors of open, ping, close and the life of filters beyond their client."""
from __future__ import annotations

import os

import pytest

import bloomguard
from redis_helpers import free_port


def test_open_ping_close(url):
    c = bloomguard.Client(url)
    assert repr(c) == "<bloomguard.Client open>" and not c.closed
    c.ping()
    c.close()
    c.close()  # idempotent
    assert c.closed and repr(c) == "<bloomguard.Client closed>"


def test_context_manager(url):
    with bloomguard.Client(url) as c:
        c.ping()
    assert c.closed


def test_unix_socket(redis_server, fname):
    with bloomguard.Client("unix://" + redis_server.unix) as c:
        with c.filter(fname) as f:
            assert f.init(10, 0.1) is True
            f.delete()


def test_options(url, raw, fname):
    with bloomguard.Client(url, connect_timeout=2, command_timeout=0.5, pool_size=2, db=3, config_retries=2,
                           client_name="pytest-bloomguard", username=None, password=None) as c:
        c.ping()
        names = raw("CLIENT", "LIST").decode()
        assert "name=pytest-bloomguard" in names
        with c.filter(fname) as f:
            f.init(10, 0.1)
            raw("SELECT", 3)
            assert raw("EXISTS", "{%s}:config" % fname) == 1
            raw("SELECT", 0)
            assert raw("EXISTS", "{%s}:config" % fname) == 0
            f.delete()


@pytest.mark.parametrize("tracking", [True, False])
def test_tracking_option(url, fname, tracking):
    """tracking (BG_OPT_TRACKING) is accepted both ways and answers the same, also on the very
    connection that read the filter just before another client rebuilt it with other parameters
    (an invalidation, or the full check, must notice). Whether reads are tracked at all depends on
    hiredis >= 1.0 and Redis >= 6; with tracking off none is."""
    with bloomguard.Client(url, tracking=tracking, pool_size=1) as c, c.filter(fname) as f, \
            bloomguard.Client(url) as c2, c2.filter(fname) as other:
        assert f.init(1000, 0.01) is True
        f.add_many(["a", "b"])
        for _ in range(5):
            assert f.contains_many(["a", "b"]) == [True, True]
        other.delete()
        assert other.init(50000, 0.001) is True
        other.add("new")
        assert f.contains("new") is True
        assert f.info().expected_insertions == 50000
        s = f.stats()
        assert s["tracked_stale"] <= s["tracked_reads"]
        if not tracking or "tracking" not in bloomguard.features():
            assert s["tracked_reads"] == 0 and s["tracked_stale"] == 0
        else:  # five repeated queries of an unchanged filter on one connection: read tracked
            assert s["tracked_reads"] > 0, s
        f.delete()


def _built_against_system_hiredis() -> bool:
    return "BG_HIREDIS=system" in os.environ.get("BLOOMGUARD_CMAKE_ARGS", "")


def test_features():
    """bg_features(): the default build (BG_HIREDIS=auto) has hiredis >= 1.0 with its TLS part, so
    tracked queries and rediss://; Debian's 0.14 (BG_HIREDIS=system) has neither."""
    feats = bloomguard.features()
    assert feats <= {"tracking", "tls"}
    if not _built_against_system_hiredis():
        assert feats == {"tracking", "tls"}, "the default build should have hiredis >= 1.0 with TLS (cmake/hiredis.cmake)"


def test_repeated_queries_take_the_tracked_path(url, fname):
    """With a library that can track (hiredis >= 1.0) and Redis >= 6, repeated queries of an
    unchanged filter read the bits alone (tracked_reads > 0); with tracking off, never."""
    if "tracking" not in bloomguard.features():
        pytest.skip("library built with hiredis < 1.0 (BG_HIREDIS=system on Debian 12): no tracking")
    for tracking in (True, False):
        with bloomguard.Client(url, tracking=tracking, pool_size=1) as c, c.filter(fname) as f:
            f.init(1000, 0.01)
            f.add_many(["a", "b"])
            for _ in range(20):
                assert f.contains("a") is True
                assert f.contains_many(["a", "b", "zz-absent"])[:2] == [True, True]
            s = f.stats()
            if tracking:
                assert s["tracked_reads"] > 0, s
                assert s["tracked_stale"] <= s["tracked_reads"]
            else:
                assert s["tracked_reads"] == 0, s
            f.delete()


def test_every_option_is_bound():
    """Every BG_OPT_* of the compiled module (the headers', see test_cdef) is in the option table
    of its kind, once: client options in OPTIONS, BG_OPT_ROTATE_* in ROTATE_OPTIONS, BG_OPT_LOCK_*
    in LOCK_OPTIONS."""
    from bloomguard._ffi import lib
    from bloomguard._options import LOCK_OPTIONS, OPTIONS, ROTATE_OPTIONS
    want = {"OPTIONS": [], "ROTATE_OPTIONS": [], "LOCK_OPTIONS": []}
    for name in dir(lib):
        if name.startswith("BG_OPT_ROTATE_"):
            want["ROTATE_OPTIONS"].append(getattr(lib, name))
        elif name.startswith("BG_OPT_LOCK_"):
            want["LOCK_OPTIONS"].append(getattr(lib, name))
        elif name.startswith("BG_OPT_"):
            want["OPTIONS"].append(getattr(lib, name))
    for table_name, table in (("OPTIONS", OPTIONS), ("ROTATE_OPTIONS", ROTATE_OPTIONS),
                              ("LOCK_OPTIONS", LOCK_OPTIONS)):
        assert sorted(opt for opt, _ in table.values()) == sorted(want[table_name]), table_name
    assert OPTIONS["tracking"] == (lib.BG_OPT_TRACKING, "bool")


def test_db_in_url(url, raw, fname):
    with bloomguard.Client(url + "/5") as c, c.filter(fname) as f:
        f.init(10, 0.1)
        raw("SELECT", 5)
        assert raw("EXISTS", "{%s}:config" % fname) == 1
        f.delete()


def test_unknown_option():
    with pytest.raises(TypeError, match="unknown option bogus"):
        bloomguard.Client("redis://127.0.0.1:1", bogus=1)


@pytest.mark.parametrize("opts", [dict(pool_size="4"), dict(pool_size=4.0), dict(db=True), dict(client_name=5),
                                  dict(command_timeout="1"), dict(password=b"x"), dict(tracking=1),
                                  dict(tracking="no"), dict(tracking=None)])
def test_option_types(opts):
    with pytest.raises(TypeError):
        bloomguard.Client("redis://127.0.0.1:1", **opts)


@pytest.mark.parametrize("opts", [dict(pool_size=0), dict(pool_size=100000), dict(db=-1), dict(command_timeout=0),
                                  dict(connect_timeout=-1), dict(config_retries=1000),
                                  dict(command_timeout=float("nan")), dict(pool_size=2**70)])
def test_option_ranges(opts):
    with pytest.raises(bloomguard.InvalidArgument) as ei:
        bloomguard.Client("redis://127.0.0.1:1", **opts)
    assert list(opts)[0] in str(ei.value)


def test_bad_urls():
    for bad in ("foo://x", "redis://", "redis://host:notaport", "redis://h:99999"):
        with pytest.raises(bloomguard.BadURL) as ei:
            bloomguard.Client(bad)
        assert ei.value.message and isinstance(ei.value, ValueError)
    with pytest.raises(TypeError):
        bloomguard.Client(b"redis://127.0.0.1")
    with pytest.raises(TypeError):
        bloomguard.Client(None)
    with pytest.raises(bloomguard.InvalidArgument):
        bloomguard.Client("redis://127.0.0.1\0:6379")


def test_connection_refused():
    port = free_port()  # nothing listens there
    # connect_at_open: open reaches the server, and says it cannot
    with pytest.raises(bloomguard.ConnectionError) as ei:
        bloomguard.Client("redis://127.0.0.1:%d" % port, connect_timeout=1, connect_at_open=True)
    assert isinstance(ei.value, ConnectionError) and isinstance(ei.value, OSError)
    assert str(port) in ei.value.message and ei.value.code == bloomguard.ConnectionError.status
    # the default: opening connects nothing, the first call says it
    with bloomguard.Client("redis://127.0.0.1:%d" % port, connect_timeout=1) as c:
        with pytest.raises(bloomguard.ConnectionError) as ei:
            c.ping()
        assert str(port) in ei.value.message


def test_auth_refused_message_hides_password(url):
    secret = "s3cr3t-pa55"
    with pytest.raises(bloomguard.AuthError) as ei:
        bloomguard.Client(url, password=secret, connect_at_open=True)
    assert secret not in str(ei.value) and secret not in repr(ei.value)
    with pytest.raises(bloomguard.AuthError) as ei:
        bloomguard.Client(url.replace("redis://", "redis://user:%s@" % secret), connect_at_open=True)
    assert secret not in str(ei.value)
    with bloomguard.Client(url, password=secret) as c:  # refused by the first call instead
        with pytest.raises(bloomguard.AuthError) as ei:
            c.ping()
        assert secret not in str(ei.value) and secret not in repr(ei.value)


def test_closed_client(url, fname):
    c = bloomguard.Client(url)
    c.close()
    with pytest.raises(bloomguard.Closed, match="closed"):
        c.filter(fname)
    with pytest.raises(bloomguard.Closed):
        c.ping()


def test_filters_outlive_their_client(url, fname):
    """The C client is refcounted by its filters: closing it first is safe."""
    c = bloomguard.Client(url)
    f = c.filter(fname)
    g = c.filter(fname)
    c.close()
    assert f.init(100, 0.01) is True
    f.add("x")
    assert "x" in g
    f.close()
    assert "x" in g  # the pool lives until the last filter goes
    g.delete()
    g.close()


def test_dropping_a_client_with_open_filters(url, fname):
    f = bloomguard.Client(url).filter(fname)  # the Client object is garbage at once
    import gc
    gc.collect()
    assert f.init(10, 0.1) is True
    f.delete()
    f.close()


def test_version():
    assert bloomguard.version() == bloomguard.__version__
    assert bloomguard.__version__.count(".") == 2


def test_wait_replicas_without_a_replica(url, fname):
    # the session's server has no replica: the add is applied but not acknowledged (Timeout); the
    # options are validated by the library
    with bloomguard.Client(url, wait_replicas=1, wait_timeout=0.1) as c:
        f = c.filter(fname)
        f.init(1000, 0.01)
        with pytest.raises(bloomguard.Timeout, match="only 0 of 1 replicas acknowledged"):
            f.add("x")
        assert f.contains("x")
    with pytest.raises(bloomguard.InvalidArgument):
        bloomguard.Client(url, wait_replicas=65)
