#!/usr/bin/env bash
# Installs a build into a scratch prefix and builds a downstream program against it, with
# find_package(bloomguard) (shared and static) and with pkg-config.
#   bash scripts/check-install.sh BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
PREFIX=$(mktemp -d)
trap 'rm -rf "$PREFIX"' EXIT
cmake --install "$BUILD" --prefix "$PREFIX" >/dev/null
cmake -S tests/install -B "$PREFIX/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$PREFIX" >/dev/null
cmake --build "$PREFIX/consumer" >/dev/null
LD_LIBRARY_PATH=$PREFIX/lib "$PREFIX/consumer/consumer_shared"
"$PREFIX/consumer/consumer_static"
libdir=$(dirname "$(find "$PREFIX" -name bloomguard.pc)")/..
cc tests/install/consumer.c -o "$PREFIX/consumer_pc" \
  $(PKG_CONFIG_PATH=$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH} pkg-config --cflags --libs bloomguard)
LD_LIBRARY_PATH=$libdir "$PREFIX/consumer_pc"
# the shared library exports only bg_* symbols
leaked=$(nm -D --defined-only "$libdir"/libbloomguard.so | awk '{print $3}' | grep -v '^bg_' | grep -v '^_' || true)
if [ -n "$leaked" ]; then echo "symbols exported beyond bg_*: $leaked" >&2; exit 1; fi
# a vendored hiredis (cmake/hiredis.cmake) is inside both libraries: neither the shared library nor a
# program linking the static one needs anything beyond libc, libm, libpthread (and libssl/libcrypto)
if grep -q '^BG_HIREDIS_KIND:INTERNAL=vendored' "$BUILD/CMakeCache.txt"; then
  for f in "$libdir"/libbloomguard.so "$PREFIX/consumer/consumer_static"; do
    extra=$(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' |
            grep -Ev '^(libc|libm|libpthread|libssl|libcrypto)\.so(\.[0-9]+)*$|^ld-linux' || true)
    if [ -n "$extra" ]; then echo "$(basename "$f") needs more than libc/libm/libpthread/OpenSSL: $extra" >&2; exit 1; fi
  done
fi
echo "install check passed"
