# `bloomguard stats NAME` (sourced by run.sh): the probes it makes are the queries it counts and
# the contains histogram's count, as text and --json; a filter that does not exist shows its
# failures by class; --probes 0 measures nothing (the control: no histogram at all); bad values.
S=$(name stats)
run init "$S" --expected 1000 --fpp 0.01
expect_rc "stats: init" 0
run stats "$S" --probes 25
expect_rc "stats" 0
expect_out "stats counts the probes" '^  queries: 25$'
expect_out "stats: answers from Redis" '^  answersRedis: 25$'
expect_out "stats: the contains histogram" '^  contains ok: 25, mean [0-9.]+ (us|ms), p50 <= [0-9.]+ (us|ms), p99 <= '
expect_out "stats: connections" '^  connections: [1-9]'
run --json stats "$S" --probes 40
expect_json "stats --json" 'd["name"].endswith("stats") and d["probes"] == 40 and d["stats"]["queries"] == 40 and d["stats"]["answersRedis"] == 40 and [(h["operation"], h["outcome"], h["count"]) for h in d["histograms"]] == [("contains", "ok", 40)] and sum(d["histograms"][0]["counts"]) == 40 and len(d["histograms"][0]["bounds"]) + 1 == len(d["histograms"][0]["counts"]) and d["histograms"][0]["bounds"][0] == 1e-06 and d["client"]["connections"] >= 1'
run --json stats "$S" --probes 0
expect_json "stats --probes 0 measures nothing" 'd["probes"] == 0 and d["histograms"] == [] and d["stats"]["queries"] == 0'
run --json stats "$(name stats-missing)" --probes 5
expect_json "stats of a missing filter: one failed probe, by class" 'd["probes"] == 1 and d["stats"]["failNotInitialized"] == 1 and d["stats"]["queryErrors"] == 1 and [(h["operation"], h["outcome"], h["count"]) for h in d["histograms"]] == [("contains", "not_initialized", 1)]'
run stats "$S" --probes -1
expect_rc "stats --probes -1" 64
expect_err "stats --probes -1: message" "probes: '-1' is not a number of queries"
run count "$S" --probes 3
expect_rc "--probes on another command" 64
run_raw stats --help
expect_out "stats --help" 'usage: bloomguard .*stats NAME'
