"""The cffi cdef is generated from the C headers at build time: check the generator.

bindings/python/cdef_gen.py turns include/bloomguard.h and every header it includes into the
cdef the extension is compiled with (nothing is copied by hand). This test checks its output with
an independent reading of the headers: both are reduced the same way - comments removed,
preprocessor lines taken out (their integer #defines kept aside), BG_API / BG_BEGIN_DECLS /
BG_END_DECLS removed - then parsed with pycparser, and every declaration is printed back in one
canonical form. The test then requires:

* every function and typedef of the cdef to be declared identically in the headers (same return
  type, parameter types, qualifiers and names), and every #define of the cdef to exist there;
* every function, typedef and integer #define of the headers to be in the cdef, unless listed in
  NOT_BOUND below with a reason; every BG_API function of the raw header text (a plain regex, no
  parser at all) to be in the compiled module;
* the compiled module to hold exactly the cdef's names, with the headers' macro values (a stale
  build - one compiled before a header changed - fails too);
* a declaration added to a header, or a new header added to the umbrella, to appear in the cdef.

test_drift_is_detected feeds mutated copies of the cdef through the same comparison, so the
comparison itself is shown to fail on drift.
"""
from __future__ import annotations

import fnmatch
import importlib.util
import re
import shutil
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from pycparser import c_ast, c_generator, c_parser

import bloomguard
from bloomguard._ffi import lib

ROOT = Path(__file__).resolve().parents[2]
INCLUDE = ROOT / "include"
CDEF_GEN = ROOT / "bindings" / "python" / "cdef_gen.py"

# Declared in the headers but deliberately absent from the cdef: name or fnmatch pattern -> reason.
# A concept whose C API lands before its Python binding goes here (e.g. "bg_foo_*"), and
# comes out when bound. (Locks and policies were bound with issue 5.)
NOT_BOUND: Dict[str, str] = {
    "BG_VERSION_STRING": "string macro (cffi cdefs take integer macros): bloomguard.__version__ "
                         "uses bg_version_string()",
}

# Infrastructure macros of common.h and include guards: never part of the cdef.
_INFRA_MACROS = {"BG_API", "BG_BEGIN_DECLS", "BG_END_DECLS"}
_GUARD = re.compile(r"^BLOOMGUARD(_\w+)?_H$")

# Fixed-width and size types for pycparser (the cdef and the headers get the same prelude).
_PRELUDE = """
typedef unsigned long size_t;
typedef signed char int8_t; typedef unsigned char uint8_t;
typedef short int16_t; typedef unsigned short uint16_t;
typedef int int32_t; typedef unsigned int uint32_t;
typedef long int64_t; typedef unsigned long uint64_t;
"""
_PRELUDE_TYPES = {"size_t", "int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t", "uint32_t",
                  "int64_t", "uint64_t"}


class Decls:
    """Canonical declarations of one text: functions and typedefs by name, macros by name."""

    def __init__(self, functions: Dict[str, str], typedefs: Dict[str, str], macros: Dict[str, str]):
        self.functions = functions
        self.typedefs = typedefs
        self.macros = macros


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def reduce_c(text: str) -> Tuple[str, Dict[str, str]]:
    """(declarations without preprocessor lines and export macros, {macro: value})."""
    text = _strip_comments(text).replace("\\\n", " ")
    macros: Dict[str, str] = {}
    kept: List[str] = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#"):
            m = re.match(r"#\s*define\s+([A-Za-z_]\w*)(\([^)]*\))?\s*(.*)$", s)
            if m and not m.group(2):
                name = m.group(1)
                if name not in _INFRA_MACROS and not _GUARD.match(name):
                    macros[name] = m.group(3).strip()
            continue
        kept.append(line)
    body = "\n".join(kept)
    body = re.sub(r"\b(BG_API|BG_BEGIN_DECLS|BG_END_DECLS)\b", " ", body)
    return body, macros


def parse_decls(text: str, what: str) -> Decls:
    body, macros = reduce_c(text)
    try:
        ast = c_parser.CParser().parse(_PRELUDE + body, filename=what)
    except Exception as exc:  # pragma: no cover - shows which file did not parse
        raise AssertionError("%s does not parse as C declarations: %s" % (what, exc)) from exc
    gen = c_generator.CGenerator()
    functions: Dict[str, str] = {}
    typedefs: Dict[str, str] = {}
    for node in ast.ext:
        if isinstance(node, c_ast.Typedef):
            if node.name in _PRELUDE_TYPES:
                continue
            canon = " ".join(gen.visit(node).split())
            assert typedefs.setdefault(node.name, canon) == canon, "%s: typedef %s twice" % (what, node.name)
        elif isinstance(node, c_ast.Decl) and isinstance(node.type, c_ast.FuncDecl):
            canon = " ".join(gen.visit(node).split())
            assert node.name not in functions, "%s: %s declared twice" % (what, node.name)
            functions[node.name] = canon
        else:
            raise AssertionError("%s: unexpected top-level declaration %s" % (what, gen.visit(node)))
    return Decls(functions, typedefs, macros)


