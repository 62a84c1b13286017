"""bloomguard.Filter: a Bloom filter stored in Redis exactly as Redisson's RBloomFilter stores it
(bloomguard/filter.h). Every network method takes an optional ``timeout=`` (seconds) for that
call alone; None uses the client's ``command_timeout``.
"""
from __future__ import annotations

import numbers
from types import TracebackType
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Literal, NamedTuple, Optional, Tuple, Type, Union

from ._answer import Answer, Answers
from ._call import TimeoutArg, invoke, invoke_answer, run_or_raise, source_name
from ._errors import BadParams, InvalidArgument
from ._ffi import ffi, lib
from ._handle import Handle
from ._items import Batch, Item, chunks
from ._options import ROTATE_OPTIONS, Seconds, build_options, seconds_to_ms, take_ms_alias
from ._policy import Policy
from ._rotation import ProgressFn, Rotation, Strategy
from ._stats import BREAKER_STATES, read_stat, read_stats

if TYPE_CHECKING:  # pragma: no cover
    from datetime import timedelta

    from ._metrics import Histogram

    from ._client import Client
    from ._lock import Lock

__all__ = ["Filter", "FilterInfo", "FilterKind", "NativeInfo"]

_INT64 = (-(2**63), 2**63 - 1)


class _Config(NamedTuple):
    size: int
    hash_iterations: int
    #: 0 when the config hash lacks the field (only size and hashIterations are required)
    expected_insertions: int
    #: 0.0 when the config hash lacks the field
    false_probability: float


class FilterInfo(_Config):
    """The filter's config hash as Redisson writes it: a tuple of its four fields, and
    ``partitions``, a partitioned filter's number of partitions (``size`` is then their total; 0
    for Redisson's layout), and ``kind``: ``"redisson"``, ``"partitioned"`` or ``"native"`` -
    attributes beside the tuple, so unpacking, slicing and comparing the four stay as they were.
    A native filter's (docs/native.md): ``size`` is 8 x the bytes the server reports,
    ``expected_insertions`` its capacity, ``hash_iterations`` and ``false_probability`` 0 (the
    server does not say); :meth:`Filter.native_info` has the rest."""

    partitions: int
    kind: str

    def __new__(cls, size: int, hash_iterations: int, expected_insertions: int, false_probability: float,
                partitions: int = 0, kind: str = "") -> "FilterInfo":
        self = super().__new__(cls, size, hash_iterations, expected_insertions, false_probability)
        self.partitions = partitions
        self.kind = kind or ("partitioned" if partitions else "redisson")
        return self

    def __repr__(self) -> str:
        return ("FilterInfo(size=%d, hash_iterations=%d, expected_insertions=%d, false_probability=%r, partitions=%d, "
                "kind=%r)" % (self.size, self.hash_iterations, self.expected_insertions, self.false_probability,
                              self.partitions, self.kind))


class NativeInfo(NamedTuple):
    """BF.INFO of a native filter: capacity of all its links, the server's bytes for it, its links,
    the items inserted, and its expansion (0: NONSCALING)."""
    capacity: int
    bytes: int
    filters: int
    items: int
    expansion: int


#: A filter's layout: Redisson's (bitmap + config hash) or the server's own BF.* type.
FilterKind = Literal["redisson", "native"]
KINDS = ("redisson", "native")


def check_kind(kind: Any) -> bool:
    """True for "native", False for "redisson"; anything else raises."""
    if kind not in KINDS:
        raise InvalidArgument("kind must be \"redisson\" (Redisson's layout, the default) or \"native\" (the "
                              "server's BF.* filter), not %r" % (kind,))
    return bool(kind == "native")


def check_expansion(expansion: Optional[int]) -> int:
    """The C argument of init's expansion: None -1 (the server's default), 0 NONSCALING, else n."""
    if expansion is None:
        return -1
    if isinstance(expansion, bool) or not isinstance(expansion, numbers.Integral):
        raise TypeError("expansion must be an int or None, not %s" % type(expansion).__name__)
    if not 0 <= expansion <= 32768:
        raise BadParams("expansion must be 0 (NONSCALING) .. 32768 or None (the server's default), not %d" % expansion)
    return int(expansion)


