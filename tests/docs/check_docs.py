#!/usr/bin/env python3
"""The documentation cites no internal references: no issue numbers ("issue 14", "#14"), no work
sessions ("session 6", "this session's machine"), no review labels ("R1"). Those mean nothing to a
reader of the docs and go stale.

Scans README.md, mkdocs.yml, every page under docs/ (symlinked pages included), examples/, the
bindings' and bench's READMEs and the tests' READMEs. Before that, a negative control: a planted
tree holding one line per pattern (and a clean page) must be flagged line by line, or the check
itself is broken.

    python3 tests/docs/check_docs.py [ROOT]      # exit 0: clean, 1: hits (listed), 2: control failed
"""
import os
import re
import sys
import tempfile

PATTERNS = [
    ("an issue number", re.compile(r"\bissues?\s*#?\s*\d+", re.I)),
    ("a '#N' reference", re.compile(r"(?<![&\w/])#\d+\b")),
    ("a work session", re.compile(r"\bsessions?\b", re.I)),
    ("a review label", re.compile(r"\bR\d+\b")),
]
TEXT = (".md", ".yml", ".py", ".go", ".c", ".h", ".sh", ".txt")


def files(root):
    """The documentation files under root, as paths relative to it."""
    out = []
    for top in ("README.md", "mkdocs.yml"):
        if os.path.isfile(os.path.join(root, top)):
            out.append(top)
    for base, exts in (("docs", (".md", ".yml")), ("examples", TEXT)):
        for d, _, names in os.walk(os.path.join(root, base), followlinks=True):
            out += [os.path.relpath(os.path.join(d, n), root) for n in names if n.endswith(exts)]
    for base in ("bindings", "bench", "tests"):
        for d, dirs, names in os.walk(os.path.join(root, base)):
            dirs[:] = [x for x in dirs if x not in ("internal", "node_modules", "target", "__pycache__")]
            out += [os.path.relpath(os.path.join(d, n), root) for n in names if n == "README.md"]
    return sorted(set(out))


def hits(root):
    """(path, line, what, text) for every match; a match may span a line break."""
    found = []
    for rel in files(root):
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        flat = re.sub(r"\s", " ", text)  # same offsets, line breaks as spaces
        for what, rx in PATTERNS:
            for m in rx.finditer(flat):
                line = text.count("\n", 0, m.start()) + 1
                found.append((rel, line, what, m.group(0)))
    return found


def control():
    """A planted tree: each pattern on its own line must be found there, the clean page untouched."""
    planted = [
        "as issue 14 asked",
        "see issue\n5's target",  # across a line break
        "fixed in #123 last week",
        "measured in session 6",
        "this session's machine",
        "the R1 label",
    ]
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "docs"))
        with open(os.path.join(root, "docs", "planted.md"), "w") as fh:
            fh.write("\n\n".join(planted) + "\n")
        with open(os.path.join(root, "README.md"), "w") as fh:
            fh.write("# Clean\n\nRedis 7.0, RESP3, `&#123;`, [a](x.md#part-2), CLIENT PAUSE 100, R&D.\n")
        got = hits(root)
    bad = []
    lines = {line for rel, line, _, _ in got if rel == os.path.join("docs", "planted.md")}
    line = 1
    for p in planted:
        if line not in lines:
            bad.append("not flagged: %r" % p)
        line += p.count("\n") + 2
    bad += ["flagged in the clean page: %s" % (h,) for h in got if h[0] == "README.md"]
    return bad


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    bad = control()
    if bad:
        print("check_docs: the negative control failed - the check cannot be trusted:", *bad, sep="\n  ")
        return 2
    if "README.md" not in files(root):
        print("check_docs: no README.md under %s: not the repository" % root)
        return 2
    found = hits(root)
    for rel, line, what, text in found:
        print("%s:%d: %s: %r" % (rel, line, what, text))
    if found:
        print("check_docs: %d internal reference(s) in the documentation: say what is meant instead" % len(found))
        return 1
    print("check_docs: %d files clean (the planted control was caught)" % len(files(root)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
