/*
 * Internal: the degrade policy engine (see include/bloomguard/policy.h for the contract).
 *
 * Pieces, each usable without a server (tests/c/test_policy_unit.c):
 *  - bgi_policy_cfg: the settings (a bg_policy is one; a filter holds a refcounted copy);
 *  - bgi_breaker: the circuit breaker state machine (time passed in);
 *  - bgi_bucket: the token bucket in front of the fallback callback (time passed in);
 *  - bgi_snapshot: an immutable, refcounted bitmap + config that answers locally;
 *  - bgi_guard: per filter handle: the published policy, breaker, bucket, counters, snapshot and
 *    its background refresher; bgi_guard_run drives one call through the chain.
 *
 * Happy path cost (a call that Redis answers, breaker closed): one relaxed load of the policy
 * pointer, one of the breaker state, the call itself, two relaxed loads to see that the breaker
 * has nothing to reset, and one atomic increment of a counter. No lock, no allocation.
 */
#ifndef BG_INTERNAL_POLICY_GUARD_H
#define BG_INTERNAL_POLICY_GUARD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "bloomguard/filter.h"
#include "bloomguard/policy.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/worker.h"

#define BGI_FAIL_CLASSES 9   /* 1..BG_FAIL_OTHER; 0: not a failure (success, or BG_EINVAL) */

/* ---- settings ---------------------------------------------------------------------------- */

typedef struct bgi_policy_cfg {
  uint8_t chain[BGI_FAIL_CLASSES][BG_POLICY_MAX_CHAIN];
  uint8_t chain_len[BGI_FAIL_CLASSES];
  int64_t retry_count, backoff_base_ms, backoff_max_ms, jitter_pct;
  int64_t breaker_threshold, breaker_cooldown_ms;
  int64_t callback_rate, callback_burst;
  int64_t snapshot_interval_ms, snapshot_max_age_ms, snapshot_chunk_bytes;
  bg_fallback_fn fallback;
  void *userdata;
} bgi_policy_cfg;

struct bg_policy {
  bgi_policy_cfg cfg;
};

/* A filter's copy of a policy: immutable once published, freed by its last reference. */
typedef struct bgi_policy {
  atomic_long refs;
  bgi_policy_cfg cfg;
} bgi_policy;

void bgi_policy_defaults(bgi_policy_cfg *c);

/* BG_FAIL_* of a status; 0 for BG_OK and BG_EINVAL (never degraded). */
int bgi_fail_class(int status);

/* Wait before retry number `attempt` (0-based) in ns: min(max, base << attempt), shortened by a
 * random part of jitter_pct percent drawn from r (uniform 64 bits). */
uint64_t bgi_backoff_ns(const bgi_policy_cfg *c, int64_t attempt, uint64_t r);

/* ---- circuit breaker ----------------------------------------------------------------------- */

typedef struct bgi_breaker {
  _Alignas(64) atomic_int state;     /* BG_BREAKER_*; read on every call */
  atomic_int consecutive;            /* connection/timeout failures in a row */
  _Alignas(64) pthread_mutex_t mu;   /* transitions */
  atomic_int_fast64_t threshold;     /* 0: off */
  atomic_int_fast64_t cooldown_ns;
  uint64_t since_ns;                 /* when it opened, or when the probe went through (under mu) */
  int trip_status;                   /* BG_ECONN or BG_ETIMEOUT that opened it (under mu) */
  char trip_msg[BGI_ERRMSG_MAX];     /* its message (under mu) */
  atomic_llong trips, rejected, probes;
} bgi_breaker;

void bgi_breaker_init(bgi_breaker *b);
void bgi_breaker_destroy(bgi_breaker *b);
/* Closed, counts kept, with these settings (threshold 0: off). */
void bgi_breaker_reset(bgi_breaker *b, int64_t threshold, int64_t cooldown_ms);
/* 1: send the call (closed, off, or this call is the probe after a cooldown); 0: rejected, err set
 * to the status that opened it with a message saying so. */
int bgi_breaker_admit(bgi_breaker *b, uint64_t now_ns, bgi_err *err);
/* Outcome of an admitted call: BG_OK or its failure status (msg: its message, may be NULL). */
void bgi_breaker_record(bgi_breaker *b, uint64_t now_ns, int status, const char *msg);
static inline int bgi_breaker_state(bgi_breaker *b) { return atomic_load_explicit(&b->state, memory_order_relaxed); }

/* ---- token bucket --------------------------------------------------------------------------- */

typedef struct bgi_bucket {
  pthread_mutex_t mu;
  int64_t rate;       /* tokens per second; 0: unlimited */
  int64_t burst;      /* capacity in tokens */
  int64_t micro;      /* tokens * 1e6 */
  uint64_t last_ns;
} bgi_bucket;

void bgi_bucket_init(bgi_bucket *b);
void bgi_bucket_destroy(bgi_bucket *b);
/* Full, with these settings. */
void bgi_bucket_reset(bgi_bucket *b, int64_t rate, int64_t burst, uint64_t now_ns);
/* 1 if a token was taken (always, when unlimited), 0 if the bucket is empty. */
int bgi_bucket_take(bgi_bucket *b, uint64_t now_ns);

/* ---- snapshot -------------------------------------------------------------------------------- */

typedef struct bgi_snapshot {
  atomic_long refs;
  uint64_t cfg;          /* packed size << 32 | k (filter.h) */
  uint64_t taken_ns;     /* when its download started */
  size_t nbytes;         /* (size + 7) / 8 */
  uint8_t bits[];        /* SETBIT order: bit o is byte o / 8, mask 0x80 >> (o % 8) */
} bgi_snapshot;

