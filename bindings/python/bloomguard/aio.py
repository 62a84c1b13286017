"""bloomguard.aio: the asyncio API - operations that hold no thread.

::

    import bloomguard.aio

    async with bloomguard.aio.connect("redis://127.0.0.1:6379", command_timeout=0.5) as client:
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

Every public method of the blocking :class:`bloomguard.Client`, :class:`bloomguard.Filter`,
:class:`bloomguard.Rotation` and :class:`bloomguard.Lock` has a twin here (awaited where it makes a
round trip), or a one-line reason in :data:`NOT_TWINNED`.
"""
from __future__ import annotations

import asyncio
import itertools
import numbers
from types import TracebackType
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Dict, Generator, Iterable, List, Optional, Tuple, Type, Union

from ._answer import Answer, Answers
from ._call import TimeoutArg, source_name, take_callback_error
from ._client import Client as _SyncClient
from ._events import EventListener
from ._errors import Closed, InvalidArgument, error_for
from ._ffi import cstr, ffi, lib
from ._filter import Filter as _SyncFilter
from ._filter import FilterInfo, FilterKind, check_expansion
from ._handle import Handle
from ._items import Batch, Item, as_buffer
from ._lock import Hold, LockMode, LockOwner
from ._lock import Lock as _SyncLock
from ._options import ClientOptions, RotateOptions, Seconds, seconds_to_ms
from ._policy import Policy
from ._rotation import ProgressFn, RotationStats, Strategy
from ._rotation import Rotation as _SyncRotation

if TYPE_CHECKING:  # pragma: no cover - typing_extensions is the type checker's, not a dependency
    from typing_extensions import Unpack

__all__ = ["connect", "Client", "Filter", "Rotation", "Lock", "NOT_TWINNED"]

#: Public members of the blocking classes without an asyncio twin, each with the reason
#: (tests/python/test_aio_parity.py fails on a member that has neither).
NOT_TWINNED: Dict[str, str] = {
    "Client.__enter__": "an aio client is an async context manager (async with)",
    "Client.__exit__": "an aio client is an async context manager (async with)",
    "Filter.__enter__": "an aio filter is an async context manager (async with)",
    "Filter.__exit__": "an aio filter is an async context manager (async with)",
    "Filter.__contains__": "the in operator cannot await: use await f.contains(item)",
    "Filter.client": "the aio filter's client is the aio Client that opened it (its .sync is the blocking one)",
    "Rotation.__enter__": "an aio rotation is an async context manager (async with)",
    "Rotation.__exit__": "an aio rotation is an async context manager (async with)",
    "Lock.__enter__": "an aio lock is an async context manager (async with)",
    "Lock.__exit__": "an aio lock is an async context manager (async with)",
    "Lock.client": "the aio lock's client is the aio Client that opened it (its .sync is the blocking one)",
    "Filter.native_info": "BF.INFO's details have no queue completion: await asyncio.to_thread(f.sync.native_info)",
}

_BATCH = 256  # completions taken per poll

# What a completion means, by operation (the value the future is given).
_CONTAINS1, _CONTAINS_MANY, _QUERY1, _QUERY_MANY, _ADD1, _ADD_MANY, _NUMBER, _BOOL, _INFO = range(9)

_NOT_NEGATIVE = (0, 2**63 - 1)


class _Connecting:
    """What :func:`connect` returns: ``await`` it for the :class:`Client`, or use it as ``async
    with connect(url) as client:`` (closed at the end of the block)."""

    __slots__ = ("_url", "_options", "_client")

    def __init__(self, url: str, options: Dict[str, Any]) -> None:
        self._url = url
        self._options = options
        self._client: Optional[Client] = None

    async def _open(self) -> "Client":
        loop = asyncio.get_running_loop()
        if self._options.get("connect_at_open"):
            sync = await loop.run_in_executor(None, lambda: _SyncClient(self._url, **self._options))
        else:
            sync = _SyncClient(self._url, **self._options)
        try:
            return Client._on_loop(sync, loop)
        except BaseException:
            sync.close()
            raise

    def __await__(self) -> Generator[Any, None, "Client"]:
        return self._open().__await__()

    async def __aenter__(self) -> "Client":
        self._client = await self._open()
        return self._client

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                        tb: Optional[TracebackType]) -> None:
        if self._client is not None:
            await self._client.close()


