"""Build support for the Python binding: the cffi builder and the native (CMake) build.

``ffibuilder`` compiles ``bloomguard._bloomguard_cffi`` in cffi's out-of-line API mode against
``include/bloomguard.h``, with a cdef generated from those very headers when it is built
(``cdef_gen.py``; ``tests/python/test_cdef.py`` checks the result against the headers).

``build_native`` builds the C library itself with the project's own CMake build (the one source of
truth for the source list and the per-file flags of the hashing unit): it configures
``CMakeLists.txt`` with tests, CLI and benchmarks off and builds the ``bloomguard_static`` target
(position-independent code, hidden visibility). By default (CMake's BG_HIREDIS=auto) that archive
holds hiredis too: a system hiredis >= 1.0 if pkg-config finds one, else hiredis 1.x built from the
hiredis PyPI sdist (cmake/hiredis.cmake), so the extension needs only libc, libm, libpthread and,
once TLS is used, libssl/libcrypto at run time. With BLOOMGUARD_CMAKE_ARGS=-DBG_HIREDIS=system it
links the system hiredis found with pkg-config instead (Debian 12: 0.14, no tracked queries). The
extension re-exports none of the archive's symbols.

setup.py at the repository root wires both into setuptools; nothing here imports the package.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from cffi import FFI

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
INCLUDE_DIR = ROOT / "include"
MODULE_NAME = "bloomguard._bloomguard_cffi"

# Binding-local helpers (prefix bgpy_, not part of the C ABI; test_cdef.py tells them apart).
# bgpy_progress, bgpy_fallback and bgpy_interrupt are implemented in Python (bloomguard/_rotation.py,
# bloomguard/_fallback.py and bloomguard/_call.py, ffi.def_extern): static C functions with the
# signatures of bg_progress_fn, bg_fallback_fn and bg_interrupt_fn that take the GIL and call the
# Python callback.
HELPERS_CDEF = """
void bgpy_item_ptrs(const char *blob, const size_t *lens, size_t n, const void **out);
extern "Python" int bgpy_progress(void *userdata, int phase, uint64_t items, uint64_t bytes_done,
                                  uint64_t bytes_total);
extern "Python" int bgpy_fallback(void *userdata, const void *const *items, const size_t *lens, size_t n,
                                  uint8_t *present);
extern "Python" int bgpy_interrupt(void *userdata);
"""
HELPERS_SRC = r"""
/* Pointers to n items laid end to end in blob (lens[i] bytes each): one pass in C instead of one
   cffi conversion per item when a batch goes to bg_filter_add_many_ex / contains_many_ex. */