def header_files() -> List[Path]:
    """include/bloomguard.h and the headers it includes, in order."""
    umbrella = INCLUDE / "bloomguard.h"
    names = re.findall(r'#\s*include\s+"([^"]+)"', umbrella.read_text())
    return [umbrella] + [INCLUDE / n for n in names]


def header_decls() -> Decls:
    return parse_decls("\n".join(p.read_text() for p in header_files()), "include/bloomguard.h")


def _cdef_gen():
    spec = importlib.util.spec_from_file_location("bloomguard_cdef_gen", CDEF_GEN)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def generated_cdef(include_dir: Path = INCLUDE) -> str:
    """What the build hands to cffi (build_ffi.cdef(), without the binding's bgpy_ helpers)."""
    return _cdef_gen().generate(include_dir)


def _not_bound(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, pat) for pat in NOT_BOUND)


def compare(headers: Decls, cdef: Decls) -> List[str]:
    """Every difference between the headers and the cdef, one line each (empty: in step)."""
    problems: List[str] = []
    for kind in ("functions", "typedefs"):
        h, c = getattr(headers, kind), getattr(cdef, kind)
        for name, decl in sorted(c.items()):
            if name not in h:
                problems.append("cdef %s %s is not in the headers: %s" % (kind[:-1], name, decl))
            elif h[name] != decl:
                problems.append("cdef %s %s differs:\n   header: %s\n   cdef:   %s" % (kind[:-1], name, h[name], decl))
        for name, decl in sorted(h.items()):
            if name not in c and not _not_bound(name):
                problems.append("header %s %s is missing from the cdef: %s" % (kind[:-1], name, decl))
    for name, value in sorted(cdef.macros.items()):
        if name not in headers.macros:
            problems.append("cdef #define %s is not in the headers" % name)
        elif value != "...":
            problems.append("cdef #define %s should be '...' (the value comes from the header), not %r"
                            % (name, value))
    for name in sorted(set(headers.macros) - set(cdef.macros)):
        if not _not_bound(name):
            problems.append("header #define %s %s is missing from the cdef" % (name, headers.macros[name]))
    for name in sorted(NOT_BOUND):
        if "*" not in name and (name in cdef.functions or name in cdef.macros or name in cdef.typedefs):
            problems.append("%s is in the cdef and in NOT_BOUND: remove it from NOT_BOUND" % name)
    return problems


def _c_int(value: str) -> int:
    return int(re.sub(r"[uUlL]+$", "", value.strip()), 0)


# --- the tests --------------------------------------------------------------------------------

def test_every_public_header_is_included_by_the_umbrella():
    included = {p.name for p in header_files()[1:]}
    on_disk = {p.name for p in (INCLUDE / "bloomguard").glob("*.h")}
    assert on_disk <= included, "headers not included by bloomguard.h: %s" % sorted(on_disk - included)


def test_cdef_matches_headers():
    problems = compare(header_decls(), parse_decls(generated_cdef(), "generated cdef"))
    assert not problems, "the generated cdef differs from the headers (fix cdef_gen.py):\n" + "\n".join(problems)


def test_every_bg_api_function_is_in_the_module():
    """No parser: every name declared after BG_API in the raw headers is callable from Python."""
    text = _strip_comments("\n".join(p.read_text() for p in header_files()))
    declared = set(re.findall(r"\bBG_API\b[^;(]*?\b(bg_\w+)\s*\(", text))
    assert len(declared) > 80, sorted(declared)
    missing = sorted(n for n in declared if not hasattr(lib, n))
    assert not missing, "BG_API functions not in the compiled module (stale build? pip install .): %s" % missing


