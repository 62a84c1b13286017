/*
 * bloomguard/policy.h - what a filter answers when Redis cannot: the degrade policy engine.
 *
 *   bg_policy *p;
 *   bg_policy_new(&p);                                   // safe defaults (see below)
 *   int chain[] = {BG_ACT_RETRY, BG_ACT_SNAPSHOT, BG_ACT_CALLBACK, BG_ACT_ASSUME_PRESENT};
 *   bg_policy_set_chain(p, BG_FAIL_CONNECTION, chain, 4);
 *   bg_policy_set_fallback(p, ask_the_database, db);
 *   bg_filter_set_policy(filter, p);                     // copied: p may be freed at once
 *   bg_policy_free(p);
 *
 * Every failed step of a query or add is classified (BG_FAIL_*). The filter's policy maps each
 * class to a chain of actions tried in order until one answers:
 *   BG_ACT_RETRY          run the step again, up to BG_POLICY_RETRY_COUNT times, waiting
 *                         BG_POLICY_BACKOFF_BASE_MS (doubled each time, at most _MAX_MS, cut by a
 *                         random jitter) before each; never past the call's deadline (call.h);
 *   BG_ACT_SNAPSHOT       answer from the local snapshot (the filter's bitmap and config downloaded
 *                         by bg_filter_snapshot_refresh or every BG_POLICY_SNAPSHOT_INTERVAL_MS),
 *                         if there is one not older than BG_POLICY_SNAPSHOT_MAX_AGE_MS;
 *   BG_ACT_CALLBACK       ask the fallback callback, if one is set and the token bucket
 *                         (BG_POLICY_CALLBACK_RATE per second, BG_POLICY_CALLBACK_BURST) has a
 *                         token; it may decline by returning non-zero;
 *   BG_ACT_ASSUME_PRESENT answer "present" for every item (fail-open: no false negatives);
 *   BG_ACT_ASSUME_ABSENT  answer "absent" for every item (fail-closed);
 *   BG_ACT_ERROR          stop: the call fails with the failure's status and message.
 * An action that cannot answer (no snapshot, no callback, bucket empty, callback declined, retries
 * all failed) hands over to the next one. When the chain runs out, the call fails with the last
 * failure. The chain followed is the one of the first failure's class, even if a retry fails
 * differently (the last failure is the one reported).
 *
 * A degraded answer is a success: status BG_OK, and bg_call_source (call.h) says where it came
 * from (BG_SOURCE_SNAPSHOT, _CALLBACK, _ASSUMED_PRESENT, _ASSUMED_ABSENT); bg_call_errmsg (or, with
 * no bg_call, bg_filter_errmsg) then holds the failure that was degraded. For a batch larger than
 * 16384 items, the items Redis answered before the failure keep Redis's answers; the rest come
 * from the chain.
 *
 * Adds are classified and counted too, but only BG_ACT_RETRY applies to them: an add is never
 * "assumed"; when the retries are spent it fails with the failure's status.
 *
 * Circuit breaker: after BG_POLICY_BREAKER_THRESHOLD consecutive connection or timeout failures
 * (any thread) it opens: queries go straight to the chain of the class that opened it, and adds
 * fail at once with that status, without paying a timeout. After BG_POLICY_BREAKER_COOLDOWN_MS one
 * call goes through as a probe: its success (or any answer from the server, even an error reply)
 * closes the breaker, a connection or timeout failure opens it for another cooldown.
 *
 * Defaults of bg_policy_new (a cache-penetration guard: retry briefly, then fail open):
 *   BG_FAIL_NOTINIT, _CONFIG, _CONNECTION, _SERVER:  RETRY, ASSUME_PRESENT
 *   BG_FAIL_LOCKED, _TIMEOUT, _CORRUPT:              ASSUME_PRESENT  (a lock wait or a timeout
 *                                                    has already been paid; corruption stays)
 *   BG_FAIL_OTHER:                                   ERROR
 *   2 retries, backoff 10 ms doubling up to 100 ms, 50 % jitter; breaker after 5 failures, 1 s
 *   cooldown; callback 100 calls/s, burst 100; no snapshot refresh, snapshots of any age.
 * A filter without a policy (the default, or after bg_filter_set_policy(f, NULL)) fails with plain
 * statuses, as if every chain were ERROR and there were no breaker; its counters (stats.h) still
 * count.
 *
 * Thread safety: a bg_policy is a plain settings object for one thread at a time.
 * bg_filter_set_policy may be called while other threads use the filter: calls that started keep
 * the policy they started with. The breaker, the token bucket, the counters and the snapshot are
 * shared by all threads using the filter.
 */
