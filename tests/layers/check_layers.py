#!/usr/bin/env python3
"""Checks the layer rule of the library's folders (README "Where things live", DESIGN "Layers"):

    cli -> ABI -> rotation -> {lock, filter};  filter -> policy;  {filter, lock} -> redis -> common;
    hash and common at the bottom.

A file in csrc/<dir>/ may include (with #include "...") a header of its own folder, a public header
(include/bloomguard/*: the ABI's declarations, which every layer uses for its types and statuses),
or a header of a layer below its own, directly or through other layers. csrc/client/ (the client,
the one call loop and the Lua steps that run through it, on top of redis/) is the layer "client",
between {filter, lock} and redis/. Nothing may include a header of a layer
above it or beside it: that is a call back up (policy including filter/ made the circle
filter -> policy -> filter of issue 15).

Usage: check_layers.py [--root DIR]   exit 0 when the rule holds, 1 with one line per violation.
       check_layers.py --self-test    the negative control: a tree with a violation must fail.
"""
import argparse
import os
import re
import shutil
import sys
import tempfile

# What each layer may include besides itself and the public headers: the arrows of the rule.
ARROWS = {
    "cli": set(),            # cli -> ABI: the public headers only
    "rotation": {"lock", "filter"},
    "filter": {"policy", "client"},
    "lock": {"client"},
    "policy": set(),
    "client": {"redis"},
    "redis": {"common"},
    "hash": {"common"},
    "common": set(),
}
BOTTOM = {"hash", "common"}   # usable by every layer above them (but cli, which sees the ABI only)

# Known exceptions: each is a (file, included header) pair with its reason. A new violation is
# never added here without a reason. (call.h moved into common/ and the lock's key names into
# redis/names.h, which removed wait.h -> call.h, hash/api.c -> call.h and lock.c -> filter.h.)
EXCEPTIONS = {
    ("csrc/lock/filter_lock.c", "csrc/filter/filter.h"): "bg_lock_open_filter takes a bg_filter: it reads the "
                                                         "filter's name (the lock's key is redis/names.h's)",
}

INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCE_EXT = (".c", ".h", ".cc")


def allowed(layer):
    """Every layer `layer` may include: its arrows, followed to the end, and the bottom."""
    seen, todo = set(), list(ARROWS[layer])
    while todo:
        x = todo.pop()
        if x not in seen:
            seen.add(x)
            todo.extend(ARROWS[x])
    if layer not in BOTTOM and layer != "cli":
        seen |= BOTTOM
    return seen


def layer_of(root, path):
    """The layer of a file under csrc/ (relative path), or None outside csrc/."""
    parts = path.split("/")
    if parts[0] != "csrc":
        return None
    if len(parts) == 2:
        return "top"      # nothing lives at the top of csrc/: every file is in a layer's folder
    return parts[1]


def resolve(root, src, name):
    """The repository-relative path an include names, as the build resolves it, or None."""
    for base in (os.path.dirname(src), "csrc", "include"):
        cand = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def violations(root):
    out, used = [], set()
    for dirpath, _, files in os.walk(os.path.join(root, "csrc")):
        for fn in sorted(files):
            if not fn.endswith(SOURCE_EXT):
                continue
            src = os.path.relpath(os.path.join(dirpath, fn), root)
            layer = layer_of(root, src)
            if layer == "top":
                out.append("%s: a file at the top of csrc/ is in no layer: put it in its layer's folder" % src)
                continue
            if layer not in ARROWS:
                out.append("%s: folder csrc/%s is in no layer of the rule: add it to ARROWS" % (src, layer))
                continue
            with open(os.path.join(root, src), encoding="utf-8", errors="replace") as f:
                text = f.read()
            for m in INCLUDE_RE.finditer(text):
                target = resolve(root, src, m.group(1))
                if target is None or not target.startswith("csrc/"):
                    continue   # public headers, or not ours (hiredis, generated)
                to = layer_of(root, target)
                if to == layer or to in allowed(layer):
                    continue
                if (src, target) in EXCEPTIONS:
                    used.add((src, target))
                    continue
                line = text.count("\n", 0, m.start()) + 1
                out.append("%s:%d: %s includes %s (layer %s): a header of a layer above it or beside it "
                           "(%s may include: %s)" % (src, line, layer, target, to, layer,
                                                      ", ".join(sorted(allowed(layer))) or "public headers only"))
    stale = sorted(set(EXCEPTIONS) - used)
    return out, stale


def check(root):
    out, stale = violations(root)
    for s in stale:
        print("note: exception %s -> %s no longer occurs: remove it from EXCEPTIONS" % s)
    for v in out:
        print(v)
    if out:
        print("%d include(s) break the layer rule (tests/layers/check_layers.py)" % len(out))
        return 1
    print("layers: ok")
    return 0


def self_test():
    """Negative control: the checker must fail on a tree with a violation and pass without it."""
    tmp = tempfile.mkdtemp(prefix="bg-layers-")
    try:
        def put(rel, text=""):
            p = os.path.join(tmp, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as f:
                f.write(text)
        put("include/bloomguard/filter.h")
        put("csrc/common/err.h")
        put("csrc/redis/conn.h", '#include "common/err.h"\n')
        put("csrc/client/client.h", '#include "redis/conn.h"\n')
        put("csrc/policy/guard.h", '#include "bloomguard/filter.h"\n#include "common/err.h"\n')
        put("csrc/filter/filter.h", '#include "policy/guard.h"\n#include "client/client.h"\n')
        put("csrc/rotation/rotation.h", '#include "filter/filter.h"\n#include "policy/guard.h"\n')
        put("csrc/lock/filter_lock.c", '#include "filter/filter.h"\n')   # an exception: allowed
        assert violations(tmp)[0] == [], violations(tmp)[0]
        cases = [
            ("csrc/policy/guard.c", '#include "filter/filter.h"\n'),   # the circle of issue 15
            ("csrc/redis/conn.c", '#include "client/client.h"\n'),
            ("csrc/client/client.c", '#include "policy/guard.h"\n'),
            ("csrc/loose.c", ""),
            ("csrc/common/x.c", '#include "redis/conn.h"\n'),
            ("csrc/filter/x.c", '#include "rotation/rotation.h"\n'),
            ("csrc/cli/x.c", '#include "filter/filter.h"\n'),
            ("csrc/cli/y.c", '#include "common/err.h"\n'),
            ("csrc/lock/x.c", '#include "policy/guard.h"\n'),
            ("csrc/newdir/x.c", ""),
        ]
        for rel, text in cases:
            put(rel, text)
            found = violations(tmp)[0]
            if not found:
                print("self-test FAILED: %s with %r was not caught" % (rel, text))
                return 1
            print("caught: %s" % found[0])
            os.remove(os.path.join(tmp, rel))
        assert violations(tmp)[0] == []
        print("self-test: ok (%d violations caught, the clean tree passes)" % len(cases))
        return 0
    finally:
        shutil.rmtree(tmp)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    sys.exit(self_test() if a.self_test else check(os.path.abspath(a.root)))


if __name__ == "__main__":
    main()
