"""The package itself: public API, typing marker and docstrings, the compiled module, and the
build's messages when a dependency is missing."""
from __future__ import annotations

import importlib.util
import inspect
import os
import re
import shutil
import subprocess
import sys
from importlib import resources

import pytest

import bloomguard
from bloomguard._ffi import ffi, lib
from conftest import ROOT

NETWORK_METHODS = ["init", "add", "add_many", "contains", "contains_many", "count", "info", "delete", "expire",
                   "persist"]


def test_public_api():
    for name in ["Client", "Filter", "FilterInfo", "hash128", "indexes", "optimal_params", "BloomGuardError",
                 "NotInitialized", "ConnectionError", "Timeout", "RotationInProgress", "Corrupt",
                 "InvalidArgument", "BadParams", "Closed"]:
        assert hasattr(bloomguard, name), name
    assert set(bloomguard.__all__) <= set(dir(bloomguard))
    for cls in (bloomguard.Client, bloomguard.Filter, bloomguard.FilterInfo, bloomguard.NotInitialized,
                bloomguard.Rotation, bloomguard.RotationStats, bloomguard.Lock, bloomguard.Hold, bloomguard.Policy,
                bloomguard.Answer, bloomguard.Answers):
        assert cls.__module__ == "bloomguard"


def test_py_typed_is_installed():
    assert resources.files("bloomguard").joinpath("py.typed").is_file()


def _public_callables():
    for name in bloomguard.__all__:
        obj = getattr(bloomguard, name)
        if inspect.isfunction(obj):
            yield name, obj
    for cls in (bloomguard.Client, bloomguard.Filter, bloomguard.Rotation, bloomguard.Lock, bloomguard.Policy):
        for name, member in vars(cls).items():
            if inspect.isfunction(member) and (not name.startswith("_") or name in ("__init__", "__contains__")):
                yield "%s.%s" % (cls.__name__, name), member


def test_docstrings_and_annotations():
    missing_doc, missing_hints = [], []
    for name, fn in _public_callables():
        if not (fn.__doc__ or "").strip() and not name.endswith(("__init__", "__contains__")):
            missing_doc.append(name)
        sig = inspect.signature(fn)
        if sig.return_annotation is inspect.Signature.empty:
            missing_hints.append(name + " -> ?")
        for p in sig.parameters.values():
            if p.name != "self" and p.annotation is inspect.Parameter.empty and p.kind is not p.VAR_KEYWORD:
                missing_hints.append("%s(%s)" % (name, p.name))
    assert not missing_doc, missing_doc
    assert not missing_hints, missing_hints
    for cls in (bloomguard.Client, bloomguard.Filter, bloomguard.FilterInfo, bloomguard.Rotation,
                bloomguard.RotationStats, bloomguard.Lock, bloomguard.Hold, bloomguard.Policy, bloomguard.Answer,
                bloomguard.Answers):
        assert cls.__doc__
    for cls in (bloomguard.Rotation, bloomguard.Lock, bloomguard.Policy, bloomguard.Filter, bloomguard.Answer):
        for name, member in vars(cls).items():
            if isinstance(member, property) and not name.startswith("_"):
                assert (member.__doc__ or "").strip(), "%s.%s" % (cls.__name__, name)


@pytest.mark.parametrize("method", NETWORK_METHODS)
def test_network_methods_take_a_keyword_timeout(method):
    p = inspect.signature(getattr(bloomguard.Filter, method)).parameters["timeout"]
    assert p.kind is p.KEYWORD_ONLY and p.default is None


def test_policy_parameter_defaults_to_none():
    p = inspect.signature(bloomguard.Client.filter).parameters["policy"]
    assert p.default is None


def test_compiled_in_api_mode():
    spec = importlib.util.find_spec("bloomguard._bloomguard_cffi")
    assert spec is not None and spec.origin.endswith(".so")
    assert type(lib).__name__ == "Lib"  # out-of-line API mode (ABI mode would be a dlopen'ed library)
    assert lib.bg_hash_impl() != ffi.NULL


