#!/usr/bin/env bash
# The Go binding on each Linux it supports, built the way a user builds it (a plain `go build` of a
# module that requires it: examples/go) and its tests run:
#   1. linux/amd64, glibc: `go build` of examples/go (the test step of scripts/test.sh runs the suite).
#   2. linux/arm64, glibc, with TLS: cross-compiled with CC=aarch64-linux-gnu-gcc against Debian's
#      arm64 OpenSSL; the test binary (`go test -c`) runs a named subset of the suite under
#      qemu-user against a redis-server of this machine, and examples/go runs for 3 s under qemu.
#   3. linux/amd64, musl, static: CC=musl-gcc with -tags 'bloomguard_static bloomguard_notls' (no
#      musl OpenSSL here, so no TLS); the static test binary runs the suite (-test.short) natively.
#   bash scripts/go-cross.sh
# Needs (scripts/deps.sh installs them): gcc-aarch64-linux-gnu, libc6-dev-arm64-cross,
# qemu-user-static, musl-tools, linux-libc-dev, redis-server, openssl; Go from scripts/go-toolchain.sh.
# The arm64 runtime (libc6, libssl3, libssl-dev .debs of this machine's own Debian release) is
# fetched once with `apt-get download` under an apt configuration of its own (APT::Architecture
# arm64, its own lists; the system's dpkg is not touched) and unpacked with `dpkg -x` into
# build/go-cross/arm64-root, which is qemu's -L root (scripts/lib/arm64-root.sh). BG_GO_CROSS_DIR moves build/go-cross.
set -euo pipefail
cd "$(dirname "$0")/.."
TOP=$PWD
PATH="$(bash scripts/go-toolchain.sh):$PATH"
WORK=${BG_GO_CROSS_DIR:-$TOP/build/go-cross}
mkdir -p "$WORK"
export CGO_ENABLED=1 GOFLAGS=${GOFLAGS:-}
t0=$SECONDS
say() { printf '\n--- [%3ds] %s\n' "$((SECONDS - t0))" "$*"; }
for tool in aarch64-linux-gnu-gcc qemu-aarch64-static musl-gcc redis-server; do
  command -v "$tool" >/dev/null || { echo "$0: $tool is missing (bash scripts/deps.sh installs it)" >&2; exit 1; }
done
QEMU=qemu-aarch64-static

# The test subset run under emulation (the whole suite takes too long there, and its timing tests
# measure the emulator): the test vectors, filters, batches, pipelining, locks, rotations,
# partitioned filters, the policy's snapshot, TLS (arm64 OpenSSL verifying the test CA), the link mode.
ARM64_TESTS='^(TestLinkMode|TestVersion|TestLibraryFeatures|TestErrorCodesMatchHeader|TestHashVectors|TestParamsVectors|TestBitmapExample|TestFilterOperations|TestLargeBatch|TestBadInput|TestConfigChanged|TestConcurrentSharedClient|TestPipelineGoroutinesGetTheirOwnAnswers|TestLockBasics|TestLockMutualExclusion|TestRotateSwap|TestRotateNaive|TestRotateConcurrentAdds|TestInitPartitioned|TestPolicySnapshot|TestTLSTrustStore)$'

# ---- 1. linux/amd64 --------------------------------------------------------------------------------
say "linux/amd64 (glibc): go build of examples/go"
(cd examples/go && GOOS=linux GOARCH=amd64 go build -o "$WORK/service-amd64" .)
file -b "$WORK/service-amd64" | grep -q 'x86-64' || { echo "not an x86-64 program: $(file -b "$WORK/service-amd64")" >&2; exit 1; }

# ---- 2. linux/arm64 --------------------------------------------------------------------------------
ROOT=$WORK/arm64-root
say "arm64 runtime: libc6, libssl3, libssl-dev (arm64) from this machine's Debian sources (once)"
# shellcheck source=scripts/lib/arm64-root.sh
. scripts/lib/arm64-root.sh
arm64_root "$ROOT" libc6 libssl3 libssl-dev
ARM_LIB=$ROOT/usr/lib/aarch64-linux-gnu
arm64_env=(GOOS=linux GOARCH=arm64 CC=aarch64-linux-gnu-gcc
           "CGO_CFLAGS=-I$ROOT/usr/include -I$ROOT/usr/include/aarch64-linux-gnu"
           "CGO_LDFLAGS=-L$ARM_LIB -Wl,-rpath-link,$ARM_LIB")
