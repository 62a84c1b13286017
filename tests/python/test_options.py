"""Options against the library's own rules (issue 16, item 4), against a real redis-server:

* each binding table holds only its consumer's options, and the library itself refuses an option
  set for another consumer (BG_ENOTSUP naming it) - shown through the raw cffi calls, since the
  Python API cannot even express such a mix;
* an out-of-range value's message names the range the library answers (bg_options_bounds /
  bg_policy_bounds), the binding keeping no copy of it.
"""
from __future__ import annotations

from datetime import timedelta
from typing import get_args

import pytest

import bloomguard
from bloomguard._errors import error_for
from bloomguard._ffi import cstr, ffi, lib
from bloomguard._options import LOCK_OPTIONS, OPTIONS, ROTATE_OPTIONS


def _bounds(option):
    lo, hi = ffi.new("int64_t *"), ffi.new("int64_t *")
    assert lib.bg_options_bounds(option, lo, hi) == lib.BG_OK
    return lo[0], hi[0]


def test_each_table_holds_only_its_consumers_options():
    client = {v for v, _ in OPTIONS.values()}
    rotate = {v for v, _ in ROTATE_OPTIONS.values()}
    lock = {v for v, _ in LOCK_OPTIONS.values()}
    assert rotate <= {getattr(lib, n) for n in dir(lib) if n.startswith("BG_OPT_ROTATE_")}
    assert lock <= {getattr(lib, n) for n in dir(lib) if n.startswith("BG_OPT_LOCK_")}
    assert not client & (rotate | lock)


def _opts(option, value):
    out = ffi.new("bg_options **")
    assert lib.bg_options_new(out) == lib.BG_OK
    opts = ffi.gc(out[0], lib.bg_options_free)
    assert lib.bg_options_set_int(opts, option, value) == lib.BG_OK
    return opts


def test_the_library_refuses_a_foreign_option(url, client, fname):
    call_out = ffi.new("bg_call **")
    assert lib.bg_call_new(call_out) == lib.BG_OK
    call = ffi.gc(call_out[0], lib.bg_call_free)

    out = ffi.new("bg_client **")
    st = lib.bg_client_open_ex(out, call, url.encode(), _opts(lib.BG_OPT_ROTATE_WAIT_MS, 0))
    assert st == lib.BG_ENOTSUP and out[0] == ffi.NULL
    assert cstr(lib.bg_call_errmsg(call)) == ("BG_OPT_ROTATE_WAIT_MS is a rotation option (bg_rotation_begin), "
                                              "not a client option (bg_client_open)")
    err = error_for(st, cstr(lib.bg_call_errmsg(call)))   # as a Python user reads it: the keyword
    assert isinstance(err, bloomguard.NotSupported)
    assert err.message.startswith("wait is a rotation option")

    f = client.filter(fname)
    fptr = f._handle.enter()
    try:
        rot = ffi.new("bg_rotation **")
        st = lib.bg_rotation_begin_ex(rot, call, fptr, 1000, 0.01, lib.BG_ROTATE_SWAP,
                                      _opts(lib.BG_OPT_LOCK_RENEW, 0))
        assert st == lib.BG_ENOTSUP and rot[0] == ffi.NULL
        assert cstr(lib.bg_call_errmsg(call)) == ("BG_OPT_LOCK_RENEW is a lock option (bg_lock_open), not a "
                                                  "rotation option (bg_rotation_begin)")
        lock = ffi.new("bg_lock **")
        st = lib.bg_lock_open_filter_ex(lock, call, fptr, _opts(lib.BG_OPT_POOL_SIZE, 2))
        assert st == lib.BG_ENOTSUP and lock[0] == ffi.NULL
        assert cstr(lib.bg_call_errmsg(call)).startswith("BG_OPT_POOL_SIZE is a client option")
    finally:
        f._handle.leave()
    # and what the binding builds from its tables is accepted by each consumer
    with f.rotate(1000, 0.01, threads=1, wait=0) as r:
        r.add("a")
    with client.lock(fname, lease=5, renew=False).exclusive(wait=0):
        pass


@pytest.mark.parametrize("name,value,option,unit", [
    ("pool_size", 0, lib.BG_OPT_POOL_SIZE, ""),
    ("config_retries", 1000, lib.BG_OPT_CONFIG_RETRIES, ""),
    ("command_timeout", 0, lib.BG_OPT_COMMAND_TIMEOUT_MS, "seconds"),
    ("wait_timeout", 10**7, lib.BG_OPT_WAIT_TIMEOUT_MS, "seconds"),
])
def test_client_range_message_comes_from_the_library(name, value, option, unit):
    with pytest.raises(bloomguard.InvalidArgument) as ei:
        bloomguard.Client("redis://127.0.0.1:1", **{name: value})
    lo, hi = _bounds(option)
    if unit == "seconds":
        want = "must be %g..%g seconds" % (lo / 1000.0, hi / 1000.0)
    else:
        want = "must be %d..%d" % (lo, hi)
    assert name in str(ei.value) and want in str(ei.value), str(ei.value)


