"""The bitmap a filter must hold: built here from the items, with the Python binding's hashing.

Redisson's layout: bit o is byte o // 8, mask 0x80 >> (o % 8) (SETBIT order). Trailing zero bytes
are stripped before comparing: the Redis string may legitimately be longer than its last set bit
(an earlier, larger generation; SETBIT/BITFIELD growth; a SWAP upload that stops at the last
non-zero byte).
"""
from __future__ import annotations

from typing import Iterable

import bloomguard


def reference_bitmap(items: Iterable[bytes], size: int, k: int) -> bytes:
    bits = bytearray((size + 7) // 8)
    for item in items:
        for o in bloomguard.indexes(item, size, k):
            bits[o >> 3] |= 0x80 >> (o & 7)
    return bytes(bits).rstrip(b"\0")


def first_difference(a: bytes, b: bytes) -> str:
    """Where two bitmaps first differ, for a readable failure."""
    for i in range(min(len(a), len(b))):
        if a[i] != b[i]:
            return "byte %d: %02x vs %02x" % (i, a[i], b[i])
    return "lengths %d vs %d (after stripping trailing zeros)" % (len(a), len(b))


def bit_differences(live: bytes, want: bytes) -> "tuple[int, int]":
    """(bits set in live but not in want, bits set in want but not in live)."""
    n = max(len(live), len(want))
    a, b = live.ljust(n, b"\0"), want.ljust(n, b"\0")
    extra = sum(bin(x & ~y & 0xFF).count("1") for x, y in zip(a, b))
    lost = sum(bin(y & ~x & 0xFF).count("1") for x, y in zip(a, b))
    return extra, lost