def test_generation_picks_up_new_declarations(tmp_path):
    """A function added to a header, and a header added to the umbrella, are in the next cdef."""
    inc = tmp_path / "include"
    shutil.copytree(INCLUDE, inc)
    client_h = inc / "bloomguard" / "client.h"
    text = client_h.read_text()
    anchor = "BG_API int  bg_client_ping(bg_client *c);"
    assert anchor in text
    client_h.write_text(text.replace(anchor, anchor + "\n/* new */\nBG_API int bg_client_reset(bg_client *c,\n"
                                     "                           int64_t   flags);"))
    (inc / "bloomguard" / "extra.h").write_text(
        "#ifndef BLOOMGUARD_EXTRA_H\n#define BLOOMGUARD_EXTRA_H\n#include \"common.h\"\nBG_BEGIN_DECLS\n"
        "#define BG_EXTRA_LIMIT 7  /* a limit */\n#define BG_EXTRA_NAME \"x\"\n"
        "BG_API int bg_extra_bounds(int option, int64_t *min, int64_t *max);\nBG_END_DECLS\n#endif\n")
    umbrella = inc / "bloomguard.h"
    umbrella.write_text(umbrella.read_text().replace('#include "bloomguard/lock.h"',
                                                     '#include "bloomguard/lock.h"\n#include "bloomguard/extra.h"'))
    cdef = generated_cdef(inc)
    assert "int bg_client_reset(bg_client *c, int64_t flags);" in cdef
    assert "int bg_extra_bounds(int option, int64_t *min, int64_t *max);" in cdef
    assert "#define BG_EXTRA_LIMIT ..." in cdef and "BG_EXTRA_NAME" not in cdef
    assert cdef.index("/* bloomguard/lock.h */") < cdef.index("/* bloomguard/extra.h */")
    # and the independent reading agrees with it
    headers = parse_decls("\n".join(p.read_text() for p in _cdef_gen().header_files(inc)), "extended headers")
    problems = compare(headers, parse_decls(cdef, "extended cdef"))
    assert problems == ["header #define BG_EXTRA_NAME \"x\" is missing from the cdef"], problems


def test_generator_refuses_what_it_cannot_translate(tmp_path):
    gen = _cdef_gen()
    with pytest.raises(gen.CdefError, match="braces"):
        gen.header_cdef("typedef struct bg_x { int a; } bg_x;\n", "x.h")
    with pytest.raises(gen.CdefError, match="without its ';'"):
        gen.header_cdef("BG_API int bg_x(void)\n", "x.h")


def test_compiled_module_matches_cdef_and_headers():
    cdef = parse_decls(generated_cdef(), "generated cdef")
    headers = header_decls()
    names = set(dir(lib))
    helpers = {n for n in names if n.startswith("bgpy_")}
    # bgpy_item_ptrs: C helper; bgpy_progress / bgpy_fallback / bgpy_interrupt / bgpy_observe: extern "Python"
    # (the rotation progress, policy fallback and wait interrupt trampolines)
    # bgpy_observe_gate / bgpy_observe_stop: C, the observer's gate closed at exit (_events.py)
    assert helpers == {"bgpy_item_ptrs", "bgpy_progress", "bgpy_fallback", "bgpy_interrupt", "bgpy_observe",
                       "bgpy_observe_gate", "bgpy_observe_stop"}
    assert names - helpers == set(cdef.functions) | set(cdef.macros)
    for name in cdef.macros:
        value = headers.macros[name]
        assert getattr(lib, name) == _c_int(value), "%s: module %r, header %s (stale build?)" % (
            name, getattr(lib, name), value)
    assert lib.bg_version() == lib.BG_VERSION_NUMBER
    assert bloomguard.__version__ == headers.macros["BG_VERSION_STRING"].strip('"')


def test_not_bound_entries_are_used():
    """Every exact NOT_BOUND name is in the headers (a stale entry goes). Patterns stand for a
    concept whose binding comes later and may match nothing in an older checkout."""
    headers = header_decls()
    names = set(headers.functions) | set(headers.typedefs) | set(headers.macros)
    for name in NOT_BOUND:
        if "*" not in name:
            assert name in names, "NOT_BOUND entry %r is not in the headers any more" % name


