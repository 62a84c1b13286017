#!/usr/bin/env bash
# Builds bloomguard against hiredis 1.x (built by scripts/hiredis1.sh in a scratch prefix: Debian
# 12 has no package of it) and runs the C tests, proving the library is not tied to Debian 12's
# hiredis 0.14.
# With hiredis 1.x, queries use tracking (RESP3 pushes), which 0.14 cannot parse: these runs are
# what tests that path, so test.sh also runs them under ASan+UBSan.
#   bash scripts/check-hiredis1.sh [BUILD_DIR [CMAKE_ARGS...]]   (with -DBG_SANITIZE=...: not the CLI test)
set -euo pipefail
cd "$(dirname "$0")/.."
TOP=$PWD
BUILD=${1:-build-hiredis1}
shift || true
CMAKE_ARGS=("$@")
CTEST_ARGS=()
case " ${CMAKE_ARGS[*]-} " in *BG_SANITIZE=*) CTEST_ARGS=(-LE cli) ;; esac
PREFIX=$TOP/$BUILD/hiredis1
bash scripts/hiredis1.sh "$PREFIX" >/dev/null

PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig cmake -S "$TOP" -B "$BUILD" -G Ninja -DBG_BUILD_BENCH=OFF "${CMAKE_ARGS[@]}" >/dev/null
grep -q 'HIREDIS_VERSION:INTERNAL=1\.' "$BUILD/CMakeCache.txt" || { echo "not configured against hiredis 1.x" >&2; exit 1; }
cmake --build "$BUILD" -j "$(nproc)"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir "$BUILD" --output-on-failure -j "$(nproc)" "${CTEST_ARGS[@]}"
