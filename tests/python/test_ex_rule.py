"""The _ex rule of include/bloomguard/call.h, checked against the headers themselves.

Every fallible function X (returning an int status) that acts on a handle or opens one has X_ex,
whose parameters are X's with ``bg_call *call`` inserted second - after the handle, or after a
constructor's out-pointer - or first when X has neither; every X_ex has its X. EXEMPT lists the
functions the rule leaves out, each with its reason (call.h says the same). A header that breaks
the rule fails here, so a new function (a lock owner's, a pipeline option's) is held to it too.
test_rule_violations_are_detected shows the check failing on mutated headers.
"""
from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from pycparser import c_ast, c_generator, c_parser

ROOT = Path(__file__).resolve().parents[2]
INCLUDE = ROOT / "include"

EXEMPT: Dict[str, str] = {
    "bg_call_*": "the per-call object itself: a status-only setter/getter, no handle message to replace",
    "bg_options_*": "settings object: BG_EINVAL / BG_ENOTSUP say everything (NULL, unknown option, range)",
    "bg_policy_*": "settings object, as bg_options (bg_filter_set_policy, which acts on a filter, is held to it)",
    "bg_hash128": "pure function: BG_EINVAL for a NULL pointer only",
    "bg_indexes": "pure function: BG_EINVAL for a NULL pointer, k 0 or a size outside 1..BG_MAX_SIZE",
    "bg_filter_stat": "in-memory counter read: BG_EINVAL / BG_ENOTSUP only",
    "bg_rotation_stats": "in-memory figures: BG_EINVAL for NULL only",
    "bg_rotation_set_progress": "sets a callback: BG_EINVAL for NULL only",
    "bg_client_set_observer": "sets a callback: BG_EINVAL for NULL, BG_ENOMEM (its record) only",
    "bg_client_stat": "in-memory counter read: BG_EINVAL / BG_ENOTSUP only",
    "bg_filter_histogram": "in-memory histogram read: BG_EINVAL (NULL, room too small) / BG_ENOTSUP (unknown id) only",
    "bg_lock_owner_new": "allocation only (no round trip, no handle): BG_EINVAL / BG_ENOMEM say everything",
    "bg_completion_*": "a completion's accessors: in-memory reads of a record the queue owns; BG_EINVAL for NULL or another operation's completion only",
    "bg_queue_poll": "the queue's one driving thread's call: BG_EINVAL for bad arguments only, told on the queue (no other thread shares it)",
    "bg_queue_cancel": "async-signal-safe like bg_call_cancel: an atomic store and a wake-up; BG_EINVAL for NULL only",
    "bg_queue_fd": "returns an fd, not a status",
    "bg_queue_running": "an in-memory read for a callback on the driving thread: BG_EINVAL for NULL only",
    "bg_version": "returns a number, not a status",
    "bg_features": "returns a mask, not a status",
}

CALL_PARAM = "bg_call *call"

_PRELUDE = """
typedef unsigned long size_t;
typedef signed char int8_t; typedef unsigned char uint8_t;
typedef short int16_t; typedef unsigned short uint16_t;
typedef int int32_t; typedef unsigned int uint32_t;
typedef long int64_t; typedef unsigned long uint64_t;
"""


def header_text() -> str:
    umbrella = INCLUDE / "bloomguard.h"
    names = re.findall(r'#\s*include\s+"([^"]+)"', umbrella.read_text())
    return "\n".join((INCLUDE / n).read_text() for n in names)


def signatures(text: str) -> Dict[str, Tuple[str, List[str]]]:
    """name -> (return type, [parameter declarations]) of every function declared in text."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S).replace("\\\n", " ")
    body = "\n".join(line for line in text.splitlines() if not line.strip().startswith("#"))
    body = re.sub(r"\b(BG_API|BG_BEGIN_DECLS|BG_END_DECLS)\b", " ", body)
    ast = c_parser.CParser().parse(_PRELUDE + body, filename="headers")
    gen = c_generator.CGenerator()
    out: Dict[str, Tuple[str, List[str]]] = {}
    for node in ast.ext:
        if isinstance(node, c_ast.Decl) and isinstance(node.type, c_ast.FuncDecl):
            ret = " ".join(gen.visit(node.type.type).split())
            params = [" ".join(gen.visit(p).split()) for p in (node.type.args.params if node.type.args else [])]
            if params == ["void"]:
                params = []
            out[node.name] = (ret, params)
    return out


def _exempt(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, pat) for pat in EXEMPT)


def _call_position(params: List[str]) -> int:
    """1 after a handle (bg_x *) or a constructor's out-pointer (bg_x **), else 0."""
    return 1 if params and re.match(r"(const )?bg_\w+ \*", params[0]) else 0


