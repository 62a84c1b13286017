"""Skips are skips: in CI (CI set) a test may skip only for a reason docs/building.md lists - what a
build variant lacks, each variant run in CI (the default build, and the one against Debian's
hiredis 0.14: no tracking, no TLS, not a manylinux wheel), so that every branch runs in one of them.
Any other skip (a missing tool, a guard that turned a test off) fails there. Loaded by conftest.py;
test_skip_policy.py runs it on planted skips as its control.
"""
from __future__ import annotations

import os

import pytest

#: What a build variant lacks, each variant run in CI (the default build, and the one against
#: Debian's hiredis 0.14: no tracking, no TLS, not a manylinux wheel) - so every branch runs in one.
DOCUMENTED_SKIPS = ("this build has TLS", "a build without TLS", "hiredis < 1.0", "BG_HIREDIS=system")


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


def _undocumented_skip(report: pytest.BaseReport) -> str:
    """The reason of a skip CI must not accept, or ''."""
    if not report.skipped or not _in_ci() or hasattr(report, "wasxfail"):
        return ""
    longrepr = report.longrepr
    reason = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return "" if any(d in reason for d in DOCUMENTED_SKIPS) else reason


def _fail_undocumented(report: pytest.BaseReport) -> None:
    reason = _undocumented_skip(report)
    if reason:
        report.outcome = "failed"
        report.longrepr = ("skipped in CI for a reason docs/building.md does not list (install what it needs, "
                           "or fix the test): %s" % reason)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_undocumented(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _fail_undocumented(outcome.get_result())
