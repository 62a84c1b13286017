#!/usr/bin/env bash
# The cross-language race suite (tests/race/README.md): builds the C, Go and Java workers, then
# runs the pytest suite, which starts its own redis-server on a free 127.0.0.1 port (and, for
# the cluster scenarios, a 6-node Redis Cluster on free ports: tests/python/cluster_helpers.py).
#
#   bash tests/race/run.sh [pytest args...]        e.g. -k swap-same, -k cluster
#
# Environment:
#   BG_RACE_BUILD     CMake build directory for the C worker (default: build; configured if empty)
#   BG_RACE_BUILD_H1  the same against hiredis 1.x, for the c1 worker (default: BG_RACE_BUILD when
#                     that has hiredis >= 1.0, as by default; else build-hiredis1, vendored hiredis)
#   BG_PY_VENV        virtualenv with bloomguard + pytest (default: build-python/venv, as
#                     bindings/python/ci.sh makes it; created and installed here if missing)
#   BG_RACE_REINSTALL=1  reinstall the binding there first (it embeds the C library: after a C
#                     change, unless bindings/python/ci.sh ran since)
#   BG_SKIP_INTEROP=1 no Java readers (Redisson, jbg), so no Maven and no JDK needed
#   BG_RACE_LANGS     the languages to run (default c,c1,python,pyaio,go,java,jbg)
# Exits with pytest's status; "no tests collected" (5) is a failure like any other non-zero one.
set -euo pipefail
cd "$(dirname "$0")/../.."
TOP=$PWD
BUILD=${BG_RACE_BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$TOP/$BUILD ;; esac
VENV=${BG_PY_VENV:-build-python/venv}
say() { printf 'race: %s\n' "$*" >&2; }

# C worker: a target of the main build (tests/race/c/CMakeLists.txt)
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S "$TOP" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBG_BUILD_BENCH=OFF >/dev/null
fi
cmake --build "$BUILD" -j 2 --target bg_race_worker bg_race_worker_fault >/dev/null
export BG_RACE_C_WORKER=$BUILD/race/bg_race_worker
export BG_RACE_CFAULT_WORKER=$BUILD/race/bg_race_worker_fault  # the cluster scenarios' control

# C worker against hiredis 1.x ("c1": tracked queries), whatever hiredis the main build has: the
# vendored one (cmake/hiredis.cmake), configured here if that has not run
if [ -z "${BG_RACE_BUILD_H1:-}" ] && grep -q '^BG_HIREDIS_VERSION:INTERNAL=[1-9]' "$BUILD/CMakeCache.txt"; then
  BG_RACE_BUILD_H1=$BUILD   # the main build already has hiredis >= 1.0: one worker serves both
fi
BUILD_H1=${BG_RACE_BUILD_H1:-build-hiredis1}
case $BUILD_H1 in /*) ;; *) BUILD_H1=$TOP/$BUILD_H1 ;; esac
if [ ! -f "$BUILD_H1/CMakeCache.txt" ]; then
  cmake -S "$TOP" -B "$BUILD_H1" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBG_BUILD_BENCH=OFF \
    -DBG_HIREDIS=vendored >/dev/null
fi
cmake --build "$BUILD_H1" -j 2 --target bg_race_worker >/dev/null
export BG_RACE_C1_WORKER=$BUILD_H1/race/bg_race_worker

# Python: the binding in the virtualenv the Python step uses
if [ "${BG_RACE_REINSTALL:-0}" = 1 ] || ! "$VENV/bin/python" -c 'import bloomguard, pytest' 2>/dev/null; then
  say "installing the Python binding into $VENV"
  [ -x "$VENV/bin/python" ] || "${PYTHON:-python3}" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check '.[test]'
fi

# Go worker: the binding compiles the library in (bindings/go/internal/clib)
(
  cd tests/race/go
  go build -o "$BUILD/race/race_worker_go" .
)
export BG_RACE_GO_WORKER=$BUILD/race/race_worker_go

# Java (Redisson) reader: compiled, and its classpath written by the dependency plugin
if [ "${BG_SKIP_INTEROP:-0}" = 1 ]; then
  export BG_RACE_LANGS=${BG_RACE_LANGS:-c,c1,python,pyaio,go}
  say "BG_SKIP_INTEROP=1: no Java readers (Redisson, jbg)"
else
  mvn_build() {
    (cd tests/race/java && mvn -B -q -ntp -Dstyle.color=never "$@" compile dependency:build-classpath </dev/null)
  }
  # offline first when ~/.m2 already has everything (as tests/interop/run.sh does)
  if ! mvn_build -o >/dev/null 2>&1; then
    say "offline Maven build failed; retrying online"
    mvn_build
  fi
  export BG_RACE_JAVA_CP="$TOP/tests/race/java/target/classes:$(cat tests/race/java/target/classpath.txt)"

  # jbg, the reader through bloomguard's Java binding: the binding's jar as bindings/java/ci.sh
  # builds it (its C library in build-java, then Maven's package with the native; tests skipped),
  # then one javac of tests/race/jbg against that jar
  jar_build() { JOBS=2 bash bindings/java/ci.sh -q -DskipTests "$@" </dev/null >"$BUILD/race/jbg-jar.log" 2>&1; }
  mkdir -p "$BUILD/race/jbg"
  if ! jar_build -o; then
    say "offline build of the Java binding failed; retrying online"
    jar_build || { cat "$BUILD/race/jbg-jar.log" >&2; exit 1; }
  fi
  jar=$(ls bindings/java/target/bloomguard-*.jar | grep -v -e '-sources\.jar$' -e '-javadoc\.jar$')
  javac --release 17 -cp "$jar" -d "$BUILD/race/jbg" tests/race/jbg/*.java
  export BG_RACE_JBG_CP="$BUILD/race/jbg:$TOP/$jar"
fi

say "workers built; running the suite (${BG_RACE_LANGS:-c,c1,python,pyaio,go,java,jbg})"
"$VENV/bin/python" -m pytest -p no:cacheprovider -q tests/race "$@"
