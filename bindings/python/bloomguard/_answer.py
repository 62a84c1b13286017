"""Answers with provenance: where a query's answer came from (bloomguard/call.h, BG_SOURCE_*).

With a degrade policy (bloomguard.Policy) a query may be answered by something other than Redis;
the answer is still a success. :meth:`Filter.query <bloomguard.Filter.query>` and
:meth:`Filter.query_many <bloomguard.Filter.query_many>` say which, and what failure it stands in
for. Sources: ``"redis"``, ``"snapshot"``, ``"callback"``, ``"assumed_present"``,
``"assumed_absent"``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, List, Literal, NamedTuple, Optional

if TYPE_CHECKING:  # pragma: no cover
    from ._errors import BloomGuardError

__all__ = ["Answer", "Answers", "Source"]

#: Where an answer came from (BG_SOURCE_*; a test keeps it in step with the library's sources).
Source = Literal["none", "redis", "snapshot", "callback", "assumed_present", "assumed_absent"]


class Answer(NamedTuple):
    """One item's answer: ``present``, its ``source`` and, for a degraded answer, the ``failure``
    message it stands in for ("" when Redis answered) and ``error``, that failure as the exception
    it would have raised without a policy (None when Redis answered). Its truth value is
    ``present`` (not the tuple's), so ``if f.query(item):`` reads as expected."""

    present: bool
    source: Source
    failure: str
    error: Optional["BloomGuardError"] = None

    def __bool__(self) -> bool:
        return self.present

    @property
    def degraded(self) -> bool:
        """True when Redis did not answer (the policy did)."""
        return self.source != "redis"


class Answers(NamedTuple):
    """A batch's answers: ``present`` (one bool per item, in order), the batch's ``source`` and
    ``failure`` message. The library answers a batch from one source (for a batch larger than
    16,384 items, the items Redis answered before a failure keep Redis's answers and the source
    is the chain's); a batch of more than 65,536 items is several C calls: ``source`` and
    ``failure`` are then those of the first degraded call, "redis" if none was."""

    present: List[bool]
    source: Source
    failure: str
    error: Optional["BloomGuardError"] = None

    @property
    def degraded(self) -> bool:
        """True when Redis did not answer (some of) the batch."""
        return self.source != "redis"
