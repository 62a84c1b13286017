"""Fuzz test: no exception raised by bloomguard.Client may contain the password, whatever the URL
looks like.

A deterministic seed mutates URLs holding a distinctive password (punctuation edits, a damaged
scheme, truncation; a missing '@', a doubled ':', an '@' in the password, %-escapes). Every server
is 127.0.0.1 or [::1] port 1, where nothing listens, with a 50 ms connect timeout and
connect_at_open (open reaches the server, so connect errors are checked too): no attempt waits.
Needs no redis-server.
"""
from __future__ import annotations

import random

import bloomguard

SECRETS = ("S3cr3t!Pw", "S3cr3t%21Pw", "S3cr3tPw", "Qu1et@Pw", "Qu1et%40Pw")
BASES = (
    "redis://:S3cr3t!Pw@127.0.0.1:1",
    "redis://:S3cr3t!Pw/x@127.0.0.1:1",
    "redis://alice:S3cr3t!Pw@127.0.0.1:1/2",
    "redis://alice:S3cr3t%21Pw@127.0.0.1:1?db=2",
    "redis://:S3cr3t!Pw@127.0.0.1:1,127.0.0.1:1/1",
    "redis://:S3cr3t!Pw@[::1]:1",
    "redis://u:a@S3cr3t!Pw@127.0.0.1:1",
    "redis.//user:S3cr3t!Pw@127.0.0.1:1",
    "rediss://:S3cr3t!Pw@127.0.0.1:1",
    "redis://S3cr3tPw127.0.0.1:1",  # its ':' and '@' lost: the password is the host
    "redis://:S3cr3tPw127.0.0.1:1",  # its '@' lost
    "redis://::S3cr3tPw@127.0.0.1:1",  # a doubled ':'
    "redis://:Qu1et@Pw@127.0.0.1:1",  # an '@' in the password
    "redis://:Qu1et@Pw127.0.0.1:1",  # ... and the last '@' lost
    "redis://:Qu1et%40Pw@127.0.0.1:1",  # %-escaped
)
KNOWN = ("redis://:S3cr3t!Pw/x@127.0.0.1:6379", "redis:/:S3cr3t!Pw@h", "redis//:S3cr3t!Pw@h",
         "redis:S3cr3t!Pw@h", ":S3cr3t!Pw@h:6379", "redis.//user:S3cr3t!Pw@h")
PUNCT = ":/@[]?=,%.#&;0123456789"
RUNS = 1500


def mutate(rng: random.Random, url: str) -> str:
    s = list(url)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(5)
        at = rng.randrange(len(s)) if s else 0
        if op == 0 and s:
            del s[at]
        elif op == 1:
            s.insert(at, rng.choice(PUNCT))
        elif op == 2 and s:
            s[at] = rng.choice(PUNCT)
        elif op == 3:
            t = "".join(s)
            k = t.find("://")
            if k >= 0:
                j = k + rng.randrange(3)
                s = list(t[:j] + ("." if rng.randrange(2) else "") + t[j + 1:])
        elif s:
            s = s[:at + 1]
    return "".join(s)


def test_no_password_in_client_errors():
    rng = random.Random(0xB100D)
    urls = list(KNOWN) + [mutate(rng, rng.choice(BASES)) for _ in range(RUNS)]
    leaks = []
    for url in urls:
        try:
            c = bloomguard.Client(url, connect_timeout=0.05, command_timeout=0.05, connect_at_open=True)
        except bloomguard.BloomGuardError as exc:
            text = "%s %r" % (exc, exc)
            if any(s in text for s in SECRETS):
                leaks.append((url, str(exc)))
        else:
            c.close()  # something listened after all: nothing to check
    assert not leaks, "%d of %d messages held the password, e.g. %r" % (len(leaks), len(urls), leaks[:3])
