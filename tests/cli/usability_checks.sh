# Sourced by tests/cli/run.sh (its helpers: run, run_raw, expect_*, name, rcli): --version, each
# command's help, errors as JSON objects, `add --from` and its bulk path into an empty filter, and
# the progress bar of `add`.

# ---- --version ------------------------------------------------------------------------------
run_raw --version
expect_rc "--version" 0
expect_out "--version prints the version line" '^bloomguard [0-9]+\.[0-9]+\.[0-9]+ \(library '
run_raw --json --version
expect_json "--version --json" 'isinstance(d["cli"], str) and isinstance(d["libraryNumber"], int)'
run_raw --version info x
expect_rc "--version with another command" 64

# ---- help: a command's own options; the global ones in bloomguard --help ------------------
run_raw --help
expect_out "bloomguard --help lists the global options" '^  --tls-ca-file PATH'
expect_out "bloomguard --help lists --quiet" '^  --quiet '
for c in info init add contains count delete expire persist rotate version; do
  run_raw "$c" --help
  if grep -q -- '--tls-ca-file\|--password-file PATH\|--timeout-ms MS ' "$OUT"; then
    bad "$c --help lists no global option"
  else ok "$c --help lists no global option"; fi
  expect_out "$c --help points to bloomguard --help" "see 'bloomguard --help'"
done
run_raw add --help
expect_out "add --help lists --from" '^  --from FILE '
if [ "$(lines_of)" -le 40 ]; then ok "add --help is $(lines_of) lines"; else bad "add --help is $(lines_of) lines (at most 40)"; fi
# the item format, JSON and exit statuses: once, in bloomguard --help / bloomguard help
for c in add contains rotate; do
  run_raw "$c" --help
  if grep -q '^Exit status' "$OUT" || grep -q '^Items from stdin' "$OUT"; then bad "$c --help repeats the global footer"
  else ok "$c --help does not repeat the global footer"; fi
done
run_raw help
expect_rc "bloomguard help" 0
expect_out "bloomguard help: the exit statuses" '^  64  usage error'
expect_out "bloomguard help: the item format" '^Items from stdin'

# ---- --json: errors are an object on stdout, exit statuses unchanged -------------------------
run --json info "$(name json-missing)"
expect_rc "--json error: missing filter" 2
expect_json "--json error: BG_ENOTINIT object" \
  "d['error']['code'] == -12 and d['error']['name'] == 'BG_ENOTINIT' and 'not initialized' in d['error']['message']"
expect_err "--json error: the message is on stderr too" 'BG_ENOTINIT'
run info "$(name plain-missing)"
if [ ! -s "$OUT" ]; then ok "without --json an error prints nothing on stdout"; else bad "without --json an error prints nothing on stdout"; fi
run_raw --json --url redis://127.0.0.1:1 --timeout-ms 500 count x
expect_rc "--json error: unreachable server" 2
expect_json "--json error: BG_ECONN object" "d['error']['name'] in ('BG_ECONN', 'BG_ETIMEOUT') and d['error']['code'] < 0"
run_raw --json frobnicate x
expect_rc "--json usage error" 64
expect_json "--json usage error: BG_EINVAL object" "d['error']['name'] == 'BG_EINVAL' and 'unknown command' in d['error']['message']"
run_raw count x --frob --json
expect_rc "--json after the bad option" 64
expect_json "--json after the bad option: still an object" "d['error']['code'] == -1"
run --json add "$(name nofile)" --from "$WORK/does-not-exist"
expect_rc "--json add --from a missing file" 2
expect_json "--json add --from a missing file: object" "'cannot open' in d['error']['message']"
run_raw --json lock x --mode sideways
expect_rc "--json lock usage error" 64
expect_json "--json lock usage error: object" "d['error']['name'] == 'BG_EINVAL'"

# ---- add --from, and the bulk path into an empty filter --------------------------------------
python3 -c 'import sys
sys.stdout.write("".join("bulk-%d\n" % i for i in range(20000)))' >"$WORK/bulk20000"
B=$(name bulk)
run init "$B" --expected 50000 --fpp 0.001
run --json info "$B"
cp "$OUT" "$WORK/bulk.info"
run add "$B" --from "$WORK/bulk20000"
expect_rc "add --from into an empty filter" 0
expect_out "add --from into an empty filter takes the bulk path" '^20000 items, loaded into the empty filter in one build'
run --json info "$B"
if cmp -s "$OUT" "$WORK/bulk.info"; then ok "bulk path: the config (size, hashIterations, n, p) is unchanged"
else bad "bulk path: the config (size, hashIterations, n, p) is unchanged"; fi
run -i "$WORK/bulk20000" contains "$B"
expect_rc "bulk path: every item present" 0
run --json count "$B"
expect_json "bulk path: count estimates 20000" "abs(d['count'] - 20000) <= 600"
if [ $have_rediscli -eq 1 ]; then
  n=$(rcli exists "{$B}:rotation" "{$B}:delta")
  if [ "$n" = 0 ]; then ok "bulk path: no rotation keys left"; else bad "bulk path: no rotation keys left" "$n exist"; fi
fi
run --json add "$B" --from "$WORK/bulk20000"
expect_json "into a filter holding items: the plain path, one round trip per batch" \
  "d['bulk'] is False and d['items'] == 20000 and d['added'] == 0"
