#!/usr/bin/env python3
"""Fuzz test of the bloomguard command: no output may contain the password (issue 11, item 3).

    python3 tests/cli/argv_fuzz.py PATH/TO/bloomguard [RUNS]

Runs the command RUNS times (default 400; deterministic seed) with argument vectors built from
a URL holding a distinctive password: the URL mutated (edits of its punctuation, a damaged scheme)
and the vector shuffled (the URL misplaced as a command, an item, the value of another option,
--url given twice, --url=URL, the URL in $BLOOMGUARD_URL, the lock subcommand). Every server is
127.0.0.1 port 1, where nothing listens, with --timeout-ms 100, so no run waits. Fails when
stdout or stderr of any run holds the password (or a sanitizer's report, or a run died of a signal). Starts no server; needs
nothing but python3.
"""
from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile

SECRET = "S3cr3t!Pw"
SECRETS = (SECRET, "S3cr3t%21Pw")
BASE_URLS = (
    "redis://:S3cr3t!Pw@127.0.0.1:1",
    "redis://:S3cr3t!Pw/x@127.0.0.1:1",
    "redis://alice:S3cr3t!Pw@127.0.0.1:1/2",
    "redis://alice:S3cr3t%21Pw@127.0.0.1:1?db=2",
    "redis://:S3cr3t!Pw@127.0.0.1:1,127.0.0.1:1",
    "redis://:S3cr3t!Pw@[::1]:1",
    "redis.//user:S3cr3t!Pw@127.0.0.1:1",
)
KNOWN = (  # the examples
    ["--url", "--url", "redis://:S3cr3t!Pw@127.0.0.1:1", "info", "f"],
    ["--url", "redis://:S3cr3t!Pw/x@127.0.0.1:1", "info", "f"],
    ["--url", "redis:/:S3cr3t!Pw@h", "info", "f"],
    ["--url", "redis//:S3cr3t!Pw@h", "info", "f"],
    ["--url", "redis:S3cr3t!Pw@h", "info", "f"],
    ["--url", ":S3cr3t!Pw@h:1", "info", "f"],
    ["--url", "redis.//user:S3cr3t!Pw@h", "info", "f"],
    ["--password=S3cr3t!Pw", "info", "f"],
    ["--timeout-ms", "redis://:S3cr3t!Pw@h", "info", "f"],
    ["lock", "--url", "--url", "redis://:S3cr3t!Pw@127.0.0.1:1", "l"],
    ["lock", "l", "redis://:S3cr3t!Pw@127.0.0.1:1"],
)
PUNCT = ":/@[]?=,%.#&;0123456789"
COMMANDS = (["info", "f"], ["count", "f"], ["contains", "f", "a"], ["expire", "f", "--ttl-ms", "5"],
            ["lock", "l", "--hold-ms", "0"], ["info"], [])
OPTIONS = ("--url", "--timeout-ms", "--batch", "--strategy", "--fpp", "--ttl-ms", "--expected", "--from",
           "--mode", "--wait-ms", "--password-file", "--bogus")


def mutate_url(rng: random.Random, url: str) -> str:
    s = list(url)
    for _ in range(rng.randint(0, 3)):
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


def argv_for(rng: random.Random, url: str) -> tuple[list[str], dict]:
    cmd = list(rng.choice(COMMANDS))
    env = {}
    shape = rng.randrange(8)
    if shape == 0:
        argv = ["--url", url] + cmd
    elif shape == 1:
        argv = cmd + ["--url=" + url]
    elif shape == 2:
        argv = ["--url", "--url", url] + cmd            # the URL becomes the command
    elif shape == 3:
        argv = cmd + [url]                               # the URL as an item or a stray argument
        env["BLOOMGUARD_URL"] = "redis://127.0.0.1:1"
    elif shape == 4:
        argv = cmd + [rng.choice(OPTIONS), url]          # the URL as another option's value
        env["BLOOMGUARD_URL"] = "redis://127.0.0.1:1"
    elif shape == 5:
        argv = cmd[:]
        env["BLOOMGUARD_URL"] = url
    elif shape == 6:
        argv = [rng.choice(OPTIONS) + "=" + url] + cmd
        env["BLOOMGUARD_URL"] = "redis://127.0.0.1:1"
    else:
        argv = ["--url", url] + cmd
        k = rng.randrange(len(argv) + 1)
        argv.insert(k, url)                              # a second copy anywhere
    argv = argv + ["--timeout-ms", "100"] if rng.randrange(4) else ["--timeout-ms=100"] + argv
    return argv, env


def main() -> int:
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 64
    binary = os.path.abspath(sys.argv[1])
    runs = int(sys.argv[2]) if len(sys.argv) == 3 else 400
    rng = random.Random(0xB100D)
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("BLOOMGUARD_")}
    # never the default 127.0.0.1:6379, where some other server may listen
    base_env["BLOOMGUARD_URL"] = "redis://127.0.0.1:1"
    cases = [(list(a), {}) for a in KNOWN]
    for _ in range(runs):
        cases.append(argv_for(rng, mutate_url(rng, rng.choice(BASE_URLS))))
    leaks = crashes = 0
    with tempfile.TemporaryDirectory() as tmp:
        for argv, env in cases:
            e = dict(base_env)
            e.update(env)
            p = subprocess.run([binary] + argv, env=e, stdin=subprocess.DEVNULL, capture_output=True,
                               timeout=30, cwd=tmp)
            out = p.stdout.decode("utf-8", "replace") + p.stderr.decode("utf-8", "replace")
            if "Sanitizer" in out or "runtime error:" in out or p.returncode < 0:
                crashes += 1  # a sanitizer build of the command reports here too
                if crashes <= 3:
                    print("crash: argv=%r env=%r rc=%d\n      %s" % (argv, env, p.returncode, out[:2000]))
            if any(s in out for s in SECRETS):
                leaks += 1
                if leaks <= 8:
                    print("leak: argv=%r env=%r rc=%d\n      %s" % (argv, env, p.returncode,
                                                                   out.strip().replace("\n", "\n      ")))
    print("%d runs, %d leaked the password, %d crashed" % (len(cases), leaks, crashes))
    return 1 if leaks or crashes else 0


if __name__ == "__main__":
    sys.exit(main())