say "linux/arm64 (glibc, TLS): go build of examples/go with CC=aarch64-linux-gnu-gcc"
(cd examples/go && env "${arm64_env[@]}" go build -o "$WORK/service-arm64" .)
file -b "$WORK/service-arm64" | grep -q 'ARM aarch64' || { echo "not an arm64 program: $(file -b "$WORK/service-arm64")" >&2; exit 1; }
say "linux/arm64: go test -c, then the subset under qemu-user ($QEMU -L arm64-root)"
(cd bindings/go && env "${arm64_env[@]}" go test -c -o "$WORK/bloomguard-arm64.test" .)
file -b "$WORK/bloomguard-arm64.test" | grep -q 'ARM aarch64' || { echo "the test binary is not arm64" >&2; exit 1; }
# from bindings/go: the tests read ../../include and ../../tests/vectors; redis-server and openssl
# are this machine's (x86-64), started by the emulated test binary
(cd bindings/go && "$QEMU" -L "$ROOT" "$WORK/bloomguard-arm64.test" -test.short -test.count=1 -test.v \
   -test.run "$ARM64_TESTS" 2>&1 | tee "$WORK/arm64-tests.log" | grep -E '^(--- |ok|FAIL|PASS)' || true)
grep -q '^PASS$' "$WORK/arm64-tests.log" || { echo "the arm64 tests failed (log: $WORK/arm64-tests.log)" >&2; exit 1; }
# the emulated binary really is arm64 and loaded OpenSSL (TLS ran): TestTLSTrustStore passed, not skipped
grep -q -- '--- PASS: TestTLSTrustStore' "$WORK/arm64-tests.log" ||
  { echo "TestTLSTrustStore did not pass under qemu (skipped?)" >&2; exit 1; }
ran=$(grep -c -- '^--- PASS' "$WORK/arm64-tests.log" || true)
say "linux/arm64: $ran tests passed under qemu; examples/go for 3 s under qemu against a redis-server"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no >"$WORK/redis.log" 2>&1 &
rpid=$!
trap 'kill "$rpid" 2>/dev/null || true' EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
"$QEMU" -L "$ROOT" "$WORK/service-arm64" "redis://127.0.0.1:$port" 3 swap | tail -3
kill "$rpid"; wait "$rpid" 2>/dev/null || true
trap - EXIT

# ---- 3. musl, static -------------------------------------------------------------------------------
# Debian's musl-gcc sees no kernel headers; the C core needs linux/futex.h (and asm/ under it)
KH=$WORK/musl-kernel-headers
mkdir -p "$KH"
ln -sfn /usr/include/linux "$KH/linux"
ln -sfn "/usr/include/$(gcc -print-multiarch)/asm" "$KH/asm"
ln -sfn /usr/include/asm-generic "$KH/asm-generic"
musl_env=(GOOS=linux GOARCH=amd64 CC=musl-gcc "CGO_CFLAGS=-isystem $KH")
say "linux/amd64 musl, static (-tags 'bloomguard_static bloomguard_notls'): go build of examples/go, go test -c"
(cd examples/go && env "${musl_env[@]}" go build -tags 'bloomguard_static bloomguard_notls' -o "$WORK/service-musl" .)
# (the linker's warnings about getaddrinfo in a static program are glibc's; kept in the log)
(cd bindings/go && env "${musl_env[@]}" go test -c -tags 'bloomguard_static bloomguard_notls' \
   -o "$WORK/bloomguard-musl.test" . >"$WORK/musl-build.log" 2>&1) || { cat "$WORK/musl-build.log" >&2; exit 1; }
# glibc's static start-up reads GLIBC_TUNABLES, musl's has no such name: the control is a static
# glibc program, which must show it
printf '#include <stdio.h>\nint main(void) { puts("hi"); return 0; }\n' >"$WORK/hello.c"
gcc -static -o "$WORK/hello-glibc" "$WORK/hello.c"
grep -aq GLIBC_TUNABLES "$WORK/hello-glibc" || { echo "the glibc marker is not found in a static glibc program" >&2; exit 1; }
for b in service-musl bloomguard-musl.test; do
  file -b "$WORK/$b" | grep -q 'statically linked' || { echo "$b is not static: $(file -b "$WORK/$b")" >&2; exit 1; }
  if grep -aq GLIBC_TUNABLES "$WORK/$b"; then echo "$b holds glibc, not musl" >&2; exit 1; fi
done
say "musl: the suite (-test.short) of the static binary"
(cd bindings/go && "$WORK/bloomguard-musl.test" -test.short -test.count=1 -test.v >"$WORK/musl-tests.log" 2>&1) ||
  { grep -E -A5 '^(--- FAIL|FAIL)' "$WORK/musl-tests.log" >&2; echo "the musl tests failed (log: $WORK/musl-tests.log)" >&2; exit 1; }
# skipped: TLS (none in this build), -test.short's cluster and Sentinel tests, the children of re-exec tests
echo "$(grep -c -- '^--- PASS' "$WORK/musl-tests.log") passed; skipped:" $(sed -n 's/^--- SKIP: \(Test[A-Za-z0-9_]*\).*/\1/p' "$WORK/musl-tests.log")
say "done"
