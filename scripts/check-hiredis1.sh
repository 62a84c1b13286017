#!/usr/bin/env bash
# Builds bloomguard against hiredis 1.x and runs the C tests, proving the library is not tied to
# Debian 12's hiredis 0.14. Debian 12 has no hiredis 1.x package; the hiredis Python package's
# source distribution vendors the C library, so this takes it from PyPI and builds it as a static
# library with a pkg-config file in a scratch prefix.
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
HIREDIS_PY_VERSION=${HIREDIS_PY_VERSION:-3.5.0}   # vendors hiredis 1.5
PREFIX=$TOP/$BUILD/hiredis1
SRC=$(mktemp -d)
trap 'rm -rf "$SRC"' EXIT

if [ ! -f "$PREFIX/lib/libhiredis.a" ]; then
  python3 -m pip download -q --no-deps --no-binary :all: -d "$SRC" "hiredis==$HIREDIS_PY_VERSION"
  tar xzf "$SRC"/hiredis-*.tar.gz -C "$SRC"
  vendored=$(echo "$SRC"/hiredis-*/vendor/hiredis)
  mkdir -p "$PREFIX/include/hiredis" "$PREFIX/lib/pkgconfig" "$PREFIX/obj"
  for f in alloc async hiredis net read sds sockcompat; do
    cc -O2 -fPIC -c "$vendored/$f.c" -o "$PREFIX/obj/$f.o"
  done
  ar rcs "$PREFIX/lib/libhiredis.a" "$PREFIX"/obj/*.o
  cp "$vendored"/*.h "$PREFIX/include/hiredis/"
  version=$(awk '/define HIREDIS_(MAJOR|MINOR|PATCH)/ {printf "%s%s", sep, $3; sep="."}' "$vendored/hiredis.h")
  cat > "$PREFIX/lib/pkgconfig/hiredis.pc" <<PC
prefix=$PREFIX
includedir=\${prefix}/include
libdir=\${prefix}/lib
Name: hiredis
Description: hiredis $version (vendored by hiredis-py $HIREDIS_PY_VERSION)
Version: $version
Libs: -L\${libdir} -lhiredis
Cflags: -I\${includedir}
PC
fi

PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig cmake -S "$TOP" -B "$BUILD" -G Ninja -DBG_BUILD_BENCH=OFF "${CMAKE_ARGS[@]}" >/dev/null
grep -q 'HIREDIS_VERSION:INTERNAL=1\.' "$BUILD/CMakeCache.txt" || { echo "not configured against hiredis 1.x" >&2; exit 1; }
cmake --build "$BUILD" -j "$(nproc)"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir "$BUILD" --output-on-failure -j "$(nproc)" "${CTEST_ARGS[@]}"