/* A zeroed snapshot for this config (one reference); NULL when out of memory. */
bgi_snapshot *bgi_snapshot_new(uint64_t cfg, uint64_t taken_ns);
void bgi_snapshot_unref(bgi_snapshot *s);
/* Sets an item's bits (tests, and a snapshot being built). */
void bgi_snapshot_add(bgi_snapshot *s, const void *item, size_t len);
/* present[i] for items[0..n): 1 if all the item's bits are set. No allocation. */
void bgi_snapshot_query(const bgi_snapshot *s, const void *const *items, const size_t *lens, size_t n,
                        uint8_t *present);

/* ---- per filter handle ------------------------------------------------------------------------ */

/* Internal counter slots (the public BG_STAT_* ids map onto them in guard.c). */
enum {
  BGI_ST_ANSWERS = 0,       /* + BG_SOURCE_* (1..5) */
  BGI_ST_QUERY_ERRORS = 6,
  BGI_ST_ADDS_OK,
  BGI_ST_ADD_ERRORS,
  BGI_ST_RETRIES,
  BGI_ST_CB_CALLS,
  BGI_ST_CB_REFUSED,
  BGI_ST_CB_DECLINED,
  BGI_ST_ROTATIONS,
  BGI_ST_SNAP_OK,
  BGI_ST_SNAP_FAILED,
  BGI_ST_TRACKED,
  BGI_ST_TRACKED_STALE,
  BGI_ST_FAIL,              /* + BG_FAIL_* (1..8) */
  BGI_ST_COUNT = BGI_ST_FAIL + BGI_FAIL_CLASSES
};

typedef struct bgi_guard {
  _Alignas(64) _Atomic(bgi_policy *) policy;   /* NULL: no policy. Dereferenced only under a reference */
  _Alignas(64) atomic_llong stats[BGI_ST_COUNT];
  _Alignas(64) pthread_mutex_t mu;             /* taking a reference on policy / snapshot; publishing */
  bgi_snapshot *snap;                          /* under mu */
  atomic_uint_fast64_t rng;                    /* jitter */
  bgi_breaker breaker;
  bgi_bucket bucket;
  pthread_mutex_t admin_mu;                    /* set_policy, starting/stopping the refresher */
  pthread_mutex_t dl_mu;                       /* one snapshot download at a time */
  /* background refresher (snapshot.c; started and stopped under admin_mu) */
  bgi_worker rf;
  int64_t rf_interval_ms;
} bgi_guard;

void bgi_guard_init(bgi_guard *g);
/* Stops the refresher, drops the policy and the snapshot. */
void bgi_guard_destroy(bgi_guard *g);

/* Publishes a copy of p (NULL: none); f (may be NULL in unit tests) is what the refresher downloads. */
int bgi_guard_set_policy(bgi_guard *g, bg_filter *f, const bg_policy *p, bgi_err *err);
/* A reference on the current policy, or NULL. */
bgi_policy *bgi_guard_policy(bgi_guard *g);
void bgi_policy_unref(bgi_policy *p);

/* Replaces the snapshot (takes over the caller's reference; s may be NULL). */
void bgi_guard_publish_snapshot(bgi_guard *g, bgi_snapshot *s);
/* A reference on the current snapshot, or NULL. */
bgi_snapshot *bgi_guard_snapshot(bgi_guard *g);

int64_t bgi_guard_stat(bgi_guard *g, int stat, int *known);

/* A query round trip that sent the bits alone (filter/query.c); stale: its answer was dropped. */
void bgi_guard_count_tracked(bgi_guard *g, int stale);

/*
 * One step against Redis for items [from, n) of an operation: returns its status; *done is how
 * many items (counted from 0) are finished - answered, or added - when it returns (n on success).
 */
typedef int (*bgi_attempt_fn)(void *ctx, uint64_t deadline_ns, size_t from, size_t *done, bgi_err *err);

typedef struct bgi_op {
  int is_add;
  bgi_attempt_fn attempt;
  void *ctx;
  const void *const *items;    /* queries: what the snapshot and the callback answer */
  const size_t *lens;
  size_t n;
  uint8_t *present;
} bgi_op;

/*
 * Runs op under g's policy: breaker, attempt, then the chain of the failure's class. Returns the
 * status; *source is the answer's BG_SOURCE_* (BG_SOURCE_REDIS for a successful add). After a
 * degraded answer err->status is BG_OK and err->msg says what was degraded.
 */
int bgi_guard_run(bgi_guard *g, const bgi_op *op, uint64_t deadline_ns, int *source, bgi_err *err);

/* ---- filter hooks (guard.c, snapshot.c) --------------------------------------------------------- */

int bgi_guard_contains(bg_filter *f, uint64_t deadline_ns, const void *const *items, const size_t *lens, size_t n,
                       uint8_t *present, int *source, bgi_err *err);
int bgi_guard_add(bg_filter *f, uint64_t deadline_ns, const void *const *items, const size_t *lens, size_t n,
                  size_t *added, bgi_err *err);
/* Ends a query or add: like bgi_call_finish, and a degraded answer's cause goes to the call's
 * message (or the handle's, without a call). */
int bgi_guard_finish(bg_filter *f, bg_call *call, const bgi_err *err, int source);
/* Counts a rotation committed through f (BG_STAT_ROTATIONS). */
void bgi_guard_note_rotation(bg_filter *f);

/* Downloads f's snapshot (snapshot.c); stop (may be NULL) aborts it between chunks when set. */
int bgi_snapshot_download(bg_filter *f, uint64_t deadline_ns, int64_t chunk_bytes, atomic_int *stop,
                          bgi_snapshot **out, bgi_err *err);
/* Starts / stops the background refresher of f (snapshot.c); under g->admin_mu. */
int bgi_refresher_start(bgi_guard *g, bg_filter *f, int64_t interval_ms);
void bgi_refresher_stop(bgi_guard *g);

#endif