@pytest.mark.skipif(not shutil.which("nm"), reason="nm not installed")
def test_extension_exports_only_its_init():
    so = importlib.util.find_spec("bloomguard._bloomguard_cffi").origin
    out = subprocess.run(["nm", "-D", "--defined-only", so], capture_output=True, text=True, check=True).stdout
    exported = {line.split()[-1] for line in out.splitlines() if line.strip()}
    assert exported == {"PyInit__bloomguard_cffi"}, sorted(exported)[:20]


def _configure(build_dir, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """CMake's configure step of the project, as the wheel's build runs it (library only)."""
    return subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build_dir), "-DBG_BUILD_TESTS=OFF",
                           "-DBG_BUILD_CLI=OFF", "-DBG_BUILD_BENCH=OFF", *args],
                          capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.skipif(not shutil.which("pkg-config") or not shutil.which("cmake"), reason="needs cmake and pkg-config")
def test_build_says_when_the_system_hiredis_is_missing(tmp_path):
    # only a build asked to use the system hiredis needs one (the default builds the vendored 1.x)
    env = dict(os.environ, PKG_CONFIG_LIBDIR=str(tmp_path), PKG_CONFIG_PATH=str(tmp_path))
    proc = _configure(tmp_path / "b", "-DBG_HIREDIS=system", env=env)
    assert proc.returncode != 0
    assert re.search(r"(?s)BG_HIREDIS=system.*no hiredis.*libhiredis-dev", proc.stdout + proc.stderr), proc.stderr


