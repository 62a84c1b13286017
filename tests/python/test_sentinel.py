"""The Python binding behind a real Sentinel deployment (sentinel_helpers.RedisSentinelSet):
the master found through the sentinels, a kill -9 failover while a thread queries (the default
policy answers during the gap, then the new master does; nothing added before the kill is
missing), and the sentinels' own credentials."""
from __future__ import annotations

import threading
import time

import pytest

import bloomguard
from sentinel_helpers import RedisSentinelSet

pytestmark = pytest.mark.sentinel


def test_failover_through_sentinels():
    with RedisSentinelSet() as s:
        items = ["s-%d" % i for i in range(500)]
        with bloomguard.Client(s.url) as c:
            f = c.filter("py-sentinel")
            f.delete()
            f.init(10000, 0.01)
            f.add_many(items)
            m = s.master()
            assert f.node()[0] == "127.0.0.1:%d" % s.data_ports[m]
            s.data_cmd(m, "WAIT", 1, 2000)
            stop = threading.Event()
            seen = {"queries": 0, "absent": 0, "errors": 0}

            def reader() -> None:
                g = c.filter("py-sentinel", policy=bloomguard.Policy())
                while not stop.is_set():
                    try:
                        seen["absent"] += sum(1 for x in g.contains_many(items[:64]) if not x)
                        seen["queries"] += 1
                    except bloomguard.BloomGuardError:
                        seen["errors"] += 1
                    time.sleep(0.005)

            t = threading.Thread(target=reader)
            t.start()
            try:
                s.kill_data(m)
                deadline = time.time() + 30
                while time.time() < deadline and f.node()[0] != "127.0.0.1:%d" % s.data_ports[1 - m]:
                    time.sleep(0.05)
                time.sleep(0.5)
            finally:
                stop.set()
                t.join()
            assert f.node()[0] == "127.0.0.1:%d" % s.data_ports[1 - m]
            assert seen["errors"] == 0 and seen["absent"] == 0 and seen["queries"] > 0
            assert all(f.contains_many(items))
            assert f.add("after-failover") and f.contains("after-failover")
            assert f.stats()["cluster_map_reloads"] >= 1


def test_bad_sentinel_urls():
    with pytest.raises(bloomguard.BadURL, match="names the master after '#'"):
        bloomguard.Client("redis-sentinel://127.0.0.1:1")
    with pytest.raises(bloomguard.ConnectionError, match="no sentinel of the URL answered"):
        bloomguard.Client("redis-sentinel://127.0.0.1:1,127.0.0.1:2#m", connect_timeout=0.2, connect_at_open=True)
    with bloomguard.Client("redis-sentinel://127.0.0.1:1,127.0.0.1:2#m", connect_timeout=0.2) as c:
        with pytest.raises(bloomguard.ConnectionError, match="no sentinel of the URL answered"):
            c.ping()


def test_sentinel_credentials():
    with RedisSentinelSet(data_password="d4ta-pw", sentinel_password="s3nt-pw") as s:
        url = s.url
        assert url.startswith("redis-sentinel://:d4ta-pw@")
        with bloomguard.Client(url, sentinel_password="s3nt-pw") as c:
            c.ping()
        with pytest.raises(bloomguard.BloomGuardError) as e:
            bloomguard.Client(url, connect_at_open=True)
        assert "sentinel_password" in str(e.value) and "pw" not in str(e.value).replace("password", "")
        with bloomguard.Client(url) as c:  # opening connects nothing: the first call says it
            with pytest.raises(bloomguard.BloomGuardError) as e:
                c.ping()
            assert "sentinel_password" in str(e.value) and "pw" not in str(e.value).replace("password", "")