def test_rotation_range_message_comes_from_the_library(client, fname):
    lo, hi = _bounds(lib.BG_OPT_ROTATE_CHUNK_BYTES)
    assert (lo, hi) == (4096, 67108864)
    with pytest.raises(bloomguard.InvalidArgument) as ei:
        with client.filter(fname).rotate(1000, 0.01, chunk_bytes=lo - 1):
            pass
    assert "chunk_bytes" in str(ei.value) and "must be 4096..67108864" in str(ei.value), str(ei.value)


def test_policy_range_message_comes_from_the_library():
    lo, hi = ffi.new("int64_t *"), ffi.new("int64_t *")
    assert lib.bg_policy_bounds(lib.BG_POLICY_JITTER_PCT, lo, hi) == lib.BG_OK
    with pytest.raises(bloomguard.InvalidArgument) as ei:
        bloomguard.Policy(jitter_pct=hi[0] + 1)
    assert "jitter_pct" in str(ei.value) and "must be %d..%d" % (lo[0], hi[0]) in str(ei.value)
    with pytest.raises(bloomguard.InvalidArgument) as ei:
        bloomguard.Policy(snapshot_interval=0.05)
    assert "must be 0.1..86400 seconds (or 0: never)" in str(ei.value)
    bloomguard.Policy(snapshot_interval=0)
    assert lib.bg_policy_bounds(9999, ffi.NULL, ffi.NULL) == lib.BG_ENOTSUP
    assert lib.bg_options_bounds(lib.BG_OPT_PASSWORD, ffi.NULL, ffi.NULL) == lib.BG_ENOTSUP


def test_durations_are_seconds_and_ms_names_are_deprecated_aliases(client, fname):
    """Every duration a Python caller passes is in seconds; the older ``*_ms`` names still work
    for one release, each with a DeprecationWarning pointing at the caller, and give the same
    milliseconds to the library. Both names at once is an error, as a repeated keyword is."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the seconds names warn about nothing
        p = bloomguard.Policy(backoff_base=0.25, breaker_cooldown=2, snapshot_max_age=timedelta(seconds=3))
    with pytest.warns(DeprecationWarning, match=r"backoff_base_ms is deprecated.*backoff_base=0\.25") as rec:
        old = bloomguard.Policy(backoff_base_ms=250, breaker_cooldown=2, snapshot_max_age=3)
    assert rec[0].filename == __file__, rec[0].filename
    assert old.settings == p.settings and p.settings["backoff_base"] == 0.25
    with pytest.warns(DeprecationWarning, match="backoff_max_ms"):
        assert p.replace(backoff_max_ms=5000).settings["backoff_max"] == 5.0
    with pytest.raises(TypeError, match="backoff_base and backoff_base_ms are the same option"):
        bloomguard.Policy(backoff_base=1, backoff_base_ms=1000)
    with pytest.raises(TypeError, match="milliseconds"):
        bloomguard.Policy(backoff_base_ms=0.5)
    with pytest.warns(DeprecationWarning, match="poll_max_ms"), client.lock(fname, poll_max_ms=20):
        pass
    with pytest.warns(DeprecationWarning, match="lease_ms") as rec:
        client.filter(fname).lock(lease_ms=2000).close()
    assert rec[0].filename == __file__, rec[0].filename
    # the seconds and the deprecated milliseconds reach the library as the same value: out of
    # range alike, in the library's words and the caller's unit
    for kwargs in ({"lease": 0.001}, {"lease_ms": 1}):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            with pytest.raises(bloomguard.InvalidArgument, match="seconds"):
                client.lock(fname, **kwargs)


def test_typed_option_tables_match_the_library_tables():
    """The TypedDicts and Literals a type checker reads list exactly what the run-time tables
    (built from the library's names) accept: a drift between them fails here."""
    from bloomguard._answer import Source
    from bloomguard._call import SOURCES
    from bloomguard._options import ClientOptions, RotateOptions
    from bloomguard._rotation import STRATEGIES, Strategy
    assert set(ClientOptions.__annotations__) == set(OPTIONS)
    assert set(RotateOptions.__annotations__) == set(ROTATE_OPTIONS) | {"lease_ms", "staging_ttl_ms"}
    assert set(get_args(Strategy)) == set(STRATEGIES)
    from bloomguard._filter import KINDS, FilterKind
    from bloomguard._lock import MODES, LockMode
    assert set(get_args(FilterKind)) == set(KINDS) and set(get_args(LockMode)) == set(MODES)
    assert set(get_args(Source)) == set(SOURCES.values())
    assert {n for n in dir(lib) if n.startswith("BG_SOURCE_")} == {"BG_SOURCE_" + s.upper() for s in SOURCES.values()}
