"""bloomguard.aio: the asyncio API - operations that hold no thread.

::

    import bloomguard.aio

    async with await bloomguard.aio.connect("redis://127.0.0.1:6379", command_timeout=0.5) as client:
        f = client.filter("products")
        await f.init(1_000_000, 0.01)
        await f.add("sku-42")
        await f.contains("sku-42")                 # True
        await f.contains_many(["sku-42", "sku-43"], timeout=0.2)

Every operation is submitted to the C library's submission queue (bloomguard/queue.h) and
returns at once; the queue's one file descriptor is registered with the running loop
(``loop.add_reader``), and when it is readable the loop polls the queue, which does the I/O that
is ready and hands back the completions, each resolving its operation's future. No thread is
made or held for an operation in flight, so a thousand concurrent ``await f.contains(...)`` cost a
thousand futures, not a thousand threads. Everything the blocking API guarantees - the atomic
config and write-lock check, retries after a config change, the degrade policy, Cluster
redirects, TLS - is the same C code (the waits are timers of the queue, never sleeps).

Cancelling the task that awaits an operation (``asyncio.wait_for``, a TaskGroup, ``task.cancel()``)
cancels the C operation: it completes with nothing left running, and the client stays usable.

A client belongs to the event loop that connected it; use it from that loop only. The policy's
fallback callback runs on the loop's thread, inside the poll (keep it quick; an exception it raises
is reported through the loop's exception handler and the callback counts as declined).
:meth:`Filter.rotate` runs its adds and its commit in the loop's default executor: a rotation
builds a whole bitmap, work for a thread, and the loop never waits for it.

The exceptions are the blocking API's (:class:`~bloomguard.BloomGuardError` and its subclasses).
"""
from __future__ import annotations

import asyncio
import itertools
import numbers
from types import TracebackType
from typing import Any, Awaitable, Callable, Dict, Iterable, List, Optional, Tuple, Type, Union

from ._answer import Answer, Answers
from ._call import SOURCES, TimeoutArg, take_callback_error
from ._client import Client as _SyncClient
from ._errors import Closed, InvalidArgument, error_for
from ._ffi import cstr, ffi, lib
from ._filter import Filter as _SyncFilter
from ._filter import FilterInfo
from ._handle import Handle
from ._items import Batch, Item, as_buffer
from ._options import seconds_to_ms
from ._policy import Policy
from ._rotation import ProgressFn, Rotation as _SyncRotation

__all__ = ["connect", "Client", "Filter", "Rotation"]

_BATCH = 256  # completions taken per poll

# What a completion means, by operation (the value the future is given).
_CONTAINS1, _CONTAINS_MANY, _QUERY1, _QUERY_MANY, _ADD1, _ADD_MANY, _NUMBER, _BOOL, _INFO = range(9)

_NOT_NEGATIVE = (0, 2**63 - 1)


async def connect(url: str, **options: Any) -> "Client":
    """Opens a client for the running loop: ``url`` and ``options`` as :class:`bloomguard.Client`
    takes them. Opening checks the URL and the options at once; it connects nothing unless
    ``connect_at_open=True``, whose check of the server runs in the loop's default executor."""
    loop = asyncio.get_running_loop()
    if options.get("connect_at_open"):
        sync = await loop.run_in_executor(None, lambda: _SyncClient(url, **options))
    else:
        sync = _SyncClient(url, **options)
    try:
        return Client(sync, loop)
    except BaseException:
        sync.close()
        raise


class _Pending:
    __slots__ = ("future", "kind", "call", "n", "owner")

    def __init__(self, future: "asyncio.Future[Any]", kind: int, call: Any, n: int, owner: Any) -> None:
        self.future = future
        self.kind = kind
        self.call = call
        self.n = n
        # the blocking filter underneath, kept until the completion: the C operation holds the C
        # filter itself, this keeps its policy's fallback registered (a closed, dropped filter's
        # fallback would decline)
        self.owner = owner


