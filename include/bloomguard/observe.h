/*
 * bloomguard/observe.h - what operators see: events as they happen, and latency histograms.
 *
 *   static void on_event(void *ud, int kind, const char *name, const int64_t *v, size_t nv, const char *msg) {
 *     if (kind == BG_EVENT_BREAKER_OPEN) log_warn("breaker of %s open: %s", name, msg);
 *   }
 *   bg_client_set_observer(client, on_event, ud);
 *
 *   uint64_t counts[BG_HIST_BUCKETS], n;
 *   double bounds[BG_HIST_BUCKETS - 1], sum;
 *   bg_filter_histogram(f, BG_OP_CONTAINS, BG_OUTCOME_OK, bounds, counts, BG_HIST_BUCKETS, &n, &sum);
 *
 * Events. An observer set on a client hears every event of the client, its filters, its locks and
 * the rotations of its filters, each as a kind (BG_EVENT_*), the name of the filter or lock it is
 * about ("" for the client's own: connections, the cluster map, a failover), BG_EVENT_NVALUES
 * 64-bit values (BG_EV_*; those a kind does not use are 0) and a message for a human (never a
 * password). The observer runs synchronously on the thread where the event happens:
 *   BG_EVENT_BREAKER_*    the thread of the query or add whose outcome moved the breaker (a
 *                         submission queue's: the thread in bg_queue_poll);
 *   BG_EVENT_DEGRADED     the thread of the query answered by the policy (the same);
 *   BG_EVENT_ROTATION_*   the thread calling bg_rotation_begin / _commit / _abort / _free (or
 *                         the add whose progress callback stopped the rotation);
 *   BG_EVENT_CLUSTER_MAP, BG_EVENT_FAILOVER
 *                         the thread that reloaded the map: the client's refresher thread, or the
 *                         call that discovered the cluster (or the master) first;
 *   BG_EVENT_CONNECTION_LOST
 *                         the thread that found the connection broken (a call's, the one reading a
 *                         multiplexed connection, a queue's poll, a lock waiter's);
 *   BG_EVENT_LOCK_LOST    the client's lock renewal thread (a bg_lock hold), or a rotation's lease
 *                         keeper thread (its rotation lease).
 * It may run on several threads at once. It must return quickly and must not call bloomguard
 * functions: some events are delivered while the library holds a lock of the connection or the
 * map concerned (a Python or Go binding hands them on to its logger). Its pointers are valid
 * during the call only.
 *
 * Cost: without an observer, an event costs one relaxed atomic load where it happens; none of
 * them is on the path of a query Redis answers.
 *
 * Degraded answers are counted (bg_filter_stat, BG_STAT_ANSWERS_*) and sampled: at most
 * BG_OPT_DEGRADED_EVENTS_PER_S events per filter handle per second (options.h; default 1), each
 * with BG_EV_COUNT = the answers the policy gave since the previous event of that handle.
 *
 * Histograms. Each filter handle keeps one latency histogram per operation (BG_OP_*) and outcome
 * (BG_OUTCOME_*): the time from the call's (or the submit's) start to its answer, recorded where
 * the operation ends, for the blocking and the submitted forms alike, with relaxed atomic
 * increments (no lock, no allocation). Rotations of the filter have theirs (BG_OP_ROTATE_*, from
 * begin to commit or abort). Buckets are fixed: bucket i counts durations d with
 * bound[i-1] < d <= bound[i], bound[i] = 2^i microseconds (i = 0 .. BG_HIST_BUCKETS - 2: 1 us to
 * about 134 s); the last bucket counts what is longer. BG_OPT_HISTOGRAMS 0 (options.h) turns the
 * recording off for a client's filters.
 *
 * Thread safety: any thread, while others use the handles; a histogram or counter is read field by
 * field (a count and its buckets agree with each other; the sum may include an operation the
 * buckets do not yet).
 */
#ifndef BLOOMGUARD_OBSERVE_H
#define BLOOMGUARD_OBSERVE_H

