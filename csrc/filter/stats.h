/*
 * Internal: a filter handle's counters (include/bloomguard/stats.h). The policy engine counts what
 * it decides (answers by source, retries, breaker, callback, snapshot refreshes, failures by class)
 * in its own slots (policy/guard.h, BGI_ST_*); the handle counts the rest here; stats.c maps each
 * public BG_STAT_* id onto one of them.
 */
#ifndef BG_INTERNAL_FILTER_STATS_H
#define BG_INTERNAL_FILTER_STATS_H

#include <stdatomic.h>
#include <stdint.h>

#include "common/histogram.h"
#include "policy/guard.h"

typedef struct bg_filter bg_filter;

typedef struct bgi_filter_stats {
  _Alignas(64) atomic_llong rotations;   /* BG_STAT_ROTATIONS */
  atomic_llong tracked;                  /* BG_STAT_TRACKED_READS */
  atomic_llong tracked_stale;            /* BG_STAT_TRACKED_STALE */
  int hist_on;                           /* BG_OPT_HISTOGRAMS of the client */
  /* latency by BG_OP_* (- 1) and BG_OUTCOME_* (observe.h) */
  _Alignas(64) bgi_hist hist[BG_OP_MAX][BG_OUTCOME_MAX + 1];
} bgi_filter_stats;

void bgi_filter_stats_init(bgi_filter_stats *s, int hist_on);

/* The histograms of an operation (BG_OP_*) by outcome, or NULL when they are off. */
static inline bgi_hist *bgi_filter_hists(bgi_filter_stats *s, int op) { return s->hist_on ? s->hist[op - 1] : NULL; }
/* Records an operation (BG_OP_*) that started at started_ns and ended with st now. */
static inline void bgi_filter_record(bgi_filter_stats *s, int op, int st, uint64_t started_ns) {
  if (s->hist_on) bgi_hist_record(&s->hist[op - 1][bgi_outcome(st)], bgi_now_ns() - started_ns);
}

/* A query round trip that sent the bits alone (filter/query.c); stale: its answer was dropped. */
void bgi_filter_count_tracked(bg_filter *f, int stale);
/* A rotation committed through f (rotation/); f may be NULL. */
void bgi_filter_count_rotation(bg_filter *f);

/*
 * The value of counter `stat` (BG_STAT_*, cluster ones excepted) from an engine and, for the
 * handle's own counters, fs (NULL: those read 0; unit tests of the engine alone). *known = 0 for
 * an unknown id.
 */
int64_t bgi_stat_read(const bgi_guard *g, const bgi_filter_stats *fs, int stat, int *known);

#endif
