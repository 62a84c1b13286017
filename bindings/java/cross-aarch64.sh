#!/usr/bin/env bash
# The Java binding's jar with a linux-aarch64 native beside linux-x86_64, and a named subset of its
# JUnit suite run by an arm64 OpenJDK 17 under qemu-user (against redis-servers of this machine):
#   1. an arm64 root (scripts/lib/arm64-root.sh): libc6, libssl3, libssl-dev (libssl.a and
#      libcrypto.a, linked in statically), and openjdk-17-jre-headless with the libraries it loads
#      (libstdc++6, libgcc-s1, zlib1g) - Debian packages of this machine's release, unpacked, not
#      installed;
#   2. the C library for aarch64 (cmake/toolchains/aarch64-linux-gnu.cmake, static OpenSSL, the
#      vendored hiredis) in build-java-aarch64;
#   3. bindings/java/ci.sh with -Pcross-aarch64: the x86-64 C library and native as always, plus
#      native/linux-aarch64/libbloomguard_jni.so linked with aarch64-linux-gnu-gcc (the JDK's jni.h
#      is the same for both); Surefire forks the arm64 JVM through qemu (its `jvm`), so the tests
#      below load the aarch64 native from target/classes - the report must say os.arch=aarch64;
#   4. the aarch64 native's checks: an ARM aarch64 object, only the JNI entry points exported, no
#      shared OpenSSL needed; and the jar holds both natives.
#   bash bindings/java/cross-aarch64.sh [maven args...]
# Needs (scripts/deps.sh): gcc-aarch64-linux-gnu, g++-aarch64-linux-gnu, libc6-dev-arm64-cross,
# qemu-user-static, redis-server, openssl, a JDK >= 17 and Maven. BG_JAVA_CROSS_DIR moves
# build/java-cross (the root, the JVM wrapper); BG_JAVA_AARCH64_BUILD the CMake folder.
set -euo pipefail
cd "$(dirname "$0")/../.."
TOP=$PWD
WORK=${BG_JAVA_CROSS_DIR:-$TOP/build/java-cross}
XBUILD=${BG_JAVA_AARCH64_BUILD:-$TOP/build-java-aarch64}
JOBS=${JOBS:-2}
t0=$SECONDS
say() { printf '\n--- [%3ds] %s\n' "$((SECONDS - t0))" "$*"; }
for tool in aarch64-linux-gnu-gcc aarch64-linux-gnu-g++ qemu-aarch64-static redis-server java mvn; do
  command -v "$tool" >/dev/null || { echo "$0: $tool is missing (bash scripts/deps.sh installs it)" >&2; exit 1; }
done

