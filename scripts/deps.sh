#!/usr/bin/env bash
# Installs what bloomguard's build and tests need, if missing (Debian/Ubuntu, as root or with sudo).
#   scripts/deps.sh            build + test dependencies
# BG_NO_INSTALL=1 only reports what is missing.
set -euo pipefail

# libhiredis-dev: Debian's hiredis 0.14, for the build that keeps 0.14 tested (scripts/check-hiredis014.sh)
# and for scripts/check-install.sh (libbloomguard.a linked beside it in one program);
# the default build uses the vendored hiredis 1.x (third_party/), TLS part included (libssl-dev; openssl
# makes the TLS tests' certificates). HighwayHash is vendored too.
# gcc-aarch64-linux-gnu, libc6-dev-arm64-cross, qemu-user-static, musl-tools, linux-libc-dev, file: the
# Go binding built for linux/arm64 (its tests under qemu-user) and against musl (scripts/go-cross.sh);
# g++-aarch64-linux-gnu: the C library (HighwayHash's C++ units) for the Java jar's linux-aarch64
# native (bindings/java/cross-aarch64.sh)
# gdb: a test whose forked child hangs prints the child's threads' stacks before killing it
pkgs=(cmake ninja-build gcc g++ pkg-config libhiredis-dev libssl-dev openssl libcjson-dev
      redis-server python3 python3-dev python3-venv python3-pip maven default-jdk-headless curl ca-certificates
      gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static musl-tools linux-libc-dev file
      gdb)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# a JDK or Maven from elsewhere (e.g. preinstalled under /usr/local) is as good as Debian's
if command -v javac >/dev/null 2>&1; then missing=("${missing[@]/default-jdk-headless}"); fi
if command -v mvn >/dev/null 2>&1; then missing=("${missing[@]/maven}"); fi
read -r -a missing <<< "${missing[*]:-}"
# Go is not taken from Debian 12 (1.19 is too old for the binding, which needs 1.24): test.sh gets
# it through scripts/go-toolchain.sh (the go on PATH, or the official toolchain from the module proxy)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "${BG_NO_INSTALL:-0}" = 1 ]; then
  echo "missing packages: ${missing[*]} (apt-get install ${missing[*]})" >&2
  exit 1
fi
SUDO=
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "need root to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
