"""The cross-language rotate-vs-query race (tests/race/README.md).

Readers in C, Python, Go and Java (Redisson), and adders in C, Python and Go, run against one
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
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List

import pytest

from conftest import record_table
from report import table
from scenario import Outcome, Race, Scenario
from workers import WRITERS

SAME = [20000]
RESIZE = [20000, 30000]   # alternating: every other rotation changes size and k under the readers
BLOOMGUARD_READERS = ("c", "c1", "python", "go")

SCENARIOS = [
    pytest.param(Scenario("swap", "same", SAME), id="swap-same"),
    pytest.param(Scenario("swap", "resize", RESIZE), id="swap-resize"),
    pytest.param(Scenario("locked", "same", SAME), id="locked-same"),
    pytest.param(Scenario("locked", "resize", RESIZE), id="locked-resize"),
    # the control is caught within a few rotations; 96 keep it certain without costing minutes
    pytest.param(Scenario("naive", "same", SAME, rounds=4, per_process=8), id="naive-same"),
]


def run(scenario: Scenario, redis_server, worker_commands: Dict[str, List[str]], langs: List[str],
        tmp_path: Path) -> Outcome:
    outcome = Race(scenario, redis_server, worker_commands, langs, tmp_path).run()
    record_table(table(outcome))
    return outcome


def every_worker_worked(o: Outcome, langs: List[str]) -> None:
    readers, adders = o.by_lang("query"), o.by_lang("add")
    rotators = o.by_lang("rotate")
    for lang in langs:
        assert readers.get(lang, {}).get("queries", 0) > 0, "%s reader made no query" % lang
    for lang in rotators:
        assert adders.get(lang, {}).get("adds", 0) + adders.get(lang, {}).get("add_errors", 0) > 0, \
            "%s adder made no add" % lang
    assert sorted(rotators) == sorted(set(langs) & set(WRITERS)), "a writing language did not rotate"
    if "c1" in langs:  # built against hiredis 1.x: its queries must have taken the tracked path
        assert readers["c1"].get("tracked", 0) > 0, "the c1 reader never read the bits alone (tracking off?)"
    for lang in ("python", "go"):  # the bindings, built with hiredis >= 1.0 by default, too
        if lang in langs and readers.get(lang, {}).get("can_track"):
            assert readers[lang].get("tracked", 0) > 0, "the %s reader never read the bits alone" % lang


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_rotate_vs_query(scenario: Scenario, redis_server, worker_commands, langs, tmp_path) -> None:
    o = run(scenario, redis_server, worker_commands, langs, tmp_path)
    every_worker_worked(o, langs)
    readers = o.by_lang("query")
    errors = "\n".join(o.first_errors())

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
    rotations = sum(c.get("rotations", 0) for c in total.values())
    if not o.cut_short:  # else a rotator stopped at the time budget, without an error
        assert rotations == o.planned_rotations, "rotations done %d of %d:\n%s" % (
            rotations, o.planned_rotations, errors)
    for lang in BLOOMGUARD_READERS:
        if lang not in readers:
            continue
        r = readers[lang]
        # every reader waits up to 10 s for a LOCKED rewrite: BG_ELOCKED is an error like any other
        assert (r["errors"], r["false_negatives"]) == (0, 0), \
            "%s readers: %d errors, %d false negatives:\n%s" % (lang, r["errors"], r["false_negatives"], errors)
    add_errors = sum(c.get("add_errors", 0) for c in total.values())
    rot_errors = sum(c.get("rotation_errors", 0) for c in total.values())
    assert (add_errors, rot_errors) == (0, 0), "add errors %d, rotation errors %d:\n%s" % (add_errors, rot_errors,
                                                                                          errors)
    # the final generation: the last rotation's parameters, every item, and nothing else
    import bloomguard
    assert (o.final_size, o.final_k) == bloomguard.optimal_params(o.last_expected, scenario.fpp)
    assert o.missing == 0, "%d of %d database items absent at the end" % (o.missing, o.db_items)
    assert o.bitmap_equal, "final bitmap differs from the reference: %s (%d extra bits, %d missing bits)" % (
        o.bitmap_diff, o.extra_bits, o.lost_bits)

    if "java" in readers and scenario.params == "same":
        # Redisson keeps the size/k it read at its first call: right as long as (n, p) stay.
        # With other (n, p) it answers false until it re-reads the config: reported only.
        j = readers["java"]
        if scenario.strategy == "swap":  # one atomic swap of the bitmap: every item, always
            assert (j["errors"], j["false_negatives"]) == (0, 0), \
                "Redisson readers under swap to unchanged (n, p): %d errors, %d false negatives:\n%s" % (
                    j["errors"], j["false_negatives"], errors)
        else:
            # LOCKED rewrites in place; Redisson ignores the lock. rotation.h: items in both
            # generations keep their bits throughout (base items here); items only in the new one
            # (adds made during the rewrite) appear when it ends - so added items are reported only
            assert (j["errors"], j["false_negatives_base"]) == (0, 0), \
                "Redisson readers under locked to unchanged (n, p): %d errors, %d false negatives " \
                "for base items:\n%s" % (j["errors"], j["false_negatives_base"], errors)
