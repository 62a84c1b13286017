#!/usr/bin/env bash
# Tests of the bloomguard command against a running redis-server (started by the caller).
#
#   tests/cli/run.sh PATH/TO/bloomguard redis://127.0.0.1:PORT
#
# Starts nothing itself. Uses fresh filter names (prefix clitest:<pid>:<random>:) and deletes them
# at the end. Needs python3 (JSON checks); uses redis-cli for key/TTL checks when it is on PATH.
# Prints "N passed, N failed" and exits non-zero if any check failed.
set -u

if [ $# -ne 2 ]; then
  echo "usage: $0 PATH/TO/bloomguard REDIS_URL" >&2
  exit 64
fi
BG=$1
URL=$2
if [ ! -x "$BG" ]; then
  echo "$0: $BG is not an executable" >&2
  exit 2
fi
unset BLOOMGUARD_URL BLOOMGUARD_PASSWORD
export LC_ALL=C

WORK=$(mktemp -d "${TMPDIR:-/tmp}/bg-cli-test.XXXXXX")
P="clitest:$$:$RANDOM:"
NAMES=()
cleanup() {
  local n
  for n in "${NAMES[@]}"; do
    timeout 10 "$BG" --url "$URL" delete "$n" >/dev/null 2>&1
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

PASS=0
FAIL=0
ok() { PASS=$((PASS + 1)); echo "ok   - $1"; }
bad() {
  FAIL=$((FAIL + 1))
  echo "FAIL - $1"
  if [ -n "${2:-}" ]; then echo "       $2"; fi
  echo "       rc=$RC stdout: $(head -c 300 "$OUT" | tr '\n' '|')"
  echo "       stderr: $(head -c 300 "$ERR" | tr '\n' '|')"
}

OUT=$WORK/out
ERR=$WORK/err
RC=0
# run [-i INPUTFILE] ARGS... : runs the CLI (bounded by timeout) with --url, sets OUT ERR RC.
run() {
  local input=/dev/null
  if [ "$1" = "-i" ]; then input=$2; shift 2; fi
  timeout 120 "$BG" --url "$URL" "$@" <"$input" >"$OUT" 2>"$ERR"
  RC=$?
}
# run_raw: the same without the --url option.
run_raw() {
  timeout 120 "$BG" "$@" </dev/null >"$OUT" 2>"$ERR"
  RC=$?
}
name() { local n="$P$1"; NAMES+=("$n"); echo "$n"; }

expect_rc() { # DESC RC
  if [ "$RC" -eq "$2" ]; then ok "$1 (exit $2)"; else bad "$1" "expected exit $2"; fi
}
expect_out() { # DESC REGEX (grep -E on stdout)
  if grep -Eq -- "$2" "$OUT"; then ok "$1"; else bad "$1" "stdout does not match /$2/"; fi
}
expect_err() { # DESC REGEX (grep -E on stderr)
  if grep -Eq -- "$2" "$ERR"; then ok "$1"; else bad "$1" "stderr does not match /$2/"; fi
}
# expect_json DESC PYTHON-EXPR : stdout is one JSON object d and the expression is true.
expect_json() {
  local msg
  if msg=$(python3 - "$OUT" "$2" 2>&1 <<'PY'
import json, sys
with open(sys.argv[1], "rb") as fh:
    raw = fh.read()
d = json.loads(raw.decode("utf-8"))
assert isinstance(d, dict), "not a JSON object"
assert raw.count(b"\n") == 1 and raw.endswith(b"\n"), "not exactly one line"
if not eval(sys.argv[2], {"d": d}):
    sys.exit("expression is false: " + sys.argv[2])
PY
  ); then ok "$1"; else bad "$1" "$msg"; fi
}
lines_of() { wc -l <"$OUT" | tr -d ' '; }

have_rediscli=0
if command -v redis-cli >/dev/null 2>&1; then have_rediscli=1; fi
rcli() { timeout 10 redis-cli -u "$URL" "$@"; }

# python expressions for Redisson's parameters (Java's Math.round is floor(x + 0.5))
params() { # N P -> "size k"
  python3 -c 'import math,sys
n=int(sys.argv[1]); p=float(sys.argv[2])
s=int(-n*math.log(p)/(math.log(2)**2)); k=max(1, math.floor(s/n*math.log(2)+0.5)); print(s, k)' "$1" "$2"
}

echo "# bloomguard CLI tests: $BG against $URL"

# ---- version and help -----------------------------------------------------------------
run_raw version
expect_rc "version" 0
expect_out "version prints the version" '^bloomguard [0-9]+\.[0-9]+\.[0-9]+'
run_raw --json version
expect_json "version --json" 'isinstance(d["cli"], str) and isinstance(d["libraryNumber"], int) and d["hashImpl"] in ("avx2","sse41","portable")'
run_raw --url redis://127.0.0.1:1 version
expect_rc "version needs no server" 0
run_raw --help
expect_rc "--help" 0
expect_out "--help lists exit codes" '^  64  usage error'
expect_out "--help lists the commands" 'contains NAME \[ITEM\.\.\.\]'
run_raw -h
expect_rc "-h" 0
for c in info init add contains count delete expire persist version; do
  run_raw "$c" --help
  if [ "$RC" -eq 0 ] && grep -q "usage: bloomguard .*$c" "$OUT"; then ok "$c --help"; else bad "$c --help"; fi
done

# ---- usage errors: 64 -----------------------------------------------------------------
run_raw
expect_rc "no arguments" 64
expect_err "no arguments: message" 'no command'
run_raw frobnicate x
expect_rc "unknown command" 64
expect_err "unknown command: message" "unknown command 'frobnicate'"
run_raw count x --frob
expect_rc "unknown option" 64
run_raw count
expect_rc "count without NAME" 64
run_raw info a b
expect_rc "info with two names" 64
run_raw init x --expected 100
expect_rc "init without --fpp" 64
run_raw init x --fpp 0.01
expect_rc "init without --expected" 64
run_raw init x --expected 100 --fpp abc
expect_rc "init --fpp abc" 64
run_raw init x --expected -5 --fpp 0.1
expect_rc "init --expected -5" 64
run_raw expire x
expect_rc "expire without --ttl-ms" 64
run_raw expire x --ttl-ms 0
expect_rc "expire --ttl-ms 0" 64
run_raw count x --fpp 0.1
expect_rc "option of another command" 64
run_raw add x --batch 0
expect_rc "--batch 0" 64
run_raw --timeout-ms soon count x
expect_rc "--timeout-ms not a number" 64
run_raw --url
expect_rc "--url without value" 64
run_raw add x a -
expect_rc "'-' mixed with items" 64
run_raw version extra
expect_rc "version with an argument" 64

# ---- errors: 2 ------------------------------------------------------------------------
run_raw --url foo://nowhere count x
expect_rc "bad URL" 2
expect_err "bad URL names BG_EBADURL" 'BG_EBADURL'
run_raw --url redis://127.0.0.1:1 --timeout-ms 1000 count x
expect_rc "unreachable server" 2
expect_err "unreachable server names BG_ECONN and the address" 'BG_E(CONN|TIMEOUT).*: .+'
BLOOMGUARD_URL=redis://127.0.0.1:1 timeout 60 "$BG" --timeout-ms 1000 count x </dev/null >"$OUT" 2>"$ERR"
RC=$?
expect_rc "BLOOMGUARD_URL is used" 2
BLOOMGUARD_URL=redis://127.0.0.1:1 timeout 60 "$BG" --url "$URL" delete "$(name envurl)" </dev/null >"$OUT" 2>"$ERR"
RC=$?
expect_rc "--url overrides BLOOMGUARD_URL" 0
N=$(name missing)
for c in info count; do
  run "$c" "$N"
  expect_rc "$c on a filter that does not exist" 2
  expect_err "$c on a missing filter names BG_ENOTINIT" 'BG_ENOTINIT'
done
run contains "$N" a
expect_rc "contains on a filter that does not exist" 2
run add "$N" a
expect_rc "add on a filter that does not exist" 2
run init "${P}bad{}name" --expected 100 --fpp 0.01
expect_rc "name whose keys span slots (a{}b)" 2
expect_err "a{}b names BG_EBADNAME" 'BG_EBADNAME'
run init "$(name badp)" --expected 100 --fpp 1.5
expect_rc "init --fpp 1.5 rejected" 2
expect_err "fpp 1.5 names BG_EBADPARAMS" 'BG_EBADPARAMS'

# ---- init / info ----------------------------------------------------------------------
F=$(name f1)
read -r SZ K < <(params 10000 0.01)
run init "$F" --expected 10000 --fpp 0.01
expect_rc "init" 0
expect_out "init says created" "^created "
run init "$F" --expected 500 --fpp 0.1
expect_rc "init again" 0
expect_out "init again keeps the existing config" "^exists"
expect_out "init again reports the kept size" "^size: $SZ\$"
run --json init "$F" --expected 500 --fpp 0.1
expect_json "init --json (existing)" "d['created'] is False and d['size'] == $SZ and d['hashIterations'] == $K"
run info "$F"
expect_rc "info" 0
expect_out "info size" "^size: $SZ\$"
expect_out "info hashIterations" "^hashIterations: $K\$"
expect_out "info expectedInsertions" '^expectedInsertions: 10000$'
expect_out "info falseProbability" '^falseProbability: 0\.01$'
run --json info "$F"
expect_json "info --json" "d['name'] == '$F' and d['size'] == $SZ and d['hashIterations'] == $K and d['expectedInsertions'] == 10000 and d['falseProbability'] == 0.01"
if [ $have_rediscli -eq 1 ]; then
  rcli hgetall "{$F}:config" >"$OUT" 2>"$ERR"
  RC=$?
  if [ "$(tr '\n' ' ' <"$OUT")" != "" ] && python3 - "$OUT" "$SZ" "$K" <<'PY'
import sys
v = open(sys.argv[1]).read().split("\n")
h = dict(zip(v[0::2], v[1::2]))
assert h["size"] == sys.argv[2], h
assert h["hashIterations"] == sys.argv[3], h
assert h["expectedInsertions"] == "10000", h
assert h["falseProbability"] == "0.01", h
PY
  then ok "config hash at {NAME}:config with Redisson's fields"; else bad "config hash fields"; fi
fi
G=$(name fsmall)
run --json init "$G" --expected 1000 --fpp 1.0E-4
read -r SZ2 K2 < <(params 1000 0.0001)
expect_json "init --json 1.0E-4 (created)" "d['created'] is True and d['size'] == $SZ2 and d['hashIterations'] == $K2 and d['falseProbability'] == 0.0001"
if [ $have_rediscli -eq 1 ]; then
  if [ "$(rcli hget "{$G}:config" falseProbability)" = "1.0E-4" ]; then ok "falseProbability stored as 1.0E-4"
  else RC=0; bad "falseProbability stored as 1.0E-4" "got $(rcli hget "{$G}:config" falseProbability)"; fi
fi

# ---- add / contains with item arguments -------------------------------------------------
run add "$F" apple banana cherry
expect_rc "add 3 items" 0
expect_out "add counts" '^3 items, 3 added'
run add "$F" apple
expect_out "add an item again sets no bit" '^1 items, 0 added'
run --json add "$F" date
expect_json "add --json" "d['items'] == 1 and d['added'] == 1 and d['name'] == '$F'"
run contains "$F" apple banana cherry date
expect_rc "contains: all present" 0
expect_out "contains lists present items" $'^present\tbanana$'
if [ "$(lines_of)" = 4 ]; then ok "contains: one line per item"; else bad "contains: one line per item"; fi
run contains "$F" apple not-there-1 not-there-2
expect_rc "contains: some absent" 1
expect_out "contains lists absent items" $'^absent\tnot-there-1$'
run --json contains "$F" apple not-there-1
expect_rc "contains --json: some absent" 1
expect_json "contains --json" "d['results'] == [{'item':'apple','present':True},{'item':'not-there-1','present':False}] and d['present'] == 1 and d['absent'] == 1 and d['items'] == 2"
run contains "$F" --json apple
expect_json "--json after the command" "d['present'] == 1 and d['absent'] == 0"
run add "$F" -- -dash --also
expect_rc "items after -- may start with '-'" 0
run contains "$F" -- -dash --also
expect_rc "contains items after --" 0
run add "$F" ""
run contains "$F" ""
expect_rc "the empty item as an argument" 0

# ---- stdin batches ----------------------------------------------------------------------
S=$(name stdin)
run init "$S" --expected 20000 --fpp 0.01
python3 -c 'import sys
sys.stdout.write("".join("item-%d\n" % i for i in range(5000)))' >"$WORK/in5000"
run -i "$WORK/in5000" add "$S"
expect_rc "add 5000 items from stdin" 0
expect_out "add from stdin counts 5000" '^5000 items, 5000 added'
run -i "$WORK/in5000" contains "$S"
expect_rc "contains 5000 items from stdin" 0
expect_out "contains from stdin prints counts" '^5000 items, 5000 present, 0 absent$'
if [ "$(lines_of)" = 1 ]; then ok "stdin without --verbose prints one line"; else bad "stdin without --verbose prints one line"; fi
run -i "$WORK/in5000" --json contains "$S" -
expect_json "contains --json from stdin ('-'): counts only" "'results' not in d and d['items'] == 5000 and d['present'] == 5000 and d['absent'] == 0"
run -i "$WORK/in5000" --json --verbose contains "$S"
expect_json "contains --json --verbose from stdin lists 5000" "len(d['results']) == 5000 and all(r['present'] for r in d['results']) and d['results'][4999]['item'] == 'item-4999'"
run -i "$WORK/in5000" -v contains "$S"
if [ "$(lines_of)" = 5000 ] && [ "$(grep -c $'^present\titem-' "$OUT")" = 5000 ]; then ok "contains -v from stdin: 5000 lines"; else bad "contains -v from stdin: 5000 lines"; fi
if [ $have_rediscli -eq 1 ]; then
  # one round trip per batch, not per line: 5000 lines = 5 batches (+ connection setup)
  cmds() { rcli info stats | tr -d '\r' | sed -n 's/^total_commands_processed://p'; }
  before=$(cmds)
  run -i "$WORK/in5000" contains "$S"
  after=$(cmds)
  used=$(( after - before - 1 ))
  if [ "$used" -le 40 ]; then ok "5000 stdin items took $used server commands (batched)"
  else bad "5000 stdin items took $used server commands (batched)"; fi
fi
run -i "$WORK/in5000" --batch 7 contains "$S"
expect_rc "--batch 7" 0
python3 -c 'import sys
sys.stdout.write("".join("other-%d\n" % i for i in range(3000)))' >"$WORK/in3000"
run -i "$WORK/in3000" --json contains "$S"
expect_rc "contains absent items from stdin" 1
expect_json "absent items counted" "d['items'] == 3000 and d['absent'] >= 2900 and d['present'] + d['absent'] == 3000"
cat "$WORK/in5000" "$WORK/in3000" >"$WORK/mixed"
run -i "$WORK/mixed" contains "$S"
expect_rc "5000 present + 3000 absent" 1
run count "$S"
expect_rc "count" 0
if python3 -c 'import sys; c=int(open(sys.argv[1]).read()); sys.exit(0 if abs(c-5000) <= 150 else 1)' "$OUT"; then
  ok "count estimates 5000 items ($(cat "$OUT"))"
else bad "count estimates 5000 items"; fi
run --json count "$S"
expect_json "count --json" "abs(d['count'] - 5000) <= 150"
: >"$WORK/empty"
run -i "$WORK/empty" --json contains "$S"
expect_rc "empty stdin" 0
expect_json "empty stdin counts nothing" "d['items'] == 0"

# line endings, empty lines, a last line without newline, long lines, NUL bytes
L=$(name lines)
run init "$L" --expected 1000 --fpp 0.001
printf 'crlf-item\r\nlf-item\n\nlast-no-newline' >"$WORK/ends"
run -i "$WORK/ends" --json add "$L"
expect_json "4 items from CRLF/LF/empty/unterminated lines" "d['items'] == 4"
run contains "$L" crlf-item lf-item "" last-no-newline
expect_rc "\\r\\n and \\n stripped, empty line = empty item, last line kept" 0
run contains "$L" $'crlf-item\r'
expect_rc "the \\r of \\r\\n is not part of the item" 1
python3 -c 'import sys; sys.stdout.write("L" * 3000000 + "\nshort\n")' >"$WORK/long"
run -i "$WORK/long" add "$L"
expect_out "a 3 MB line is one item" '^2 items'
run -i "$WORK/long" contains "$L"
expect_rc "the 3 MB line reads back present" 0
printf 'nul\000inside\n' >"$WORK/nul"
run -i "$WORK/nul" add "$L"
run -i "$WORK/nul" --json --verbose contains "$L"
expect_json "an item with a NUL byte" "d['results'][0]['item'] == 'nul\\x00inside' and d['present'] == 1"
run contains "$L" nul
expect_rc "the NUL byte is part of the item" 1

# JSON escaping
E=$(name esc)
run init "$E" --expected 1000 --fpp 0.01
printf '%s\n' 'quote"q' 'back\slash' $'tab\there' $'ctl\001x' 'héllo wörld ✓ 𝄞' $'bad\xffbyte' $'trunc\xe2\x82' >"$WORK/esc"
run -i "$WORK/esc" add "$E"
run -i "$WORK/esc" --json -v contains "$E"
expect_rc "escaped items present" 0
expect_json "JSON escapes quote, backslash, tab, control chars; UTF-8 kept" "[r['item'] for r in d['results'][:5]] == ['quote\"q', 'back\\\\slash', 'tab\\there', 'ctl\\x01x', 'héllo wörld ✓ 𝄞'] and all('item_hex' not in r for r in d['results'][:5])"
expect_json "invalid UTF-8 becomes U+FFFD with item_hex" "d['results'][5]['item'] == 'bad\\ufffdbyte' and d['results'][5]['item_hex'] == b'bad\\xffbyte'.hex() and d['results'][6]['item_hex'] == b'trunc\\xe2\\x82'.hex()"
if grep -q $'\001' "$OUT"; then bad "no raw control characters in JSON"; else ok "no raw control characters in JSON"; fi
run contains "$E" 'héllo wörld ✓ 𝄞'
expect_rc "UTF-8 item as an argument" 0

# hash tags
T=$(name "a{tag}b")
run init "$T" --expected 100 --fpp 0.01
expect_rc "init a name with a hash tag" 0
run add "$T" x y
run contains "$T" x y
expect_rc "hash-tag name: add + contains" 0
if [ $have_rediscli -eq 1 ]; then
  if [ "$(rcli exists "$T:config")" = 1 ]; then ok "hash-tag name: config at NAME:config"; else RC=0; bad "hash-tag name: config at NAME:config"; fi
fi

# a server that does not answer in time (CLIENT PAUSE): exit 2 within the timeout
if [ $have_rediscli -eq 1 ]; then
  rcli client pause 2500 all >/dev/null
  start=$(date +%s%N)
  run --timeout-ms 300 count "$S"
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  expect_rc "paused server with --timeout-ms 300" 2
  expect_err "paused server names BG_ETIMEOUT" 'BG_E(TIMEOUT|CONN)'
  if [ "$ms" -lt 2400 ]; then ok "gave up before the pause ended (${ms} ms)"; else RC=0; bad "gave up before the pause ended (${ms} ms)"; fi
  rcli client unpause >/dev/null
fi

# ---- expire / persist / delete ------------------------------------------------------------
run expire "$F" --ttl-ms 600000
expect_rc "expire" 0
expect_out "expire applied" 'expires in 600000 ms'
if [ $have_rediscli -eq 1 ]; then
  a=$(rcli pttl "$F"); b=$(rcli pttl "{$F}:config")
  if [ "$a" -gt 0 ] && [ "$b" -gt 0 ]; then ok "expire sets a TTL on both keys"; else RC=0; bad "expire sets a TTL on both keys" "pttl $a $b"; fi
fi
run --json persist "$F"
expect_rc "persist" 0
expect_json "persist --json" "d['applied'] is True"
if [ $have_rediscli -eq 1 ]; then
  a=$(rcli pttl "$F"); b=$(rcli pttl "{$F}:config")
  if [ "$a" = -1 ] && [ "$b" = -1 ]; then ok "persist clears both TTLs"; else RC=0; bad "persist clears both TTLs" "pttl $a $b"; fi
fi
run --json persist "$F"
expect_json "persist again applies nothing" "d['applied'] is False"
X=$(name short)
run init "$X" --expected 100 --fpp 0.01
run --json expire "$X" --ttl-ms 300
expect_json "expire --json" "d['applied'] is True and d['ttlMs'] == 300"
sleep 0.8
run info "$X"
expect_rc "filter gone after its TTL" 2
run --json expire "$(name nothing)" --ttl-ms 1000
expect_json "expire on a missing filter applies nothing" "d['applied'] is False"
run delete "$F"
expect_rc "delete" 0
expect_out "delete says deleted" '^deleted '
run --json delete "$F"
expect_json "delete again" "d['deleted'] is False"
run info "$F"
expect_rc "info after delete" 2

echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
