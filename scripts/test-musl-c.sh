#!/usr/bin/env bash
# The C test suite (ctest) linked statically against musl, run on this glibc machine: the library's
# libc-facing paths (the resolver thread's getaddrinfo, pthread and futex parking, clocks, poll,
# epoll, eventfd and timerfd, fork, signals) on the other libc the musllinux wheels and the static Go
# builds use.
#   1. The compilers and OpenSSL of the release's x86_64-musl target (scripts/release.sh
#      --toolchain-only: zig's clang for x86_64-linux-musl from the release's pinned tool virtualenv,
#      -nostdlib++; OpenSSL 3 built for musl from its pinned source, cached): TLS is on.
#   2. cJSON (the tests' JSON reader) for musl: Debian's source package of this machine's release
#      (apt-get source under an apt configuration of its own, deb-src of the system's sources; the
#      system's apt state is not touched), compiled with the same zig cc into a static archive.
#   3. CMake: -static programs (CMAKE_EXE_LINKER_FLAGS), the vendored hiredis, static OpenSSL, the
#      public-API tests on libbloomguard.a (BG_TEST_STATIC), no benchmarks, demo or examples.
#   4. Every test program and the bloomguard command: `file` says statically linked x86-64, no
#      program interpreter, and no glibc inside (glibc's static start-up reads GLIBC_TUNABLES, musl's
#      has no such name); the controls: a static and a dynamic glibc program must fail the check.
#   5. ctest against this machine's redis-server (each test starts its own; the cluster and Sentinel
#      fixtures start redis-server processes too): the subset below, or the ctest arguments given.
#   bash scripts/test-musl-c.sh [CTEST_ARGS...]
# BG_MUSL_C_BUILD moves the build tree (default build-musl-c). BG_CTEST_JOBS: tests at once
# (default twice the cores: they mostly wait on their servers). BG_REDISBLOOM: the RedisBloom module
# for the native tests (else scripts/redisbloom.sh, as the fixtures do).
set -euo pipefail
cd "$(dirname "$0")/.."
TOP=$PWD
B=${BG_MUSL_C_BUILD:-$TOP/build-musl-c}
JOBS=$(nproc 2>/dev/null || echo 2)
CTEST_JOBS=${BG_CTEST_JOBS:-$((2 * JOBS))}
t0=$SECONDS
say() { printf '\n--- [%3ds] %s\n' "$((SECONDS - t0))" "$*"; }
fail() { echo "test-musl-c.sh: $*" >&2; exit 1; }
for tool in redis-server apt-get dpkg-source file readelf gcc; do
  command -v "$tool" >/dev/null || fail "$tool is missing (bash scripts/deps.sh installs what the tests need)"
done
mkdir -p "$B"

# ---- 1. zig cc for musl, OpenSSL for musl: the release's ------------------------------------------
say "the release's x86_64-musl compilers and OpenSSL (scripts/release.sh --toolchain-only)"
bash scripts/release.sh --only x86_64-musl --toolchain-only
TDIR=$TOP/build-release/x86_64-musl
mapfile -t ZIG_ARGS <"$TDIR/cmake-args"
CC=$TDIR/bin/cc

# ---- 2. cJSON for musl ------------------------------------------------------------------------------
CJ=$B/cjson
if [ ! -f "$CJ/lib/libcjson.a" ]; then
  say "cJSON for musl: Debian's source package (apt-get source cjson), zig cc"
  aptd=$B/apt
  rm -rf "$aptd" "$CJ"
  mkdir -p "$aptd/lists/partial" "$aptd/cache/archives/partial" "$aptd/parts" "$aptd/src" "$CJ/lib/pkgconfig" "$CJ/include/cjson"
  : >"$aptd/status"
  # the system's own sources (deb822 or one-line), as deb-src
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources >"$aptd/parts/debian.sources"
  else
    sed -n 's/^deb \(.*debian.*\)/deb-src \1/p' /etc/apt/sources.list >"$aptd/parts/debian.list"
  fi
  cat >"$aptd/apt.conf" <<EOF
