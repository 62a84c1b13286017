"""The skip policy (skip_policy.py) on planted tests, run by a pytest of their own: in CI an
undocumented skip fails the run, a documented one stays a skip; outside CI both are skips."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent

PLANTED = textwrap.dedent('''
    import pytest

    def test_undocumented():
        pytest.skip("a tool is not installed")

    def test_documented():
        pytest.skip("library built with hiredis < 1.0: no tracking")
''')


def _run(tmp_path: Path, ci: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_planted.py").write_text(PLANTED)
    env = dict(os.environ, CI=ci, PYTHONPATH=str(HERE))
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "skip_policy", "-q",
                           "-rs", str(tmp_path)], env=env, capture_output=True, text=True, cwd=tmp_path)


def test_undocumented_skip_fails_in_ci(tmp_path):
    r = _run(tmp_path, "true")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 failed, 1 skipped" in r.stdout, r.stdout
    assert "a tool is not installed" in r.stdout


def test_skips_stay_skips_outside_ci(tmp_path):
    r = _run(tmp_path, "")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 skipped" in r.stdout, r.stdout
