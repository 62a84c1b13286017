"""The cross-language rotate-vs-query race (tests/race/README.md).

Readers in C, Python, Go, Java (Redisson) and Java through bloomguard's binding ("jbg": blocking
and async queries), and adders in C, Python and Go, run against one
redis-server while rotators in C, Python and Go take turns rotating the same filter. One more C
reader, "c1", is the same worker built against hiredis 1.x: its queries read the bits alone under
tracking (README, "Queries and tracking"), and it must have done so.

  swap, locked: 0 reader errors, 0 false negatives (base items are in every generation; an added
                item is queried only after its add returned OK), 0 add and rotation errors, and
                the final bitmap byte-identical to a reference built from every item the
                database ever held (one known LOCKED defect: see test_locked_resize_bits.py);
  naive:        the control - errors or false negatives must be observed (by bloomguard readers
                and by Redisson readers), or the harness proves nothing and the suite fails.
Redisson readers are asserted where rotation.h says Redisson is right: swap to unchanged (n, p)
(every item) and locked to unchanged (n, p) (items in both generations: the base items).

  native-swap:  the server's own BF.* filter (RedisBloom): C, Python, asyncio and Go readers
                through swap rotations, 0 errors, 0 false negatives, every database item present
                at the end and the capacity the last rotation's; native-naive (DEL + RESERVE +
                MADD) is its control and must be caught.
  cluster-partitioned: a partitioned filter while slots of several partitions migrate (no
                Redisson reader: it cannot read one; rotators behind ROTATE_PARTITIONED): 0 reader
                errors, 0 false negatives, 0 add errors, every worker's tryInit kept the filter
                and its info() read P, and every database item present at the end; its control
                (cluster-partitioned-fault) must see false negatives.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List

import pytest

from conftest import record_table
from report import table
from cluster_race import ClusterTarget
from scenario import Outcome, Race, Scenario, Standalone, race_languages
from workers import WRITERS

SAME = [20000]
PARTITIONS = 32
#: Rotators in the partitioned scenarios: C, Python and Go rotators take turns as in cluster-swap
#: (3 rounds of 6; the control 1 round), keeping the live P, and every rotation is asserted done
#: without an error (False: readers and adders only).
ROTATE_PARTITIONED = True
RESIZE = [20000, 30000]   # alternating: every other rotation changes size and k under the readers
BLOOMGUARD_READERS = ("c", "c1", "python", "pyaio", "go", "jbg")
#: A library defect the cluster scenarios find (reported, not fixed here: csrc/ is not this
#: suite's to change). The delta merge of a rotation's drain and commit scripts (LRANGE, then
#: LTRIM that deletes the list once consumed, then LRANGE again) touches a key it deleted
#: itself; while the slot is MIGRATING, Redis refuses that command inside the script, leaving
#: what ran before it applied. The rotation fails; a LOCKED one leaves bgRebuilding set and
#: bloomguard readers answer BG_ELOCKED until the next rotation. While this message shows in a
#: cluster scenario's errors, its error counts xfail (false negatives and the bitmap are
#: still asserted); once fixed, it never shows and every count is asserted again.

SCENARIOS = [
    pytest.param(Scenario("swap", "same", SAME), id="swap-same"),
    pytest.param(Scenario("swap", "resize", RESIZE), id="swap-resize"),
    pytest.param(Scenario("locked", "same", SAME), id="locked-same"),
    pytest.param(Scenario("locked", "resize", RESIZE), id="locked-resize"),
    # the control is caught within a few rotations; 96 keep it certain without costing minutes
    pytest.param(Scenario("naive", "same", SAME, rounds=4, per_process=8), id="naive-same"),
    # the server's own BF.* filters (RedisBloom loaded into the same redis-server version): swap
    # rotations by C, Python and Go under C, Python, asyncio and Go readers; the naive rebuild of a
    # native filter (DEL, BF.RESERVE, BF.MADD) is the control
    pytest.param(Scenario("swap", "same", SAME, rounds=4, per_process=6, native=True), id="native-swap"),
    pytest.param(Scenario("naive", "same", SAME, rounds=2, per_process=6, native=True), id="native-naive"),
    # a native filter on the cluster (its nodes load RedisBloom) while its slot migrates: the key
    # first, then the rotation's keys; its control, the naive rebuild there
    pytest.param(Scenario("swap", "same", SAME, rounds=2, per_process=6, cluster=True, max_legs=24, min_legs=4,
                          native=True), id="cluster-native-swap"),
    pytest.param(Scenario("naive", "same", SAME, rounds=1, per_process=6, cluster=True, max_legs=24, min_legs=2,
                          native=True), id="cluster-native-naive"),
    # on a 6-node Redis Cluster while the filter's slot migrates back and forth between two
    # masters (cluster_race.py): fewer rotations (3 rounds of 6: 54), 4 to 24 one-way migrations
    pytest.param(Scenario("swap", "same", SAME, rounds=3, per_process=6, cluster=True, max_legs=24, min_legs=4),
                 id="cluster-swap"),
    pytest.param(Scenario("locked", "same", SAME, rounds=3, per_process=6, cluster=True, max_legs=24,
                          min_legs=4), id="cluster-locked"),
    # the controls there: the same harness, migrations included, must catch the naive rebuild,
    # and a C reader that follows ASK wrongly (tests/race/c/fault.h) amid correct swaps
    pytest.param(Scenario("naive", "same", SAME, rounds=1, per_process=8, cluster=True, max_legs=24, min_legs=2),
                 id="cluster-naive"),
    pytest.param(Scenario("swap", "same", SAME, rounds=1, per_process=6, cluster=True, max_legs=24, min_legs=4,
                          fault_reader=True), id="cluster-fault"),
    # a partitioned filter (P = 32) on the cluster while the slots of 8 of its partitions, spread
    # over the three masters, migrate there and back together: 8 legs at least, readers and adders
    # throughout; rotators as in cluster-swap once ROTATE_PARTITIONED is on
    pytest.param(Scenario("swap", "same", SAME, rounds=3, per_process=6, cluster=True, max_legs=24, min_legs=8,
                          partitions=PARTITIONS, moved_partitions=8, rotate=ROTATE_PARTITIONED),
                 id="cluster-partitioned"),
    # the same with locked rotations: each partition rewritten in place while its queries wait
    pytest.param(Scenario("locked", "same", SAME, rounds=3, per_process=6, cluster=True, max_legs=24, min_legs=8,
                          partitions=PARTITIONS, moved_partitions=8, rotate=ROTATE_PARTITIONED),
                 id="cluster-partitioned-locked"),
    # its control: the cfault reader reads a partition's bits without its meta check after an ASK
    pytest.param(Scenario("swap", "same", SAME, rounds=1, per_process=6, cluster=True, max_legs=24, min_legs=4,
                          partitions=PARTITIONS, moved_partitions=8, rotate=ROTATE_PARTITIONED, fault_reader=True),
                 id="cluster-partitioned-fault"),
    # and the control of its rotations: the naive rebuild of a partitioned filter (delete, init of
    # the same P, re-add) under the same readers must be caught
    pytest.param(Scenario("naive", "same", SAME, rounds=1, per_process=6, cluster=True, max_legs=24, min_legs=4,
                          partitions=PARTITIONS, moved_partitions=8, rotate=True),
                 id="cluster-partitioned-naive"),
]


def run(scenario: Scenario, server, worker_commands: Dict[str, List[str]], langs: List[str],
        tmp_path: Path) -> Outcome:
    outcome = Race(scenario, server, worker_commands, langs, tmp_path).run()
    record_table(table(outcome))
    return outcome


def every_worker_worked(o: Outcome, langs: List[str]) -> None:
    readers, adders = o.by_lang("query"), o.by_lang("add")
    rotators = o.by_lang("rotate")
    writers = sorted(set(langs) & set(WRITERS))
    for lang in langs:
        assert readers.get(lang, {}).get("queries", 0) > 0, "%s reader made no query" % lang
    for lang in writers:
        assert adders.get(lang, {}).get("adds", 0) + adders.get(lang, {}).get("add_errors", 0) > 0, \
            "%s adder made no add" % lang
    assert sorted(rotators) == (writers if o.scenario.rotate else []), "a writing language did not rotate"
    if "c1" in langs:  # built against hiredis 1.x: its queries must have taken the tracked path
        assert readers["c1"].get("tracked", 0) > 0, "the c1 reader never read the bits alone (tracking off?)"
    for lang in ("python", "pyaio", "go"):  # the bindings always compile hiredis >= 1.0: they track too
        if lang in langs:
            # summed over the language's readers: each reported it (absent or 0: it did not)
            assert readers[lang].get("can_track"), \
                "the %s reader did not report that it can track (can_track: %r)" % (lang, readers[lang].get("can_track"))
            assert readers[lang].get("tracked", 0) > 0, \
                "the %s reader never read the bits (native: BF.MEXISTS) alone" % lang
    if "jbg" in langs:  # the jar's native embeds the vendored hiredis (>= 1.0): it tracks
        assert readers["jbg"].get("tracked", 0) > 0, "the jbg reader never read the bits alone"
        # its third thread's futures on the submission queue: the async path was exercised
        assert readers["jbg"].get("async_queries", 0) > 0, "the jbg reader made no async query"


def migrations_reached_the_workers(o: Outcome) -> None:
    """The cluster scenarios prove something only if the slot moved under the workers' traffic:
    some bloomguard call met a half-moved slot (ASK or TRYAGAIN) and one a moved one (MOVED)."""
    assert o.legs >= o.scenario.min_legs, "only %d slot migrations" % o.legs
    total = o.by_lang()
    seen = {k: sum(total.get(lang, {}).get(k, 0) for lang in BLOOMGUARD_READERS + WRITERS)
            for k in ("cluster_moved", "cluster_ask", "cluster_busy")}
    assert seen["cluster_moved"] > 0, "no worker followed a MOVED in %d migrations" % o.legs
    assert seen["cluster_ask"] + seen["cluster_busy"] > 0, \
        "no worker met a half-migrated slot (ASK, TRYAGAIN) in %d migrations" % o.legs


def every_worker_saw_the_partitioned_filter(o: Outcome) -> None:
    """Each worker's tryInit at start (C, Python, asyncio, Go) kept the harness's partitioned filter,
    and its info() read the filter's P."""
    for c in o.counts:
        who = "%s %s worker" % (c["lang"], c["role"])
        assert c.get("partitions") == o.scenario.partitions, "%s: info() read P = %s, not %d" % (
            who, c.get("partitions"), o.scenario.partitions)
        assert c.get("init_created") == 0, "%s: its tryInit created the filter the harness had made" % who


