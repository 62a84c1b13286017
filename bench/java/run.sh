#!/usr/bin/env bash
# The Java binding against Redisson 3.45.1 (bench/README.md, "bench/java"): builds the C library
# (as bindings/java/ci.sh does), installs the binding's jar into ~/.m2 (no tests, no javadoc),
# builds this module and runs its main class with the arguments given. It starts no server: pass
# the one to use with --url.
#   taskset -c 1 bash bench/java/run.sh --url redis://127.0.0.1:6399 --rounds 7 --seconds 1 \
#     --threads 1,16 --inflight 1000
# Environment: BG_JAVA_BUILD (the C library's CMake folder, default build-java), JOBS (build jobs,
# default 2), MVN (default mvn), JAVA (default java), BG_BENCH_SKIP_BUILD=1 (run what was built).
# Exit status: the benchmark's (0 targets met, 3 a target missed, 1 a wrong answer or an error,
# 2 bad arguments).
set -euo pipefail
cd "$(dirname "$0")/../.."
TOP=$PWD
BUILD=${BG_JAVA_BUILD:-build-java}
case $BUILD in /*) ;; *) BUILD=$TOP/$BUILD ;; esac
JOBS=${JOBS:-2}
MVN=${MVN:-mvn}
JAVA=${JAVA:-java}
# the binding's version, the first <version> of its pom (the project's own)
VER=$(sed -n 's:.*<version>\(.*\)</version>.*:\1:p' bindings/java/pom.xml | head -1)

if [ "${BG_BENCH_SKIP_BUILD:-0}" != 1 ]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DBG_BUILD_TESTS=OFF -DBG_BUILD_BENCH=OFF \
    -DBG_BUILD_DEMO=OFF -DBG_BUILD_EXAMPLES=OFF -DBG_BUILD_CLI=OFF -DBG_HIREDIS=vendored \
    -DBG_OPENSSL_STATIC=ON >/dev/null
  cmake --build "$BUILD" -j "$JOBS" --target bloomguard_static_public >/dev/null
  "$MVN" -B -ntp -q -f bindings/java/pom.xml -Dbloomguard.build="$BUILD" -DskipTests \
    -Dmaven.javadoc.skip=true -Dmaven.source.skip=true install
  "$MVN" -B -ntp -q -f bench/java/pom.xml -Dbloomguard.version="$VER" package
  "$MVN" -B -ntp -q -f bench/java/pom.xml -Dbloomguard.version="$VER" \
    dependency:build-classpath -Dmdep.outputFile=target/classpath.txt
fi
# ~/.m2 is shared: the jar on the classpath must be the one this tree built
jar=$(tr ':' '\n' < bench/java/target/classpath.txt | grep "/bloomguard-$VER.jar$")
cmp -s "$jar" "bindings/java/target/bloomguard-$VER.jar" || {
  echo "java bench: $jar is not bindings/java/target/bloomguard-$VER.jar (another tree installed it?): run without BG_BENCH_SKIP_BUILD" >&2
  exit 1
}
exec "$JAVA" -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
  -cp "bench/java/target/classes:$(cat bench/java/target/classpath.txt)" io.bloomguard.bench.JavaBench "$@"
