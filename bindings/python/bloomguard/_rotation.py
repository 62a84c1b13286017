"""bloomguard.Rotation: rebuilding a live filter while queries and adds keep running
(bloomguard/rotation.h). Made by :meth:`Filter.rotate <bloomguard.Filter.rotate>`::

    with f.rotate(10_000_000, 0.01) as rot:        # begins: takes the rotation lease
        for rows in read_source_of_truth():        # read it AFTER rotate() returned
            rot.add_many(rows)                     # hashed on all cores, in memory (swap)
    # the block ended normally: committed (uploaded, then one atomic swap); had it raised,
    # the rotation would have been aborted (staging keys removed) and the exception propagated

The progress callback is the C library's ``bg_progress_fn``, implemented with cffi's
``extern "Python"`` (``bgpy_progress``): the C call runs with the GIL released and the callback
takes it back for the Python function. An exception raised by the callback is kept, the rotation
is aborted (the callback returns non-zero to C) and, once the C call has returned, the very same
exception object is raised to the caller, as pygit2 does for its callbacks.
"""
from __future__ import annotations

import threading
from types import TracebackType
from typing import Any, Callable, Dict, Iterable, Literal, NamedTuple, Optional, Type

from ._call import run_or_raise, run_with_call
from ._errors import Closed, InvalidArgument, error_for, strerror
from ._ffi import cstr, ffi, lib
from ._handle import Handle
from ._items import Item, as_buffer, chunks

__all__ = ["Rotation", "RotationStats", "ProgressFn", "Strategy", "STRATEGIES", "PHASES", "ROTATE_CHUNK"]

#: progress(phase, items, bytes_done, bytes_total) -> None/False to go on, True to stop.
ProgressFn = Callable[[str, int, int, int], Optional[bool]]

#: A rotation strategy's name (a test keeps it in step with STRATEGIES).
Strategy = Literal["swap", "naive", "locked"]

#: strategy name -> BG_ROTATE_* (the library decides what it supports: "locked" is BG_ENOTSUP
#: until the lock engine lands).
STRATEGIES: Dict[str, int] = {
    "swap": lib.BG_ROTATE_SWAP,
    "naive": lib.BG_ROTATE_NAIVE,
    "locked": lib.BG_ROTATE_LOCKED,
}

#: BG_PHASE_* -> the phase name given to the progress callback.
PHASES: Dict[int, str] = {
    lib.BG_PHASE_BUILDING: "building",
    lib.BG_PHASE_UPLOADING: "uploading",
    lib.BG_PHASE_COMMITTING: "committing",
    lib.BG_PHASE_DONE: "done",
}

#: Items per bg_rotation_add_many call in Rotation.add_many. The library hashes one call on up to
#: one thread per 8,192 items (BG_OPT_ROTATE_THREADS at most), so a call must be large for every
#: core to work; 1,048,576 items keep up to 128 threads busy while bounding the joined copy.
ROTATE_CHUNK = 1 << 20


class RotationStats(NamedTuple):
    """Figures of a rotation so far (final ones once it is over)."""

    #: items added to the rotation
    items: int
    #: bytes of the next generation uploaded to the staging key (swap)
    bytes_uploaded: int
    #: seconds since the rotation began
    elapsed: float


class _Progress:
    """The Python side of one rotation's progress callback: the user's function and the exception
    it raised (kept until the C call returns). Referenced by the ffi handle given to C as userdata;
    it holds no reference back to the Rotation, so no cycle keeps either alive."""

    __slots__ = ("fn", "error")

    def __init__(self, fn: ProgressFn) -> None:
        self.fn = fn
        self.error: Optional[BaseException] = None

    def __call__(self, phase: int, items: int, bytes_done: int, bytes_total: int) -> int:
        if self.error is not None:  # already failed: keep asking C to stop
            return 1
        try:
            result = self.fn(PHASES.get(phase, "phase %d" % phase), int(items), int(bytes_done), int(bytes_total))
            if result is None or result is False:
                return 0
            if result is True:
                return 1
            raise TypeError("a rotation progress callback must return None, False (go on) or True (stop), "
                            "not %s" % type(result).__name__)
        except BaseException as exc:  # KeyboardInterrupt too: it must reach the caller, not be lost in C
            self.error = exc
            return 1


