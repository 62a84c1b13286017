"""Items: the bytes Redisson hashes.

``bytes``, ``bytearray`` and ``memoryview`` are taken as raw bytes (ByteArrayCodec); ``str`` is
encoded as UTF-8 (StringCodec). Anything else is a TypeError: an int or None is never silently
turned into some text.
"""
from __future__ import annotations

import itertools
from typing import Any, Iterable, Iterator, List, Tuple, Union, cast

from ._ffi import ffi, lib

__all__ = ["Item", "as_buffer", "Batch", "chunks", "CHUNK"]

#: Items per C call in Filter.add_many / contains_many: bounds the memory of the joined copy for
#: huge iterables (the library itself sends 16,384 items per round trip and 1,024 per server step).
CHUNK = 65536

Item = Union[bytes, bytearray, memoryview, str]


Buffer = Union[bytes, bytearray, memoryview]


def as_buffer(item: Any) -> Buffer:
    """The item as a contiguous byte buffer (len() == number of bytes)."""
    t = type(item)
    if t is bytes or t is bytearray:
        return cast(Buffer, item)
    if t is str:
        return cast(str, item).encode("utf-8")
    if isinstance(item, (bytes, bytearray)):
        return cast(Buffer, item)
    if isinstance(item, str):
        return str.encode(item, "utf-8")
    if isinstance(item, memoryview):
        if item.c_contiguous:
            return item.cast("B") if (item.format != "B" or item.ndim != 1) else item
        return item.tobytes()
    raise TypeError("a bloomguard item must be bytes, bytearray, memoryview or str, not %s" % t.__name__)


def _buffers(items: Union[List[Any], Tuple[Any, ...]]) -> List[Any]:
    """as_buffer of every item. Lists of str (and of bytes) take a path without a Python-level call
    per item: a batch of a million items is converted several times faster."""
    try:
        return list(map(str.encode, items))  # all str (or str subclasses): UTF-8, strict, as as_buffer
    except TypeError:  # some item is not a str: the general path (which raises for a bad one)
        return [x if type(x) is bytes else as_buffer(x) for x in items]


class Batch:
    """A batch of items laid out for the C batch calls: ``ptrs`` (const void *[]), ``lens``
    (size_t[]) and ``n``. Keeps the joined buffer alive for as long as the object lives."""

    __slots__ = ("n", "ptrs", "lens", "_blob", "_cblob")
    n: int
    ptrs: Any
    lens: Any
    _blob: Buffer
    _cblob: Any

    def __init__(self, items: Iterable[Any]) -> None:
        if isinstance(items, (str, bytes, bytearray, memoryview)):
            raise TypeError("expected an iterable of items, got a single %s (use add()/contains() for one item, "
                            "or wrap it in a list)" % type(items).__name__)
        try:
            it = iter(items)
        except TypeError:
            raise TypeError("expected an iterable of items, not %s" % type(items).__name__) from None
        bufs = _buffers(items if type(items) is list or type(items) is tuple else list(it))
        self.n = n = len(bufs)
        self.lens = ffi.new("size_t[]", list(map(len, bufs)))
        self._blob = b"".join(bufs)
        self._cblob = ffi.from_buffer(self._blob)
        self.ptrs = ffi.new("const void *[]", n)
        lib.bgpy_item_ptrs(self._cblob, self.lens, n, self.ptrs)

    @classmethod
    def one(cls, item: Any) -> "Batch":
        """A batch of one item, without copying it."""
        self = cls.__new__(cls)
        buf = as_buffer(item)
        self.n = 1
        self.lens = ffi.new("size_t[1]", [len(buf)])
        self._blob = buf
        self._cblob = ffi.from_buffer(buf)
        self.ptrs = ffi.new("const void *[1]", [self._cblob])
        return self


def chunks(items: Iterable[Any], size: int = CHUNK) -> Iterator[Batch]:
    """``items`` as Batches of at most ``size`` items, each built in one pass (a list or tuple
    that fits is one batch; other iterables are consumed lazily, ``size`` items at a time).
    Yields at least one (possibly empty) batch; a single str/bytes item is a TypeError."""
    if isinstance(items, (list, tuple)) and len(items) <= size:
        yield Batch(items)
        return
    if isinstance(items, (str, bytes, bytearray, memoryview)):
        yield Batch(items)  # raises the TypeError for a single item
        return
    try:
        it = iter(items)
    except TypeError:
        raise TypeError("expected an iterable of items, not %s" % type(items).__name__) from None
    first = True
    while True:
        batch = Batch(itertools.islice(it, size))
        if batch.n == 0 and not first:
            return
        first = False
        yield batch
        if batch.n < size:
            return