APT::Sandbox::User "root";
Dir::State::Lists "$aptd/lists";
Dir::State::status "$aptd/status";
Dir::Cache "$aptd/cache";
Dir::Etc::SourceList "/dev/null";
Dir::Etc::SourceParts "$aptd/parts";
EOF
  APT_CONFIG=$aptd/apt.conf apt-get update -qq
  (cd "$aptd/src" && APT_CONFIG=$aptd/apt.conf apt-get source -qq cjson >"$aptd/source.log" 2>&1) ||
    { cat "$aptd/source.log" >&2; fail "apt-get source cjson failed"; }
  src=$(ls -d "$aptd"/src/cjson-*/ | head -1)
  [ -f "$src/cJSON.c" ] || fail "no cJSON.c in Debian's cjson source ($src)"
  "$CC" -O2 -std=c89 -c "$src/cJSON.c" -o "$CJ/cJSON.o"
  "$TDIR/bin/ar" rcs "$CJ/lib/libcjson.a" "$CJ/cJSON.o"
  cp "$src/cJSON.h" "$CJ/include/cjson/"
  version=$(basename "$src" | sed 's/^cjson-//')
  cat >"$CJ/lib/pkgconfig/libcjson.pc" <<EOF
prefix=$CJ
Name: libcjson
Description: cJSON (Debian's source, built for musl by scripts/test-musl-c.sh)
Version: $version
Libs: -L\${prefix}/lib -lcjson
Cflags: -I\${prefix}/include -I\${prefix}/include/cjson
EOF
  rm -rf "$aptd"
fi

# ---- 3. configure and build -------------------------------------------------------------------------
say "CMake: static x86_64-linux-musl programs, TLS on (static OpenSSL), tests on"
# PKG_CONFIG_LIBDIR: pkg-config sees the musl cJSON only, never a library of this machine's glibc
PKG_CONFIG_LIBDIR=$CJ/lib/pkgconfig cmake -S . -B "$B/cmake" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "${ZIG_ARGS[@]}" -DCMAKE_EXE_LINKER_FLAGS=-static -DBG_HIREDIS=vendored -DBG_TLS=ON -DBG_OPENSSL_STATIC=ON \
  -DBG_BUILD_TESTS=ON -DBG_TEST_STATIC=ON -DBG_CLI_STATIC=ON -DBG_BUILD_CLI=ON \
  -DBG_BUILD_BENCH=OFF -DBG_BUILD_DEMO=OFF -DBG_BUILD_EXAMPLES=OFF >"$B/cmake.log" 2>&1 ||
  { tail -30 "$B/cmake.log" >&2; fail "CMake failed ($B/cmake.log)"; }
PKG_CONFIG_LIBDIR=$CJ/lib/pkgconfig cmake --build "$B/cmake" -j "$JOBS" >"$B/build.log" 2>&1 ||
  { grep -E -B2 -A10 'error|FAILED' "$B/build.log" | head -60 >&2; fail "the build failed ($B/build.log)"; }

# ---- 4. static, musl --------------------------------------------------------------------------------
say "every program is static and holds musl, not glibc (controls: a static glibc program, a dynamic one)"
static_musl() {  # FILE: a static x86-64 program without a program interpreter, holding no glibc
  local desc interp
  desc=$(file -b "$1")
  [[ $desc == *'statically linked'* ]] || { echo "$1 is not static: $desc"; return 1; }
  [[ $desc == *x86-64* ]] || { echo "$1 is not an x86-64 program: $desc"; return 1; }
  interp=$(readelf -l "$1" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
  [ -z "$interp" ] || { echo "$1 asks for the program interpreter $interp"; return 1; }
  ! grep -aq GLIBC_TUNABLES "$1" || { echo "$1 holds glibc, not musl"; return 1; }
}
printf '#include <stdio.h>\nint main(void) { puts("hi"); return 0; }\n' >"$B/hello.c"
gcc -static -o "$B/hello-glibc-static" "$B/hello.c"
gcc -o "$B/hello-glibc" "$B/hello.c"
for control in hello-glibc-static hello-glibc; do
  ! static_musl "$B/$control" >/dev/null || fail "the check let $control (glibc) pass: it is broken"
done
mapfile -t progs < <(find "$B/cmake" -maxdepth 3 -type f -perm -u+x \( -name 'test_*' -o -name with_redis \
  -o -name readme_quickstart -o -name bloomguard \) ! -name '*.*' | sort)
[ ${#progs[@]} -gt 50 ] || fail "only ${#progs[@]} test programs found under $B/cmake"
for p in "${progs[@]}"; do
  static_musl "$p" >&2 || fail "$p is not a static musl program"
done
echo "${#progs[@]} programs: static x86-64, no interpreter, no glibc (e.g. bloomguard: $(file -b "$B/cmake/bloomguard" | cut -d, -f1-5))"

# ---- 5. ctest ---------------------------------------------------------------------------------------
BG_REDISBLOOM=${BG_REDISBLOOM:-$(bash scripts/redisbloom.sh)}
export BG_REDISBLOOM
say "ctest -j$CTEST_JOBS $*"
ctest --test-dir "$B/cmake" --output-on-failure -j "$CTEST_JOBS" "$@"
say "done"