def _int64(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError("%s must be an int, not %s" % (what, type(value).__name__))
    number = int(value)
    if not _INT64[0] <= number <= _INT64[1]:
        raise InvalidArgument("%s=%d does not fit in a signed 64-bit integer" % (what, number))
    return number


class Filter:
    """A Bloom filter named ``name`` on a :class:`Client` (``client.filter(name)``).

    Items are ``bytes``, ``bytearray``, ``memoryview`` (raw bytes, as Redisson's ByteArrayCodec)
    or ``str`` (UTF-8, as its StringCodec). A filter may be shared between threads; close it with
    :meth:`close` or a ``with`` block. It keeps its client's connection pool alive.

    With a :class:`~bloomguard.Policy` (``client.filter(name, policy=p)`` or ``f.policy = p``),
    a query that Redis cannot answer is answered by the policy's chain (retry, snapshot, fallback,
    assume present/absent) instead of raising; :meth:`query` / :meth:`query_many` say where each
    answer came from, :meth:`stats` counts them. Adds are only retried, never assumed.
    """

    __slots__ = ("_handle", "_name", "_client", "_policy", "_retired_policy", "_native", "__weakref__")

    def __init__(self, client: "Client", name: Union[str, bytes], policy: Optional[Policy] = None,
                 kind: FilterKind = "redisson") -> None:
        self._native = check_kind(kind)
        if policy is not None and not isinstance(policy, Policy):
            raise TypeError("policy must be a bloomguard.Policy (or None), not %s" % type(policy).__name__)
        self._policy: Optional[Policy] = None
        self._retired_policy: Optional[Policy] = None
        if isinstance(name, str):
            raw = name.encode("utf-8")
        elif isinstance(name, bytes):
            raw = name
        else:
            raise TypeError("filter name must be a str, not %s" % type(name).__name__)
        if b"\0" in raw:
            raise InvalidArgument("filter name must not contain NUL characters")
        chandle = getattr(client, "_handle", None)
        if not isinstance(chandle, Handle) or chandle.kind != "client":
            raise TypeError("client must be a bloomguard.Client, not %s" % type(client).__name__)
        cptr = chandle.enter()
        try:
            out = ffi.new("bg_filter **")
            # the message on this call, not on the client other threads share
            opener = lib.bg_filter_open_native_ex if self._native else lib.bg_filter_open_ex
            run_or_raise(lambda call: opener(out, call, cptr, raw))
            self._handle = Handle(out[0], lib.bg_filter_close, "filter")
        finally:
            chandle.leave()
        self._name = name if isinstance(name, str) else raw.decode("utf-8", "replace")
        self._client = client
        client._track(self)  # what bloomguard.otel / bloomguard.prometheus read
        if policy is not None:
            try:
                self.policy = policy
            except BaseException:
                self._handle.close()
                raise

    # --- properties ---------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The filter's name: the bitmap key (the config hash is ``{name}:config``)."""
        return self._name

    @property
    def kind(self) -> str:
        """``"native"`` for a filter opened with ``kind="native"`` (the server's BF.* key), else
        ``"redisson"`` (Redisson's layout, or a partitioned filter)."""
        return "native" if self._native else "redisson"

    @property
    def client(self) -> "Client":
        """The client this filter was opened on."""
        return self._client

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._handle.closed

    # --- operations ---------------------------------------------------------------------------

    def init(self, expected: int, fpp: float, *, partitions: int = 0, expansion: Optional[int] = None,
             timeout: TimeoutArg = None) -> bool:
        """Redisson's ``tryInit(expected, fpp)``: writes the config if the filter has none.

        Returns True if this call created it, False if a config already existed (that one is kept
        and used). Rejected parameters raise :class:`~bloomguard.BadParams` with Redisson's message.

        ``partitions=P`` (1..16384) makes a partitioned filter instead (docs/layout.md): P bitmaps
        spread over the cluster's slots, any total size; Redisson cannot read it. A P out of range
        raises :class:`~bloomguard.InvalidArgument`; partitions too few or too many for the size
        raise :class:`~bloomguard.BadParams` saying how many fit.

        A native filter (``kind="native"``): ``BF.RESERVE name fpp expected`` with ``expansion``
        (None: the server's default; 0: NONSCALING; else EXPANSION n); False when one is there
        (kept). A first link larger than the client's ``native_max_bytes`` raises
        :class:`~bloomguard.BadParams` before anything is sent.
        """
        n = _int64(expected, "expected")
        if isinstance(fpp, bool) or not isinstance(fpp, numbers.Real):
            raise TypeError("fpp must be a float, not %s" % type(fpp).__name__)
        parts = _int64(partitions, "partitions")
        created = ffi.new("int *")
        if self._native and not parts:
            invoke(self._handle, lib.bg_filter_init_native_ex, timeout, n, float(fpp), check_expansion(expansion),
                   created)
            return bool(created[0])
        if expansion is not None:
            raise InvalidArgument("expansion is for a native filter (client.filter(name, kind=\"native\"))")
        invoke(self._handle, lib.bg_filter_init_partitioned_ex, timeout, n, float(fpp), parts, created)
        return bool(created[0])

    def add(self, item: Item, *, timeout: TimeoutArg = None) -> bool:
        """Adds one item; True if at least one of its bits was newly set (probably new)."""
        batch = Batch.one(item)
        added = ffi.new("size_t *")
        invoke(self._handle, lib.bg_filter_add_many_ex, timeout, batch.ptrs, batch.lens, 1, added)
        return bool(added[0] > 0)

    def add_many(self, items: Iterable[Item], *, timeout: TimeoutArg = None) -> int:
        """Adds every item (one round trip per 16,384); returns how many set a new bit."""
        total = 0
        added = ffi.new("size_t *")
        for batch in chunks(items):
            invoke(self._handle, lib.bg_filter_add_many_ex, timeout, batch.ptrs, batch.lens, batch.n, added)
            total += added[0]
        return total

    def contains(self, item: Item, *, timeout: TimeoutArg = None) -> bool:
        """True if the item may have been added (Bloom: false positives possible, no false negatives)."""
        batch = Batch.one(item)
        present = ffi.new("uint8_t[1]")
        invoke(self._handle, lib.bg_filter_contains_many_ex, timeout, batch.ptrs, batch.lens, 1, present)
        return bool(present[0])

    def __contains__(self, item: Item) -> bool:
        return self.contains(item)

    def contains_many(self, items: Iterable[Item], *, timeout: TimeoutArg = None) -> List[bool]:
        """:meth:`contains` for every item, in order, in one round trip per 16,384 items."""
        result: List[bool] = []
        for batch in chunks(items):
            present = ffi.new("uint8_t[]", batch.n)
            invoke(self._handle, lib.bg_filter_contains_many_ex, timeout, batch.ptrs, batch.lens, batch.n,
                   present)
            result.extend(map(bool, ffi.unpack(present, batch.n)))
        return result

    def query(self, item: Item, *, timeout: TimeoutArg = None) -> Answer:
        """:meth:`contains` with provenance: ``Answer(present, source, failure, error)``, ``source``
        one of ``"redis"``, ``"snapshot"``, ``"callback"``, ``"assumed_present"``,
        ``"assumed_absent"``; for a degraded answer ``failure`` is the message of the failure it
        stands in for and ``error`` that failure as the exception it would have raised (e.g.
        :class:`~bloomguard.Locked`), else "" and None."""
        batch = Batch.one(item)
        present = ffi.new("uint8_t[1]")
        source, failure, error = invoke_answer(self._handle, lib.bg_filter_contains_many_ex, timeout, batch.ptrs,
                                               batch.lens, 1, present)
        return Answer(bool(present[0]), source_name(source), failure, error)

    def query_many(self, items: Iterable[Item], *, timeout: TimeoutArg = None) -> Answers:
        """:meth:`contains_many` with provenance: ``Answers(present, source, failure)``."""
        result: List[bool] = []
        source, failure, error = lib.BG_SOURCE_REDIS, "", None
        for batch in chunks(items):
            present = ffi.new("uint8_t[]", batch.n)
            src, msg, err = invoke_answer(self._handle, lib.bg_filter_contains_many_ex, timeout, batch.ptrs,
                                          batch.lens, batch.n, present)
            if source == lib.BG_SOURCE_REDIS and src != lib.BG_SOURCE_REDIS:
                source, failure, error = src, msg, err
            result.extend(map(bool, ffi.unpack(present, batch.n)))
        return Answers(result, source_name(source), failure, error)

    # --- degrade policy -----------------------------------------------------------------------

    @property
    def policy(self) -> Optional[Policy]:
        """The :class:`~bloomguard.Policy` given to this filter, or None (plain statuses: every
        failure raises). Setting it gives the filter a copy (set it again after changes), resets
        the circuit breaker and the token bucket, keeps the counters and the snapshot, and starts
        or stops the background snapshot refresh. Calls already running keep the policy they
        started with."""
        return self._policy

    @policy.setter
    def policy(self, policy: Optional[Policy]) -> None:
        if policy is not None and not isinstance(policy, Policy):
            raise TypeError("policy must be a bloomguard.Policy (or None), not %s" % type(policy).__name__)
        ptr = self._handle.enter()
        try:
            cpolicy = policy._c if policy is not None else ffi.NULL
            # its call's own message: the filter's shared slot may hold another thread's failure
            run_or_raise(lambda call: lib.bg_filter_set_policy_ex(ptr, call, cpolicy))
            # Queries that started with the previous policy keep using it in C: keep its fallback
            # registered until the next replacement (one that outlives even that declines, see _fallback).
            self._retired_policy, self._policy = self._policy, policy
        finally:
            self._handle.leave()

    def snapshot(self, *, timeout: TimeoutArg = None) -> None:
        """Downloads the filter's bitmap and config into the local snapshot now (the ``"snapshot"``
        action answers from it), with or without a policy. Consistent: a rebuild or rotation
        during the download makes it start over (:class:`~bloomguard.ConfigChanged` after 3
        attempts, :class:`~bloomguard.RotationInProgress` while a rotation runs); the snapshot
        held before is kept when it fails. Memory: size / 8 bytes."""
        invoke(self._handle, lib.bg_filter_snapshot_refresh_ex, timeout)

    def stats(self) -> Dict[str, int]:
        """The handle's counters (BG_STAT_*) by name: ``queries``, ``answers_redis``,
        ``answers_snapshot``, ``answers_callback``, ``answers_assumed_present``,
        ``answers_assumed_absent``, ``query_errors``, ``adds``, ``add_errors``, ``retries``,
        ``breaker_state`` (0 closed, 1 open, 2 half open), ``breaker_trips``, ``breaker_rejected``,
        ``breaker_probes``, ``callback_calls``, ``callback_refused``, ``callback_declined``,
        ``rotations``, ``snapshot_refreshes``, ``snapshot_failures``, ``snapshot_age_ms`` (-1:
        none), ``snapshot_bytes``, ``tracked_reads`` (query round trips that sent only
        BITFIELD_RO - a native filter's: BF.MEXISTS - the client's ``tracking``), ``tracked_stale`` (of those, answers dropped for
        an invalidation and asked again with the full check), ``cluster_moved``, ``cluster_ask``,
        ``cluster_busy_retries``, ``cluster_map_reloads`` (the client's Redis Cluster redirects
        followed, TRYAGAIN / CLUSTERDOWN / LOADING answers waited out, slot map reloads; 0
        standalone), ``fail_notinit`` ... ``fail_other`` (failed attempts by class).
        Counted with or without a policy since the handle was opened; no round trip."""
        ptr = self._handle.enter()
        try:
            return read_stats(ptr)
        finally:
            self._handle.leave()

    def histogram(self, operation: str, outcome: str = "ok") -> "Histogram":
        """The latency histogram of this handle's ``operation`` (``"contains"``, ``"add"``,
        ``"init"``, ``"count"``, ``"info"``, ``"delete"``, ``"expire"``, ``"persist"``,
        ``"rotate_swap"``, ``"rotate_naive"``, ``"rotate_locked"``) that ended with ``outcome``
        (``"ok"``, or a failure: ``"timeout"``, ``"connection"``, ..., ``"cancelled"``, ``"aborted"``):
        bounds (seconds), bucket counts, count and sum, kept by the C library (bloomguard/observe.h)."""
        from ._metrics import read_histogram

        ptr = self._handle.enter()
        try:
            return read_histogram(ptr, operation, outcome)
        finally:
            self._handle.leave()

    @property
    def breaker_state(self) -> str:
        """The circuit breaker now: ``"closed"``, ``"open"`` or ``"half_open"`` (a probe is in flight)."""
        ptr = self._handle.enter()
        try:
            state = read_stat(ptr, lib.BG_STAT_BREAKER_STATE)
        finally:
            self._handle.leave()
        return BREAKER_STATES.get(state, "state %d" % state)

    def count(self, *, timeout: TimeoutArg = None) -> int:
        """Redisson's estimate of the number of items added."""
        out = ffi.new("int64_t *")
        invoke(self._handle, lib.bg_filter_count_ex, timeout, out)
        return int(out[0])

    def info(self, *, timeout: TimeoutArg = None) -> FilterInfo:
        """The config hash: size, hash_iterations, expected_insertions, false_probability, partitions."""
        size = ffi.new("uint64_t *")
        k = ffi.new("uint32_t *")
        n = ffi.new("int64_t *")
        p = ffi.new("double *")
        parts = ffi.new("uint32_t *")
        invoke(self._handle, lib.bg_filter_info_partitioned_ex, timeout, size, k, n, p, parts)
        return FilterInfo(int(size[0]), int(k[0]), int(n[0]), float(p[0]), int(parts[0]),
                          "native" if self._native else "")

    def native_info(self, *, timeout: TimeoutArg = None) -> NativeInfo:
        """BF.INFO of a native filter (:class:`NativeInfo`); InvalidArgument for another kind."""
        out = [ffi.new("int64_t *") for _ in range(5)]
        invoke(self._handle, lib.bg_filter_info_native_ex, timeout, *out)
        return NativeInfo(*(int(o[0]) for o in out))

    def node(self) -> Tuple[str, int]:
        """Where the filter lives: ("host:port" of the master serving its hash slot now, per the
        client's slot map - or of the server, standalone -, the slot). No round trip."""
        buf = ffi.new("char[]", 320)
        slot = ffi.new("int32_t *")
        ptr = self._handle.enter()
        try:
            # its call's own message, not the filter's shared slot (another thread's meanwhile)
            run_or_raise(lambda call: lib.bg_filter_node_ex(ptr, call, buf, 320, slot))
        finally:
            self._handle.leave()
        return ffi.string(buf).decode("utf-8", "replace"), int(slot[0])

    def delete(self, *, timeout: TimeoutArg = None) -> bool:
        """Deletes the bitmap and the config; True if anything existed."""
        out = ffi.new("int *")
        invoke(self._handle, lib.bg_filter_delete_ex, timeout, out)
        return bool(out[0])

    def expire(self, seconds: Union[float, "timedelta"], *, timeout: TimeoutArg = None) -> bool:
        """Sets a time to live (seconds, rounded up to whole ms) on both keys; True if any key changed."""
        ttl_ms = _int64(seconds_to_ms(seconds, "seconds"), "seconds (in ms)")
        out = ffi.new("int *")
        invoke(self._handle, lib.bg_filter_expire_ex, timeout, ttl_ms, out)
        return bool(out[0])

    def persist(self, *, timeout: TimeoutArg = None) -> bool:
        """Removes the time to live from both keys; True if any key had one."""
        out = ffi.new("int *")
        invoke(self._handle, lib.bg_filter_persist_ex, timeout, out)
        return bool(out[0])

    def lock(self, *, lease: Optional[Seconds] = None, renew: Optional[bool] = None,
             subscribe: Optional[bool] = None, poll_max: Optional[Seconds] = None,
             per_thread: bool = False, owner: Any = None, lease_ms: Optional[int] = None,
             poll_max_ms: Optional[int] = None) -> "Lock":
        """The filter's own :class:`~bloomguard.Lock` (key ``"{NAME}:lock"``, in the filter's
        cluster slot; Java shares it as ``redisson.getLock("{NAME}:lock")``). While its holder holds
        it in ``"write"`` mode, this filter's queries in every process wait up to the client's
        ``write_lock_wait`` and then raise :class:`~bloomguard.Locked` (which a policy can
        answer): how the ``"locked"`` rotation rebuilds in place, and how a caller can make
        in-place writes of its own. Exclusive and read holds do not stop queries. Who holds it
        (``per_thread``, ``owner``): see Lock."""
        from ._lock import Lock
        return Lock(self._client, self._name, lease=take_ms_alias(lease, lease_ms, "lease", "lease_ms"),
                    renew=renew, subscribe=subscribe,
                    poll_max=take_ms_alias(poll_max, poll_max_ms, "poll_max", "poll_max_ms"),
                    per_thread=per_thread, owner=owner, _filter=self)

    def rotate(self, expected: int, fpp: float, strategy: Strategy = "swap",
               progress: Optional[ProgressFn] = None, *, lease: Optional[Seconds] = None,
               wait: Optional[Seconds] = None, staging_ttl: Optional[Seconds] = None,
               threads: Optional[int] = None, chunk_bytes: Optional[int] = None,
               batch: Optional[int] = None, nice: Optional[int] = None,
               partitions: Optional[int] = None, lease_ms: Optional[int] = None,
               staging_ttl_ms: Optional[int] = None) -> Rotation:
        """Begins rebuilding this live filter for ``expected`` insertions at ``fpp`` (the same or
        other parameters) and returns the :class:`~bloomguard.Rotation`, best used as a context
        manager: it commits when the block ends normally and aborts when it raises::

            with f.rotate(10_000_000, 0.01) as rot:
                rot.add_many(read_source_of_truth())   # read it after rotate() returned

        ``strategy``: ``"swap"`` (default: built in memory, uploaded to staging keys,
        swapped in one atomic step; readers never see a missing or half-built filter and adds made
        meanwhile through bloomguard are kept) or ``"naive"`` (delete + tryInit + add into the
        live keys: the rebuild that fails in production, for tests and demos) or ``"locked"`` (in
        place under the filter's write lock: no second copy in Redis; readers wait for the lock up
        to the client's ``write_lock_wait``, then raise :class:`~bloomguard.Locked` or get their
        policy's answer).

        ``progress(phase, items, bytes_done, bytes_total)`` is called on the thread driving the
        rotation, during :meth:`Rotation.add_many` (phase ``"building"``, at most every 50 ms) and
        :meth:`Rotation.commit` (``"uploading"`` after every chunk, ``"committing"``, ``"done"``).
        Return None or False to go on, True to stop: the call then raises
        :class:`~bloomguard.Aborted` and the rotation is aborted. An exception raised by the
        callback also aborts it, and that same exception object is raised by the call.

        Options (None: the library's default; durations in seconds): ``lease`` (30), ``wait``
        (how long to wait for another rotation of this filter to end; Ctrl-C cancels the wait and
        raises KeyboardInterrupt, nothing begun; default 0: raise
        :class:`~bloomguard.RotationInProgress` at once), ``staging_ttl`` (300; while the lease is
        held the staging keys get at least the lease, so none expires under a rotation that still
        holds it),
        ``threads`` (hashing threads; the online CPUs - 1, at least 1), ``nice`` (raised nice value
        of the hashing threads, so a rebuild yields the CPU to queries; 10; 0 - 19),
        ``chunk_bytes`` (upload chunk; 1 MiB), ``batch`` (naive: items per round trip; 1000),
        ``partitions`` (a partitioned filter: the new generation's partitions; default as many as
        now; a plain filter raises :class:`~bloomguard.InvalidArgument`). A partitioned filter
        rotates with ``"swap"`` (its generations side by side), ``"locked"`` (in place, one
        partition at a time; the partitions' geometry must stay, else
        :class:`~bloomguard.BadParams`) or ``"naive"``.
        Out-of-range values raise
        :class:`~bloomguard.InvalidArgument`. ``lease_ms`` and ``staging_ttl_ms`` (milliseconds)
        are deprecated aliases of ``lease`` and ``staging_ttl``.

        Raises :class:`~bloomguard.RotationInProgress` when another rotation holds the filter,
        :class:`~bloomguard.BadParams` for parameters Redisson would reject. The commit raises
        :class:`~bloomguard.ServerError` when the staging bitmap is not all there (evicted,
        deleted, or expired after a stall past the lease): the live filter is then unchanged.
        """
        n = _int64(expected, "expected")
        if isinstance(fpp, bool) or not isinstance(fpp, numbers.Real):
            raise TypeError("fpp must be a float, not %s" % type(fpp).__name__)
        given = {"lease": take_ms_alias(lease, lease_ms, "lease", "lease_ms"), "wait": wait,
                 "staging_ttl": take_ms_alias(staging_ttl, staging_ttl_ms, "staging_ttl", "staging_ttl_ms"),
                 "threads": threads,
                 "chunk_bytes": chunk_bytes, "batch": batch, "nice": nice, "partitions": partitions}
        opts = build_options({k: v for k, v in given.items() if v is not None}, ROTATE_OPTIONS)
        wait_ms = seconds_to_ms(wait, "wait") if wait is not None else 0  # in range: build_options checked
        try:
            return Rotation(self._handle, self._name, n, float(fpp), strategy, progress, opts, wait_ms)
        finally:
            if opts is not None:
                ffi.release(opts)  # the rotation copied what it needs

    # --- lifetime -----------------------------------------------------------------------------

    def close(self) -> None:
        """Frees the handle (idempotent); later calls raise :class:`~bloomguard.Closed`."""
        self._handle.close()

    def __enter__(self) -> "Filter":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.close()

    def __repr__(self) -> str:
        return "<bloomguard.Filter %r%s>" % (self._name, " closed" if self.closed else "")
