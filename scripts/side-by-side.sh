#!/usr/bin/env bash
# The suite run beside a second copy of itself: two runs at once on this machine, each starting
# its own servers on free ports, each paying for the other's CPU. What a test asserts must not
# depend on having the machine to itself - its time bounds come from the measured scheduling
# lateness, its chaos loops until the faults were seen, its servers and sockets are its own.
# Pairs (each pair's two runs start together; a pair passes when both do):
#   plain     the C tests (RelWithDebInfo) beside the same C tests
#   asan      the C tests beside the C tests under AddressSanitizer + UndefinedBehaviorSanitizer
#   tsan      the C tests beside the C tests under ThreadSanitizer
#   python    the Python suite beside itself (in the virtualenv bindings/python/ci.sh made)
#   go        the Go binding's `go test -race` beside itself
#   bash scripts/side-by-side.sh [PAIR...]          default: plain asan tsan python go
# Uses the build folders scripts/test.sh makes (build, build-asan, build-tsan: built here when
# missing) and BG_PY_VENV (default build-python/venv). Not called by scripts/test.sh: a pair takes
# as long as the slower copy on a machine shared by two (5-10 minutes each on 2 cores).
# Each run's output goes to build/side-by-side/PAIR-{a,b}.log; failures are printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
TOP=$PWD
PATH="$(bash scripts/go-toolchain.sh):$PATH"
JOBS=$(nproc 2>/dev/null || echo 2)
OUT=$TOP/build/side-by-side
VENV=${BG_PY_VENV:-build-python/venv}
mkdir -p "$OUT"
BG_REDISBLOOM=${BG_REDISBLOOM:-$(bash scripts/redisbloom.sh)}
export BG_REDISBLOOM

build() {  # build DIR [cmake args...]
  local dir=$1; shift
  cmake -S "$TOP" -B "$dir" -G Ninja "$@" >/dev/null
  cmake --build "$dir" -j "$JOBS" >/dev/null
}

# one copy of each kind (run in a subshell; its exit status is the copy's)
c_plain() { ctest --test-dir build --output-on-failure -j "$JOBS"; }
c_asan() {
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j "$JOBS" -LE 'cli|fixture'
}
c_tsan() {
  TSAN_OPTIONS=halt_on_error=1:die_after_fork=0 ctest --test-dir build-tsan --output-on-failure -j "$JOBS" -LE 'cli|fixture'
}
# as bindings/python/ci.sh runs it: BG_WHEEL names the wheel it built and installed
py_suite() {
  BG_WHEEL=$(ls "$VENV"-wheelhouse/bloomguard-*.whl 2>/dev/null | head -1) \
    "$VENV/bin/python" -m pytest -p no:cacheprovider -q tests/python
}
go_suite() { (cd bindings/go && go test -race -count=1 ./...); }

pair() {  # pair NAME FIRST SECOND
  local name=$1 first=$2 second=$3 t0=$SECONDS
  echo "--- $name: $first beside $second"
  "$first" >"$OUT/$name-a.log" 2>&1 </dev/null &
  local pa=$!
  "$second" >"$OUT/$name-b.log" 2>&1 </dev/null &
  local pb=$!
  local ra=0 rb=0
  wait "$pa" || ra=$?
  wait "$pb" || rb=$?
  echo "    $first: exit $ra, $second: exit $rb ($((SECONDS - t0)) s; logs in $OUT/$name-{a,b}.log)"
  [ "$ra" = 0 ] && [ "$rb" = 0 ] && return 0
  # what failed, from either log
  grep -hE '\*\*\*Failed|^FAIL|^FAILED|--- FAIL' "$OUT/$name-a.log" "$OUT/$name-b.log" | head -20 || true
  return 1
}

pairs=("$@")
[ ${#pairs[@]} -gt 0 ] || pairs=(plain asan tsan python go)
for p in "${pairs[@]}"; do
  case $p in
    plain) build build -DCMAKE_BUILD_TYPE=RelWithDebInfo ;;
    asan) build build -DCMAKE_BUILD_TYPE=RelWithDebInfo
          build build-asan -DCMAKE_BUILD_TYPE=Debug -DBG_SANITIZE=address,undefined -DBG_BUILD_BENCH=OFF ;;
    tsan) build build -DCMAKE_BUILD_TYPE=RelWithDebInfo
          build build-tsan -DCMAKE_BUILD_TYPE=Debug -DBG_SANITIZE=thread -DBG_BUILD_BENCH=OFF ;;
    python) "$VENV/bin/python" -c 'import bloomguard, pytest' && ls "$VENV"-wheelhouse/bloomguard-*.whl >/dev/null ||
              { echo "side-by-side.sh: no binding in $VENV or no wheel in $VENV-wheelhouse (bash bindings/python/ci.sh makes both)" >&2; exit 1; } ;;
    go) ;;
    *) echo "side-by-side.sh: unknown pair $p (plain, asan, tsan, python, go)" >&2; exit 2 ;;
  esac
done

failed=()
for p in "${pairs[@]}"; do
  case $p in
    plain) pair plain c_plain c_plain || failed+=("$p") ;;
    asan) pair asan c_plain c_asan || failed+=("$p") ;;
    tsan) pair tsan c_plain c_tsan || failed+=("$p") ;;
    python) pair python py_suite py_suite || failed+=("$p") ;;
    go) pair go go_suite go_suite || failed+=("$p") ;;
  esac
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "side-by-side.sh: failed beside a second copy: ${failed[*]}" >&2
  exit 1
fi
echo "side-by-side.sh: every pair passed (${pairs[*]})"