class Client:
    """A client whose operations are awaited on one event loop (``await bloomguard.aio.connect()``).

    Use it as ``async with`` or ``await client.close()``. Filters (:meth:`filter`) share its
    submission queue and connections.
    """

    def __init__(self, sync: _SyncClient, loop: asyncio.AbstractEventLoop) -> None:
        self._sync = sync
        self._loop = loop
        cptr = sync._handle.pin()
        out = ffi.new("bg_queue **")
        st = lib.bg_queue_open(out, cptr)
        if st != 0:
            sync._handle.unpin()
            raise error_for(st, cstr(lib.bg_client_errmsg(cptr)))
        self._queue = Handle(out[0], lib.bg_queue_close, "queue", keep=(cptr,), pinned=(sync._handle,))
        self._q = out[0]
        self._fd = lib.bg_queue_fd(self._q)
        self._pending: Dict[int, _Pending] = {}
        self._tags = itertools.count(1)
        self._calls: List[Any] = []
        # the poll's out-arrays, reused
        self._cs = ffi.new("bg_completion *[]", _BATCH)
        self._n = ffi.new("size_t *")
        self._tag = ffi.new("uint64_t[]", _BATCH)
        self._status = ffi.new("int32_t[]", _BATCH)
        self._source = ffi.new("int32_t[]", _BATCH)
        self._value = ffi.new("int64_t[]", _BATCH)
        self._closed = False
        loop.add_reader(self._fd, self._drain)

    # --- the loop's side -----------------------------------------------------------------------

    def _drain(self) -> None:
        """The queue's fd is readable: run it forward and resolve what completed."""
        q, cs, n = self._q, self._cs, self._n
        while not self._closed:
            lib.bg_queue_poll(q, 0, cs, _BATCH, n)
            k = n[0]
            exc = take_callback_error()
            if exc is not None:
                self._loop.call_exception_handler({"message": "a bloomguard fallback callback raised (it counted as "
                                                              "declined)", "exception": exc})
            if not k:
                return
            lib.bg_completions_read(cs, k, self._tag, self._status, self._source, self._value)
            for i in range(k):
                p = self._pending.pop(self._tag[i], None)
                if p is None:
                    continue
                if p.call is not None:
                    self._calls.append(p.call)
                if p.future.done():  # cancelled: the C operation was cancelled too
                    continue
                st = self._status[i]
                if st != 0 and p.kind not in (_QUERY1, _QUERY_MANY):
                    p.future.set_exception(error_for(st, cstr(lib.bg_completion_errmsg(cs[i]))))
                else:
                    try:
                        p.future.set_result(self._result(p, i, st))
                    except BaseException as e:  # a failed query's error, raised as the blocking one would
                        p.future.set_exception(e)
            if k < _BATCH:
                return

    def _result(self, p: _Pending, i: int, st: int) -> Any:
        kind, c = p.kind, self._cs[i]
        if kind == _CONTAINS1 or kind == _ADD1 or kind == _BOOL:
            return bool(self._value[i])
        if kind == _NUMBER or kind == _ADD_MANY:
            return int(self._value[i])
        if kind == _CONTAINS_MANY:
            return self._present(c, p.n)
        if kind == _INFO:
            size, k = ffi.new("uint64_t *"), ffi.new("uint32_t *")
            n, fpp = ffi.new("int64_t *"), ffi.new("double *")
            parts = ffi.new("uint32_t *")
            lib.bg_completion_info(c, size, k, n, fpp)
            lib.bg_completion_partitions(c, parts)
            return FilterInfo(int(size[0]), int(k[0]), int(n[0]), float(fpp[0]), int(parts[0]))
        # query / query_many: the answer with where it came from; a failure raises
        if st != 0:
            raise error_for(st, cstr(lib.bg_completion_errmsg(c)))
        source = SOURCES.get(self._source[i], "source %d" % self._source[i])
        degraded = lib.bg_completion_degraded_status(c)
        failure = cstr(lib.bg_completion_errmsg(c)) if degraded else ""
        error = error_for(degraded, failure) if degraded else None
        if kind == _QUERY1:
            return Answer(bool(self._value[i]), source, failure, error)
        return Answers(self._present(c, p.n), source, failure, error)

    @staticmethod
    def _present(c: Any, n: int) -> List[bool]:
        count = ffi.new("size_t *")
        present = lib.bg_completion_present(c, count)
        return list(map(bool, ffi.unpack(present, count[0]))) if count[0] else [False] * 0

    # --- submitting ----------------------------------------------------------------------------

    def _call(self, timeout: TimeoutArg) -> Any:
        """A bg_call with this timeout (from the pool), or NULL for none."""
        if timeout is None:
            return ffi.NULL
        ms = seconds_to_ms(timeout, "timeout")
        call = self._calls.pop() if self._calls else None
        if call is None:
            out = ffi.new("bg_call **")
            if lib.bg_call_new(out) != 0:
                raise MemoryError("bg_call_new")
            call = ffi.gc(out[0], lib.bg_call_free)
        lib.bg_call_clear_cancel(call)
        if lib.bg_call_set_timeout_ms(call, ms) != 0:
            self._calls.append(call)
            raise InvalidArgument("timeout=%r is out of range (up to 3600 seconds)" % (timeout,))
        return call

    async def _submit(self, kind: int, n: int, timeout: TimeoutArg, submit: Callable[[Any, int], int],
                      fptr: Any, owner: Any) -> Any:
        if self._closed:
            raise Closed("the client is closed")
        if asyncio.get_running_loop() is not self._loop:
            raise RuntimeError("a bloomguard.aio client is used from the event loop that connected it only")
        call = self._call(timeout)
        tag = next(self._tags)
        st = submit(call, tag)
        if st != 0:
            if call != ffi.NULL:
                msg = cstr(lib.bg_call_errmsg(call))
                self._calls.append(call)
            else:
                msg = cstr(lib.bg_filter_errmsg(fptr))
            raise error_for(st, msg)
        fut = self._loop.create_future()
        self._pending[tag] = _Pending(fut, kind, None if call == ffi.NULL else call, n, owner)
        try:
            return await fut
        except asyncio.CancelledError:
            # the C operation ends too (its completion, BG_ECANCELED, is dropped when it comes)
            if not self._closed:
                lib.bg_queue_cancel(self._q, tag)
            raise

    # --- the API -------------------------------------------------------------------------------

    def filter(self, name: str, policy: Optional[Policy] = None) -> "Filter":
        """The filter ``name`` on this client (no I/O); ``policy`` as for the blocking API."""
        if self._closed:
            raise Closed("the client is closed")
        return Filter(self, _SyncFilter(self._sync, name, policy=policy))

    @property
    def sync(self) -> _SyncClient:
        """The blocking :class:`bloomguard.Client` underneath (the same connections' pools, for
        locks and for code that runs in threads)."""
        return self._sync

    @property
    def closed(self) -> bool:
        return self._closed

    async def close(self) -> None:
        """Fails the operations still in flight with :class:`~bloomguard.Closed`, closes the queue
        and the client (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if not self._loop.is_closed():
            self._loop.remove_reader(self._fd)
        pending, self._pending = self._pending, {}
        for p in pending.values():
            if not p.future.done():
                p.future.set_exception(Closed("the client was closed"))
        self._queue.close()
        self._calls.clear()
        self._sync.close()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                        tb: Optional[TracebackType]) -> None:
        await self.close()


def _buffer(item: Any) -> Tuple[Any, int]:
    """The item as what a `const void *` parameter takes, and its length."""
    buf = as_buffer(item)
    if type(buf) is bytes:
        return buf, len(buf)
    return ffi.from_buffer(buf), len(buf)


def _int(value: Any, what: str, bounds: Tuple[int, int]) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError("%s must be an int, not %s" % (what, type(value).__name__))
    if not bounds[0] <= int(value) <= bounds[1]:
        raise InvalidArgument("%s=%d is out of range" % (what, value))
    return int(value)


class Filter:
    """A Bloom filter whose operations are awaited (``client.filter(name)``); items as the
    blocking :class:`bloomguard.Filter` takes them. ``timeout=`` (seconds) bounds one operation."""

    __slots__ = ("_client", "_sync", "_f")

    def __init__(self, client: Client, sync: _SyncFilter) -> None:
        self._client = client
        self._sync = sync
        self._f = sync._handle.pin()

    @property
    def name(self) -> str:
        return self._sync.name

    @property
    def sync(self) -> _SyncFilter:
        """The blocking :class:`bloomguard.Filter` underneath (its policy, stats, snapshot)."""
        return self._sync

    @property
    def policy(self) -> Optional[Policy]:
        return self._sync.policy

    @policy.setter
    def policy(self, value: Optional[Policy]) -> None:
        self._sync.policy = value

    def stats(self) -> Any:
        return self._sync.stats()

    def _submit(self, kind: int, n: int, timeout: TimeoutArg, submit: Callable[[Any, int], int],
                fptr: Any) -> Awaitable[Any]:
        return self._client._submit(kind, n, timeout, submit, fptr, self._sync)

    def close(self) -> None:
        """Lets go of the filter (idempotent). Operations already submitted are not cut short: each
        still completes with its answer (the C operation holds the filter until it ends)."""
        if self._f is not None:
            self._f = None
            self._sync._handle.unpin()
            self._sync.close()

    def _ptr(self) -> Any:
        if self._f is None:
            raise Closed("the filter is closed")
        return self._f

    async def init(self, expected: int, fpp: float, *, partitions: int = 0, timeout: TimeoutArg = None) -> bool:
        """Redisson's ``tryInit``: True if this call created the config (``partitions=P``: a
        partitioned filter, as the blocking ``Filter.init``)."""
        n = _int(expected, "expected", (-(2**63), 2**63 - 1))
        if isinstance(fpp, bool) or not isinstance(fpp, numbers.Real):
            raise TypeError("fpp must be a float, not %s" % type(fpp).__name__)
        parts = _int(partitions, "partitions", (-(2**63), 2**63 - 1))
        f, q = self._ptr(), self._client._q
        got: bool = await self._submit(
            _BOOL, 0, timeout,
            lambda call, tag: lib.bg_filter_init_partitioned_submit_ex(f, call, q, tag, n, float(fpp), parts), f)
        return got

    async def add(self, item: Item, *, timeout: TimeoutArg = None) -> bool:
        """Adds one item; True if at least one of its bits was newly set."""
        data, n = _buffer(item)
        f, q = self._ptr(), self._client._q
        got: bool = await self._submit(_ADD1, 1, timeout,
                                               lambda call, tag: lib.bg_filter_add_submit_ex(f, call, q, tag, data, n), f)
        return got

    async def add_many(self, items: Iterable[Item], *, timeout: TimeoutArg = None) -> int:
        """Adds every item; returns how many set a new bit."""
        batch = Batch(items)
        f, q = self._ptr(), self._client._q
        got: int = await self._submit(
            _ADD_MANY, batch.n, timeout,
            lambda call, tag: lib.bg_filter_add_many_submit_ex(f, call, q, tag, batch.ptrs, batch.lens, batch.n), f)
        return got

    async def contains(self, item: Item, *, timeout: TimeoutArg = None) -> bool:
        """True if the item may have been added (no false negatives)."""
        data, n = _buffer(item)
        f, q = self._ptr(), self._client._q
        got: bool = await self._submit(
            _CONTAINS1, 1, timeout, lambda call, tag: lib.bg_filter_contains_submit_ex(f, call, q, tag, data, n), f)
        return got

    async def contains_many(self, items: Iterable[Item], *, timeout: TimeoutArg = None) -> List[bool]:
        """:meth:`contains` for every item, in order."""
        batch = Batch(items)
        f, q = self._ptr(), self._client._q
        got: List[bool] = await self._submit(
            _CONTAINS_MANY, batch.n, timeout,
            lambda call, tag: lib.bg_filter_contains_many_submit_ex(f, call, q, tag, batch.ptrs, batch.lens, batch.n),
            f)
        return got

    async def query(self, item: Item, *, timeout: TimeoutArg = None) -> Answer:
        """:meth:`contains` with provenance (``Answer``, as the blocking ``query``)."""
        data, n = _buffer(item)
        f, q = self._ptr(), self._client._q
        got: Answer = await self._submit(
            _QUERY1, 1, timeout, lambda call, tag: lib.bg_filter_contains_submit_ex(f, call, q, tag, data, n), f)
        return got

    async def query_many(self, items: Iterable[Item], *, timeout: TimeoutArg = None) -> Answers:
        """:meth:`contains_many` with provenance (``Answers``)."""
        batch = Batch(items)
        f, q = self._ptr(), self._client._q
        got: Answers = await self._submit(
            _QUERY_MANY, batch.n, timeout,
            lambda call, tag: lib.bg_filter_contains_many_submit_ex(f, call, q, tag, batch.ptrs, batch.lens, batch.n),
            f)
        return got

    async def count(self, *, timeout: TimeoutArg = None) -> int:
        """Redisson's ``count()`` estimate."""
        f, q = self._ptr(), self._client._q
        got: int = await self._submit(_NUMBER, 0, timeout,
                                              lambda call, tag: lib.bg_filter_count_submit_ex(f, call, q, tag), f)
        return got

    async def info(self, *, timeout: TimeoutArg = None) -> FilterInfo:
        """The config hash (``FilterInfo``)."""
        f, q = self._ptr(), self._client._q
        got: FilterInfo = await self._submit(_INFO, 0, timeout,
                                                     lambda call, tag: lib.bg_filter_info_submit_ex(f, call, q, tag), f)
        return got

    async def delete(self, *, timeout: TimeoutArg = None) -> bool:
        """Deletes the bitmap and the config; True if there was something to delete."""
        f, q = self._ptr(), self._client._q
        got: bool = await self._submit(_BOOL, 0, timeout,
                                               lambda call, tag: lib.bg_filter_delete_submit_ex(f, call, q, tag), f)
        return got

    async def expire(self, ttl: float, *, timeout: TimeoutArg = None) -> bool:
        """Gives both keys a time to live of ``ttl`` seconds (``datetime.timedelta`` works too)."""
        ms = seconds_to_ms(ttl, "ttl")
        f, q = self._ptr(), self._client._q
        got: bool = await self._submit(_BOOL, 0, timeout,
                                               lambda call, tag: lib.bg_filter_expire_submit_ex(f, call, q, tag, ms), f)
        return got

    def rotate(self, expected: int, fpp: float, *, strategy: str = "swap", progress: Optional[ProgressFn] = None,
               **options: Any) -> "Rotation":
        """A live rebuild (as the blocking :meth:`bloomguard.Filter.rotate`), awaited:
        ``async with f.rotate(n, p) as rot: await rot.add_many(items)`` commits on success and
        aborts on an error. Its steps run in the loop's default executor."""
        return Rotation(self, expected, fpp, strategy, progress, options)

    async def __aenter__(self) -> "Filter":
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                        tb: Optional[TracebackType]) -> None:
        self.close()