static void bgpy_item_ptrs(const char *blob, const size_t *lens, size_t n, const void **out) {
  for (size_t i = 0; i < n; i++) {
    out[i] = blob;
    blob += lens[i];
  }
}
"""


def _load_cdef_gen():
    """cdef_gen.py next to this file (loaded by path: cffi runs this file outside any package)."""
    spec = importlib.util.spec_from_file_location("bloomguard_cdef_gen", HERE / "cdef_gen.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cdef() -> str:
    """The cdef of the C API, generated from include/ now (cdef_gen.generate)."""
    return _load_cdef_gen().generate(INCLUDE_DIR)


class BuildError(RuntimeError):
    """The native part of the build cannot proceed (a tool or a dependency is missing)."""


def version() -> str:
    """BG_VERSION_STRING from include/bloomguard/version.h: the package version."""
    text = (INCLUDE_DIR / "bloomguard" / "version.h").read_text()
    m = re.search(r'#define\s+BG_VERSION_STRING\s+"([^"]+)"', text)
    if not m:
        raise BuildError("BG_VERSION_STRING not found in include/bloomguard/version.h")
    return m.group(1)


def _fail(msg: str) -> BuildError:
    sys.stderr.write("\n*** bloomguard: %s\n\n" % msg)
    return BuildError(msg)


def _pkg_config_libs(packages: list[str]) -> list[str]:
    """--libs of a system hiredis (and hiredis_ssl) the CMake build chose (BG_HIREDIS=system)."""
    pkg_config = os.environ.get("PKG_CONFIG") or shutil.which("pkg-config")
    if not pkg_config:
        raise _fail("pkg-config not found; it locates the system hiredis as for the C build "
                    "(Debian: apt-get install pkg-config libhiredis-dev)")
    if subprocess.run([pkg_config, "--exists"] + packages).returncode != 0:
        raise _fail("%s not found by pkg-config (Debian: apt-get install libhiredis-dev, or set "
                    "PKG_CONFIG_PATH to a hiredis install)" % " ".join(packages))
    out = subprocess.run([pkg_config, "--libs"] + packages, check=True, capture_output=True, text=True)
    return shlex.split(out.stdout)


def _static_link_flags(build_dir: Path) -> list[str]:
    """What linking libbloomguard.a needs besides it, from the file the CMake build writes."""
    info_file = build_dir / "bloomguard-static-link.json"
    try:
        info = json.loads(info_file.read_text())
    except (OSError, ValueError) as e:
        raise _fail("cannot read %s (written by the CMake configure step): %s" % (info_file, e))
    if info["hiredis"] == "system":
        return _pkg_config_libs(info["pkg_config_requires"]) + info["libs"]
    flags = list(info["libs"])
    if info["hiredis_ssl"]:
        # the vendored hiredis's TLS part is in the archive; --as-needed: libssl/libcrypto are
        # recorded only once the library's code uses it
        flags += ["-Wl,--push-state,--as-needed", "-lssl", "-lcrypto", "-Wl,--pop-state"]
    return flags


def _run(cmd: list[str], what: str, verbose: bool) -> None:
    if verbose:
        print("bloomguard:", " ".join(shlex.quote(c) for c in cmd), flush=True)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if verbose and proc.stdout:
        print(proc.stdout, flush=True)
    if proc.returncode != 0:
        raise _fail("%s failed (exit %d): %s\n%s" % (what, proc.returncode, " ".join(cmd), proc.stdout[-6000:]))


def build_native(build_dir: str | os.PathLike[str], jobs: int | None = None, verbose: bool = False) -> dict:
    """Builds libbloomguard.a with CMake in build_dir; returns what the extension must link.

    Returns a dict with ``extra_objects`` (the archive), ``libraries``, ``library_dirs`` and
    ``extra_link_args`` (libm, pthread; OpenSSL as needed, or a system hiredis from pkg-config).
    Extra CMake arguments may be given in the BLOOMGUARD_CMAKE_ARGS environment variable (e.g.
    -DCMAKE_BUILD_TYPE=Debug, -DBG_HIREDIS=system).
    """
    cmake = os.environ.get("CMAKE") or shutil.which("cmake")
    if not cmake:
        raise _fail("cmake (>= 3.18) not found: it builds the C library "
                    "(Debian: apt-get install cmake ninja-build, or pip install cmake)")
    build_dir = Path(build_dir).resolve()
    build_dir.mkdir(parents=True, exist_ok=True)

    configure = [cmake, "-S", str(ROOT), "-B", str(build_dir),
                 "-DCMAKE_BUILD_TYPE=Release",
                 "-DBG_BUILD_TESTS=OFF", "-DBG_BUILD_CLI=OFF", "-DBG_BUILD_BENCH=OFF"]
    if not (build_dir / "CMakeCache.txt").exists() and shutil.which("ninja"):
        configure += ["-G", "Ninja"]
    configure += shlex.split(os.environ.get("BLOOMGUARD_CMAKE_ARGS", ""))
    _run(configure, "CMake configure of the C library (see the messages above for a missing dependency)",
         verbose)
    _run([cmake, "--build", str(build_dir), "--target", "bloomguard_static",
          "-j", str(jobs or os.cpu_count() or 2)], "CMake build of the C library", verbose)

    archive = build_dir / "libbloomguard.a"
    if not archive.exists():
        found = sorted(build_dir.rglob("libbloomguard.a"))
        if not found:
            raise _fail("CMake built bloomguard_static but libbloomguard.a is not in %s" % build_dir)
        archive = found[0]

    libraries, library_dirs, extra_link_args = [], [], []
    flags = _static_link_flags(build_dir)
    # a -Wl,--push-state ... --pop-state group stays in order, after the archive (extra_link_args
    # go last on the link line)
    grouped = False
    for flag in flags:
        if flag.startswith("-Wl,--push-state"):
            grouped = True
        if grouped:
            extra_link_args.append(flag)
        elif flag.startswith("-l"):
            if flag[2:] not in libraries:
                libraries.append(flag[2:])
        elif flag.startswith("-L"):
            library_dirs.append(flag[2:])
        else:
            extra_link_args.append(flag)
        if flag.startswith("-Wl,--pop-state"):
            grouped = False
    return {"extra_objects": [str(archive)], "libraries": libraries, "library_dirs": library_dirs,
            "extra_link_args": extra_link_args}


def _link_args() -> list[str]:
    # The archive's symbols (bg_* included) stay inside the extension: only PyInit_* is exported,
    # so it can share a process with libbloomguard.so or another copy of the library.
    if sys.platform.startswith("linux"):
        return ["-Wl,--exclude-libs,ALL"]
    return []


def make_ffibuilder(**link: list[str]) -> FFI:
    """A cffi builder for the extension; ``link``: extra_objects, libraries, library_dirs,
    extra_link_args (setup.py adds them in build_ext instead)."""
    builder = FFI()
    builder.cdef(cdef() + HELPERS_CDEF)
    extra_link_args = _link_args() + link.pop("extra_link_args", [])
    builder.set_source(
        MODULE_NAME,
        '#include "bloomguard.h"\n' + HELPERS_SRC,
        include_dirs=[str(INCLUDE_DIR)],
        extra_link_args=extra_link_args,
        **link,
    )
    return builder


ffibuilder = make_ffibuilder()

if __name__ == "__main__":
    # Development shortcut: build the C library and compile the extension next to the package.
    # (cffi allows one set_source per FFI object: this one gets its own builder.)
    native = build_native(ROOT / "build-python" / "cmake", verbose=True)
    make_ffibuilder(**native).compile(tmpdir=str(HERE), verbose=True)