MUTATIONS = [
    # (description, old, new, expected fragment of a problem)
    ("parameter type", "int bg_filter_expire(bg_filter *f, int64_t ttl_ms, int *applied);",
     "int bg_filter_expire(bg_filter *f, int ttl_ms, int *applied);", "bg_filter_expire differs"),
    ("return type", "size_t bg_client_errmsg_copy(", "int bg_client_errmsg_copy(", "bg_client_errmsg_copy differs"),
    ("const dropped", "const char *bg_strerror(int status);", "char *bg_strerror(int status);",
     "bg_strerror differs"),
    ("parameter order", "int bg_hash128(const void *data, size_t len, uint64_t *h1, uint64_t *h2);",
     "int bg_hash128(size_t len, const void *data, uint64_t *h1, uint64_t *h2);", "bg_hash128 differs"),
    ("missing function", "int bg_client_ping(bg_client *c);\n", "", "bg_client_ping is missing"),
    ("invented function", "int bg_client_ping(bg_client *c);",
     "int bg_client_ping(bg_client *c);\nint bg_client_reset(bg_client *c);", "bg_client_reset is not in the headers"),
    ("missing macro", "#define BG_ECLOSED ...\n", "", "header #define BG_ECLOSED"),
    ("invented macro", "#define BG_ECLOSED ...", "#define BG_ECLOSED ...\n#define BG_EGONE ...",
     "BG_EGONE is not in the headers"),
    ("hard-coded value", "#define BG_ETIMEOUT ...", "#define BG_ETIMEOUT -8", "should be '...'"),
    ("typedef", "typedef struct bg_call bg_call;", "typedef struct bg_call_s bg_call;", "typedef bg_call differs"),
    ("callback typedef", "typedef int (*bg_progress_fn)(void *userdata, int phase, uint64_t items,",
     "typedef int (*bg_progress_fn)(void *userdata, int phase, uint32_t items,", "typedef bg_progress_fn differs"),
    ("missing rotation function", "int bg_rotation_abort(bg_rotation *r);\n", "",
     "bg_rotation_abort is missing"),
    ("missing rotation option", "#define BG_OPT_ROTATE_WAIT_MS ...\n", "", "header #define BG_OPT_ROTATE_WAIT_MS"),
    ("missing lock function", "int bg_lock_release_ex(bg_lock *l, bg_call *call);\n", "",
     "bg_lock_release_ex is missing"),
    ("lock token width", "int bg_lock_acquire(bg_lock *l, int mode, int64_t wait_ms, uint64_t *fencing_token);",
     "int bg_lock_acquire(bg_lock *l, int mode, int64_t wait_ms, uint32_t *fencing_token);", "bg_lock_acquire differs"),
    ("missing lock option", "#define BG_OPT_LOCK_RENEW ...\n", "", "header #define BG_OPT_LOCK_RENEW"),
    ("missing tracking option", "#define BG_OPT_TRACKING ...\n", "", "header #define BG_OPT_TRACKING"),
    ("missing lock mode", "#define BG_LOCK_WRITE ...\n", "", "header #define BG_LOCK_WRITE"),
    ("missing policy function", "int bg_filter_stat(const bg_filter *f, int stat, int64_t *value);\n", "",
     "bg_filter_stat is missing"),
    ("fallback typedef", "typedef int (*bg_fallback_fn)(void *userdata, const void *const *items, const size_t *lens, size_t n,",
     "typedef int (*bg_fallback_fn)(void *userdata, const void **items, const size_t *lens, size_t n,",
     "typedef bg_fallback_fn differs"),
    ("missing stat", "#define BG_STAT_CALLBACK_REFUSED ...\n", "", "header #define BG_STAT_CALLBACK_REFUSED"),
    ("missing tracked-read stat", "#define BG_STAT_TRACKED_STALE ...\n", "", "header #define BG_STAT_TRACKED_STALE"),
    ("missing failure class", "#define BG_FAIL_CORRUPT ...\n", "", "header #define BG_FAIL_CORRUPT"),
    ("missing action", "#define BG_ACT_ASSUME_ABSENT ...\n", "", "header #define BG_ACT_ASSUME_ABSENT"),
]


@pytest.mark.parametrize("desc,old,new,fragment", MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_drift_is_detected(desc, old, new, fragment):
    text = generated_cdef()
    assert old in text, "mutation %r no longer applies to the generated cdef" % desc
    problems = compare(header_decls(), parse_decls(text.replace(old, new, 1), "mutated cdef"))
    assert any(fragment in p for p in problems), problems


def test_header_drift_is_detected():
    """The other direction: a header change the cdef does not follow."""
    text = "\n".join(p.read_text() for p in header_files())
    text = text.replace("BG_API int  bg_client_ping(bg_client *c);",
                        "BG_API int  bg_client_ping(bg_client *c, int64_t timeout_ms);")
    problems = compare(parse_decls(text, "mutated headers"), parse_decls(generated_cdef(), "generated cdef"))
    assert any("bg_client_ping differs" in p for p in problems), problems
