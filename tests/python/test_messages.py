"""Messages speak the user's language: what a Python user reads in an exception names no C
function, type or macro (bg_*, BG_*, bgi_*, NULL) - options by their keyword, a timeout by its
seconds. Each message below comes from a real failure against a real server (or the URL and
option checks, which need none)."""
from __future__ import annotations

import asyncio
import re
import socket
from typing import Callable, List

import pytest

import bloomguard
import bloomguard.aio as aio

FORBIDDEN = re.compile(r"\bbgi?_[a-z_]+|\bBG_[A-Z_]+|\bNULL\b")


def _message_of(fn: Callable[[], object]) -> str:
    with pytest.raises(bloomguard.BloomGuardError) as ei:
        fn()
    return str(ei.value)


def test_the_forbidden_words_are_caught():
    """The control: the check sees C names where they are."""
    for planted in ("give BG_OPT_TLS_CA_FILE", "rejected by bg_call_set_timeout_ms", "bgi_err", "item is NULL"):
        assert FORBIDDEN.search(planted), planted
    assert not FORBIDDEN.search("give tls_ca_file (timed out after 0.2 s)")


def test_messages_name_no_c_internals(url, fname, raw, tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    silent = "redis://127.0.0.1:%d" % listener.getsockname()[1]
    messages: List[str] = []
    messages.append(_message_of(lambda: bloomguard.Client("redis://user@127.0.0.1:1")))  # user without password
    messages.append(_message_of(lambda: bloomguard.Client(url, pool_size=0)))
    messages.append(_message_of(lambda: bloomguard.Client(url, cluster=True, db=3)))
    messages.append(_message_of(lambda: bloomguard.Client("rediss://127.0.0.1:1", tls_cert_file=str(tmp_path / "c"))))
    messages.append(_message_of(lambda: bloomguard.Client("nope://x")))
    with bloomguard.Client(url, command_timeout=5) as c:
        f = c.filter(fname)
        messages.append(_message_of(lambda: f.contains("x")))                      # not initialized
        messages.append(_message_of(lambda: f.contains("x", timeout=3601)))        # out of range
        f.init(100, 0.01)
        raw("CLIENT", "PAUSE", 1500, "ALL")
        timed_out = _message_of(lambda: f.contains("x", timeout=0.2))
        raw("CLIENT", "UNPAUSE")
        assert timed_out.startswith("timed out after 0.2 s"), timed_out
        messages.append(timed_out)
        messages.append(_message_of(lambda: f.expire(-1)))
        f.delete()
    with bloomguard.Client(silent, connect_timeout=0.3, command_timeout=0.3) as c:
        messages.append(_message_of(lambda: c.filter(fname).contains("x")))         # a server that never answers

    async def aio_messages() -> List[str]:
        out = []
        async with aio.connect(url, command_timeout=5) as c:
            f = c.filter(fname)
            await f.init(100, 0.01)
            raw("CLIENT", "PAUSE", 1500, "ALL")
            try:
                await f.contains("x", timeout=0.2)
            except bloomguard.Timeout as e:
                out.append(str(e))
            raw("CLIENT", "UNPAUSE")
            await f.delete()
        return out
    got = asyncio.run(aio_messages())
    assert len(got) == 1, got
    messages += got
    listener.close()
    bad = [m for m in messages if FORBIDDEN.search(m)]
    assert not bad, "C names in messages:\n" + "\n".join(bad)
    assert len(messages) == 11 and all(messages), messages
