#!/usr/bin/env bash
# The core built and linked for macOS and FreeBSD, from this Linux machine, with zig's clang (PyPI
# `ziglang`, in a venv under build-tools/) - nothing here can RUN those programs; docs/building.md
# says what is tested where.
#   1. CMake, TLS off (-DBG_TLS=OFF: no OpenSSL for those targets here), the project's warnings as
#      they are (none promoted away, none silenced): libbloomguard (.dylib / .so) and the bloomguard
#      command, for aarch64-macos.11.0, x86_64-macos.11.0 and x86_64-freebsd.
#   2. The Go binding with -tags bloomguard_notls, CC="zig cc -target ...": `go vet` of it (its tests
#      included) and `go build` of a small program that links it, for darwin/arm64, darwin/amd64 and
#      freebsd/amd64. The darwin link needs
#      libresolv and CoreFoundation, which zig does not ship: stub .tbd files written below (the
#      symbols Go's runtime and net package name) are passed with -L/-F; -ldflags='-s -w' keeps Go
#      from running the host's strip on a Mach-O file.
#   3. Each output checked with `file` (Mach-O arm64 / x86_64, FreeBSD ELF), and an unsupported
#      target (x86_64-windows-gnu) must fail in common/platform.h with its one message (control).
#   bash scripts/cross-platforms.sh
# BG_CROSS_DIR moves build/cross. BG_CROSS_ALL=1 also runs step 1 for x86_64-macos.11.0; by default
# (CI's time) that target's C is compiled by step 2's darwin/amd64 build (cgo compiles the same
# sources), and step 1 builds the CMake library and command for one macOS and the FreeBSD target.
set -euo pipefail
cd "$(dirname "$0")/.."
TOP=$PWD
PATH="$(bash scripts/go-toolchain.sh):$PATH"
WORK=${BG_CROSS_DIR:-$TOP/build/cross}
VENV=$TOP/build-tools/zig-venv
JOBS=${BG_CROSS_JOBS:-2}
t0=$SECONDS
say() { printf '\n--- [%3ds] %s\n' "$((SECONDS - t0))" "$*"; }
fail() { echo "$0: $*" >&2; exit 1; }

# ---- zig --------------------------------------------------------------------------------------------
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import ziglang' 2>/dev/null; then
  say "installing ziglang (pip) into $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q ziglang
fi
ZIG=$("$VENV/bin/python" -c 'import ziglang, os; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')
export ZIG_GLOBAL_CACHE_DIR=$TOP/build-tools/zig-cache ZIG_LOCAL_CACHE_DIR=$TOP/build-tools/zig-cache
mkdir -p "$WORK/bin"
# one wrapper per target (CMake and cgo take a compiler path; zig takes the target as a flag)
wrap() {  # wrap NAME COMMAND...
  local name=$1
  shift
  printf '#!/bin/sh\nexec %s "$@"\n' "$*" >"$WORK/bin/$name.tmp"
  chmod +x "$WORK/bin/$name.tmp"
  mv "$WORK/bin/$name.tmp" "$WORK/bin/$name"
}
TARGETS="aarch64-macos.11.0 x86_64-macos.11.0 x86_64-freebsd"
# -nostdlib++: the C++ hashing units need no C++ runtime (CMakeLists.txt drops its implicit
# libraries), and without it zig builds libc++ and libc++abi for each target the first time CMake's
# compiler check links a C++ program: about 100 s per target on 2 cores, for nothing linked
for t in $TARGETS; do
  wrap "cc-$t" "$ZIG" cc -target "$t"
  wrap "c++-$t" "$ZIG" c++ -nostdlib++ -target "$t"
done
wrap zar "$ZIG" ar
wrap zranlib "$ZIG" ranlib