@pytest.mark.skipif(not shutil.which("cmake"), reason="needs cmake")
def test_build_takes_hiredis_from_the_repository(tmp_path):
    """No download: the vendored hiredis is third_party/hiredis, whatever the network or pip."""
    env = dict(os.environ, PATH=os.path.dirname(shutil.which("cmake")) + os.pathsep + "/usr/bin:/bin",
               PIP_INDEX_URL="http://127.0.0.1:9/simple", PIP_NO_INDEX="1")
    proc = _configure(tmp_path / "b", "-DBG_HIREDIS=vendored", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "hiredis: vendored 1." in proc.stdout
    assert str(ROOT / "third_party" / "hiredis") in proc.stdout


def test_cffi_source_is_abi3(tmp_path):
    """build_ffi.py writes the module's C source; cffi's code selects the limited API (abi3)."""
    out = tmp_path / "m.c"
    subprocess.run([sys.executable, str(ROOT / "bindings" / "python" / "build_ffi.py"), "--emit-c", str(out)],
                   check=True, timeout=120)
    text = out.read_text()
    assert "PyInit__bloomguard_cffi" in text and "define Py_LIMITED_API" in text
    assert importlib.util.find_spec("bloomguard._bloomguard_cffi").origin.endswith(".abi3.so")


def test_distribution_version_is_the_headers():
    from importlib.metadata import version
    assert version("bloomguard") == bloomguard.__version__


TYPED_USER = '''
from typing import List, Tuple
import bloomguard

def use(url: str) -> Tuple[bool, int, List[bool], bloomguard.FilterInfo]:
    with bloomguard.Client(url, command_timeout=0.5) as c, c.filter("n") as f:
        created: bool = f.init(100, 0.01, timeout=1.0)
        n: int = f.add_many([b"a", "b", bytearray(b"c"), memoryview(b"d")])
        found: List[bool] = f.contains_many(["a"])
        h: Tuple[int, int] = bloomguard.hash128("a")
        idx: List[int] = bloomguard.indexes(b"a", 958, 7)
        size, k = bloomguard.optimal_params(100, 0.01)
        return created and "a" in f, n + size + k + h[0] + idx[0], found, f.info()

def rotate(f: bloomguard.Filter) -> Tuple[bloomguard.RotationStats, float]:
    with f.rotate(100, 0.01, progress=lambda phase, n, done, total: phase == "done" and n > 0,
                  wait=1.5, threads=2, chunk_bytes=4096) as rot:
        rot.add("a")
        added: int = rot.add_many([b"b", "c"])
    with f.rotate(100, 0.01, "naive", None, batch=10) as rot2:
        rot2.add_many(iter(["d"]))
        rot2.commit()
    state: str = rot.state
    return rot.stats, rot.elapsed + added + len(state) + rot2.items

def degrade(c: bloomguard.Client) -> Tuple[bloomguard.Answer, bloomguard.Answers, int, str]:
    def db(items: List[bytes]) -> List[bool]:
        return [i.startswith(b"k") for i in items]
    p = bloomguard.Policy(on_connection=["retry", "callback", "assume_present"], on_notinit="assume_absent",
                          fallback=db, retry_count=3, breaker_threshold=5)
    with c.filter("n", policy=p.replace(callback_rate=10)) as f:
        f.snapshot(timeout=1.0)
        counters: dict[str, int] = f.stats()
        return f.query("a"), f.query_many(["a", b"b"]), counters["queries"], f.breaker_state

def locking(c: bloomguard.Client) -> int:
    with c.lock("n", lease=1, renew=True) as lock, lock.write(wait=1.5) as token:
        hold: bloomguard.Hold = lock.held()
        return token + lock.acquire("read", wait=0) + hold.depth

def bad(f: bloomguard.Filter) -> None:
    f.add(42)  # E: not an item

def misspelt() -> None:
    bloomguard.Client("redis://h", command_timout=0.5)  # E: no such option

def unknown_strategy(f: bloomguard.Filter) -> None:
    f.rotate(100, 0.01, strategy="swop")  # E: not a strategy

def not_a_source(a: bloomguard.Answer) -> bool:
    return a.source == "redis"  # fine: a Literal compares with its values
'''


def test_type_hints_are_usable(tmp_path):
    """With py.typed, a type checker sees the annotations of the installed package."""
    mypy_api = pytest.importorskip("mypy.api")
    user = tmp_path / "user.py"
    user.write_text(TYPED_USER)
    out, err, status = mypy_api.run(["--strict", "--no-incremental", "--cache-dir", str(tmp_path / "c"),
                                     str(user)])
    lines = [ln for ln in out.splitlines() if ": error:" in ln]
    # each line marked "# E:" and no other fails the check
    marked = [i + 1 for i, ln in enumerate(TYPED_USER.splitlines()) if "# E:" in ln]
    assert sorted(int(ln.split(":")[1]) for ln in lines) == marked, out + err
    assert '"add" of "Filter"' in lines[0] and '"command_timout"' in lines[1] and "'swop'" in lines[2], out
    out, err, status = mypy_api.run(["--strict", "--no-incremental", "--cache-dir", str(tmp_path / "c2"),
                                     "-p", "bloomguard"])
    assert status == 0, out + err


def test_distribution_metadata_has_license_urls_and_authors():
    """pip show / PyPI see a license (a PEP 639 expression covering the linked-in hiredis), the
    project's URLs and its authors; the license files are installed with the distribution."""
    from importlib.metadata import distribution
    dist = distribution("bloomguard")
    meta = dist.metadata
    assert meta["License-Expression"] == "Apache-2.0 AND BSD-3-Clause"
    assert meta["Author"], dict(meta)
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    assert {"Homepage", "Source", "Documentation", "Issues"} <= set(urls), urls
    assert "Operating System :: POSIX :: Linux" in meta.get_all("Classifier")
    want = ["LICENSE", "NOTICE", "third_party/hiredis/COPYING", "third_party/highwayhash/LICENSE",
            "third_party/openssl/LICENSE.txt"]
    assert set(meta.get_all("License-File") or []) == set(want)
    installed = {str(f).split("/licenses/", 1)[1] for f in dist.files or [] if "/licenses/" in str(f)}
    assert installed == set(want), installed
    for rel in want:
        assert dist.locate_file(next(f for f in dist.files if str(f).endswith("/licenses/" + rel))).read_bytes() \
            == (ROOT / rel).read_bytes(), rel
