"""bloomguard.Client: a pool of connections to one Redis server (bloomguard/client.h)."""
from __future__ import annotations

import threading
import weakref
from types import TracebackType
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Type

from ._call import invoke, run_or_raise
from ._errors import InvalidArgument
from ._events import EventListener, Sink, install
from ._ffi import ffi, lib
from ._filter import Filter, FilterKind
from ._handle import Handle
from ._lock import Lock, LockOwner
from ._options import ClientOptions, Seconds, build_options
from ._policy import Policy

__all__ = ["Client"]

if TYPE_CHECKING:  # pragma: no cover - typing_extensions is the type checker's, not a dependency
    from typing_extensions import Unpack

_track_lock = threading.Lock()  # Client._track


class Client:
    """Connection pools to one Redis server or a Redis Cluster, safe to share between threads.

    ``url`` is ``redis://[user[:password]@]host[:port][/db]`` or ``unix:///path.sock[?db=N]``;
    for a cluster, any one node, or several seeds ``redis://[user[:password]@]h1:p1,h2:p2,...``
    (``cluster``: ``"auto"`` (default: ask the first reachable host), True (require a cluster) or
    False (one server as is)). In a cluster every call goes to the master serving its filter's
    or lock's hash slot, following MOVED / ASK and waiting out TRYAGAIN / CLUSTERDOWN within its
    timeout.
    Keyword options (durations in seconds): ``connect_timeout``, ``command_timeout``,
    ``pool_size``, ``db``, ``config_retries``, ``write_lock_wait`` (seconds a query waits while its
    filter is write-locked by an in-place rebuild before raising :class:`~bloomguard.Locked`, which a
    policy can answer; 0.1), ``tracking`` (bool, default True: where hiredis >= 1.0 and Redis >= 6
    allow it, a query whose filter config and write lock were already checked on its connection
    sends only BITFIELD_RO until the server pushes an invalidation of either key; False: every
    query sends the full check), ``pipeline`` (bool, default True: threads sharing this client share
    a few multiplexed connections per server, their commands written together; False: a pooled
    connection per call), ``pipeline_conns`` (int, default 2), ``pipeline_spin_us`` (int, default 0:
    a waiting call sleeps at once; N: it spins, yielding, up to N microseconds first), ``cluster``, ``wait_replicas`` (int, default 0: off; N: every add,
    lock acquire / release and rotation commit is followed by ``WAIT N`` and raises
    :class:`~bloomguard.Timeout` when fewer replicas acknowledged it within ``wait_timeout``
    seconds, default 1), ``username``, ``password``, ``client_name``, ``sentinel_username``,
    ``sentinel_password`` (for a ``redis-sentinel://[[user:]password@]host1[:port1][,...][/db]#MASTER``
    URL, whose userinfo is the data nodes' credentials: the sentinels' own), and TLS (``rediss://``
    / ``rediss-sentinel://`` URLs, or any of these): ``tls_ca_file``, ``tls_ca_dir`` (the CAs to
    trust; default the system's: ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``, else each Linux
    distribution's usual bundle, none found raising :class:`~bloomguard.TlsError`), ``tls_cert_file`` + ``tls_key_file`` (a client certificate),
    ``tls_server_name`` (the name the server's certificate must be for; default the URL's host),
    ``tls_verify`` (default True; False checks nothing). A refused certificate raises
    :class:`~bloomguard.TlsError`.
    Observability (docs/observability.md): ``histograms`` (bool, default True: every filter keeps
    latency histograms, :meth:`Filter.histogram`), ``degraded_events_per_s`` (int, default 1: at
    most this many "degraded" events per filter a second); events go to the logger "bloomguard"
    and to :meth:`on_event` listeners.
    Opening checks the URL (:class:`~bloomguard.BadURL`), the options, the TLS files and that
    credentials are complete, and connects nothing: the first call that needs the server connects
    (within its timeout), so a client opened while Redis is down works once it is back, its calls
    meanwhile answered by the filter's policy. ``connect_at_open=True`` reaches the server at open
    instead, so a wrong address or password raises here (:class:`~bloomguard.ConnectionError`,
    :class:`~bloomguard.AuthError`, :class:`~bloomguard.TlsError`).

    Use it as a context manager or call :meth:`close`. Filters opened on the client keep the
    underlying pool alive: closing the client while filters are open is safe, and those filters
    keep working until they are closed themselves.
    """

    __slots__ = ("_handle", "_sink", "_filters", "_prune_at", "__weakref__")

    def __init__(self, url: str, **options: Unpack[ClientOptions]) -> None:
        if not isinstance(url, str):
            raise TypeError("url must be a str, not %s" % type(url).__name__)
        if "\0" in url:
            raise InvalidArgument("url must not contain NUL characters")
        opts = build_options(dict(options))
        out = ffi.new("bg_client **")
        curl = url.encode("utf-8")
        copts = opts if opts is not None else ffi.NULL
        try:
            # no client yet to carry a failure's message: it is only on the call
            run_or_raise(lambda call: lib.bg_client_open_ex(out, call, curl, copts))
        finally:
            if opts is not None:
                ffi.release(opts)  # the client copied what it needs
        self._handle = Handle(out[0], lib.bg_client_close, "client")
        # events go to the logger "bloomguard" and the listeners (_events.py); the filters opened on
        # it are what bloomguard.otel and bloomguard.prometheus read
        self._sink: Sink = install(out[0])
        # weak references without callbacks (no Python code runs in a finalizer: _handle.py), the
        # dead ones dropped as the list grows
        self._filters: List["weakref.ref[Filter]"] = []
        self._prune_at = 64

    def filter(self, name: str, policy: Optional[Policy] = None, kind: FilterKind = "redisson") -> Filter:
        """The Redisson-compatible Bloom filter ``name`` on this server (no I/O).

        Raises :class:`~bloomguard.BadName` when its keys would land in different cluster slots
        (e.g. ``"a{}b"``). ``policy``: a :class:`~bloomguard.Policy` deciding what queries answer
        when Redis cannot (None: every failure raises). ``kind="native"``: the server's own BF.*
        filter at ``name`` instead (RedisBloom, valkey-bloom; docs/native.md).
        """
        return Filter(self, name, policy=policy, kind=kind)

    def lock(self, name: str, *, lease: Optional[Seconds] = None, renew: Optional[bool] = None,
             subscribe: Optional[bool] = None, poll_max: Optional[Seconds] = None,
             per_thread: bool = False, owner: Optional[LockOwner] = None, lease_ms: Optional[int] = None,
             poll_max_ms: Optional[int] = None) -> Lock:
        """A :class:`~bloomguard.Lock` on the key ``name + ":lock"`` (no I/O): exclusive
        (Redisson RLock-compatible) or reader/writer, with fencing tokens. Options and who holds
        it (``per_thread``, ``owner``): see Lock."""
        return Lock(self, name, lease=lease, renew=renew, subscribe=subscribe, poll_max=poll_max,
                    per_thread=per_thread, owner=owner, lease_ms=lease_ms, poll_max_ms=poll_max_ms)

    def ping(self) -> None:
        """One round trip (PING) on a pooled connection; raises on failure."""
        # the per-call form: a failure raises with this ping's own message, not the client's
        # shared slot (where another thread's failure may have landed meanwhile)
        invoke(self._handle, lib.bg_client_ping_ex, None)

    def on_event(self, listener: EventListener) -> EventListener:
        """Calls ``listener(event)`` for each event of this client and its filters, locks and
        rotations (a :class:`~bloomguard.Event`: a breaker opened, degraded answers, a rotation
        begun / committed / aborted, a failover, a cluster map change, a lost connection or lock),
        on the thread where it happens, possibly several at once. It must return quickly and must
        not call bloomguard (the library may hold a lock of the connection concerned); what it
        raises is dropped. Every event is also logged to ``logging.getLogger("bloomguard")``.
        Returns the listener (usable as a decorator)."""
        self._sink.add(listener)
        return listener

    def remove_event_listener(self, listener: EventListener) -> None:
        """Stops calling a listener given to :meth:`on_event` (no error if it was not)."""
        self._sink.remove(listener)

    def stats(self) -> Dict[str, int]:
        """The client's counters (bg_client_stat): ``connections`` (open now), ``connections_lost``,
        ``tracking_invalidations``, ``cluster_moved``, ``cluster_ask``, ``cluster_busy_retries``,
        ``cluster_map_reloads``, ``cluster_map_changes``, ``failovers``, ``events``."""
        from ._metrics import read_client_stats

        ptr = self._handle.enter()
        try:
            return read_client_stats(ptr)
        finally:
            self._handle.leave()

    def open_filters(self) -> List[Filter]:
        """The filters opened on this client that are still open (what bloomguard.otel and
        bloomguard.prometheus export)."""
        alive = [f for f in (r() for r in list(self._filters)) if f is not None]
        return [f for f in alive if not f.closed]

    def _track(self, f: Filter) -> None:
        """Filter.__init__: f is one of this client's filters."""
        with _track_lock:
            self._filters.append(weakref.ref(f))
            if len(self._filters) >= self._prune_at:
                self._filters[:] = [r for r in self._filters if r() is not None]
                self._prune_at = max(64, 2 * len(self._filters))

    def close(self) -> None:
        """Releases this reference to the pool (idempotent). Open filters keep working."""
        self._handle.close()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._handle.closed

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.close()

    def __repr__(self) -> str:
        return "<bloomguard.Client %s>" % ("closed" if self.closed else "open")