# what `file` must say of each target's programs and libraries
want_file() {
  case $1 in
    aarch64-macos*) echo 'Mach-O 64-bit.*arm64' ;;
    x86_64-macos*) echo 'Mach-O 64-bit.*x86_64' ;;
    x86_64-freebsd*) echo 'ELF 64-bit.*x86-64' ;;
  esac
}
check_file() {  # check_file TARGET PATH
  local got
  got=$(file -bL "$2")
  echo "  $(basename "$2"): $got"
  echo "$got" | grep -Eq "$(want_file "$1")" || fail "$2 is not a $1 file: $got"
  # FreeBSD: `file` names the OS of executables only (their ABI note); a library must at least
  # need FreeBSD's libc (libc.so.7; glibc's is libc.so.6)
  case $1 in
    *freebsd*)
      echo "$got" | grep -q 'FreeBSD' || readelf -d "$2" | grep -q 'NEEDED.*\[libc\.so\.7\]' \
        || fail "$2 names neither FreeBSD nor FreeBSD's libc.so.7" ;;
  esac
}

# ---- 0. control: an unsupported platform fails at build time, with the one message -------------------
say "control: x86_64-windows-gnu stops in common/platform.h"
if out=$("$ZIG" cc -target x86_64-windows-gnu -c -o "$WORK/control.o" -Icsrc -Iinclude csrc/common/thread.c 2>&1); then
  fail "csrc/common/thread.c compiled for Windows: common/platform.h let an unsupported platform through"
fi
echo "$out" | grep -q 'bloomguard: unsupported platform' || fail "no platform message for Windows: $out"
echo "  ok: $(echo "$out" | grep -o 'bloomguard: unsupported platform[^"]*' | head -1 | cut -c1-100)..."

# ---- 1. the C library and the command (CMake) --------------------------------------------------------
CMAKE_TARGETS=$TARGETS
[ "${BG_CROSS_ALL:-0}" = 1 ] || CMAKE_TARGETS="aarch64-macos.11.0 x86_64-freebsd"
for t in $CMAKE_TARGETS; do
  case $t in
    *macos*) sys=Darwin ;;
    *freebsd*) sys=FreeBSD ;;
  esac
  case $t in
    aarch64-*) cpu=arm64 ;;
    x86_64-*) cpu=x86_64 ;;
  esac
  say "$t: CMake (BG_TLS=OFF), libbloomguard and the bloomguard command"
  dir=$WORK/cmake-$t
  cmake -S "$TOP" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_SYSTEM_NAME=$sys -DCMAKE_SYSTEM_PROCESSOR=$cpu \
    -DCMAKE_C_COMPILER="$WORK/bin/cc-$t" -DCMAKE_CXX_COMPILER="$WORK/bin/c++-$t" \
    -DCMAKE_AR="$WORK/bin/zar" -DCMAKE_RANLIB="$WORK/bin/zranlib" -DCMAKE_OBJCOPY="$(command -v objcopy)" \
    -DCMAKE_OSX_SYSROOT= -DCMAKE_OSX_DEPLOYMENT_TARGET= \
    -DBG_TLS=OFF -DBG_HIREDIS=vendored -DBG_BUILD_EXTRAS=OFF -DBG_BUILD_CLI=ON >"$dir.configure.log" 2>&1 \
    || { cat "$dir.configure.log"; fail "$t: CMake configure failed"; }
  # warnings are shown, not hidden: a new one is seen in CI's log (and -Werror is not forced on
  # hiredis's vendored sources, which the checksums keep as upstream wrote them)
  cmake --build "$dir" -j "$JOBS" --target bloomguard bloomguard_cli 2>&1 | tee "$dir.build.log" | grep -E 'warning|error' || true
  [ "${PIPESTATUS[0]}" = 0 ] || fail "$t: the build failed ($dir.build.log)"
  grep -E '(csrc|include)/.*warning:' "$dir.build.log" && fail "$t: the library or command has compiler warnings"
  lib=$(ls "$dir"/libbloomguard.*.*.dylib "$dir"/libbloomguard.so.*.* 2>/dev/null | head -1 || true)
  [ -n "$lib" ] || fail "$t: no shared library in $dir"
  check_file "$t" "$lib"
  check_file "$t" "$dir/bloomguard"
