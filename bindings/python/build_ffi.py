"""The cffi builder of the Python binding: writes the C source of ``bloomguard._bloomguard_cffi``.

The extension is compiled in cffi's out-of-line API mode against ``include/bloomguard.h``, with a
cdef generated from those very headers when it is built (``cdef_gen.py``; ``tests/python/test_cdef.py``
checks the result against the headers). CMake runs this file (bindings/python/CMakeLists.txt:
``python build_ffi.py --emit-c OUT.c``) and compiles OUT.c with the library's static archive, so the
one CMake build holds every source list and flag; pyproject.toml hands that build to scikit-build-core.
cffi's generated code defines ``Py_LIMITED_API``: the module is abi3.
"""
from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

from cffi import FFI

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
INCLUDE_DIR = ROOT / "include"
MODULE_NAME = "bloomguard._bloomguard_cffi"

# Binding-local helpers (prefix bgpy_, not part of the C ABI; test_cdef.py tells them apart).
# bgpy_progress, bgpy_fallback, bgpy_interrupt and bgpy_observe are implemented in Python
# (bloomguard/_rotation.py, bloomguard/_fallback.py, bloomguard/_call.py and bloomguard/_events.py,
# ffi.def_extern): static C functions with the signatures of bg_progress_fn, bg_fallback_fn,
# bg_interrupt_fn and bg_observer_fn that take the GIL and call the Python callback.
HELPERS_CDEF = """
void bgpy_item_ptrs(const char *blob, const size_t *lens, size_t n, const void **out);
extern "Python" int bgpy_progress(void *userdata, int phase, uint64_t items, uint64_t bytes_done,
                                  uint64_t bytes_total);
extern "Python" int bgpy_fallback(void *userdata, const void *const *items, const size_t *lens, size_t n,
                                  uint8_t *present);
extern "Python" int bgpy_interrupt(void *userdata);
extern "Python" void bgpy_observe(void *userdata, int kind, const char *name, const int64_t *values, size_t nvalues,
                                  const char *message);
void bgpy_observe_gate(void *userdata, int kind, const char *name, const int64_t *values, size_t nvalues,
                       const char *message);
void bgpy_observe_stop(void);
"""
HELPERS_SRC = r"""
#include <stdatomic.h>
#include <unistd.h>

/* Pointers to n items laid end to end in blob (lens[i] bytes each): one pass in C instead of one
   cffi conversion per item when a batch goes to bg_filter_add_many_ex / contains_many_ex. */
static void bgpy_item_ptrs(const char *blob, const size_t *lens, size_t n, const void **out) {
  for (size_t i = 0; i < n; i++) {
    out[i] = blob;
    blob += lens[i];
  }
}

/* The client observer the binding installs (bloomguard/_events.py): bgpy_observe behind a gate
   that bgpy_observe_stop closes at interpreter exit, so that no library thread (a lock's renewal,
   a map refresh) enters Python while it finalizes; the stop waits (bounded) for those inside. */
static atomic_int bgpy_observe_open = 1;
static atomic_int bgpy_observe_inside = 0;
static void bgpy_observe(void *userdata, int kind, const char *name, const int64_t *values, size_t nvalues,
                         const char *message);
static void bgpy_observe_gate(void *userdata, int kind, const char *name, const int64_t *values, size_t nvalues,
                              const char *message) {
  atomic_fetch_add(&bgpy_observe_inside, 1);
  if (atomic_load(&bgpy_observe_open)) bgpy_observe(userdata, kind, name, values, nvalues, message);
  atomic_fetch_sub(&bgpy_observe_inside, 1);
}
static void bgpy_observe_stop(void) {
  atomic_store(&bgpy_observe_open, 0);
  for (int i = 0; i < 500 && atomic_load(&bgpy_observe_inside); i++) usleep(1000);
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


def make_ffibuilder() -> FFI:
    """A cffi builder for the extension (only its C source is used: CMake compiles and links it)."""
    builder = FFI()
    builder.cdef(cdef() + HELPERS_CDEF)
    builder.set_source(MODULE_NAME, '#include "bloomguard.h"\n' + HELPERS_SRC, include_dirs=[str(INCLUDE_DIR)])
    return builder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--emit-c", metavar="OUT.c", required=True, type=Path,
                        help="write the extension's C source there (rewritten only when it changes)")
    args = parser.parse_args()
    args.emit_c.parent.mkdir(parents=True, exist_ok=True)
    make_ffibuilder().emit_c_code(str(args.emit_c))


if __name__ == "__main__":
    main()
