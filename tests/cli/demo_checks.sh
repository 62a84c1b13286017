# Checks of bloomguard-demo (tools/demo), sourced by tests/cli/run.sh when it is given the demo's
# path as $DEMO (uses its ok, bad, expect_* helpers and $BG $URL $WORK $OUT $ERR).
#
# A small run (20000 items, 2 s per scenario) with the demo's own redis-server:
#  - the table has its header and one row per strategy; locked is either measured or "n/a";
#  - naive shows errors or false negatives while swap shows 0 and 0: the same harness seeing
#    naive fail is the negative control of swap's zeros; locked shows no false negative;
#  - degrade answers from the policy (assumed present) and has no false negative;
#  - the SVG parses as XML and has a panel per scenario with the rotations marked;
#  - the server it started is gone afterwards (it prints its pid);
#  - the library's events are printed as they come (rotations, the degrade run's breaker).
# Then: the clear message when redis-server is not on PATH, usage errors, and --url mode
# (degrade skipped, JSON summary, no key left behind).

echo "# demo"

run_demo() { # the demo with ARGS, stdin from /dev/null, like run_raw
  timeout 120 "$DEMO" "$@" </dev/null >"$OUT" 2>"$ERR"
  RC=$?
}

DEMO_SVG=$WORK/demo.svg
timeout 120 "$DEMO" --items 20000 --seconds 2 --plot "$DEMO_SVG" </dev/null >"$OUT" 2>"$ERR"
RC=$?
expect_rc "demo runs with its own redis-server" 0
cp "$OUT" "$WORK/demo-table"
# the library's events, printed as they come (on stderr): a rotation committed in each scenario,
# the degrade run's breaker opening and closing again once the server is back
expect_err "demo prints the events: swap's rotations" '^demo: swap +event \+ *[0-9.]+ s rotator: rotation_commit: rotation of filter "[^"]*swap" committed \(swap\)'
expect_err "demo prints the events: the breaker opens" '^demo: degrade +event .* readers: breaker_open: circuit breaker of filter'
expect_err "demo prints the events: the breaker closes" '^demo: degrade +event .* readers: breaker_closed: '
expect_err "demo prints the events: degraded answers" '^demo: degrade +event .* readers: degraded: filter .*answers? from the degrade policy'
expect_out "demo table header" '^strategy +queries +errors +false-neg +p50 ms +p99 ms +max ms +rebuilds +rebuild s +redis +assumed +other$'
# a measured row: name, then 11 fields (counts, latencies, "ok/total", seconds, answers)
ROW_RE='^%s +[0-9]+ +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9]+/[0-9]+ +[0-9.]+ +[0-9]+ +[0-9]+ +[0-9]+$'
for s in naive swap degrade; do
  # shellcheck disable=SC2059
  expect_out "demo table row: $s" "$(printf "$ROW_RE" "$s")"
done
# shellcheck disable=SC2059
expect_out "demo table row: locked (measured, or n/a until the lock engine lands)" \
  "$(printf "$ROW_RE" locked)|^locked +n/a: not built"
col() { awk -v s="$1" -v c="$2" '$1 == s { print $c }' "$WORK/demo-table"; } # STRATEGY COLUMN
if [ "$(( $(col naive 3) + $(col naive 4) ))" -gt 0 ]; then ok "demo: naive shows errors or false negatives"
else bad "demo: naive shows errors or false negatives" "errors $(col naive 3) false-neg $(col naive 4)"; fi
if [ "$(col swap 3)" = 0 ] && [ "$(col swap 4)" = 0 ] && [ "$(col swap 2)" -gt 0 ]; then
  ok "demo: swap has 0 errors, 0 false negatives over $(col swap 2) queries"
else bad "demo: swap has 0 errors and 0 false negatives" "queries $(col swap 2) errors $(col swap 3) false-neg $(col swap 4)"; fi
# locked: readers wait for the write lock (up to BG_OPT_WRITE_LOCK_WAIT_MS, then BG_ELOCKED: an error on a
# machine slow enough), but never read a half-written bitmap: no false negative
if grep -Eq '^locked +n/a' "$WORK/demo-table"; then ok "demo: locked is n/a in this build"
elif [ "$(col locked 4)" = 0 ] && [ "$(col locked 2)" -gt 0 ]; then
  ok "demo: locked has 0 false negatives over $(col locked 2) queries ($(col locked 3) errors)"
else bad "demo: locked has 0 false negatives" "queries $(col locked 2) false-neg $(col locked 4)"; fi
if [ "$(col degrade 4)" = 0 ] && [ "$(col degrade 11)" -gt 0 ]; then
  ok "demo: degrade answers from the policy ($(col degrade 11) assumed present), no false negative"