#include "common.h"
#include "client.h"
#include "filter.h"

BG_BEGIN_DECLS

/* Event kinds. Values are pinned. */
#define BG_EVENT_BREAKER_OPEN       1   /* the circuit breaker opened (from closed, or a probe failed) */
#define BG_EVENT_BREAKER_HALF_OPEN  2   /* its cooldown ended: one probe call goes through */
#define BG_EVENT_BREAKER_CLOSED     3   /* a call reached the server again */
#define BG_EVENT_DEGRADED           4   /* queries answered by the degrade policy (sampled, see above) */
#define BG_EVENT_ROTATION_BEGIN     5   /* a rotation of the filter began (its lease taken) */
#define BG_EVENT_ROTATION_COMMIT    6   /* ... committed: the new generation is live */
#define BG_EVENT_ROTATION_ABORT     7   /* ... ended without committing (aborted, or failed) */
#define BG_EVENT_FAILOVER           8   /* a Sentinel-managed client moved to another master */
#define BG_EVENT_CLUSTER_MAP        9   /* a reload of a cluster's slot map found slots served elsewhere */
#define BG_EVENT_CONNECTION_LOST   10   /* a connection that was up failed (closed, reset, timed out) */
#define BG_EVENT_LOCK_LOST         11   /* a held lock, or a rotation's lease, was found gone */

/* Indexes of an event's values. Values are pinned; a kind leaves those it does not use at 0. */
#define BG_EV_STATUS       0   /* BREAKER_OPEN: the failure (BG_ECONN / BG_ETIMEOUT); DEGRADED: the failure
                                  answered for; ROTATION_ABORT: the failure, or BG_EABORTED when asked;
                                  CONNECTION_LOST: how it failed; FAILOVER, CLUSTER_MAP: BG_OK */
#define BG_EV_SOURCE       1   /* DEGRADED: BG_SOURCE_* of the last answer */
#define BG_EV_COUNT        2   /* BREAKER_OPEN: consecutive failures; DEGRADED: answers since the last
                                  event; CLUSTER_MAP: slots that moved; CONNECTION_LOST: round trips
                                  the connection had made; LOCK_LOST: the fencing token (0: none) */
#define BG_EV_STRATEGY     3   /* ROTATION_*: BG_ROTATE_* */
#define BG_EV_ITEMS        4   /* ROTATION_*: items added so far */
#define BG_EV_BYTES        5   /* ROTATION_*: bytes uploaded so far */
#define BG_EV_DURATION_US  6   /* ROTATION_COMMIT / _ABORT: since begin; BREAKER_CLOSED: how long it was
                                  not closed; BREAKER_OPEN: its cooldown */
#define BG_EV_FIRST        7   /* CLUSTER_MAP: 1 for the first map the client loaded */
#define BG_EVENT_NVALUES   8   /* values an event carries (at least) */

/*
 * The observer. kind: BG_EVENT_*; name: the filter's or lock's name, "" for the client's own
 * events; values[0 .. nvalues): BG_EV_*; message: what happened, for a human. Returns nothing: an
 * observer cannot change what the library does. See the top for its thread and its rules.
 */
typedef void (*bg_observer_fn)(void *userdata, int kind, const char *name, const int64_t *values, size_t nvalues,
                               const char *message);

/*
 * Sets (fn NULL: removes) the client's observer. Events that begin after it returns go to the new
 * one; one already being delivered on another thread may still reach the previous one. userdata
 * must stay valid while the client lives (or until it is replaced and those deliveries ended).
 * BG_EINVAL for a NULL client.
 */
BG_API int  bg_client_set_observer(bg_client *c, bg_observer_fn fn, void *userdata);

/* The event's name as bindings and logs spell it ("breaker_open", ...); NULL for an unknown kind. */
BG_API const char *bg_event_name(int kind);

/* ---- histograms ------------------------------------------------------------------------------ */

