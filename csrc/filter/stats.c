/*
 * bg_filter_stat: every public counter of a filter handle, read from where it is counted - the
 * policy engine's slots (policy/guard.h), the handle's own (stats.h), the client's cluster counters.
 */
#include "filter/stats.h"

#include "bloomguard/stats.h"
#include "filter/filter.h"

void bgi_filter_stats_init(bgi_filter_stats *s, int hist_on) {
  atomic_init(&s->rotations, 0);
  atomic_init(&s->tracked, 0);
  atomic_init(&s->tracked_stale, 0);
  s->hist_on = hist_on;
  for (int op = 0; op < BG_OP_MAX; op++)
    for (int o = 0; o <= BG_OUTCOME_MAX; o++) {
      for (int b = 0; b < BG_HIST_BUCKETS; b++) atomic_init(&s->hist[op][o].b[b], 0);
      atomic_init(&s->hist[op][o].sum_ns, 0);
    }
}

void bgi_filter_count_tracked(bg_filter *f, int stale) {
  atomic_fetch_add_explicit(&f->stats.tracked, 1, memory_order_relaxed);
  if (stale) atomic_fetch_add_explicit(&f->stats.tracked_stale, 1, memory_order_relaxed);
}

void bgi_filter_count_rotation(bg_filter *f) {
  if (f) atomic_fetch_add_explicit(&f->stats.rotations, 1, memory_order_relaxed);
}

static int64_t own(const atomic_llong *v) { return atomic_load_explicit((atomic_llong *)v, memory_order_relaxed); }

int64_t bgi_stat_read(const bgi_guard *cg, const bgi_filter_stats *fs, int stat, int *known) {
  /* logically const: only locks and reference counts are touched */
  bgi_guard *g = (bgi_guard *)cg;
  *known = 1;
  if (stat >= BG_STAT_FAIL_NOTINIT && stat <= BG_STAT_FAIL_OTHER) return bgi_guard_load(g, BGI_ST_FAIL + stat - 100);
  switch (stat) {
    case BG_STAT_QUERIES: {
      int64_t sum = bgi_guard_load(g, BGI_ST_QUERY_ERRORS);
      for (int s = BG_SOURCE_REDIS; s <= BG_SOURCE_ASSUMED_ABSENT; s++) sum += bgi_guard_load(g, BGI_ST_ANSWERS + s);
      return sum;
    }
    case BG_STAT_ANSWERS_REDIS: return bgi_guard_load(g, BGI_ST_ANSWERS + BG_SOURCE_REDIS);
    case BG_STAT_ANSWERS_SNAPSHOT: return bgi_guard_load(g, BGI_ST_ANSWERS + BG_SOURCE_SNAPSHOT);
    case BG_STAT_ANSWERS_CALLBACK: return bgi_guard_load(g, BGI_ST_ANSWERS + BG_SOURCE_CALLBACK);
    case BG_STAT_ANSWERS_ASSUMED_PRESENT: return bgi_guard_load(g, BGI_ST_ANSWERS + BG_SOURCE_ASSUMED_PRESENT);
    case BG_STAT_ANSWERS_ASSUMED_ABSENT: return bgi_guard_load(g, BGI_ST_ANSWERS + BG_SOURCE_ASSUMED_ABSENT);
    case BG_STAT_QUERY_ERRORS: return bgi_guard_load(g, BGI_ST_QUERY_ERRORS);
    case BG_STAT_ADDS: return bgi_guard_load(g, BGI_ST_ADDS_OK) + bgi_guard_load(g, BGI_ST_ADD_ERRORS);
    case BG_STAT_ADD_ERRORS: return bgi_guard_load(g, BGI_ST_ADD_ERRORS);
    case BG_STAT_RETRIES: return bgi_guard_load(g, BGI_ST_RETRIES);
    case BG_STAT_BREAKER_STATE: return bgi_breaker_state(&g->breaker);
    case BG_STAT_BREAKER_TRIPS: return atomic_load(&g->breaker.trips);
    case BG_STAT_BREAKER_REJECTED: return atomic_load(&g->breaker.rejected);
    case BG_STAT_BREAKER_PROBES: return atomic_load(&g->breaker.probes);
    case BG_STAT_CALLBACK_CALLS: return bgi_guard_load(g, BGI_ST_CB_CALLS);
    case BG_STAT_CALLBACK_REFUSED: return bgi_guard_load(g, BGI_ST_CB_REFUSED);
    case BG_STAT_CALLBACK_DECLINED: return bgi_guard_load(g, BGI_ST_CB_DECLINED);
    case BG_STAT_ROTATIONS: return fs ? own(&fs->rotations) : 0;
    case BG_STAT_SNAPSHOT_REFRESHES: return bgi_guard_load(g, BGI_ST_SNAP_OK);
    case BG_STAT_SNAPSHOT_FAILURES: return bgi_guard_load(g, BGI_ST_SNAP_FAILED);
    case BG_STAT_TRACKED_READS: return fs ? own(&fs->tracked) : 0;
    case BG_STAT_TRACKED_STALE: return fs ? own(&fs->tracked_stale) : 0;
    case BG_STAT_SNAPSHOT_AGE_MS:
    case BG_STAT_SNAPSHOT_BYTES: {
      bgi_snapshot *s = bgi_guard_snapshot(g);
      int64_t v = stat == BG_STAT_SNAPSHOT_BYTES ? 0 : -1;
      if (s) v = stat == BG_STAT_SNAPSHOT_BYTES ? (int64_t)s->nbytes : (int64_t)((bgi_now_ns() - s->taken_ns) / 1000000u);
      bgi_snapshot_unref(s);
      return v;
    }
    default:
      *known = 0;
      return 0;
  }
}

