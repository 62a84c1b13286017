"""The cffi cdef of the Python binding, generated from the C headers at build time.

``generate(include_dir)`` reads ``include/bloomguard.h`` and every header it includes, in that
order, and returns what cffi's ``FFI.cdef`` takes: each header's declarations with comments,
preprocessor lines and the export macros (BG_API, BG_BEGIN_DECLS, BG_END_DECLS) removed, one
declaration per line (whitespace collapsed), and each integer object-like ``#define`` as
``#define NAME ...`` so its value comes from the real header when the extension is compiled.
The headers are written to be parseable by cffi as they are (README, "C API"), so nothing is
hand-copied: a function, option or status added to a header is bound at the next build.

Left out: include guards, the export macros, function-like macros and string macros
(BG_VERSION_STRING: cffi's ``...`` takes integers; bloomguard.__version__ uses bg_version_string()).
A header with a brace (a struct or enum body, forbidden by the ABI rules) is refused, not guessed at.

Run as a script it prints the cdef (``python3 bindings/python/cdef_gen.py [INCLUDE_DIR]``).
tests/python/test_cdef.py checks the result against the headers with an independent parser.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import List

INFRA_MACROS = {"BG_API", "BG_BEGIN_DECLS", "BG_END_DECLS"}
GUARD = re.compile(r"^BLOOMGUARD(_\w+)?_H$")
DEFINE = re.compile(r"#\s*define\s+([A-Za-z_]\w*)(\([^)]*\))?\s*(.*)$")


class CdefError(ValueError):
    """A header holds something the generator will not translate."""


def header_files(include_dir: Path) -> List[Path]:
    """include/bloomguard.h and the headers it includes, in its order."""
    umbrella = include_dir / "bloomguard.h"
    names = re.findall(r'#\s*include\s+"([^"]+)"', umbrella.read_text())
    return [umbrella] + [include_dir / n for n in names]


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _tidy(stmt: str) -> str:
    stmt = re.sub(r"\b(BG_API|BG_BEGIN_DECLS|BG_END_DECLS)\b", " ", stmt)
    stmt = " ".join(stmt.split())
    stmt = re.sub(r"\(\s+", "(", stmt)
    stmt = re.sub(r"\s+([),])", r"\1", stmt)
    return stmt


def header_cdef(text: str, what: str) -> List[str]:
    """The cdef lines of one header's text."""
    text = _strip_comments(text).replace("\\\n", " ")
    lines: List[str] = []
    pending: List[str] = []  # declaration text since the last ';'
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#"):
            m = DEFINE.match(s)
            if m and not m.group(2):
                name, value = m.group(1), m.group(3).strip()
                if name in INFRA_MACROS or GUARD.match(name) or not value or value.startswith('"'):
                    continue
                lines.append("#define %s ..." % name)
            continue
        if "{" in s or "}" in s:
            raise CdefError("%s: braces in a public header (%r): the ABI has no struct or enum bodies"
                            % (what, s))
        parts = s.split(";")
        for part in parts[:-1]:
            stmt = _tidy(" ".join(pending + [part]))
            pending = []
            if stmt:
                lines.append(stmt + ";")
        pending.append(parts[-1])
    if _tidy(" ".join(pending)):
        raise CdefError("%s: a declaration without its ';' at the end: %r" % (what, _tidy(" ".join(pending))))
    return lines


def generate(include_dir: Path) -> str:
    """The whole cdef, one section per header."""
    include_dir = Path(include_dir)
    out = ["/* Generated from %s/bloomguard.h by bindings/python/cdef_gen.py: do not edit. */"
           % include_dir.name]
    for path in header_files(include_dir):
        body = header_cdef(path.read_text(), path.name)
        if body:
            out.append("")
            out.append("/* %s */" % path.relative_to(include_dir))
            out.extend(body)
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    sys.stdout.write(generate(Path(sys.argv[1]) if len(sys.argv) > 1 else here.parent.parent / "include"))