# The tests run under emulation: the vectors, the filter API, every status's exception, rotations
# (swap and locked), the submission queue, TLS (the statically linked arm64 OpenSSL verifying the
# test CA). Left out: the Redisson interop (its Netty start-up takes minutes under qemu), the
# cluster (18 processes), timing-bound tests of the policy and observer, and the close racing
# in-flight futures (under emulation the close may come after every answer, and the test then
# rightly says it raced nothing).
AARCH64_TESTS=${BG_JAVA_AARCH64_TESTS:-VectorsTest,FilterTest,ErrorsTest,RotationTest,AsyncTest,TlsTest,!AsyncTest#closingTheClientFailsWhatIsInFlight}

say "arm64 root: libc6, OpenSSL, OpenJDK 17 (arm64 .debs, once)"
# shellcheck source=scripts/lib/arm64-root.sh
. scripts/lib/arm64-root.sh
ROOT=$WORK/arm64-root
arm64_root "$ROOT" libc6 libssl3 libssl-dev libstdc++6 libgcc-s1 zlib1g openjdk-17-jre-headless
ARM_JAVA_HOME=$ROOT/usr/lib/jvm/java-17-openjdk-arm64
[ -x "$ARM_JAVA_HOME/bin/java" ] || { echo "$0: no arm64 java in $ARM_JAVA_HOME" >&2; exit 1; }

say "the C library for aarch64 (static OpenSSL from the root) in $XBUILD"
BG_ARM64_ROOT=$ROOT cmake -S . -B "$XBUILD" -DCMAKE_TOOLCHAIN_FILE="$TOP/cmake/toolchains/aarch64-linux-gnu.cmake" \
  -DCMAKE_BUILD_TYPE=Release -DBG_BUILD_TESTS=OFF -DBG_BUILD_BENCH=OFF -DBG_BUILD_DEMO=OFF \
  -DBG_BUILD_EXAMPLES=OFF -DBG_BUILD_CLI=OFF -DBG_HIREDIS=vendored -DBG_OPENSSL_STATIC=ON >/dev/null
BG_ARM64_ROOT=$ROOT cmake --build "$XBUILD" -j "$JOBS" --target bloomguard_static_public >/dev/null
file -b "$XBUILD/libbloomguard.a" >/dev/null
grep -q "^OPENSSL_SSL_LIBRARY:.*=$ROOT/.*libssl\.a$" "$XBUILD/CMakeCache.txt" ||
  { echo "$0: the aarch64 build did not find the root's libssl.a: $(grep '^OPENSSL_SSL_LIBRARY' "$XBUILD/CMakeCache.txt")" >&2; exit 1; }

# Surefire's `jvm`: a java that is the arm64 one under qemu (Surefire reads the JDK's release file
# next to bin/ for its version). Its processes (the tests' redis-server, bash) are started with
# vfork + exec: the default posix_spawn goes through jspawnhelper, an arm64 program that the
# kernel cannot exec without binfmt_misc; redis-server itself is this machine's, run natively.
JVM=$WORK/jvm
mkdir -p "$JVM/bin"
cp "$ARM_JAVA_HOME/release" "$JVM/release"
cat >"$JVM/bin/java" <<EOF
#!/bin/sh
exec qemu-aarch64-static -L "$ROOT" "$ARM_JAVA_HOME/bin/java" -Djdk.lang.Process.launchMechanism=VFORK "\$@"
EOF
chmod +x "$JVM/bin/java"
"$JVM/bin/java" -XshowSettings:properties -version 2>&1 | grep -q 'os.arch = aarch64' ||
  { echo "$0: the arm64 JVM under qemu does not start (or is not aarch64)" >&2; exit 1; }

say "the jar with both natives (bindings/java/ci.sh -Pcross-aarch64); under qemu: $AARCH64_TESTS"
rm -f bindings/java/target/surefire-reports/TEST-*.xml
JOBS=$JOBS bash bindings/java/ci.sh -Pcross-aarch64 -Dbloomguard.build.aarch64="$XBUILD" -Djvm="$JVM/bin/java" \
  -Dtest="$AARCH64_TESTS" -Dsurefire.failIfNoSpecifiedTests=true "$@"

# the tests ran in the arm64 JVM: Surefire records the forked JVM's properties. The control: the
# record of an x86-64 JVM must fail the same check.
arch_ok() { grep -q 'name="os.arch" value="aarch64"' "$1"; }
printf '<property name="os.arch" value="amd64"/>\n' >"$WORK/control-report.xml"
if arch_ok "$WORK/control-report.xml"; then
  echo "$0: the os.arch check's control passed: the check is broken" >&2
  exit 1
fi
reports=(bindings/java/target/surefire-reports/TEST-*.xml)
for r in "${reports[@]}"; do
  arch_ok "$r" || { echo "$0: $r was not run by an aarch64 JVM" >&2; exit 1; }
done
[ ${#reports[@]} -eq "$(echo "$AARCH64_TESTS" | tr ',' '\n' | grep -vc '^!')" ] ||
  { echo "$0: ${#reports[@]} test classes reported, not those of $AARCH64_TESTS" >&2; exit 1; }

so=bindings/java/target/classes/native/linux-aarch64/libbloomguard_jni.so
file -b "$so" | grep -q 'ARM aarch64' || { echo "$0: $so is not aarch64: $(file -b "$so")" >&2; exit 1; }
extra=$(aarch64-linux-gnu-nm -D --defined-only "$so" | awk '{print $3}' |
        grep -v -e '^Java_io_bloomguard_' -e '^JNI_OnLoad$' || true)
[ -z "$extra" ] || { echo "$0: $so exports more than the JNI entry points: $extra" >&2; exit 1; }
if aarch64-linux-gnu-readelf -d "$so" | grep -q 'NEEDED.*lib\(ssl\|crypto\)'; then
  echo "$0: $so needs a shared OpenSSL" >&2
  exit 1
fi
jar=$(ls bindings/java/target/bloomguard-*.jar | grep -v -e '-sources\.jar$' -e '-javadoc\.jar$')
listing=$(unzip -l "$jar")
for p in linux-x86_64 linux-aarch64; do
  grep -q "native/$p/libbloomguard_jni.so" <<<"$listing" || { echo "$0: $jar lacks native/$p" >&2; exit 1; }
done
say "done: $jar carries linux-x86_64 and linux-aarch64 ($(du -k "$so" | cut -f1) KB); ${#reports[@]} test classes passed under qemu-aarch64"
