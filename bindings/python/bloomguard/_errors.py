"""Exceptions: one class per BG_E* status code, all under :class:`BloomGuardError`.

:func:`error_for` is the one place that turns a status code and its message into an exception
(as pygit2's ``check_error``); every other module raises through it.
"""
from __future__ import annotations

import builtins
import re
from typing import Dict, Optional, Tuple, Type

from ._ffi import cstr, ffi, lib

__all__ = [
    "BloomGuardError", "InvalidArgument", "OutOfMemory", "BadURL", "BadName", "BadParams",
    "NotSupported", "ConnectionError", "Timeout", "AuthError", "ServerError", "ProtocolError",
    "NotInitialized", "ConfigChanged", "Corrupt", "WrongType", "Locked", "RotationInProgress",
    "Aborted", "Closed", "Cancelled", "TlsError", "error_for", "status_name", "strerror",
]


def strerror(code: int) -> str:
    """bg_strerror: the static description of a status code."""
    return cstr(lib.bg_strerror(int(code)))


def status_name(code: int) -> str:
    """The macro name of a status code ("BG_ECONN", bg_status_name), or "status <code>" for one
    the library does not know."""
    name = lib.bg_status_name(int(code)) if -2**31 <= code < 2**31 else ffi.NULL
    return "status %d" % code if name == ffi.NULL else cstr(name)


class BloomGuardError(Exception):
    """A bloomguard call failed.

    ``code`` is the C status (a negative BG_E* value), ``message`` the library's message for this
    very call (``bg_call_errmsg``, or the handle's for calls without a per-call object); ``str()``
    falls back to ``bg_strerror(code)`` when the library gave no message.
    """

    #: The BG_E* status this class stands for (None on the base class).
    status: Optional[int] = None

    def __init__(self, message: str = "", code: Optional[int] = None) -> None:
        if code is None:
            code = type(self).status
        self.code: Optional[int] = code
        self.message: str = message
        text = message or (strerror(code) if code is not None else "bloomguard error")
        super().__init__(text)

    @property
    def status_name(self) -> str:
        """The BG_E* name of :attr:`code`."""
        return status_name(self.code) if self.code is not None else "unknown"

    def __reduce__(self) -> Tuple[type, Tuple[str, Optional[int]]]:  # picklable despite the multiple inheritance below
        return (type(self), (self.message, self.code))

    def __repr__(self) -> str:
        return "%s(%r, code=%s)" % (type(self).__name__, self.message, self.status_name)


# --- one class per status code (errors.h). Builtin bases make them catchable the Python way. ---

class InvalidArgument(BloomGuardError, ValueError):
    """BG_EINVAL: an argument or option value the library rejects."""
    status = lib.BG_EINVAL


class OutOfMemory(BloomGuardError, MemoryError):
    """BG_ENOMEM."""
    status = lib.BG_ENOMEM


class BadURL(InvalidArgument):
    """BG_EBADURL: malformed or unsupported server URL."""
    status = lib.BG_EBADURL


class BadName(InvalidArgument):
    """BG_EBADNAME: the filter's keys would land in different cluster slots (e.g. ``a{}b``)."""
    status = lib.BG_EBADNAME


class BadParams(InvalidArgument):
    """BG_EBADPARAMS: expected insertions / false probability rejected, with Redisson's message."""
    status = lib.BG_EBADPARAMS


class NotSupported(BloomGuardError, NotImplementedError):
    """BG_ENOTSUP: unknown option or unsupported feature (e.g. the "locked" rotation strategy
    before the lock engine); also a NotImplementedError."""
    status = lib.BG_ENOTSUP


class ConnectionError(BloomGuardError, builtins.ConnectionError):
    """BG_ECONN: cannot connect, or the connection was lost."""
    status = lib.BG_ECONN


class Timeout(BloomGuardError, builtins.TimeoutError):
    """BG_ETIMEOUT: no answer within the command timeout (or this call's ``timeout=``)."""
    status = lib.BG_ETIMEOUT


class AuthError(BloomGuardError):
    """BG_EAUTH: AUTH, SELECT or an ACL refused."""
    status = lib.BG_EAUTH


