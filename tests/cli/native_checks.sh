#!/usr/bin/env bash
# The bloomguard command's --native flag against a redis-server with RedisBloom loaded (started by
# the caller: ctest runs it through with_redis --bloom).
#
#   tests/cli/native_checks.sh PATH/TO/bloomguard redis://127.0.0.1:PORT
#
# Prints "N passed, N failed" and exits non-zero if any check failed.
set -u
BG=$1
URL=$2
unset BLOOMGUARD_URL BLOOMGUARD_PASSWORD BLOOMGUARD_PASSWORD_FILE
export LC_ALL=C
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bg-cli-native.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
pass=0 fail=0
check() {  # check WHAT EXPECTED_RC EXPECTED_SUBSTRING -- CMD...
  local what=$1 want_rc=$2 want=$3
  shift 4
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [ "$rc" = "$want_rc" ] && [[ "$out" == *"$want"* ]]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    printf 'FAIL %s: exit %s (want %s), output:\n%s\n(wanted to contain: %s)\n' "$what" "$rc" "$want_rc" "$out" "$want"
  fi
}
N="clinative:$$:$RANDOM"
check "a missing native filter is not initialized, never absent" 2 "BG_ENOTINIT" -- \
  "$BG" --url "$URL" contains "$N" a --native
check "init --native" 0 "created $N" -- "$BG" --url "$URL" init "$N" --native --expected 1000 --fpp 0.01
check "info says the kind" 0 "kind: native" -- "$BG" --url "$URL" info "$N" --native
check "info --json says the kind" 0 '"kind":"native"' -- "$BG" --url "$URL" info "$N" --native --json
check "add --native" 0 "3 items, 3 added" -- "$BG" --url "$URL" add "$N" a b c --native
check "contains --native" 1 $'present\ta' -- "$BG" --url "$URL" contains "$N" a z --native
check "count --native (BF.CARD)" 0 "3" -- "$BG" --url "$URL" count "$N" --native
printf 'x\ny\nz\n' >"$WORK/items"
check "rotate --native swaps in a new generation" 0 "rotated $N (swap): 3 items" -- \
  "$BG" --url "$URL" rotate "$N" --native --expected 2000 --fpp 0.01 --from "$WORK/items" --quiet
check "the new generation answers" 0 '"present":3' -- "$BG" --url "$URL" contains "$N" x y z --native --json
check "the old one is gone" 1 $'absent\ta' -- "$BG" --url "$URL" contains "$N" a --native
check "a Redisson-layout handle is refused by name" 2 "is a native Bloom filter" -- \
  "$BG" --url "$URL" contains "$N" x
check "delete --native" 0 "" -- "$BG" --url "$URL" delete "$N" --native
R="clinative-r:$$:$RANDOM"
"$BG" --url "$URL" init "$R" --expected 100 --fpp 0.01 >/dev/null
check "a native handle on a Redisson-layout filter is refused by name" 2 "Redisson-layout filter" -- \
  "$BG" --url "$URL" contains "$R" x --native
"$BG" --url "$URL" delete "$R" >/dev/null
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