else bad "demo: degrade answers from the policy, no false negative" "false-neg $(col degrade 4) assumed $(col degrade 11)"; fi
expect_out "demo: the table names the plot" "^plot: $DEMO_SVG\$"
if msg=$(python3 - "$DEMO_SVG" "$(col naive 3)" 2>&1 <<'PY'
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
ns = "{http://www.w3.org/2000/svg}"
assert root.tag == ns + "svg", root.tag
panels = [g.get("id") for g in root.iter(ns + "g") if (g.get("id") or "").startswith("panel-")]
for p in ("panel-naive", "panel-swap", "panel-degrade"):
    assert p in panels, "missing " + p + " in " + repr(panels)
classes = [e.get("class") for e in root.iter() if e.get("class")]
assert classes.count("rotation-commit") >= 6, "rotation commits marked: %d" % classes.count("rotation-commit")
assert "outage" in classes, "no outage marked"
assert any(e.tag == ns + "polyline" for e in root.iter()), "no latency line"
# every panel's counts strip has labelled ticks (0, 1, 10, ...); the naive run's errors show as
# bars of their own however many false negatives it had
for g in root.iter(ns + "g"):
    if (g.get("id") or "").startswith("panel-"):
        ticks = [t.text for t in g.iter(ns + "text") if t.get("class") == "count-tick"]
        assert ticks[:3] == ["0", "1", "10"], (g.get("id"), ticks)
naive = next(g for g in root.iter(ns + "g") if g.get("id") == "panel-naive")
if int(sys.argv[2]) > 0:
    assert any(e.get("class") == "errors" for e in naive.iter()), "the naive run's errors are not drawn"
PY
); then ok "demo: the SVG parses as XML, one panel per scenario, rotations and the outage marked, counts on their own labelled scale"
else bad "demo: the SVG parses as XML with its panels" "$msg"; fi
DEMO_PID=$(sed -n 's/.* on 127\.0\.0\.1:[0-9]* (pid \([0-9]*\)).*/\1/p' "$ERR")   # redis-server, or the valkey-server of BG_REDIS_SERVER
if [ -n "$DEMO_PID" ] && ! kill -0 "$DEMO_PID" 2>/dev/null; then ok "demo: its redis-server (pid $DEMO_PID) is stopped"
else bad "demo: its redis-server is stopped" "pid '${DEMO_PID}'"; fi

# redis-server not installed: a clear message, exit 2, nothing started
mkdir -p "$WORK/nobin"
timeout 60 env -u BG_REDIS_SERVER -u BLOOMGUARD_REDIS_SERVER PATH="$WORK/nobin" "$DEMO" --items 1000 --seconds 1 \
  </dev/null >"$OUT" 2>"$ERR"
RC=$?
expect_rc "demo without redis-server on PATH" 2
expect_err "demo: says redis-server is not installed" 'redis-server is not installed'
expect_err "demo: says how to get it or use --url" 'apt-get install redis-server.*|--url redis://HOST:PORT'

run_demo --strategies naive,bogus
expect_rc "demo: unknown strategy" 64
run_demo --items 5
expect_rc "demo: --items out of range" 64

# --url: a server the demo did not start - degrade is skipped, its keys are removed
run_demo --url "$URL" --items 5000 --seconds 1 --strategies swap,degrade --json --plot ""
expect_rc "demo --url" 0
expect_json "demo --url --json: swap ran clean, degrade skipped" \
  "[s['strategy'] for s in d['scenarios']] == ['swap', 'degrade'] and d['server'] == 'external' and \
   d['scenarios'][0]['ran'] and d['scenarios'][0]['errors'] == 0 and d['scenarios'][0]['falseNegatives'] == 0 and \
   d['scenarios'][0]['rotations'] == 3 and not d['scenarios'][1]['ran'] and \
   d['scenarios'][1]['note'].startswith('skipped') and d['plot'] is None"
# the filters are deleted; the rotations' staging keys (the spare bitmap a commit keeps) are not
# the demo's to delete - they must carry the demo's 30 s staging TTL
if [ $have_rediscli -eq 1 ]; then
  left=""
  for k in $(rcli --scan --pattern '*bloomguard-demo*'); do
    t=$(rcli pttl "$k")
    if [ "$t" -lt 1 ] || [ "$t" -gt 30000 ]; then left="$left $k(pttl $t)"; fi
  done
  if [ -z "$left" ]; then ok "demo --url leaves no key behind (but staging keys expiring within 30 s)"
  else RC=0; bad "demo --url leaves no key behind" "$left"; fi
fi
