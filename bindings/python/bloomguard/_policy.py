"""bloomguard.Policy: what a filter answers when Redis cannot (bloomguard/policy.h).

A thin, immutable wrapper of a ``bg_policy``: the engine (chains, retries, circuit breaker, token
bucket, snapshot) is the C library's; this module only maps readable names to the BG_* values and
reads every value back from the C object (so the defaults shown are the library's own)::

    policy = bloomguard.Policy(
        on_connection=["retry", "snapshot", "callback", "assume_present"],
        on_notinit=["callback", "assume_present"],
        fallback=lambda items: [db.exists(i) for i in items],
        retry_count=3, breaker_threshold=5, callback_rate=100)
    f = client.filter("products", policy=policy)

Names are the C names in lower case without their prefix: failure classes ``notinit``, ``config``,
``locked``, ``connection``, ``timeout``, ``server``, ``corrupt``, ``other`` (BG_FAIL_*); actions
``retry``, ``snapshot``, ``callback``, ``assume_present``, ``assume_absent``, ``error`` (BG_ACT_*);
settings ``retry_count`` ... ``snapshot_chunk_bytes`` (BG_POLICY_*), those the library keeps in
milliseconds (``BG_POLICY_*_MS``) named without the suffix and given in seconds.
"""
from __future__ import annotations

import numbers
from typing import Any, Dict, Iterable, Optional, Tuple, Union

from ._errors import InvalidArgument, error_for, strerror
from ._fallback import C_FALLBACK, Fallback, FallbackFn
from ._ffi import ffi, lib
from ._options import Seconds, seconds_to_ms, take_ms_alias

__all__ = ["Policy", "ACTIONS", "FAILURE_CLASSES", "SETTINGS", "DURATIONS", "Chain"]


def _names(prefix: str) -> Dict[str, int]:
    """{lower-case name without prefix: value} of the compiled module's macros with that prefix, in
    the order of their values (the headers' order)."""
    found = sorted((getattr(lib, name), name) for name in dir(lib) if name.startswith(prefix))
    return {name[len(prefix):].lower(): value for value, name in found}


#: action name -> BG_ACT_*
ACTIONS: Dict[str, int] = _names("BG_ACT_")
#: failure class name -> BG_FAIL_*
FAILURE_CLASSES: Dict[str, int] = _names("BG_FAIL_")
#: setting name -> BG_POLICY_* (BG_POLICY_MAX_CHAIN is a limit, not a setting); a duration
#: (BG_POLICY_*_MS) is named without its unit and given in seconds
SETTINGS: Dict[str, int] = {k[:-3] if k.endswith("_ms") else k: v
                            for k, v in _names("BG_POLICY_").items() if k != "max_chain"}
#: the settings given in seconds (milliseconds in C)
DURATIONS = frozenset(k[:-3] for k in _names("BG_POLICY_") if k.endswith("_ms"))
_ACTION_NAMES = {v: k for k, v in ACTIONS.items()}

#: A chain: one action name, or a sequence of them tried in order.
Chain = Union[str, Iterable[str]]


def _chain_codes(cls: str, chain: Chain) -> Tuple[int, ...]:
    names = [chain] if isinstance(chain, str) else list(chain)
    codes = []
    for name in names:
        if not isinstance(name, str):
            raise TypeError("on_%s: actions are names (%s), not %s"
                            % (cls, ", ".join(ACTIONS), type(name).__name__))
        if name not in ACTIONS:
            raise InvalidArgument("on_%s: unknown action %r (known: %s)" % (cls, name, ", ".join(ACTIONS)))
        codes.append(ACTIONS[name])
    return tuple(codes)


def _policy_range(option: int, st: int, seconds: bool) -> str:
    """"; must be LO..HI" (seconds for a duration) from the library's own table (bg_policy_bounds)
    for an out-of-range value."""
    if st != lib.BG_EINVAL:
        return ""
    lo, hi = ffi.new("int64_t *"), ffi.new("int64_t *")
    if lib.bg_policy_bounds(option, lo, hi) != lib.BG_OK:  # pragma: no cover - every setting has one
        return ""
    off = " (or 0: never)" if option == lib.BG_POLICY_SNAPSHOT_INTERVAL_MS else ""
    if seconds:
        return "; must be %g..%g seconds%s" % (lo[0] / 1000.0, hi[0] / 1000.0, off)
    return "; must be %d..%d%s" % (lo[0], hi[0], off)


