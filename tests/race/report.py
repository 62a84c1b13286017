"""The table printed for each scenario: one row per language, every role's counts summed."""
from __future__ import annotations

from typing import List

from scenario import Outcome

COLUMNS = [("queries", "queries"), ("checked", "items checked"), ("errors", "errors"),
           ("locked", "of which ELOCKED"), ("false_negatives", "false neg."),
           ("false_negatives_base", "of which base"), ("adds", "adds"), ("add_errors", "add errors"),
           ("rotations", "rotations"), ("rotation_errors", "rot. errors"), ("tracked", "tracked reads")]
#: cluster scenarios only: each worker's client counters, summed (Redisson's are not readable: "-")
CLUSTER_COLUMNS = [("cluster_moved", "MOVED"), ("cluster_ask", "ASK"), ("cluster_busy", "busy retries"),
                   ("cluster_reloads", "map reloads")]


def table(o: Outcome) -> str:
    s = o.scenario
    where = ("cluster control (one more C reader, cfault, follows ASK wrongly): " if s.fault_reader else
             "cluster: " if s.cluster else "")
    if s.partitions:
        where += "partitioned (P = %d, %d partitions' slots migrating), " % (s.partitions, s.moved_partitions)
    head = ("%s%s, %s (n, p): expected %s, fpp %s; %d rotations planned%s, %d base items, %d items in the "
            "database at the end; %.1f s"
            % (where, s.strategy, "unchanged" if s.params == "same" else "alternating",
               "/".join(map(str, s.expected)), s.fpp, o.planned_rotations, "" if s.rotate else " (rotators off)",
               s.base_items, o.db_items, o.seconds))
    columns = COLUMNS + (CLUSTER_COLUMNS if s.cluster else [])
    rows: List[List[str]] = [["lang"] + [title for _, title in columns]]
    totals: dict = {}
    for lang, counts in o.by_lang().items():
        # "-": a count this worker does not keep (base false negatives: the Redisson reader only)
        rows.append([lang] + [str(counts[k]) if k in counts else "-" for k, _ in columns])
        for k, _ in columns:
            if k in counts:
                totals[k] = totals.get(k, 0) + counts[k]
    rows.append(["all"] + [str(totals[k]) if k in totals else "-" for k, _ in columns])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [head]
    if s.cluster:
        lines.append("  slot migrations (one way, %s first): %d, %s s each"
                     % ("each partition's meta" if s.partitions else "the native key" if s.native else "config key", o.legs, "%.2f-%.2f" % (min(o.leg_seconds), max(o.leg_seconds)) if o.leg_seconds else "-"))
    if o.cut_short:
        lines.append("  (cut short: the rotation budget ran out before every round; a busy machine)")
    for r in rows:
        lines.append("  " + "  ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in
                                       enumerate(zip(r, widths))))
    if s.partitions:
        lines.append("  final filter: %d partitions, size %d in all, k %d; db items absent: %d (a query of each; "
                     "no reference bitmap for a partitioned filter)" % (o.final_partitions, o.final_size,
                                                                         o.final_k, o.missing))
    elif s.native and o.final_capacity:
        lines.append("  final filter: native, capacity %d; db items absent: %d (a query of each; the bits are "
                     "the server's)" % (o.final_capacity, o.missing))
    elif o.bitmap_equal is None:
        lines.append("  final filter: not initialized (caught between a delete and an init)")
    else:
        lines.append("  final filter: size %d, k %d; db items absent: %d; bitmap %s the reference%s"
                     % (o.final_size, o.final_k, o.missing, "==" if o.bitmap_equal else "!=",
                        "" if o.bitmap_equal else " (%s; %d extra bits, %d missing bits)"
                        % (o.bitmap_diff, o.extra_bits, o.lost_bits)))
    for e in o.first_errors()[:8]:
        lines.append("  first: " + e[:300])
    return "\n".join(lines)