def rule_problems(sigs: Dict[str, Tuple[str, List[str]]]) -> List[str]:
    problems: List[str] = []
    for name, (ret, params) in sorted(sigs.items()):
        if name.endswith("_ex"):
            base = name[:-3]
            if base not in sigs:
                problems.append("%s has no plain form %s" % (name, base))
                continue
            bparams = sigs[base][1]
            want = list(bparams)
            want.insert(_call_position(bparams), CALL_PARAM)
            if params != want:
                problems.append("%s breaks the rule: (%s), wanted (%s)" % (name, ", ".join(params), ", ".join(want)))
            if ret != sigs[base][0]:
                problems.append("%s returns %s, %s returns %s" % (name, ret, base, sigs[base][0]))
        elif ret == "int" and not _exempt(name) and name + "_ex" not in sigs:
            problems.append("%s is fallible and has no %s_ex (or an EXEMPT entry with its reason)" % (name, name))
        if not name.endswith("_ex") and not _exempt(name) and CALL_PARAM in params:
            problems.append("%s takes a bg_call but is not named _ex" % name)
    return problems


def test_headers_follow_the_ex_rule():
    problems = rule_problems(signatures(header_text()))
    assert not problems, "include/bloomguard/*.h breaks the _ex rule (call.h):\n" + "\n".join(problems)


def test_exempt_entries_are_used():
    sigs = signatures(header_text())
    for pat in EXEMPT:
        assert any(fnmatch.fnmatchcase(n, pat) for n in sigs), "EXEMPT entry %r matches nothing" % pat


RULE_MUTATIONS = [
    ("call last (0.1's bg_filter_open_ex)",
     "bg_filter_open_ex(bg_filter **out, bg_call *call, bg_client *c, const char *name);",
     "bg_filter_open_ex(bg_filter **out, bg_client *c, const char *name, bg_call *call);",
     "bg_filter_open_ex breaks the rule"),
    ("an error buffer (0.1's bg_client_open_ex)",
     "bg_client_open_ex(bg_client **out, bg_call *call, const char *url, const bg_options *opts);",
     "bg_client_open_ex(bg_client **out, const char *url, const bg_options *opts, char *errbuf, size_t errbuf_size);",
     "bg_client_open_ex breaks the rule"),
    ("call after the filter (0.1's bg_rotation_begin_ex)",
     "bg_rotation_begin_ex(bg_rotation **out, bg_call *call, bg_filter *f,",
     "bg_rotation_begin_ex(bg_rotation **out, bg_filter *f, bg_call *call,",
     "bg_rotation_begin_ex breaks the rule"),
    ("no _ex", "BG_API int  bg_lock_open_ex(bg_lock **out, bg_call *call, bg_client *c, const char *name, "
     "const bg_options *opts);", "", "bg_lock_open is fallible and has no bg_lock_open_ex"),
    ("a call but no _ex name (0.1's bg_filter_snapshot_refresh)",
     "BG_API int  bg_filter_snapshot_refresh(bg_filter *f);\n"
     "BG_API int  bg_filter_snapshot_refresh_ex(bg_filter *f, bg_call *call);",
     "BG_API int  bg_filter_snapshot_refresh(bg_filter *f, bg_call *call);",
     "bg_filter_snapshot_refresh takes a bg_call but is not named _ex"),
]


@pytest.mark.parametrize("desc,old,new,fragment", RULE_MUTATIONS, ids=[m[0] for m in RULE_MUTATIONS])
def test_rule_violations_are_detected(desc, old, new, fragment):
    text = header_text()
    assert old in text, "mutation %r no longer applies to the headers" % desc
    problems = rule_problems(signatures(text.replace(old, new, 1)))
    assert any(fragment in p for p in problems), problems
