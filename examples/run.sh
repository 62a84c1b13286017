#!/usr/bin/env bash
# Runs every example (examples/README.md) against a redis-server of its own on a free loopback
# port, each for SECONDS (default 3) under a hard time limit; fails if any example fails (each
# exits non-zero on an error, a false negative or fewer than 2 rebuilds). Then the negative
# control: the Python and Go services rebuilt with the naive strategy (delete, then add again)
# must fail, reporting errors or false negatives - the checks can catch what they look for.
#   bash examples/run.sh [SECONDS]
# BG_EXAMPLES_PYTHON: a python with bloomguard installed (default: the first of the python on PATH -
#   an activated venv, as the README installs it - and build-python/venv/bin/python, the venv
#   bindings/python/ci.sh makes, that imports bloomguard); BG_EXAMPLES_BUILD: a CMake build
#   directory of this tree (default build, the README's; example_event_loop is built there, and
#   the build configured first if there is none); BG_REDIS_SERVER: the server binary (default
#   redis-server from PATH). Needs Go >= 1.24 on PATH for the Go example.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
SECONDS_EACH=${1:-3}
imports_bloomguard() { [ -x "$1" ] && "$1" -c 'import bloomguard' >/dev/null 2>&1; }
PY=${BG_EXAMPLES_PYTHON:-}
if [ -z "$PY" ]; then
  for candidate in "$(command -v python3 || true)" "$(command -v python || true)" "$TOP/build-python/venv/bin/python"; do
    if [ -n "$candidate" ] && imports_bloomguard "$candidate"; then PY=$candidate; break; fi
  done
fi
BUILD=${BG_EXAMPLES_BUILD:-$TOP/build}
LIMIT=$((SECONDS_EACH + 60))   # an example that hangs is killed (and fails)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bg-examples.XXXXXX")
redis_pid=
cleanup() {
  if [ -n "$redis_pid" ]; then kill "$redis_pid" 2>/dev/null || true; wait "$redis_pid" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"${BG_REDIS_SERVER:-redis-server}" --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK" \
  --logfile "$WORK/redis.log" --daemonize no &
redis_pid=$!
for _ in $(seq 1 200); do
  redis-cli -p "$port" ping >/dev/null 2>&1 && break
  sleep 0.05
done
redis-cli -p "$port" ping >/dev/null 2>&1 || { echo "examples: redis-server did not start" >&2; exit 1; }
URL="redis://127.0.0.1:$port"

# What each example needs, built first (outside the time limit of its run)
if [ -z "$PY" ]; then
  echo "examples: no python that imports bloomguard (the python on PATH, $TOP/build-python/venv/bin/python):" \
    "activate the venv you installed it into (README: pip install ./bloomguard), or set BG_EXAMPLES_PYTHON" >&2
  exit 1
fi
imports_bloomguard "$PY" || { echo "examples: $PY cannot import bloomguard (set BG_EXAMPLES_PYTHON)" >&2; exit 1; }
if [ ! -x "$BUILD/examples/c/example_event_loop" ]; then
  # the README's build has the examples off (BG_BUILD_EXTRAS=OFF): turn them on in that tree
  [ -f "$BUILD/CMakeCache.txt" ] || cmake -S "$TOP" -B "$BUILD" -DBG_BUILD_TESTS=OFF >/dev/null
  cmake -S "$TOP" -B "$BUILD" -DBG_BUILD_EXAMPLES=ON >/dev/null
  cmake --build "$BUILD" -j 2 --target example_event_loop
fi
(cd "$TOP/examples/go" && timeout 900 go build -o "$WORK/go-service" .)

failed=()
run() {  # run NAME COMMAND...: must pass
  local name=$1 start=$SECONDS; shift
  if timeout -k 5 "$LIMIT" "$@" "$URL" "$SECONDS_EACH"; then
    echo "examples: $name passed ($((SECONDS - start)) s)"
  else
    echo "examples: $name FAILED (exit $?)" >&2
    failed+=("$name")
  fi
}
control() {  # control NAME COMMAND...: with the naive rebuild it must fail, having seen the failure
  local name=$1 out rc=0; shift
  out=$(timeout -k 5 "$LIMIT" "$@" "$URL" 2 naive 2>/dev/null) || rc=$?
  if [ "$rc" = 1 ] && printf '%s\n' "$out" | grep -Eq '(errors|false_negatives)=[1-9]'; then
    echo "examples: negative control $name caught the naive rebuild: ${out##*$'\n'}"
  else
    echo "examples: negative control $name did NOT catch the naive rebuild (exit $rc): $out" >&2
    failed+=("control:$name")
  fi
}
run python/threads_service.py "$PY" "$TOP/examples/python/threads_service.py"
run python/asyncio_service.py "$PY" "$TOP/examples/python/asyncio_service.py"
run go "$WORK/go-service"
run c/event_loop "$BUILD/examples/c/example_event_loop"
control python/threads_service.py "$PY" "$TOP/examples/python/threads_service.py"
control python/asyncio_service.py "$PY" "$TOP/examples/python/asyncio_service.py"
control go "$WORK/go-service"

[ ${#failed[@]} -eq 0 ] || { echo "examples: failed: ${failed[*]}" >&2; exit 1; }
echo "examples: all passed"