class ServerError(BloomGuardError):
    """BG_ESERVER: the server answered an error (OOM, READONLY, LOADING, BUSY, ...)."""
    status = lib.BG_ESERVER


class ProtocolError(BloomGuardError):
    """BG_EPROTO: the server's reply had an unexpected shape."""
    status = lib.BG_EPROTO


class NotInitialized(BloomGuardError):
    """BG_ENOTINIT: the filter has no config hash (never initialized, or deleted)."""
    status = lib.BG_ENOTINIT


class ConfigChanged(BloomGuardError):
    """BG_ECONFIG: the filter's config kept changing during the call (retries exhausted)."""
    status = lib.BG_ECONFIG


class Corrupt(BloomGuardError):
    """BG_ECORRUPT: the config hash holds values that cannot be parsed."""
    status = lib.BG_ECORRUPT


class WrongType(Corrupt):
    """BG_EWRONGTYPE: a key of the filter holds another Redis type."""
    status = lib.BG_EWRONGTYPE


class Locked(BloomGuardError):
    """BG_ELOCKED: a lock is held by another owner and the wait was exceeded (the message names
    the holder and its lease), or the calling thread's hold was lost (its lease ran out); also the
    filter's write lock during a "locked" rotation."""
    status = lib.BG_ELOCKED


class RotationInProgress(BloomGuardError):
    """BG_EROTATING: another rotation of this filter is in progress."""
    status = lib.BG_EROTATING


class Aborted(BloomGuardError):
    """BG_EABORTED: a user callback asked to abort (a rotation progress callback returned True)."""
    status = lib.BG_EABORTED


class Closed(BloomGuardError):
    """BG_ECLOSED: the handle was closed (or its client is gone)."""
    status = lib.BG_ECLOSED


class TlsError(BloomGuardError):
    """BG_ETLS: the TLS handshake failed (the server's certificate refused: unknown CA, expired,
    another name; a client certificate required), or a certificate or key file cannot be used."""
    status = lib.BG_ETLS


class Cancelled(BloomGuardError):
    """BG_ECANCELED: a wait inside the library was cancelled (bg_call_cancel). A Ctrl-C during a
    wait raises KeyboardInterrupt instead (the wait is cancelled for it)."""
    status = lib.BG_ECANCELED


class Full(BloomGuardError):
    """BG_EFULL: a native NONSCALING filter is full: the items from the first refused one on were
    not added (the message names its index)."""
    status = lib.BG_EFULL


_BY_CODE: Dict[int, Type[BloomGuardError]] = {}
for _cls in list(globals().values()):
    if isinstance(_cls, type) and issubclass(_cls, BloomGuardError) and _cls.status is not None:
        if _cls.status in _BY_CODE:  # pragma: no cover - a programming error
            raise RuntimeError("two exception classes for %s" % status_name(_cls.status))
        _BY_CODE[_cls.status] = _cls
del _cls


_C_OPTION = re.compile(r"\bBG_OPT_[A-Z0-9_]+\b")
_python_names: Optional[Dict[str, str]] = None


def in_python_words(message: str) -> str:
    """The library's message as a Python user reads it: an option named by its C macro
    (``BG_OPT_TLS_CA_FILE``) is named by its keyword (``tls_ca_file``)."""
    if "BG_OPT_" not in message:
        return message
    global _python_names
    if _python_names is None:
        from ._options import LOCK_OPTIONS, OPTIONS, ROTATE_OPTIONS  # they import this module

        by_value = {value: name for table in (LOCK_OPTIONS, ROTATE_OPTIONS, OPTIONS)
                    for name, (value, _) in table.items()}
        _python_names = {macro: by_value[getattr(lib, macro)] for macro in dir(lib)
                         if macro.startswith("BG_OPT_") and getattr(lib, macro) in by_value}
    names = _python_names
    return _C_OPTION.sub(lambda m: names.get(m.group(0), m.group(0)), message)


def error_for(code: int, message: str = "") -> BloomGuardError:
    """The exception for a failed status code: its class from the BG_E* table, carrying the code
    and the library's message (in Python's words: :func:`in_python_words`). Unknown (future)
    codes give a plain BloomGuardError."""
    cls = _BY_CODE.get(code, BloomGuardError)
    return cls(in_python_words(message), code)