def final_partitioned_filter_is_whole(o: Outcome) -> None:
    """The config (P, k of (n, p), at least a plain filter's bits in all) and every item the
    database ever held present - a query of each (the reference bitmap is a plain filter's)."""
    import bloomguard
    m, k = bloomguard.optimal_params(o.last_expected, o.scenario.fpp)
    assert (o.final_partitions, o.final_k) == (o.scenario.partitions, k), \
        "final filter: P %d, k %d; want P %d, k %d" % (o.final_partitions, o.final_k, o.scenario.partitions, k)
    assert o.final_size >= m, "final filter: %d bits in all, fewer than a plain filter's %d" % (o.final_size, m)
    assert o.missing == 0, "%d of %d database items absent at the end" % (o.missing, o.db_items)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_rotate_vs_query(scenario: Scenario, request, worker_commands, langs, tmp_path) -> None:
    # the cluster is started only when a cluster scenario runs; the others keep their server
    if scenario.cluster:
        server = ClusterTarget(request.getfixturevalue("redis_cluster"))
    elif scenario.native:
        server = Standalone(request.getfixturevalue("redisbloom_server"))
    else:
        server = Standalone(request.getfixturevalue("redis_server"))
    o = run(scenario, server, worker_commands, langs, tmp_path)
    langs = race_languages(scenario, langs)
    every_worker_worked(o, langs)
    if scenario.cluster:
        migrations_reached_the_workers(o)
    if scenario.partitions:
        every_worker_saw_the_partitioned_filter(o)
    readers = o.by_lang("query")
    errors = "\n".join(o.first_errors())

    if scenario.fault_reader:  # the control of the cluster scenarios' redirect handling
        fn = readers.get("cfault", {}).get("false_negatives", 0)
        assert fn > 0, ("negative control: a reader answering ASK with a bits-only read on the importing node "
                        "saw no false negative in %d slot migrations - the harness would prove nothing" % o.legs)
        return

    if scenario.strategy == "naive":
        caught = sum(readers.get(lang, {}).get(k, 0) for lang in BLOOMGUARD_READERS
                     for k in ("errors", "false_negatives"))
        assert caught > 0, ("negative control: the naive rebuild caused no reader error and no false negative "
                            "in %d rotations - the harness would prove nothing" % o.planned_rotations)
        if "java" in readers:  # the control of the Redisson reader's assertion under swap
            j = readers["java"]
            assert j["errors"] + j["false_negatives"] > 0, \
                "negative control: Redisson readers saw nothing wrong with the naive rebuild"
        return

    total = o.by_lang()
    # false negatives and the final filter first: nothing excuses them, in any scenario
    for lang in BLOOMGUARD_READERS:
        if lang in readers:
            assert readers[lang]["false_negatives"] == 0, "%s readers: %d false negatives:\n%s" % (
                lang, readers[lang]["false_negatives"], errors)
    # the final generation: the last rotation's parameters, every item, and nothing else
    if scenario.partitions:
        final_partitioned_filter_is_whole(o)
    elif scenario.native:
        assert o.final_capacity == o.last_expected, "final native filter: capacity %d, want %d" % (
            o.final_capacity, o.last_expected)
        assert o.missing == 0, "%d of %d database items absent at the end" % (o.missing, o.db_items)
    else:
        import bloomguard
        assert (o.final_size, o.final_k) == bloomguard.optimal_params(o.last_expected, scenario.fpp)
        assert o.missing == 0, "%d of %d database items absent at the end" % (o.missing, o.db_items)
        assert o.bitmap_equal, "final bitmap differs from the reference: %s (%d extra bits, %d missing bits)" % (
            o.bitmap_diff, o.extra_bits, o.lost_bits)
    java_ok = True
    if "java" in readers and scenario.params == "same":
        # Redisson keeps the size/k it read at its first call: right as long as (n, p) stay.
        # With other (n, p) it answers false until it re-reads the config: reported only.
        j = readers["java"]
        # swap: one atomic swap of the bitmap: every item, always. LOCKED rewrites in place and
        # Redisson ignores the lock; rotation.h: items in both generations keep their bits
        # throughout (base items here); items only in the new one (adds made during the
        # rewrite) appear when it ends - so added items are reported only
        fn = j["false_negatives"] if scenario.strategy == "swap" else j["false_negatives_base"]
        assert fn == 0, "Redisson readers under %s to unchanged (n, p): %d false negatives%s:\n%s" % (
            scenario.strategy, fn, "" if scenario.strategy == "swap" else " for base items", errors)
        java_ok = j["errors"] == 0

    rotations = sum(c.get("rotations", 0) for c in total.values())
    add_errors = sum(c.get("add_errors", 0) for c in total.values())
    rot_errors = sum(c.get("rotation_errors", 0) for c in total.values())
    reader_errors = {lang: readers[lang]["errors"] for lang in BLOOMGUARD_READERS if lang in readers}
    if not o.cut_short:
        assert rotations == o.planned_rotations, "rotations done %d of %d:\n%s" % (
            rotations, o.planned_rotations, errors)
    else:  # a rotator stopped at the time budget, without an error: still a quarter of the plan
        floor = max(2, o.planned_rotations // 4)
        assert rotations >= floor, "cut short by the time budget after %d of %d rotations (floor %d):\n%s" % (
            rotations, o.planned_rotations, floor, errors)
    for lang, n in reader_errors.items():
        # every reader waits up to 10 s for a LOCKED rewrite: BG_ELOCKED is an error like any other
        assert n == 0, "%s readers: %d errors:\n%s" % (lang, n, errors)
    assert (add_errors, rot_errors) == (0, 0), "add errors %d, rotation errors %d:\n%s" % (add_errors, rot_errors,
                                                                                          errors)
    assert java_ok, "Redisson readers under %s to unchanged (n, p): %d errors:\n%s" % (
        scenario.strategy, readers["java"]["errors"], errors)