/* A cluster counter (the client's: bg_client_stat) for a BG_STAT_CLUSTER_* id: 1, or 0 for another id. */
static int cluster_stat(const bg_client *c, int stat, int64_t *value) {
  static const int client_stat[] = {
    [BG_STAT_CLUSTER_MOVED - BG_STAT_CLUSTER_MOVED] = BG_CLIENT_STAT_CLUSTER_MOVED,
    [BG_STAT_CLUSTER_ASK - BG_STAT_CLUSTER_MOVED] = BG_CLIENT_STAT_CLUSTER_ASK,
    [BG_STAT_CLUSTER_BUSY_RETRIES - BG_STAT_CLUSTER_MOVED] = BG_CLIENT_STAT_CLUSTER_BUSY_RETRIES,
    [BG_STAT_CLUSTER_MAP_RELOADS - BG_STAT_CLUSTER_MOVED] = BG_CLIENT_STAT_CLUSTER_MAP_RELOADS,
  };
  if (stat < BG_STAT_CLUSTER_MOVED || stat > BG_STAT_CLUSTER_MAP_RELOADS) return 0;
  bg_client_stat(c, client_stat[stat - BG_STAT_CLUSTER_MOVED], value);
  return 1;
}

BG_API int bg_filter_stat(const bg_filter *f, int stat, int64_t *value) {
  int known;
  if (!f || !value) return BG_EINVAL;
  if (cluster_stat(f->client, stat, value)) return BG_OK;
  int64_t v = bgi_stat_read(&f->guard, &f->stats, stat, &known);
  if (!known) return BG_ENOTSUP;
  *value = v;
  return BG_OK;
}

BG_API int bg_filter_histogram(const bg_filter *f, int op, int outcome, double *bounds, uint64_t *counts, size_t cap,
                               uint64_t *count, double *sum_seconds) {
  if (!f || ((bounds || counts) && cap < BG_HIST_BUCKETS)) return BG_EINVAL;
  if (op < 1 || op > BG_OP_MAX || outcome < 0 || outcome > BG_OUTCOME_MAX) return BG_ENOTSUP;
  bgi_hist *h = &((bg_filter *)f)->stats.hist[op - 1][outcome];
  uint64_t total = 0;
  for (unsigned i = 0; i < BG_HIST_BUCKETS; i++) {
    uint64_t v = atomic_load_explicit(&h->b[i], memory_order_relaxed);
    total += v;
    if (counts) counts[i] = v;
    if (bounds && i < BG_HIST_BUCKETS - 1) bounds[i] = bgi_hist_bound_s(i);
  }
  if (count) *count = total;
  if (sum_seconds) *sum_seconds = (double)atomic_load_explicit(&h->sum_ns, memory_order_relaxed) / 1e9;
  return BG_OK;
}
