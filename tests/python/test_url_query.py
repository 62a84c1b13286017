"""Client options in the URL's query, as redis-py and go-redis take them: client_name, pool_size
(max_connections), connect_timeout (socket_connect_timeout, dial_timeout) and timeout
(socket_timeout, read_timeout) - an option given to the client wins over the URL's; protocol is
refused by name with what bloomguard does instead; an unknown parameter is named."""
from __future__ import annotations

import time

import pytest

import bloomguard
from lateness import Lateness


def test_client_name_and_pool_size_from_the_query(url, raw):
    with bloomguard.Client(url + "?client_name=bg-from-url&max_connections=2", pipeline=False) as c:
        c.ping()
        names = [line for line in raw("CLIENT", "LIST").decode().splitlines() if "name=bg-from-url " in line]
        assert names, "no connection named from the URL's client_name"
    with bloomguard.Client(url + "?client_name=bg-from-url", client_name="bg-explicit") as c:
        c.ping()
        listing = raw("CLIENT", "LIST").decode()
        assert "name=bg-explicit " in listing  # the option given to the client wins


@pytest.mark.parametrize("param", ["timeout=0.2", "socket_timeout=0.2", "read_timeout=200ms"])
def test_the_query_timeout_is_the_command_timeout(url, fname, raw, param):
    with bloomguard.Client("%s?%s" % (url, param)) as c, c.filter(fname) as f:
        f.init(100, 0.01)
        with Lateness() as late:
            raw("CLIENT", "PAUSE", 1500, "ALL")
            t0 = time.monotonic()
            with pytest.raises(bloomguard.Timeout):
                f.contains("x")
            took = time.monotonic() - t0
            raw("CLIENT", "UNPAUSE")
            assert 0.15 <= took <= 0.2 + 0.05 + late.worst_since(t0), took
        f.delete()


def test_an_explicit_timeout_wins_over_the_query(url, fname, raw):
    with bloomguard.Client(url + "?timeout=0.2", command_timeout=5) as c, c.filter(fname) as f:
        f.init(100, 0.01)
        raw("CLIENT", "PAUSE", 500, "ALL")
        assert f.contains("x") is False  # waited out the pause: the client's 5 s, not the URL's 0.2 s
        f.delete()


def test_protocol_and_unknown_parameters_are_refused_by_name(url):
    with pytest.raises(bloomguard.BadURL, match="protocol is not taken from the URL"):
        bloomguard.Client(url + "?protocol=3")
    with pytest.raises(bloomguard.BadURL, match='query parameter "frobnicate" is not understood \\(known: db'):
        bloomguard.Client(url + "?frobnicate=1")
    with pytest.raises(bloomguard.BadURL, match="the query's pool_size is out of range"):
        bloomguard.Client(url + "?pool_size=0")
