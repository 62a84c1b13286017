"""The compiled cffi module (out-of-line API mode): ``ffi`` and ``lib``.

Every C function is called with the GIL released (cffi's API mode does so for each call), so
threads waiting on the network run in parallel.
"""
from __future__ import annotations

try:
    from ._bloomguard_cffi import ffi, lib
except ImportError as exc:  # pragma: no cover - only without a build
    raise ImportError(
        "bloomguard's compiled extension (bloomguard._bloomguard_cffi) is missing or does not load: "
        "install the package with `pip install .` from the repository root (it needs a C/C++ compiler "
        "and OpenSSL's headers and static libraries: Debian's libssl-dev). "
        "(%s)" % exc
    ) from exc

__all__ = ["ffi", "lib", "cstr"]


def cstr(p: object) -> str:
    """A C string from the library as str ("" for NULL); invalid UTF-8 is replaced, never raised."""
    if p == ffi.NULL:
        return ""
    text: str = ffi.string(p).decode("utf-8", "replace")
    return text