done

# ---- 2. the Go binding (cgo) ----------------------------------------------------------------------------
# stubs of what Go's darwin runtime and net package link against (zig ships libSystem only)
STUB=$WORK/macstub
mkdir -p "$STUB/usr/lib" "$STUB/Frameworks/CoreFoundation.framework"
cat >"$STUB/usr/lib/libresolv.tbd" <<'EOF'
--- !tapi-tbd
tbd-version: 4
targets: [ x86_64-macos, arm64-macos ]
install-name: '/usr/lib/libresolv.9.dylib'
exports:
  - targets: [ x86_64-macos, arm64-macos ]
    symbols: [ _res_9_ninit, _res_9_nclose, _res_9_nsearch, _res_9_ndestroy ]
...
EOF
cat >"$STUB/Frameworks/CoreFoundation.framework/CoreFoundation.tbd" <<'EOF'
--- !tapi-tbd
tbd-version: 4
targets: [ x86_64-macos, arm64-macos ]
install-name: '/System/Library/Frameworks/CoreFoundation.framework/Versions/A/CoreFoundation'
exports:
  - targets: [ x86_64-macos, arm64-macos ]
    symbols: [ _CFBundleGetMainBundle, _CFBundleCopyResourceURL, _CFURLGetFileSystemRepresentation,
               _CFRelease, _CFStringCreateWithCString, _CFBundleGetValueForInfoDictionaryKey,
               _CFStringGetCString, _CFStringGetLength, _CFStringGetMaximumSizeForEncoding,
               _CFGetTypeID, _CFStringGetTypeID, ___CFConstantStringClassReference,
               _kCFAllocatorDefault ]
...
EOF
# a program that links the binding (every C object of the module goes into the link): examples/go
# imports net/http, whose darwin build needs the Security framework too - not stubbed here
PROG=$WORK/goprog
mkdir -p "$PROG"
cat >"$PROG/go.mod" <<EOF
module example.com/bloomguard-cross

go 1.24

require github.com/bloomguard/bloomguard/bindings/go v0.0.0

replace github.com/bloomguard/bloomguard/bindings/go => $TOP/bindings/go
EOF
cat >"$PROG/main.go" <<'EOF'
package main

import (
	"fmt"

	bloomguard "github.com/bloomguard/bloomguard/bindings/go"
)

func main() { fmt.Println("bloomguard", bloomguard.Version()) }
EOF
for gt in darwin/arm64:aarch64-macos.11.0 darwin/amd64:x86_64-macos.11.0 freebsd/amd64:x86_64-freebsd; do
  goos=${gt%%/*} rest=${gt#*/} goarch=${gt#*/}; goarch=${goarch%%:*}; t=${rest#*:}
  say "$goos/$goarch: go vet of the binding, go build of a program that links it (-tags bloomguard_notls, zig cc -target $t)"
  ldf=""
  [ "$goos" = darwin ] && ldf="-L$STUB/usr/lib -F$STUB/Frameworks"
  out=$WORK/service-$goos-$goarch
  (
    export CGO_ENABLED=1 GOOS=$goos GOARCH=$goarch CC="$WORK/bin/cc-$t" CXX="$WORK/bin/c++-$t" CGO_LDFLAGS="$ldf"
    cd bindings/go && go vet -tags bloomguard_notls ./...
    cd "$PROG" && go build -tags bloomguard_notls -ldflags='-s -w' -o "$out" .
  )
  check_file "$t" "$out"
  # zig cc, asked by cgo's probes to compile stdin, leaves a "-.o" in the working directory
  rm -f "$TOP/bindings/go/-.o" "$PROG/-.o"
done
say "done: macOS (arm64, x86_64) and FreeBSD (x86_64) built and linked; none of it run here"
