"""The Sentinel fixture's own tests (sentinel_helpers.RedisSentinelSet), with raw RESP only: the
roles and get-master-addr-by-name, a kill -9 failover (the time to +switch-master printed), the old
master back as a replica, both passwords (a sentinel with requirepass answers NOAUTH), all
sentinels killed and restarted, and a stop that leaves nothing. Negative controls: wait_master
refuses a replica and a killed master, master() is -1 with no sentinel alive, restarts refuse a
running process. Select with ``-m sentinel`` or this file's name."""
from __future__ import annotations

import errno
import os
import time

import pytest

from redis_helpers import Resp, RespError
from sentinel_helpers import RedisSentinelSet, SentinelError

pytestmark = pytest.mark.sentinel


@pytest.fixture(scope="module")
def sset():
    with RedisSentinelSet() as s:
        yield s


def seed(s: RedisSentinelSet, m: int, key: str, val: str) -> None:
    """Written on the master and WAITed for: a kill -9 right after cannot lose it. One connection:
    WAIT counts the acknowledgements of this connection's writes (on a fresh one it returns at once)."""
    with s.data_resp(m) as r:
        assert r("SET", key, val) == "OK" and r("WAIT", 1, 5000) == 1


def kill_and_watch(s: RedisSentinelSet, m: int) -> float:
    """kill -9 of data node m, watched on sentinel 0: seconds to +switch-master (printed)."""
    with s.sentinel_resp(0) as sub:
        sub.send("SUBSCRIBE", "+switch-master")
        assert sub.read()[0] == b"subscribe"
        s.kill_data(m)
        t0 = time.monotonic()
        assert s.data_pids[m] == 0
        with pytest.raises(SentinelError):  # its ROLE cannot say master any more
            s.wait_master(m, 0.1)
        sub.sock.settimeout(20)
        msg = sub.read()
        took = time.monotonic() - t0
    assert msg[0] == b"message" and msg[1] == b"+switch-master"
    print("+switch-master %.2f s after kill -9: %s" % (took, msg[2].decode()))
    # "<name> <old ip> <old port> <new ip> <new port>"
    assert msg[2].decode().split() == ["bgmaster", "127.0.0.1", str(s.data_ports[m]), "127.0.0.1",
                                       str(s.data_ports[1 - m])]
    return took


def test_topology(sset):
    s = sset
    assert s.master_name == "bgmaster" and all(s.data_pids) and all(s.sentinel_pids)
    assert s.url == "redis-sentinel://%s#bgmaster" % ",".join("127.0.0.1:%d" % p for p in s.sentinel_ports)
    assert s.master() == 0
    assert s.data_cmd(0, "ROLE")[0] == b"master"
    assert s.data_cmd(1, "ROLE")[:4] == [b"slave", b"127.0.0.1", s.data_ports[0], b"connected"]
    assert str(s.data_cmd(1, "SET", "k", "v")).startswith("READONLY")
    for i in range(3):
        assert s.sentinel_cmd(i, "SENTINEL", "get-master-addr-by-name", "bgmaster") == \
            [b"127.0.0.1", str(s.data_ports[0]).encode()]
        assert s.sentinel_cmd(i, "SENTINEL", "get-master-addr-by-name", "nope") is None
    s.wait_master(0, 5)
    with pytest.raises(SentinelError):
        s.wait_master(1, 0.3)  # a replica is not master
    with pytest.raises(SentinelError):
        s.restart_data(0)  # running
    with pytest.raises(SentinelError):
        s.restart_sentinel(0)


def test_failover_and_restart(sset):
    s = sset
    m = s.master()
    r = 1 - m
    seed(s, m, "bgt-py:a", "before")
    kill_and_watch(s, m)
    s.wait_master(r, 20)
    assert s.master() == r
    assert s.data_cmd(r, "GET", "bgt-py:a") == b"before"
    with pytest.raises(OSError):
        s.data_cmd(m, "PING")
    s.restart_data(m)
    assert s.data_pids[m] > 0
    assert s.data_cmd(m, "ROLE")[:4] == [b"slave", b"127.0.0.1", s.data_ports[r], b"connected"]
    assert s.data_cmd(m, "GET", "bgt-py:a") == b"before"
    assert s.master() == r


def test_sentinels_killed_and_restarted(sset):
    s = sset
    m = s.master()
    for i in range(3):
        s.kill_sentinel(i)
    assert s.sentinel_pids == [0, 0, 0] and s.master() == -1
    for i in range(3):
        with pytest.raises(OSError):
            s.sentinel_cmd(i, "PING")
    for i in range(3):
        s.restart_sentinel(i)
    assert s.master() == m
    s.wait_master(m, 5)


def test_passwords():
    with RedisSentinelSet(data_password="d-pw#1", sentinel_password="s pw \"2\"@") as s:
        assert s.url.startswith("redis-sentinel://:d-pw%231@127.0.0.1:")
        with Resp("127.0.0.1", s.sentinel_ports[0], timeout=5) as raw:
            with pytest.raises(RespError, match="^NOAUTH"):
                raw("SENTINEL", "get-master-addr-by-name", "bgmaster")
            with pytest.raises(RespError, match="^WRONGPASS"):
                raw("AUTH", "d-pw#1")  # the data password is not the sentinels' one
        with Resp("127.0.0.1", s.data_ports[0], timeout=5) as raw:
            with pytest.raises(RespError, match="^NOAUTH"):
                raw("GET", "k")
        assert s.sentinel_cmd(1, "SENTINEL", "get-master-addr-by-name", "bgmaster")[1] == str(s.data_ports[0]).encode()
        assert s.data_cmd(1, "ROLE")[3] == b"connected"  # masterauth
        kill_and_watch(s, 0)  # Sentinel needs auth-pass to promote and reconfigure
        s.wait_master(1, 20)
        s.restart_data(0)
        s.kill_sentinel(2)
        s.restart_sentinel(2)  # from its rewritten config, requirepass included
        with Resp("127.0.0.1", s.sentinel_ports[2], timeout=5) as raw:
            with pytest.raises(RespError, match="^NOAUTH"):
                raw("PING")
    with pytest.raises(SentinelError, match="data_password"):
        RedisSentinelSet(data_password="has space")


def test_stop_leaves_nothing():
    s = RedisSentinelSet().start()
    pids, d = s.data_pids + s.sentinel_pids, s.dir
    s.stop()
    s.stop()  # idempotent
    for pid in pids:
        with pytest.raises(OSError) as e:
            os.kill(pid, 0)
        assert e.value.errno == errno.ESRCH
    for i in range(2):
        with pytest.raises(OSError):
            s.data_cmd(i, "PING")
    for i in range(3):
        with pytest.raises(OSError):
            s.sentinel_cmd(i, "PING")
    assert not os.path.exists(d)
