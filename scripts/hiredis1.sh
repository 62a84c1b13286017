#!/usr/bin/env bash
# Builds hiredis 1.x as a static library (position-independent) with a pkg-config file in PREFIX,
# for systems whose package is older - Debian 12 ships 0.14, which cannot parse RESP3, so queries
# there cannot use tracking (README, "Queries and tracking"). Debian has no hiredis 1.x package;
# the hiredis Python package's source distribution vendors the C library, so this takes it from
# PyPI. libbloomguard.so links it in and exports none of its symbols (--exclude-libs).
#   bash scripts/hiredis1.sh PREFIX
#   PKG_CONFIG_PATH=PREFIX/lib/pkgconfig cmake -S . -B build ...
set -euo pipefail
PREFIX=${1:?usage: hiredis1.sh PREFIX}
HIREDIS_PY_VERSION=${HIREDIS_PY_VERSION:-3.5.0}   # vendors hiredis 1.5
[ -f "$PREFIX/lib/libhiredis.a" ] && exit 0
SRC=$(mktemp -d)
trap 'rm -rf "$SRC"' EXIT
python3 -m pip download -q --no-deps --no-binary :all: -d "$SRC" "hiredis==$HIREDIS_PY_VERSION"
tar xzf "$SRC"/hiredis-*.tar.gz -C "$SRC"
vendored=$(echo "$SRC"/hiredis-*/vendor/hiredis)
mkdir -p "$PREFIX/include/hiredis" "$PREFIX/lib/pkgconfig" "$SRC/obj"
for f in alloc async hiredis net read sds sockcompat; do
  cc -O2 -fPIC -c "$vendored/$f.c" -o "$SRC/obj/$f.o"
done
ar rcs "$PREFIX/lib/libhiredis.a" "$SRC"/obj/*.o
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
echo "hiredis $version in $PREFIX; use PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig"
