#!/usr/bin/env bash
# Quick start: installs what is missing, builds bloomguard-demo (Release; tools/demo) and runs it.
#
#   bash scripts/demo.sh [DEMO OPTIONS]      e.g. --items 200000 --seconds 5   (bloomguard-demo --help)
#
# The demo starts its own redis-server on a free loopback port and stops it at the end. It loads a
# 1,000,000-item filter and rebuilds it under query load with each strategy (under a minute), prints
# a table and writes bloomguard-demo.svg in the current directory.
#
# Packages: only what the demo needs (compiler, CMake, Ninja, pkg-config, OpenSSL
# headers, redis-server), installed with apt-get when missing - as root or with
# sudo, like scripts/deps.sh (which installs the whole test toolchain: JDK, Maven, Python headers ...).
# hiredis: a system hiredis >= 1.0 if there is one, else the vendored hiredis 1.5 (third_party/) is
# built into the command (cmake/hiredis.cmake), so queries take the
# tracked path (docs/concepts.md, "Queries and tracking"); Debian 12's libhiredis-dev (0.14) is not needed.
# redis-server: the one on PATH, or $BG_REDIS_SERVER.
# BG_NO_INSTALL=1 only reports what is missing. BG_DEMO_BUILD_DIR: build directory (default
# build-demo at the top of the repository).
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BG_DEMO_BUILD_DIR:-$TOP/build-demo}

pkgs=(cmake ninja-build gcc g++ pkg-config libssl-dev redis-server)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# a redis-server already on PATH (built from source, another package) is as good as Debian's
if command -v redis-server >/dev/null 2>&1; then missing=("${missing[@]/redis-server}"); fi
read -r -a missing <<< "${missing[*]:-}"
if [ ${#missing[@]} -gt 0 ]; then
  if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
    echo "demo.sh: not a Debian/Ubuntu system; install: a C/C++ compiler, CMake >= 3.18, Ninja, pkg-config," \
         "OpenSSL headers, redis-server -" \
         "then run this again" >&2
    exit 1
  fi
  if [ "${BG_NO_INSTALL:-0}" = 1 ]; then
    echo "demo.sh: missing packages: ${missing[*]} (apt-get install ${missing[*]})" >&2
    exit 1
  fi
  SUDO=
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "demo.sh: need root to install: ${missing[*]}" >&2; exit 1; }
    SUDO=sudo
  fi
  echo "demo.sh: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

echo "demo.sh: building bloomguard-demo in $BUILD (Release)" >&2
cmake -S "$TOP" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBG_BUILD_TESTS=OFF -DBG_BUILD_BENCH=OFF >/dev/null
cmake --build "$BUILD" --target bloomguard_demo -j "$(nproc 2>/dev/null || echo 2)" >/dev/null

# in the caller's directory: the plot lands where the user is
exec "$BUILD/bloomguard-demo" "$@"
