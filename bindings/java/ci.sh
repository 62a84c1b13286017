#!/usr/bin/env bash
# The Java binding's CI step: builds the C library (CMake, libbloomguard.a with the vendored hiredis
# and OpenSSL linked statically), then `mvn verify` in bindings/java - which compiles the JNI library
# into the jar (native/linux-x86_64/) and runs the JUnit suite, each test class against a
# redis-server of its own on a free 127.0.0.1 port - then checks what the jar's native exports and
# needs, and prints the test counts.
#   bash bindings/java/ci.sh [maven args...]      e.g. -Dtest=RotationTest
# Environment: BG_JAVA_BUILD (the CMake folder, default build-java), JOBS (build jobs, default
# nproc), MVN (default mvn), BG_JAVA_OPENSSL_STATIC=0 (link the system's libssl.so.3 instead of
# libssl.a: the native then needs OpenSSL 3 on the machine that runs it). Maven downloads its
# plugins and the test dependencies (JUnit, Redisson) into ~/.m2.
set -euo pipefail
cd "$(dirname "$0")/../.."
TOP=$PWD
BUILD=${BG_JAVA_BUILD:-build-java}
case $BUILD in /*) ;; *) BUILD=$TOP/$BUILD ;; esac
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
MVN=${MVN:-mvn}
STATIC=${BG_JAVA_OPENSSL_STATIC:-1}

command -v java >/dev/null && command -v "$MVN" >/dev/null || {
  echo "java ci: needs a JDK >= 17 and Maven (Debian: apt-get install openjdk-17-jdk-headless maven)" >&2
  exit 1
}
ssl_static=OFF
[ "$STATIC" = 1 ] && ssl_static=ON
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DBG_BUILD_TESTS=OFF -DBG_BUILD_BENCH=OFF \
  -DBG_BUILD_DEMO=OFF -DBG_BUILD_EXAMPLES=OFF -DBG_BUILD_CLI=OFF -DBG_HIREDIS=vendored \
  -DBG_OPENSSL_STATIC=$ssl_static >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target bloomguard_static_public

cd bindings/java
rm -rf target/surefire-reports
rc=0
"$MVN" -B -ntp -Dbloomguard.build="$BUILD" verify "$@" || rc=$?

# The counts, from Surefire's reports (also after a failure).
if ls target/surefire-reports/*.txt >/dev/null 2>&1; then
  grep -h "^Tests run" target/surefire-reports/*.txt | sed 's/^/java: /'
  grep -h "^Tests run" target/surefire-reports/*.txt | awk -F'[:,]' '
    { t += $2; f += $4; e += $6; s += $8 }
    END { printf "java: %d tests, %d failures, %d errors, %d skipped\n", t, f, e, s }'
fi
[ $rc = 0 ] || exit $rc

# The native: only the JNI entry points are exported (the C library, hiredis and OpenSSL stay
# inside), and with static OpenSSL no libssl/libcrypto is needed at run time.
so=target/classes/native/linux-x86_64/libbloomguard_jni.so
not_jni() { grep -v -e '^Java_io_bloomguard_' -e '^JNI_OnLoad$' || true; }
# the control: a planted library symbol among JNI ones must be named
[ "$(printf 'JNI_OnLoad\nJava_io_bloomguard_Native_version\nbg_version\n' | not_jni)" = bg_version ] || {
  echo "java ci: the export check's control was not caught: the check is broken" >&2
  exit 1
}
extra=$(nm -D --defined-only "$so" | awk '{print $3}' | not_jni)
if [ -n "$extra" ]; then
  echo "java ci: $so exports more than the JNI entry points:" >&2
  echo "$extra" >&2
  exit 1
fi
if [ "$STATIC" = 1 ] && readelf -d "$so" | grep -q 'NEEDED.*lib\(ssl\|crypto\)'; then
  echo "java ci: $so needs a shared OpenSSL although BG_OPENSSL_STATIC=ON" >&2
  exit 1
fi
# The notices: bloomguard's and those of what the native links in, byte for byte. The control: a
# path the jar does not hold must fail the same comparison.
# The same in the sources jar and the javadoc jar (maven-source-plugin, maven-javadoc-plugin).
jar=$(ls target/bloomguard-*.jar | grep -v -e '-sources\.jar$' -e '-javadoc\.jar$')
notice() { unzip -p "$jar" "META-INF/licenses/$1" 2>/dev/null | cmp -s - "$TOP/$2"; }
for j in "$jar" "${jar%.jar}-sources.jar" "${jar%.jar}-javadoc.jar"; do
  for f in LICENSE NOTICE third_party/hiredis/COPYING third_party/highwayhash/LICENSE third_party/openssl/LICENSE.txt; do
    jar=$j notice "$f" "$f" || { echo "java ci: $j lacks META-INF/licenses/$f (or it differs from the repository's)" >&2; exit 1; }
  done
done
if notice no-such-notice LICENSE; then
  echo "java ci: the notice check's control passed: the check is broken" >&2
  exit 1
fi
echo "java: jar $jar ($(du -k "$so" | cut -f1) KB native, exports only the JNI entry points), its -sources and -javadoc jars, the notices in each"
