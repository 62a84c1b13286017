#!/usr/bin/env python3
"""Every artifact that holds third-party code holds that code's notice, and bloomguard's LICENSE
and NOTICE: the Python wheel (.dist-info/licenses, PEP 639), the sdist, the Go module
(bindings/go: its LICENSE and NOTICE, and the notices in internal/clib next to the C copies),
the Java binding's jars (the jar with the natives, its -sources and -javadoc jars: META-INF/licenses),
the CMake install tree (share/doc/bloomguard) and the bloomguard command (`bloomguard licenses`).
Each notice must be there byte for byte as in the repository.

    python3 scripts/notices.py wheel FILE.whl
    python3 scripts/notices.py sdist FILE.tar.gz
    python3 scripts/notices.py jar FILE.jar
    python3 scripts/notices.py go [DIR]                  DIR: bindings/go (the default) or a copy
    python3 scripts/notices.py install PREFIX --build BUILD
    python3 scripts/notices.py cli COMMAND (--build BUILD | --all)

install and cli expect what that CMake build links in (its CMakeCache.txt): HighwayHash always,
hiredis when vendored, OpenSSL when linked statically; --all (the wheel's command): everything.
Every run then checks the same artifact with one third-party notice taken out, which must fail
(the negative control). Exit 0: complete; 1: a notice missing or different (listed); 2: the
control was not caught. scripts/go-amalgamate.py imports the tables below.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OWN = ["LICENSE", "NOTICE"]
# component -> its notice, repository-relative (NOTICE names the same files)
THIRD_PARTY = {
    "hiredis": "third_party/hiredis/COPYING",
    "HighwayHash": "third_party/highwayhash/LICENSE",
    "OpenSSL": "third_party/openssl/LICENSE.txt",
}
# vendored for the tests only, in no artifact (so neither in NOTICE nor in pyproject.toml's
# license-files): libkqueue runs the queue's kqueue backend on Linux in a -DBG_TEST_LIBKQUEUE=ON
# build's tests (cmake/libkqueue.cmake); the sdist excludes it, and every artifact checked here
# must hold no file of it (leaks below)
TEST_ONLY = {
    "libkqueue": "third_party/libkqueue/LICENSE",
}
LICENSE_EXPRESSION = "Apache-2.0 AND BSD-3-Clause"
# the Go module: the C copies in internal/clib are flattened (scripts/go-amalgamate.py), and so are
# their notices beside them; each Go module (its zip is all pkg.go.dev and a user get) has its own
# LICENSE and NOTICE
GO_MODULES = ["", "otel"]
GO_CLIB = "internal/clib"
GO_FLAT = {THIRD_PARTY["hiredis"]: "hiredis_COPYING", THIRD_PARTY["HighwayHash"]: "highwayhash_LICENSE",
           THIRD_PARTY["OpenSSL"]: "openssl_LICENSE.txt"}


def go_files() -> dict[str, str]:
    """{path inside bindings/go: repository file} of every notice the Go module holds."""
    out = {}
    for mod in GO_MODULES:
        for f in OWN:
            out[(mod + "/" if mod else "") + f] = f
    for src, flat in GO_FLAT.items():
        out[GO_CLIB + "/" + flat] = src
    return out


def repo_problems() -> list[str]:
    """The tables above against the repository: every folder of third_party/ has a notice here,
    NOTICE names every notice, pyproject.toml's license-files lists them all."""
    bad = []
    listed = {Path(p).parts[1] for p in list(THIRD_PARTY.values()) + list(TEST_ONLY.values())}
    for d in sorted(p.name for p in (ROOT / "third_party").iterdir() if p.is_dir()):
        if d not in listed:
            bad.append("third_party/%s has no notice in scripts/notices.py's THIRD_PARTY (nor, then, in the "
                       "artifacts): add its license file there, to NOTICE and to pyproject.toml (or to "
                       "TEST_ONLY, if no artifact holds it)" % d)
    notice = (ROOT / "NOTICE").read_text()
    pyproject = (ROOT / "pyproject.toml").read_text()
    files = re.search(r"^license-files\s*=\s*\[(.*?)\]", pyproject, re.S | re.M)
    files = re.findall(r'"([^"]+)"', files.group(1)) if files else []
    for rel in TEST_ONLY.values():
        if not (ROOT / rel).is_file():
            bad.append("%s does not exist" % rel)
        if rel in files:
            bad.append("pyproject.toml's license-files lists %s, which is test-only (TEST_ONLY)" % rel)
    for rel in OWN + list(THIRD_PARTY.values()):
        if not (ROOT / rel).is_file():
            bad.append("%s does not exist" % rel)
        if rel not in OWN and rel not in notice:
            bad.append("NOTICE does not name %s" % rel)
        if rel not in files:
            bad.append("pyproject.toml's license-files does not list %s" % rel)
    return bad


