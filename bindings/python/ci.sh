#!/usr/bin/env bash
# The Python binding's CI step: build and install it into a virtualenv, then run its pytest suite
# (which starts its own redis-server on a free 127.0.0.1 port).
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
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check '.[test]'
# -p no:cacheprovider: leave no .pytest_cache in the tree. Exit status 5 (nothing collected) fails too.
"$VENV/bin/python" -m pytest -p no:cacheprovider -q tests/python "$@"