class Policy:
    """A degrade policy: per failure class a chain of actions, numeric settings, and an optional
    fallback. Immutable; :meth:`replace` makes a changed copy. A filter takes a copy of it
    (``client.filter(name, policy=p)`` or ``f.policy = p``), so one Policy can serve many filters.

    Chains (keyword ``on_<class>``, a name or a list of names): see the module docstring. Actions:
    ``"retry"`` (``retry_count`` attempts with a jittered exponential backoff), ``"snapshot"`` (the
    filter's local copy, :meth:`Filter.snapshot <bloomguard.Filter.snapshot>`), ``"callback"`` (the
    fallback, rate-limited by a token bucket), ``"assume_present"`` (fail-open),
    ``"assume_absent"`` (fail-closed), ``"error"`` (raise). Unset classes keep the library's
    defaults: retry then assume present, ``other`` raises.

    Settings (None keeps the library's default; durations in seconds, the rest ints):
    ``retry_count``, ``backoff_base``, ``backoff_max``, ``jitter_pct``, ``breaker_threshold``
    (0: no breaker), ``breaker_cooldown``, ``callback_rate`` (per second, 0: unlimited),
    ``callback_burst``, ``snapshot_interval`` (background refresh, 0: never),
    ``snapshot_max_age`` (0: any age), ``snapshot_chunk_bytes``. Out-of-range values raise
    :class:`~bloomguard.InvalidArgument`. The ``*_ms`` names (milliseconds) of the durations are
    deprecated aliases.

    ``fallback(items: list[bytes]) -> sequence of bools | None`` is called on the thread making
    the query, with the GIL held, for the whole batch that failed (up to 16,384 items per call):
    return one answer per item (truthy: present), or None to decline (the chain goes on). An
    exception it raises is raised by the query (the chain goes on in C meanwhile; its answer is
    discarded). It should not query the same filter.
    """

    __slots__ = ("_ptr", "_fallback", "_chains", "_settings")

    def __init__(self, *, on_notinit: Optional[Chain] = None, on_config: Optional[Chain] = None,
                 on_locked: Optional[Chain] = None, on_connection: Optional[Chain] = None,
                 on_timeout: Optional[Chain] = None, on_server: Optional[Chain] = None,
                 on_corrupt: Optional[Chain] = None, on_other: Optional[Chain] = None,
                 fallback: Optional[FallbackFn] = None,
                 retry_count: Optional[int] = None, backoff_base: Optional[Seconds] = None,
                 backoff_max: Optional[Seconds] = None, jitter_pct: Optional[int] = None,
                 breaker_threshold: Optional[int] = None, breaker_cooldown: Optional[Seconds] = None,
                 callback_rate: Optional[int] = None, callback_burst: Optional[int] = None,
                 snapshot_interval: Optional[Seconds] = None, snapshot_max_age: Optional[Seconds] = None,
                 snapshot_chunk_bytes: Optional[int] = None, backoff_base_ms: Optional[int] = None,
                 backoff_max_ms: Optional[int] = None, breaker_cooldown_ms: Optional[int] = None,
                 snapshot_interval_ms: Optional[int] = None,
                 snapshot_max_age_ms: Optional[int] = None) -> None:
        out = ffi.new("bg_policy **")
        st = lib.bg_policy_new(out)
        if st != lib.BG_OK:
            raise error_for(st, "bg_policy_new: %s" % strerror(st))
        self._ptr = ffi.gc(out[0], lib.bg_policy_free)
        given = locals()
        for cls, code in FAILURE_CLASSES.items():
            chain = given["on_" + cls]
            if chain is not None:
                codes = _chain_codes(cls, chain)
                arr = ffi.new("int[]", list(codes) or [0])
                st = lib.bg_policy_set_chain(self._ptr, code, arr, len(codes))
                if st != lib.BG_OK:
                    raise error_for(st, "on_%s=%r: %s (1 to %d actions)"
                                    % (cls, chain, strerror(st), lib.BG_POLICY_MAX_CHAIN))
        for name, option in SETTINGS.items():
            value = given[name]
            if name in DURATIONS:
                value = take_ms_alias(value, given[name + "_ms"], name, name + "_ms")
                if value is None:
                    continue
                number = seconds_to_ms(value, name)
            elif value is None:
                continue
            elif isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise TypeError("%s must be an int, not %s" % (name, type(value).__name__))
            else:
                number = int(value)
            if not -(2**63) <= number < 2**63:
                raise InvalidArgument("%s=%r is out of range" % (name, value))
            st = lib.bg_policy_set_int(self._ptr, option, number)
            if st != lib.BG_OK:
                raise error_for(st, "%s=%r: %s%s" % (name, value, strerror(st),
                                                      _policy_range(option, st, name in DURATIONS)))
        self._fallback = Fallback(fallback) if fallback is not None else None
        if self._fallback is not None:
            st = lib.bg_policy_set_fallback(self._ptr, C_FALLBACK, self._fallback.userdata)
            if st != lib.BG_OK:  # pragma: no cover - only for a NULL policy
                raise error_for(st, "bg_policy_set_fallback: %s" % strerror(st))
        self._chains = {cls: self._read_chain(code) for cls, code in FAILURE_CLASSES.items()}
        self._settings = {name: self._read_int(option) / 1000.0 if name in DURATIONS else self._read_int(option)
                          for name, option in SETTINGS.items()}

    def _read_chain(self, code: int) -> Tuple[str, ...]:
        arr = ffi.new("int[]", lib.BG_POLICY_MAX_CHAIN)
        n = ffi.new("size_t *")
        st = lib.bg_policy_get_chain(self._ptr, code, arr, lib.BG_POLICY_MAX_CHAIN, n)
        if st != lib.BG_OK:  # pragma: no cover
            raise error_for(st, "bg_policy_get_chain: %s" % strerror(st))
        return tuple(_ACTION_NAMES.get(arr[i], "action %d" % arr[i]) for i in range(n[0]))

    def _read_int(self, option: int) -> int:
        out = ffi.new("int64_t *")
        st = lib.bg_policy_get_int(self._ptr, option, out)
        if st != lib.BG_OK:  # pragma: no cover
            raise error_for(st, "bg_policy_get_int: %s" % strerror(st))
        return int(out[0])

    # --- reading back -------------------------------------------------------------------------

    @property
    def chains(self) -> Dict[str, Tuple[str, ...]]:
        """{failure class: its chain of action names}, as the library holds them."""
        return dict(self._chains)

    def chain(self, failure_class: str) -> Tuple[str, ...]:
        """The chain of one failure class (``"connection"``, ``"notinit"``, ...)."""
        try:
            return self._chains[failure_class]
        except KeyError:
            raise InvalidArgument("unknown failure class %r (known: %s)"
                                  % (failure_class, ", ".join(FAILURE_CLASSES))) from None

    @property
    def settings(self) -> Dict[str, float]:
        """{setting: value} of every numeric setting, as the library holds them (durations in
        seconds, the others ints)."""
        return dict(self._settings)

    @property
    def fallback(self) -> Optional[FallbackFn]:
        """The fallback function, or None."""
        return self._fallback.fn if self._fallback is not None else None

    def replace(self, **changes: Any) -> "Policy":
        """A new Policy with these keyword arguments changed (same names as the constructor)."""
        kwargs: Dict[str, Any] = {"on_" + cls: chain for cls, chain in self._chains.items()}
        kwargs.update(self._settings)
        kwargs["fallback"] = self.fallback
        aliases = {d + "_ms" for d in DURATIONS}
        unknown = set(changes) - set(kwargs) - aliases
        if unknown:
            raise TypeError("unknown Policy argument%s: %s" % ("s" if len(unknown) > 1 else "",
                                                                ", ".join(sorted(unknown))))
        for alias in aliases & set(changes):
            kwargs[alias[:-3]] = None  # the deprecated alias replaces the kept value
        kwargs.update(changes)
        return Policy(**kwargs)

    @property
    def _c(self) -> Any:
        """The bg_policy (for bg_filter_set_policy)."""
        return self._ptr

    def __repr__(self) -> str:
        chains = ", ".join("on_%s=%s" % (cls, list(chain)) for cls, chain in self._chains.items())
        return "bloomguard.Policy(%s, fallback=%r, %s)" % (
            chains, self.fallback, ", ".join("%s=%g" % kv for kv in self._settings.items()))