class Rotation:
    """A rebuild of a live filter whose begin, adds, commit and abort are awaited (each runs in
    the loop's default executor: the blocking :class:`bloomguard.Rotation` underneath)."""

    def __init__(self, f: Filter, expected: int, fpp: float, strategy: str, progress: Optional[ProgressFn],
                 options: Dict[str, Any]) -> None:
        self._filter = f
        self._args = (expected, fpp)
        self._kwargs = dict(options, strategy=strategy, progress=progress)
        self._sync: Optional[_SyncRotation] = None

    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    async def begin(self) -> "Rotation":
        """Takes the rotation's lease (waits for another rotation as the options say)."""
        self._sync = await self._run(lambda: self._filter._sync.rotate(*self._args, **self._kwargs))
        return self

    def _rotation(self) -> _SyncRotation:
        if self._sync is None:
            raise InvalidArgument("the rotation has not begun (use `async with f.rotate(...)` or await begin())")
        return self._sync

    async def add(self, item: Item) -> None:
        await self._run(self._rotation().add, item)

    async def add_many(self, items: Iterable[Item]) -> None:
        await self._run(self._rotation().add_many, items)

    async def commit(self) -> None:
        await self._run(self._rotation().commit)

    async def abort(self) -> None:
        await self._run(self._rotation().abort)

    async def __aenter__(self) -> "Rotation":
        return await self.begin()

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                        tb: Optional[TracebackType]) -> None:
        rot = self._rotation()
        await self._run(rot.__exit__, exc_type, exc, tb)
