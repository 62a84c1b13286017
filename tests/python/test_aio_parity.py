"""bloomguard.aio keeps step with the blocking API: every public member of the blocking Client,
Filter, Rotation and Lock has an asyncio twin of the same name, or a reason in aio.NOT_TWINNED;
every public callable of bloomguard.aio has a docstring. Pure introspection: no server."""
from __future__ import annotations

import inspect
from typing import Iterator, Tuple

import bloomguard
import bloomguard.aio as aio

PAIRS = [
    ("Client", bloomguard.Client, aio.Client),
    ("Filter", bloomguard.Filter, aio.Filter),
    ("Rotation", bloomguard.Rotation, aio.Rotation),
    ("Lock", bloomguard.Lock, aio.Lock),
]
PROTOCOL = ("__enter__", "__exit__", "__contains__", "__iter__", "__len__")


def _public(cls: type) -> Iterator[str]:
    for name, _ in inspect.getmembers(cls):
        if not name.startswith("_") or name in PROTOCOL:
            yield name


def test_every_blocking_member_has_a_twin_or_a_reason():
    missing = []
    for label, blocking, twin in PAIRS:
        for name in _public(blocking):
            key = "%s.%s" % (label, name)
            if not hasattr(twin, name) and key not in aio.NOT_TWINNED:
                missing.append(key)
    assert not missing, "no asyncio twin and no reason in aio.NOT_TWINNED: %s" % ", ".join(missing)


def test_every_reason_names_a_member_that_exists_and_lacks_a_twin():
    classes = {label: (blocking, twin) for label, blocking, twin in PAIRS}
    for key, reason in aio.NOT_TWINNED.items():
        label, name = key.split(".", 1)
        blocking, twin = classes[label]
        assert hasattr(blocking, name), "%s: no such blocking member" % key
        assert not hasattr(twin, name), "%s has a twin now: drop its reason" % key
        assert reason.strip(), key


def _aio_callables() -> Iterator[Tuple[str, object]]:
    for name in aio.__all__:
        obj = getattr(aio, name)
        if inspect.isclass(obj):
            yield name, obj
            for member, value in vars(obj).items():
                if member.startswith("_") and member not in ("__aenter__", "__aexit__", "__init__"):
                    continue
                if callable(value) or isinstance(value, property):
                    yield "%s.%s" % (name, member), value
        elif callable(obj):
            yield name, obj


def test_every_public_aio_callable_has_a_docstring():
    undocumented = [name for name, obj in _aio_callables()
                    if not (getattr(obj, "__doc__", None) or "").strip()]
    assert not undocumented, "no docstring: %s" % ", ".join(undocumented)