/* Operations (db.client.operation.duration's db.operation.name). Values are pinned. */
#define BG_OP_CONTAINS        1   /* contains, contains_many (one operation per call) */
#define BG_OP_ADD             2   /* add, add_many */
#define BG_OP_INIT            3
#define BG_OP_COUNT           4
#define BG_OP_INFO            5
#define BG_OP_DELETE          6
#define BG_OP_EXPIRE          7
#define BG_OP_PERSIST         8
#define BG_OP_ROTATE_SWAP     9   /* a rotation, begin to commit / abort, per strategy */
#define BG_OP_ROTATE_NAIVE   10
#define BG_OP_ROTATE_LOCKED  11
#define BG_OP_MAX            11

/* Outcomes (error.type). 1..8 are the failure classes BG_FAIL_* of policy.h. Values are pinned. */
#define BG_OUTCOME_OK          0   /* answered (a degraded answer too) or done; a rotation: committed */
#define BG_OUTCOME_CANCELLED   9   /* BG_ECANCELED */
#define BG_OUTCOME_ABORTED    10   /* a rotation aborted by its caller (bg_rotation_abort / _free, or its
                                      progress callback) */
#define BG_OUTCOME_MAX        10

/* Buckets of every histogram: bound i is 2^i microseconds, the last bucket is open-ended. */
#define BG_HIST_BUCKETS       29

/*
 * One histogram of the filter handle in one call. bounds (may be NULL): BG_HIST_BUCKETS - 1 upper
 * bounds in seconds; counts (may be NULL): BG_HIST_BUCKETS counts; cap: the room of counts (and
 * of bounds plus one), at least BG_HIST_BUCKETS when either is given; *count (may be NULL): the
 * operations recorded (the sum of counts); *sum_seconds (may be NULL): their total duration.
 * BG_EINVAL for a NULL filter or a cap too small, BG_ENOTSUP for an unknown operation or outcome.
 */
BG_API int  bg_filter_histogram(const bg_filter *f, int op, int outcome, double *bounds, uint64_t *counts, size_t cap,
                                uint64_t *count, double *sum_seconds);

/* The operation's name (db.operation.name: "contains", ..., "rotate_swap"); NULL for an unknown one. */
BG_API const char *bg_op_name(int op);
/* The outcome's name (error.type: "ok", "not_initialized", "config_changed", "locked", "connection",
 * "timeout", "server", "corrupt", "other", "cancelled", "aborted"); NULL for an unknown one. */
BG_API const char *bg_outcome_name(int outcome);

/* ---- client counters -------------------------------------------------------------------------- */

/* Counters of a client (bg_client_stat). Values are pinned. */
#define BG_CLIENT_STAT_CONNECTIONS            1   /* connections open now (db.client.connection.count):
                                                     pooled, multiplexed, queues', lock waiters',
                                                     discovery's */
#define BG_CLIENT_STAT_CONNECTIONS_LOST       2   /* connections that failed after they were up */
#define BG_CLIENT_STAT_TRACKING_INVALIDATIONS 3   /* invalidation pushes received (BG_OPT_TRACKING) */
#define BG_CLIENT_STAT_CLUSTER_MOVED          4   /* as BG_STAT_CLUSTER_MOVED (stats.h) */
#define BG_CLIENT_STAT_CLUSTER_ASK            5
#define BG_CLIENT_STAT_CLUSTER_BUSY_RETRIES   6
#define BG_CLIENT_STAT_CLUSTER_MAP_RELOADS    7
#define BG_CLIENT_STAT_CLUSTER_MAP_CHANGES    8   /* reloads that found slots served elsewhere */
#define BG_CLIENT_STAT_FAILOVERS              9   /* Sentinel: moves to another master */
#define BG_CLIENT_STAT_EVENTS                10   /* events handed to an observer */

/* Reads a client counter (BG_CLIENT_STAT_*). BG_EINVAL for NULL, BG_ENOTSUP for an unknown one. */
BG_API int  bg_client_stat(const bg_client *c, int stat, int64_t *value);

BG_END_DECLS

#endif
