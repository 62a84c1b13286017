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
# The same from the default prefix, /usr/local, as `sudo cmake --install` + `sudo ldconfig` leave it:
# found by pkg-config's and find_package's default search paths, the shared library by the loader's
# cache (no LD_LIBRARY_PATH), the command by its rpath. Done for real, but in a private mount
# namespace whose /usr/local and /etc are overlays on temporary directories: nothing reaches the
# machine's own, and it all goes when the namespace ends. Needs root (CI runs as root).
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null 2>&1; then
  mkdir -p "$PREFIX/ov/usr" "$PREFIX/ov/usr.work" "$PREFIX/ov/etc" "$PREFIX/ov/etc.work"
  unshare -m --propagation private bash -euo pipefail -s "$BUILD" "$PREFIX" "$PWD" <<'NS'
BUILD=$1 SCRATCH=$2 TOP=$3
mount -t overlay overlay -o "lowerdir=/usr/local,upperdir=$SCRATCH/ov/usr,workdir=$SCRATCH/ov/usr.work" /usr/local
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$SCRATCH/ov/etc,workdir=$SCRATCH/ov/etc.work" /etc
cmake --install "$BUILD" --prefix /usr/local >/dev/null
ldconfig
unset PKG_CONFIG_PATH LD_LIBRARY_PATH CMAKE_PREFIX_PATH
cmake -S "$TOP/tests/install" -B "$SCRATCH/consumer-usrlocal" -G Ninja >/dev/null
cmake --build "$SCRATCH/consumer-usrlocal" >/dev/null
"$SCRATCH/consumer-usrlocal/consumer_shared" >/dev/null
"$SCRATCH/consumer-usrlocal/consumer_static" >/dev/null
# shellcheck disable=SC2046
cc "$TOP/tests/install/consumer.c" -o "$SCRATCH/consumer_pc_usrlocal" $(pkg-config --cflags --libs bloomguard)
"$SCRATCH/consumer_pc_usrlocal" >/dev/null
if [ -x /usr/local/bin/bloomguard ]; then /usr/local/bin/bloomguard --version >/dev/null; fi
echo "installed into /usr/local (private mount namespace): find_package, pkg-config, ldconfig, the command: OK"
NS
else
  echo "check-install.sh: /usr/local check skipped (needs root for a private mount namespace)"
fi
echo "install check passed"
