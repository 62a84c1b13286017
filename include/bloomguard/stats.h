/*
 * bloomguard/stats.h - the counters of a filter handle: what it was asked, where the answers came
 * from, what failed, what its policy did (policy.h), rotations committed through it, tracked reads,
 * and its client's Redis Cluster redirects.
 *
 *   int64_t v;
 *   if (bg_filter_stat(filter, BG_STAT_ANSWERS_SNAPSHOT, &v) == BG_OK) ...
 *
 * Each counter is read on its own (no snapshot of all of them at one instant). Thread safety: any
 * thread, while other threads use the filter.
 */
#ifndef BLOOMGUARD_STATS_H
#define BLOOMGUARD_STATS_H

#include "common.h"
#include "errors.h"
#include "filter.h"

BG_BEGIN_DECLS

/*
 * Counters of a filter handle (bg_filter_stat). Values are pinned. Counted with or without a
 * policy, since the handle was opened; queries and adds are the calls (not the items) that passed
 * the argument checks, counted when they end.
 */
#define BG_STAT_QUERIES                  1  /* contains / contains_many calls */
#define BG_STAT_ANSWERS_REDIS            2  /* queries answered by the server */
#define BG_STAT_ANSWERS_SNAPSHOT         3
#define BG_STAT_ANSWERS_CALLBACK         4
#define BG_STAT_ANSWERS_ASSUMED_PRESENT  5
#define BG_STAT_ANSWERS_ASSUMED_ABSENT   6
#define BG_STAT_QUERY_ERRORS             7  /* queries that failed */
#define BG_STAT_ADDS                     8  /* add / add_many calls */
#define BG_STAT_ADD_ERRORS               9  /* adds that failed */
#define BG_STAT_RETRIES                 10  /* attempts made by BG_ACT_RETRY (queries and adds) */
#define BG_STAT_BREAKER_STATE           11  /* BG_BREAKER_* now */
#define BG_STAT_BREAKER_TRIPS           12  /* times the breaker opened from closed */
#define BG_STAT_BREAKER_REJECTED        13  /* attempts not sent to the server because it was open */
#define BG_STAT_BREAKER_PROBES          14  /* probe calls let through after a cooldown */
#define BG_STAT_CALLBACK_CALLS          15  /* calls of the fallback callback */
#define BG_STAT_CALLBACK_REFUSED        16  /* callback actions skipped because the token bucket was empty */
#define BG_STAT_CALLBACK_DECLINED       17  /* callback calls that returned non-zero */
#define BG_STAT_ROTATIONS               18  /* rotations committed through this handle */
#define BG_STAT_SNAPSHOT_REFRESHES      19  /* snapshot downloads that succeeded */
#define BG_STAT_SNAPSHOT_FAILURES       20  /* snapshot downloads that failed */
#define BG_STAT_SNAPSHOT_AGE_MS         21  /* age of the snapshot held now; -1 if none */
#define BG_STAT_SNAPSHOT_BYTES          22  /* its bitmap size in bytes; 0 if none */
#define BG_STAT_TRACKED_READS           23  /* query round trips that sent only BITFIELD_RO, their config and write
                                               lock tracked by the server (BG_OPT_TRACKING); a native filter's:
                                               BF.MEXISTS alone, its key tracked */
#define BG_STAT_TRACKED_STALE           24  /* of those, answers dropped because an invalidation of the config or
                                               the lock (native: of the key) arrived before them (asked again
                                               with the full check) */
/* Redis Cluster: counters of the filter's client (every filter of one client reads the same values;
 * 0 when it talks to a standalone server). Redirects followed, busy answers waited out, map reloads. */
#define BG_STAT_CLUSTER_MOVED           25  /* MOVED redirects followed (the slot map was patched) */
#define BG_STAT_CLUSTER_ASK             26  /* ASK redirects followed (one block resent with ASKING) */
#define BG_STAT_CLUSTER_BUSY_RETRIES    27  /* TRYAGAIN / CLUSTERDOWN / LOADING answers waited out and retried */
#define BG_STAT_CLUSTER_MAP_RELOADS     28  /* CLUSTER SLOTS reloads of the slot map that succeeded */
/* Failures seen, by class: every failed attempt (retries included; breaker rejections excluded). */
#define BG_STAT_FAIL_NOTINIT           101
#define BG_STAT_FAIL_CONFIG            102
#define BG_STAT_FAIL_LOCKED            103
#define BG_STAT_FAIL_CONNECTION        104
#define BG_STAT_FAIL_TIMEOUT           105
#define BG_STAT_FAIL_SERVER            106
#define BG_STAT_FAIL_CORRUPT           107
#define BG_STAT_FAIL_OTHER             108

/* Reads a counter (BG_STAT_*). BG_ENOTSUP for an unknown one. */
BG_API int  bg_filter_stat(const bg_filter *f, int stat, int64_t *value);

BG_END_DECLS

#endif
