#!/usr/bin/env bash
# The Python binding's CI step: build its wheel, install that into a virtualenv, then run the pytest
# suite (which starts its own redis-server on a free 127.0.0.1 port).
#   bash bindings/python/ci.sh [pytest args...]
# PYTHON: the interpreter (default python3).  BG_PY_VENV: the virtualenv (default build-python/venv).
# Debian 12 needs python3-venv and python3-dev (Python.h) besides the C build's packages.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
VENV=${BG_PY_VENV:-build-python/venv}

inc=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
if [ ! -f "$inc/Python.h" ]; then
  echo "Python.h not found in $inc: install the Python headers (Debian: apt-get install python3-dev)" >&2
  exit 1
fi
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV" || { echo "cannot create a virtualenv (Debian: apt-get install python3-venv)" >&2; exit 1; }
fi
# One build: `pip wheel .` makes the wheel, which is what gets installed and tested (test_wheel.py
# reads its extension's DT_NEEDED and installs it into a fresh virtualenv as well).
WHEELHOUSE=build-python/wheelhouse
rm -rf "$WHEELHOUSE"
"$VENV/bin/python" -m pip wheel --quiet --disable-pip-version-check --no-deps -w "$WHEELHOUSE" .
wheels=("$WHEELHOUSE"/bloomguard-*.whl)
[ ${#wheels[@]} -eq 1 ] && [ -f "${wheels[0]}" ] || { echo "expected one wheel in $WHEELHOUSE: ${wheels[*]}" >&2; exit 1; }
WHEEL=$(cd "$(dirname "${wheels[0]}")" && pwd)/$(basename "${wheels[0]}")
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$WHEEL"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$WHEEL[test]"
# -p no:cacheprovider: leave no .pytest_cache in the tree. Exit status 5 (nothing collected) fails too.
BG_WHEEL=$WHEEL "$VENV/bin/python" -m pytest -p no:cacheprovider -q tests/python "$@"