def source(rel: str) -> bytes:
    return (ROOT / rel).read_bytes()


def compare(view: dict[str, bytes], want: dict[str, str], where: str) -> list[str]:
    """want: {path in the artifact: repository file}; a problem per missing or differing one."""
    bad = []
    for path, src in sorted(want.items()):
        if path not in view:
            bad.append("%s: no %s (the notice of %s)" % (where, path, src))
        elif view[path] != source(src):
            bad.append("%s: %s differs from the repository's %s" % (where, path, src))
    return bad


def build_components(build: Path) -> list[str]:
    """The third-party components a CMake build links into its libraries and command."""
    cache = (build / "CMakeCache.txt").read_text()

    def val(name: str) -> str:
        m = re.search(r"^%s:[A-Z]+=(.*)$" % re.escape(name), cache, re.M)
        return m.group(1) if m else ""
    comps = ["HighwayHash"]
    if val("BG_HIREDIS_KIND") == "vendored":
        comps.append("hiredis")
        # (with BG_OPENSSL_STATIC, cmake/hiredis.cmake requires OpenSSL: it is linked in)
        if val("BG_OPENSSL_STATIC").upper() in ("ON", "1", "TRUE", "YES"):
            comps.append("OpenSSL")
    return comps


# ---- artifact views: {path: bytes} ------------------------------------------------------------
def wheel_view(path: Path) -> tuple[dict[str, bytes], str]:
    with zipfile.ZipFile(path) as z:
        infos = [n for n in z.namelist() if re.match(r"^[^/]+\.dist-info/", n)]
        meta = next((n for n in infos if n.endswith(".dist-info/METADATA")), None)
        view = {n.split("/licenses/", 1)[1]: z.read(n) for n in infos if "/licenses/" in n}
        return view, z.read(meta).decode() if meta else ""


def jar_view(path: Path) -> dict[str, bytes]:
    prefix = "META-INF/licenses/"
    with zipfile.ZipFile(path) as z:
        return {n[len(prefix):]: z.read(n) for n in z.namelist() if n.startswith(prefix) and not n.endswith("/")}