def connect(url: str, **options: Unpack[ClientOptions]) -> _Connecting:
    """Opens a client for the running loop: ``url`` and ``options`` as :class:`bloomguard.Client`
    takes them. ``client = await connect(url)``, or ``async with connect(url) as client:``.
    Opening checks the URL and the options at once; it connects nothing unless
    ``connect_at_open=True``, whose check of the server runs in the loop's default executor."""
    return _Connecting(url, dict(options))


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

    def __init__(self, url: str, **options: Unpack[ClientOptions]) -> None:
        """A client for the running loop (as :func:`connect`, which also checks the server first
        when given ``connect_at_open=True``; this constructor cannot wait, so it refuses that)."""
        if options.get("connect_at_open"):
            raise InvalidArgument("connect_at_open=True waits for the server: use `await bloomguard.aio.connect(url, "
                                  "connect_at_open=True)`")
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError("a bloomguard.aio.Client is made on a running event loop (inside a coroutine); "
                               "use `await bloomguard.aio.connect(url)` there") from None
        sync = _SyncClient(url, **options)
        try:
            self._attach(sync, loop)
        except BaseException:
            sync.close()
            raise

    @classmethod
    def _on_loop(cls, sync: _SyncClient, loop: asyncio.AbstractEventLoop) -> "Client":
        self = cls.__new__(cls)
        self._attach(sync, loop)
        return self

    def _attach(self, sync: _SyncClient, loop: asyncio.AbstractEventLoop) -> None:
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
        source = source_name(self._source[i])
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

    def filter(self, name: str, policy: Optional[Policy] = None, kind: FilterKind = "redisson") -> "Filter":
        """The filter ``name`` on this client (no I/O); ``policy`` and ``kind`` (``"native"``: the
        server's BF.* filter) as for the blocking API."""
        if self._closed:
            raise Closed("the client is closed")
        return Filter(self, _SyncFilter(self._sync, name, policy=policy, kind=kind))

    def lock(self, name: str, *, lease: Optional[Seconds] = None, renew: Optional[bool] = None,
             subscribe: Optional[bool] = None, poll_max: Optional[Seconds] = None,
             owner: Optional[LockOwner] = None, lease_ms: Optional[int] = None,
             poll_max_ms: Optional[int] = None) -> "Lock":
        """An awaited :class:`Lock` on ``name + ":lock"`` (no I/O), as the blocking
        :meth:`bloomguard.Client.lock` (its holder is the Lock object or ``owner``: a hold may be
        released from any task)."""
        if self._closed:
            raise Closed("the client is closed")
        return Lock(self, self._sync.lock(name, lease=lease, renew=renew, subscribe=subscribe, poll_max=poll_max,
                                          owner=owner, lease_ms=lease_ms, poll_max_ms=poll_max_ms))

    async def ping(self) -> None:
        """One round trip (PING), in the loop's default executor; raises on failure."""
        await _in_executor(self._sync.ping)

    def on_event(self, listener: EventListener) -> EventListener:
        """As :meth:`bloomguard.Client.on_event`: ``listener(event)`` on the thread where the event
        happens (often the loop's own, inside a poll); it must return quickly."""
        return self._sync.on_event(listener)

    def remove_event_listener(self, listener: EventListener) -> None:
        """Stops calling a listener given to :meth:`on_event`."""
        self._sync.remove_event_listener(listener)

    def stats(self) -> Dict[str, int]:
        """The client's counters (no I/O), as :meth:`bloomguard.Client.stats`."""
        return self._sync.stats()

    def open_filters(self) -> List[_SyncFilter]:
        """The blocking filters open on this client, the aio filters' included (their ``.sync``)."""
        return self._sync.open_filters()

    @property
    def sync(self) -> _SyncClient:
        """The blocking :class:`bloomguard.Client` underneath (the same connections' pools, for
        code that runs in threads)."""
        return self._sync

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
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
        """The client itself; closed at the end of the block."""
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                        tb: Optional[TracebackType]) -> None:
        """Closes the client (:meth:`close`)."""
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
        """Made by :meth:`Client.filter`."""
        self._client = client
        self._sync = sync
        self._f = sync._handle.pin()

    @property
    def name(self) -> str:
        """The filter's name (its bitmap's key)."""
        return self._sync.name

    @property
    def sync(self) -> _SyncFilter:
        """The blocking :class:`bloomguard.Filter` underneath (its policy, stats, snapshot)."""
        return self._sync

    @property
    def kind(self) -> str:
        """``"native"`` or ``"redisson"``, as the blocking filter's."""
        return self._sync.kind

    @property
    def policy(self) -> Optional[Policy]:
        """The degrade policy (None: every failure raises); settable, as on the blocking filter."""
        return self._sync.policy

    @policy.setter
    def policy(self, value: Optional[Policy]) -> None:
        self._sync.policy = value

    def stats(self) -> Dict[str, int]:
        """The handle's counters (no I/O), as :meth:`bloomguard.Filter.stats`."""
        return self._sync.stats()

    def histogram(self, operation: str, outcome: str = "ok") -> Any:
        """A latency histogram of this handle (no I/O), as :meth:`bloomguard.Filter.histogram`."""
        return self._sync.histogram(operation, outcome)

    @property
    def breaker_state(self) -> str:
        """The policy's circuit breaker, as on the blocking filter (no I/O)."""
        return self._sync.breaker_state

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._f is None

    async def node(self) -> Tuple[str, int]:
        """The ``"host:port"`` serving the filter and its hash slot (in the loop's default executor:
        a client that connected nothing yet finds the server first)."""
        got: Tuple[str, int] = await _in_executor(self._sync.node)
        return got

    async def snapshot(self, *, timeout: TimeoutArg = None) -> None:
        """Downloads the policy's local snapshot now (in the loop's default executor: a download of
        the whole bitmap is work for a thread), as :meth:`bloomguard.Filter.snapshot`."""
        await _in_executor(lambda: self._sync.snapshot(timeout=timeout))

    def lock(self, *, lease: Optional[Seconds] = None, renew: Optional[bool] = None,
             subscribe: Optional[bool] = None, poll_max: Optional[Seconds] = None,
             owner: Optional[LockOwner] = None, lease_ms: Optional[int] = None,
             poll_max_ms: Optional[int] = None) -> "Lock":
        """The filter's write lock (``"{NAME}:lock"``, the one a LOCKED rotation takes), awaited:
        as the blocking :meth:`bloomguard.Filter.lock`."""
        return Lock(self._client, self._sync.lock(lease=lease, renew=renew, subscribe=subscribe,
                                                  poll_max=poll_max, owner=owner, lease_ms=lease_ms,
                                                  poll_max_ms=poll_max_ms))

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

    async def init(self, expected: int, fpp: float, *, partitions: int = 0, expansion: Optional[int] = None,
                   timeout: TimeoutArg = None) -> bool:
        """Redisson's ``tryInit``: True if this call created the config (``partitions=P``: a
        partitioned filter; a native filter's ``expansion``: as the blocking ``Filter.init``)."""
        n = _int(expected, "expected", (-(2**63), 2**63 - 1))
        if isinstance(fpp, bool) or not isinstance(fpp, numbers.Real):
            raise TypeError("fpp must be a float, not %s" % type(fpp).__name__)
        parts = _int(partitions, "partitions", (-(2**63), 2**63 - 1))
        f, q = self._ptr(), self._client._q
        if self._sync.kind == "native" and not parts:
            exp = check_expansion(expansion)
            made: bool = await self._submit(
                _BOOL, 0, timeout,
                lambda call, tag: lib.bg_filter_init_native_submit_ex(f, call, q, tag, n, float(fpp), exp), f)
            return made
        if expansion is not None:
            raise InvalidArgument("expansion is for a native filter (client.filter(name, kind=\"native\"))")
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
        if self._sync.kind == "native":
            got = FilterInfo(*got, partitions=0, kind="native")
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

    async def persist(self, *, timeout: TimeoutArg = None) -> bool:
        """Removes the keys' time to live; True if one was removed."""
        f, q = self._ptr(), self._client._q
        got: bool = await self._submit(_BOOL, 0, timeout,
                                       lambda call, tag: lib.bg_filter_persist_submit_ex(f, call, q, tag), f)
        return got

    def rotate(self, expected: int, fpp: float, *, strategy: Strategy = "swap",
               progress: Optional[ProgressFn] = None, **options: Unpack[RotateOptions]) -> "Rotation":
        """A live rebuild (as the blocking :meth:`bloomguard.Filter.rotate`), awaited:
        ``async with f.rotate(n, p) as rot: await rot.add_many(items)`` commits on success and
        aborts on an error. Its steps run in the loop's default executor."""
        return Rotation(self, expected, fpp, strategy, progress, dict(options))

    async def __aenter__(self) -> "Filter":
        """The filter itself; closed at the end of the block."""
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                        tb: Optional[TracebackType]) -> None:
        """Closes the filter (operations in flight still complete)."""
        self.close()


