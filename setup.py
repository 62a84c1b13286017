"""setuptools glue for the Python binding (metadata lives in pyproject.toml).

``pip install .`` / ``pip install -e .``: build_ext first builds the C library with CMake
(bindings/python/build_ffi.py: build_native), then cffi generates and compiles the extension
module bloomguard._bloomguard_cffi, linked with that static library. Build files go to
build-python/ (the C build owns build/).
"""
import os
import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "bindings", "python"))
import build_ffi  # noqa: E402


class BuildExtWithNative(build_ext):
    """Builds libbloomguard.a with CMake, then links every extension with it."""

    def run(self):
        jobs = self.parallel if isinstance(self.parallel, int) and self.parallel > 0 else None
        native = build_ffi.build_native(os.path.join(self.build_temp, "cmake"), jobs=jobs,
                                        verbose=bool(self.verbose))
        for ext in self.extensions:
            for key in ("extra_objects", "libraries", "library_dirs", "extra_link_args"):
                current = getattr(ext, key) or []
                setattr(ext, key, current + [v for v in native[key] if v not in current])
            # relink when the C library changed
            ext.depends = list(ext.depends or []) + native["extra_objects"]
        super().run()


setup(
    version=build_ffi.version(),
    cffi_modules=["bindings/python/build_ffi.py:ffibuilder"],
    cmdclass={"build_ext": BuildExtWithNative},
    options={"build": {"build_base": "build-python"}},
)
