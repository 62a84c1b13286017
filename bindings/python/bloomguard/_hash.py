"""Redisson's hashing and sizing, no server involved (bloomguard/hash.h)."""
from __future__ import annotations

import numbers
from typing import Any, List, Tuple

from ._errors import InvalidArgument, error_for, strerror
from ._ffi import cstr, ffi, lib
from ._items import Item, as_buffer

__all__ = ["hash128", "indexes", "optimal_params", "hash_impl", "MAX_SIZE", "MAX_HASH_ITERATIONS"]

#: Largest bitmap Redisson accepts (BG_MAX_SIZE, Integer.MAX_VALUE * 2).
MAX_SIZE: int = int(lib.BG_MAX_SIZE)
#: Largest hash-iteration count accepted from a config hash (BG_MAX_HASH_ITERATIONS).
MAX_HASH_ITERATIONS: int = int(lib.BG_MAX_HASH_ITERATIONS)


def _uint(value: Any, what: str, bits: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError("%s must be an int, not %s" % (what, type(value).__name__))
    number = int(value)
    if not 0 <= number < 2**bits:
        raise InvalidArgument("%s=%d is out of range (unsigned %d-bit)" % (what, number, bits))
    return number


def hash128(data: Item) -> Tuple[int, int]:
    """HighwayHash-128 with Redisson's key: ``(h1, h2)`` as unsigned 64-bit ints."""
    buf = as_buffer(data)
    h = ffi.new("uint64_t[2]")
    st = lib.bg_hash128(ffi.from_buffer(buf), len(buf), h, h + 1)
    if st != lib.BG_OK:  # pragma: no cover - only for NULL arguments
        raise error_for(st, "bg_hash128: %s" % strerror(st))
    return int(h[0]), int(h[1])


def indexes(data: Item, size: int, k: int) -> List[int]:
    """The ``k`` bit indexes Redisson sets for ``data`` in a bitmap of ``size`` bits."""
    buf = as_buffer(data)
    size = _uint(size, "size", 64)
    k = _uint(k, "k", 32)
    out = ffi.new("uint64_t[]", max(k, 1))
    st = lib.bg_indexes(ffi.from_buffer(buf), len(buf), size, k, out)
    if st != lib.BG_OK:
        raise error_for(st, "indexes(size=%d, k=%d): size must be 1..%d and k at least 1 (%s)"
                        % (size, k, MAX_SIZE, strerror(st)))
    return [int(x) for x in ffi.unpack(out, k)]


def optimal_params(expected: int, fpp: float) -> Tuple[int, int]:
    """Redisson's bitmap ``size`` and hash-iteration count ``k`` for ``expected`` insertions at
    false probability ``fpp``. Raises :class:`~bloomguard.BadParams` where Redisson's tryInit
    rejects them (the library gives Redisson's exact message through :meth:`Filter.init`)."""
    if isinstance(expected, bool) or not isinstance(expected, numbers.Integral):
        raise TypeError("expected must be an int, not %s" % type(expected).__name__)
    if isinstance(fpp, bool) or not isinstance(fpp, numbers.Real):
        raise TypeError("fpp must be a float, not %s" % type(fpp).__name__)
    expected = int(expected)
    if not -(2**63) <= expected < 2**63:
        raise InvalidArgument("expected=%d does not fit in a signed 64-bit integer" % expected)
    size = ffi.new("uint64_t *")
    k = ffi.new("uint32_t *")
    st = lib.bg_optimal_params(expected, float(fpp), size, k)
    if st != lib.BG_OK:
        raise error_for(st, "optimal_params(expected=%d, fpp=%r) rejected: %s" % (expected, fpp, strerror(st)))
    return int(size[0]), int(k[0])


def hash_impl() -> str:
    """The HighwayHash implementation picked for this CPU: "avx2", "sse41" or "portable"."""
    return cstr(lib.bg_hash_impl())