async def _in_executor(fn: Callable[..., Any], *args: Any) -> Any:
    """fn(*args) in the running loop's default executor: a blocking call the loop must not wait for."""
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


class Rotation:
    """A rebuild of a live filter whose begin, adds, commit and abort are awaited (each runs in
    the loop's default executor: the blocking :class:`bloomguard.Rotation` underneath)."""

    def __init__(self, f: Filter, expected: int, fpp: float, strategy: str, progress: Optional[ProgressFn],
                 options: Dict[str, Any]) -> None:
        """Made by :meth:`Filter.rotate`."""
        self._filter = f
        self._args = (expected, fpp)
        self._strategy = strategy
        self._kwargs = dict(options, strategy=strategy, progress=progress)
        self._sync: Optional[_SyncRotation] = None

    async def begin(self) -> "Rotation":
        """Takes the rotation's lease (waits for another rotation as the options say)."""
        self._sync = await _in_executor(lambda: self._filter._sync.rotate(*self._args, **self._kwargs))
        return self

    def _rotation(self) -> _SyncRotation:
        if self._sync is None:
            raise InvalidArgument("the rotation has not begun (use `async with f.rotate(...)` or await begin())")
        return self._sync

    @property
    def sync(self) -> Optional[_SyncRotation]:
        """The blocking :class:`bloomguard.Rotation` underneath (None before :meth:`begin`)."""
        return self._sync

    @property
    def name(self) -> str:
        """The name of the filter being rotated."""
        return self._filter.name

    @property
    def strategy(self) -> str:
        """The strategy asked for (``"swap"``, ``"locked"`` or ``"naive"``)."""
        return self._strategy

    @property
    def expected(self) -> int:
        """Expected insertions of the next generation."""
        return int(self._args[0])

    @property
    def fpp(self) -> float:
        """False probability of the next generation."""
        return float(self._args[1])

    @property
    def state(self) -> str:
        """``"pending"`` before :meth:`begin`, then the blocking rotation's (``"active"``,
        ``"committed"``, ``"aborted"``, ``"failed"``)."""
        return "pending" if self._sync is None else self._sync.state

    @property
    def stats(self) -> RotationStats:
        """Items added, bytes uploaded and seconds elapsed (after :meth:`begin`)."""
        return self._rotation().stats

    @property
    def items(self) -> int:
        """Items added so far."""
        return self._rotation().items

    @property
    def bytes_uploaded(self) -> int:
        """Bytes of the next generation uploaded so far."""
        return self._rotation().bytes_uploaded

    @property
    def elapsed(self) -> float:
        """Seconds since the rotation began, up to its end."""
        return self._rotation().elapsed

    async def add(self, item: Item) -> None:
        """Adds one item to the next generation."""
        await _in_executor(self._rotation().add, item)

    async def add_many(self, items: Iterable[Item]) -> int:
        """Adds every item to the next generation; returns how many items it took."""
        got: int = await _in_executor(self._rotation().add_many, items)
        return got

    async def commit(self) -> None:
        """Uploads the next generation and swaps it in (as the blocking ``commit``)."""
        await _in_executor(self._rotation().commit)

    async def abort(self) -> None:
        """Gives up; the live filter is untouched (idempotent)."""
        await _in_executor(self._rotation().abort)

    async def __aenter__(self) -> "Rotation":
        """Begins the rotation."""
        return await self.begin()

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                        tb: Optional[TracebackType]) -> None:
        """Commits when the block ended normally, aborts otherwise."""
        rot = self._rotation()
        await _in_executor(rot.__exit__, exc_type, exc, tb)


