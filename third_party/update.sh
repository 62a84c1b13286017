#!/usr/bin/env bash
# Maintainers only: re-fetches the vendored third-party sources, or checks them. No build runs this.
#   bash third_party/update.sh check          every vendored file matches SHA256SUMS (no network)
#   bash third_party/update.sh hiredis        hiredis from the hiredis-py sdist (PyPI, SHA-256 checked)
#   bash third_party/update.sh highwayhash    Google's HighwayHash at a pinned commit (git)
#   bash third_party/update.sh libkqueue      libkqueue at a pinned commit (git; LIBKQUEUE_GIT=DIR
#                                             clones a local copy instead); test builds only
# To move to another release, change the pin below, run the fetch, review `git diff third_party/`,
# and update third_party/README.md. The files are copied unmodified; SHA256SUMS is rewritten.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)

# hiredis 1.x: Debian 12 has no package of it; the hiredis Python package's sdist vendors the C library.
HIREDIS_PY_VERSION=3.5.0
HIREDIS_PY_SHA256=c227592cc56b7df247abe4755c26723965be68972be2149fa441ac33d82131ba
HIREDIS_FILES="COPYING alloc.c alloc.h async.c async.h async_private.h dict.c dict.h ffc.h fmacros.h
  hiredis.c hiredis.h hiredis_ssl.h net.c net.h read.c read.h sds.c sds.h sdsalloc.h sockcompat.c
  sockcompat.h ssl.c win32.h"
# HighwayHash: the headers the C++ SIMD units include, and the portable C implementation (Go build).
HIGHWAYHASH_REPO=https://github.com/google/highwayhash.git
HIGHWAYHASH_COMMIT=f8381f3331d9c56a9792f9b4a35f61c41108c39e
HIGHWAYHASH_FILES="LICENSE c/highwayhash.c c/highwayhash.h highwayhash/arch_specific.h
  highwayhash/compiler_specific.h highwayhash/endianess.h highwayhash/hh_avx2.h highwayhash/hh_buffer.h
  highwayhash/hh_portable.h highwayhash/hh_sse41.h highwayhash/hh_types.h highwayhash/highwayhash.h
  highwayhash/iaca.h highwayhash/load3.h highwayhash/vector128.h highwayhash/vector256.h"

# libkqueue: the userspace kqueue on epoll that runs the queue's kqueue backend on Linux in the
# tests (cmake/libkqueue.cmake, -DBG_TEST_LIBKQUEUE=ON); never in a shipped artifact. What its Linux
# build compiles (src/common, src/linux, the one posix header and proc.c they use), the templates
# its CMake configures (config.h, version.h, sys/event.h) and its licence.
LIBKQUEUE_REPO=${LIBKQUEUE_GIT:-https://github.com/mheily/libkqueue.git}
LIBKQUEUE_COMMIT=f96608964f7da711e686e09c39b79abdb4cc358e
LIBKQUEUE_FILES="LICENSE config.h.in version.h.in include/sys/event.h.in
  src/common/alloc.h src/common/debug.c src/common/debug.h src/common/evfilt_signal.h
  src/common/evfilt_signalfd.c src/common/filter.c src/common/kevent.c src/common/knote.c
  src/common/kqueue.c src/common/libkqueue.c src/common/map.c src/common/private.h src/common/queue.h
  src/common/tree.h src/linux/platform.c src/linux/platform.h src/linux/proc.c src/linux/read.c
  src/linux/timer.c src/linux/user.c src/linux/vnode.c src/linux/write.c src/posix/platform_ext.h
  src/posix/proc.c"
VENDORED="hiredis highwayhash libkqueue"

sums() {  # rewrites SHA256SUMS from the files on disk
  (cd "$HERE" && find $VENDORED -type f | LC_ALL=C sort | xargs sha256sum) > "$HERE/SHA256SUMS"
}

copy_files() {  # copy_files FROM TO FILES...
  local from=$1 to=$2; shift 2
  rm -rf "$to"
  for f in "$@"; do
    [ -f "$from/$f" ] || { echo "update.sh: $f is not in the fetched source" >&2; exit 1; }
    mkdir -p "$(dirname "$to/$f")"
    cp "$from/$f" "$to/$f"
  done
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
case ${1:-} in
  check)
    (cd "$HERE" && sha256sum --quiet -c SHA256SUMS) || { echo "update.sh: vendored files differ from SHA256SUMS" >&2; exit 1; }
    listed=$(awk '{print $2}' "$HERE/SHA256SUMS" | LC_ALL=C sort)
    present=$(cd "$HERE" && find $VENDORED -type f | LC_ALL=C sort)
    [ "$listed" = "$present" ] || { echo "update.sh: files not in SHA256SUMS:" >&2; diff <(echo "$listed") <(echo "$present") >&2; exit 1; }
    echo "third_party: $(echo "$present" | wc -l) vendored files match SHA256SUMS"
    ;;
  hiredis)
    python3 -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
      -d "$tmp" "hiredis==$HIREDIS_PY_VERSION"
    sdist=$tmp/hiredis-$HIREDIS_PY_VERSION.tar.gz
    echo "$HIREDIS_PY_SHA256  $sdist" | sha256sum --quiet -c -
    tar xzf "$sdist" -C "$tmp"
    # shellcheck disable=SC2086
    copy_files "$tmp/hiredis-$HIREDIS_PY_VERSION/vendor/hiredis" "$HERE/hiredis" $HIREDIS_FILES
    sums
    ;;
  highwayhash)
    git clone -q "$HIGHWAYHASH_REPO" "$tmp/hh"
    git -C "$tmp/hh" -c advice.detachedHead=false checkout -q "$HIGHWAYHASH_COMMIT"
    # shellcheck disable=SC2086
    copy_files "$tmp/hh" "$HERE/highwayhash" $HIGHWAYHASH_FILES
    sums
    ;;
  libkqueue)
    git clone -q "$LIBKQUEUE_REPO" "$tmp/kq"
    git -C "$tmp/kq" -c advice.detachedHead=false checkout -q "$LIBKQUEUE_COMMIT"
    # shellcheck disable=SC2086
    copy_files "$tmp/kq" "$HERE/libkqueue" $LIBKQUEUE_FILES
    sums
    ;;
  *) echo "usage: bash third_party/update.sh check|hiredis|highwayhash|libkqueue" >&2; exit 2 ;;
esac