B2=$(name bulk-stdin)
run init "$B2" --expected 50000 --fpp 0.001
run -i "$WORK/bulk20000" --json add "$B2"
expect_json "stdin into an empty filter: the bulk path too" "d['bulk'] is True and d['items'] == 20000 and d['added'] is None"
# a filter holding a single item is not empty: the plain path (the emptiness check's control)
B3=$(name bulk-one)
run init "$B3" --expected 50000 --fpp 0.001
run add "$B3" lonely-item
run --json add "$B3" --from "$WORK/bulk20000"
expect_json "one item already in the filter: the plain path" "d['bulk'] is False and d['items'] == 20000"
run contains "$B3" lonely-item bulk-0 bulk-19999
expect_rc "the earlier item and the new ones are present" 0
# a filter that does not exist: created by the bulk path with --expected and --fpp, else BG_ENOTINIT
B4=$(name bulk-new)
run --json add "$B4" --from "$WORK/bulk20000" --expected 30000 --fpp 0.01
expect_json "a new filter, given --expected and --fpp: the bulk path creates it" "d['bulk'] is True and d['items'] == 20000"
run --json info "$B4"
expect_json "the new filter's config" "d['expectedInsertions'] == 30000 and d['falseProbability'] == 0.01"
run add "$(name bulk-none)" --from "$WORK/bulk20000"
expect_rc "a new filter without --expected and --fpp" 2
expect_err "a new filter without --expected and --fpp: BG_ENOTINIT" 'BG_ENOTINIT'
run_raw add x --from "$WORK/bulk20000" --expected 5
expect_rc "add --expected without --fpp" 64
run_raw add x item --from "$WORK/bulk20000"
expect_rc "add --from with ITEM arguments" 64

# ---- contains --from --------------------------------------------------------------------------
run contains "$B" --from "$WORK/bulk20000"
expect_rc "contains --from: every item present" 0
expect_out "contains --from: the counts" '^20000 items, 20000 present, 0 absent'
cp "$WORK/bulk20000" "$WORK/bulk20000-plus"
echo "never-added" >>"$WORK/bulk20000-plus"
run --json contains "$B" --from "$WORK/bulk20000-plus"
expect_rc "contains --from: an absent item" 1
expect_json "contains --from: JSON counts" "d['items'] == 20001 and d['present'] == 20000 and d['absent'] == 1"
run -v contains "$B" --from "$WORK/bulk20000-plus"
expect_out "contains --from -v: lists each item" '^absent	never-added'
run_raw contains x item --from "$WORK/bulk20000"
expect_rc "contains --from with ITEM arguments" 64
run contains "$B" --from "$WORK/does-not-exist"
expect_rc "contains --from a missing file" 2
expect_err "contains --from a missing file: says so" 'cannot open'

# ---- progress bar of add: on a terminal only, not with --quiet, never when piped ----------------
python3 -c 'import sys
sys.stdout.write("".join("slow-%d\n" % i for i in range(150000)))' >"$WORK/add150000"
run add "$B" --from "$WORK/add150000"
expect_rc "add 150000 items (piped)" 0
if [ ! -s "$ERR" ]; then ok "add piped: nothing on stderr"; else bad "add piped: nothing on stderr"; fi
if command -v script >/dev/null 2>&1 && script -qc true /dev/null >/dev/null 2>&1; then
  script -qc "'$BG' --url '$URL' add '$B' --from '$WORK/add150000'" /dev/null >"$WORK/tty" 2>&1 </dev/null
  RC=$?
  OUT=$WORK/tty expect_rc "add on a terminal" 0
  if grep -aq $'\r''add .*: adding  [0-9]* items  [0-9]* items/s' "$WORK/tty" && grep -aq $'\033\[K' "$WORK/tty"; then
    ok "add on a terminal: progress bar (items, items/s) redrawn in place"
  else bad "add on a terminal: progress bar (items, items/s) redrawn in place"; fi
  if grep -aq $'\r''add .*: adding  [0-9]* items  [0-9]* items/s  [0-9]*%' "$WORK/tty"; then
    ok "add --from a file on a terminal: the share of the file read"
  else bad "add --from a file on a terminal: the share of the file read"; fi
  if grep -aq "rotate $B --from FILE" "$WORK/tty"; then bad "add on a terminal: no hint before it ran long"
  else ok "add on a terminal: no hint before it ran long"; fi
  BLOOMGUARD_ADD_HINT_MS=0 script -qc "'$BG' --url '$URL' add '$B' --from '$WORK/add150000'" /dev/null >"$WORK/tty" 2>&1 </dev/null
  if grep -aq "add: $B already holds items.*'bloomguard rotate $B --from FILE" "$WORK/tty"; then
    ok "a long add into a filter holding items hints at rotate --from"
  else bad "a long add into a filter holding items hints at rotate --from"; fi
  BLOOMGUARD_ADD_HINT_MS=0 script -qc "'$BG' --url '$URL' --quiet add '$B' --from '$WORK/add150000'" /dev/null >"$WORK/tty" 2>&1 </dev/null
  if grep -aq "rotate $B --from FILE" "$WORK/tty"; then bad "add --quiet: no hint"
  else ok "add --quiet: no hint"; fi
  script -qc "'$BG' --url '$URL' --quiet add '$B' --from '$WORK/add150000'" /dev/null >"$WORK/tty" 2>&1 </dev/null
  if grep -aq $'\r''add ' "$WORK/tty"; then bad "add --quiet on a terminal: no progress bar"
  else ok "add --quiet on a terminal: no progress bar"; fi
  B5=$(name bulk-tty)
  run init "$B5" --expected 200000 --fpp 0.001
  script -qc "'$BG' --url '$URL' add '$B5' --from '$WORK/add150000'" /dev/null >"$WORK/tty" 2>&1 </dev/null
  if grep -aq $'\r''add .*: building  [0-9]* items' "$WORK/tty"; then ok "bulk add on a terminal: the rotation's bar"
  else bad "bulk add on a terminal: the rotation's bar"; fi
fi
