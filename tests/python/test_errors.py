"""The exception hierarchy: one class per BG_E* status of errors.h, built by one function."""
from __future__ import annotations

import builtins
import pickle
import re

import pytest

import bloomguard
from bloomguard import _errors
from bloomguard._ffi import lib
from conftest import ROOT


def header_status_codes() -> dict:
    text = (ROOT / "include" / "bloomguard" / "errors.h").read_text()
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"#define\s+(BG_E\w+)\s+(-?\d+)", text)}


CODES = header_status_codes()


def test_header_has_the_codes():
    assert len(CODES) >= 19
    assert all(v < 0 for v in CODES.values())


@pytest.mark.parametrize("name", sorted(CODES), ids=sorted(CODES))
def test_one_class_per_status(name):
    code = CODES[name]
    assert getattr(lib, name) == code
    exc = bloomguard.error_for(code, "the message")
    assert type(exc) is not bloomguard.BloomGuardError, "no exception class for %s" % name
    assert isinstance(exc, bloomguard.BloomGuardError)
    assert type(exc).status == code
    assert exc.code == code and exc.message == "the message" and str(exc) == "the message"
    assert exc.status_name == name
    # exported from the package, documented
    assert getattr(bloomguard, type(exc).__name__) is type(exc)
    assert type(exc).__doc__ and name in type(exc).__doc__
    # without a message: bg_strerror's text
    bare = bloomguard.error_for(code)
    assert str(bare) == bloomguard.strerror(code) and str(bare) != "unknown status"


def test_classes_are_distinct():
    classes = {type(bloomguard.error_for(c)) for c in CODES.values()}
    assert len(classes) == len(CODES)


def test_names_required_by_the_bindings():
    for name, code in [("NotInitialized", "BG_ENOTINIT"), ("ConnectionError", "BG_ECONN"),
                       ("Timeout", "BG_ETIMEOUT"), ("RotationInProgress", "BG_EROTATING"),
                       ("Corrupt", "BG_ECORRUPT"), ("InvalidArgument", "BG_EINVAL"),
                       ("BadParams", "BG_EBADPARAMS"), ("Closed", "BG_ECLOSED")]:
        assert getattr(bloomguard, name).status == CODES[code]


def test_python_bases():
    assert issubclass(bloomguard.InvalidArgument, ValueError)
    for cls in (bloomguard.BadParams, bloomguard.BadURL, bloomguard.BadName):
        assert issubclass(cls, bloomguard.InvalidArgument)
    assert issubclass(bloomguard.ConnectionError, builtins.ConnectionError)
    assert issubclass(bloomguard.Timeout, builtins.TimeoutError)
    assert issubclass(bloomguard.OutOfMemory, MemoryError)
    assert issubclass(bloomguard.WrongType, bloomguard.Corrupt)
    assert bloomguard.ConnectionError is not builtins.ConnectionError


def test_oserror_subclasses_keep_message_and_code():
    e = bloomguard.error_for(lib.BG_ECONN, "cannot connect to 127.0.0.1:1")
    assert str(e) == "cannot connect to 127.0.0.1:1" and e.code == lib.BG_ECONN
    assert e.args == ("cannot connect to 127.0.0.1:1",)
    t = bloomguard.Timeout("slow")
    assert t.code == lib.BG_ETIMEOUT and str(t) == "slow"


def test_unknown_code():
    e = bloomguard.error_for(-999, "from the future")
    assert type(e) is bloomguard.BloomGuardError
    assert e.code == -999 and str(e) == "from the future" and e.status_name == "status -999"
    assert str(bloomguard.error_for(-999)) == "unknown status"


@pytest.mark.parametrize("code", sorted(CODES.values()))
def test_pickle_roundtrip(code):
    e = bloomguard.error_for(code, "msg")
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is type(e) and back.code == code and back.message == "msg"


def test_repr():
    assert repr(bloomguard.error_for(lib.BG_ENOTINIT, "x")) == "NotInitialized('x', code=BG_ENOTINIT)"


def test_single_mapping_function():
    """error_for is the one place that maps codes: the table covers exactly the header's codes."""
    assert set(_errors._BY_CODE) == set(CODES.values())
