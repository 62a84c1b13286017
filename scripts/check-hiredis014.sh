#!/usr/bin/env bash
# Builds bloomguard against the system's hiredis 0.14 (Debian 12's libhiredis-dev; -DBG_HIREDIS=system)
# and runs the C tests: 0.14 stays a supported build, without tracked queries (it parses no RESP3)
# and without TLS. The default build uses hiredis >= 1.0 (cmake/hiredis.cmake), so this is the run
# that keeps the 0.14 code paths (csrc/redis/reply.c, tracking.c: #if HIREDIS_MAJOR >= 1) tested.
#   bash scripts/check-hiredis014.sh [BUILD_DIR [CMAKE_ARGS...]]   (with -DBG_SANITIZE=...: not the CLI test)
set -euo pipefail
cd "$(dirname "$0")/.."
TOP=$PWD
BUILD=${1:-build-hiredis014}
shift || true
CMAKE_ARGS=("$@")
# the fixtures' own tests (label fixture) use no library code: test.sh runs them once, in its plain
# build; the poller label repeats the queue's tests on poll(2), which reads no reply differently
CTEST_ARGS=(-LE 'fixture|poller')
case " ${CMAKE_ARGS[*]-} " in *BG_SANITIZE=*) CTEST_ARGS=(-LE 'cli|fixture|poller') ;; esac

cmake -S "$TOP" -B "$BUILD" -G Ninja -DBG_BUILD_BENCH=OFF -DBG_HIREDIS=system "${CMAKE_ARGS[@]}" >/dev/null
grep -q '^BG_HIREDIS_VERSION:INTERNAL=0\.' "$BUILD/CMakeCache.txt" || {
  echo "check-hiredis014.sh: not configured against a hiredis 0.x: $(grep '^BG_HIREDIS_VERSION' "$BUILD/CMakeCache.txt")" >&2
  exit 1
}
cmake --build "$BUILD" -j "$(nproc)"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir "$BUILD" --output-on-failure -j "${BG_CTEST_JOBS:-$(nproc)}" "${CTEST_ARGS[@]}"