#ifndef BLOOMGUARD_POLICY_H
#define BLOOMGUARD_POLICY_H

#include "common.h"
#include "call.h"
#include "filter.h"
/* the counters (BG_STAT_*, bg_filter_stat) were declared here; included so code that found them
 * here still builds */
#include "stats.h"

BG_BEGIN_DECLS

typedef struct bg_policy bg_policy;

/* Failure classes. Values are pinned. BG_EINVAL (a caller's mistake) is never degraded. */
#define BG_FAIL_NOTINIT     1  /* BG_ENOTINIT: no config hash (never initialized, or deleted by a rebuild) */
#define BG_FAIL_CONFIG      2  /* BG_ECONFIG: the config kept changing during the call */
#define BG_FAIL_LOCKED      3  /* BG_ELOCKED: the filter is write-locked and the wait was exceeded */
#define BG_FAIL_CONNECTION  4  /* BG_ECONN: cannot connect, or the connection was lost */
#define BG_FAIL_TIMEOUT     5  /* BG_ETIMEOUT: no answer within the command timeout or the call's deadline */
#define BG_FAIL_SERVER      6  /* BG_ESERVER: an error reply (OOM, READONLY, LOADING, BUSY, CLUSTERDOWN, ...) */
#define BG_FAIL_CORRUPT     7  /* BG_ECORRUPT, BG_EWRONGTYPE: unparsable config, a key of the wrong type */
#define BG_FAIL_OTHER       8  /* any other status (BG_EAUTH, BG_EPROTO, BG_ENOMEM, ...) */

/* Actions of a chain. Values are pinned. */
#define BG_ACT_RETRY           1
#define BG_ACT_SNAPSHOT        2
#define BG_ACT_CALLBACK        3
#define BG_ACT_ASSUME_PRESENT  4
#define BG_ACT_ASSUME_ABSENT   5
#define BG_ACT_ERROR           6

/* Longest chain bg_policy_set_chain accepts. */
#define BG_POLICY_MAX_CHAIN    8

/* Integer settings (bg_policy_set_int). Values are pinned. */
#define BG_POLICY_RETRY_COUNT           1  /* attempts of one BG_ACT_RETRY; default 2; 0..100 */
#define BG_POLICY_BACKOFF_BASE_MS       2  /* wait before the first retry, doubled for each next; default 10; 0..60000 */
#define BG_POLICY_BACKOFF_MAX_MS        3  /* longest wait; default 100; 0..600000 */
#define BG_POLICY_JITTER_PCT            4  /* each wait is shortened by a random 0..pct percent; default 50; 0..100 */
#define BG_POLICY_BREAKER_THRESHOLD     5  /* consecutive connection/timeout failures that open the breaker;
                                              default 5; 0 turns the breaker off; 0..1000000 */
#define BG_POLICY_BREAKER_COOLDOWN_MS   6  /* how long it stays open before a probe; default 1000; 1..3600000 */
#define BG_POLICY_CALLBACK_RATE         7  /* fallback calls per second (token bucket refill); default 100;
                                              0 = unlimited; 0..1000000 */
#define BG_POLICY_CALLBACK_BURST        8  /* token bucket size (it starts full); default 100; 1..1000000 */
#define BG_POLICY_SNAPSHOT_INTERVAL_MS  9  /* refresh the snapshot in a background thread this often (the first
                                              at once); default 0 = never; 0 or 100..86400000
                                              (bg_policy_bounds answers 100..86400000) */
#define BG_POLICY_SNAPSHOT_MAX_AGE_MS  10  /* BG_ACT_SNAPSHOT skips an older snapshot; default 0 = any age;
                                              0..31536000000; with a refresh interval, at least it
                                              (bg_filter_set_policy refuses less) */
