#!/usr/bin/env python3
"""Fails on a test that asserts nothing: a test that cannot fail is a defect.

Python (tests/python, tests/race): every ``test_*`` function must contain an ``assert``, a
``pytest.raises`` / ``pytest.fail`` / ``pytest.warns``, a ``raise AssertionError``, or a call of a
function of these directories that does (followed through any depth of helpers).
C (tests/c): every case a ``BGT_CASE(...)`` registers (setup and teardown aside) must contain a
``CHECK...`` or ``bgt_fail``, or call (or hand on) a function of tests/c that does.

The rare legitimate exception says why, inside the test: ``# lint: no-assert (why)`` in Python,
``/* lint: no-assert (why) */`` in C.

    python3 scripts/lint-tests.py              check the tree (exit 1 on a finding)
    python3 scripts/lint-tests.py --self-test  the control: planted tests with and without checks
"""
from __future__ import annotations

import argparse
import ast
import re
import sys
import tempfile
from pathlib import Path
from typing import Dict, Iterable, List, Set, Tuple

ROOT = Path(__file__).resolve().parents[1]
MARK = "lint: no-assert"
PY_ASSERTING_ATTRS = {"raises", "fail", "warns"}  # pytest.raises(...), pytest.fail(...)


def _through_helpers(asserting: Set[str], calls: Dict[str, Set[str]]) -> Set[str]:
    """The functions that assert, directly or by calling (at any depth) one that does."""
    asserting = set(asserting)
    changed = True
    while changed:
        changed = False
        for name, called in calls.items():
            if name not in asserting and called & asserting:
                asserting.add(name)
                changed = True
    return asserting


# ---- Python --------------------------------------------------------------------------------------

def _called_names(fn: ast.AST) -> Set[str]:
    names: Set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name):
                names.add(f.id)
            elif isinstance(f, ast.Attribute):
                names.add(f.attr)
    return names


def _asserts_directly(fn: ast.AST) -> bool:
    for node in ast.walk(fn):
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(exc, ast.Name) and exc.id == "AssertionError":
                return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in PY_ASSERTING_ATTRS and isinstance(node.func.value, ast.Name) \
                    and node.func.value.id == "pytest":
                return True
    return False


def python_findings(files: Iterable[Path]) -> List[str]:
    funcs: Dict[str, List[Tuple[Path, ast.AST, str]]] = {}
    for path in files:
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text, str(path))
        lines = text.splitlines()
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                src = "\n".join(lines[node.lineno - 1:node.end_lineno])
                funcs.setdefault(node.name, []).append((path, node, src))
    asserting = _through_helpers({name for name, defs in funcs.items() if any(_asserts_directly(n) for _, n, _ in defs)},
                                 {name: set().union(*(_called_names(n) for _, n, _ in defs)) for name, defs in funcs.items()})
    out = []
    for name, defs in sorted(funcs.items()):
        if not name.startswith("test_"):
            continue
        for path, node, src in defs:
            if name in asserting or MARK in src:
                continue
            out.append("%s:%d: %s asserts nothing (no assert, no pytest.raises, no asserting helper; a "
                       "legitimate exception says '# %s (why)')" % (path, node.lineno, name, MARK))
    return out


# ---- C -------------------------------------------------------------------------------------------

# a definition starts a line: [static] [inline] [const|struct|unsigned] TYPE [*] NAME(params) {
C_FUNC = re.compile(r"^(?:static[ \t]+)?(?:inline[ \t]+)?(?:(?:const|struct|unsigned)[ \t]+)?\w+[ \t\*]+(\w+)\([^;{}]*\)[ \t]*\{",
                    re.M)
C_CHECK = re.compile(r"\b(CHECK\w*|bgt_fail)\s*\(")
C_REF = re.compile(r"\b(\w+)\b")   # a call, or a function handed on (with_server(case_body))
C_CASE = re.compile(r"BGT_CASE\(\s*(\w+)\s*\)")


def _c_bodies(text: str) -> Dict[str, str]:
    bodies = {}
    for m in C_FUNC.finditer(text):
        depth, i = 0, m.end() - 1
        while i < len(text):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        bodies[m.group(1)] = text[m.start():i + 1]
    return bodies


def c_findings(files: Iterable[Path]) -> List[str]:
    bodies: Dict[str, str] = {}
    cases: List[Tuple[Path, str]] = []
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        bodies.update(_c_bodies(text))
        cases += [(path, c) for c in C_CASE.findall(text)]
    asserting = _through_helpers({name for name, body in bodies.items() if C_CHECK.search(body)},
                                 {name: set(C_REF.findall(body.split("{", 1)[1])) for name, body in bodies.items()})
    out = []
    for path, case in cases:
        if case in ("setup", "teardown") or case in asserting or MARK in bodies.get(case, ""):
            continue
        out.append("%s: case %s checks nothing (no CHECK, no bgt_fail, no checking helper; a legitimate "
                   "exception says '/* %s (why) */')" % (path, case, MARK))
    return out


# ---- the tree, and the control ------------------------------------------------------------------

def lint(root: Path) -> List[str]:
    py = sorted(p for d in ("tests/python", "tests/race") for p in (root / d).glob("*.py"))
    c = sorted((root / "tests/c").glob("*.c"))
    return python_findings(py) + c_findings(c)


def self_test() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for d in ("tests/python", "tests/race", "tests/c"):
            (root / d).mkdir(parents=True)
        (root / "tests/python/helpers.py").write_text(
            "def check_all(xs):\n    assert all(xs)\n\ndef via(xs):\n    check_all(xs)\n")
        (root / "tests/python/test_planted.py").write_text(
            "import pytest\n\n"
            "def test_asserts():\n    assert 1\n\n"
            "def test_raises():\n    with pytest.raises(ValueError):\n        int('x')\n\n"
            "def test_helper():\n    via([1])\n\n"
            "def test_marked():\n    # lint: no-assert (smoke)\n    print(1)\n\n"
            "def test_vacuous():\n    print('nothing checked')\n")
        (root / "tests/c/test_planted.c").write_text(
            "static void helper(int x) { CHECK(x); }\n"
            "static void ok_case(void) { CHECK_OK(0); }\n"
            "static void via_helper(void) { helper(1); }\n"
            "static void marked(void) { /* lint: no-assert (smoke) */ }\n"
            "static void vacuous(void) { int x = 1; (void)x; }\n"
            "BGT_RUN(BGT_CASE(setup), BGT_CASE(ok_case), BGT_CASE(via_helper), BGT_CASE(marked), BGT_CASE(vacuous))\n")
        found = lint(root)
    want = {"test_vacuous", "case vacuous"}
    got = {w for w in want if any(w in f for f in found)}
    if got != want or len(found) != 2:
        print("lint-tests self-test FAILED: expected exactly the two planted vacuous tests, got:\n  " +
              "\n  ".join(found), file=sys.stderr)
        return 1
    print("lint-tests self-test: the two planted vacuous tests were found, nothing else")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    found = lint(ROOT)
    for f in found:
        print(f)
    if found:
        print("%d test(s) assert nothing" % len(found), file=sys.stderr)
        return 1
    print("lint-tests: every test asserts something")
    return 0


if __name__ == "__main__":
    sys.exit(main())