class _Holding:
    """``async with lock.hold(...) as token``: acquires on entry, releases on exit."""

    __slots__ = ("_lock", "_mode", "_wait")

    def __init__(self, lock: "Lock", mode: LockMode, wait: Seconds) -> None:
        self._lock = lock
        self._mode = mode
        self._wait = wait

    async def __aenter__(self) -> int:
        return await self._lock.acquire(self._mode, wait=self._wait)

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                        tb: Optional[TracebackType]) -> None:
        holding = self._lock._sync.hold(self._mode, wait=self._wait)  # the blocking exit's rules
        await _in_executor(holding.__exit__, exc_type, exc, tb)


class Lock:
    """A distributed lock whose acquire, release and retire are awaited (each in the loop's
    default executor: the blocking :class:`bloomguard.Lock` underneath, whose holder is the Lock
    object or its ``owner`` - not a thread - so a hold taken in one task may be released in
    another). ``async with client.lock(name) as lock: async with lock.write(wait=5) as token:``."""

    __slots__ = ("_client", "_sync")

    def __init__(self, client: Client, sync: _SyncLock) -> None:
        """Made by :meth:`Client.lock` and :meth:`Filter.lock`."""
        self._client = client
        self._sync = sync

    @property
    def sync(self) -> _SyncLock:
        """The blocking :class:`bloomguard.Lock` underneath."""
        return self._sync

    @property
    def name(self) -> str:
        """The name given (the key is ``name + ":lock"``)."""
        return self._sync.name

    @property
    def key(self) -> str:
        """The lock's Redis key: ``name + ":lock"``."""
        return self._sync.key

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._sync.closed

    @property
    def per_thread(self) -> bool:
        """Always False here: an aio lock's holder is the Lock object or its owner."""
        return self._sync.per_thread

    @property
    def owner(self) -> Optional[LockOwner]:
        """The holder of this Lock's holds."""
        return self._sync.owner

    @property
    def holder_id(self) -> str:
        """The holder id ``"<UUID>:<seq>"`` (the hash field while it holds)."""
        return self._sync.holder_id

    async def acquire(self, mode: LockMode = "exclusive", *, wait: Seconds = 0) -> int:
        """Acquires in ``mode`` waiting up to ``wait`` seconds; returns the fencing token (as the
        blocking :meth:`bloomguard.Lock.acquire`)."""
        got: int = await _in_executor(lambda: self._sync.acquire(mode, wait=wait))
        return got

    async def release(self) -> None:
        """Releases one acquire of the holder (as the blocking ``release``)."""
        await _in_executor(self._sync.release)

    async def retire(self) -> bool:
        """Retires the lock's name when nobody holds it (as the blocking ``retire``)."""
        got: bool = await _in_executor(self._sync.retire)
        return got

    def held(self) -> Hold:
        """What the holder holds through this Lock (no round trip)."""
        return self._sync.held()

    def hold(self, mode: LockMode = "exclusive", *, wait: Seconds = 0) -> _Holding:
        """``async with lock.hold("write", wait=5) as token:`` acquires on entry, releases on exit."""
        self._sync.hold(mode, wait=wait)  # checks the mode now, as the blocking one does
        return _Holding(self, mode, wait)

    def exclusive(self, *, wait: Seconds = 0) -> _Holding:
        """``hold("exclusive", wait=wait)``."""
        return _Holding(self, "exclusive", wait)

    def read(self, *, wait: Seconds = 0) -> _Holding:
        """``hold("read", wait=wait)``."""
        return _Holding(self, "read", wait)

    def write(self, *, wait: Seconds = 0) -> _Holding:
        """``hold("write", wait=wait)``."""
        return _Holding(self, "write", wait)

    async def close(self) -> None:
        """Releases every hold still held through this Lock and frees it (idempotent)."""
        await _in_executor(self._sync.close)

    async def __aenter__(self) -> "Lock":
        """The lock itself; closed at the end of the block."""
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                        tb: Optional[TracebackType]) -> None:
        """Closes the lock (releasing what it holds)."""
        await self.close()