#define BG_POLICY_SNAPSHOT_CHUNK_BYTES 11  /* bytes per GETRANGE of a snapshot download; default 1048576;
                                              4096..67108864 */

/* States of the circuit breaker (BG_STAT_BREAKER_STATE, stats.h). */
#define BG_BREAKER_CLOSED     0
#define BG_BREAKER_OPEN       1
#define BG_BREAKER_HALF_OPEN  2   /* open, and one probe call is in flight */

/*
 * The fallback: answers present[i] (0 or 1; any non-zero counts as 1) for each of the n items
 * (items[i] may be NULL when lens[i] is 0). Return 0 when answered; non-zero when it could not
 * answer (the chain moves on; whatever it wrote to present is overwritten). Called on the thread
 * making the query, with no lock held, only during a query on a filter whose policy holds it:
 * never after that filter is closed or its policy replaced and the calls under way have ended.
 * It should not query the same filter.
 */
typedef int (*bg_fallback_fn)(void *userdata, const void *const *items, const size_t *lens, size_t n,
                              uint8_t *present);

BG_API int  bg_policy_new(bg_policy **out);
BG_API void bg_policy_free(bg_policy *p);
/* BG_ENOTSUP for an unknown setting, BG_EINVAL for a value out of range (bg_policy_bounds). */
BG_API int  bg_policy_set_int(bg_policy *p, int option, int64_t value);
/*
 * The range bg_policy_set_int accepts for a setting: *lo..*hi inclusive (each pointer may be NULL),
 * from the table the setter checks. One value outside it is accepted too: 0 for
 * BG_POLICY_SNAPSHOT_INTERVAL_MS (never refresh), whose range is 100..86400000. BG_ENOTSUP for an
 * unknown setting.
 */
BG_API int  bg_policy_bounds(int option, int64_t *lo, int64_t *hi);
BG_API int  bg_policy_get_int(const bg_policy *p, int option, int64_t *value);
/*
 * The chain of a failure class: 1..BG_POLICY_MAX_CHAIN actions, copied. BG_ENOTSUP for an unknown
 * class or action, BG_EINVAL for a NULL or empty or too long list.
 */
BG_API int  bg_policy_set_chain(bg_policy *p, int fail_class, const int *actions, size_t n);
/* Copies up to cap actions of a class's chain to actions (may be NULL when cap is 0); *n = its length. */
BG_API int  bg_policy_get_chain(const bg_policy *p, int fail_class, int *actions, size_t cap, size_t *n);
/* Sets (or, with fn NULL, removes) the fallback callback and its userdata. */
BG_API int  bg_policy_set_fallback(bg_policy *p, bg_fallback_fn fn, void *userdata);

/*
 * Gives the filter a copy of p (NULL: no policy). BG_EINVAL (the filter keeps its policy) for settings
 * that cannot work together: a BG_POLICY_SNAPSHOT_MAX_AGE_MS shorter than a non-zero
 * BG_POLICY_SNAPSHOT_INTERVAL_MS. Resets the breaker (closed) and the token bucket
 * (full); keeps the counters and the snapshot. Starts, restarts or stops the background snapshot
 * refresh as BG_POLICY_SNAPSHOT_INTERVAL_MS says (it joins a download under way first).
 */
BG_API int  bg_filter_set_policy(bg_filter *f, const bg_policy *p);
BG_API int  bg_filter_set_policy_ex(bg_filter *f, bg_call *call, const bg_policy *p);

/*
 * Downloads the filter's bitmap and config into the local snapshot now (with or without a
 * policy), replacing the one held once complete. The download is consistent: the config and the
 * rotation lease are WATCHed while the bitmap is read in chunks (GETRANGE), so a rebuild, delete
 * or rotation that touches them during the download makes it start over (3 attempts, then
 * BG_ECONFIG; BG_EROTATING if a rotation is running). The snapshot holds every bit set when the
 * download started. Memory: size / 8 bytes of the filter. The _ex form's call bounds the
 * download (its timeout) and carries its message (0.1's bg_filter_snapshot_refresh took the call
 * itself: docs/changelog.md).
 */
BG_API int  bg_filter_snapshot_refresh(bg_filter *f);
BG_API int  bg_filter_snapshot_refresh_ex(bg_filter *f, bg_call *call);

BG_END_DECLS

#endif
