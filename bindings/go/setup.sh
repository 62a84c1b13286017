#!/usr/bin/env bash
# Builds the C library with CMake, installs it into a prefix inside the build tree and prints the
# environment cgo needs to find it. Progress goes to stderr; stdout is only `export` lines, so:
#
#   eval "$(bash bindings/go/setup.sh)"            # shared library (default)
#   eval "$(BG_LINK=static bash bindings/go/setup.sh)"   # static library, no LD_LIBRARY_PATH needed
#   cd bindings/go && go test ./...
#
# Settings (environment):
#   BG_PREFIX     install prefix            default: <repo>/build-go/prefix (static: prefix-static)
#   BG_BUILD_DIR  CMake build directory     default: <repo>/build-go/cmake
#   BG_LINK       shared | static           default: shared
#   BG_CMAKE_ARGS extra arguments for the CMake configure step (e.g. -DCMAKE_BUILD_TYPE=Debug)
#
# With BG_LINK=static the prefix holds only libbloomguard.a (the shared library files are deleted
# from it after the install: give it a prefix of its own), so `pkg-config --static bloomguard`,
# which the package uses under the bloomguard_static build tag, links the archive plus hiredis;
# the output then sets GOFLAGS=-tags=bloomguard_static instead of LD_LIBRARY_PATH.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LINK=${BG_LINK:-shared}
case "$LINK" in
  shared) PREFIX=${BG_PREFIX:-$ROOT/build-go/prefix} ;;
  static) PREFIX=${BG_PREFIX:-$ROOT/build-go/prefix-static} ;;
  *) echo "setup.sh: BG_LINK must be shared or static, not '$LINK'" >&2; exit 2 ;;
esac
BUILD=${BG_BUILD_DIR:-$ROOT/build-go/cmake}

for tool in cmake pkg-config cc; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "setup.sh: '$tool' not found (Debian: bash scripts/deps.sh, or apt-get install cmake pkg-config gcc g++" \
         "libssl-dev libhighwayhash-dev python3-pip)" >&2
    exit 1
  }
done
# hiredis: CMake's BG_HIREDIS=auto (cmake/hiredis.cmake) takes a system hiredis >= 1.0, else builds
# hiredis 1.x from the hiredis PyPI sdist into the library (which then needs no hiredis package, the
# static one included); BG_CMAKE_ARGS=-DBG_HIREDIS=system forces the system one (Debian 12: 0.14).

generator=()
if [ ! -f "$BUILD/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
# shellcheck disable=SC2086
cmake -S "$ROOT" -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DBG_BUILD_TESTS=OFF -DBG_BUILD_CLI=OFF -DBG_BUILD_BENCH=OFF ${BG_CMAKE_ARGS:-} >&2
cmake --build "$BUILD" --parallel >&2
cmake --install "$BUILD" --prefix "$PREFIX" >&2

pc=$(find "$PREFIX" -name bloomguard.pc -print -quit)
[ -n "$pc" ] || { echo "setup.sh: no bloomguard.pc under $PREFIX" >&2; exit 1; }
pcdir=$(dirname "$pc")
libdir=$(cd "$pcdir/.." && pwd)
if [ "$LINK" = static ]; then
  # only the archive may stay, or the linker would pick the shared library for -lbloomguard
  rm -f "$libdir"/libbloomguard.so "$libdir"/libbloomguard.so.*
fi

q() { printf '%q' "$1"; }
echo "export PKG_CONFIG_PATH=$(q "$pcdir")\${PKG_CONFIG_PATH:+:\$PKG_CONFIG_PATH}"
if [ "$LINK" = shared ]; then
  echo "export LD_LIBRARY_PATH=$(q "$libdir")\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
else
  echo "export GOFLAGS=$(q "${GOFLAGS:+$GOFLAGS }-tags=bloomguard_static")"
fi
hiredis=$(sed -n 's/^BG_HIREDIS_\(KIND\|VERSION\):INTERNAL=//p' "$BUILD/CMakeCache.txt" | tr '\n' ' ')
echo "bloomguard installed in $PREFIX ($LINK, hiredis: ${hiredis% }); pkg-config: $(PKG_CONFIG_PATH=$pcdir pkg-config --modversion bloomguard)" >&2