def sdist_view(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as t:
        view = {}
        for m in t.getmembers():
            if m.isfile() and "/" in m.name:
                view[m.name.split("/", 1)[1]] = t.extractfile(m).read()
        return view


def dir_view(top: Path) -> dict[str, bytes]:
    return {p.relative_to(top).as_posix(): p.read_bytes() for p in top.rglob("*")
            if p.is_file() and "/." not in "/" + p.relative_to(top).as_posix()}


def cli_view(out: str) -> dict[str, bytes]:
    """`bloomguard licenses`: sections '==> PATH <==' each followed by the file's text (a blank
    line, printed before the next header, separates them)."""
    parts = re.split(r"^==> (.+) <==\n", out, flags=re.M)
    view = {}
    for i in range(1, len(parts), 2):
        text = parts[i + 1]
        if i + 2 < len(parts):
            text = text[:-1] if text.endswith("\n") else text + "\0"  # the separator, or a defect
        view[parts[i]] = text.encode()
    return view


# ---- checks: list of problems ---------------------------------------------------------------
def wanted(comps: list[str]) -> dict[str, str]:
    return {p: p for p in OWN + [THIRD_PARTY[c] for c in comps]}


def check_wheel(view: dict[str, bytes], metadata: str) -> list[str]:
    bad = compare(view, wanted(list(THIRD_PARTY)), "wheel .dist-info/licenses")
    if "License-Expression: %s\n" % LICENSE_EXPRESSION not in metadata:
        bad.append("wheel METADATA: no 'License-Expression: %s'" % LICENSE_EXPRESSION)
    for p in wanted(list(THIRD_PARTY)):
        if "License-File: %s\n" % p not in metadata:
            bad.append("wheel METADATA: no 'License-File: %s'" % p)
    return bad


def leaks(view: dict[str, bytes], kind: str) -> list[str]:
    """Files of a test-only component (TEST_ONLY) in an artifact."""
    folders = {str(Path(p).parent) for p in TEST_ONLY.values()}
    return ["%s: holds %s, test-only code (scripts/notices.py TEST_ONLY) that no artifact may hold" % (kind, p)
            for p in sorted(view) if any(p.startswith(f + "/") or ("/" + f + "/") in p for f in folders)]


def run(kind: str, view: dict[str, bytes], want: dict[str, str], extra=None) -> list[str]:
    if kind == "wheel":
        return check_wheel(view, extra) + leaks(view, kind)
    return compare(view, want, kind) + leaks(view, kind)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kind", choices=["wheel", "sdist", "jar", "go", "install", "cli"])
    ap.add_argument("path", nargs="?")
    ap.add_argument("--build", type=Path, help="the CMake build (install, cli): what it links in")
    ap.add_argument("--all", action="store_true", help="cli: expect every component (the wheel's command)")
    ap.add_argument("--components", help="cli: expect exactly these, comma-separated (%s)" % ",".join(THIRD_PARTY))
    a = ap.parse_args()
    extra = None
    if a.kind in ("install", "cli"):
        if not a.path or [a.build is not None, a.all, a.components is not None].count(True) != 1:
            ap.error("%s needs PATH and one of --build BUILD, --all or --components LIST" % a.kind)
        if a.components is not None:
            comps = [c for c in a.components.split(",") if c]
            unknown = [c for c in comps if c not in THIRD_PARTY]
            if unknown:
                ap.error("--components: unknown %s (known: %s)" % (", ".join(unknown), ", ".join(THIRD_PARTY)))
        else:
            comps = list(THIRD_PARTY) if a.all else build_components(a.build)
    else:
        comps = list(THIRD_PARTY)
    if a.kind == "wheel":
        view, extra = wheel_view(Path(a.path))
        want = wanted(comps)
    elif a.kind == "sdist":
        view, want = sdist_view(Path(a.path)), wanted(comps)
    elif a.kind == "jar":
        view, want = jar_view(Path(a.path)), wanted(comps)
    elif a.kind == "go":
        a.path = a.path or str(ROOT / "bindings" / "go")
        view, want = dir_view(Path(a.path)), go_files()
    elif a.kind == "install":
        doc = Path(a.path) / "share" / "doc" / "bloomguard"
        view, want = (dir_view(doc) if doc.is_dir() else {}), wanted(comps)
    else:
        out = subprocess.run([a.path, "licenses"], check=True, capture_output=True, text=True).stdout
        view, want = cli_view(out), wanted(comps)

    bad = repo_problems() + run(a.kind, view, want, extra)
    # the negative control: the same artifact without one third-party notice must fail
    victim = next(p for p, src in sorted(want.items()) if src not in OWN)
    control = run(a.kind, {k: v for k, v in view.items() if k != victim}, want, extra)
    if not any(victim in msg for msg in control):
        print("notices: the negative control failed: %s %s without %s passed the check" %
              (a.kind, a.path or "", victim), file=sys.stderr)
        return 2
    for msg in bad:
        print("notices: " + msg, file=sys.stderr)
    if bad:
        print("notices: %s %s lacks notices of the code it holds (NOTICE lists them)" % (a.kind, a.path or ""),
              file=sys.stderr)
        return 1
    print("notices: %s %s: %d notices, each as in the repository (%s); the control without %s failed, as it must"
          % (a.kind, a.path or "", len(want), ", ".join(["bloomguard"] + comps), victim))
    return 0


if __name__ == "__main__":
    sys.exit(main())