def _on_progress(userdata: Any, phase: int, items: int, bytes_done: int, bytes_total: int) -> int:
    """bgpy_progress: called by the library on the thread that called add_many/commit, with the
    GIL taken back by cffi."""
    progress: _Progress = ffi.from_handle(userdata)
    return progress(phase, items, bytes_done, bytes_total)


# error=1: should anything escape _on_progress itself, the rotation stops rather than going on.
ffi.def_extern(name="bgpy_progress", error=1)(_on_progress)


def _strategy_code(strategy: str) -> int:
    if not isinstance(strategy, str):
        raise TypeError("strategy must be a str (%s), not %s"
                        % (", ".join(repr(s) for s in STRATEGIES), type(strategy).__name__))
    try:
        return STRATEGIES[strategy]
    except KeyError:
        raise InvalidArgument("unknown rotation strategy %r (known: %s)"
                              % (strategy, ", ".join(repr(s) for s in STRATEGIES))) from None


class Rotation:
    """One rotation of a filter, from :meth:`Filter.rotate <bloomguard.Filter.rotate>` (which has
    already begun it: the lease is held).

    Feed it with :meth:`add` / :meth:`add_many`, then :meth:`commit` (or :meth:`abort`). As a
    context manager it commits when the block ends normally and aborts when the block raises (the
    exception then propagates unchanged). A failing commit raises the mapped exception
    (:class:`~bloomguard.RotationInProgress` when the lease was lost, :class:`~bloomguard.Aborted`
    when the progress callback returned True, the callback's own exception when it raised, ...);
    the live filter is then untouched and the staging keys removed.

    A rotation is driven by one thread at a time: calls from several threads are serialized, and
    calling it from its own progress callback raises RuntimeError (which aborts it). The filter,
    and other filters and clients, stay usable from any thread meanwhile: items added through
    bloomguard while a swap rotation runs are in the next generation too.
    """

    __slots__ = ("_handle", "_name", "_strategy", "_expected", "_fpp", "_progress",
                 "_userdata", "_lock", "_driver", "_state", "_final", "__weakref__")

    def __init__(self, filter_handle: Handle, name: str, expected: int, fpp: float, strategy: str,
                 progress: Optional[ProgressFn], options: Optional[Any], wait_ms: int = 0) -> None:
        """Begins the rotation (bg_rotation_begin); use :meth:`Filter.rotate` rather than this.
        ``options``: a bg_options with the BG_OPT_ROTATE_* values; ``wait_ms``: the value of its
        BG_OPT_ROTATE_WAIT_MS (one wait in the library: Ctrl-C cancels it, see bloomguard._call)."""
        code = _strategy_code(strategy)
        if progress is not None and not callable(progress):
            raise TypeError("progress must be a callable (or None), not %s" % type(progress).__name__)
        self._name = name
        self._strategy = strategy
        self._expected = expected
        self._fpp = fpp
        self._lock = threading.Lock()
        self._driver: Optional[int] = None
        self._state = "active"
        self._final: Optional[RotationStats] = None
        self._progress = _Progress(progress) if progress is not None else None
        self._userdata = ffi.new_handle(self._progress) if self._progress is not None else None

        # The bg_filter and the progress userdata must outlive the bg_rotation: the rotation's Handle
        # keeps them (no Python code in its finalizer; see _handle), and a close of the filter
        # meanwhile leaves the native filter to be freed after the rotation.
        fptr = filter_handle.pin()

        out = ffi.new("bg_rotation **")
        handle: Optional[Handle] = None
        try:
            copts = options if options is not None else ffi.NULL
            # the whole wait (BG_OPT_ROTATE_WAIT_MS) in one call, the GIL released: a signal
            # handler that raises (Ctrl-C) cancels it through the call's interrupt callback
            # a failure raises with this begin's own message, from its call: the filter's slot is
            # shared with every thread using the filter (another begin may fail meanwhile)
            run_or_raise(lambda call: lib.bg_rotation_begin_ex(out, call, fptr, expected, fpp, code, copts))
            handle = Handle(out[0], lib.bg_rotation_free, "rotation",  # aborts first if still active
                            keep=(fptr, self._userdata), pinned=(filter_handle,))
            if self._userdata is not None:
                st = lib.bg_rotation_set_progress(out[0], lib.bgpy_progress, self._userdata)
                if st != lib.BG_OK:  # pragma: no cover - only for a NULL rotation
                    raise error_for(st, "bg_rotation_set_progress: %s" % strerror(st))
        except BaseException:
            # also for a KeyboardInterrupt landing between the begin and here: never leave a begun
            # rotation (its lease renewed by a background thread) without an owner
            if handle is not None:
                handle.close()
            else:
                if out[0] != ffi.NULL:
                    lib.bg_rotation_free(out[0])
                filter_handle.unpin()
            raise
        assert handle is not None
        self._handle: Handle = handle

    # --- properties ---------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The name of the filter being rotated."""
        return self._name

    @property
    def strategy(self) -> str:
        """"swap" or "naive"."""
        return self._strategy

    @property
    def expected(self) -> int:
        """Expected insertions of the next generation."""
        return self._expected

    @property
    def fpp(self) -> float:
        """False probability of the next generation."""
        return self._fpp

    @property
    def state(self) -> str:
        """"active", "committed", "aborted" or "failed" (a commit failed, or a progress callback
        stopped the rotation)."""
        return self._state

    @property
    def stats(self) -> RotationStats:
        """Items added, bytes uploaded and seconds elapsed (bg_rotation_stats); frozen once over.

        From another thread while a call is running, waits for that call to return; from the
        progress callback, reads the figures as they are at that moment."""
        if self._final is not None:
            return self._final
        own = self._driver == threading.get_ident()  # inside our own progress callback
        if not own:
            self._lock.acquire()
        try:
            if self._final is not None:
                return self._final
            return self._read_stats()
        finally:
            if not own:
                self._lock.release()

    @property
    def items(self) -> int:
        """Items added so far (``stats.items``)."""
        return self.stats.items

    @property
    def bytes_uploaded(self) -> int:
        """Bytes of the next generation uploaded so far (``stats.bytes_uploaded``; 0 for naive)."""
        return self.stats.bytes_uploaded

    @property
    def elapsed(self) -> float:
        """Seconds since the rotation began, up to its end (``stats.elapsed``)."""
        return self.stats.elapsed

    # --- operations ---------------------------------------------------------------------------

    def add(self, item: Item) -> None:
        """Adds one item to the next generation (swap: in memory, no I/O; naive: one round trip)."""
        buf = as_buffer(item)
        self._run("add", lib.bg_rotation_add, ffi.from_buffer(buf), len(buf))

    def add_many(self, items: Iterable[Item]) -> int:
        """Adds every item to the next generation; returns how many items it took.

        The items go to the library in one C call (of up to 1,048,576 items: larger iterables
        are consumed in such batches), which hashes them on all cores (``threads=`` of
        :meth:`Filter.rotate`) with the GIL released; naive sends them in round trips of
        ``batch=`` items."""
        total = 0
        self._acquire("add_many")
        try:
            for batch in chunks(items, ROTATE_CHUNK):
                self._call(lib.bg_rotation_add_many, batch.ptrs, batch.lens, batch.n)
                total += batch.n
        finally:
            self._release()
        return total

    def commit(self) -> None:
        """Uploads the next generation and swaps it in atomically (swap), or finishes (naive).

        The rotation is over afterwards, whether this succeeded or raised. An exception raised by
        the progress callback in the "done" phase (after the swap) is raised here too; the
        rotation is committed all the same (``state == "committed"``)."""
        self._acquire("commit")
        try:
            try:
                # with a call: Ctrl-C cancels a "locked" commit's wait for the write lock
                self._call(lambda p: run_with_call(lambda call: lib.bg_rotation_commit_ex(p, call)))
                self._state = "committed"
            except BaseException:
                if self._state == "active":
                    self._state = "failed"
                raise
            finally:
                self._finish()
            self._raise_stored()  # the "done" phase is reported after the swap; C ignores its answer
        finally:
            self._release()

    def abort(self) -> None:
        """Gives up: the staging keys are removed at once and the lease released; the live filter
        is untouched (swap). Idempotent; does nothing once the rotation is over."""
        self._acquire("abort")
        try:
            if self._handle.closed:
                return
            try:
                ptr = self._handle.enter()
                try:
                    st = lib.bg_rotation_abort(ptr)
                    if st != lib.BG_OK:
                        raise error_for(st, cstr(lib.bg_rotation_errmsg(ptr)))
                finally:
                    self._handle.leave()
            finally:
                if self._state == "active":
                    self._state = "aborted"
                self._finish()
        finally:
            self._release()

    # --- context manager ----------------------------------------------------------------------

    def __enter__(self) -> "Rotation":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        if self._handle.closed:  # committed or aborted inside the block
            return
        if exc is None:
            self.commit()
            return
        try:
            self.abort()
        except BaseException as abort_exc:  # the block's exception is the one that matters
            note = getattr(exc, "add_note", None)
            if note is not None:
                note("bloomguard: aborting the rotation of %r failed too (%r); its staging keys expire on "
                     "their own TTL" % (self._name, abort_exc))

    def __repr__(self) -> str:
        return "<bloomguard.Rotation %r %s to (%d, %r) %s>" % (
            self._name, self._strategy, self._expected, self._fpp, self._state)

    # --- internals ----------------------------------------------------------------------------

    def _acquire(self, what: str) -> None:
        if self._driver == threading.get_ident():
            raise RuntimeError("Rotation.%s called from the rotation's own progress callback" % what)
        self._lock.acquire()
        self._driver = threading.get_ident()

    def _release(self) -> None:
        self._driver = None
        self._lock.release()

    def _run(self, what: str, fn: Callable[..., int], *args: Any) -> None:
        self._acquire(what)
        try:
            self._call(fn, *args)
        finally:
            self._release()

    def _call(self, fn: Callable[..., int], *args: Any) -> None:
        """fn(rotation, *args) with the GIL released; the callback's exception, else the mapped
        one. Called with the driver lock held."""
        if self._handle.closed:
            raise Closed("the rotation of %r is over (%s)" % (self._name, self._state))
        ptr = self._handle.enter()
        try:
            if self._progress is not None:
                self._progress.error = None
            st = fn(ptr, *args)
            if st != lib.BG_OK:
                if st == lib.BG_EABORTED and self._state == "active":
                    self._state = "failed"  # the library has ended the rotation (staging keys removed)
                self._raise_stored()
                raise error_for(st, cstr(lib.bg_rotation_errmsg(ptr)))
        finally:
            self._handle.leave()

    def _raise_stored(self) -> None:
        progress = self._progress
        if progress is not None and progress.error is not None:
            exc, progress.error = progress.error, None
            raise exc

    def _read_stats(self) -> RotationStats:
        ptr = self._handle.enter()
        try:
            out = ffi.new("uint64_t[3]")
            st = lib.bg_rotation_stats(ptr, out, out + 1, out + 2)
            if st != lib.BG_OK:  # pragma: no cover - only for a NULL rotation
                raise error_for(st, "bg_rotation_stats: %s" % strerror(st))
            return RotationStats(int(out[0]), int(out[1]), int(out[2]) / 1e6)
        finally:
            self._handle.leave()

    def _finish(self) -> None:
        """The rotation is over: keep its final figures, free it (and its in-memory bitmap) now."""
        if self._handle.closed:
            return
        try:
            self._final = self._read_stats()
        finally:
            self._handle.close()
