#!/usr/bin/env bash
# Puts hiredis 1.x's C sources (TLS part, ssl.c, included) in DEST/hiredis/, for the CMake build's
# vendored hiredis (cmake/hiredis.cmake, BG_HIREDIS=vendored, or auto without a system hiredis >= 1.0).
# Debian 12 has no hiredis 1.x package; the hiredis Python package's source distribution vendors the C
# library (hiredis-py 3.5.0: hiredis 1.5.0), so this takes that sdist from PyPI with pip - once: the
# tarball is kept in CACHE (default: $BG_DOWNLOAD_CACHE, else DEST) and checked against its SHA-256.
# Several build directories given the same CACHE share one download (scripts/test.sh does that).
#   bash scripts/hiredis-vendor.sh DEST [CACHE]
# Offline: put hiredis-3.5.0.tar.gz in CACHE (or pass -DBG_HIREDIS_SDIST=FILE to CMake).
# HIREDIS_PY_VERSION: another hiredis-py release (no checksum known: it is only reported).
set -euo pipefail
DEST=${1:?usage: hiredis-vendor.sh DEST [CACHE]}
CACHE=${2:-${BG_DOWNLOAD_CACHE:-$DEST}}
VERSION=${HIREDIS_PY_VERSION:-3.5.0}
declare -A KNOWN_SHA256=(
  [3.5.0]=c227592cc56b7df247abe4755c26723965be68972be2149fa441ac33d82131ba
)
stamp=$DEST/hiredis/.from-hiredis-py-$VERSION
[ -f "$stamp" ] && exit 0

sdist=${BG_HIREDIS_SDIST:-$CACHE/hiredis-$VERSION.tar.gz}
if [ ! -f "$sdist" ]; then
  mkdir -p "$CACHE"
  dl=$(mktemp -d "$CACHE/.download.XXXXXX")
  trap 'rm -rf "$dl"' EXIT
  echo "hiredis-vendor.sh: downloading the hiredis $VERSION sdist from PyPI into $CACHE" >&2
  if ! python3 -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
         -d "$dl" "hiredis==$VERSION" >&2; then
    echo "hiredis-vendor.sh: could not download hiredis==$VERSION from PyPI (needs python3 -m pip and" \
         "network access to PyPI). Offline: copy hiredis-$VERSION.tar.gz into $CACHE, or configure with" \
         "-DBG_HIREDIS_SDIST=/path/to/hiredis-$VERSION.tar.gz, or install a hiredis >= 1.0" \
         "(-DBG_HIREDIS=system), or use Debian's 0.14 (-DBG_HIREDIS=system: no tracking, no TLS)" >&2
    exit 1
  fi
  # rename in the same directory: concurrent builds sharing CACHE never see half a file
  mv -f "$dl/hiredis-$VERSION.tar.gz" "$sdist"
  rm -rf "$dl"
  trap - EXIT
fi

sum=$(sha256sum "$sdist" | awk '{print $1}')
want=${KNOWN_SHA256[$VERSION]:-}
if [ -n "$want" ] && [ "$sum" != "$want" ]; then
  echo "hiredis-vendor.sh: $sdist has SHA-256 $sum, expected $want: delete it and run again" >&2
  exit 1
fi
[ -n "$want" ] || echo "hiredis-vendor.sh: no known checksum for hiredis-py $VERSION ($sum)" >&2

mkdir -p "$DEST"
unpack=$(mktemp -d "$DEST/.unpack.XXXXXX")
trap 'rm -rf "$unpack"' EXIT
tar xzf "$sdist" -C "$unpack"
vendored=$(echo "$unpack"/hiredis-*/vendor/hiredis)
for f in alloc async hiredis net read sds sockcompat ssl; do
  [ -f "$vendored/$f.c" ] || { echo "hiredis-vendor.sh: $sdist has no vendor/hiredis/$f.c" >&2; exit 1; }
done
touch "$vendored/.from-hiredis-py-$VERSION"
rm -rf "$DEST/hiredis"
mv "$vendored" "$DEST/hiredis"
